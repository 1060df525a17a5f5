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


class ShmError(OSError):
    pass


def _advice(size: int) -> str:
    return (f"{size / 2**20:,.1f} MiB is needed; free space in {SHM_DIR} (df -h {SHM_DIR}; "
            f"docker run --shm-size=2g) or lower --queue-capacity")


def create(tag: str, size: int) -> shared_memory.SharedMemory:
    # tmpfs allocates lazily: a segment larger than the free space is created fine and the
    # process dies of SIGBUS on first touch, so check the space before creating.
    try:
        st = os.statvfs(SHM_DIR)
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = None
    if free is not None and size > free:
        raise ShmError(f"shared memory {segment_name(tag)} does not fit in {SHM_DIR} "
                       f"({free / 2**20:,.1f} MiB free): {_advice(size)}")
    try:
        # track=False: lifetime is ours (unlink in close_all / stale sweep), not the resource
        # tracker's, which would otherwise warn or unlink segments that children still use.
        return shared_memory.SharedMemory(name=segment_name(tag), create=True, size=size, track=False)
    except OSError as e:
        raise ShmError(f"could not create shared memory {segment_name(tag)}: {e.strerror or e}; {_advice(size)}") from None


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
