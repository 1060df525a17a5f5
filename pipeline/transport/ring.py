"""Single-producer/single-consumer ring of transitions in shared memory, one per collector.

Why hand-written: multiprocessing.Queue pickles every frame and takes a lock per item; the
faster-fifo/Sample-Factory queues still copy through a byte buffer. Here the collector writes a
batch of records straight into fixed slots and the consolidation thread copies them straight
into the replay: no pickling, no lock, one memcpy each way.

Protocol: ``head`` (records ever written) is stored only by the producer, ``tail`` (records
ever read) only by the consumer, each on its own cache line. The producer fills slots first
and advances ``head`` last; the consumer reads slots first and advances ``tail`` last. Aligned
8-byte stores are atomic on x86-64 and arm64, and on x86-64's TSO the slot stores are visible
before the head store. A producer killed mid-write never advanced ``head``, so a half-written
slot is never read.
"""
from __future__ import annotations

import time
import zlib

import numpy as np

from . import shm
from .collector_block import CollectorBlock
from .transition import FIELDS

HEAD, TAIL = 0, 8  # int64 words: records ever written (producer), ever read (consumer)
LAYOUT = 32  # written once by the creator: which record fields the slots hold (``layout_id``)
HEADER_WORDS = 40  # words 16-31 are the collector's control block (collector_block.py)


class RingLayoutError(RuntimeError):
    """The ring was laid out for other record fields than the ones its attacher names."""


def layout_id(fields) -> int:
    """A number for a list of (name, dtype) fields: equal lists, equal numbers."""
    return zlib.crc32(repr([(name, np.dtype(dt).str) for name, dt in fields]).encode())


def _layout(capacity: int, frame_shape: tuple[int, int], fields):
    offsets, off = {}, HEADER_WORDS * 8
    offsets["frames"] = off
    off += capacity * frame_shape[0] * frame_shape[1]
    for name, dt in fields:
        off = (off + 63) // 64 * 64
        offsets[name] = off
        off += capacity * np.dtype(dt).itemsize
    return offsets, off


class Ring:
    """``extras``: the game family's record fields after the common ones (``GameFamily.fields``,
    (name, dtype) pairs); the collector that attaches names the same, as both build them from
    the run's env id."""

    def __init__(self, seg, capacity: int, frame_shape: tuple[int, int], owner: bool, extras=()):
        self.seg, self.capacity, self.frame_shape, self.owner = seg, capacity, frame_shape, owner
        self.fields = fields = (*FIELDS, *extras)
        offsets, _ = _layout(capacity, frame_shape, fields)
        buf = seg.buf
        self.header = np.ndarray((HEADER_WORDS,), np.int64, buf, 0)
        self.block = CollectorBlock(self.header)
        self.frames = np.ndarray((capacity, *frame_shape), np.uint8, buf, offsets["frames"])
        self.arrays = {name: np.ndarray((capacity,), dt, buf, offsets[name]) for name, dt in fields}
        # Producer-side copies: head is only ever written by the producer, so it need not be read
        # back from shared memory; tail is re-read only when the cached value says "full". A
        # restarted collector attaches and goes on where its predecessor stopped.
        self._head = int(self.header[HEAD])
        self._tail_seen = int(self.header[TAIL])

    @classmethod
    def create(cls, tag: str, capacity: int, frame_shape=(84, 84), extras=()) -> "Ring":
        seg = shm.create(tag, _layout(capacity, frame_shape, (*FIELDS, *extras))[1])
        ring = cls(seg, capacity, frame_shape, owner=True, extras=extras)
        ring.header[:] = 0
        ring.header[LAYOUT] = layout_id(ring.fields)
        return ring

    @classmethod
    def attach(cls, name: str, capacity: int, frame_shape=(84, 84), extras=()) -> "Ring":
        seg = shm.attach(name)
        fields = (*FIELDS, *extras)
        if seg.size < _layout(capacity, frame_shape, fields)[1] or \
                int(np.ndarray((HEADER_WORDS,), np.int64, seg.buf, 0)[LAYOUT]) != layout_id(fields):
            # a collector that wrote its records where the learner reads others would fill the
            # replay with garbage, or crash far from the cause
            shm.close_segment(seg, False)
            raise RingLayoutError(f"ring {name} was laid out for other record fields than {[n for n, _ in fields]}: "
                                  "the learner and its collector must build them from the same env id")
        return cls(seg, capacity, frame_shape, owner=False, extras=extras)

    @property
    def name(self) -> str:
        return self.seg.name

    def __len__(self) -> int:
        return int(self.header[HEAD] - self.header[TAIL])

    # ------------------------------------------------------------------ producer side
    def free(self) -> int:
        return self.capacity - len(self)

    def has_room(self, n: int) -> bool:
        if self.capacity - (self._head - self._tail_seen) >= n:
            return True
        self._tail_seen = int(self.header[TAIL])
        return self.capacity - (self._head - self._tail_seen) >= n

    def push(self, frames: np.ndarray, **fields) -> None:
        """Write ``len(frames)`` records; the caller made sure they fit (``free()``)."""
        n = len(frames)
        head = self._head
        start = head % self.capacity
        if n == 1:  # one record (an unbatched producer): item stores cost a third of slice stores
            self.frames[start] = frames[0]
            for name, values in fields.items():
                self.arrays[name][start] = values[0]
            self._head = head + 1
            self.header[HEAD] = self._head  # publish last
            return
        first = min(n, self.capacity - start)
        self.frames[start:start + first] = frames[:first]
        if first < n:
            self.frames[:n - first] = frames[first:]
        for name, values in fields.items():
            arr = self.arrays[name]
            arr[start:start + first] = values[:first]
            if first < n:
                arr[:n - first] = values[first:]
        self._head = head + n
        self.header[HEAD] = self._head  # publish last

    def push_blocking(self, frames: np.ndarray, stop, drop: bool, **fields) -> bool:
        """Push, waiting for space (backpressure, wait time counted) or, with ``drop``, dropping
        the batch (counted). Returns False if the batch was dropped or ``stop()`` became true.

        ``stop()`` is the wait's only way out while nobody drains the ring: a collector's must
        turn true when its learner dies, not only when the learner asks it to stop."""
        n = len(frames)
        if not self.has_room(n):
            if drop:
                self.block.drops += n
                return False
            t0 = time.perf_counter_ns()
            while not self.has_room(n):
                if stop():
                    return False
                time.sleep(0.0005)
            self.block.ring_wait_ns += time.perf_counter_ns() - t0
        self.push(frames, **fields)
        return True

    # ------------------------------------------------------------------ consumer side
    def drain(self, max_records: int, sink) -> int:
        """Hand up to ``max_records`` records to ``sink(frames, fields)`` in at most two
        contiguous chunks (the ring wraps), then free their slots."""
        head, tail = int(self.header[HEAD]), int(self.header[TAIL])
        n = min(head - tail, max_records)
        if n <= 0:
            return 0
        start = tail % self.capacity
        first = min(n, self.capacity - start)
        for lo, cnt in ((start, first), (0, n - first)):
            if cnt:
                sink(self.frames[lo:lo + cnt], {k: a[lo:lo + cnt] for k, a in self.arrays.items()})
        self.header[TAIL] = tail + n  # release last
        return n

    def close(self) -> None:
        # Views into the buffer must go before the segment can close.
        self.header = self.block = self.frames = self.arrays = None
        shm.close_segment(self.seg, self.owner)
