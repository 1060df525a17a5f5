"""The run record: ``config.json`` in the run's folder says what ran, on what, from which code,
so a figure can be traced to its settings (profiles change batch and replay per machine, so the
same command means different settings elsewhere)."""
from __future__ import annotations

import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from .atomic import atomic_write
from .files import RECORD_NAME

ROOT = Path(__file__).resolve().parents[2]  # the project folder (pipeline/records/record.py)


def git_commit(root: Path = ROOT) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "not a git checkout"
    if out.returncode != 0:
        return "not a git checkout"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True,
                           text=True, timeout=10).stdout.strip()
    return out.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def packages() -> tuple[str, ...]:
    """The packages whose versions a run records: torch, the env layer's (each game family's,
    ``wrappers.families.ENV_PACKAGES``: loaded here, on use, so the record's helpers stay light)
    and numpy."""
    from wrappers.families import ENV_PACKAGES

    return ("torch", *ENV_PACKAGES, "numpy")


def versions() -> dict:
    found = {}
    for name in packages():
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return {"python": platform.python_version(), **found}


def run_record(cfg, hw, profile: str, reason: str, argv: list[str] | None = None) -> dict:
    return {"config": cfg.flat(), "profile": profile, "profile_reason": reason,
            "hardware": dataclasses.asdict(hw), "hardware_summary": hw.describe(), "git_commit": git_commit(),
            "versions": versions(), "command": [Path(sys.executable).name, *(sys.argv if argv is None else argv)],
            "cwd": os.getcwd(), "started": time.strftime("%Y-%m-%d %H:%M:%S %z")}


def write_json(path: Path, data: dict) -> Path:
    """A JSON file written whole or not at all: to NAME.tmp, fsynced (a power cut after the rename
    must not leave an empty file under the name: the rename can reach the disk before the data),
    then renamed over NAME. A failed write (a full disk) raises its OSError and leaves no NAME.tmp."""
    path = Path(path)
    text = json.dumps(data, indent=2, default=str)
    with atomic_write(path, "w") as f:
        f.write(text)
    return path


def append_jsonl(path: Path, row: dict) -> Path:
    """One row appended to a JSON-lines file, as one write of one whole line."""
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    return path


def write_record(run_dir: Path, record: dict) -> Path:
    """``config.json``; a resumed run keeps the records of the starts before it under ``previous``."""
    path = run_dir / RECORD_NAME
    if path.exists():
        try:
            old = json.loads(path.read_text())
            record = {**record, "previous": [*old.pop("previous", []), old]}
        except json.JSONDecodeError:
            pass
    return write_json(path, record)


def record_markdown(record: dict) -> str:
    """The record as TensorBoard text (CleanRL logs its hyperparameters the same way)."""
    rows = "\n".join(f"|{k}|{v}|" for k, v in record["config"].items())
    return (f"profile **{record['profile']}** ({record['profile_reason']}); {record['hardware_summary']}; "
            f"commit {record['git_commit']}; {record['versions']}\n\n|param|value|\n|-|-|\n{rows}")
