"""Weights that are not finite never leave the learner process: the trainer's weight push and
its periodic (and best, and evaluation) checkpoints refuse them, and the last good checkpoint
stays on disk."""
import time
from types import SimpleNamespace

import pytest
import torch

from config_optimized import Config
from pipeline.actors.no_ray import NoRayCollectors
from pipeline.records import checkpoint as ckpt
from pipeline.agent.learner import Learner, TrainingDiverged
from pipeline.records.books import RunBooks
from pipeline.records.counters import RunCounters
from pipeline.replay import Replay
from pipeline.settings.hardware import Hardware
from pipeline.runtime.wiring import Pipeline


def _parts(run_dir, pushed):
    """A Pipeline's real learner, replay and run books, and only the other parts ``publish`` reads (no processes, no shared memory); the weight pushes land in ``pushed``."""
    torch.manual_seed(0)
    cfg = Config.of(amp=False, run_dir=str(run_dir), tensorboard=False)
    learner = Learner(cfg.learner, 4, 6, torch.device("cpu"))
    replay = Replay.of(400, 1, 4)
    hw = Hardware(2, 24 * 2**30, 20 * 2**30, "test cpu", True, False, None, 0, False)
    books = RunBooks(cfg, hw, lambda line: None, [], RunCounters(), time.monotonic(), learner, replay, 6)
    control = SimpleNamespace(publish=lambda model: pushed.append({k: v.clone() for k, v in model.state_dict().items()}))
    return SimpleNamespace(learner=learner, books=books, control=control, remote=NoRayCollectors())


@pytest.mark.parametrize("poisoned", ["weight", "batchnorm"])
def test_non_finite_weights_are_neither_pushed_nor_checkpointed(tmp_path, poisoned):
    pushed = []
    p = _parts(tmp_path, pushed)
    publish = lambda: Pipeline.publish(p)  # noqa: E731

    def save_checkpoint(name="checkpoint.pt", best=None):  # at agent step 0, no collector started, no evaluation
        return p.books.save_checkpoint(0, 0, float("-inf"), name, best)
    publish()
    good = save_checkpoint()
    assert len(pushed) == 1 and good == tmp_path / ckpt.CHECKPOINT_NAME
    # what the learner's own checks cannot see: a step (or a forward) that wrote NaN
    name, tensor = next((n, v) for n, v in p.learner.model.state_dict().items()
                        if v.is_floating_point() and ("running_var" in n) == (poisoned == "batchnorm"))
    with torch.no_grad():
        tensor.view(-1)[0] = float("nan")
    assert not p.learner.is_finite()
    with pytest.raises(TrainingDiverged, match="not finite after update 0; neither published nor saved"):
        publish()
    assert len(pushed) == 1
    for save in (save_checkpoint, lambda: save_checkpoint("best.pt", best={"score": 1.0})):
        with pytest.raises(TrainingDiverged, match="not finite"):
            save()
    assert not (tmp_path / "best.pt").exists() and not (tmp_path / "checkpoint.pt.tmp").exists()
    kept = ckpt.load(good)["learner"]["model"]
    assert all(torch.isfinite(v).all() for v in kept.values() if v.is_floating_point()), name
