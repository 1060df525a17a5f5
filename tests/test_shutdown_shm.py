"""What a run leaves in /dev/shm when it is killed, and what the next run's sweep may remove: only
segments whose creator is provably gone, whatever their pids say. A container's learner is PID
1 at every start while /dev/shm may survive it, and a run in another PID namespace that shares
our IPC namespace has a pid we cannot see (or one equal to ours).

Every test works under a prefix of its own, so no sweep here can touch a real run's segments."""
import json
import multiprocessing as mp
import os
import re
import uuid
from pathlib import Path

import pytest

from pipeline.transport import shm

ctx = mp.get_context("fork")


@pytest.fixture
def prefix(monkeypatch):
    own = f"dqnrltest{uuid.uuid4().hex[:8]}_"
    monkeypatch.setattr(shm, "PREFIX", own)
    yield own
    for path in shm.SHM_DIR.glob(own + "*"):  # this test's files only
        path.unlink()


def _unseen_pid() -> int:
    """A pid no process of ours has: the pid of a process in another PID namespace."""
    pid = int(Path("/proc/sys/kernel/pid_max").read_text()) - 1
    while shm._pid_alive(pid):
        pid -= 1
    return pid


def _as_pid(path: Path, creator: int, pid: int) -> Path:
    """The segment as if its creator had had ``pid``: renamed, the same memory (and lock)."""
    new = path.with_name(path.name.replace(f"{shm.PREFIX}{creator}", f"{shm.PREFIX}{pid}", 1))
    path.rename(new)
    return new


def _create_and_die():
    shm.create("ring0", 4096)
    os._exit(0)  # as SIGKILL leaves it: no unlink, no cleanup


def _create_and_live(names, done):
    seg = shm.create("ring0", 4096)
    names.put(seg.name)
    done.wait(60)


def test_stale_segment_with_our_pid_from_an_earlier_start_is_swept(prefix):
    """The learner before a container restart was PID 1 as we are: its segment carries our pid,
    nobody holds it, and it must neither be kept as ours nor block our own creation."""
    dead = ctx.Process(target=_create_and_die)
    dead.start()
    dead.join()
    [left] = shm.SHM_DIR.glob(f"{prefix}{dead.pid}*")
    stale = _as_pid(left, dead.pid, os.getpid())
    live = shm.create("ring0", 4096)  # ours: the same pid and tag as the stale one
    try:
        assert shm.remove_stale_segments() == [stale.name]
        assert not stale.exists() and (shm.SHM_DIR / live.name).exists()
    finally:
        shm.close_segment(live, unlink=True)
    assert shm.owned_segments() == []


@pytest.mark.parametrize("seen_as", ["a pid we cannot see", "our pid"])
def test_live_segment_of_another_run_is_never_swept(prefix, seen_as):
    names, done = ctx.Queue(), ctx.Event()
    other = ctx.Process(target=_create_and_live, args=(names, done))
    other.start()
    try:
        path = shm.SHM_DIR / names.get(timeout=30)
        pid = _unseen_pid() if seen_as == "a pid we cannot see" else os.getpid()
        path = _as_pid(path, other.pid, pid)
        assert shm.remove_stale_segments() == []
        assert path.exists(), "a live run's segment was unlinked"
    finally:
        done.set()
        other.join()


def test_segments_named_before_run_tokens_are_swept_by_pid(prefix):
    """``<pid>_<tag>`` names (runs of an older version, still running or killed): only a pid
    can tell, so a live one (here our parent's) stays and a dead one goes."""
    live = shm.SHM_DIR / f"{prefix}{os.getppid()}_ring0"
    dead = shm.SHM_DIR / f"{prefix}{_unseen_pid()}_ring0"
    live.touch()
    dead.touch()
    assert shm.remove_stale_segments() == [dead.name]
    assert live.exists() and not dead.exists()



def test_live_runs_are_the_other_runs_holding_their_segments(prefix):
    """What a starting run counts as training beside it: another process that holds its
    segments; not a dead run's leftovers, and not this process's own segments."""
    dead = ctx.Process(target=_create_and_die)
    dead.start()
    dead.join()
    names, done = ctx.Queue(), ctx.Event()
    other = ctx.Process(target=_create_and_live, args=(names, done))
    other.start()
    ours = shm.create("ring0", 4096)
    try:
        creator = names.get(timeout=30)[len(prefix):].split("_", 1)[0]
        assert shm.live_runs() == [creator]
    finally:
        done.set()
        other.join()
        shm.close_segment(ours, unlink=True)
    assert shm.live_runs() == []  # its segment stays until a sweep, but nothing holds it now


@pytest.mark.alone  # counts the training runs on the machine: another test's would change the count
def test_a_run_beside_another_says_so_at_its_start_and_in_every_epoch(tmp_path):
    """Another training run's segment, held by a live process: a catch run started beside it warns
    where their threads cannot all have cores, and each epoch's speed line and metrics row count it
    (reports mark that run's minutes as a share of the machine); the other run's segment is kept."""
    from tests.proc_utils import CATCH, run

    names, done = ctx.Queue(), ctx.Event()
    other = ctx.Process(target=_create_and_live, args=(names, done))
    other.start()
    try:
        held = shm.SHM_DIR / names.get(timeout=30)
        others = len(shm.live_runs())  # the helper's, and any real run training on this machine now
        run_dir = tmp_path / "run"
        proc, out = run([*CATCH, "--run-dir", str(run_dir), "--total-steps", "1000", "--epoch-steps", "400"],
                        uuid.uuid4().hex)
        assert proc.returncode == 0, out[-3000:]
        assert held.exists(), "the start-up sweep removed a live run's segment"
    finally:
        done.set()
        other.join()
        for path in shm.SHM_DIR.glob(f"{shm.PREFIX}{other.pid}-*"):
            path.unlink()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) >= 2 and all(r["other_runs"] == others for r in rows), (others, rows)
    speed = [line for line in out.splitlines() if line.startswith("[MAIN] Speed - ")]
    assert speed and all(line.endswith(f"| shared: {others} other training run(s) on this machine") for line in speed)
    threads = int(re.search(r"learner threads (\d+)", out).group(1))
    crowded = (threads + 1) * (1 + others) > len(os.sched_getaffinity(0)) and threads > 1
    assert (f"[MAIN] Warning: {others} other training run(s)" in out) == crowded, out[:2000]


def test_a_crowded_machine_is_named_with_the_fix():
    from pipeline.settings.hardware import shared_cores_warning

    line = shared_cores_warning(other_runs=1, threads=2, collectors=1, cores=2)
    assert line.startswith("[MAIN] Warning: 1 other training run(s)") and "--learner-threads 1" in line
    assert shared_cores_warning(0, 2, 1, 2) is None      # alone
    assert shared_cores_warning(1, 1, 1, 2) is None      # one learner thread each, as advised
    assert shared_cores_warning(1, 6, 2, 16) is None     # room for both
