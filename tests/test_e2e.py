"""End to end through real collector processes: Pong and Mario train, log, checkpoint, resume,
stop on SIGINT, and leave no process and no shared-memory segment behind."""
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

FAST = ["--learning-starts", "500", "--replay-ratio", "1", "--batch-size", "32", "--epoch-steps", "500",
        "--processor-log-interval", "1", "--buffer-size", "20000", "--envs-per-collector", "4",
        "--checkpoint-interval", "20"]


def _env(mark):
    return {**os.environ, "DQN_TEST_MARK": mark, "PYTHONUNBUFFERED": "1"}


def _marked_processes(mark):
    """Live processes that inherited this run's marker: the run itself and its collectors."""
    found = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if f"DQN_TEST_MARK={mark}".encode() in (d / "environ").read_bytes():
                found.append(int(d.name))
        except OSError:
            pass
    return found


def _segments(pid):
    return list(Path("/dev/shm").glob(f"dqnrl_{pid}_*"))


def _run(args, mark, timeout=240):
    proc = subprocess.Popen([sys.executable, "mario_rl_optimized.py", *args], cwd=ROOT, env=_env(mark),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(timeout=timeout)
    return proc, out


def _check_clean(proc, mark):
    time.sleep(0.5)
    assert _marked_processes(mark) == [], "a collector outlived the run"
    assert _segments(proc.pid) == [], "shared memory left in /dev/shm"


@pytest.mark.parametrize("env_id,method", [("ALE/Pong-v5", "spawn"), ("ALE/Pong-v5", "fork"),
                                           ("SuperMarioBros-1-1-v0", "spawn")])
def test_trains_logs_checkpoints_and_resumes(tmp_path, env_id, method):
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    args = ["--env", env_id, "--run-dir", str(run_dir), "--start-method", method, *FAST]
    proc, out = _run([*args, "--total-steps", "2000"], mark)
    assert proc.returncode == 0, out[-3000:]
    assert "[PROCESSOR] Processed:" in out and "Consolidated Queue:" in out
    assert "[MAIN] Epoch 1 - Loss:" in out and "Epsilon:" in out and "env steps/s" in out
    _check_clean(proc, mark)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for key in ("env_steps", "updates", "wall_s", "loss", "epsilon", "return_mean", "episodes", "buffer", "drops"):
        assert key in rows[-1]
    assert rows[-1]["updates"] > 0 and rows[-1]["drops"] == 0
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    first_steps, first_updates = state["counters"]["env_steps"], state["learner"]["updates"]
    assert first_steps >= 2000 and first_updates > 0

    proc, out = _run([*args, "--total-steps", "3500", "--resume"], mark)
    assert proc.returncode == 0, out[-3000:]
    assert "Resumed" in out
    _check_clean(proc, mark)
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert state["counters"]["env_steps"] >= 3500 and state["learner"]["updates"] > first_updates


def test_sigint_stops_with_checkpoint_and_cleans_up(tmp_path):
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, "mario_rl_optimized.py", "--env", "ALE/Pong-v5", "--run-dir", str(run_dir),
                             *FAST, "--total-steps", "1000000"], cwd=ROOT, env=_env(mark),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    deadline = time.time() + 180
    for line in proc.stdout:
        lines.append(line)
        if "Learning starts" in line or time.time() > deadline:
            break
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    out = "".join(lines) + rest
    assert proc.returncode == 0, out[-3000:]
    assert "Stopped (SIGINT)" in out
    assert torch.load(run_dir / "checkpoint.pt", weights_only=True)["learner"]["updates"] > 0
    _check_clean(proc, mark)


def test_resume_rejects_checkpoint_of_another_game(tmp_path):
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    proc, out = _run(["--env", "ALE/Pong-v5", "--run-dir", str(run_dir), *FAST, "--total-steps", "600"], mark)
    assert proc.returncode == 0, out[-3000:]
    proc, out = _run(["--env", "ALE/Breakout-v5", "--run-dir", str(run_dir), *FAST, "--resume"], mark)
    assert proc.returncode == 2
    assert "checkpoint.pt" in out and "env='ALE/Pong-v5'" in out and "ALE/Breakout-v5" in out


def test_resume_rejects_corrupt_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "checkpoint.pt").write_bytes(b"PK\x03\x04 truncated")
    proc, out = _run(["--env", "ALE/Pong-v5", "--run-dir", str(run_dir), "--resume"], uuid.uuid4().hex)
    assert proc.returncode == 2 and "truncated or corrupt" in out


def test_killed_collector_is_reported_and_restarted(tmp_path):
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    proc = subprocess.Popen([sys.executable, "mario_rl_optimized.py", "--env", "ALE/Pong-v5", "--run-dir", str(run_dir),
                             *FAST, "--total-steps", "1000000"], cwd=ROOT, env=_env(mark),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, killed = [], False
    deadline = time.time() + 180
    for line in proc.stdout:
        lines.append(line)
        if "Learning starts" in line and not killed:
            collectors = [p for p in _marked_processes(mark) if p != proc.pid
                          and b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
            assert collectors
            os.kill(collectors[0], signal.SIGKILL)
            killed = True
        if "Restarting collector" in line or time.time() > deadline:
            break
    for line in proc.stdout:  # training goes on with the new collector
        lines.append(line)
        if "[MAIN] Epoch" in line or time.time() > deadline:
            break
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    out = "".join(lines) + rest
    assert "was killed by signal 9" in out and "Restarting collector 0 (restart 1/3)" in out
    assert proc.returncode == 0, out[-3000:]
    _check_clean(proc, mark)
