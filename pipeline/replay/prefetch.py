"""Prefetch thread: samples and assembles batches (stack rebuild, n-step returns, host-to-device
copy) while the learner computes, so the learner never waits on numpy gathers."""
from __future__ import annotations

import queue
import threading
import time


class Prefetcher(threading.Thread):
    def __init__(self, replay, learner, batch_size: int, depth: int):
        super().__init__(name="prefetch", daemon=True)
        self.replay, self.learner, self.batch_size = replay, learner, batch_size
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stop_event = threading.Event()
        # Set once the first batch is queued: until then the replay may not yet be able to serve
        # one (_first_sample), and the trainer keeps its health checks going instead of blocking.
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.looks = 0  # times _first_sample has read the replay and found no batch to serve yet

    def run(self) -> None:
        try:
            sample = self._first_sample()
            while sample is not None and not self.stop_event.is_set():
                batch = self.learner.to_device(sample)
                while not self.stop_event.is_set():
                    try:
                        self.queue.put(batch, timeout=0.1)
                        self.ready.set()
                        break
                    except queue.Full:
                        pass
                sample = self.replay.sample(self.batch_size, self.learner.host_channels_last)
        except BaseException as e:
            self.error = e

    def _first_sample(self) -> dict | None:
        """The first batch, once the replay can serve one (None if stopped before). A small
        --learning-starts (0 is common with SB3 and CleanRL) lets learning start before the
        streams hold the n_step + 1 records a transition needs, the more likely the more streams
        there are: the learner then waits for them, as the collectors' head start plays on
        (settings/check.py refuses a --learning-starts too small for that head start to cover)."""
        while not self.stop_event.is_set():
            valid, stored = self.replay.count_valid()
            if valid:
                try:
                    return self.replay.sample(self.batch_size, self.learner.host_channels_last)
                except RuntimeError:
                    # The sampler redraws an invalid pick 100 times: while under a quarter of the
                    # records can start a transition, that can fail by chance and the next records
                    # make it likelier to succeed; above a quarter it fails about never (0.75^100).
                    if 4 * valid >= stored:
                        raise
            self.looks += 1
            time.sleep(0.01)
        return None

    def check(self) -> None:
        """Raise if the thread failed or ended."""
        if self.error is not None:
            raise RuntimeError("prefetch thread failed") from self.error
        if not self.is_alive():
            raise RuntimeError("prefetch thread stopped")

    def get(self, timeout: float = 5.0) -> dict:
        while True:
            try:
                return self.queue.get(timeout=timeout)
            except queue.Empty:
                self.check()
