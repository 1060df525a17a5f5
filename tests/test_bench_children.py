"""The benchmark's child processes: a child that dies before it reports is an error naming it, not
a wait that never ends; one that reports and exits is read."""
import multiprocessing as mp
import os
import time

import pytest

from bench.common import get_from, run_in_child


def _dies(q) -> None:
    os._exit(3)


def _reports(value, q) -> None:
    q.put(value)


def test_a_child_that_dies_before_it_reports_is_an_error_not_a_hang():
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_dies, args=(q,))
    p.start()
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="the producer process exited with code 3 before reporting"):
        get_from(q, p, "the producer")
    assert time.monotonic() - t0 < 60
    p.join()


def test_a_child_that_reports_and_exits_is_read():
    """Through run_in_child, whose child ends by quick_exit once it has reported: its queue is
    flushed before it goes."""
    assert run_in_child(_reports, ({"rate": 8},), "the row's") == {"rate": 8}
    assert run_in_child(_dies, (), "the row's") == {"error": "the row's process exited with code 3 before reporting"}


def test_the_collector_overhead_child_reports_a_window_when_the_first_outlasts_its_time():
    """Its first one-second window warms up and is dropped; on a loaded machine that window alone
    outlasted the --quick 2 s and the child had no window left to report (StatisticsError, exit 1).
    Here no time at all (seconds=0): it still measures one window after the warm-up."""
    import queue

    import torch

    from bench.components import _collector_loop

    threads = torch.get_num_threads()  # the loop sets a collector's one thread
    q = queue.Queue()
    try:
        _collector_loop(None, 0.0, q)
    finally:
        torch.set_num_threads(threads)
    assert q.get_nowait() > 0
