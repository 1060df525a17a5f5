"""``--profile`` (bench/profile.py) measures what a run runs: its collector acts with the network
the learner trains, the head included."""
import torch

from bench.profile import profiled_collector
from models.weights import flat_size, write_flat
from pipeline.agent.learner import Learner
from pipeline.settings.layers import resolve_config
from tests.test_config import hw


def test_the_profiled_collector_acts_with_the_head_the_learner_trains():
    """The Atari preset's QR-DQN: 51 quantiles per action, in the collectors as in the learner
    (the profile once built its acting net without them, a head no collector runs); the learner's
    weights load into it and it acts."""
    cfg = resolve_config({"env": "ALE/Pong-v5"}, hw(2)).cfg
    assert cfg.learner.quantiles == 51
    collector = profiled_collector(cfg)
    try:
        learner = Learner(cfg.learner, cfg.env_options.frame_stack, collector.env.n_actions, torch.device("cpu"))
        shapes = {k: v.shape for k, v in learner.model.state_dict().items()}
        assert {k: v.shape for k, v in collector.model.state_dict().items()} == shapes
        assert collector.model.head.n_atoms == 51 and flat_size(collector.model) == flat_size(learner.model)
        flat = torch.empty(flat_size(learner.model))
        write_flat(learner.model, flat)
        collector.load_weights(flat)
        frames, fields, played, _ = collector.rollout.step(0.0)  # every env greedy: the acting forward runs
        assert played == cfg.collectors.envs_per_collector
    finally:
        collector.close()
