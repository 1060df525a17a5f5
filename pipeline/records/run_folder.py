"""A run's folder on disk: which folder a run writes (new, given or resumed), what marks a folder
as a run's, clearing an old run for --overwrite, and the runs/latest link."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from config_optimized import RESUME_HERE, Config, ConfigError

from .files import CHECKPOINT_NAME, CLEARED_FILES, LATEST_LINK, LOG_NAME, OTHER_FOLDERS, RUN_FILES

RUNS_ROOT = Path("runs")


def clear_run(run_dir: Path) -> None:
    """--overwrite: the old run's files go before the new run writes any; all but train.log, which
    the new run already holds open as its claim on the folder and empties itself (RunLog.clear)."""
    for name in CLEARED_FILES:
        if name != LOG_NAME:
            (run_dir / name).unlink(missing_ok=True)
    for folder in OTHER_FOLDERS:
        shutil.rmtree(run_dir / folder, ignore_errors=True)


def link_latest(run_dir: Path, root: Path = RUNS_ROOT) -> None:
    """runs/latest points at the newest run under runs/ (what --resume latest continues)."""
    root = root.resolve()
    if run_dir.resolve().parent != root:
        return
    link = root / LATEST_LINK
    if link.exists() and not link.is_symlink():
        return  # a real folder from before run folders existed: leave it alone
    tmp = root / f".latest.{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.resolve().name)
        os.replace(tmp, link)
    except OSError:
        pass


def has_run(run_dir: Path) -> bool:
    return run_dir.is_dir() and any((run_dir / name).exists() for name in RUN_FILES)


def resumable(run_dir: Path) -> bool:
    return (run_dir / CHECKPOINT_NAME).is_file()


def latest_run(root: Path = RUNS_ROOT) -> Path:
    """The newest resumable run under ``root``: the ``latest`` link new runs leave (a real folder
    of that name is an old run, not a pointer), else the newest folder."""
    link = root / LATEST_LINK
    if link.is_symlink() and resumable(link):
        return link.resolve()
    runs = [d for d in root.glob("*") if d.is_dir() and not d.is_symlink() and resumable(d)] if root.is_dir() else []
    if not runs:
        raise ConfigError(f"--resume latest: no run under {root}/; pass the run's folder (--resume runs/NAME)")
    return max(runs, key=lambda d: d.stat().st_mtime)


def resume_target(resume: str, run_dir: str, root: Path = RUNS_ROOT) -> Path:
    """The folder --resume names: a folder, 'latest', or (bare) --run-dir, else the latest."""
    if resume == "latest" or (resume == RESUME_HERE and not run_dir):
        target = latest_run(root)
    elif resume != RESUME_HERE:
        target = Path(resume)
        if run_dir and Path(run_dir).resolve() != target.resolve():
            raise ConfigError(f"--resume {resume} and --run-dir {run_dir} name different runs; give one")
    else:
        target = Path(run_dir)
    if not resumable(target):
        raise ConfigError(f"--resume: {target} holds no run (no {CHECKPOINT_NAME}); pass a run's folder or 'latest'")
    return target


def resolve_run_dir(cfg: Config, now: float | None = None, root: Path = RUNS_ROOT) -> Config:
    """The folder this run writes: the one to resume, the one given, or a new
    ``runs/{env}__{seed}__{time}``. A given folder that holds another run is refused unless
    --resume or --overwrite says what to do with it."""
    import time

    if cfg.run.resume:
        return cfg.replace(run_dir=str(resume_target(cfg.run.resume, cfg.run.run_dir, root)))
    if not cfg.run.run_dir:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
        base = root / f"{cfg.env.replace('/', '-').replace(':', '-')}__{cfg.seed}__{stamp}"
        target, n = base, 1
        while True:  # claimed by mkdir, which one process alone wins: two runs started in the same second
            try:     # get two folders, not one between them
                target.mkdir(parents=True)
                break
            except FileExistsError:
                n += 1
                target = base.with_name(f"{base.name}-{n}")
        return cfg.replace(run_dir=str(target))
    if has_run(Path(cfg.run.run_dir)) and not cfg.run.overwrite:
        raise ConfigError(f"--run-dir {cfg.run.run_dir!r}: already holds a run (its checkpoint, metrics or log); pass "
                          "--resume to continue it, --overwrite to replace it, or choose another --run-dir")
    return cfg
