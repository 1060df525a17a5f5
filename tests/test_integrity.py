"""Weights that are not finite never leave the learner process: the trainer's weight push and
its periodic (and best, and evaluation) checkpoints refuse them, and the last good checkpoint
stays on disk."""
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from config_optimized import Config
from pipeline.distributed.no_ray import NoRayCollectors
from pipeline.records import checkpoint as ckpt
from pipeline.learner import Learner, TrainingDiverged
from pipeline.trainer import Trainer


def _trainer(run_dir, pushed):
    """A Trainer with a real learner and only the parts ``publish`` and ``save_checkpoint`` read
    (no processes, no shared memory); the weight pushes land in ``pushed``."""
    torch.manual_seed(0)
    cfg = Config.of(amp=False, run_dir=str(run_dir))
    t = Trainer.__new__(Trainer)
    t.cfg, t.run_dir, t.n_actions = cfg, run_dir, 6
    t.learner = Learner(cfg.learner, 4, 6, torch.device("cpu"))
    t.base_steps = t.base_episodes = t.samples_trained = t.epoch = 0
    t.best_score, t.wall_offset, t.t_start = float("-inf"), 0.0, time.monotonic()
    t.consolidator = SimpleNamespace(env_steps=0, episodes_total=0, dropped_steps=lambda: 0)
    t.collectors, t.evals, t.remote = SimpleNamespace(launches=0), SimpleNamespace(best=None), NoRayCollectors()
    t.replay = SimpleNamespace(sampler=SimpleNamespace(rng=np.random.default_rng(0)))
    t.control = SimpleNamespace(publish=lambda model: pushed.append({k: v.clone() for k, v in model.state_dict().items()}))
    return t


@pytest.mark.parametrize("poisoned", ["weight", "batchnorm"])
def test_non_finite_weights_are_neither_pushed_nor_checkpointed(tmp_path, poisoned):
    pushed = []
    t = _trainer(tmp_path, pushed)
    t.publish()
    good = t.save_checkpoint()
    assert len(pushed) == 1 and good == tmp_path / ckpt.CHECKPOINT_NAME
    # what the learner's own checks cannot see: a step (or a forward) that wrote NaN
    name, tensor = next((n, v) for n, v in t.learner.model.state_dict().items()
                        if v.is_floating_point() and ("running_var" in n) == (poisoned == "batchnorm"))
    with torch.no_grad():
        tensor.view(-1)[0] = float("nan")
    assert not t.learner.is_finite()
    with pytest.raises(TrainingDiverged, match="not finite after update 0; neither published nor saved"):
        t.publish()
    assert len(pushed) == 1
    for save in (t.save_checkpoint, lambda: t.save_checkpoint("best.pt", best={"score": 1.0})):
        with pytest.raises(TrainingDiverged, match="not finite"):
            save()
    assert not (tmp_path / "best.pt").exists() and not (tmp_path / "checkpoint.pt.tmp").exists()
    kept = ckpt.load(good)["learner"]["model"]
    assert all(torch.isfinite(v).all() for v in kept.values() if v.is_floating_point()), name
