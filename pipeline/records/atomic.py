"""Files written whole or not at all: what every save of a run's files (the checkpoint, the replay,
the run record, the rewritten game and metrics rows, a suite's report) goes through, so a kill, a
full disk or a power cut leaves either the previous file or the new one under the name, never
half of one."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .files import TMP_SUFFIX


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "wb"):
    """Open NAME.tmp for writing (``mode``: "wb" or "w"); when the block ends, flush and fsync it
    (the rename can reach the disk before the data: without the fsync a power cut could leave an
    empty file under the name), then rename it over NAME. Whatever the block or the write raises
    (a full disk's OSError, a KeyboardInterrupt) removes NAME.tmp and goes on up; NAME is untouched."""
    path = Path(path)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        with open(tmp, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
