"""The words a collector and the learner share in the head of the collector's ring, typed.

Each word has one writer. The collector counts what it does (steps played, time in the env, in
acting, waiting for room, held back); the learner writes one word, the allowance, that holds
the collector back when training falls behind the replay ratio. Aligned int64 stores are atomic
on the platforms the ring supports, so neither side takes a lock.

Step counts: ``played`` is this collector's own count of agent steps (pushed or dropped), and
the allowance is a value of it. The run's step count (epsilon, epochs, the replay ratio) is the
learner's: steps that reached the replay plus the ones a full ring dropped (``Consolidator``).
"""
from __future__ import annotations

import time

import numpy as np

# int64 word indices; 0 and 8 are the ring's head and tail, each on its own cache line, and the
# learner's word (ALLOWED) sits apart from the collector's counters.
ALLOWED = 16
DROPS, RING_WAIT_NS, THROTTLE_NS, PLAYED, DROPPED_STEPS, ENV_NS, ACT_NS, CUTS = 24, 25, 26, 27, 28, 29, 30, 31
BLOCK_WORDS = CUTS + 1  # a block kept apart from any ring (a Ray collector's) needs no more


class _Word:
    """One int64 word of the block, read and written as a Python int."""

    def __init__(self, index: int, doc: str):
        self.index, self.__doc__ = index, doc

    def __get__(self, block, owner=None):
        return self if block is None else int(block.words[self.index])

    def __set__(self, block, value: int) -> None:
        block.words[self.index] = value


class CollectorBlock:
    played = _Word(PLAYED, "agent steps this collector played: pushed into its ring or dropped (collector)")
    allowed = _Word(ALLOWED, "the value of ``played`` the collector may reach before it waits (learner)")
    drops = _Word(DROPS, "records a full ring dropped (collector, --drop-when-full)")
    dropped_steps = _Word(DROPPED_STEPS, "agent steps among the dropped records (collector)")
    ring_wait_ns = _Word(RING_WAIT_NS, "time spent waiting for room in the ring (collector)")
    throttle_ns = _Word(THROTTLE_NS, "time spent held back by the allowance (collector)")
    env_ns = _Word(ENV_NS, "time spent stepping the envs (collector)")
    act_ns = _Word(ACT_NS, "time spent choosing actions (collector)")
    # (Mario's stall rule, --stall-steps: wrappers/families.py)
    cuts = _Word(CUTS, "learning episodes the game family's rule ended (collector)")

    def __init__(self, words: np.ndarray):
        self.words = words  # the ring's int64 header

    @classmethod
    def local(cls) -> CollectorBlock:
        """A block in this process's memory, for a collector without a ring (a Ray collector's,
        on its actor and on the learner's side)."""
        return cls(np.zeros(BLOCK_WORDS, np.int64))

    # ------------------------------------------------------------------ learner side
    def allow(self, steps: int) -> None:
        """Let the collector play ``steps`` more agent steps than it has so far."""
        self.allowed = self.played + steps

    # ------------------------------------------------------------------ collector side
    def held_back(self) -> bool:
        return self.played >= self.allowed

    def wait_for_allowance(self, give_up) -> None:
        """Wait (counted as throttled time) until the learner allows more steps or ``give_up()``."""
        t0 = time.perf_counter_ns()
        while self.held_back() and not give_up():
            time.sleep(0.001)
        self.throttle_ns += time.perf_counter_ns() - t0

    def timings_ns(self) -> dict[str, int]:
        return {"env": self.env_ns, "act": self.act_ns, "ring_wait": self.ring_wait_ns, "throttle": self.throttle_ns}
