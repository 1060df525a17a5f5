"""Epoch statistics: what the learner loop gathers between two epoch ends, and the two
``[MAIN]`` lines and the metrics row it turns into.

``EpochWindow`` is filled by the trainer (one ``add_update`` per update, timers for waiting)
from one ``PathMark`` to the next;
``epoch_report`` is a pure function of the window and the counters at the epoch's end, so the
log format and the metrics' names live in one place, and what a game family adds to them in its
``GameFamily`` (``wrappers/families.py``).
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wrappers.families import GameFamily


@dataclass(frozen=True)
class PathMark:
    """Where the data path stands at one moment: an epoch window's start and its end."""
    t: float                      # time.monotonic()
    agent_steps: int                # the run's agent steps
    updates: int                  # the learner's updates
    collector_ns: dict            # collector time by activity (env, act, ring_wait, throttle), summed
    consolidation_s: float        # the consolidation thread's busy seconds
    drops: int = 0                # ring records dropped (--drop-when-full)
    cuts: int = 0                 # learning episodes the game family's rule ended, summed over collectors


@dataclass
class EpochWindow:
    start: PathMark
    losses: list = field(default_factory=list)
    td_errors: list = field(default_factory=list)
    q_means: list = field(default_factory=list)
    grad_norms: list = field(default_factory=list)  # before clipping: a spike precedes a collapse
    sample_ages: list = field(default_factory=list)  # agent steps since each batch's samples were played (mean)
    idle_s: float = 0.0           # the learner loop waiting for agent steps to pay for an update
    wait_batch_s: float = 0.0     # waiting for the prefetch thread's batch
    update_s: float = 0.0         # inside Learner.update
    skipped: int = 0              # updates skipped for a non-finite loss

    def add_update(self, out: dict) -> None:
        self.losses.append(out["loss"])
        self.td_errors.append(out["td_error"])
        self.q_means.append(out["q_mean"])
        self.grad_norms.append(out["grad_norm"])


@dataclass(frozen=True)
class EpochEnd:
    """The run's counters at an epoch's end, beside the window."""
    at: PathMark
    epoch: int
    games: dict                   # the last SCORE_WINDOW games' means (ScoreTracker.window_means)
    episodes_total: int
    epsilon: float
    buffer: int
    samples_trained: int
    batch: int                    # samples per update
    game: GameFamily              # what the game adds to the line and the row (wrappers/families.py)
    wall_s: float                 # run time so far, resumed runs included
    eta: str
    eval_summary: str | None = None  # the last --eval-interval evaluation's (Mario's flags: "9/10 greedy, 8/10 at 0.05")
    lr: float | None = None       # the learning rate now; None: the run has no schedule (--lr-decay-steps 0)
    other_runs: int = 0           # other training runs on this machine at the epoch's end: their speed figures share it
    rule_on: bool = False         # the family's rule that ends learning episodes is on: the line counts them


def _mean(values):
    values = list(values)
    return statistics.fmean(values) if values else None


def _fmt(v, f: str) -> str:
    return "n/a" if v is None else format(v, f)


def speed(seconds: float, agent_steps: int, updates: int, update_s: float, collector_ns: dict) -> dict:
    """The speed figures of a span of ``seconds`` in which the run made ``agent_steps`` agent steps
    and ``updates`` updates, the learner spent ``update_s`` in ``Learner.update`` and the
    collectors spent ``collector_ns`` by activity (env, act, ring_wait, throttle): rates, the
    learner's busy share and each activity's share of collector time."""
    seconds = max(seconds, 1e-9)
    total = max(sum(collector_ns.values()), 1e-9)
    return {"agent_steps_per_s": agent_steps / seconds, "updates_per_s": updates / seconds,
            "learner_busy": update_s / seconds, "collector_share": {k: v / total for k, v in collector_ns.items()}}


def epoch_report(w: EpochWindow, e: EpochEnd) -> tuple[list[str], dict]:
    """The epoch's two log lines and its metrics.jsonl row."""
    a, b = w.start, e.at
    dt = max(b.t - a.t, 1e-9)
    ret, length = e.games["return"], e.games["length"]
    loss, td, q_mean, grad_norm = _mean(w.losses), _mean(w.td_errors), _mean(w.q_means), _mean(w.grad_norms)
    sample_age = _mean(w.sample_ages)
    r = speed(dt, b.agent_steps - a.agent_steps, b.updates - a.updates, w.update_s,
              {k: b.collector_ns[k] - a.collector_ns[k] for k in b.collector_ns})
    sps, ups, busy, share = r["agent_steps_per_s"], r["updates_per_s"], r["learner_busy"], r["collector_share"]
    cuts = b.cuts - a.cuts
    lines = [
        f"[MAIN] Epoch {e.epoch} - Loss: {_fmt(loss, '.4f')}, TD Error: {_fmt(td, '.4f')}, "
        f"Reward: {_fmt(ret, '.2f')}, {e.game.epoch_figure(e.games)}, Epsilon: {e.epsilon:.3f}, Buffer: {e.buffer:,}"
        + (f", LR: {e.lr:.3g}" if e.lr is not None else "")
        + e.game.epoch_notes(cuts, e.rule_on, e.eval_summary),
        f"[MAIN] Speed - {sps:,.0f} agent steps/s, {ups:,.2f} updates/s, {ups * e.batch:,.0f} samples/s | "
        f"learner: update {100 * busy:.0f}%, wait-batch {100 * w.wait_batch_s / dt:.0f}%, "
        f"idle {100 * w.idle_s / dt:.0f}% | consolidation {100 * (b.consolidation_s - a.consolidation_s) / dt:.0f}% | "
        f"collectors: env {100 * share['env']:.0f}%, act {100 * share['act']:.0f}%, "
        f"ring-wait {100 * share['ring_wait']:.0f}%, throttled {100 * share['throttle']:.0f}% | "
        f"{time.strftime('%H:%M:%S')}, elapsed {hms(e.wall_s)}, ETA {e.eta}"
        + (f" | shared: {e.other_runs} other training run(s) on this machine" if e.other_runs else ""),
    ]
    row = {"epoch": e.epoch, "agent_steps": b.agent_steps, "updates": b.updates, "wall_s": round(e.wall_s, 3),
           "loss": loss, "td_error": td, "q_mean": q_mean, "grad_norm": grad_norm, "sample_age": sample_age,
           "epsilon": e.epsilon, "lr": e.lr, "return_mean": ret,
           "length_mean": length, "episodes": e.episodes_total, "buffer": e.buffer, "drops": b.drops,
           e.game.cuts_key: cuts,
           "agent_steps_per_s": sps, "updates_per_s": ups, "samples_per_s": ups * e.batch,
           "samples_trained": e.samples_trained, "skipped_updates": w.skipped, "learner_busy": busy,
           "collector_ring_wait": share["ring_wait"], "collector_throttled": share["throttle"],
           "other_runs": e.other_runs}
    row.update(e.game.epoch_row(e.games))
    return lines, row


def hms(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def trained_at_its_ratio(window_steps: int, window_updates: int, batch: int, replay_ratio: float) -> bool:
    """Whether an epoch trained throughout (at least half the samples per agent step its ratio
    asks): only such an epoch's pace tells when the run ends. An epoch of the replay's fill plays
    without training, several times faster: a Mario run's first ETA read 0:40:39 and its second,
    the first at the learning's pace, 1:10:47."""
    return window_steps > 0 and window_updates * batch >= 0.5 * replay_ratio * window_steps


def eta(total_steps: int, steps: int, steps_per_s: float, time_limit_min: float, elapsed_s: float,
        paced: bool = True) -> str:
    """Time left until total_steps at this pace, or the time limit if that comes first. Not
    ``paced`` (the epoch did not train at its ratio: the replay was filling), the pace says
    nothing yet: the time limit is an upper bound, else there is no ETA."""
    left = [(total_steps - steps) / steps_per_s] if steps_per_s > 0 and paced else []
    if time_limit_min:
        limit = max(0.0, time_limit_min * 60 - elapsed_s)
        if not left:
            return f"{hms(limit)} at most (--time-limit; the pace once learning runs tells more)"
        left.append(limit)
    if not left:
        return "n/a until learning runs" if not paced else "n/a"
    return hms(max(0.0, min(left)))
