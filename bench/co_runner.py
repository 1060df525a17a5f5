"""A process that keeps a set share of one core busy, in 10 ms bursts, while its ``active`` event
is set (``ready`` is set once it runs): a stand-in for a collector's load beside the learner
(``--only learner-share``). Its own module, without torch or numpy, so that it starts light."""
from __future__ import annotations

import time


def busy(duty: float, ready, active, stop) -> None:
    """Busy ``duty`` of every 10 ms while ``active`` is set, asleep otherwise, until ``stop``."""
    ready.set()
    while not stop.is_set():
        if not active.wait(0.05):
            continue
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.01 * duty:
            pass
        time.sleep(0.01 * (1 - duty))
