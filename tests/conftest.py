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

import subprocess  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

import pytest  # noqa: E402


def pytest_sessionfinish(session, exitstatus):
    """The profile folder exists only if a run wrote to it (the bf16 probe caches its speed-up
    there): remove it, so a test session leaves nothing in the temp folder."""
    import shutil

    shutil.rmtree(os.environ["DQN_PROFILE_DIR"], ignore_errors=True)

# The catch run's time limit. It stops at the target, ~0.4 min on a quiet 2-core machine; the
# limit is only the ceiling for a slow or shared one (a CI run that needed 2.5 min failed there).
CATCH_MINUTES = 5.0
# The baseline recipe's own limit: long enough to play and score well over 20 games.
BASELINE_MINUTES = 0.25

@pytest.fixture(scope="session")
def catch_time_to_score(tmp_path_factory):
    """One ``benchmark_performance.py --time-to-score --quick --vs-baseline`` run, as a user types
    it: the catch game trained through the whole pipeline (``mario_rl_optimized.py`` with
    collector processes, rings, replay and learner) until the mean return of the last 20 games
    reaches 0.8, then the baseline recipe for 15 s (it needs ~100 s to reach 0.8, which the learning
    tests do not read). The learning proof
    (tests/test_learning.py) and the benchmark's report (tests/test_benchmark.py) both read this
    one run: training catch twice cost CI two minutes."""
    from tests.proc_utils import env_for, marked_processes

    d, mark = tmp_path_factory.mktemp("catch_tts"), uuid.uuid4().hex
    before = set(Path("/dev/shm").glob("dqnrl_*"))
    t0 = time.time()
    # --target 0.8, not --quick's 0.5: the run stops at the first window of 20 games to reach the
    # target (a lucky window), and the greedy play of its checkpoint (test_learning's --eval) needs
    # a policy that has learned the game, not one that just got there
    out = subprocess.run([sys.executable, "benchmark_performance.py", "--time-to-score", "--quick", "--vs-baseline",
                          "--target", "0.8", "--minutes", str(CATCH_MINUTES), "--baseline-minutes", str(BASELINE_MINUTES), "--runs-dir", str(d),
                          "--json", str(d / "tts.json"), "--plot", str(d / "tts.png")],
                         cwd=ROOT, capture_output=True, text=True, timeout=900, env=env_for(mark))
    took = time.time() - t0
    time.sleep(0.5)
    left = {"processes": marked_processes(mark), "segments": sorted(set(Path("/dev/shm").glob("dqnrl_*")) - before)}
    return {"dir": d, "proc": out, "took": took, "left": left}


@pytest.fixture(autouse=True)
def _torch_threads_kept():
    """Each test starts with the session's torch thread count: a run wired in-process sets its
    learner's team (two threads on two cores), and a later in-process learner test on a loaded
    machine then stalled at every OpenMP barrier (the IQN test took 360 s instead of ~25)."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)
