"""Replay in three pieces, after TorchRL: storage (frames once per env stream), writer (ring
records into streams) and sampler (uniform or prioritized); ``Replay`` assembles batches."""
from __future__ import annotations

import numpy as np

from .augment import RandomShift
from .sampler import PrioritizedSampler, UniformSampler
from .storage import Storage
from .writer import StreamWriter


class Replay:
    """Batches of n-step transitions from its three parts: ``storage`` holds the records,
    ``writer`` puts the consolidation thread's ring records into it and tells ``sampler``,
    which picks what a batch is made of; ``shift``, where given, moves each sampled frame stack
    (``augment.RandomShift``). ``from_config`` builds the run's; ``of`` names each number, for
    tests and benchmarks that build one by hand."""

    def __init__(self, storage: Storage, sampler: UniformSampler, writer: StreamWriter, frame_stack: int,
                 n_step: int, gamma: float, n_step_cut: bool = False, shift: RandomShift | None = None):
        self.storage, self.sampler, self.writer = storage, sampler, writer
        self.frame_stack, self.n_step, self.gamma, self.n_step_cut = frame_stack, n_step, gamma, n_step_cut
        self.shift = shift

    @classmethod
    def of(cls, capacity: int, num_collectors: int, envs_per_collector: int, *, frame_stack: int = 4,
           n_step: int = 3, gamma: float = 0.99, prioritized: bool = False, alpha: float = 0.6, beta: float = 0.4,
           seed: int = 0, frame_shape=(84, 84), n_step_cut: bool = False, shift: int = 0) -> Replay:
        """``capacity`` transitions over one stream per env (``num_collectors`` x
        ``envs_per_collector``); ``prioritized``: proportional PER with ``alpha`` and ``beta``;
        ``shift``: sampled stacks moved sideways by up to that many pixels (0: as stored)."""
        storage = Storage(capacity, num_collectors * envs_per_collector, frame_shape)
        sampler = (PrioritizedSampler(storage, alpha, beta, seed) if prioritized else UniformSampler(storage, seed))
        # its own generator, so a shift does not change which records the sampler draws
        shifter = RandomShift(shift, seed + 1) if shift else None
        return cls(storage, sampler, StreamWriter(storage, envs_per_collector, sampler.on_write), frame_stack, n_step,
                   gamma, n_step_cut, shifter)

    @classmethod
    def from_config(cls, cfg) -> Replay:
        """The run's replay: one stream per env of every collector, local and Ray's."""
        rep, col = cfg.replay, cfg.collectors
        return cls.of(rep.buffer_size, col.total_collectors, col.envs_per_collector,
                      frame_stack=cfg.env_options.frame_stack, n_step=rep.n_step, gamma=rep.gamma,
                      prioritized=rep.prioritized, alpha=rep.per_alpha, beta=rep.per_beta, seed=cfg.seed,
                      n_step_cut=rep.n_step_cut, shift=rep.augment_shift)

    def __len__(self) -> int:
        return len(self.storage)

    def rng_state(self) -> dict:
        """Its generators' states, for a checkpoint: the sampler's, and the shift's (None without one)."""
        return {"sampler": self.sampler.rng.bit_generator.state,
                "shift": self.shift.rng.bit_generator.state if self.shift is not None else None}

    def set_rng_state(self, saved: dict) -> None:
        """``rng_state``'s, from a checkpoint. A shift without a saved state (a checkpoint from
        before it was kept, or of a run without --augment-shift) keeps its start at seed + 1."""
        self.sampler.rng.bit_generator.state = saved["sampler"]
        if self.shift is not None and saved.get("shift") is not None:
            self.shift.rng.bit_generator.state = saved["shift"]

    def sample(self, batch_size: int, channels_last: bool = False) -> dict[str, np.ndarray]:
        """A batch of n-step transitions; ``channels_last``: its frame stacks laid out as a
        channels_last learner on the CPU reads them (``Learner.host_channels_last``)."""
        st = self.storage
        with st.lock:
            s, p, weights = self.sampler.sample(batch_size, self.frame_stack, self.n_step)
            ret, terminated, boot, disc = st.n_step(s, p, self.n_step, self.gamma, self.n_step_cut)
            obs = st.stacks(s, st.stack_indices(s, p, self.frame_stack), channels_last)
            next_obs = st.stacks(s, st.stack_indices(s, boot, self.frame_stack), channels_last)
            action = st.action[s, p].astype(np.int64)
            seq = st.sequence(s, p)
            # records written to its stream since each sample's, times the streams that advance
            # together: about the agent steps played since it was (the replay's age of samples)
            age = float((st.written[s] - 1 - seq).mean()) * st.num_streams
        if self.shift is not None:  # on the batch's own copies, outside the lock the writer waits on
            obs, next_obs = self.shift(obs, channels_last), self.shift(next_obs, channels_last)
        return {"obs": obs, "action": action, "return": ret, "discount": np.where(terminated, 0.0, disc).astype(np.float32),
                "next_obs": next_obs, "weights": weights, "stream": s, "pos": p, "seq": seq, "age": age}

    def update_priorities(self, stream, pos, td_abs, seq=None) -> None:
        """Priorities from a trained batch's TD errors (an array or a tensor; the uniform sampler
        ignores them, without a copy from the device). ``seq``: the batch's ``"seq"``."""
        self.sampler.update(stream, pos, td_abs, seq)

    def anneal(self, progress: float) -> None:
        """Where the run is (0..1), for a sampler whose correction follows it."""
        self.sampler.anneal(progress)

    def count_valid(self) -> tuple[int, int]:
        """(stored records that can start a sampled transition, stored records): one pass over
        the storage, under its lock."""
        st = self.storage
        with st.lock:
            filled = np.minimum(st.written, st.stream_len)
            streams = np.repeat(np.arange(st.num_streams), filled)
            positions = np.arange(len(streams)) - np.repeat(np.cumsum(filled) - filled, filled)
            valid = st.valid(streams, positions, self.frame_stack, self.n_step)
            return int(valid.sum()), len(streams)


__all__ = ["Replay", "Storage", "StreamWriter", "UniformSampler", "PrioritizedSampler", "RandomShift"]
