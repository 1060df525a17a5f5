"""Whole games as the learner sees them, and the score they add up to.

The score is the mean raw return (or a statistic a game family adds, such as Mario's distance)
of the last ``window`` whole games: the figure users and papers quote. ``ScoreTracker`` follows
it game by game and records when it first reaches each milestone, in wall-clock minutes, agent
steps, updates and samples trained: what time to score means. The trainer uses it to stop at a target, and the
time-to-score benchmark replays a run's ``episodes.jsonl`` through it, so both count alike.
"""
from __future__ import annotations

import collections
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path

from ..transport.games import Episode
from .files import EPISODES_NAME
from .metrics import read_jsonl

SCORE_WINDOW = 20


@dataclass(frozen=True)
class Milestone:
    value: float
    minutes: float
    agent_steps: int
    updates: int
    samples_trained: int
    games: int


class ScoreTracker:
    """The last ``window`` games: their rolling mean score, the first crossing of each
    milestone, and the means an epoch's log line shows. The one place the last-20 mean is taken.

    A milestone counts only once ``window`` games are in the mean, so one lucky early game does
    not count as a score."""

    def __init__(self, milestones=(), window: int = SCORE_WINDOW, metric: str = "return"):
        # every family's statistics, whichever wrote the rows (a resumed run's, a benchmark's);
        # loaded here, not with the module: reading a run's games needs no env
        from wrappers.families import GAME_KEYS, SCORE_METRICS

        metrics = ("return", *SCORE_METRICS)
        if metric not in metrics:
            raise ValueError(f"score metric {metric!r}: choose one of {metrics}")
        self.game_keys = GAME_KEYS
        self.milestones = sorted(float(m) for m in milestones)
        self.window, self.metric = window, metric
        self.recent: collections.deque = collections.deque(maxlen=window)  # episodes.jsonl rows
        self.reached: dict[float, Milestone] = {}
        self.games = 0
        self.best: float | None = None

    @property
    def mean(self) -> float | None:
        """The score: the mean of the last ``window`` games, None before there are that many."""
        return self.window_means()[self.metric] if len(self.recent) == self.window else None

    def window_means(self) -> dict[str, float | None]:
        """Mean return, length and each game family's statistic (Mario's distance and flag rate)
        of the games in the window, however many (None where there are none, or no game reports
        the field)."""
        def mean(key):
            values = [float(r[key]) for r in self.recent if key in r]
            return statistics.fmean(values) if values else None
        return {"return": mean("return"), "length": mean("length"), **{k: mean(k) for k in self.game_keys}}

    def add_row(self, row: dict) -> list[Milestone]:
        """One whole game, as its ``episodes.jsonl`` row (see ``episode_row``); returns the
        milestones it made the rolling mean reach."""
        self.recent.append(row)
        self.games += 1
        mean = self.mean
        if mean is None:
            return []
        self.best = mean if self.best is None else max(self.best, mean)
        new = [Milestone(m, row["wall_s"] / 60, row["agent_steps"], row["updates"], row["samples_trained"], self.games)
               for m in self.milestones if m not in self.reached and mean >= m]
        for m in new:
            self.reached[m.value] = m
        return new

    def replay_rows(self, rows: list[dict]) -> None:
        """Games booked before this process (a resumed run's ``episodes.jsonl``): the window, the
        best mean and the milestones they reached, which are not reported again. Without them a
        resumed run's epoch lines and curve would average only the few games since the resume,
        and a target could count only after 20 new games."""
        for row in rows:
            self.add_row(row)

    def summary(self) -> dict:
        return {"metric": self.metric, "window": self.window, "games": self.games, "best_mean": self.best,
                "last_mean": self.mean,
                "milestones": [asdict(self.reached[m]) if m in self.reached else {"value": m, "minutes": None}
                               for m in self.milestones]}


def episode_row(ep: Episode, wall_s: float, updates: int, samples_trained: int) -> dict:
    """The ``episodes.jsonl`` row of one game: what it scored, and when in the run it ended."""
    return {"wall_s": round(wall_s, 3), "agent_steps": ep.agent_steps, "updates": updates,
            "samples_trained": samples_trained, "return": ep.ret, "length": ep.length, **ep.stats}


def read_episodes(run_dir: str | Path) -> list[dict]:
    """Rows of a run's episodes.jsonl."""
    return read_jsonl(Path(run_dir) / EPISODES_NAME)


def score_run(rows: list[dict], milestones=(), window: int = SCORE_WINDOW, metric: str = "return") -> tuple[dict, list]:
    """Replay a run's games through a tracker: (summary, [(minutes, steps, rolling mean)])."""
    tracker = ScoreTracker(milestones, window, metric)
    curve = []
    for row in rows:
        tracker.add_row(row)
        if tracker.mean is not None:
            curve.append((row["wall_s"] / 60, row["agent_steps"], tracker.mean))
    return tracker.summary(), curve
