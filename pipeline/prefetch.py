"""Prefetch thread: samples and assembles batches (stack rebuild, n-step returns, host-to-device
copy) while the learner computes, so the learner never waits on numpy gathers."""
from __future__ import annotations

import queue
import threading


class Prefetcher(threading.Thread):
    def __init__(self, replay, learner, batch_size: int, depth: int):
        super().__init__(name="prefetch", daemon=True)
        self.replay, self.learner, self.batch_size = replay, learner, batch_size
        self.queue: queue.Queue = queue.Queue(maxsize=depth)
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stop_event.is_set():
                batch = self.learner.to_device(self.replay.sample(self.batch_size))
                while not self.stop_event.is_set():
                    try:
                        self.queue.put(batch, timeout=0.1)
                        break
                    except queue.Full:
                        pass
        except BaseException as e:
            self.error = e

    def get(self, timeout: float = 5.0) -> dict:
        while True:
            try:
                return self.queue.get(timeout=timeout)
            except queue.Empty:
                if self.error is not None:
                    raise RuntimeError("prefetch thread failed") from self.error
                if not self.is_alive():
                    raise RuntimeError("prefetch thread stopped")
