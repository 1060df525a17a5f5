"""Evaluation plays through the collectors' env batch and Rollout: every env plays a quota of
whole games fixed beforehand, and a game past the step limit is scored where it stands."""
import numpy as np
import pytest
import torch

from pipeline.evaluation.evaluate import env_quotas, play_games
from pipeline.rollout import Rollout
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
