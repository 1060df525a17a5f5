"""The replay on disk, so ``--resume`` goes on training from the same replay instead of refilling
it for ``learning_starts`` steps (SB3 #1016, rl-baselines3-zoo #490 ask for this).

One compressed ``.npz`` beside the checkpoint: every stream's frames, actions, rewards and flags,
each stream's write position and count, the prioritized sampler's tree, and a ``meta`` entry
that names the env, frame stack, capacity and stream count it fits and the agent-step count of
the checkpoint it belongs to. numpy writes each array into the zip in 16 MB chunks, so a save
needs about that much memory beyond the replay itself. Written to a temp file, fsynced and
renamed, like the checkpoint: a full disk leaves the previous file intact.

The frames are saved only as far as any stream has written them: a replay that has not filled
yet (a run stopped before --buffer-size agent steps) holds zeros beyond, and compressing them
took most of a save (a 1M replay at 200k is 5.6 GB of zeros) and of the load and check after it.
"""
from __future__ import annotations

import json
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..errors import UserError
from .atomic import atomic_write
from .file_keys import current_keys

ARRAYS = ("frames", "action", "reward", "flags", "pos", "written")
# What reading a damaged zip can raise: a flipped bit lands in a header (BadZipFile, a
# "compression method" NotImplementedError, an "encrypted" RuntimeError), in the deflate stream
# (zlib.error), in the sizes (EOFError) or in an array's header or the meta (ValueError).
DAMAGED = (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError, RuntimeError)


class ReplayFileError(UserError, RuntimeError):
    """A replay file that cannot be used; the message names the file, the problem and the fix."""


def save(replay, path: str | Path, meta: dict) -> tuple[int, float]:
    """Write the replay (no writer may run meanwhile); returns (bytes on disk, seconds)."""
    path = Path(path)
    t0 = time.perf_counter()
    st = replay.storage
    arrays = {name: getattr(st, name) for name in ARRAYS}
    arrays["frames"] = st.frames[:, :filled_rows(st)]  # past them every stream holds only zeros
    if replay.sampler.prioritized:
        arrays["tree"] = replay.sampler.tree.tree
        arrays["max_priority"] = np.float64(replay.sampler.max_priority)
    full_meta = {**meta, "capacity": st.capacity, "num_streams": st.num_streams, "version": 1}
    arrays["meta"] = np.frombuffer(json.dumps(full_meta).encode(), np.uint8)
    try:
        with atomic_write(path) as f, st.lock:
            np.savez_compressed(f, **arrays)
    except OSError as e:
        raise ReplayFileError(f"could not write the replay {path}: {e.strerror or e}; the previous replay file "
                              "is untouched. Free disk space, or pass --save-replay false") from None
    return path.stat().st_size, time.perf_counter() - t0


def filled_rows(storage) -> int:
    """The rows of the frame array any stream has written (each stream fills from row 0)."""
    return int(np.minimum(storage.written, storage.stream_len).max(initial=0))


def _corrupt(path: Path, e: BaseException) -> ReplayFileError:
    return ReplayFileError(f"replay file {path} is truncated or corrupt ({type(e).__name__}); delete it to "
                           "resume with a refilled replay, or pass --save-replay false")


def read_meta(path: str | Path) -> dict:
    """The file's meta, every entry a resume reads present and of its type."""
    path = Path(path)
    try:
        with np.load(path) as z:
            meta = current_keys(json.loads(bytes(z["meta"]).decode()))
    except DAMAGED as e:
        raise _corrupt(path, e) from None
    # A file this project wrote always has them; without them a resume could neither tell whether
    # the file belongs to the checkpoint nor say what it holds.
    kinds = {"env": str, "frame_stack": int, "capacity": int, "num_streams": int, "agent_steps": int}
    entries = meta if isinstance(meta, dict) else {}
    wrong = [k for k, kind in kinds.items() if type(entries.get(k)) is not kind]
    if wrong:
        raise ReplayFileError(f"replay file {path} has no valid {', '.join(wrong)} in its meta (written by another "
                              "program, or damaged); delete it to resume with a refilled replay, or pass "
                              "--save-replay false")
    return meta


def verify(path: str | Path, chunk: int = 16 * 2**20) -> None:
    """Read every array of the file to its end, so that zip's CRC-32 covers all of it: a flipped
    bit anywhere is refused here, before the run starts, and not half-way through the load. Costs
    one decompression of the file (about as long as the load), in 16 MB pieces."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            missing = [n for n in ARRAYS if n + ".npy" not in names]
            if missing:
                raise ReplayFileError(f"replay file {path} lacks the arrays {', '.join(missing)} (written by another "
                                      "program, or damaged); delete it to resume with a refilled replay, or pass "
                                      "--save-replay false")
            for name in names:
                with archive.open(name) as f:
                    while f.read(chunk):
                        pass
    except ReplayFileError:
        raise
    except DAMAGED as e:
        raise _corrupt(path, e) from None


def check_fits(path: str | Path, env: str, frame_stack: int, capacity: int, num_streams: int) -> dict:
    """The file's meta if it was saved by a run of the same env, frame stack and replay shape;
    a ReplayFileError naming both sides otherwise."""
    meta = read_meta(path)
    want = {"env": env, "frame_stack": frame_stack, "capacity": capacity, "num_streams": num_streams}
    for key, value in want.items():
        if meta.get(key) != value:
            what = {"capacity": "replay capacity (--buffer-size, rounded to whole streams)",
                    "num_streams": "env stream count ((--num-collectors + --ray-collectors) x --envs-per-collector)"}.get(key, key)
            raise ReplayFileError(f"replay file {path} was saved with {what} {meta.get(key)!r} but this run has "
                                  f"{value!r}; resume with the same settings, or pass --save-replay false to refill")
    return meta


def _read_into(archive: zipfile.ZipFile, member: str, dest: np.ndarray, chunk: int = 16 * 2**20) -> None:
    """Decompress one array of the file straight into ``dest`` in 16 MB pieces: loading the
    replay must not need a second replay's worth of memory. The frames may hold fewer rows than
    ``dest`` (only those written were saved): they go to each stream's first rows, and the rest
    keep the zeros of the fresh replay ``load`` fills."""
    with archive.open(member) as f:
        version = np.lib.format.read_magic(f)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0}.get(version, np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(f)
        # the frames: each stream's first rows, as many as the file holds
        target = dest[:, :shape[1]] if member == "frames.npy" and len(shape) == dest.ndim else dest
        if tuple(shape) != target.shape or np.dtype(dtype) != dest.dtype or fortran:
            raise ValueError(f"{member} holds {dtype}{tuple(shape)}, the replay needs {dest.dtype}{dest.shape}")
        for part in ([target] if target.flags.c_contiguous else target):  # else one stream's rows at a time
            assert part.flags.c_contiguous  # a view of the replay, never a copy read into
            _read_exactly(f, memoryview(part.reshape(-1).view(np.uint8)), member, chunk)


def _read_exactly(f, view: memoryview, member: str, chunk: int) -> None:
    for lo in range(0, len(view), chunk):
        piece = view[lo:lo + chunk]
        got = 0
        while got < len(piece):
            n = f.readinto(piece[got:])
            if not n:
                raise EOFError(f"{member} ends early")
            got += n


def load(replay, path: str | Path, env: str, frame_stack: int) -> dict:
    """Fill ``replay``, which nothing has written to yet, from a file saved by a run of the same
    shape; returns the file's meta."""
    path = Path(path)
    st = replay.storage
    if st.written.any():  # rows past the saved ones must hold zeros, as a fresh replay's do
        raise ValueError("snapshot.load fills a fresh replay; this one holds records already")
    meta = check_fits(path, env, frame_stack, st.capacity, st.num_streams)
    try:
        with np.load(path) as z, st.lock:
            for name in ARRAYS:
                _read_into(z.zip, name + ".npy", getattr(st, name))
            if replay.sampler.prioritized:
                if "tree" in z.files:
                    replay.sampler.tree.tree[...] = z["tree"]
                    replay.sampler.max_priority = float(z["max_priority"])
                else:  # saved without priorities: every stored transition starts at priority 1
                    s, p = np.divmod(np.arange(st.capacity), st.stream_len)
                    filled = p < np.minimum(st.written, st.stream_len)[s]
                    if filled.any():  # an empty replay (saved before any record arrived) has no priority to set
                        replay.sampler.on_write(s[filled], p[filled], st.flags[s[filled], p[filled]])
    except DAMAGED as e:
        raise _corrupt(path, e) from None
    return meta
