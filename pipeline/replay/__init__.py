"""Replay in three pieces, after TorchRL: storage (frames once per env stream), writer (ring
records into streams) and sampler (uniform or prioritized); ``Replay`` assembles batches."""
from __future__ import annotations

import numpy as np

from .sampler import PrioritizedSampler, UniformSampler
from .storage import Storage
from .writer import StreamWriter


class Replay:
    def __init__(self, capacity: int, num_collectors: int, envs_per_collector: int, frame_stack: int,
                 n_step: int, gamma: float, prioritized: bool = False, alpha: float = 0.6, beta: float = 0.4,
                 seed: int = 0, frame_shape=(84, 84)):
        self.storage = Storage(capacity, num_collectors * envs_per_collector, frame_shape)
        self.sampler = (PrioritizedSampler(self.storage, alpha, beta, seed) if prioritized
                        else UniformSampler(self.storage, seed))
        self.writer = StreamWriter(self.storage, envs_per_collector,
                                   on_write=self.sampler.on_write if prioritized else None)
        self.frame_stack, self.n_step, self.gamma = frame_stack, n_step, gamma

    def __len__(self) -> int:
        return len(self.storage)

    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        st = self.storage
        with st.lock:
            s, p, weights = self.sampler.sample(batch_size, self.frame_stack, self.n_step)
            ret, terminated, boot, disc = st.n_step(s, p, self.n_step, self.gamma)
            obs = st.frames[s[:, None], st.stack_indices(s, p, self.frame_stack)]
            next_obs = st.frames[s[:, None], st.stack_indices(s, boot, self.frame_stack)]
            action = st.action[s, p].astype(np.int64)
            seq = st.sequence(s, p)
        return {"obs": obs, "action": action, "return": ret, "discount": np.where(terminated, 0.0, disc).astype(np.float32),
                "next_obs": next_obs, "weights": weights, "stream": s, "pos": p, "seq": seq}

    def update_priorities(self, stream, pos, td_abs, seq=None) -> None:
        """Priorities from a trained batch's TD errors. ``seq``: the batch's ``"seq"``. The writer
        goes on while the learner trains, so a sampled slot may hold a newer record by now; that
        record keeps the priority it was written with, not the TD error of the one it replaced."""
        if self.sampler.prioritized:
            with self.storage.lock:
                if seq is not None:
                    same = self.storage.sequence(stream, pos) == seq
                    stream, pos, td_abs = stream[same], pos[same], td_abs[same]
                self.sampler.update(stream, pos, td_abs)


__all__ = ["Replay", "Storage", "StreamWriter", "UniformSampler", "PrioritizedSampler"]
