"""The learner process's loop: trains while the collectors play, holding the replay ratio
(samples trained per agent step) fixed both ways.

Reads top to bottom like CleanRL's loop: each turn checks the run's health, paces the
collectors, and trains one update when the agent steps have paid for it (else waits for them);
after an update, weights go to the collectors and checkpoints to disk as their intervals pass.
The parts are built in ``wiring.build_pipeline``; the games, epochs and checkpoints are kept by
``records.books.RunBooks``.
"""
from __future__ import annotations

import time

from config_optimized import Config

from ..agent.learner import lr_schedule
from ..records.epoch_stats import EpochWindow
from ..records.runlog import RunLog
from ..settings.hardware import Hardware
from .wiring import Pipeline, build_pipeline

HEALTH_EVERY_S = 0.5  # collectors, threads, games, evaluations and the time limit are looked at this often


class Trainer:
    """Builds the run (``build_pipeline``: every part, or none left behind if one fails);
    ``train`` runs the loop; ``stop_workers`` and ``release`` end it."""

    def __init__(self, cfg: Config, hw: Hardware, log: RunLog, notes: list[str] | tuple = (),
                 t_start: float | None = None):
        """``log``: the run folder's log (``run.open_run``); ``t_start``: when the user started
        the run (time.monotonic()), so set-up counts in the run's wall clock."""
        self.cfg, self.log = cfg, log
        self.stop_reason: str | None = None  # set by the loop, or by a signal handler
        self.parts: Pipeline = build_pipeline(cfg, hw, log, list(notes),
                                              time.monotonic() if t_start is None else t_start)
        self.learner, self.replay = self.parts.learner, self.parts.replay
        self.samples_trained_run = 0  # samples trained by this process (the replay ratio counts from its start)
        self.update_s_total = 0.0     # seconds inside learner.update, for outside observers (benchmark)
        self.learning = False         # the first update was due: the prefetch thread runs
        self.settling = False         # --total-steps reached: the collectors wait while the learner trains what they paid for

    def agent_steps(self) -> int:
        return self.parts.agent_steps()

    # ------------------------------------------------------------------ the loop
    def train(self) -> int:
        p, every_epoch = self.parts, self.cfg.run.epoch_steps
        p.start()
        next_epoch = (p.agent_steps() // every_epoch + 1) * every_epoch
        window = EpochWindow(p.mark(time.monotonic()))
        last_health = 0.0
        while self.stop_reason is None:
            if time.monotonic() - last_health > HEALTH_EVERY_S:
                last_health = time.monotonic()
                self.check_health(last_health)
                if self.stop_reason is not None:
                    break
            steps = p.agent_steps()
            self.pace(steps)
            if steps >= next_epoch:
                now = time.monotonic()
                p.end_epoch(window, now)
                window, next_epoch = EpochWindow(p.mark(now)), next_epoch + every_epoch
            due = p.ratio.update_due(steps, self.samples_trained_run)
            if self.settling and not due:
                self.stop("total_steps")
            elif not due or not self.batch_ready(steps):
                wait(window, 0.001 if not due else 0.005)
            else:
                self.update(window, steps)
        return 0

    # ------------------------------------------------------------------ its steps
    def check_health(self, now: float) -> None:
        """Collectors alive (restarted within budget), the consolidation thread well, the games
        booked (the target score), evaluations polled and started, the time limit."""
        p, run = self.parts, self.cfg.run
        p.collectors.check()
        if p.thread_share is not None:
            p.thread_share.poll()
        if p.consolidator.error:
            raise RuntimeError("consolidation thread failed") from p.consolidator.error
        if p.take_games():
            self.stop("target_score")
        p.evals.poll()
        if p.evals.finished and run.stop_at_flag and self.stop_reason is None:
            self.log(f"[MAIN] Finished: the kept weights reached the flag in {p.evals.last_flags} fresh games; "
                     "stopping (--stop-at-flag false trains on)")
            self.stop("finished")
        elif self.stop_reason is None and p.evals.due(p.agent_steps()) and self.learner.updates:
            p.evals.start(p.save_checkpoint, p.agent_steps())
        if run.time_limit and p.books.wall_s(now) >= run.time_limit * 60:
            self.stop("time_limit")

    def stop(self, reason: str) -> None:
        """End the loop for ``reason``; the first reason stands (a target reached in the same look
        as the time limit ran out is a target reached, and the log and result say so)."""
        if self.stop_reason is None:
            self.stop_reason = reason

    def pace(self, steps: int) -> None:
        """Tell the collectors the agent steps and how far ahead of the learner they may play;
        at --total-steps, hold them while the learner trains what their head start paid for (a
        run stopped there would have trained fewer samples per agent step than its ratio says)."""
        p = self.parts
        p.control.global_steps = steps
        self.log.progress(steps)
        if steps >= self.cfg.total_steps and not self.settling:
            self.settling = True
            owed = p.ratio.owed_updates(steps, self.samples_trained_run)
            if owed:
                self.log(f"[MAIN] {steps:,} agent steps played (--total-steps {self.cfg.total_steps:,}); "
                         f"training the {owed:,} updates they paid for before stopping")
        p.set_allowance(steps, self.samples_trained_run, hold=self.settling)

    def batch_ready(self, steps: int) -> bool:
        """The prefetch thread has a batch. It starts with the first due update; until the replay
        can serve a batch (a small --learning-starts) the loop waits, its checks still running."""
        prefetcher = self.parts.prefetcher
        if not self.learning:
            self.learning = True
            prefetcher.start()
            at = self.parts.engine.compile_ahead
            self.log(f"[MAIN] Learning starts at {steps:,} agent steps" + (
                f"; at update {at:,} the learner compiles its loss "
                "(torch.compile, --compile), and training pauses while it does (23 s on a quiet 2-core "
                "AMD EPYC Zen 5)" if at is not None else ""))
        if prefetcher.ready.is_set():
            return True
        prefetcher.check()
        return False

    def update(self, window: EpochWindow, steps: int) -> None:
        """One update of ``grad_accum_steps`` batches (the engine compiles the loss first when due),
        then what follows an update: priorities, weights to the collectors, a checkpoint."""
        p, cfg, learner = self.parts, self.cfg, self.learner
        t0 = time.perf_counter()
        batches = [p.prefetcher.get() for _ in range(cfg.learner.grad_accum_steps)]
        t1 = time.perf_counter()
        if cfg.learner.lr_decay_steps:
            learner.set_lr(lr_schedule(cfg.learner, steps))
        out = p.engine.update(batches)  # compiles the loss first where that is due: it says so in the log
        t2 = time.perf_counter()
        window.wait_batch_s += t1 - t0
        window.update_s += t2 - t1
        self.update_s_total += t2 - t1
        if out["skipped"]:
            # Nothing was trained (a non-finite loss): the replay ratio, the weight pushes and
            # the checkpoints wait for an update that happened.
            window.skipped += 1
            return
        for b, td in zip(batches, out["td_abs"]):
            self.replay.update_priorities(b["stream"], b["pos"], td, b["seq"])
        self.replay.anneal(steps / cfg.total_steps)
        spu = cfg.learner.effective_batch
        self.samples_trained_run += spu
        p.books.samples_trained += spu
        window.add_update(out)
        window.sample_ages += [b["age"] for b in batches]
        if learner.updates % cfg.collectors.model_update_frequency == 0:
            p.publish()
        if learner.updates % cfg.run.checkpoint_interval == 0:
            p.save_checkpoint()

    # ------------------------------------------------------------------ the end
    def stop_workers(self) -> None:
        """Stop and join every collector, then the threads, so the counters are final; then book
        the games the stopped collectors finished."""
        planned = self.stop_reason
        # a signal during the wait overwrites stop_reason (run.py's handler): then stop waiting
        self.parts.stop_workers(planned, interrupted=lambda: self.stop_reason != planned)
        self.parts.take_games()

    def release(self) -> None:
        self.parts.release()


def wait(window: EpochWindow, seconds: float) -> None:
    """The loop has nothing to train yet: sleep, counted as the learner's idle time."""
    t0 = time.perf_counter()
    time.sleep(seconds)
    window.idle_s += time.perf_counter() - t0
