"""--value-check: the discounted returns that followed each state in a saved replay, and the
learned Q(s, a) of the taken actions beside them."""
import math

import numpy as np
import pytest
import torch

from bench.value_check import discounted_returns, value_check
from config_optimized import Config
from pipeline.transport.transition import FIRST, LAST, TERM, TRUNC
from tests.test_replay_snapshot import M, catch_replay
from tests.test_resume import CATCH, _learner, _save_run

G = 0.9


def test_returns_run_to_each_episode_end_and_are_unknown_past_the_stream_or_a_truncation():
    reward = np.array([0, 0, 1, 0, 0, 5, -1, 0, 0, 2], np.float32)
    flags = np.array([FIRST, 0, TERM, LAST, FIRST, 0, TRUNC, LAST, FIRST, 0], np.uint8)
    g = discounted_returns(reward, flags, G)
    assert g[:3] == pytest.approx([G * G, G, 1.0])
    # a LAST record has no action; a truncated episode's returns and the unfinished last one are unknown
    assert all(math.isnan(x) for x in g[3:])


def test_value_check_compares_q_with_the_returns_that_followed(tmp_path):
    run_dir = tmp_path / "run"
    replay = catch_replay(steps=200)
    cfg = Config.of(env=CATCH, run_dir=str(run_dir), amp=False, save_replay=True, buffer_size=4000,
                    envs_per_collector=M, n_step=3, gamma=0.99)
    learner = _learner(cfg)
    _save_run(run_dir, cfg, learner, agent_steps=200 * M, replay=replay)
    first = value_check(run_dir, states_per_stream=16)
    assert first["states"] == 16 * M and -1.0 <= first["mc_return"] <= 1.0
    assert first["bias"] == pytest.approx(first["q_eval"] - first["mc_return"], abs=1e-5)
    # every Q-value one higher (the last layer's bias): the check sees one more of overestimation,
    # on the same states and returns
    with torch.no_grad():
        learner.model.head.q[2].bias += 1.0
    _save_run(run_dir, cfg, learner, agent_steps=200 * M, replay=replay)
    second = value_check(run_dir, states_per_stream=16)
    assert second["mc_return"] == first["mc_return"]
    assert second["bias"] == pytest.approx(first["bias"] + 1.0, abs=1e-4)
    assert second["q_target"] == pytest.approx(first["q_target"], abs=1e-5)  # the target net was left alone
