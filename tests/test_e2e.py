"""End to end through real collector processes: Pong and Mario train, log, checkpoint and resume,
and leave no process and no shared-memory segment behind (faults: test_faults.py)."""
import json
import re
import uuid

import pytest
import torch

from tests.proc_utils import check_clean as _check_clean, run as _run

pytestmark = pytest.mark.slow

FAST = ["--learning-starts", "500", "--replay-ratio", "1", "--batch-size", "32", "--epoch-steps", "500",
        "--consolidation-log-interval", "1", "--buffer-size", "20000", "--envs-per-collector", "4",
        "--checkpoint-interval", "20"]


# (first run, resumed run) agent steps: the emulator plays Mario at a fraction of Pong's speed; the
# first run's last epoch row (every 500 steps, learning from step 500) must count updates
LEARNING_STARTS, STEPS_PER_UPDATE = 500, 32  # FAST: batch 32 at replay ratio 1
STEPS = {"ALE/Pong-v5": (1200, 2000), "SuperMarioBros-1-1-v0": (1000, 1500)}


@pytest.mark.parametrize("env_id,method", [("ALE/Pong-v5", "spawn"), ("ALE/Pong-v5", "fork"),
                                           ("SuperMarioBros-1-1-v0", "forkserver")])
def test_trains_logs_checkpoints_and_resumes(tmp_path, env_id, method):
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    args = ["--env", env_id, "--run-dir", str(run_dir), "--start-method", method, *FAST]
    first, second = STEPS[env_id]
    proc, out = _run([*args, "--total-steps", str(first)], mark)
    first_out = out
    assert proc.returncode == 0, out[-3000:]
    assert "[PROCESSOR] Processed:" in out and "Consolidated Queue:" in out
    assert "[MAIN] Epoch 1 - Loss:" in out and "Epsilon:" in out and "agent steps/s" in out
    # [PROCESSOR] every --consolidation-log-interval while the replay fills, then one an epoch at most
    after = out[out.index("[MAIN] Epoch 1 - "):]
    assert after.count("[PROCESSOR] ") <= after.count("[MAIN] Epoch "), after
    _check_clean(proc, mark)
    # the start line names how the collectors step and act, as the run's config.json records them
    conf = json.loads((run_dir / "config.json").read_text())["config"]
    threads, precision = re.search(r"envs on (\d+) thread\(s\) \(\w+\), acting in (\w+),", out).groups()
    assert (int(threads), precision) == (conf["env_threads"], "bf16" if conf["act_bf16"] else "fp32")
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for key in ("agent_steps", "updates", "wall_s", "loss", "epsilon", "return_mean", "episodes", "buffer", "drops"):
        assert key in rows[-1]
    assert rows[-1]["updates"] > 0 and rows[-1]["drops"] == 0
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    first_steps, first_updates = state["counters"]["agent_steps"], state["learner"]["updates"]
    # the collectors may run ahead of the learner; a run that reaches --total-steps first trains
    # what its steps paid for, so the ratio holds however slow the learner started
    assert first_steps >= first and first_updates >= (first - LEARNING_STARTS) // STEPS_PER_UPDATE

    assert "[MAIN] Replay saved to" in out and (run_dir / "replay.npz").exists()
    games = (run_dir / "episodes.jsonl").read_text().splitlines()

    proc, out = _run([*args, "--total-steps", str(second), "--resume"], mark)
    assert proc.returncode == 0, out[-3000:]
    assert "Resumed" in out and "[MAIN] Replay restored from" in out and "refills" not in out
    # a resumed run must not replay the first run's env seeds and exploration draws
    seeds = [set(re.findall(r"collector seeds ([\d, ]+)", o)[0].split(", ")) for o in (first_out, out)]
    assert seeds[0] and not seeds[0] & seeds[1], seeds
    assert (run_dir / "episodes.jsonl").read_text().splitlines()[:len(games)] == games
    _check_clean(proc, mark)
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert state["counters"]["agent_steps"] >= second
    assert state["learner"]["updates"] - first_updates >= (second - first_steps) // STEPS_PER_UPDATE > 0


def test_the_first_eta_waits_for_the_learning_and_the_compile_pause_is_announced(tmp_path):
    """The first epoch is the replay's fill (--learning-starts 500, epochs of 500): its Speed
    line gives no ETA rather than one at the fill's pace; the epochs that train give one. With
    --compile, the line that says learning starts says when the loss compiles and that training
    pauses for it."""
    import os
    import shutil

    from tests.proc_utils import CATCH

    if shutil.which(os.environ.get("CXX") or "g++") is None:
        pytest.skip("--compile on a CPU needs a C++ compiler, and none is on PATH")
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    proc, out = _run([*CATCH, "--run-dir", str(run_dir), "--total-steps", "2000", "--epoch-steps", "500",
                      "--compile", "true"], mark)
    assert proc.returncode == 0, out[-3000:]
    speed = [line for line in out.splitlines() if line.startswith("[MAIN] Speed - ")]
    assert re.search(r"ETA n/a until learning runs( \||$)", speed[0]), speed[0]
    assert re.search(r"ETA \d+:\d\d:\d\d( \||$)", speed[-1]), speed[-1]
    assert ("[MAIN] Learning starts at " in out and "; at update 2,000 the learner compiles its loss (torch.compile, "
            "--compile), and training pauses while it does" in out)
    _check_clean(proc, mark)
