"""The learner process: starts the collectors, runs the consolidation and prefetch threads and
trains, holding the replay ratio (samples trained per agent step) fixed both ways.

Reads top to bottom like CleanRL's loop: set up, warm up the replay, then per iteration either
train one update (if the replay ratio says one is due) or wait for data, publishing weights,
syncing the target net, logging epochs and checkpointing as counters pass their intervals.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import random
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from config_optimized import Config, profile_reason
from models.weights import flat_size
from wrappers import count_actions
from wrappers.registry import is_mario

from . import shm
from .collector import epsilon_schedule
from .consolidator import Consolidator
from .control import ControlBlock
from .distributed.no_ray import NoRayCollectors
from .evaluation.periodic_eval import PeriodicEval
from .learner import Learner, TrainingDiverged, flush_denormals
from .prefetch import Prefetcher
from .ratio import ReplayRatio, shares
from .records import checkpoint as ckpt
from .records.episodes import SCORE_WINDOW, ScoreTracker, episode_row
from .records.epoch_stats import EpochEnd, EpochWindow, epoch_report, eta
from .records.files import BEST_NAME, CHECKPOINT_NAME, EPISODES_NAME
from .records.metrics import MetricsLog
from .records.record import record_markdown, run_record, write_record
from .records.resume import RunCounters, resume, save_replay
from .records.runlog import RunLog
from .records.tracking import Tracker
from .replay import Replay
from .ring import Ring
from .settings.hardware import Hardware, learner_threads, resolve_device
from .supervisor import Collectors

if TYPE_CHECKING:  # Ray is imported only by runs with Ray collectors
    from .distributed.intake import RayCollectors


class Trainer:
    """The learner process's loop and the components it drives. The constructor builds the whole
    run (learner, replay, shared memory, collector processes, threads) or, failing, releases
    what it made and raises; ``train`` runs the loop; ``stop_workers`` and ``release`` end it."""

    def __init__(self, cfg: Config, hw: Hardware, log: RunLog, notes: list[str] | tuple = (),
                 t_start: float | None = None):
        """``log``: the run folder's log (``run.open_run``); ``t_start``: when the user started
        the run (time.monotonic()), so set-up counts in the run's wall clock."""
        self.t_start = time.monotonic() if t_start is None else t_start
        self.cfg, self.hw, self.log = cfg, hw, log
        self.notes = list(notes)  # what the command line resolved to (warnings, resume changes), for the log and record
        self.run_dir = Path(cfg.run.run_dir)
        self.stop_reason: str | None = None
        # What release() frees, None (or empty) until made.
        self.rings: list[Ring] = []
        self.control: ControlBlock | None = None
        self.collectors: Collectors | None = None
        self.remote: RayCollectors | NoRayCollectors = NoRayCollectors()  # Ray's only with --ray-collectors
        self.consolidator: Consolidator | None = None
        self.prefetcher: Prefetcher | None = None
        self.evals: PeriodicEval | None = None
        self.metrics: MetricsLog | None = None
        self.tracker: Tracker | None = None
        self.episodes_file = None
        try:
            self._build()
        except BaseException:
            self.stop_workers()
            self.release()
            raise

    # ------------------------------------------------------------------ set-up
    def _build(self) -> None:
        cfg = self.cfg
        col, rep, lrn, run = cfg.collectors, cfg.replay, cfg.learner, cfg.run
        for note in self.notes:
            self.log(f"[MAIN] {note}")
        stale = shm.remove_stale_segments()
        if stale:
            self.log(f"[MAIN] Removed {len(stale)} shared-memory segments left by a dead run: {', '.join(stale[:4])}")
        self.device = torch.device(resolve_device(cfg.device, self.hw))
        if not flush_denormals() and self.device.type == "cpu":
            self.log("[MAIN] Warning: denormal floats are not flushed to zero on every torch thread of the "
                     "learner (torch ran parallel work in this process before the run, or the CPU cannot): "
                     "its updates may slow down as Adam's state decays; start the run in a fresh process")
        threads = learner_threads(lrn.learner_threads, col.num_collectors, self.hw)
        torch.set_num_threads(threads)
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.n_actions = count_actions(cfg.env, cfg.env_options)  # also proves the env builds here
        self.learner = Learner(cfg.learner, cfg.env_options.frame_stack, self.n_actions, self.device)
        self.replay = Replay(rep.buffer_size, col.total_collectors, col.envs_per_collector, cfg.env_options.frame_stack,
                             rep.n_step, rep.gamma, rep.prioritized, rep.per_alpha, rep.per_beta, seed=cfg.seed)
        # where the run stood before this process, and the agent steps into the replay before training (again)
        before, self.refill_steps = (resume(self.run_dir, cfg, self.n_actions, self.learner, self.replay, self.log)
                                     if run.resume else (RunCounters(), lrn.learning_starts))
        self.base_steps, self.base_episodes, self.wall_offset = before.env_steps, before.episodes, before.wall_s
        self.samples_trained, self.epoch, self.launches = before.samples_trained, before.epoch, before.launches
        self.best_score, self.best_eval = before.best_score, before.best_eval
        self.record = {**run_record(cfg, self.hw, cfg.profile, profile_reason(cfg.profile, self.hw, cfg.env)),
                       "notes": self.notes}
        self.tracker = Tracker(self.run_dir, run.wandb_project, run.wandb_entity, self.record) if run.track else None
        self.metrics = MetricsLog(self.run_dir, run.tensorboard)
        write_record(self.run_dir, self.record)
        self.metrics.text("run_record", record_markdown(self.record))
        self.episodes_file = open(self.run_dir / EPISODES_NAME, "a", buffering=1)
        every = run.eval_interval
        self.evals = PeriodicEval(self.run_dir, every, run.eval_episodes, run.eval_epsilon, run.score_metric,
                                  cfg.seed + 7_919, self.log, self.best_eval,
                                  (self.base_steps // every + 1) * every if every else 0)
        self.score = ScoreTracker([] if run.target_score is None else [run.target_score], metric=run.score_metric)
        self.n_weights = flat_size(self.learner.model)
        self.control = ControlBlock.create(self.n_weights)
        self.control.global_steps = self.base_steps
        if col.ray_collectors:  # first: a cluster that cannot take them stops the run before any process starts
            from .distributed.intake import RayCollectors

            self.remote = RayCollectors(cfg, self.n_weights, lambda: self.control.global_steps, self.log, self.launches)
        self.publish()  # collectors act only with the learner's weights
        for i in range(col.num_collectors):  # one by one: release() frees the ones made if one fails
            self.rings.append(Ring.create(f"ring{i}", col.queue_capacity))
        self.collectors = Collectors(mp.get_context(col.start_method), cfg, [r.name for r in self.rings],
                                     self.control.name, self.n_weights, self.log, self.launches, self.remote)
        self.consolidator = Consolidator(self.rings, self.replay, rep.consolidation_batch, self.log,
                                         run.consolidation_log_interval, self.remote)
        self.prefetcher = Prefetcher(self.replay, self.learner, lrn.batch_size, rep.prefetch_batches)
        self.ratio = ReplayRatio(lrn.replay_ratio, lrn.effective_batch, self.base_steps + self.refill_steps,
                                 col.env_streams)
        self.samples_trained_run = 0  # samples trained by this process (the replay ratio counts from its start)
        self.update_s_total = 0.0     # seconds inside learner.update, for outside observers (benchmark)
        self.log(f"[MAIN] {cfg.env}: {self.n_actions} actions, device {self.device}, profile {cfg.profile}, "
                 f"{col.num_collectors} collector(s) x {col.envs_per_collector} envs ({col.start_method}), "
                 f"batch {lrn.batch_size} x {lrn.grad_accum_steps}, replay ratio {lrn.replay_ratio:g}, "
                 f"amp {self.learner.amp_dtype}, compile {lrn.compile}, learner threads {threads}, "
                 f"replay {rep.buffer_size:,} x {self.replay.storage.bytes_per_transition():,.0f} B, "
                 f"collector seeds {', '.join(map(str, self.collectors.seeds))}")

    def save_replay(self) -> None:
        save_replay(self.run_dir, self.cfg, self.replay, self.env_steps(), self.log)

    # ------------------------------------------------------------------ counters
    def env_steps(self) -> int:
        """Agent steps played: the ones that reached the replay, and the ones a full ring dropped."""
        return self.base_steps + self.consolidator.env_steps + self.consolidator.dropped_steps()

    def blocks(self) -> list:
        """Each collector's counters and allowance: the rings' blocks, then the Ray collectors'."""
        return [r.block for r in self.rings] + [s.block for s in self.remote.sources]

    def _set_allowance(self, steps: int, hold: bool = False) -> None:
        """Hold collectors back when the learner falls behind the replay ratio (or all of them,
        ``hold``): the headroom is the collectors' together, each gets its share."""
        headroom = 0 if hold else self.ratio.allowance(steps, self.samples_trained_run, self.consolidator.pending())
        blocks = self.blocks()
        for block, share in zip(blocks, shares(headroom, len(blocks))):
            block.allow(share)

    def check_finite(self) -> None:
        """Weights that are not finite reach neither the collectors nor a checkpoint file: the run
        stops, and its last checkpoint keeps the last finite ones. The learner skips every step
        with a non-finite loss or gradient, so this guards what it cannot see (an overflowing
        optimizer step, a poisoned BatchNorm statistic) at the intervals where weights leave."""
        if not self.learner.is_finite():
            raise TrainingDiverged(f"the weights or BatchNorm statistics are not finite after update "
                                   f"{self.learner.updates:,}; neither published nor saved")

    def publish(self) -> None:
        """The learner's weights to every collector: shared memory, and the object store for Ray's."""
        self.check_finite()
        self.control.publish(self.learner.model)
        self.remote.publish(self.learner.model)

    # ------------------------------------------------------------------ main loop
    def train(self) -> int:
        cfg = self.cfg
        t_start = self.t_start  # time to score is what a user waits: set-up counts
        self.consolidator.start()
        self.remote.start()
        spu = cfg.learner.effective_batch
        next_epoch = (self.env_steps() // cfg.run.epoch_steps + 1) * cfg.run.epoch_steps
        window = self._new_window(t_start)
        last_health = 0.0
        prefetch_started = False
        settling = False  # --total-steps reached: the collectors wait while the learner trains what they paid for
        while self.stop_reason is None:
            now = time.monotonic()
            if now - last_health > 0.5:
                last_health = now
                self.collectors.check()
                if self.consolidator.error:
                    raise RuntimeError("consolidation thread failed") from self.consolidator.error
                self.take_episodes()
                self.evals.poll()
                if self.evals.due(self.env_steps()) and self.learner.updates:
                    self.evals.start(self.save_checkpoint, self.env_steps())
                if cfg.run.time_limit and self.run_wall_s(now) >= cfg.run.time_limit * 60:
                    self.stop_reason = "time_limit"
                    break
            steps = self.env_steps()
            self.control.global_steps = steps
            self.log.progress(steps)
            if steps >= cfg.total_steps and not settling:
                # The collectors may run up to the ratio's slack ahead of the learner; a run that
                # stopped here would have trained fewer samples per agent step than its replay
                # ratio says (and a short resumed run none at all).
                settling = True
                owed = self.ratio.owed_updates(steps, self.samples_trained_run)
                if owed:
                    self.log(f"[MAIN] {steps:,} agent steps played (--total-steps {cfg.total_steps:,}); "
                             f"training the {owed:,} updates they paid for before stopping")
            self._set_allowance(steps, hold=settling)
            if steps >= next_epoch:
                self._log_epoch(window, steps)
                window = self._new_window(time.monotonic())
                next_epoch += cfg.run.epoch_steps
            due = self.ratio.update_due(steps, self.samples_trained_run)
            if settling and not due:
                self.stop_reason = "total_steps"
                break
            if not due:
                t0 = time.perf_counter()
                time.sleep(0.001)
                window.idle_s += time.perf_counter() - t0
                continue
            if not prefetch_started:
                self.prefetcher.start()
                prefetch_started = True
                self.log(f"[MAIN] Learning starts at {steps:,} agent steps")
            if not self.prefetcher.ready.is_set():
                # The replay cannot serve a batch yet (a small --learning-starts): wait here, where
                # the health checks and the stop conditions above keep running.
                self.prefetcher.check()
                t0 = time.perf_counter()
                time.sleep(0.005)
                window.idle_s += time.perf_counter() - t0
                continue
            t0 = time.perf_counter()
            batches = [self.prefetcher.get() for _ in range(cfg.learner.grad_accum_steps)]
            t1 = time.perf_counter()
            compiling = self.learner.compile_due()
            if compiling:
                self.learner.compile_loss()
                self.log(f"[MAIN] Compiling the learner's loss and its backward (torch.compile) at "
                         f"{self.learner.updates:,} updates; the collectors wait for it")
            out = self.learner.update(batches)
            t2 = time.perf_counter()
            if compiling and self.learner.compile_error:
                self.log(f"[MAIN] Warning: torch.compile failed ({self.learner.compile_error}); training goes on "
                         "without it (--compile false skips the attempt)")
            elif compiling:
                self.log(f"[MAIN] Compiled in {t2 - t1:.1f} s")
            window.wait_batch_s += t1 - t0
            window.update_s += t2 - t1
            self.update_s_total += t2 - t1
            if out["skipped"]:
                # Nothing was trained (a non-finite loss): the replay ratio, the weight pushes and
                # the checkpoints wait for an update that happened.
                window.skipped += 1
                continue
            if self.replay.sampler.prioritized:
                for b, td in zip(batches, out["td_abs"]):
                    self.replay.update_priorities(b["stream"], b["pos"], td.float().cpu().numpy(), b["seq"])
                self.replay.sampler.anneal(steps / cfg.total_steps)
            self.samples_trained_run += spu
            self.samples_trained += spu
            window.add_update(out)
            u = self.learner.updates
            if u % cfg.collectors.model_update_frequency == 0:
                self.publish()
            if u % cfg.run.checkpoint_interval == 0:
                self.save_checkpoint()
        return 0

    # ------------------------------------------------------------------ games and score
    def take_episodes(self) -> None:
        """Record the games finished since the last call and stop at --target-score."""
        fin = self.consolidator.finished
        while fin:
            ep = fin.popleft()
            wall_s = self.run_wall_s(ep.t)
            row = episode_row(ep._replace(env_steps=self.base_steps + ep.env_steps), wall_s,
                              self.learner.updates, self.samples_trained)
            self.episodes_file.write(json.dumps(row) + "\n")
            for m in self.score.add_row(row):
                self.log(f"[MAIN] Score: mean {self.cfg.run.score_metric} of the last {self.score.window} games reached "
                         f"{m.value:g} at {m.minutes:.1f} min, {m.env_steps:,} agent steps, {m.updates:,} updates")
                self.stop_reason = "target_score"

    # ------------------------------------------------------------------ logs
    def collector_time_ns(self) -> dict:
        """Collector time by activity, summed over collectors (env, act, queue_wait, throttle)."""
        per = [b.timings_ns() for b in self.blocks()]
        return {k: sum(t[k] for t in per) for k in ("env", "act", "queue_wait", "throttle")}

    def _new_window(self, t: float) -> EpochWindow:
        return EpochWindow(t, self.env_steps(), self.learner.updates, self.collector_time_ns(), self.consolidator.busy_s)

    def run_wall_s(self, t: float) -> float:
        """The run's wall clock at monotonic time ``t``: a resumed run's earlier sessions included."""
        return self.wall_offset + t - self.t_start

    def epsilon(self, steps: int) -> float:
        return epsilon_schedule(self.cfg.collectors, steps)

    def _log_epoch(self, window: EpochWindow, steps: int) -> None:
        cfg = self.cfg
        self.epoch += 1
        now = time.monotonic()
        games = list(self.consolidator.episodes)[-SCORE_WINDOW:]
        sps = (steps - window.env_steps) / max(now - window.t, 1e-9)
        end = EpochEnd(self.epoch, now, steps, self.learner.updates, self.collector_time_ns(), self.consolidator.busy_s,
                       games, self.base_episodes + self.consolidator.episodes_total, self.epsilon(steps),
                       len(self.replay), self.consolidator.drops(), self.samples_trained, cfg.learner.effective_batch,
                       is_mario(cfg.env), self.run_wall_s(now),
                       eta(cfg.total_steps, steps, sps, cfg.run.time_limit, self.run_wall_s(now)))
        lines, row = epoch_report(window, end)
        for line in lines:
            self.log(line)
        self.metrics.write(row)
        score = row.get("distance_mean") if cfg.run.score_metric == "distance" else row["return_mean"]
        if score is not None and len(games) == SCORE_WINDOW and score > self.best_score:
            self._save_best(score, cfg.run.score_metric, steps)

    def _save_best(self, score: float, metric: str, steps: int) -> None:
        """best.pt: the weights whenever the mean of the last 20 training games beats every
        earlier epoch's (free: it uses the games training played anyway)."""
        self.best_score = score
        path = self.save_checkpoint(BEST_NAME, best={"metric": metric, "score": score, "env_steps": steps,
                                                              "updates": self.learner.updates})
        self.log(f"[MAIN] Best so far: mean {metric} {score:.2f} of the last {SCORE_WINDOW} games at {steps:,} "
                 f"agent steps; weights in {path}")

    # ------------------------------------------------------------------ checkpoints
    def save_checkpoint(self, name: str = CHECKPOINT_NAME, best: dict | None = None) -> Path:
        self.check_finite()  # periodic, best and evaluation saves; the final save checks first itself
        path = self.run_dir / name
        steps = self.env_steps()
        counters = {"env_steps": steps, "episodes": self.base_episodes + self.consolidator.episodes_total,
                    "samples_trained": self.samples_trained, "epoch": self.epoch,
                    "collector_launches": self.collectors.launches, "best_score": self.best_score,
                    "best_eval": self.evals.best, "best_metric": self.cfg.run.score_metric,
                    "wall_s": self.run_wall_s(time.monotonic()), "epsilon": self.epsilon(steps)}
        ckpt.save(path, ckpt.training_state(self.cfg, self.n_actions, self.learner.state_dict(), counters,
                                            self.replay.sampler.rng.bit_generator.state, best))
        return path

    # ------------------------------------------------------------------ shutdown
    def stop_workers(self) -> None:
        """Stop and join every collector, then the threads, so the counters are final."""
        if self.control is not None:
            self.control.request_stop()
        if self.collectors is not None:
            self.collectors.join()
        self.remote.stop()
        for t in (self.consolidator, self.prefetcher):
            if t is not None and t.is_alive():
                t.stop_event.set()
                t.join(timeout=5)
        if self.evals is not None:
            if self.stop_reason in ("total_steps", "time_limit", "target_score"):
                self.evals.finish(wait_s=120)  # a planned stop keeps the evaluation under way
            self.evals.close()

    def release(self) -> None:
        """Unlink every shared-memory segment and close the run's files (not the log: its owner's)."""
        for ring in self.rings:
            ring.close()
        if self.control is not None:
            self.control.close()
        if self.collectors is not None:
            self.collectors.close()
        self.remote.close()
        for f in (self.metrics, self.tracker, self.episodes_file):
            if f is not None:
                f.close()
        self.rings, self.control, self.collectors, self.remote = [], None, None, NoRayCollectors()
        self.metrics = self.tracker = self.episodes_file = None
