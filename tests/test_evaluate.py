"""Evaluation plays through the collectors' env batch and Rollout: every env plays a quota of
whole games fixed beforehand, and a game past the step limit is scored where it stands."""
import re

import numpy as np
import pytest
import torch

from pipeline.evaluation.evaluate import env_quotas, play_games
from pipeline.actors.rollout import Rollout
from tests.run_folders import make_run
from wrappers import BatchedEnv
from wrappers.options import EnvOptions

CATCH = "tests.catch_env:Catch-v0"
CATCH_STEPS = 6  # the ball falls from the top row to the paddle's in six steps


class StayPut(torch.nn.Module):
    """Q-values that always pick 'stay' (action 1)."""

    def forward(self, x):
        q = torch.zeros(x.shape[0], 3)
        q[:, 1] = 1.0
        return q


def _rollout(num_envs, seed=0):
    env = BatchedEnv(CATCH, EnvOptions(frame_stack=4, episodic_life=False, clip_rewards=False), num_envs)
    return Rollout(env, StayPut(), 4, False, seed)


def test_quotas_are_fixed_and_add_up():
    assert env_quotas(10, 8) == [2, 2, 1, 1, 1, 1, 1, 1]
    assert env_quotas(3, 3) == [1, 1, 1] and sum(env_quotas(101, 8)) == 101


@pytest.mark.parametrize("episodes,num_envs", [(5, 2), (7, 3)])
def test_each_env_plays_its_quota_of_whole_games(episodes, num_envs):
    rollout = _rollout(num_envs)
    games = play_games(rollout, episodes, 0.0, 27_000)
    rollout.env.close()
    assert len(games) == episodes
    assert all(g.length == CATCH_STEPS and g.ret in (-1.0, 1.0) and np.isnan(g.distance) for g in games)
    # a greedy 'stay' catches a ball only above where the paddle starts: the digests tell games apart
    # by their actions alone, so every greedy game here is the same six actions
    assert len({g.actions for g in games}) == 1


def test_epsilon_varies_the_actions():
    rollout = _rollout(2)
    games = play_games(rollout, 6, 1.0, 27_000)
    rollout.env.close()
    assert len({g.actions for g in games}) > 1


def test_each_game_counts_the_random_actions_of_its_last_steps():
    """A catch game lasts 6 agent steps, fewer than NEAR_END: greedy, none of them is random;
    at epsilon 1, every one; a game cut at the step limit counts its steps up to the cut."""
    from pipeline.evaluation.evaluate import NEAR_END

    assert CATCH_STEPS < NEAR_END
    for eps, want in ((0.0, 0), (1.0, CATCH_STEPS)):
        rollout = _rollout(2)
        games = play_games(rollout, 4, eps, 27_000)
        rollout.env.close()
        assert [g.random_near_end for g in games] == [want] * 4
    rollout = _rollout(2)
    games = play_games(rollout, 2, 1.0, 3)
    rollout.env.close()
    assert [g.random_near_end for g in games] == [3, 3]


def test_a_game_past_the_step_limit_is_scored_where_it_stands_and_its_env_plays_no_more():
    rollout = _rollout(2)
    seen = []
    games = play_games(rollout, 4, 0.0, 3, on_step=lambda fields: seen.append(fields["flags"].copy()))
    rollout.env.close()
    assert [(g.ret, g.length) for g in games] == [(0.0, 3)] * 2  # each env cut once, then retired
    assert len(seen) == 3  # no step after both envs retired


def test_eval_refuses_the_training_options_it_would_ignore(capsys):
    """--eval plays with the checkpoint's settings: an option it would not use is an error that
    names it and what --eval takes, before anything is read."""
    from mario_rl_optimized import main

    assert main(["--eval", "runs/none", "--lr", "0.001", "--frame-skip", "2"]) == 2
    err = capsys.readouterr().err
    assert "--frame-skip, --lr: --eval plays with the settings the checkpoint was trained with" in err
    assert "--sticky-actions" in err and "--noop-max" in err
    assert main(["--eval", "runs/none", "--sticky-actions", "1"]) == 2
    assert "--sticky-actions 1.0: must be -1" in capsys.readouterr().err
    assert main(["--eval", "runs/none", "--noop-max", "-1"]) == 2
    assert "--noop-max -1: must be 0" in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["--push-to-hub", "a/b", "--lr", "0.001"], "--lr: --push-to-hub shares the run as it was trained"),
    (["--push-to-hub", "a/b", "--eval-epsilon", "2"], "--eval-epsilon 2.0: must be in [0, 1]"),
    (["--push-to-hub", "a/b", "--episodes", "0"], "--episodes 0: must be a positive integer"),
    (["--plot", "runs/none", "--env", "ALE/Pong-v5"], "--env: --plot draws the curve of a run as it was trained; "
                                                       "it takes no training option"),
    (["--eval", "runs/none", "--plot", "runs/none"], "--eval, --plot: give one of them"),
    (["--env", "ALE/Pong-v5", "--video", "a.mp4"], "--video records an episode played by --eval"),
    (["--eval", "runs/none", "--private"], "--private is for --push-to-hub REPO"),
])
def test_the_modes_that_do_not_train_refuse_what_they_would_drop(argv, message, capsys, tmp_path, monkeypatch):
    """--push-to-hub, --plot and --eval each read a few options; any other (a training option, a
    second mode, --video or --private outside their mode) is one error line naming it, exit 2,
    before anything is read or written."""
    from mario_rl_optimized import main

    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_eval_plays_with_the_sticky_actions_and_noop_starts_it_is_given(tmp_path, monkeypatch):
    """The same Pong weights played as trained (ALE v5: sticky actions 0.25, 0-30 no-op starts)
    and with neither: the envs are built with what was asked, and eval.json names it."""
    import json

    import wrappers
    from mario_rl_optimized import main

    built = []

    class Recorded(wrappers.BatchedEnv):  # the real env batch, its options noted
        def __init__(self, env_id, opts, *args, **kwargs):
            built.append(opts)
            super().__init__(env_id, opts, *args, **kwargs)

    monkeypatch.setattr(wrappers, "BatchedEnv", Recorded)
    run = make_run(tmp_path, "ALE/Pong-v5", 6)
    assert main(["--eval", str(run), "--episodes", "2"]) == 0
    trained = json.loads((run / "eval.json").read_text())
    assert (trained["sticky_actions"], trained["noop_max"]) == (0.25, 30)
    assert (built[-1].sticky_actions, built[-1].noop_max) == (-1.0, 30)  # -1: the env id's own, 0.25 for v5
    assert main(["--eval", str(run), "--episodes", "2", "--sticky-actions", "0", "--noop-max", "0"]) == 0
    plain = json.loads((run / "eval.json").read_text())
    assert (plain["sticky_actions"], plain["noop_max"]) == (0.0, 0) == (built[-1].sticky_actions, built[-1].noop_max)
    assert len(plain["returns"]) == 2 and not built[-1].episodic_life  # whole games, as every --eval plays
    history = [json.loads(line) for line in (run / "eval_history.jsonl").read_text().splitlines()]
    assert [(h["sticky_actions"], h["noop_max"]) for h in history] == [(0.25, 30), (0.0, 0)]  # both kept
    assert history[0]["returns"] == trained["returns"] and history[1]["returns"] == plain["returns"]


def test_a_game_without_sticky_actions_refuses_them_at_eval(tmp_path, capsys):
    import json

    from mario_rl_optimized import main

    run = make_run(tmp_path)
    assert main(["--eval", str(run), "--episodes", "1", "--sticky-actions", "0.25"]) == 2
    assert "has no sticky actions or no-op starts to change; --sticky-actions applies to ALE" in capsys.readouterr().err
    assert not (run / "eval.json").exists()
    assert main(["--eval", str(run), "--episodes", "1"]) == 0
    assert json.loads((run / "eval.json").read_text())["sticky_actions"] is None


def _one_action(state: dict, action: int) -> dict:
    """Nature-network weights whose Q-values are 1 for ``action`` and 0 for the others, whatever the frame."""
    state = {k: v.clone() for k, v in state.items()}
    state["head.q.2.weight"].zero_()
    state["head.q.2.bias"].zero_()
    state["head.q.2.bias"][action] = 1.0
    return state


def test_eval_plays_the_weight_average_where_the_checkpoint_keeps_one(tmp_path):
    """A checkpoint of a --weight-average run holds the online weights and their average: --eval
    plays the average. Here the online weights always move left and the average always stays,
    and the games played read as those of a checkpoint that always stays, not always left."""
    import json

    from mario_rl_optimized import main

    def played(name, model_action, average_action=None):
        (tmp_path / name).mkdir()
        run = make_run(tmp_path / name)
        state = torch.load(run / "checkpoint.pt", weights_only=False)
        weights = state["learner"]["model"]
        state["learner"]["model"] = _one_action(weights, model_action)
        if average_action is not None:
            state["learner"]["average"] = _one_action(weights, average_action)
        torch.save(state, run / "checkpoint.pt")
        assert main(["--eval", str(run), "--episodes", "12", "--seed", "5"]) == 0
        return json.loads((run / "eval.json").read_text())["returns"]

    stays, lefts = played("stays", 1), played("lefts", 0)
    assert stays != lefts  # the two policies play the same games differently
    assert played("averaged", 0, average_action=1) == stays


def test_a_game_that_stands_still_is_scored_where_it_stands_not_waited_out():
    """WallCatch reports the paddle's column as x: a greedy 'stay' never passes its furthest x,
    so with a 3-step limit each game ends at its 4th step (its first sets the furthest) as stood
    still, and its env plays no more; with a limit past the game's length none stands still."""
    def wall(limit):
        env = BatchedEnv("tests.catch_env:WallCatch-v0", EnvOptions(frame_stack=4, episodic_life=False,
                                                                    clip_rewards=False), 2)
        rollout = Rollout(env, StayPut(), 4, False, 0)
        try:
            return play_games(rollout, 4, 0.0, 27_000, stand_still=limit)
        finally:
            env.close()
    games = wall(3)
    assert [(g.length, g.stood, g.ret) for g in games] == [(4, True, 0.0)] * 2  # each env cut once, then retired
    games = wall(CATCH_STEPS)
    assert len(games) == 4 and all(g.length == CATCH_STEPS and not g.stood for g in games)
    # a game with no x (Atari's NaN) never stands still
    rollout = _rollout(2)
    games = play_games(rollout, 2, 0.0, 27_000, stand_still=1)
    rollout.env.close()
    assert all(g.length == CATCH_STEPS and not g.stood for g in games)


def test_a_game_that_comes_out_of_a_pipe_at_a_smaller_x_is_not_standing_still():
    """An x that jumps further than Mario moves in a step changed area (a pipe): the game is
    measured from where he comes out, so it plays to its end; standing there is still cut."""
    from tests.test_stall import ScriptedX, ZeroQ, rules

    def play(xs):
        rollout = Rollout(ScriptedX(xs, ends=[len(xs) - 1]), ZeroQ(), 4, False, seed=0, game=rules(0))
        return play_games(rollout, 1, 0.0, 27_000, stand_still=4)

    out_of_a_pipe = [3000, 3001, 3002] + list(range(40, 52))
    assert [(g.length, g.stood) for g in play(out_of_a_pipe)] == [(len(out_of_a_pipe), False)]
    [game] = play([3000, 3001, 3002] + [40] * 10)
    assert game.stood and game.length == 3 + 1 + 4  # its first step out sets the furthest, then 4 still


def test_an_evaluation_plays_every_game_asked_for_though_every_env_stood_still(tmp_path, monkeypatch):
    """Twelve games of a policy that always stays on WallCatch, standing still after 3 steps:
    each of the first batch's 8 envs is cut once and retired, and the 4 games still owed are
    played in a fresh batch, so the evaluation holds 12 games, every one scored as stood."""
    from pipeline.evaluation import evaluate as ev

    run = make_run(tmp_path, env="tests.catch_env:WallCatch-v0")
    state = torch.load(run / "checkpoint.pt", weights_only=False)
    state["learner"]["model"] = _one_action(state["learner"]["model"], 1)  # always stay
    torch.save(state, run / "checkpoint.pt")
    monkeypatch.setattr(ev, "STAND_STILL_STEPS", 3)
    res = ev.evaluate(run, episodes=12, seed=5, log=lambda *_: None)
    assert len(res.returns) == len(res.stood) == 12 and all(res.stood)
    assert ev.EVAL_ENVS == 8  # so that a second batch was needed


def _keep(run, name: str, action: int, best: dict | None) -> str:
    """A copy of the run's checkpoint as ``name``, playing ``action`` always, kept for ``best``; its SHA-256."""
    import hashlib

    state = torch.load(run / "checkpoint.pt", weights_only=False)
    state["learner"]["model"] = _one_action(state["learner"]["model"], action)
    if best is not None:
        state["best"] = best
    torch.save(state, run / name)
    return hashlib.sha256((run / name).read_bytes()).hexdigest()


def test_eval_of_a_run_plays_the_weights_it_kept_and_says_which(tmp_path, capsys):
    """--eval RUN plays best_eval.pt, else best.pt, else checkpoint.pt, names the file and what
    kept it, and eval.json names the same file and its SHA-256; a .pt given plays that file."""
    import json

    from mario_rl_optimized import main

    run = make_run(tmp_path)
    kept = _keep(run, "best_eval.pt", 0, {"metric": "return", "score": 0.4, "agent_steps": 50_000, "games": 20,
                                          "epsilon": 0.05})
    best = _keep(run, "best.pt", 2, {"metric": "return", "score": 0.85, "agent_steps": 40_000, "updates": 9})

    def played(*argv):
        assert main(["--eval", *argv, "--episodes", "2"]) == 0
        out = capsys.readouterr().out
        said = next(line for line in out.splitlines() if line.startswith("[EVAL] Playing "))
        return said, json.loads((run / "eval.json").read_text())

    said, res = played(str(run))
    assert said == (f"[EVAL] Playing {run / 'best_eval.pt'}: the weights the run's evaluations kept (at 50,000 agent "
                    f"steps; confirmed on fresh games: mean return 0.40 over 20 games at epsilon 0.05); "
                    f"{run / 'checkpoint.pt'} holds the last weights")
    assert (res["checkpoint"], res["weights_sha256"]) == (str(run / "best_eval.pt"), kept)
    (run / "best_eval.pt").unlink()
    said, res = played(str(run))
    assert said.startswith(f"[EVAL] Playing {run / 'best.pt'}: the weights of the run's best mean return of 20 "
                           "training games (0.85, at 40,000 agent steps)")
    assert (res["checkpoint"], res["weights_sha256"]) == (str(run / "best.pt"), best)
    said, res = played(str(run / "checkpoint.pt"))
    assert said == f"[EVAL] Playing {run / 'checkpoint.pt'}: the run's last weights"
    assert res["checkpoint"] == str(run / "checkpoint.pt")
    (run / "best.pt").unlink()
    assert played(str(run))[1]["checkpoint"] == str(run / "checkpoint.pt")


def test_the_video_is_h264_and_films_the_games_asked_for(tmp_path, capsys):
    """--video writes H.264 (the sample entry reads avc1, as browsers and the Hub's preview need;
    OpenCV's writer gave mp4v) at the game's own size; --video-episodes 3 films three whole games
    of catch one after another: each game's first screen and one after each of its six steps."""
    from mario_rl_optimized import main
    from tests.mp4 import video_track

    run = make_run(tmp_path)
    one, three = tmp_path / "one.mp4", tmp_path / "three.mp4"
    assert main(["--eval", str(run), "--episodes", "4", "--video", str(one)]) == 0
    assert main(["--eval", str(run), "--episodes", "4", "--video", str(three), "--video-episodes", "3"]) == 0
    assert f"[EVAL] video of games 1-3 (H.264): {three}" in capsys.readouterr().out
    assert video_track(one) == video_track(one).__class__("isom", "avc1", 1 + CATCH_STEPS, 84, 84)
    assert (video_track(three).codec, video_track(three).frames) == ("avc1", 3 * (1 + CATCH_STEPS))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.mp4", "run", "three.mp4"]  # no .tmp left


@pytest.mark.parametrize("argv,message", [
    (["--episodes", "2", "--video", "v.mp4", "--video-episodes", "3"], "--video-episodes 3: film 1 to 2 games"),
    (["--video-episodes", "2"], "--video-episodes says how many games --video films; add --video PATH.mp4"),
    (["--video", "v.avi"], "--video 'v.avi': give a path ending in .mp4"),
])
def test_video_options_that_cannot_be_filmed_are_refused_before_any_game(argv, message, tmp_path, capsys, monkeypatch):
    from mario_rl_optimized import main

    run = make_run(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["--eval", str(run), *argv]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"] and not (run / "eval.json").exists()


def test_a_play_that_fails_leaves_no_half_written_video(tmp_path):
    """CatchCrash's env raises mid-game: the error comes through and neither the MP4 nor its
    .tmp is left."""
    from mario_rl_optimized import main

    run = make_run(tmp_path, "tests.catch_env:CatchCrash-v0")
    video = tmp_path / "crash.mp4"
    with pytest.raises(RuntimeError, match="injected emulator fault"):
        main(["--eval", str(run), "--episodes", "200", "--video", str(video), "--video-episodes", "100"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_eval_says_how_it_is_getting_on_while_a_game_plays(tmp_path, capsys, monkeypatch):
    """A line as each game ends, and one every PROGRESS_S while none does (a Pong game is minutes
    on a CPU): here every step, so the lines before the first game's end count its steps."""
    from mario_rl_optimized import main
    from pipeline.evaluation import evaluate

    monkeypatch.setattr(evaluate, "PROGRESS_S", 0.0)
    run = make_run(tmp_path)
    assert main(["--eval", str(run), "--episodes", "2"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[EVAL] ")]
    assert lines[1].startswith("[EVAL] Playing: 0/2 games over, 2 agent steps in ")  # two envs, one step each
    first = next(i for i, line in enumerate(lines) if line.startswith("[EVAL] game 1/2: "))
    # six steps, then the step that resets the envs reports their games (it plays none)
    assert first == 2 + CATCH_STEPS and lines[first - 1].startswith("[EVAL] Playing: 0/2 games over, 12 agent steps in ")
    assert re.fullmatch(r"\[EVAL\] game 1/2: return -?1\.0, length 6", lines[first])
    assert re.fullmatch(r"\[EVAL\] game 2/2: return -?1\.0, length 6", lines[first + 1])


def test_a_damaged_kept_file_is_named_with_its_whole_cause_and_advice_for_playing(tmp_path, capsys):
    """--eval of a run whose best.pt is damaged: one line naming it, torch's cause whole (it was
    cut at 120 characters), and what to play instead, not a resume's advice."""
    from mario_rl_optimized import main

    run = make_run(tmp_path)
    (run / "best.pt").write_bytes(b"PK\x03\x04 truncated")
    assert main(["--eval", str(run)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: checkpoint {run / 'best.pt'} is truncated or corrupt (")
    assert err[0].endswith(f"); play another of the run's weights ({run / 'checkpoint.pt'})") and "--resume" not in err[0]
    cause = err[0].split(" is truncated or corrupt (", 1)[1].rsplit("); play another", 1)[0]
    assert len(cause) > 120 and cause.startswith("RuntimeError: PytorchStreamReader")  # torch's whole message
