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
    start: float          # agent steps (of the whole run) from which the ratio counts: where learning starts
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


def shares(headroom: int, played: list[int]) -> list[int]:
    """``headroom`` agent steps shared out between the collectors that have ``played`` so many
    steps each. Each collector plays its allowance between two of the trainer's calls (an update,
    a checkpoint), so the whole headroom to every one would let N of them run N times ahead.

    Half goes out in equal parts, the rest to the collectors furthest behind first, at most
    2 x headroom / N each. Equal parts alone let the first to wake spend the headroom: when the
    learner sets the pace, one update frees a few steps (8 at ratio 4), each collector's part
    rounds to a step or none, and the parts left unplayed are taken back at the next call. On a
    2-core machine 8 collectors x 2 envs then played 5,069, 4,850, 2,248, 2,300, 80, 18, 0 and 15
    steps per env in 25,000 agent steps: half the streams, and half the replay, stayed empty.
    The equal half keeps a collector that has stopped (a restart) from holding the others back."""
    n = len(played)
    if not n:
        return []
    headroom = max(0, headroom)
    base = headroom // (2 * n)
    out = [base] * n
    rest, cap = headroom - base * n, max(1, -(-2 * headroom // n))
    for i in sorted(range(n), key=lambda i: (played[i], i)):
        if rest <= 0:
            break
        give = min(cap, rest)
        out[i] += give
        rest -= give
    return out
