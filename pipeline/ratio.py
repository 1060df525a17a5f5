"""Replay-ratio control: samples trained per agent step, held both ways.

The learner trains an update only when the agent steps played since learning started pay for
it (never more samples per step than the ratio), and collectors may run ahead of the learner
by a bounded head start (never fewer), all of them together. The trainer asks ``update_due``
before each update and shares ``allowance`` more steps out between the collectors (``shares``);
the benchmark waits out the head start before it measures.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReplayRatio:
    ratio: float          # samples trained per agent step
    batch: int            # samples per optimizer step (micro-batch x accumulation)
    start: int            # agent steps (of the whole run) at which learning starts
    streams: int          # envs over all collectors: one collector step plays this many

    @property
    def steps_per_update(self) -> float:
        return self.batch / self.ratio

    @property
    def slack(self) -> float:
        """Agent steps collectors may run ahead of the ratio: large enough that they rarely wait
        for the learner (two updates, four steps of every env, or 1,000 steps)."""
        return max(2 * self.steps_per_update, 4 * self.streams, 1000)

    def owed_updates(self, steps: int, samples_trained: int) -> int:
        """Updates the agent steps played have paid for and the learner has not trained yet
        (``samples_trained`` counted since ``start``)."""
        if steps < self.start:
            return 0
        return max(0, int(((steps - self.start) * self.ratio - samples_trained) // self.batch))

    def update_due(self, steps: int, samples_trained: int) -> bool:
        """Whether the agent steps played pay for one more update."""
        return self.owed_updates(steps, samples_trained) > 0

    def allowance(self, steps: int, samples_trained: int, in_flight: int) -> int:
        """Agent steps all collectors together may still play: up to ``slack`` beyond what the
        trained samples paid for (``in_flight``: steps played but not yet counted, still in the
        queues)."""
        paid = self.start if steps < self.start else self.start + samples_trained / self.ratio
        return int(max(0, paid + self.slack - steps - in_flight))


def shares(headroom: int, collectors: int) -> list[int]:
    """``headroom`` agent steps shared out between ``collectors``, as equal as whole steps allow.
    Each collector plays its allowance between two of the trainer's calls (an update, a
    checkpoint), so the whole headroom to every one would let N of them run N times ahead."""
    share, rest = divmod(max(0, headroom), max(1, collectors))
    return [share + (i < rest) for i in range(collectors)]
