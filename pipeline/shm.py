"""Named shared-memory segments that the learner owns and always cleans up.

Every segment is named ``dqnrl_<owner pid>_<tag>``. The owner unlinks its segments on exit; a
learner killed with SIGKILL cannot, so each new run first removes segments whose owner pid is
no longer alive (``remove_stale_segments``).
"""
from __future__ import annotations

import os
from multiprocessing import shared_memory
from pathlib import Path

PREFIX = "dqnrl_"
SHM_DIR = Path("/dev/shm")


def segment_name(tag: str, owner: int | None = None) -> str:
    return f"{PREFIX}{owner or os.getpid()}_{tag}"


def create(tag: str, size: int) -> shared_memory.SharedMemory:
    # track=False: lifetime is ours (unlink in close_all / stale sweep), not the resource
    # tracker's, which would otherwise warn or unlink segments that children still use.
    return shared_memory.SharedMemory(name=segment_name(tag), create=True, size=size, track=False)


def attach(name: str) -> shared_memory.SharedMemory:
    return shared_memory.SharedMemory(name=name, create=False, track=False)


def close_segment(seg: shared_memory.SharedMemory, unlink: bool) -> None:
    """Close our mapping (views into it must be dropped first) and, for the owner, unlink it."""
    try:
        seg.close()
    except BufferError:
        pass
    if unlink:
        try:
            seg.unlink()
        except FileNotFoundError:
            pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_segments() -> list[str]:
    """Unlink segments left by learners that died without cleaning up; returns their names."""
    removed = []
    if not SHM_DIR.is_dir():
        return removed
    for path in SHM_DIR.glob(PREFIX + "*"):
        try:
            pid = int(path.name[len(PREFIX):].split("_", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            try:
                path.unlink()
                removed.append(path.name)
            except OSError:
                pass
    return removed


def owned_segments(owner: int | None = None) -> list[str]:
    if not SHM_DIR.is_dir():
        return []
    return sorted(p.name for p in SHM_DIR.glob(f"{PREFIX}{owner or os.getpid()}_*"))
