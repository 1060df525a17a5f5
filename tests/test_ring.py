"""The shared-memory ring between two real processes: every record exactly once, in order,
through wrap-around and backpressure, under spawn and fork."""
import multiprocessing as mp
import time

import numpy as np
import pytest

from pipeline.transport.ring import Ring

N_RECORDS, CAPACITY, CHUNK = 5_000, 64, 7


def produce(name, n, chunk):
    ring = Ring.attach(name, CAPACITY)
    sent = 0
    while sent < n:
        k = min(chunk, n - sent)
        seq = np.arange(sent, sent + k)
        frames = np.empty((k, 84, 84), np.uint8)
        frames[:] = (seq % 251).astype(np.uint8)[:, None, None]
        ring.push_blocking(frames, lambda: False, drop=False, action=(seq % 256).astype(np.uint8),
                           reward=seq.astype(np.float32), env=(seq % 3).astype(np.uint16))
        sent += k
    ring.close()


@pytest.mark.parametrize("method,chunk", [("spawn", CHUNK), ("fork", CHUNK), ("fork", 1)])
def test_every_record_arrives_once_in_order(method, chunk):
    ring = Ring.create(f"test_ring_{method}_{chunk}", CAPACITY)
    try:
        proc = mp.get_context(method).Process(target=produce, args=(ring.name, N_RECORDS, chunk))
        proc.start()
        got_reward, got_frames = [], []

        def sink(frames, fields):
            got_reward.append(fields["reward"].copy())
            got_frames.append(frames[:, 0, 0].copy())
            assert (frames == frames[:, :1, :1]).all()  # no torn frame

        received = 0
        while received < N_RECORDS:
            if received % 1000 < 13:
                # Let the ring fill up now and then, so the producer must wait for space.
                deadline = time.monotonic() + 10
                while ring.free() >= chunk and proc.is_alive() and time.monotonic() < deadline:
                    time.sleep(0.001)
            received += ring.drain(13, sink)
            assert proc.exitcode in (None, 0)
        proc.join(timeout=30)
        seq = np.concatenate(got_reward)
        assert np.array_equal(seq, np.arange(N_RECORDS, dtype=np.float32))
        assert np.array_equal(np.concatenate(got_frames), (np.arange(N_RECORDS) % 251).astype(np.uint8))
        assert ring.block.ring_wait_ns > 0, "backpressure never happened; the test did not exercise it"
        assert len(ring) == 0
    finally:
        ring.close()


def test_drop_mode_counts_every_dropped_record():
    ring = Ring.create("test_ring_drop", 16)
    try:
        frames = np.zeros((10, 84, 84), np.uint8)
        kw = dict(action=np.zeros(10, np.uint8))
        assert ring.push_blocking(frames, lambda: False, True, **kw)
        assert not ring.push_blocking(frames, lambda: False, True, **kw)
        assert ring.block.drops == 10 and len(ring) == 10
    finally:
        ring.close()


def test_ring_segment_is_removed_on_close():
    from pipeline.transport import shm

    ring = Ring.create("test_ring_close", 8)
    name = ring.name
    assert name in shm.owned_segments()
    ring.close()
    assert name not in shm.owned_segments()


def produce_forever(name, capacity, chunk):
    ring = Ring.attach(name, capacity)
    seq0 = 0
    while True:
        seq = np.arange(seq0, seq0 + chunk)
        frames = np.empty((chunk, 84, 84), np.uint8)
        frames[:] = (seq % 251).astype(np.uint8)[:, None, None]
        ring.push_blocking(frames, lambda: False, drop=False, reward=seq.astype(np.float32))
        seq0 += chunk


@pytest.mark.faults
def test_producer_killed_mid_write_never_exposes_a_torn_record():
    """SIGKILL a producer that writes 2 MB batches, many times: whatever the consumer reads is a
    whole record (every byte of a frame from the same write as its reward), in sequence."""
    capacity, chunk = 1024, 300
    ctx = mp.get_context("fork")
    for trial in range(8):
        ring = Ring.create(f"test_torn_{trial}", capacity)
        try:
            p = ctx.Process(target=produce_forever, args=(ring.name, capacity, chunk), daemon=True)
            p.start()
            got, expect = 0, 0

            def check(frames, fields):
                nonlocal expect
                seq = fields["reward"].astype(np.int64)
                assert np.array_equal(seq, np.arange(expect, expect + len(seq))), "records out of sequence"
                assert (frames == (seq % 251).astype(np.uint8)[:, None, None]).all(), "a torn frame was read"
                expect += len(seq)
            deadline = time.time() + 0.05 + 0.02 * trial
            while time.time() < deadline:
                got += ring.drain(512, check)
            p.kill()  # most likely mid-copy: the producer spends its time in 2 MB memcpys
            p.join()
            while ring.drain(512, check):
                pass
            assert expect % chunk == 0, "a partly written batch was published"
        finally:
            ring.close()


def _true_after(calls: int):
    """A stop condition that turns true on its ``calls``-th question, counting them."""
    asked = []

    def stop():
        asked.append(1)
        return len(asked) >= calls
    return stop, asked


def test_full_ring_wait_ends_when_stop_turns_true():
    """Nobody drains this ring: only ``stop`` can end the wait, and the batch is not pushed."""
    ring = Ring.create("test_ring_stop", 8)
    try:
        frames = np.zeros((8, 84, 84), np.uint8)
        assert ring.push_blocking(frames, lambda: False, drop=False, reward=np.arange(8, dtype=np.float32))
        stop, asked = _true_after(20)
        assert not ring.push_blocking(frames[:1], stop, drop=False, reward=np.zeros(1, np.float32))
        assert len(asked) == 20, "the wait ended before stop() said so"
        assert len(ring) == 8 and ring.block.drops == 0  # given up, not dropped
    finally:
        ring.close()


def test_allowance_wait_ends_when_give_up_turns_true():
    """The learner never raises this allowance: only ``give_up`` can end the wait."""
    ring = Ring.create("test_ring_allowance", 8)
    try:
        block = ring.block
        block.allowed = block.played = 40
        assert block.held_back()
        give_up, asked = _true_after(5)
        block.wait_for_allowance(give_up)
        assert len(asked) == 5 and block.held_back()
        assert block.throttle_ns > 0  # the wait is counted as throttled time
    finally:
        ring.close()
