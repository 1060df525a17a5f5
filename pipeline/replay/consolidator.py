"""Consolidation thread (learner process): drains every collector's ring in large batches into
the replay and keeps the counters the logs and the replay-ratio control read."""
from __future__ import annotations

import collections
import threading
import time

import numpy as np

from ..actors.no_ray import NoRayCollectors
from ..transport.games import finished_games, no_stats
from ..transport.transition import is_agent_step


class Consolidator(threading.Thread):
    def __init__(self, rings, replay, max_batch: int, log, log_interval: float, remote=None, game_stats=no_stats):
        """``remote``: the Ray collectors' intake (``RayCollectors``), whose batches go into the
        replay like ring records, after the rings' collectors in stream order; none: no Ray.
        ``game_stats``: the game family's statistics of a finished game (``GameFamily.game_stats``)."""
        super().__init__(name="consolidator", daemon=True)
        self.rings, self.replay, self.max_batch = rings, replay, max_batch
        self.game_stats = game_stats
        self.remote = NoRayCollectors() if remote is None else remote
        self.log, self.log_interval = log, log_interval
        self.stop_event = threading.Event()
        # [PROCESSOR] lines: every log_interval while the replay fills, the run's only sign of
        # life then; once epochs end, one after an epoch's lines at most (1,087 of them against
        # 76 epoch lines buried a Mario log)
        self.epochs_ended = 0
        self.epoch_ended = threading.Event()
        self.processed = 0      # records moved
        self.agent_steps = 0      # agent steps moved (records minus final-observation records)
        self.batches = 0        # drains that moved something
        self.busy_s = 0.0
        self.finished: collections.deque = collections.deque()  # whole games the run's books have not taken yet
        self.episodes_total = 0
        self.error: BaseException | None = None

    def _sink(self, collector: int):
        def sink(frames, fields):
            self.replay.writer.write(collector, frames, fields)
            flags = fields["flags"]
            self.processed += len(flags)
            self.agent_steps += int(np.count_nonzero(is_agent_step(flags)))
            steps = self.agent_steps + self.dropped_steps()
            for ep in finished_games(fields, steps, time.monotonic(), self.game_stats):
                self.finished.append(ep)
                self.episodes_total += 1
        return sink

    def pending(self) -> int:
        """Agent steps (records, for rings) played but not yet in the replay."""
        return sum(len(r) for r in self.rings) + self.remote.pending()

    def dropped_steps(self) -> int:
        """Agent steps whose records a full ring dropped (--drop-when-full): played, not stored."""
        return sum(r.block.dropped_steps for r in self.rings)

    def drops(self) -> int:
        return sum(r.block.drops for r in self.rings)

    def drain_once(self) -> int:
        t0 = time.perf_counter()
        moved = 0
        for i, ring in enumerate(self.rings):
            n = ring.drain(self.max_batch, self._sink(i))
            if n:
                self.batches += 1
                moved += n
        if n := self.remote.drain(self._sink):
            self.batches += 1
            moved += n
        if moved:
            self.busy_s += time.perf_counter() - t0
        return moved

    def epoch_end(self) -> None:
        """An epoch's lines were logged: the next [PROCESSOR] line may follow them."""
        self.epochs_ended += 1
        self.epoch_ended.set()

    def log_due(self, since_last: float) -> bool:
        """Whether a [PROCESSOR] line is due ``since_last`` seconds after the last: each
        log_interval until the first epoch ends, then after an epoch's lines (and log_interval)."""
        return since_last >= self.log_interval and (not self.epochs_ended or self.epoch_ended.is_set())

    def run(self) -> None:
        last_log = time.monotonic()
        try:
            while not self.stop_event.is_set():
                if not self.drain_once():
                    time.sleep(0.002)
                if self.log_due(time.monotonic() - last_log):
                    last_log = time.monotonic()
                    self.epoch_ended.clear()
                    self.log(f"[PROCESSOR] Processed: {self.processed:,}, Batches: {self.batches:,}, Drops: {self.drops():,}, "
                             f"Buffer: {len(self.replay):,}, Consolidated Queue: {self.pending():,}")
            # The stop comes after the collectors were joined and the Ray intake stopped, so what
            # they delivered since the last drain (and the games it finishes) is final: take it.
            while self.drain_once():
                pass
        except BaseException as e:  # surfaced by the trainer's main loop
            self.error = e
