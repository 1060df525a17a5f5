"""Samplers: which stored transitions a batch is made of (uniform or prioritized)."""
from __future__ import annotations

import numpy as np

from ..transport.transition import LAST
from .storage import Storage


class UniformSampler:
    """Every stored transition alike. Has the prioritized sampler's hooks, as no-ops, so the
    replay and the trainer treat both the same."""
    prioritized = False

    def __init__(self, storage: Storage, seed: int = 0):
        self.storage = storage
        self.rng = np.random.default_rng(seed)

    def _draw(self, n: int):
        st = self.storage
        filled = np.minimum(st.written, st.stream_len)
        cum = np.cumsum(filled)
        flat = self.rng.integers(0, cum[-1], n)
        s = np.searchsorted(cum, flat, side="right")
        p = flat - (cum[s] - filled[s])
        return s, p

    def sample(self, n: int, frame_stack: int, n_step: int):
        """(streams, positions, importance weights or None); the storage lock must be held."""
        s, p = self._draw(n)
        for _ in range(100):
            bad = ~self.storage.valid(s, p, frame_stack, n_step)
            if not bad.any():
                return s, p, None
            s[bad], p[bad] = self._draw(int(bad.sum()))
        raise RuntimeError("replay has too few valid transitions to sample from")

    def on_write(self, s, p, flags) -> None:
        """New records were written at (streams ``s``, positions ``p``); the storage lock is held."""

    def update(self, s, p, td_abs, seq=None) -> None:
        """A trained batch's TD errors at (``s``, ``p``): nothing to do for uniform sampling."""

    def anneal(self, progress: float) -> None:
        """Where the run is (0..1): nothing to do for uniform sampling."""


class SumTree:
    """Array sum-tree over all storage slots; updates and prefix-sum searches are vectorised
    over a batch, one tree level per numpy op."""

    def __init__(self, size: int):
        self.size = 1 << (size - 1).bit_length()
        self.tree = np.zeros(2 * self.size, np.float64)

    def set(self, idx: np.ndarray, values: np.ndarray) -> None:
        i = idx + self.size
        self.tree[i] = values
        i = np.unique(i // 2)
        while i[0] >= 1:
            self.tree[i] = self.tree[2 * i] + self.tree[2 * i + 1]
            if i[0] == 1:
                break
            i = np.unique(i // 2)

    def find(self, mass: np.ndarray) -> np.ndarray:
        i = np.ones(len(mass), np.int64)
        while i[0] < self.size:
            left = self.tree[2 * i]
            go_right = mass >= left
            mass = np.where(go_right, mass - left, mass)
            i = 2 * i + go_right
        return i - self.size

    @property
    def total(self) -> float:
        return float(self.tree[1])


class PrioritizedSampler(UniformSampler):
    prioritized = True

    def __init__(self, storage: Storage, alpha: float, beta: float, seed: int = 0):
        super().__init__(storage, seed)
        self.alpha, self.beta0 = alpha, beta
        self.beta = beta
        self.tree = SumTree(storage.capacity)
        self.max_priority = 1.0

    def anneal(self, progress: float) -> None:
        """Importance-sampling exponent for ``progress`` (0..1) of the run: linear from its
        start value to 1 at the end, as Schaul et al. (2016) anneal it."""
        self.beta = self.beta0 + (1.0 - self.beta0) * min(1.0, max(0.0, progress))

    def on_write(self, s, p, flags) -> None:
        flat = s * self.storage.stream_len + p
        pri = np.where(flags & LAST, 0.0, self.max_priority ** self.alpha)
        self.tree.set(flat, pri)

    def _draw(self, n: int):
        total = self.tree.total
        mass = (np.arange(n) + self.rng.random(n)) * (total / n)  # stratified
        flat = np.minimum(self.tree.find(mass), self.storage.capacity - 1)
        return flat // self.storage.stream_len, flat % self.storage.stream_len

    def sample(self, n: int, frame_stack: int, n_step: int):
        s, p, _ = super().sample(n, frame_stack, n_step)
        flat = s * self.storage.stream_len + p
        prob = self.tree.tree[flat + self.tree.size] / max(self.tree.total, 1e-12)
        w = (len(self.storage) * np.maximum(prob, 1e-12)) ** (-self.beta)
        return s, p, (w / w.max()).astype(np.float32)

    def update(self, s, p, td_abs, seq=None) -> None:
        """New priorities from a trained batch's TD errors. ``seq``: the batch's ``"seq"``. The
        writer goes on while the learner trains, so a sampled slot may hold a newer record by now;
        that record keeps the priority it was written with, not the TD error of the one it replaced."""
        if hasattr(td_abs, "cpu"):  # a tensor on the learner's device
            td_abs = td_abs.float().cpu().numpy()
        with self.storage.lock:
            if seq is not None:
                same = self.storage.sequence(s, p) == seq
                s, p, td_abs = s[same], p[same], td_abs[same]
            if not len(s):  # every slot of the batch was rewritten since it was sampled
                return
            pri = np.abs(td_abs) + 1e-6
            self.max_priority = max(self.max_priority, float(pri.max()))
            self.tree.set(s * self.storage.stream_len + p, pri ** self.alpha)
