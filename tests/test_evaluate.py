"""Evaluation plays through the collectors' env batch and Rollout: every env plays a quota of
whole games fixed beforehand, and a game past the step limit is scored where it stands."""
import numpy as np
import pytest
import torch

from pipeline.evaluation.evaluate import env_quotas, play_games
from pipeline.rollout import Rollout
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


def test_a_game_past_the_step_limit_is_scored_where_it_stands_and_its_env_plays_no_more():
    rollout = _rollout(2)
    seen = []
    games = play_games(rollout, 4, 0.0, 3, on_step=lambda fields: seen.append(fields["flags"].copy()))
    rollout.env.close()
    assert [(g.ret, g.length) for g in games] == [(0.0, 3)] * 2  # each env cut once, then retired
    assert len(seen) == 3  # no step after both envs retired
