"""The ring against multiprocessing.Queue (``--only components``' first two rows): a producer
process pushes batches of 84x84 frames, this process drains them as the consolidation thread
does. A module of its own without torch: each producer is a spawned process that imports only
this module, where importing torch took ~4 s of each on a 2-core AMD EPYC family 23 model 1."""
from __future__ import annotations

import multiprocessing as mp
import time

import numpy as np

from .common import FRAME, get_from


def _ring_producer(name, capacity, n, batch):
    from pipeline.transport.ring import Ring

    ring = Ring.attach(name, capacity)
    frames = np.random.default_rng(0).integers(0, 255, (batch, 84, 84), dtype=np.uint8)
    fields = dict(action=np.zeros(batch, np.uint8), reward=np.zeros(batch, np.float32), flags=np.zeros(batch, np.uint8))
    for _ in range(n // batch):
        ring.push_blocking(frames, lambda: False, False, **fields)
    ring.close()


def _mpq_producer(q, n, batch):
    frames = np.random.default_rng(0).integers(0, 255, (batch, 84, 84), dtype=np.uint8)
    for _ in range(n // batch):
        q.put((frames, np.zeros(batch, np.uint8), np.zeros(batch, np.float32), np.zeros(batch, np.uint8)))
    q.put(None)


def bench_queue(n: int, batch: int = 8) -> dict:
    from pipeline.transport.ring import Ring

    ctx = mp.get_context("spawn")
    ring = Ring.create("bench_ring", 4096)
    sink_buf = np.empty((4096, 84, 84), np.uint8)
    try:
        p = ctx.Process(target=_ring_producer, args=(ring.name, 4096, n, batch))
        p.start()
        got, t0 = 0, None

        def sink(frames, fields):
            sink_buf[:len(frames)] = frames  # the consolidation thread's copy into the replay
        while got < (n // batch) * batch:
            k = ring.drain(1024, sink)
            if not k and not p.is_alive():
                k = ring.drain(1024, sink)  # what it wrote just before it exited
                if not k:  # it died short of n: an error, not a hang
                    raise RuntimeError(f"the ring's producer exited with code {p.exitcode} after {got:,} of {n:,} frames")
            if k and t0 is None:
                t0 = time.perf_counter()
            got += k
        ring_rate = got / (time.perf_counter() - t0)
        p.join()
    finally:
        ring.close()
    q = ctx.Queue(maxsize=512)
    p = ctx.Process(target=_mpq_producer, args=(q, n, batch))
    p.start()
    got, t0 = 0, None
    while (item := get_from(q, p, "the mp.Queue's producer")) is not None:
        if t0 is None:
            t0 = time.perf_counter()
        got += len(item[0])
    mpq_rate = got / (time.perf_counter() - t0)
    p.join()
    return {"ring_transitions_per_s": ring_rate, "ring_MB_per_s": ring_rate * FRAME / 1e6,
            "mp_queue_transitions_per_s": mpq_rate, "mp_queue_MB_per_s": mpq_rate * FRAME / 1e6,
            "ring_vs_mp_queue": ring_rate / mpq_rate, "batch": batch}


