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
