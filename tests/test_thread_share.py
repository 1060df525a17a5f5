"""The learner's threads follow the cores other processes leave free (pipeline/engine/thread_share.py)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.engine import thread_share as T


def test_the_team_loses_a_thread_per_core_others_hold_and_never_falls_below_one():
    assert T.threads_for(2, 0.0) == 2 and T.threads_for(2, 0.4) == 2
    assert T.threads_for(2, 0.6) == 1 and T.threads_for(2, 1.0) == 1 and T.threads_for(2, 2.0) == 1
    assert T.threads_for(8, 2.7) == 5 and T.threads_for(8, 30.0) == 1
    assert T.threads_for(1, 0.0) == 1


def test_proc_lines_parse_as_the_kernel_writes_them():
    # /proc/stat: cpu user nice system idle iowait irq softirq steal guest guest_nice
    assert T.total_busy_ticks("cpu  100 5 20 9000 30 1 2 3 0 0\ncpu0 1 2 3\n") == 131
    # a process whose name holds spaces and a bracket: ppid is field 4, utime and stime 14 and 15
    line = "4242 (py thon) x) S 17 4242 4242 0 -1 4194304 1 0 0 0 250 50 0 0 20 0 3 0 100 0 0"
    assert T.process_ticks(line) == (17, 300)


def _fake_proc(root: Path, busy: int, procs: dict[int, tuple[int, int]]) -> None:
    root.mkdir(exist_ok=True)
    (root / "stat").write_text(f"cpu  {busy} 0 0 100000 0 0 0 0 0 0\n")
    for pid, (ppid, ticks) in procs.items():
        (root / str(pid)).mkdir(exist_ok=True)
        (root / str(pid) / "stat").write_text(f"{pid} (p) S {ppid} 0 0 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 1 0 0")


def test_a_run_shares_when_others_hold_a_core_and_takes_the_team_back_when_they_go(tmp_path):
    """Others' CPU is the machine's busy time less the run's own tree (the learner, its collectors);
    the team changes after two looks agree, and each change is logged."""
    proc, now = tmp_path / "proc", [0.0]
    ours = {10: (1, 0), 11: (10, 0), 12: (11, 0)}  # the learner, a collector, a child of the collector
    _fake_proc(proc, 0, {**ours, 99: (1, 0)})
    lines, sets = [], []
    share = T.ThreadShare(2, 2, sets.append, lines.append, pid=10, proc=proc, clock=lambda: now[0])
    assert share.active
    hz, dt = T.CLOCK_TICKS, T.CHECK_EVERY_S
    busy = ours_t = other = 0

    def look(ours_cores: float, other_cores: float) -> None:
        nonlocal busy, ours_t, other
        now[0] += dt
        ours_t += int(ours_cores * hz * dt)
        other += int(other_cores * hz * dt)
        busy = ours_t + other
        _fake_proc(proc, busy, {10: (1, ours_t // 2), 11: (10, ours_t // 4), 12: (11, ours_t - ours_t // 2 - ours_t // 4),
                                99: (1, other)})
        share.poll()
    look(1.9, 0.0)
    assert sets == [] and share.threads == 2
    look(1.0, 1.0)               # one look calls for one thread: not yet
    assert sets == []
    look(1.0, 1.0)               # the second agrees: the team shrinks, and the log says why
    assert sets == [1] and "Learner threads 2 -> 1: other processes used 1.0 of this machine's 2 cores" in lines[-1]
    look(1.0, 0.9)
    look(1.9, 0.0)               # the other process ended: one look is not enough
    assert sets == [1]
    look(1.9, 0.0)
    assert sets == [1, 2] and "(back to the full team)" in lines[-1] and share.changes == 2
    now[0] += dt / 2             # between looks nothing is read
    share.poll()
    assert share.changes == 2


def test_one_thread_or_no_proc_leaves_the_threads_alone(tmp_path):
    assert not T.ThreadShare(1, 2, print, print).active
    assert not T.ThreadShare(2, 2, print, print, proc=tmp_path / "nothing").active


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux's /proc")
def test_a_busy_process_beside_this_one_is_seen_as_others_cpu(monkeypatch):
    """The real /proc: a process of another tree spinning a core reads as others' CPU (the rest of
    the machine's load counts too, so at least half a core)."""
    monkeypatch.setattr(T, "CHECK_EVERY_S", 0.5)
    # a spinner outside this process's tree: started by a shell that exits at once (a child of
    # this process would count as its own work, as a run's collectors do)
    pid = int(subprocess.run(["sh", "-c", f"'{sys.executable}' -c 'while True: pass' >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True).stdout)
    try:
        seen = []
        share = T.ThreadShare(4, os.cpu_count() or 2, lambda n: None, lambda s: None)
        share.consider = seen.append  # the measured share of others, not the decision
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(1.0)
            share.poll()
        assert len(seen) == 2 and max(seen) >= 0.5, seen
    finally:
        os.kill(pid, 9)


@pytest.mark.slow
def test_a_run_beside_a_busy_process_shrinks_its_learner_and_says_so(tmp_path):
    """A catch run with a 2-thread learner and two processes spinning the cores beside it: within
    a few looks it trains on one thread, its log says why, and a Ctrl-C then ends it as usual."""
    import signal
    import uuid

    from tests.proc_utils import CATCH, check_clean, read_until, start

    mark, lines = uuid.uuid4().hex, []
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
                for _ in range(2)]
    try:
        proc = start([*CATCH, "--learner-threads", "2", "--total-steps", "1000000000", "--save-replay", "false",
                      "--run-dir", str(tmp_path / "run")], mark)
        try:
            shrank = read_until(proc, "[MAIN] Learner threads 2 -> 1", lines, timeout=300)
        finally:
            proc.send_signal(signal.SIGINT)
            rest, _ = proc.communicate(timeout=120)
    finally:
        for s in spinners:
            s.kill()
            s.wait()
    out = "".join(lines) + rest
    assert shrank, out[-3000:]
    assert re.search(r"\[MAIN\] Learner threads 2 -> 1: other processes used [\d.]+ of this machine's \d+ cores",
                     out), out[-3000:]
    assert proc.returncode == 0 and "[MAIN] Stopped (SIGINT)" in out, out[-3000:]
    check_clean(proc, mark, within_s=10)
