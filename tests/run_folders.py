"""A run folder as training leaves it, for the tests of what reads one (--eval, sharing)."""
import json
from pathlib import Path

import torch

from config_optimized import Config
from models import NetworkSpec, build_model

CATCH = "tests.catch_env:Catch-v0"


def make_run(tmp_path: Path, env: str = CATCH, n_actions: int = 3) -> Path:
    """config.json, a checkpoint of a fresh network that --eval can play, a curve."""
    run = tmp_path / "run"
    run.mkdir()
    cfg = Config.of(env=env, model_arch="nature", seed=3)
    network = NetworkSpec.of(cfg.learner, cfg.env_options.frame_stack, n_actions)
    model = build_model(network)
    state = {"meta": {"env": env, **network.meta, "version": 1},
             "config": cfg.flat(), "learner": {"model": model.state_dict()}}
    torch.save(state, run / "checkpoint.pt")
    (run / "config.json").write_text(json.dumps({"config": cfg.flat(), "profile": "cpu-small",
                                                 "hardware_summary": "CPU: test, 2 cores", "git_commit": "abc"}))
    (run / "learning_curve.png").write_bytes(b"\x89PNG fake")
    return run
