"""Proof that the pipeline learns: the catch game (tests/catch_env.py) trained through collector
processes, rings, the consolidation thread, replay and learner must beat a random policy by a
margin a broken learner cannot reach; then the user-facing outputs of that run are checked:
metrics.jsonl, TensorBoard events, the learning-curve PNG, --eval and --video."""
import json
import uuid

import cv2
import pytest

from tests.proc_utils import CATCH, check_clean, run

pytestmark = pytest.mark.slow

RANDOM_RETURN = -0.71  # mean return of uniform random actions over 2,000 episodes (seed 0)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir, mark = tmp_path_factory.mktemp("catch") / "run", uuid.uuid4().hex
    proc, out = run([*CATCH, "--run-dir", str(run_dir), "--total-steps", "14000"], mark, timeout=300)
    assert proc.returncode == 0, out[-3000:]
    check_clean(proc, mark)
    return run_dir, out


def test_catch_is_learned_through_the_full_pipeline(trained):
    run_dir, out = trained
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["env_steps"] >= 14_000 and rows[-1]["updates"] > 1000
    # last 20 episodes, with epsilon 0.02: a learner that learns nothing stays near -0.7
    assert rows[-1]["return_mean"] >= 0.5, [r["return_mean"] for r in rows]


def test_run_writes_tensorboard_events_and_curve(trained):
    run_dir, out = trained
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"))
    acc.Reload()
    returns = acc.Scalars("charts/episodic_return")
    assert len(returns) >= 5 and returns[-1].step >= 14_000
    assert "losses/td_loss" in acc.Tags()["scalars"] and "speed/env_steps_per_s" in acc.Tags()["scalars"]
    png = run_dir / "learning_curve.png"
    assert f"[MAIN] Learning curve {png}" in out
    assert cv2.imread(str(png)) is not None


def test_plot_on_demand(trained, tmp_path):
    run_dir, _ = trained
    (run_dir / "learning_curve.png").unlink()
    proc, out = run(["--plot", str(run_dir)], uuid.uuid4().hex)
    assert proc.returncode == 0, out
    assert cv2.imread(str(run_dir / "learning_curve.png")).shape[1] >= 800
    proc, out = run(["--plot", str(tmp_path)], uuid.uuid4().hex)
    assert proc.returncode == 2 and "metrics.jsonl does not exist" in out


def test_eval_plays_greedy_episodes_and_records_video(trained, tmp_path):
    run_dir, _ = trained
    video = tmp_path / "catch.mp4"
    proc, out = run(["--eval", str(run_dir), "--episodes", "50", "--video", str(video)], uuid.uuid4().hex)
    assert proc.returncode == 0, out[-3000:]
    summary = next(line for line in out.splitlines() if line.startswith("[EVAL] tests.catch_env:Catch-v0: 50 episodes"))
    mean = float(summary.split("return mean ")[1].split(",")[0])
    assert mean >= 0.6, summary
    cap = cv2.VideoCapture(str(video))
    ok, frame = cap.read()
    assert ok and frame.shape[:2] == (84, 84)  # the game's own resolution
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 6  # one catch episode: 6 steps
    results = json.loads((run_dir / "eval.json").read_text())
    assert results["episodes"] == 50 and len(results["returns"]) == 50 and results["epsilon"] == 0.0
    assert results["return_mean"] == pytest.approx(mean, abs=0.01) and not results["all_episodes_identical"]


def test_eval_result_warns_when_every_episode_was_the_same_game(tmp_path):
    from pipeline.evaluation.evaluate import EvalResult

    same = EvalResult("SuperMarioBros-1-1-v0", [1019.0] * 5, [300] * 5, [1116.0] * 5, [False] * 5,
                      action_digests=["ab12"] * 5)
    assert same.identical and "all 5 episodes were the same game" in same.summary()
    data = json.loads(same.write(tmp_path / "eval.json").read_text())
    assert data["all_episodes_identical"] and data["distances"] == [1116.0] * 5 and data["flags"] == [False] * 5
    varied = EvalResult("x", [1.0, 1.0], [6, 6], [], [], epsilon=0.05, action_digests=["ab12", "cd34"])
    assert not varied.identical and "Warning" not in varied.summary() and "epsilon 0.05" in varied.summary()
