"""The learner process: starts the collectors, runs the consolidation and prefetch threads and
trains, holding the replay ratio (samples trained per agent step) fixed both ways.

Reads top to bottom like CleanRL's loop: set up, warm up the replay, then per iteration either
train one update (if the replay ratio says one is due) or wait for data, publishing weights,
syncing the target net, logging epochs and checkpointing as counters pass their intervals.
"""
from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import random
import signal
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from config_optimized import Config, Hardware, profile_reason, resolve_device
from models.weights import flat_size
from wrappers.registry import is_mario

from . import checkpoint as ckpt
from . import shm
from .collector import _epsilon_schedule
from .consolidator import Consolidator
from .episodes import EPISODES_NAME, SCORE_WINDOW, ScoreTracker, episode_row
from .control import GLOBAL_STEPS, UPDATES, ControlBlock
from .learner import Learner, TrainingDiverged
from .metrics import METRICS_NAME, MetricsLog, read_jsonl
from .periodic_eval import PeriodicEval
from .prefetch import Prefetcher
from .ratio import ReplayRatio
from .record import record_markdown, run_record, write_record
from .replay import Replay, snapshot
from .ring import ACT_NS, ALLOWED, ENV_STEPS, STEP_NS, THROTTLE_NS, WAIT_NS, Ring
from .run_folder import clear_run, link_latest
from .runlog import RunLog
from .supervisor import Collectors, CollectorsFailed
from .tracking import Tracker, TrackingError


def probe_env(cfg: Config) -> int:
    """Number of actions, from one env built in this process (also proves the env builds)."""
    from wrappers import make_env

    env = make_env(cfg.env, cfg.env_options())
    n = int(env.action_space.n)
    env.close()
    return n


class Trainer:
    def __init__(self, cfg: Config, hw: Hardware, notes: list[str] | tuple = ()):
        self.cfg, self.hw = cfg, hw
        self.notes = list(notes)  # what the command line resolved to (warnings, resume changes), for the log and record
        self.run_dir = Path(cfg.run_dir)
        self.stop_reason: str | None = None
        self.collectors: Collectors | None = None
        self.rings: list[Ring] = []
        self.control: ControlBlock | None = None
        self.launches = 0  # collector starts before this process (a resumed run's): seeds each start apart

    # ------------------------------------------------------------------ set-up
    def _setup(self) -> None:
        cfg = self.cfg
        if cfg.overwrite and not cfg.resume:
            clear_run(self.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        link_latest(self.run_dir)
        self.log = RunLog(self.run_dir, cfg.total_steps)
        for note in self.notes:
            self.log(f"[MAIN] {note}")
        stale = shm.remove_stale_segments()
        if stale:
            self.log(f"[MAIN] Removed {len(stale)} shared-memory segments left by a dead run: {', '.join(stale[:4])}")
        self.device = torch.device(resolve_device(cfg.device, self.hw))
        threads = cfg.learner_threads or max(1, self.hw.cores - cfg.num_collectors)
        torch.set_num_threads(threads)
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.n_actions = probe_env(cfg)
        self.learner = Learner(cfg, cfg.frame_stack, self.n_actions, self.device)
        self.replay = Replay(cfg.buffer_size, cfg.num_collectors, cfg.envs_per_collector, cfg.frame_stack,
                             cfg.n_step, cfg.gamma, cfg.prioritized, cfg.per_alpha, cfg.per_beta, seed=cfg.seed)
        self.base_steps = 0       # agent steps done before this process (resume)
        self.base_episodes = 0
        self.samples_trained = 0
        self.wall_offset = 0.0
        self.epoch = 0
        self.refill_steps = cfg.learning_starts  # agent steps into the replay before training (again)
        self.best_score = float("-inf")  # best mean of the last 20 games at an epoch end (best.pt)
        self.best_eval = float("-inf")   # best --eval-interval evaluation (best_eval.pt)
        if cfg.resume:
            self._resume()
        self.record = {**run_record(cfg, self.hw, cfg.profile, profile_reason(cfg.profile, self.hw, cfg.env)),
                       "notes": self.notes}
        self.tracker = Tracker(self.run_dir, cfg.wandb_project, cfg.wandb_entity, self.record) if cfg.track else None
        self.metrics = MetricsLog(self.run_dir, cfg.tensorboard)
        write_record(self.run_dir, self.record)
        self.metrics.text("run_record", record_markdown(self.record))
        self.episodes_file = open(self.run_dir / EPISODES_NAME, "a", buffering=1)
        every = cfg.eval_interval
        self.evals = PeriodicEval(self.run_dir, every, cfg.eval_episodes, cfg.eval_epsilon, cfg.score_metric,
                                  cfg.seed + 7_919, self.log, self.best_eval,
                                  (self.base_steps // every + 1) * every if every else 0)
        self.score = ScoreTracker([] if cfg.target_score is None else [cfg.target_score], metric=cfg.score_metric)
        self.n_weights = flat_size(self.learner.model)
        self.control = ControlBlock.create(self.n_weights)
        self.control.header[GLOBAL_STEPS] = self.base_steps
        self.control.publish(self.learner.model)
        self.rings = [Ring.create(f"ring{i}", cfg.queue_capacity) for i in range(cfg.num_collectors)]
        self.collectors = Collectors(mp.get_context(cfg.start_method), cfg, [r.name for r in self.rings],
                                     self.control.name, self.n_weights, self.log, self.launches)
        self.consolidator = Consolidator(self.rings, self.replay, cfg.consolidation_batch, self.log,
                                         cfg.processor_log_interval)
        self.prefetcher = Prefetcher(self.replay, self.learner, cfg.batch_size, cfg.prefetch_batches)
        self.log(f"[MAIN] {cfg.env}: {self.n_actions} actions, device {self.device}, profile {cfg.profile}, "
                 f"{cfg.num_collectors} collector(s) x {cfg.envs_per_collector} envs ({cfg.start_method}), "
                 f"batch {cfg.batch_size} x {cfg.grad_accum_steps}, replay ratio {cfg.replay_ratio:g}, "
                 f"amp {self.learner.amp_dtype}, compile {cfg.compile}, learner threads {threads}, "
                 f"replay {cfg.buffer_size:,} x {self.replay.storage.bytes_per_transition():,.0f} B, "
                 f"collector seeds {', '.join(map(str, self.collectors.seeds))}")

    def _resume(self) -> None:
        path = self.run_dir / ckpt.CHECKPOINT_NAME
        state = ckpt.load(path, self.cfg.env, self.n_actions, self.cfg.frame_stack)
        self.learner.load_state_dict(state["learner"])
        c = state["counters"]
        self.base_steps, self.base_episodes = int(c["env_steps"]), int(c["episodes"])
        self.samples_trained, self.wall_offset, self.epoch = int(c["samples_trained"]), float(c["wall_s"]), int(c["epoch"])
        # A checkpoint from before launches were counted: its step count still sets the seeds apart.
        self.launches = int(c.get("collector_launches", self.base_steps))
        self.best_score = float(c.get("best_score", float("-inf")))
        self.best_eval = float(c.get("best_eval", float("-inf")))
        # checkpoints before best_metric was saved measured Mario in distance and the rest in return
        was = c.get("best_metric", "distance" if is_mario(self.cfg.env) else "return")
        if was != self.cfg.score_metric:
            self.best_score = self.best_eval = float("-inf")
            self.log(f"[MAIN] The best scores so far were in {was}, this run measures {self.cfg.score_metric}: "
                     "best.pt and best_eval.pt start over")
        rng = state["rng"]
        torch.set_rng_state(rng["torch"])
        random.setstate(rng["python"])
        self.replay.sampler.rng.bit_generator.state = rng["sampler"]
        self.log.start_at(self.base_steps)
        self.log(f"[MAIN] Resumed {path}: {self.base_steps:,} agent steps, {self.learner.updates:,} updates, "
                 f"epoch {self.epoch}")
        # A replay saved during warm-up still needs the rest of it.
        restored = self._restore_replay()
        self.refill_steps = max(0, self.cfg.learning_starts - len(self.replay)) if restored else self.cfg.learning_starts

    def _restore_replay(self) -> bool:
        """Load the replay saved with the checkpoint, if it belongs to it; say what happened."""
        path = self.run_dir / snapshot.REPLAY_NAME
        refill = f"the replay refills ({self.cfg.learning_starts:,} steps) before training goes on"
        if not self.cfg.save_replay or not path.exists():
            why = "--save-replay is off" if not self.cfg.save_replay else f"no {path}"
            self.log(f"[MAIN] {why}: {refill}")
            return False
        t0 = time.perf_counter()
        meta = snapshot.read_meta(path)
        if meta.get("env_steps") != self.base_steps:
            self.log(f"[MAIN] {path} was saved at {meta.get('env_steps'):,} agent steps, the checkpoint at "
                     f"{self.base_steps:,} (the run stopped without a clean save): {refill}")
            return False
        snapshot.load(self.replay, path, self.cfg.env, self.cfg.frame_stack)
        self.log(f"[MAIN] Replay restored from {path}: {len(self.replay):,} transitions, "
                 f"{path.stat().st_size / 2**20:,.0f} MB in {time.perf_counter() - t0:.1f} s; training goes on at once")
        return True

    def save_replay(self) -> None:
        """The replay beside the final checkpoint (writers stopped), tagged with its step count."""
        path = self.run_dir / snapshot.REPLAY_NAME
        size, took = snapshot.save(self.replay, path, {"env": self.cfg.env, "frame_stack": self.cfg.frame_stack,
                                                      "env_steps": self.env_steps()})
        self.log(f"[MAIN] Replay saved to {path}: {len(self.replay):,} transitions, {size / 2**20:,.0f} MB "
                 f"in {took:.1f} s")

    # ------------------------------------------------------------------ counters
    def env_steps(self) -> int:
        """Agent steps played: the ones that reached the replay, and the ones a full ring dropped."""
        return self.base_steps + self.consolidator.env_steps + self.consolidator.dropped_steps()

    def _set_allowance(self, steps: int) -> None:
        """Hold collectors back when the learner falls behind the replay ratio."""
        headroom = self.ratio.allowance(steps, self.samples_trained_run, self.consolidator.pending())
        for ring in self.rings:
            ring.header[ALLOWED] = ring.header[ENV_STEPS] + headroom

    # ------------------------------------------------------------------ main loop
    def train(self) -> int:
        cfg = self.cfg
        # Wall clock counts from here, set-up included: time to score is what a user waits.
        t_start = time.monotonic()
        self._setup()
        self.t_start = t_start  # set only once set-up is whole: shutdown reads it as "there is a run to save"
        self.consolidator.start()
        self.samples_trained_run = 0
        self.update_s_total = 0.0  # seconds inside learner.update, for outside observers (benchmark)
        self.ratio = ReplayRatio(cfg.replay_ratio, cfg.effective_batch, self.base_steps + self.refill_steps,
                                 cfg.num_collectors * cfg.envs_per_collector)
        spu = cfg.effective_batch
        next_epoch = (self.env_steps() // cfg.epoch_steps + 1) * cfg.epoch_steps
        acc = self._new_epoch_acc(t_start)
        last_health = 0.0
        prefetch_started = False
        while self.stop_reason is None:
            now = time.monotonic()
            if now - last_health > 0.5:
                last_health = now
                self.collectors.check()
                if self.consolidator.error:
                    raise RuntimeError("consolidation thread failed") from self.consolidator.error
                self._take_episodes(t_start)
                self.evals.poll()
                if self.evals.due(self.env_steps()) and self.learner.updates:
                    self.evals.start(lambda name: self.save_checkpoint(t_start, name), self.env_steps())
                if cfg.time_limit and now - t_start >= cfg.time_limit * 60:
                    self.stop_reason = "time_limit"
                    break
            steps = self.env_steps()
            self.control.header[GLOBAL_STEPS] = steps
            self.log.progress(steps)
            self._set_allowance(steps)
            if steps >= next_epoch:
                self._log_epoch(acc, steps, t_start)
                acc = self._new_epoch_acc(time.monotonic())
                next_epoch += cfg.epoch_steps
            if steps >= cfg.total_steps:
                self.stop_reason = "total_steps"
                break
            if not self.ratio.update_due(steps, self.samples_trained_run):
                t0 = time.perf_counter()
                time.sleep(0.001)
                acc["idle_s"] += time.perf_counter() - t0
                continue
            if not prefetch_started:
                self.prefetcher.start()
                prefetch_started = True
                self.log(f"[MAIN] Learning starts at {steps:,} agent steps")
            t0 = time.perf_counter()
            batches = [self.prefetcher.get() for _ in range(cfg.grad_accum_steps)]
            t1 = time.perf_counter()
            out = self.learner.update(batches)
            t2 = time.perf_counter()
            acc["wait_batch_s"] += t1 - t0
            acc["update_s"] += t2 - t1
            self.update_s_total += t2 - t1
            if out["skipped"]:
                # Nothing was trained (a non-finite loss): the replay ratio, the weight pushes and
                # the checkpoints wait for an update that happened.
                acc["skipped"] += 1
                continue
            if self.replay.sampler.prioritized:
                for b, td in zip(batches, out["td_abs"]):
                    self.replay.update_priorities(b["stream"], b["pos"], td.float().cpu().numpy())
                self.replay.sampler.anneal(steps / cfg.total_steps)
            self.samples_trained_run += spu
            self.samples_trained += spu
            acc["loss"].append(out["loss"])
            acc["td"].append(out["td_error"])
            acc["q"].append(out["q_mean"])
            u = self.learner.updates
            self.control.header[UPDATES] = u
            if u % cfg.model_update_frequency == 0:
                self.control.publish(self.learner.model)
            if u % cfg.checkpoint_interval == 0:
                self.save_checkpoint(t_start)
        return 0

    # ------------------------------------------------------------------ games and score
    def _take_episodes(self, t_start: float) -> None:
        """Record the games finished since the last call and stop at --target-score."""
        fin = self.consolidator.finished
        while fin:
            ep = fin.popleft()
            wall_s = self.wall_offset + ep.t - t_start
            row = episode_row(ep._replace(env_steps=self.base_steps + ep.env_steps), wall_s,
                              self.learner.updates, self.samples_trained)
            self.episodes_file.write(json.dumps(row) + "\n")
            for m in self.score.add_row(row):
                self.log(f"[MAIN] Score: mean {self.cfg.score_metric} of the last {self.score.window} games reached "
                         f"{m.value:g} at {m.minutes:.1f} min, {m.env_steps:,} agent steps, {m.updates:,} updates")
                self.stop_reason = "target_score"

    # ------------------------------------------------------------------ logs
    def _collector_ns(self) -> dict:
        h = [r.header for r in self.rings]
        return {k: int(sum(x[idx] for x in h)) for k, idx in
                (("act", ACT_NS), ("step", STEP_NS), ("wait", WAIT_NS), ("throttle", THROTTLE_NS))}

    def _new_epoch_acc(self, t: float) -> dict:
        return {"t": t, "steps": self.env_steps(), "updates": self.learner.updates, "loss": [], "td": [], "q": [],
                "idle_s": 0.0, "wait_batch_s": 0.0, "update_s": 0.0, "skipped": 0, "coll": self._collector_ns(),
                "cons_s": self.consolidator.busy_s}

    def _eta(self, steps: int, sps: float, elapsed: float) -> str:
        """Time left until --total-steps at this epoch's pace, or --time-limit if that comes first."""
        left = [(self.cfg.total_steps - steps) / sps] if sps > 0 else []
        if self.cfg.time_limit:
            left.append(self.cfg.time_limit * 60 - elapsed)
        return _hms(max(0.0, min(left))) if left else "n/a"

    def epsilon(self, steps: int) -> float:
        return _epsilon_schedule(dataclasses.asdict(self.cfg), steps)

    def _log_epoch(self, acc: dict, steps: int, t_start: float) -> None:
        cfg = self.cfg
        self.epoch += 1
        now = time.monotonic()
        dt = max(now - acc["t"], 1e-9)
        eps_stats = list(self.consolidator.episodes)[-SCORE_WINDOW:]
        ret = statistics.fmean(e.ret for e in eps_stats) if eps_stats else None
        mario = is_mario(cfg.env)
        dist = statistics.fmean(e.x_pos for e in eps_stats) if eps_stats and mario else None
        loss = statistics.fmean(acc["loss"]) if acc["loss"] else None
        td = statistics.fmean(acc["td"]) if acc["td"] else None
        q_mean = statistics.fmean(acc["q"]) if acc["q"] else None
        eps = self.epsilon(steps)
        buf = len(self.replay)
        sps = (steps - acc["steps"]) / dt
        ups = (self.learner.updates - acc["updates"]) / dt
        samples_ps = ups * cfg.effective_batch
        fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
        length = statistics.fmean(e.length for e in eps_stats) if eps_stats else None
        tail = f"Distance: {fmt(dist, '.1f')}" if mario else f"Length: {fmt(length, '.0f')}"
        self.log(f"[MAIN] Epoch {self.epoch} - Loss: {fmt(loss, '.4f')}, TD Error: {fmt(td, '.4f')}, "
                 f"Reward: {fmt(ret, '.2f')}, {tail}, Epsilon: {eps:.3f}, Buffer: {buf:,}")
        coll = self._collector_ns()
        cns = {k: (coll[k] - acc["coll"][k]) / 1e9 / max(1, cfg.num_collectors) for k in coll}
        ctot = max(sum(cns.values()), 1e-9)
        busy = acc["update_s"] / dt
        self.log(f"[MAIN] Speed - {sps:,.0f} env steps/s, {ups:,.2f} updates/s, {samples_ps:,.0f} samples/s | "
                 f"learner: update {100 * busy:.0f}%, wait-batch {100 * acc['wait_batch_s'] / dt:.0f}%, "
                 f"idle {100 * acc['idle_s'] / dt:.0f}% | consolidation {100 * (self.consolidator.busy_s - acc['cons_s']) / dt:.0f}% | "
                 f"collectors: env {100 * cns['step'] / ctot:.0f}%, act {100 * cns['act'] / ctot:.0f}%, "
                 f"queue-wait {100 * cns['wait'] / ctot:.0f}%, throttled {100 * cns['throttle'] / ctot:.0f}% | "
                 f"{time.strftime('%H:%M:%S')}, elapsed {_hms(self.wall_offset + now - t_start)}, "
                 f"ETA {self._eta(steps, sps, now - t_start)}")
        row = {"epoch": self.epoch, "env_steps": steps, "updates": self.learner.updates,
               "wall_s": round(self.wall_offset + now - t_start, 3), "loss": loss, "td_error": td, "q_mean": q_mean, "epsilon": eps,
               "return_mean": ret, "length_mean": length, "episodes": self.base_episodes + self.consolidator.episodes_total,
               "buffer": buf, "drops": self.consolidator.drops(), "env_steps_per_s": sps, "updates_per_s": ups, "samples_per_s": samples_ps,
               "samples_trained": self.samples_trained, "skipped_updates": acc["skipped"], "learner_busy": busy,
               "collector_queue_wait": cns["wait"] / ctot, "collector_throttled": cns["throttle"] / ctot}
        if mario:
            row["distance_mean"] = dist
            row["flag_rate"] = statistics.fmean(e.flag for e in eps_stats) if eps_stats else None
        self.metrics.write(row)
        score = dist if cfg.score_metric == "distance" else ret
        if score is not None and len(eps_stats) == SCORE_WINDOW and score > self.best_score:
            self._save_best(score, cfg.score_metric, steps, t_start)

    def _save_best(self, score: float, metric: str, steps: int, t_start: float) -> None:
        """best.pt: the weights whenever the mean of the last 20 training games beats every
        earlier epoch's (free: it uses the games training played anyway)."""
        self.best_score = score
        path = self.save_checkpoint(t_start, BEST_NAME, best={"metric": metric, "score": score, "env_steps": steps,
                                                              "updates": self.learner.updates})
        self.log(f"[MAIN] Best so far: mean {metric} {score:.2f} of the last {SCORE_WINDOW} games at {steps:,} "
                 f"agent steps; weights in {path}")

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, t_start: float, name: str = ckpt.CHECKPOINT_NAME, best: dict | None = None) -> Path:
        path = self.run_dir / name
        state = {
            "meta": {"env": self.cfg.env, "n_actions": self.n_actions, "frame_stack": self.cfg.frame_stack,
                     "model_arch": self.cfg.model_arch, "dueling": self.cfg.dueling, "version": 1},
            "config": dataclasses.asdict(self.cfg),
            "learner": self.learner.state_dict(),
            "counters": {"env_steps": self.env_steps(), "episodes": self.base_episodes + self.consolidator.episodes_total,
                         "samples_trained": self.samples_trained, "epoch": self.epoch,
                         "collector_launches": self.collectors.launches, "best_score": self.best_score,
                         "best_eval": self.evals.best, "best_metric": self.cfg.score_metric,
                         "wall_s": self.wall_offset + time.monotonic() - t_start,
                         "epsilon": self.epsilon(self.env_steps())},
            "rng": {"torch": torch.get_rng_state(), "python": random.getstate(),
                    "sampler": self.replay.sampler.rng.bit_generator.state},
        }
        if best is not None:
            state["best"] = best
        ckpt.save(path, state)
        return path

    # ------------------------------------------------------------------ shutdown
    def stop_workers(self) -> None:
        """Stop and join every collector, then the threads, so the counters are final."""
        if self.control is not None:
            self.control.request_stop()
        if self.collectors is not None:
            self.collectors.join()
        for t in (getattr(self, "consolidator", None), getattr(self, "prefetcher", None)):
            if t is not None and t.is_alive():
                t.stop_event.set()
                t.join(timeout=5)
        if getattr(self, "evals", None) is not None:
            if self.stop_reason in ("total_steps", "time_limit", "target_score"):
                self.evals.finish(wait_s=120)  # a planned stop keeps the evaluation under way
            self.evals.close()

    def release(self) -> None:
        """Unlink every shared-memory segment and close the run's files."""
        for ring in self.rings:
            ring.close()
        if self.control is not None:
            self.control.close()
        if self.collectors is not None:
            self.collectors.close()
        for f in (getattr(self, "metrics", None), getattr(self, "tracker", None), getattr(self, "episodes_file", None),
                  getattr(self, "log", None)):
            if f is not None:
                f.close()


BEST_NAME = "best.pt"


def _hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


@dataclasses.dataclass
class TrainResult:
    """What a finished run left: its folder, its checkpoints and its last epoch's metrics."""
    run_dir: Path
    checkpoint: Path | None      # the final (or last good) checkpoint; None if none was ever written
    best: Path | None            # best.pt: the best last-20 mean score at an epoch end; None before 20 games
    metrics: dict | None         # the last metrics.jsonl row
    stop_reason: str             # total_steps, time_limit, target_score, SIGINT, SIGTERM or error
    exit_code: int               # 0: stopped as asked; 1: a failure, logged as one "[MAIN] Error: ..." line


def run_training(cfg: Config, hw: Hardware, notes: list[str] | tuple = ()) -> int:
    """``train_run`` for the command line: its exit code."""
    return train_run(cfg, hw, notes).exit_code


def train_run(cfg: Config, hw: Hardware, notes: list[str] | tuple = ()) -> TrainResult:
    """Train until total_steps, the time limit, the target score, Ctrl-C or SIGTERM; always a
    clean shutdown (children joined, shared memory unlinked) and, unless the weights diverged, a
    final checkpoint. A failure is logged as one "[MAIN] Error: ..." line naming the problem and
    the fix, and gives exit code 1."""
    trainer = Trainer(cfg, hw, notes)

    def on_signal(signum, frame):
        trainer.stop_reason = signal.Signals(signum).name
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    code, error, keep_weights = 1, None, True
    try:
        code = trainer.train()
    except TrainingDiverged as e:
        error, keep_weights = f"training diverged: {e}", False
    except (ckpt.CheckpointError, snapshot.ReplayFileError) as e:
        error, keep_weights = str(e), False
    except (CollectorsFailed, shm.ShmError, TrackingError) as e:
        error = str(e)
    finally:
        try:
            trainer.stop_workers()
            if hasattr(trainer, "t_start"):
                trainer._take_episodes(trainer.t_start)  # the games the stopped collectors finished
            if error:
                trainer.log(f"[MAIN] Error: {error}")
            if hasattr(trainer, "t_start"):
                last = trainer.run_dir / ckpt.CHECKPOINT_NAME
                if keep_weights and not trainer.learner.is_finite():
                    keep_weights = False
                    trainer.log("[MAIN] Error: the weights or BatchNorm statistics are not finite; not saving them")
                    code = 1
                if keep_weights:
                    try:
                        last = trainer.save_checkpoint(trainer.t_start)
                        if cfg.save_replay:
                            trainer.save_replay()
                    except (ckpt.CheckpointError, snapshot.ReplayFileError) as e:
                        trainer.log(f"[MAIN] Error: {e}")
                        code = 1
                else:
                    trainer.log(f"[MAIN] No final checkpoint was written; {last} holds the last good one")
                trainer.log(f"[MAIN] Stopped ({trainer.stop_reason or 'error'}) at {trainer.env_steps():,} agent steps, "
                            f"{trainer.learner.updates:,} updates; checkpoint {last}")
                _write_curve(trainer)
        finally:
            trainer.release()
            for s, h in old.items():
                signal.signal(s, h)
    return _result(trainer, code)


def _result(trainer: Trainer, code: int) -> TrainResult:
    run_dir = trainer.run_dir
    last = run_dir / ckpt.CHECKPOINT_NAME
    best = run_dir / BEST_NAME
    rows = read_jsonl(run_dir / METRICS_NAME) if (run_dir / METRICS_NAME).exists() else []
    return TrainResult(run_dir, last if last.exists() else None, best if best.exists() else None,
                       rows[-1] if rows else None, trainer.stop_reason or "error", code)


def _write_curve(trainer: Trainer) -> None:
    from .curves import plot_learning_curve

    try:
        trainer.log(f"[MAIN] Learning curve {plot_learning_curve(trainer.run_dir)}")
    except Exception as e:  # a plot must never cost the run its clean shutdown
        trainer.log(f"[MAIN] Could not draw the learning curve: {type(e).__name__}: {e}")
