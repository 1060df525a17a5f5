"""Writes ring records into their env streams (called by the consolidation thread)."""
from __future__ import annotations

import numpy as np

from ..transport.transition import FIRST, LAST, STATS, TERM, TRUNC
from .storage import Storage


class StreamWriter:
    def __init__(self, storage: Storage, envs_per_collector: int, on_write):
        self.storage = storage
        self.envs_per_collector = envs_per_collector
        self.on_write = on_write  # the sampler's hook: the prioritized one gives new records max priority

    def write(self, collector: int, frames: np.ndarray, fields: dict) -> None:
        st = self.storage
        stats_only = (fields["flags"] & STATS) != 0
        if stats_only.any():  # a dropped game's statistics: nothing to store
            keep = ~stats_only
            frames, fields = frames[keep], {k: v[keep] for k, v in fields.items()}
            if not len(frames):
                return
        s = collector * self.envs_per_collector + fields["env"].astype(np.int64)
        # Rank of each record among this chunk's records of the same stream, so a chunk that
        # holds several steps of each env is written with one fancy-indexed copy.
        order = np.argsort(s, kind="stable")
        sorted_s = s[order]
        starts = np.r_[0, np.flatnonzero(np.diff(sorted_s)) + 1]
        counts = np.diff(np.r_[starts, len(s)])
        rank = np.empty(len(s), np.int64)
        rank[order] = np.arange(len(s)) - np.repeat(starts, counts)
        with st.lock:
            p = (st.pos[s] + rank) % st.stream_len
            st.frames[s, p] = frames
            st.action[s, p] = fields["action"]
            st.reward[s, p] = fields["reward"]
            st.flags[s, p] = fields["flags"]
            for i in np.flatnonzero(fields["flags"] & FIRST):
                self._close_broken_stream(s[i], p[i], rank[i] + st.written[s[i]])
            uniq = sorted_s[starts]
            st.pos[uniq] = (st.pos[uniq] + counts) % st.stream_len
            st.written[uniq] += counts
            self.on_write(s, p, fields["flags"])  # under the lock, like every other sampler update

    def _close_broken_stream(self, s: int, p: int, index: int) -> None:
        """A FIRST record whose predecessor did not end an episode means the stream broke (a
        collector restarted, or a batch was dropped): end the old episode as truncated at its
        last record, so neither stacks nor n-step returns run across the break.

        A predecessor that ended with TERM needs nothing (no bootstrap), nor one that is a LAST
        record. One that ended with TRUNC but lost the LAST record after it (its collector died
        in between) would bootstrap from this FIRST frame of another episode: it becomes the
        LAST record instead, and the transition before it the truncated one."""
        st, L = self.storage, self.storage.stream_len
        if index < 1:
            return
        prev, prev2 = (p - 1) % L, (p - 2) % L
        if st.flags[s, prev] & (TERM | LAST):
            return
        st.flags[s, prev] |= LAST
        if index >= 2 and not st.flags[s, prev2] & (TERM | TRUNC | LAST):
            st.flags[s, prev2] |= TRUNC
