"""Named shared-memory segments that the learner owns and always cleans up.

Every segment is named ``dqnrl_<creator pid>-<run token>_<tag>``. The token is random per
process: a pid alone does not name a run, since a container's learner is PID 1 at every start
while ``/dev/shm`` may outlive the container, and runs in other PID namespaces that share our
IPC namespace may have any pid, ours included.

The owner unlinks its segments on exit; a learner killed with SIGKILL cannot, so each new run
first removes the segments whose creator is provably gone (``remove_stale_segments``). The proof
is a lock, not a pid: the creator holds a shared ``flock`` on each of its segments for their
whole life, and the kernel drops it when the process dies, however it dies. A segment nobody
holds locked was left by a dead process; a locked one is live, whoever holds it and whatever
its pid means here. (Forked children inherit the lock: a segment stays live while one of them
still runs.)
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
from multiprocessing import shared_memory
from pathlib import Path

PREFIX = "dqnrl_"
SHM_DIR = Path("/dev/shm")

_run: tuple[int, str] = (0, "")   # (pid, token) of the process the token was drawn in
_locks: dict[str, int] = {}       # segment name -> the fd that holds its creator's lock


def run_id() -> str:
    """``<pid>-<token>``: this process's part of its segments' names."""
    global _run
    if _run[0] != os.getpid():  # first call, or a forked child: a token of its own
        _run = (os.getpid(), secrets.token_hex(4))
    return f"{_run[0]}-{_run[1]}"


def segment_name(tag: str) -> str:
    return f"{PREFIX}{run_id()}_{tag}"


class ShmError(OSError):
    pass


def _advice(size: int) -> str:
    return (f"{size / 2**20:,.1f} MiB is needed; free space in {SHM_DIR} (df -h {SHM_DIR}; "
            f"docker run --shm-size=2g) or lower --ring-capacity")


def create(tag: str, size: int) -> shared_memory.SharedMemory:
    # tmpfs allocates lazily: a segment larger than the free space is created fine and the
    # process dies of SIGBUS on first touch, so check the space before creating.
    name = segment_name(tag)
    try:
        st = os.statvfs(SHM_DIR)
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = None
    if free is not None and size > free:
        raise ShmError(f"shared memory {name} does not fit in {SHM_DIR} "
                       f"({free / 2**20:,.1f} MiB free): {_advice(size)}")
    for _ in range(3):
        try:
            # track=False: lifetime is ours (unlink in close_all / stale sweep), not the resource
            # tracker's, which would otherwise warn or unlink segments that children still use.
            seg = shared_memory.SharedMemory(name=name, create=True, size=size, track=False)
        except OSError as e:
            raise ShmError(f"could not create shared memory {name}: {e.strerror or e}; {_advice(size)}") from None
        if _hold(name):
            return seg
        # Another run's sweep saw it between its creation and our lock, and removed it: again.
        close_segment(seg, unlink=False)
    raise ShmError(f"could not create shared memory {name}: another process kept removing it")


def _hold(name: str) -> bool:
    """Take the creator's lock on a segment just made; False if the name no longer leads to it
    (a sweep removed it before the lock was taken). Where no lock can be taken (segments outside
    ``SHM_DIR``, a file system without flock) no sweep can take its own either, and none removes
    the segment."""
    path = SHM_DIR / name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # waits out a sweep that holds it for its unlink
        if os.stat(path).st_ino != os.fstat(fd).st_ino:
            raise FileNotFoundError(path)
    except FileNotFoundError:
        os.close(fd)
        return False
    except OSError:
        os.close(fd)
        return True
    _locks[name] = fd
    return True


def attach(name: str) -> shared_memory.SharedMemory:
    return shared_memory.SharedMemory(name=name, create=False, track=False)


def close_segment(seg: shared_memory.SharedMemory, unlink: bool) -> None:
    """Close our mapping (views into it must be dropped first) and, for the owner, unlink it."""
    name = seg.name
    try:
        seg.close()
    except BufferError:
        pass
    if unlink:
        try:
            seg.unlink()
        except FileNotFoundError:
            pass
    fd = _locks.pop(name, None)
    if fd is not None:  # after the unlink: a sweep never sees our segment unlocked
        os.close(fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def _creator_lock(path: Path):
    """Try the segment's creator lock without waiting: yields True while we hold it (no live
    process does, so its creator died), False where a live process holds it, whatever its pid,
    and None where that cannot be told (gone, not ours to open, or no flock here)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
        except OSError:
            yield None
        else:
            yield True
    finally:
        os.close(fd)  # drops the lock we may have taken


def _remove_if_unlocked(path: Path) -> bool:
    """Unlink a segment that no process holds locked (its creator died); False if one does, or
    if that cannot be told."""
    with _creator_lock(path) as free:
        if not free:
            return False
        try:
            path.unlink()  # under our lock, so its creator cannot be taking it now
            return True
        except OSError:
            return False


def remove_stale_segments() -> list[str]:
    """Unlink segments left by learners that died without cleaning up; returns their names."""
    removed = []
    if not SHM_DIR.is_dir():
        return removed
    for path in sorted(SHM_DIR.glob(PREFIX + "*")):
        creator = path.name[len(PREFIX):].split("_", 1)[0]
        if "-" in creator:  # <pid>-<token>: the creator's lock tells
            stale = _remove_if_unlocked(path)
        else:
            # A name from before run tokens and locks (<pid>_<tag>): only its pid can tell, as it
            # did then. A live pid keeps it, and so does our own: we never make such names, so
            # it is another PID namespace's, which may be live.
            try:
                pid = int(creator)
            except ValueError:
                continue
            stale = pid != os.getpid() and not _pid_alive(pid)
            if stale:
                try:
                    path.unlink()
                except OSError:
                    stale = False
        if stale:
            removed.append(path.name)
    return removed


def live_runs() -> list[str]:
    """The ``<pid>-<token>`` of every other run whose segments are in ``SHM_DIR`` and held by a
    live process (its creator's lock, as the sweep reads it): training runs on this machine now,
    whatever PID namespace they are in. A run only reads this; it never takes a lock it keeps."""
    if not SHM_DIR.is_dir():
        return []
    ours, found = run_id(), set()
    for path in SHM_DIR.glob(PREFIX + "*"):
        creator = path.name[len(PREFIX):].split("_", 1)[0]
        if "-" in creator and creator != ours and creator not in found and _held(path):
            found.add(creator)
    return sorted(found)


def _held(path: Path) -> bool:
    """Some live process holds the segment's lock (an exclusive lock cannot be taken now)."""
    with _creator_lock(path) as free:
        return free is False


def owned_segments() -> list[str]:
    """This process's segments that are still in ``SHM_DIR``."""
    if not SHM_DIR.is_dir():
        return []
    return sorted(p.name for p in SHM_DIR.glob(f"{PREFIX}{run_id()}_*"))
