"""--track: Weights & Biases, tested offline (WANDB_MODE=offline writes the run under the run's folder:
its config and the synced TensorBoard scalars go into the run's .wandb record stream)."""
import os
import uuid

import pytest

from config_optimized import Config, ConfigError
from pipeline.settings.check import validate
from tests.proc_utils import CATCH, check_clean, run
from tests.test_config import hw


def test_track_needs_wandb_and_tensorboard(monkeypatch):
    import pipeline.records.tracking

    cfg = Config().replace(env="ALE/Pong-v5", track=True)
    assert validate(cfg, hw(2)) == []
    with pytest.raises(ConfigError, match="--track True: sends the TensorBoard events to W&B; leave --tensorboard on"):
        validate(cfg.replace(tensorboard=False), hw(2))
    monkeypatch.setattr(pipeline.records.tracking, "available", lambda: False)
    with pytest.raises(ConfigError, match=r"needs the wandb package, which is not installed: pip install 'fast-dqn\[track\]'"):
        validate(cfg, hw(2))


@pytest.mark.slow
def test_track_offline_writes_the_wandb_run_with_the_config(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    proc, out = run([*CATCH, "--run-dir", str(run_dir), "--total-steps", "2000", "--track", "--seed", "4",
                     "--replay-ratio", "1"], mark,  # what is tracked, not what is learned: a quarter of the updates
                    timeout=300)
    assert proc.returncode == 0, out[-3000:]
    runs = list((run_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, os.listdir(run_dir / "wandb")
    run_id = (run_dir / "wandb_run_id").read_text()
    assert runs[0].name.endswith(run_id)
    # offline, W&B keeps the config and the history in the run's .wandb record stream (wandb sync uploads it)
    stream = next(runs[0].glob("*.wandb")).read_bytes()
    for text in (b"tests.catch_env:Catch-v0", b"replay_ratio", b"git_commit", b"charts/episodic_return"):
        assert text in stream, text
    check_clean(proc, mark)
