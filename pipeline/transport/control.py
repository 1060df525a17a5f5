"""The learner-to-collector control block in shared memory: a stop flag, the global step count
(collectors derive epsilon from it) and the policy weights behind a seqlock.

Why a seqlock and not a Queue: weights go to every collector every ``model_update_frequency``
updates; pickling a state_dict per collector costs milliseconds of learner time each push. Here
the learner writes once into shared memory and collectors copy when the version changes. The
version is odd while a write is in progress; a reader that sees it change under its copy
retries at its next step.
"""
from __future__ import annotations

import numpy as np
import torch

from models.weights import write_flat

from . import shm

STOP, GLOBAL_STEPS, VERSION = 0, 8, 16  # int64 words, each on its own cache line
HEADER_WORDS = 32


class ControlBlock:
    def __init__(self, seg, n_weights: int, owner: bool):
        self.seg, self.n_weights, self.owner = seg, n_weights, owner
        self.header = np.ndarray((HEADER_WORDS,), np.int64, seg.buf, 0)
        self.weights = torch.from_numpy(np.ndarray((n_weights,), np.float32, seg.buf, HEADER_WORDS * 8))
        self._seen = -1

    @classmethod
    def create(cls, n_weights: int) -> "ControlBlock":
        block = cls(shm.create("ctrl", HEADER_WORDS * 8 + 4 * n_weights), n_weights, owner=True)
        block.header[:] = 0
        return block

    @classmethod
    def attach(cls, name: str, n_weights: int) -> "ControlBlock":
        return cls(shm.attach(name), n_weights, owner=False)

    @property
    def name(self) -> str:
        return self.seg.name

    @property
    def stop(self) -> bool:
        return bool(self.header[STOP])

    @property
    def global_steps(self) -> int:
        """The run's agent steps, as the learner counts them: collectors take epsilon from it."""
        return int(self.header[GLOBAL_STEPS])

    @global_steps.setter
    def global_steps(self, steps: int) -> None:
        self.header[GLOBAL_STEPS] = steps

    def request_stop(self) -> None:
        self.header[STOP] = 1

    def publish(self, model: torch.nn.Module) -> None:
        self.header[VERSION] += 1
        write_flat(model, self.weights)
        self.header[VERSION] += 1

    def new_weights(self, scratch: torch.Tensor) -> bool:
        """Copy weights published since the last call into ``scratch`` (flat, ``models.weights``);
        False when there are none, or a write overlapped the copy (the next call retries)."""
        v1 = int(self.header[VERSION])
        if v1 == self._seen or v1 % 2 or v1 == 0:
            return False
        scratch.copy_(self.weights)
        if int(self.header[VERSION]) != v1:
            return False
        self._seen = v1
        return True

    def close(self) -> None:
        self.header = self.weights = None
        shm.close_segment(self.seg, self.owner)
