"""One training run from its settings to a clean stop: the settings resolved and checked
(``prepare_run``: every refusal happens before any process starts), signal handling, the error
classes a user can fix (each becomes one "[MAIN] Error: ..." line), the final checkpoint and
replay save, the learning curve, and what the run left (``TrainResult``). The loop itself is
``Trainer``."""
from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
from pathlib import Path

from config_optimized import Config, ConfigError

from ..transport import shm
from ..engine.bf16_probe import probe_this_cpu
from ..actors.ray_errors import RayClusterError
from ..agent.learner import TrainingDiverged, flush_denormals
from ..records import checkpoint as ckpt
from ..records.files import (BEST_EVAL_NAME, BEST_NAME, CHECKPOINT_NAME, FLAG_VIDEO_NAME, METRICS_NAME,
                             RECORD_NAME, WEIGHTS_BEST_FIRST)
from ..records.metrics import read_jsonl
from ..records.resume import check_resume
from ..records.run_folder import RUNS_ROOT, clear_run, link_latest, resolve_run_dir
from ..records.runlog import RunLog
from ..records.tracking import TrackingError
from ..records import replay_snapshot as snapshot
from ..settings.check import validate
from ..settings.hardware import Hardware
from ..settings.layers import resolve_config
from ..actors.supervisor import CollectorsFailed
from .trainer import Trainer


@dataclasses.dataclass
class TrainResult:
    """What a finished run left: its folder, its checkpoints and its last epoch's metrics."""
    run_dir: Path
    checkpoint: Path | None      # the final (or last good) checkpoint; None if none was ever written
    best: Path | None            # best.pt: the best last-20 mean score at an epoch end; None before 20 games
    metrics: dict | None         # the last metrics.jsonl row
    stop_reason: str             # total_steps, time_limit, target_score, finished (--stop-at-flag), SIGINT, SIGTERM or error
    exit_code: int               # 0: stopped as asked; 1: a failure, logged as one "[MAIN] Error: ..." line


def prepare_run(args):
    """Config layers, run folder, validation and the resume checks: every refusal happens here,
    before any process starts. ``args``: the parsed command line or a dict of Config fields (plus
    ``config``). Returns the config, the hardware and the notes for the run log."""
    flush_denormals()  # before the bf16 probe's torch threads: they inherit it (the trainer checks)
    probed = probe_this_cpu()  # the learner's bf16 speed on this CPU, once per CPU model: the profile's precision follows it
    res = resolve_config(args)
    had_root = RUNS_ROOT.exists()
    cfg, hw = resolve_run_dir(res.cfg), res.hw
    try:
        return cfg, hw, checked_notes(cfg, hw, res, probed)
    except ConfigError:
        if not res.cfg.run.run_dir and not res.cfg.run.resume:  # the new folder resolve_run_dir made is left empty,
            made = [Path(cfg.run.run_dir)] + ([RUNS_ROOT] if not had_root else [])  # and runs/ where it made that too
            for folder in made:
                with contextlib.suppress(OSError):
                    folder.rmdir()
        raise


def checked_notes(cfg: Config, hw: Hardware, res, probed: str) -> list[str]:
    """The refusals of ``prepare_run`` past the folder (settings, the Ray head, the resume), and
    the run log's notes where none applies."""
    notes = [f"Warning: {w}" for w in validate(cfg, hw)] + res.notes + ([probed] if probed else [])
    if cfg.collectors.ray_collectors:  # the head must answer before anything starts
        from ..distributed.cluster import check_reachable

        try:
            check_reachable(cfg.collectors.ray_address)
        except RayClusterError as e:
            raise ConfigError(f"--ray-address {cfg.collectors.ray_address!r}: {e}") from None
    if cfg.run.resume:
        check_resume(cfg)
        if res.changes is None:
            notes.append(f"Resumed run: {cfg.run.run_dir} has no {RECORD_NAME} (it predates run records); its "
                         "settings come from this command line")
        else:
            notes += [f"Resumed run: {c}" for c in res.changes] or ["Resumed run: every setting as it was saved"]
    return notes


def open_run(cfg: Config) -> RunLog:
    """The run's folder (cleared with --overwrite, linked as runs/latest) and its log, which holds
    the folder for the run's life. Raises ConfigError where another run is training in it: the
    log is opened before --overwrite clears anything, so a live run's files are never removed."""
    run_dir = Path(cfg.run.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    log = RunLog(run_dir, cfg.total_steps)
    if cfg.run.overwrite and not cfg.run.resume:
        clear_run(run_dir)
        log.clear()
    link_latest(run_dir)
    return log


# Failures a user can fix; each ends the run with one "[MAIN] Error: ..." line and exit code 1.
# The first two mean the weights cannot be trusted or were never loaded: no final save.
NO_SAVE_ERRORS = (TrainingDiverged, ckpt.CheckpointError, snapshot.ReplayFileError)
RUN_ERRORS = (*NO_SAVE_ERRORS, CollectorsFailed, shm.ShmError, TrackingError, RayClusterError)


def train_run(cfg: Config, hw: Hardware, notes: list[str] | tuple = ()) -> TrainResult:
    """Train until total_steps, the time limit, the target score, Ctrl-C or SIGTERM; always a
    clean shutdown (children joined, shared memory unlinked) and, unless the weights diverged, a
    final checkpoint. A failure is logged as one "[MAIN] Error: ..." line naming the problem and
    the fix, and gives exit code 1."""
    t_start = time.monotonic()  # time to score is what a user waits: set-up counts
    log = open_run(cfg)
    signals = {"trainer": None, "first": None}

    def on_signal(signum, frame):
        name = signal.Signals(signum).name
        signals["first"] = signals["first"] or name
        if signals["trainer"] is not None:
            signals["trainer"].stop_reason = name
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            trainer = Trainer(cfg, hw, log, notes, t_start)
        except RUN_ERRORS as e:  # the constructor released what it had made
            log(f"[MAIN] Error: {_message(e)}")
            return _result(Path(cfg.run.run_dir), None, 1)
        signals["trainer"] = trainer
        trainer.stop_reason = signals["first"]  # a Ctrl-C during set-up stops the run before it trains
        code = _train_and_stop(trainer, log)
        return _result(Path(cfg.run.run_dir), trainer.stop_reason, code)
    finally:
        log.close()
        for s, h in old.items():
            signal.signal(s, h)


def _message(e: BaseException) -> str:
    return f"training diverged: {e}" if isinstance(e, TrainingDiverged) else str(e)


def _train_and_stop(trainer: Trainer, log: RunLog) -> int:
    """Run the loop, then stop in order: workers joined, the games they finished recorded, the
    final checkpoint and replay saved (unless the weights cannot be trusted), resources freed."""
    cfg, parts = trainer.cfg, trainer.parts
    run_dir = Path(cfg.run.run_dir)
    code, error, keep_weights = 1, None, True
    try:
        code = trainer.train()
    except RUN_ERRORS as e:
        error, keep_weights = _message(e), not isinstance(e, NO_SAVE_ERRORS)
    finally:
        # metrics.jsonl is complete once the loop has ended: the curve is drawn while the workers
        # stop and the checkpoint and replay are written (matplotlib's import and the drawing took
        # ~2 s of a stop on a 2-core AMD EPYC family 23 model 1; zlib lets go of the GIL)
        curve = CurveDrawing(run_dir)
        try:
            trainer.stop_workers()  # and books the games the stopped collectors finished
            if error:
                log(f"[MAIN] Error: {error}")
            last = run_dir / CHECKPOINT_NAME
            if keep_weights and not trainer.learner.is_finite():
                keep_weights = False
                log("[MAIN] Error: the weights or BatchNorm statistics are not finite; not saving them")
                code = 1
            if keep_weights:
                try:
                    last = parts.save_checkpoint()
                    if cfg.run.save_replay:
                        parts.save_replay()
                except (ckpt.CheckpointError, snapshot.ReplayFileError) as e:
                    log(f"[MAIN] Error: {e}")
                    code = 1
            else:
                log(f"[MAIN] No final checkpoint was written; {last} holds the last good one")
            if trainer.stop_reason == "finished":
                _film_a_flag(run_dir, cfg.seed, log)
            log(f"[MAIN] Stopped ({trainer.stop_reason or 'error'}) at {parts.agent_steps():,} agent steps, "
                f"{trainer.learner.updates:,} updates; checkpoint {last}")
        finally:
            curve.finish(log)  # joined on every path: no half-written PNG is left behind
            steps, wall_s = parts.agent_steps(), parts.books.wall_s(time.monotonic())
            trainer.release()
            log(last_word(run_dir, trainer.stop_reason or "error", steps, wall_s))
    return code


def last_word(run_dir: Path, stop_reason: str, agent_steps: int, wall_s: float) -> str:
    """The run's last line: how it ended, what its kept weights reached on fresh games, where they
    are and how to watch them. The weights --eval and a user pick first: best_eval.pt (chosen by
    evaluations on fresh games), else best.pt (by training games), else the last checkpoint."""
    ended = f"[MAIN] Done ({stop_reason}) at {agent_steps:,} agent steps, {wall_s / 60:.1f} min. "
    for name in WEIGHTS_BEST_FIRST:
        path = run_dir / name
        if path.is_file():
            break
    else:
        return ended + "No weights were kept."
    try:
        best = ckpt.load(path).get("best") or {}
    except ckpt.CheckpointError as e:
        return ended + f"The kept weights {path} cannot be read: {e}"
    if name == BEST_EVAL_NAME and best.get("plays"):
        from ..evaluation.evaluate import greedy_said

        ways = " and ".join(f"{p['flags']}/{p['games']} " + (greedy_said(p) if p["epsilon"] == 0 else f"at {p['epsilon']:g}")
                            for p in best["plays"])
        reached = f"the flag in {ways}" + (" fresh games" if any(not p.get("every_start") for p in best["plays"]) else "")
    elif name == BEST_EVAL_NAME and best:
        reached = f"mean {best.get('metric', 'score')} {best['score']:.2f} over {best.get('games', '?')} fresh games"
    elif name == BEST_NAME and best:
        reached = f"mean {best['metric']} {best['score']:.2f} of the last training games"
    else:
        reached = "not yet judged on fresh games"
    at = best.get("agent_steps")
    return (ended + f"Kept weights {path}" + (f" (from {at:,} agent steps)" if at is not None else "")
            + f": {reached}. Watch them: python mario_rl_optimized.py --eval {path} --video agent.mp4")


def _result(run_dir: Path, stop_reason: str | None, code: int) -> TrainResult:
    last = run_dir / CHECKPOINT_NAME
    best = run_dir / BEST_NAME
    rows = read_jsonl(run_dir / METRICS_NAME) if (run_dir / METRICS_NAME).exists() else []
    return TrainResult(run_dir, last if last.exists() else None, best if best.exists() else None,
                       rows[-1] if rows else None, stop_reason or "error", code)


FLAG_TRIES = 5  # greedy games filmed, each on another seed, until one reaches the flag


def _film_a_flag(run_dir: Path, seed: int, log: RunLog) -> None:
    """An MP4 of the kept weights (best_eval.pt) reaching the flag, beside them: greedy games on
    other seeds until one does, at most FLAG_TRIES."""
    from ..evaluation.evaluate import evaluate

    path = run_dir / FLAG_VIDEO_NAME
    try:
        for i in range(FLAG_TRIES):
            res = evaluate(run_dir / BEST_EVAL_NAME, 1, path, seed=seed + 7_777 + i, epsilon=0.0, log=lambda *_: None)
            if res.flags and res.flags[0]:
                log(f"[MAIN] A flag run of the kept weights: {path} (distance {res.distances[0]:.0f})")
                return
        log(f"[MAIN] The kept weights did not reach the flag in {FLAG_TRIES} filmed greedy games; the last is {path}")
    except Exception as e:  # a video must never cost the run its clean shutdown
        log(f"[MAIN] Could not film the kept weights: {type(e).__name__}: {e}")


class CurveDrawing:
    """The learning curve of ``run_dir`` drawn on a thread of its own from its construction;
    ``finish`` waits for it and logs where it is, or why it could not be drawn."""

    def __init__(self, run_dir: Path):
        self.path, self.error = None, None
        self.thread = threading.Thread(target=self._draw, args=(run_dir,), name="learning-curve")
        self.thread.start()

    def _draw(self, run_dir: Path) -> None:
        from ..records.curves import plot_learning_curve

        try:
            self.path = plot_learning_curve(run_dir)
        except Exception as e:  # a plot must never cost the run its clean shutdown
            self.error = e

    def finish(self, log: RunLog) -> None:
        self.thread.join()
        if self.error is None:
            log(f"[MAIN] Learning curve {self.path}")
        else:
            log(f"[MAIN] Could not draw the learning curve: {type(self.error).__name__}: {self.error}")
