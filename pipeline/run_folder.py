"""A run's folder on disk: clearing an old run for --overwrite and the runs/latest link."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from config_optimized import RUN_FILES, RUNS_ROOT

from .periodic_eval import CANDIDATE_NAME
from .tracking import ID_FILE as TRACKING_ID_FILE

# written by a run besides RUN_FILES (which mark a folder as a run's)
OTHER_FILES = ("learning_curve.png", "checkpoint.pt.tmp", "replay.npz.tmp", "eval.json", CANDIDATE_NAME,
               TRACKING_ID_FILE)
OTHER_FOLDERS = ("tb", "wandb")


def clear_run(run_dir: Path) -> None:
    """--overwrite: the old run's files go before the new run writes any."""
    for name in (*RUN_FILES, *OTHER_FILES):
        (run_dir / name).unlink(missing_ok=True)
    for folder in OTHER_FOLDERS:
        shutil.rmtree(run_dir / folder, ignore_errors=True)


def link_latest(run_dir: Path, root: Path = RUNS_ROOT) -> None:
    """runs/latest points at the newest run under runs/ (what --resume latest continues)."""
    root = root.resolve()
    if run_dir.resolve().parent != root:
        return
    link = root / "latest"
    if link.exists() and not link.is_symlink():
        return  # a real folder from before run folders existed: leave it alone
    tmp = root / f".latest.{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.resolve().name)
        os.replace(tmp, link)
    except OSError:
        pass
