"""--track: the run on Weights & Biases (the optional extra ``track``), as CleanRL does it: the
TensorBoard events are synced (the same tags, no second logging path) and the run record is the
W&B config. A resumed run continues the same W&B run (its id is kept in the run's folder).
WANDB_MODE=offline writes the W&B run under <run_dir>/wandb for a later ``wandb sync``.
"""
from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

from .files import TRACKING_ID_FILE

INSTALL = "pip install 'fast-dqn[track]' (or pip install wandb)"


class TrackingError(RuntimeError):
    pass


def available() -> bool:
    return importlib.util.find_spec("wandb") is not None


class Tracker:
    """Started before the TensorBoard writer exists, so W&B can hook it."""

    def __init__(self, run_dir: Path, project: str, entity: str, record: dict):
        import wandb

        id_path = run_dir / TRACKING_ID_FILE
        run_id = id_path.read_text().strip() if id_path.exists() else uuid.uuid4().hex[:16]
        id_path.write_text(run_id)
        try:
            self.run = wandb.init(project=project, entity=entity or None, name=run_dir.name, id=run_id,
                                  resume="allow", dir=str(run_dir),
                                  config={**record["config"], "profile": record["profile"],
                                          "hardware": record["hardware_summary"], "git_commit": record["git_commit"]},
                                  sync_tensorboard=True, save_code=False)
        except Exception as e:  # no login, no network, a wrong entity: say so before any process starts
            raise TrackingError(f"--track: W&B did not start ({type(e).__name__}: {e}); run 'wandb login' or set "
                                "WANDB_API_KEY, or WANDB_MODE=offline to sync later with 'wandb sync'") from None

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None
