"""Helpers for tests that run mario_rl_optimized.py as a user would: in a subprocess tagged with
a marker in its environment, so every process it started can be found afterwards."""
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The test suite's catch game (tests/catch_env.py) through the whole pipeline, sized to learn fast.
CATCH = ["--env", "tests.catch_env:Catch-v0", "--learning-starts", "500", "--buffer-size", "20000",
         "--envs-per-collector", "4", "--batch-size", "32", "--replay-ratio", "4", "--lr", "1e-3",
         "--target-update-interval", "100", "--eps-decay-steps", "4000", "--eps-end", "0.02",
         "--epoch-steps", "1000", "--consolidation-log-interval", "2", "--checkpoint-interval", "100"]


def env_for(mark):
    return {**os.environ, "DQN_TEST_MARK": mark, "PYTHONUNBUFFERED": "1"}


def marked_processes(mark):
    """Live processes that inherited this run's marker: the run itself and its collectors."""
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if f"DQN_TEST_MARK={mark}".encode() in (d / "environ").read_bytes():
                found.append(int(d.name))
        except OSError:
            pass
    return found


def parent_pid(pid: int) -> int:
    """The parent's pid, from /proc (the field after the command name, which may hold spaces)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def collector_pids(mark, main_pid):
    """The run's collector processes (and its evaluator): its children less multiprocessing's
    helpers (the resource tracker, the fork server), and the fork server's children (forked, not
    started anew: they carry the server's command line)."""
    parents = {}
    for p in marked_processes(mark):
        try:
            parents[p] = parent_pid(p)
        except (OSError, ValueError, IndexError):
            pass
    children = [p for p, parent in parents.items() if parent == main_pid]
    servers = [p for p in children if _cmdline_has(p, b"forkserver")]
    helpers = [*servers, *(p for p in children if _cmdline_has(p, b"resource_tracker"))]
    return [p for p, parent in parents.items() if parent == main_pid and p not in helpers or parent in servers]


def _cmdline_has(pid: int, word: bytes) -> bool:
    try:
        return word in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def running(pid: int) -> bool:
    """Alive and not a zombie: a collector whose learner died is adopted, then reaped later."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def segments(pid):
    """The shared-memory segments a learner with this pid made (``dqnrl_<pid>-<run token>_<tag>``)."""
    return list(Path("/dev/shm").glob(f"dqnrl_{pid}-*"))


def segments_left(before):
    """Segments made since ``before`` (a set of /dev/shm paths) by runs no live process holds
    (``shm.live_runs``, as a starting run counts them): what finished runs left behind. A live
    run's segments are another test's run still training."""
    from pipeline.transport import shm

    live = set(shm.live_runs())
    return sorted(p for p in set(shm.SHM_DIR.glob(shm.PREFIX + "*")) - before
                  if p.name[len(shm.PREFIX):].split("_", 1)[0] not in live)


def start(args, mark, preexec_fn=None, tmp_dir=None):
    """The run as a user starts it. ``tmp_dir``: its temp folder (TMPDIR), for a run the test
    SIGKILLs: multiprocessing's folder (/tmp/pymp-*, the forkserver's socket) is removed at a
    normal exit only, and under the test's tmp_path it goes with the test's files."""
    env = env_for(mark)
    if tmp_dir is not None:
        os.makedirs(tmp_dir, exist_ok=True)
        env["TMPDIR"] = str(tmp_dir)
    return subprocess.Popen([sys.executable, "mario_rl_optimized.py", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=preexec_fn)


def run(args, mark, timeout=240, preexec_fn=None):
    proc = start(args, mark, preexec_fn)
    out, _ = proc.communicate(timeout=timeout)
    return proc, out


def read_until(proc, needle, lines, timeout=180):
    """Read the run's output into ``lines`` until a line contains ``needle``; True if one did."""
    deadline = time.time() + timeout
    for line in proc.stdout:
        lines.append(line)
        if needle in line:
            return True
        if time.time() > deadline:
            return False
    return False


def check_clean(proc, mark, within_s: float = 5.0):
    """Every process of the run gone and its shared memory unlinked, polled up to ``within_s``
    (children reaped by init after the run's exit take a moment to leave /proc)."""
    deadline = time.time() + within_s
    while (marked_processes(mark) or segments(proc.pid)) and time.time() < deadline:
        time.sleep(0.02)
    assert marked_processes(mark) == [], "a collector outlived the run"
    assert segments(proc.pid) == [], "shared memory left in /dev/shm"
