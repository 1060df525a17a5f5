"""The rollout's epsilon-greedy acting: the forward pass runs only on a step where some env acts
greedily, and the actions a seed plays do not depend on whether it ran."""
import numpy as np
import torch

from pipeline.actors.rollout import Rollout
from tests.test_drop_mode import FiveStepEnvs


class CountingQ(torch.nn.Module):
    """Q prefers action 1 everywhere; counts its forward passes."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return torch.tensor([[0.0, 1.0]]).repeat(len(x), 1)


class RecordingEnvs(FiveStepEnvs):
    def __init__(self, num_envs):
        super().__init__(num_envs)
        self.played = []

    def step(self, actions):
        self.played.append(np.asarray(actions).copy())
        return super().step(actions)


def _play(eps, steps=40, M=8, seed=3):
    env, q = RecordingEnvs(M), CountingQ()
    rollout = Rollout(env, q, 4, False, seed=seed)
    for _ in range(steps):
        rollout.step(eps)
    return np.stack(env.played), q.calls


def _expected(eps, steps=40, M=8, seed=3):
    """The rollout's draws, made by hand: an explore draw and a random action per env each step."""
    rng = np.random.default_rng(seed)
    out, forwards = [], 0
    for _ in range(steps):
        explore = rng.random(M) < eps
        random_actions = rng.integers(0, 2, M)
        forwards += not explore.all()
        out.append(np.where(explore, random_actions, 1))
    return np.stack(out), forwards


def test_at_epsilon_one_no_forward_pass_runs_and_the_seed_plays_its_random_actions():
    played, calls = _play(1.0)
    want, forwards = _expected(1.0)
    assert calls == 0 and forwards == 0
    np.testing.assert_array_equal(played, want)


def test_a_step_with_any_greedy_env_runs_one_forward_pass_and_the_same_draws_decide():
    """At epsilon 0.9 over 8 envs about 43% of the steps explore in every env: those skip the
    forward pass; the others run one for the batch, and the greedy envs take its action."""
    played, calls = _play(0.9, steps=200)
    want, forwards = _expected(0.9, steps=200)
    np.testing.assert_array_equal(played, want)
    assert calls == forwards and 0 < calls < 200
    played, calls = _play(0.0, steps=10)
    assert calls == 10 and (played == 1).all()
