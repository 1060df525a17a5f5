"""Ends of a run: a collector whose learner died leaves whichever wait it is in by itself, and
a stop keeps what the collectors delivered just before it (records, Ray batches, and the
finished games they carry)."""
import collections
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import types
from pathlib import Path

import numpy as np
import pytest

from models.weights import flat_size
from pipeline.actors.collector import Collector, CollectorSpec, CollectorStart, run_collector
from pipeline.transport.collector_block import CollectorBlock
from pipeline.settings.layers import resolve_config
from pipeline.replay.consolidator import Consolidator
from pipeline.transport.control import ControlBlock
from pipeline.distributed.intake import RayCollectors, RemoteSource
from pipeline.distributed.remote_collector import Batch
from pipeline.replay import Replay
from pipeline.transport.ring import HEAD, Ring
from pipeline.actors.rollout import Rollout
from pipeline.transport.transition import EP_END, is_agent_step
from tests.proc_utils import running
from tests.test_drop_mode import FiveStepEnvs, ZeroQ
from wrappers.families import game_family

M = 2  # envs per collector in the consolidator tests


# ---------------------------------------------------------------------- a dead learner's collector
def _learner_stand_in(spec, ring_name, control_name, n_weights, pids):
    """The learner's part in a collector's life: start it, then nothing (the test kills this)."""
    ctx = mp.get_context("fork")
    start = CollectorStart(0, spec, ring_name, control_name, n_weights)
    p = ctx.Process(target=run_collector, args=(start, ctx.Pipe(duplex=False)[1]), daemon=True)
    p.start()
    pids.put(p.pid)
    time.sleep(600)


def _cpu_ticks(pid: int) -> int:
    """The process's user + system CPU time in clock ticks, from /proc (-1 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return -1
    return int(fields[11]) + int(fields[12])


def _wait_for(condition, timeout=30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize("wait", ["weights", "allowance", "room"])
def test_collector_leaves_each_wait_when_its_learner_dies(wait):
    """SIGKILL the learner while its collector waits for the first weights, for allowance, or
    for room in a full ring nobody drains: the stop flag is never set, yet it must exit."""
    cfg = resolve_config({"env": "tests.catch_env:Catch-v0", "envs_per_collector": 4, "ring_capacity": 16,
                          "tensorboard": False}).cfg
    spec = CollectorSpec.of(cfg)
    probe = Collector(spec, 0, 0, CollectorBlock.local())
    probe.close()
    n_weights = flat_size(probe.model)
    # laid out for the game's record fields, as the learner's wiring lays out its rings
    ring = Ring.create(f"test_dead_learner_{wait}", spec.collectors.ring_capacity, extras=game_family(cfg.env).fields)
    control = ControlBlock.create(n_weights)
    block, collector = ring.block, None
    ctx = mp.get_context("fork")
    pids = ctx.Queue()
    learner = ctx.Process(target=_learner_stand_in, args=(spec, ring.name, control.name, n_weights, pids))
    try:
        if wait != "weights":
            control.publish(probe.model)
            block.allowed = 4 if wait == "allowance" else 10**9  # one step of the 4 envs, or no limit
        learner.start()
        collector = pids.get(timeout=30)
        if wait == "weights":
            # it builds its envs, then waits: seen from outside as CPU time that stops growing
            ticks = collections.deque(maxlen=30)  # 0.3 s without a CPU tick: waiting

            def idle():
                ticks.append(_cpu_ticks(collector))
                return len(ticks) == ticks.maxlen and len(set(ticks)) == 1
            assert _wait_for(idle), "the collector never settled into its wait for weights"
        elif wait == "allowance":
            assert _wait_for(lambda: block.played >= block.allowed), "the collector never played its step"
        else:
            heads = collections.deque(maxlen=50)  # 0.5 s without a push into a ring with no room for a step: waiting

            def stuck():
                heads.append(int(ring.header[HEAD]))
                return len(heads) == heads.maxlen and len(set(heads)) == 1 and ring.free() < 2 * 4
            assert _wait_for(stuck), "the ring never filled up"
        os.kill(learner.pid, signal.SIGKILL)
        learner.join()
        assert _wait_for(lambda: not running(collector), timeout=5), \
            f"the collector waiting for {wait} outlived its learner by 5 s"
    finally:
        for pid in (learner.pid, collector):
            if pid is not None and running(pid):
                os.kill(pid, signal.SIGKILL)
        if learner.pid is not None:
            learner.join()
        ring.close()
        control.close()


# ---------------------------------------------------------------------- the last drain at a stop
def _play(steps: int, seed: int):
    """``steps`` rollout steps of M five-step games: (frames, fields), with games ending in them."""
    rollout = Rollout(FiveStepEnvs(M), ZeroQ(), 4, False, seed=seed)
    out = [rollout.step(1.0)[:2] for _ in range(steps)]
    frames = np.concatenate([f for f, _ in out])
    fields = {k: np.concatenate([fl[k] for _, fl in out]) for k in out[0][1]}
    return frames, fields


def _games(fields) -> int:
    return int(np.count_nonzero(fields["flags"] & EP_END))


def _intake(sources) -> RayCollectors:
    """The real Ray intake around sources fed by hand: no cluster, its thread never started."""
    intake = RayCollectors.__new__(RayCollectors)
    intake.sources, intake.error, intake.stop_event = sources, None, threading.Event()
    intake.thread = threading.Thread(target=lambda: None)
    intake.deaths_seen, intake.returns_seen = collections.deque(), collections.deque()
    return intake


def test_stop_drains_what_arrived_after_the_last_drain():
    """Records in a ring and a Ray batch in the intake's queue arrive after the consolidation
    thread's last drain, then the stop: both reach the replay, with the games they finish."""
    ring = Ring.create("test_last_drain", 256)
    try:
        replay = Replay.of(2000, 2, M, frame_stack=4, n_step=3, gamma=0.97, seed=0)
        src = RemoteSource(None, 1, "node")
        logging, resume = threading.Event(), threading.Event()

        def log(_line):  # holds the thread between a drain and its next look at the stop flag
            logging.set()
            resume.wait(10)
        cons = Consolidator([ring], replay, 1024, log, 0.0, remote=_intake([src]))
        cons.start()
        assert logging.wait(10)
        ring_frames, ring_fields = _play(12, seed=0)
        ring.push(ring_frames, **ring_fields)
        ray_frames, ray_fields = _play(12, seed=1)
        src.ready.append((ray_frames, ray_fields))
        src.queued += len(ray_frames)
        cons.stop_event.set()
        resume.set()
        cons.join(10)
        assert not cons.is_alive() and cons.error is None
        assert cons.pending() == 0, "records that arrived before the stop were left behind"
        assert cons.processed == len(ring_frames) + len(ray_frames)
        assert cons.episodes_total == _games(ring_fields) + _games(ray_fields) > 0
        assert len(cons.finished) == cons.episodes_total  # for the books' last take after the stop
    finally:
        ring.close()


def test_stopped_ray_intake_receives_the_batches_finished_before_the_stop(monkeypatch):
    """A batch an actor finished before the stop, not yet received by the intake thread, goes
    through the intake's and the consolidator's last drains; one still playing is given up."""
    frames, fields = _play(12, seed=2)
    live = int(np.count_nonzero(is_agent_step(fields["flags"])))
    done = {"finished": Batch(frames, fields, live, 1, 1, 0, "node", 0)}

    class RayError(Exception):
        pass
    fake_ray = types.SimpleNamespace(
        wait=lambda refs, num_returns=1, timeout=None: ([r for r in refs if r in done][:num_returns],
                                                        [r for r in refs if r not in done]),
        get=lambda ref: done[ref], kill=lambda actor, no_restart=False: None,
        exceptions=types.SimpleNamespace(RayError=RayError, RayActorError=RayError))
    monkeypatch.setitem(sys.modules, "ray", fake_ray)
    src = RemoteSource("actor", 1, "node")
    src.in_flight.extend([("finished", 0, 24), ("playing", 0, 24)])
    src.in_flight_steps = src.block.played = 48
    intake = _intake([src])
    intake.stop()
    assert len(src.ready) == 1 and [ref for ref, _, _ in src.in_flight] == ["playing"]
    replay = Replay.of(2000, 2, M, frame_stack=4, n_step=3, gamma=0.97, seed=0)
    cons = Consolidator([], replay, 1024, lambda _line: None, 1e9, remote=intake)
    cons.stop_event.set()
    cons.run()  # the thread's body, its stop already asked for
    assert cons.processed == len(frames) and cons.episodes_total == _games(fields) > 0
