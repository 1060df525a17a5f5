"""The replay-ratio control: an update only when the agent steps pay for it, collectors only a
bounded head start ahead of the learner."""
from types import SimpleNamespace

import numpy as np
import pytest

from pipeline.transport.collector_block import CollectorBlock
from pipeline.replay.ratio import ReplayRatio
from pipeline.runtime.wiring import Pipeline


def test_updates_are_due_exactly_as_the_steps_pay_for_them():
    r = ReplayRatio(ratio=4.0, batch=32, start=10_000, streams=8)
    assert r.steps_per_update == 8
    assert not r.update_due(9_999, 0) and not r.update_due(10_007, 0)
    assert r.update_due(10_008, 0)                           # 8 steps x 4 = 32 samples: one update
    assert not r.update_due(10_008, 32) and r.update_due(10_016, 32)
    steps, trained = 10_000, 0
    for steps in range(10_000, 50_000):                      # a learner that trains whenever due
        while r.update_due(steps, trained):
            trained += 32
    assert trained == (steps - 10_000) // 8 * 32             # never more, never fewer samples per step
    # a run stopping at --total-steps trains what the collectors' head start left owed
    assert r.owed_updates(9_000, 0) == 0 and r.owed_updates(11_000, 0) == 125
    assert r.owed_updates(11_000, 125 * 32) == 0 and r.owed_updates(11_007, 124 * 32) == 1


def test_collectors_get_a_bounded_head_start():
    r = ReplayRatio(ratio=4.0, batch=32, start=10_000, streams=8)
    assert r.slack == 1000                                   # max(2 updates, 4 steps of every env, 1000)
    assert ReplayRatio(0.5, 1024, 0, 8).slack == 4096        # two updates' worth when that is more
    assert ReplayRatio(4.0, 32, 0, 512).slack == 2048        # four steps of every env when that is more
    assert r.allowance(0, 0, 0) == 11_000                    # warm-up: up to learning start + slack
    assert r.allowance(11_000, 0, 0) == 0                    # the learner has trained nothing yet
    assert r.allowance(11_000, 32 * 100, 0) == 800           # 100 updates paid for 800 more steps
    assert r.allowance(11_000, 32 * 100, 300) == 500         # steps still in the queues count
    assert r.allowance(20_000, 0, 0) == 0                    # never negative


@pytest.mark.parametrize("n", [1, 4])
def test_collectors_together_stay_within_the_head_start(n):
    """The trainer refreshes the allowance between updates; a collector plays until its
    allowance is spent. With a slow learner (a long update, a checkpoint) each collector uses
    all it was given: together they must stay within one head start, not n of them."""
    envs = 8
    r = ReplayRatio(ratio=4.0, batch=32, start=2_000, streams=n * envs)
    blocks = [CollectorBlock(np.zeros(32, np.int64)) for _ in range(n)]
    parts = SimpleNamespace(ratio=r, blocks=lambda: blocks, consolidator=SimpleNamespace(pending=lambda: 0))
    trained = 0
    leads = []
    for _ in range(20):
        steps = sum(b.played for b in blocks)
        Pipeline.set_allowance(parts, steps, trained)
        for b in blocks:
            while not b.held_back():  # a collector step plays every env of the collector once
                b.played += envs
        steps = sum(b.played for b in blocks)
        paid = r.start + trained / r.ratio
        leads.append(steps - paid)
        for _ in range(3):  # the learner trains a few updates, not all that are due
            if r.update_due(steps, trained):
                trained += r.batch
    assert r.slack - n * envs <= min(leads) and max(leads) < r.slack + n * envs, leads  # the head start is used, once


def _played_when_the_learner_sets_the_pace(n=8, envs=2, turns=6_000):
    """n collectors of ``envs`` envs behind a learner that trains one update a turn: the first
    half wake first and play all they are allowed, the others wake every other turn for one step
    (a collector process the OS runs later). Each one's agent steps at the end."""
    r = ReplayRatio(ratio=4.0, batch=32, start=500, streams=n * envs)
    blocks = [CollectorBlock(np.zeros(32, np.int64)) for _ in range(n)]
    parts = SimpleNamespace(ratio=r, blocks=lambda: blocks, consolidator=SimpleNamespace(pending=lambda: 0))
    trained = 0
    for turn in range(turns):
        steps = sum(b.played for b in blocks)
        if r.update_due(steps, trained):
            trained += r.batch
        Pipeline.set_allowance(parts, steps, trained)
        for i, b in enumerate(blocks):
            if i < n // 2:
                while not b.held_back():
                    b.played += envs
            elif turn % 2 and not b.held_back():
                b.played += envs
    return [b.played for b in blocks], sum(b.played for b in blocks) - (r.start + trained / r.ratio), r.slack


def test_collectors_that_wake_late_still_get_their_share_of_the_steps():
    """When the learner sets the pace each update frees a few steps; the collectors furthest
    behind get them first, so a late waker's envs fill their part of the replay as the others'
    do (with equal parts the first half played 12,366 steps each here and the rest 8)."""
    played, lead, slack = _played_when_the_learner_sets_the_pace()
    assert min(played) >= 0.8 * max(played), played
    assert lead <= slack + 8 * 2, lead  # and together they still stay within one head start


def test_the_shares_add_up_to_the_headroom_and_give_each_collector_a_part():
    from pipeline.replay.ratio import shares
    assert shares(0, [5, 0, 9]) == [0, 0, 0]
    assert shares(8, [100, 0, 50, 100, 0, 100, 100, 100]) == [2, 2, 2, 0, 2, 0, 0, 0]  # the ones behind first
    big = shares(1000, [0] * 4 + [10_000] * 4)
    assert sum(big) == 1000 and min(big) == 1000 // 16  # half in equal parts: none is held at 0
    assert big == [312, 312, 66, 62, 62, 62, 62, 62]  # 62 each, then up to 250 more to the ones behind
    assert shares(7, []) == []


def test_ray_actors_held_back_stay_held_when_their_batches_come_back_short(monkeypatch):
    """A Ray actor's steps count as played when requested and are corrected when its batch
    comes back: fewer when the batch's final-observation records are records, not steps, or
    none when the request failed. With a learner that trains nothing, the intake's real
    request and receive (Ray faked) must keep two actors within one head start: the
    corrections free no room by themselves, only the trainer's next allowance does."""
    import sys
    import types

    from pipeline.distributed.intake import IN_FLIGHT, RayCollectors, RemoteSource
    from pipeline.distributed.remote_collector import Batch
    from pipeline.transport.transition import LAST, is_agent_step

    class RayError(Exception):
        pass
    batches, calls = {}, iter(range(10**6))

    def collect(req):  # the actor plays req.steps of its 4 envs; 1 in 8 records ends a game
        n = req.steps * 4
        fields = {"flags": np.where(np.arange(n) % 8 == 7, LAST, 0).astype(np.uint8)}
        ref = ("fail" if next(calls) % 7 == 3 else "ok", len(batches))
        batches[ref] = Batch(np.zeros((n, 1, 1), np.uint8), fields, n - n // 8, 1, 1, 0, "node", req.launch)
        return ref

    def get(ref):
        if ref[0] == "fail":
            raise RayError("the envs raised")
        return batches[ref]
    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(
        get=get, exceptions=types.SimpleNamespace(RayError=RayError, RayActorError=KeyError)))
    actor = types.SimpleNamespace(collect=types.SimpleNamespace(remote=collect))
    intake = RayCollectors.__new__(RayCollectors)
    intake.sources = [RemoteSource(actor, i, "node") for i in range(2)]
    intake.steps_per_request, intake.envs_per_collector = 16, 4
    intake.weights, intake.launch_base, intake.global_steps = (0, [None]), 0, lambda: 0
    intake.deaths_seen, intake.returns_seen = [], []
    r = ReplayRatio(ratio=4.0, batch=32, start=0, streams=8)
    parts = SimpleNamespace(ratio=r, blocks=lambda: [s.block for s in intake.sources],
                            consolidator=SimpleNamespace(pending=intake.pending))
    steps = 0
    # The trainer refreshes the allowance far more often than a batch comes back: each of its
    # turns here, the intake receives one batch per actor and tops its requests up.
    for _ in range(300):
        Pipeline.set_allowance(parts, steps, 0)
        for src in intake.sources:
            if src.in_flight:
                intake._receive(src)
            while src.ready:  # the consolidator takes what arrived, counting agent steps
                steps += int(np.count_nonzero(is_agent_step(src.ready.popleft()[1]["flags"])))
            src.taken = src.queued
            while len(src.in_flight) < IN_FLIGHT and not src.block.held_back():
                intake._request(src)
    assert r.slack - 2 * 64 <= steps <= r.slack + 2 * 64, steps
