"""The learner process's parts, built from the config in one place (``build_pipeline``), in the
order a run needs them: the children's process start (the fork server imports for them while
the rest is built), the learner and the replay, where the run stood (``--resume``), its
books, the periodic evaluation, then the shared memory, the collector processes and the threads
between them. ``Pipeline`` holds the parts and answers what the trainer's loop asks of them
together; ``stop_workers`` and ``release`` end them."""
from __future__ import annotations

import random
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from config_optimized import Config, LearnerConfig
from models.weights import flat_size
from wrappers import count_actions
from wrappers.families import game_family
from wrappers.registry import greedy_games_are_starts

from ..transport import shm
from ..replay.consolidator import Consolidator
from ..transport.control import ControlBlock
from ..actors.no_ray import NoRayCollectors
from ..evaluation.periodic_eval import PeriodicEval, run_eval_plan
from ..engine.engine import Engine
from ..agent.learner import Learner, flush_denormals, lr_schedule
from ..replay.prefetch import Prefetcher
from ..actors.process_start import child_context, start_method_here
from ..replay.ratio import ReplayRatio, shares
from ..records.books import RunBooks
from ..records.counters import RunCounters
from ..records.epoch_stats import EpochWindow, PathMark
from ..records.files import CHECKPOINT_NAME, VIDEOS_DIR
from ..records.resume import resume, save_replay
from ..replay import Replay
from ..transport.ring import Ring
from ..settings.hardware import Hardware, learner_threads, resolve_device, shared_cores_warning
from ..actors.supervisor import Collectors
from ..engine.thread_share import ThreadShare

PLANNED_STOPS = ("total_steps", "time_limit", "target_score", "finished")  # a stop that lets a running evaluation finish


@dataclass
class Pipeline:
    cfg: Config
    device: torch.device
    threads: int                    # the learner's torch threads
    n_actions: int
    learner: Learner
    engine: Engine                  # runs the learner's update: eagerly, compiled, or as a CUDA graph
    replay: Replay
    books: RunBooks
    evals: PeriodicEval
    control: ControlBlock           # weights, agent steps and the stop flag, shared with the collectors
    rings: list                     # one Ring per collector process
    collectors: Collectors          # the collector processes and their supervisor
    remote: object                  # RayCollectors with --ray-collectors, else NoRayCollectors
    consolidator: Consolidator      # thread: rings -> replay
    prefetcher: Prefetcher          # thread: replay -> batches on the learner's device
    ratio: ReplayRatio              # samples trained per agent step, both ways
    thread_share: ThreadShare | None = None  # the learner's threads, following the cores other work leaves

    # ------------------------------------------------------------------ what the loop asks
    def agent_steps(self) -> int:
        """Agent steps played: the ones that reached the replay, and the ones a full ring dropped."""
        return self.books.start.agent_steps + self.consolidator.agent_steps + self.consolidator.dropped_steps()

    def blocks(self) -> list:
        """Each collector's counters and allowance: the rings' blocks, then the Ray collectors'."""
        return [r.block for r in self.rings] + [s.block for s in self.remote.sources]

    def collector_time_ns(self) -> dict:
        """Collector time by activity, summed over collectors (env, act, ring_wait, throttle)."""
        per = [b.timings_ns() for b in self.blocks()]
        return {k: sum(t[k] for t in per) for k in ("env", "act", "ring_wait", "throttle")}

    def mark(self, t: float) -> PathMark:
        return PathMark(t, self.agent_steps(), self.learner.updates, self.collector_time_ns(), self.consolidator.busy_s,
                        self.consolidator.drops(), sum(b.cuts for b in self.blocks()))

    def set_allowance(self, steps: int, samples_trained_run: int, hold: bool = False) -> None:
        """Hold collectors back when the learner falls behind the replay ratio (or all of them,
        ``hold``): the headroom is the collectors' together, each gets its share, the ones behind first."""
        headroom = 0 if hold else self.ratio.allowance(steps, samples_trained_run, self.consolidator.pending())
        blocks = self.blocks()
        for block, share in zip(blocks, shares(headroom, [b.played for b in blocks])):
            block.allow(share)

    def publish(self) -> None:
        publish(self.learner, self.control, self.remote)

    def take_games(self) -> bool:
        """Book the games finished since the last call; True once the score has reached --target-score."""
        fin = self.consolidator.finished
        return self.books.add_games([fin.popleft() for _ in range(len(fin))], self.learner.updates)

    def end_epoch(self, window: EpochWindow, t: float) -> None:
        self.take_games()
        # other runs on the machine now (a glob of /dev/shm, once an epoch): the metrics say which
        # epochs' speed figures were a share of the machine, so reports need not trust a note
        self.books.end_epoch(window, self.mark(t), self.collectors.launches, self.evals.best, self.evals.last_flags,
                             len(shm.live_runs()))
        self.consolidator.epoch_end()  # its next [PROCESSOR] line follows the epoch's lines

    def save_checkpoint(self, name: str = CHECKPOINT_NAME, best: dict | None = None) -> Path:
        steps = self.agent_steps()
        # the collectors' head start: a resume trains these updates first (the ratio's start)
        owed = self.ratio.owed_updates(steps, self.books.samples_trained - self.books.start.samples_trained)
        return self.books.save_checkpoint(steps, self.collectors.launches, self.evals.best, name, best, owed)

    def save_replay(self) -> None:
        save_replay(Path(self.cfg.run.run_dir), self.cfg, self.replay, self.agent_steps(), self.books.log)

    # ------------------------------------------------------------------ start and end
    def start(self) -> None:
        self.consolidator.start()
        self.remote.start()
        if self.cfg.run.resume:
            self.evals.resume_pending()  # an evaluation the last stop cut short plays again first

    def stop_workers(self, stop_reason: str | None, interrupted=lambda: False) -> None:
        """Stop and join every collector, then the threads, so the counters are final; at a planned
        stop, wait for the evaluation under way unless ``interrupted()`` (a Ctrl-C meanwhile)."""
        self.control.request_stop()
        self.collectors.join()
        self.remote.stop()
        for t in (self.consolidator, self.prefetcher):
            if t.is_alive():
                t.stop_event.set()
                t.join(timeout=5)
        if stop_reason in PLANNED_STOPS:
            self.evals.finish(interrupted)  # a planned stop keeps the evaluation under way
        self.evals.close()

    def release(self) -> None:
        """Unlink every shared-memory segment and close the run's files (not the log: its owner's)."""
        for ring in self.rings:
            ring.close()
        self.control.close()
        self.collectors.close()
        self.remote.close()
        self.books.close()


def publish(learner: Learner, control: ControlBlock, remote) -> None:
    """The learner's weights to every collector: shared memory, and the object store for Ray's;
    weights that are not finite go nowhere (``Learner.require_finite``)."""
    learner.require_finite()
    control.publish(learner.model)
    remote.publish(learner.model)


def build_pipeline(cfg: Config, hw: Hardware, log, notes: list[str], t_start: float) -> Pipeline:
    """Every part of the run, each handed the parts it uses. A part that fails releases the ones
    made before it (processes stopped, shared memory unlinked, files closed) and the error goes on.
    ``log``: the run folder's log; ``t_start``: when the user started the run (time.monotonic())."""
    col, rep, lrn, run = cfg.collectors, cfg.replay, cfg.learner, cfg.run
    for note in notes:
        log(f"[MAIN] {note}")
    stale = shm.remove_stale_segments()
    if stale:
        log(f"[MAIN] Removed {len(stale)} shared-memory segments left by a dead run: {', '.join(stale[:4])}")
    # first: the fork server imports torch and the envs for the children while the learner is built
    method, why = start_method_here(col.start_method)
    if why:  # the collectors, the evaluator and the first line then say and do what the children do
        log(f"[MAIN] Note: {why}")
        col.start_method = method
    children = child_context(col.start_method)
    device = torch.device(resolve_device(cfg.device, hw))
    if not flush_denormals() and device.type == "cpu":
        log("[MAIN] Warning: denormal floats are not flushed to zero on every torch thread of the learner (torch "
            "ran parallel work in this process before the run, or the CPU cannot): its updates may slow down as "
            "Adam's state decays; start the run in a fresh process")
    threads = learner_threads(lrn.learner_threads, col.num_collectors, hw)
    torch.set_num_threads(threads)
    if device.type == "cpu" and (crowded := shared_cores_warning(len(shm.live_runs()), threads, col.num_collectors,
                                                                 hw.cores)):
        log(crowded)
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    n_actions = count_actions(cfg.env, cfg.env_options)  # also proves the env builds here
    learner = Learner(lrn, cfg.env_options.frame_stack, n_actions, device)
    replay = Replay.from_config(cfg)
    # where the run stood before this process, and the agent steps into the replay before training (again)
    start, refill = (resume(Path(run.run_dir), cfg, n_actions, learner, replay, log) if run.resume
                     else (RunCounters(), lrn.learning_starts))
    with ExitStack() as undo:
        books = RunBooks(cfg, hw, log, notes, start, t_start, learner, replay, n_actions)
        undo.callback(books.close)
        every = run.eval_interval
        eval_metric, eval_epsilons = run_eval_plan(cfg)
        evals = PeriodicEval(Path(run.run_dir), every, run.eval_episodes, eval_epsilons, eval_metric,
                             cfg.seed + 7_919, log, start.best_eval,
                             (start.agent_steps // every + 1) * every if every else 0, run.confirm_episodes, children,
                             Path(run.run_dir) / VIDEOS_DIR if run.capture_video else None,
                             run.confirm_every_start and greedy_games_are_starts(cfg.env, cfg.env_options))
        undo.callback(evals.close)
        n_weights = flat_size(learner.model)
        control = ControlBlock.create(n_weights)
        undo.callback(control.close)
        control.global_steps = start.agent_steps
        remote = NoRayCollectors()
        if col.ray_collectors:  # first: a cluster that cannot take them stops the run before any process starts
            from ..distributed.intake import RayCollectors

            remote = RayCollectors(cfg, n_weights, lambda: control.global_steps, log, start.launches)
            undo.callback(remote.close)
            undo.callback(remote.stop)
        publish(learner, control, remote)  # collectors act only with the learner's weights
        rings = []
        family = game_family(cfg.env)  # its record fields in every ring, its statistics of each game
        for i in range(col.num_collectors):  # one by one: each made is released if a later one fails
            rings.append(Ring.create(f"ring{i}", col.ring_capacity, extras=family.fields))
            undo.callback(rings[-1].close)
        collectors = Collectors(children, cfg, [r.name for r in rings], control.name,
                                n_weights, log, start.launches, remote)
        undo.callback(collectors.close)
        undo.callback(collectors.join)
        undo.callback(control.request_stop)
        consolidator = Consolidator(rings, replay, rep.consolidation_batch, log, run.consolidation_log_interval, remote,
                                    family.game_stats)
        prefetcher = Prefetcher(replay, learner, lrn.batch_size, rep.prefetch_batches)
        # a resumed run's ratio starts where its updates owed are still owed: the learner trains
        # them first, so a stop and a resume train as many samples per agent step as no stop
        owed_steps = start.owed_updates * lrn.effective_batch / lrn.replay_ratio
        ratio = ReplayRatio(lrn.replay_ratio, lrn.effective_batch, start.agent_steps + refill - owed_steps,
                            col.env_streams)
        undo.pop_all()  # every part is made: from here the trainer's stop_workers and release end them
    log(f"[MAIN] {cfg.env}: {n_actions} actions, device {device}, profile {cfg.profile}, "
        f"{col.num_collectors} collector(s) x {col.envs_per_collector} envs on {col.env_threads} thread(s) "
        f"({col.start_method}), acting in {'bf16' if col.act_bf16 else 'fp32'}"
        f"{' on cuda' if col.collector_device == 'cuda' else ''}, "
        f"rule {learner.rule.label}{f', judged on its weights averaged at {lrn.weight_average:g}' if lrn.weight_average else ''}, batch {lrn.batch_size} x {lrn.grad_accum_steps}, replay ratio {lrn.replay_ratio:g}, "
        f"lr {lr_words(lrn)}, amp {learner.amp_dtype}, compile {lrn.compile}, learner threads {threads}, "
        f"replay {rep.buffer_size:,} x {replay.storage.bytes_per_transition():,.0f} B"
        f"{f', stacks shifted sideways up to {rep.augment_shift} px' if rep.augment_shift else ''}, "
        f"collector seeds {', '.join(map(str, collectors.seeds))}")
    # made last, in the learner's thread: torch.set_num_threads sets the team of the thread that calls it
    share = ThreadShare(threads, hw.cores, torch.set_num_threads, log) \
        if device.type == "cpu" and lrn.follow_free_cores and threads > 1 else None
    return Pipeline(cfg, device, threads, n_actions, learner, Engine(learner, log), replay, books, evals, control,
                    rings, collectors,
                    remote, consolidator, prefetcher, ratio, share)


def lr_words(c: LearnerConfig) -> str:
    """The learning rate as the start-up line gives it: ``1e-04``, or its schedule (as
    ``lr_schedule`` computes it: one that cannot fall is a constant rate)."""
    end_step = c.lr_decay_start + c.lr_decay_steps
    end = lr_schedule(c, end_step)
    if end == c.lr:
        return f"{c.lr:g}"
    return f"{c.lr:g}, falling linearly to {end:g} from {c.lr_decay_start:,} to {end_step:,} agent steps"
