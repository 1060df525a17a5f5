import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")
# A user's own autotuned profiles (from --autotune) must not change what the tests see: point
# the profile folder, here and in every subprocess, at one of this session's own (removed at its end).
os.environ["DQN_PROFILE_DIR"] = os.path.join(tempfile.gettempdir(), f"dqn-tests-no-profiles-{os.getpid()}")

import fcntl  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

import pytest  # noqa: E402


# `make test` runs the suite on three pytest-xdist workers, a file to a worker (--dist loadfile, so a
# module's fixture runs once: the Ray cluster, the run record's evaluated run): most items start a
# training run that waits on process start-up, imports and polling much of its time, so two
# workers left the two cores ~20% idle and a third fills them. (loadgroup would place single tests, but with pytest 9.2 xdist 3.8.0's
# groups are ignored: pytest-dev/pytest-xdist#1386.)


def pytest_configure(config):
    config.addinivalue_line("markers", "alone: runs with no other test beside it (it counts or measures what "
                                       "else runs on the machine); other workers wait")


# The order of the files among those with as many tests: xdist hands out the files with the most
# tests first, and that measured faster than this order given whole (--no-loadscope-reorder: the
# heavy files ran at once, 20m51s against 19m03s-19m39s with the install on a 2-core AMD EPYC
# family 23 model 1, three workers; docs/notebook.md, "Three test workers"). The longest first (by
# their minutes on that CPU model, two workers); test_learning, which reads the catch run
# test_benchmark starts, after them.
LONGEST_FIRST = ["test_benchmark", "test_ray", "test_suite", "test_faults", "test_envs", "test_halving", "test_e2e",
                 "test_run_record", "test_api", "test_suite_mario", "test_tracking", "test_rules", "test_thread_share",
                 "test_lr_schedule"]
LAST = ["test_learning"]


def pytest_collection_modifyitems(config, items):
    if hasattr(config, "workerinput"):  # every worker sorts its collection the same way, as xdist requires
        rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
        last = {name: len(rank) + 1 + i for i, name in enumerate(LAST)}
        items.sort(key=lambda item: last.get(item.path.stem, rank.get(item.path.stem, len(rank))))


def _lock_files(config):
    """The two lock files every worker of this test run opens; None without xdist (one test at a
    time anyway). Opened once per worker and kept open for its session."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return None
    if not hasattr(config, "_dqn_locks"):
        base = os.path.join(tempfile.gettempdir(), f"dqn-tests-{workerinput['testrunuid']}")
        config._dqn_locks = tuple(open(f"{base}-{name}.lock", "a") for name in ("turn", "main"))
    return config._dqn_locks


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Tests marked ``alone`` hold the machine: each takes an exclusive lock that every other test
    holds shared, around its whole protocol (so the module and session fixtures it sets up or
    tears down are inside). A turnstile taken first keeps a waiting ``alone`` test from being
    passed by the other worker's next tests: flock by itself does not queue writers ahead of
    readers."""
    locks = _lock_files(item.config)
    if locks is None:
        return (yield)
    turn, main = locks
    fcntl.flock(turn, fcntl.LOCK_EX)
    fcntl.flock(main, fcntl.LOCK_EX if item.get_closest_marker("alone") else fcntl.LOCK_SH)
    fcntl.flock(turn, fcntl.LOCK_UN)
    try:
        return (yield)
    finally:
        fcntl.flock(main, fcntl.LOCK_UN)


def pytest_sessionfinish(session, exitstatus):
    """The profile folder exists only if a run wrote to it (the bf16 probe caches its speed-up
    there): remove it, so a test session leaves nothing in the temp folder."""
    import shutil

    shutil.rmtree(os.environ["DQN_PROFILE_DIR"], ignore_errors=True)
    for lock in getattr(session.config, "_dqn_locks", ()):
        lock.close()
        try:
            os.unlink(lock.name)  # another worker may have removed it already, or hold it open: harmless
        except OSError:
            pass

# The catch run's time limit. It stops at the target, ~0.4 min on a quiet 2-core machine; the
# limit is only the ceiling for a slow or shared one (a CI run that needed 2.5 min failed there).
CATCH_MINUTES = 5.0
# The baseline recipe's own limit: long enough to play and score well over 20 games, the other
# test worker's run beside it (15 s played 12 there).
BASELINE_MINUTES = 0.5

@pytest.fixture(scope="session")
def catch_time_to_score(request, tmp_path_factory):
    """One ``benchmark_performance.py --time-to-score --quick --vs-baseline`` run, as a user types
    it: the catch game trained through the whole pipeline (``mario_rl_optimized.py`` with
    collector processes, rings, replay and learner) until the mean return of the last 20 games
    reaches 0.8, then the baseline recipe for BASELINE_MINUTES (it needs ~100 s to reach 0.8, which
    the learning tests do not read). The learning proof (tests/test_learning.py) and the
    benchmark's report (tests/test_benchmark.py) both read this one run: training catch twice cost
    CI two minutes. Under xdist the two files may run on two workers: the first to ask runs it
    in the folder the workers share, the other waits on the lock and reads what it left."""
    from tests.proc_utils import env_for, marked_processes, segments_left

    shared = tmp_path_factory.getbasetemp()
    if hasattr(request.config, "workerinput"):
        shared = shared.parent  # the test run's folder, above each worker's own
    d, result = shared / "catch_tts", shared / "catch_tts.json"
    with open(shared / "catch_tts.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not result.exists():
            d.mkdir()
            mark = uuid.uuid4().hex
            before = set(Path("/dev/shm").glob("dqnrl_*"))
            t0 = time.time()
            # --target 0.8, not --quick's 0.5: the run stops at the first window of 20 games to
            # reach the target (a lucky window), and the greedy play of its checkpoint
            # (test_learning's --eval) needs a policy that has learned the game, not one that
            # just got there
            out = subprocess.run([sys.executable, "benchmark_performance.py", "--time-to-score", "--quick", "--vs-baseline",
                                  "--target", "0.8", "--minutes", str(CATCH_MINUTES), "--baseline-minutes",
                                  str(BASELINE_MINUTES), "--runs-dir", str(d), "--json", str(d / "tts.json"),
                                  "--plot", str(d / "tts.png")],
                                 cwd=ROOT, capture_output=True, text=True, timeout=900, env=env_for(mark))
            took = time.time() - t0
            deadline = time.time() + 5.0  # children reaped by init after the run's exit take a moment to leave /proc
            while (marked_processes(mark) or segments_left(before)) and time.time() < deadline:
                time.sleep(0.05)
            left = {"processes": marked_processes(mark), "segments": [str(p) for p in segments_left(before)]}
            part = result.with_suffix(".part")
            part.write_text(json.dumps({"args": out.args, "returncode": out.returncode, "stdout": out.stdout,
                                        "stderr": out.stderr, "took": took, "left": left}))
            part.rename(result)
        r = json.loads(result.read_text())
    proc = subprocess.CompletedProcess(r["args"], r["returncode"], r["stdout"], r["stderr"])
    return {"dir": d, "proc": proc, "took": r["took"], "left": r["left"]}


@pytest.fixture(autouse=True)
def _torch_threads_kept():
    """Each test starts with the session's torch thread count: a run wired in-process sets its
    learner's team (two threads on two cores), and a later in-process learner test on a loaded
    machine then stalled at every OpenMP barrier (the IQN test took 360 s instead of ~25)."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
