"""Proof that the pipeline learns: the catch game (tests/catch_env.py) trained through collector
processes, rings, the consolidation thread, replay and learner must beat a random policy by a
margin a broken learner cannot reach; then the user-facing outputs of that run are checked:
metrics.jsonl, TensorBoard events, the learning-curve PNG, --eval and --video."""
import dataclasses
import json
import uuid
from pathlib import Path

import cv2
import pytest

from tests.proc_utils import run

pytestmark = pytest.mark.slow

RANDOM_RETURN = -0.71  # mean return of uniform random actions over 2,000 episodes (seed 0)


@pytest.fixture(scope="module")
def trained(catch_time_to_score):
    """The pipeline run of the shared ``--time-to-score --quick`` run (tests/conftest.py): catch
    trained through collector processes, rings, consolidation, replay and learner until the mean
    return of the last 20 games reached 0.8; it left no process and no shared memory behind."""
    tts = catch_time_to_score
    assert tts["proc"].returncode == 0, tts["proc"].stdout[-3000:] + tts["proc"].stderr[-3000:]
    assert tts["left"] == {"processes": [], "segments": []}, "the run left processes or shared memory behind"
    data = json.loads((tts["dir"] / "tts.json").read_text())
    run_dir = tts["dir"] / Path(data["runs"][0]["run_dir"]).name
    return run_dir, (run_dir / "train.log").read_text()


def test_catch_is_learned_through_the_full_pipeline(trained):
    run_dir, log = trained
    games = [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert "Stopped (target_score)" in log and rows[-1]["updates"] > 300
    # 20 games in a row, at epsilon near 0.02, averaged 0.8 (the stop; games that ended during the
    # shutdown follow them in the file): a learner that learns nothing stays near -0.7
    returns = [g["return"] for g in games]
    best = max(sum(returns[i:i + 20]) / 20 for i in range(len(returns) - 19))
    assert len(games) > 200 and best >= 0.8, best
    # the first games, played at epsilon ~1, are near random: learning made the difference
    first = [g["return"] for g in games[:100]]
    assert sum(first) / len(first) < RANDOM_RETURN + 0.3, first


def test_run_writes_tensorboard_events_and_curve(trained):
    run_dir, out = trained
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tb"))
    acc.Reload()
    returns = acc.Scalars("charts/episodic_return")
    assert len(returns) >= 5 and returns[-1].step >= 2_000
    assert "losses/td_loss" in acc.Tags()["scalars"] and "speed/agent_steps_per_s" in acc.Tags()["scalars"]
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
    proc, out = run(["--eval", str(run_dir), "--episodes", "100", "--video", str(video)], uuid.uuid4().hex)
    assert proc.returncode == 0, out[-3000:]
    summary = next(line for line in out.splitlines() if line.startswith("[EVAL] tests.catch_env:Catch-v0: 100 episodes"))
    mean = float(summary.split("return mean ")[1].split(",")[0])
    # weights that were not loaded (a fresh network) play near random, -0.7. The run stopped at the
    # first window of 20 games to reach 0.8 after ~570 updates, a lucky window of a policy still
    # moving, so its greedy play reads lower: 0.18 and 0.11 over 200 games (two eval seeds), and
    # -0.04 to 0.52 over 50. Over 100 games the mean's noise is ~0.1, so a bound 0.4 above random
    # keeps ~4 noise widths from both a random and a learned policy.
    assert mean >= RANDOM_RETURN + 0.4, summary
    cap = cv2.VideoCapture(str(video))
    ok, frame = cap.read()
    assert ok and frame.shape[:2] == (84, 84)  # the game's own resolution
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 7  # one catch game: its first screen and one after each of 6 steps
    results = json.loads((run_dir / "eval.json").read_text())
    assert results["episodes"] == 100 and len(results["returns"]) == 100 and results["epsilon"] == 0.0
    assert results["return_mean"] == pytest.approx(mean, abs=0.01) and not results["all_episodes_identical"]


def test_eval_result_warns_when_every_episode_was_the_same_game(tmp_path):
    from pipeline.evaluation.evaluate import EvalResult

    same = EvalResult("SuperMarioBros-1-1-v0", [1019.0] * 5, [300] * 5, [1116.0] * 5, [False] * 5,
                      action_digests=["ab12"] * 5)
    assert same.identical and "all 5 episodes were the same game" in same.summary() and "--noop-max" in same.summary()
    data = json.loads(same.write(tmp_path / "eval.json").read_text())
    assert data["all_episodes_identical"] and data["distances"] == [1116.0] * 5 and data["flags"] == [False] * 5
    varied = EvalResult("x", [1.0, 1.0], [6, 6], [], [], epsilon=0.05, action_digests=["ab12", "cd34"])
    assert not varied.identical and "Warning" not in varied.summary() and "epsilon 0.05" in varied.summary()
    noisy = EvalResult("SuperMarioBros-1-1-v0", [3000.0, 1000.0, 900.0], [300, 100, 90], [3161.0, 1126.0, 1000.0],
                       [True, False, False], epsilon=0.05, random_near_end=[0, 2, 0])
    assert "flag reached 1/3 (1 of the 2 misses with a random action in their last 8 steps)" in noisy.summary()
    assert "misses" not in dataclasses.replace(noisy, epsilon=0.0).summary()  # greedy: no random action to count


def test_a_loaded_agent_plays_the_games_eval_plays(trained):
    """load(RUN) from Python: the trained weights act on agent.make_env()'s observations as --eval
    plays them (the same actions and return on each seed), and catch the ball far more often than
    a random policy."""
    import hashlib

    from mario_rl_optimized import load
    from pipeline.evaluation.evaluate import evaluate

    run_dir, _ = trained
    agent = load(run_dir)
    env = agent.make_env()
    returns, seen = [], set()
    for seed in range(50):
        obs, _ = env.reset(seed=seed)
        actions, ret, done = [], 0.0, False
        while not done:
            actions.append(agent.act(obs))
            obs, reward, terminated, truncated, _ = env.step(actions[-1])
            ret, done = ret + reward, terminated or truncated
        played = evaluate(run_dir, 1, seed=seed, log=lambda *_: None)
        assert played.returns == [ret] and played.action_digests == [hashlib.sha1(bytes(actions)).hexdigest()]
        returns.append(ret)
        seen.update(actions)
    env.close()
    assert len(seen) > 1 and sum(returns) / len(returns) >= RANDOM_RETURN + 0.4, returns
