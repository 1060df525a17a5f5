"""Collector process: steps a batch of envs with one batched forward pass of a local policy copy
and writes every transition into its own shared-memory ring.

Runs under every start method (``pipeline/actors/process_start.py``): everything it needs arrives as
arguments (its ``CollectorSpec`` and segment names) and it attaches to shared memory by name.
"""
from __future__ import annotations

import os
import time
import traceback

from dataclasses import dataclass

import numpy as np

from config_optimized import CollectorConfig, Config, LearnerConfig
from wrappers.options import EnvOptions

from ..transport.transition import EP_END, STATS


@dataclass(frozen=True)
class CollectorSpec:
    """What a collector process is started with: the game, its env options, the collectors' part
    of the config, the learner's (whose network it acts with: ``NetworkSpec.of``) and the seed."""
    env: str
    env_options: EnvOptions
    collectors: CollectorConfig
    learner: LearnerConfig
    seed: int

    @classmethod
    def of(cls, cfg: Config) -> CollectorSpec:
        return cls(cfg.env, cfg.env_options, cfg.collectors, cfg.learner, cfg.seed)


@dataclass(frozen=True)
class CollectorStart:
    """One start of one collector process: its spec, which collector it is and the shared memory
    it attaches to by name."""
    index: int
    spec: CollectorSpec
    ring_name: str
    control_name: str
    n_weights: int
    launch: int = 0  # numbers this start among every collector start of the run, resumes included

    @property
    def seed(self) -> int:
        """No two starts play the same env seeds and exploration draws."""
        return collector_seed(self.spec.seed, self.index, self.launch)


def epsilon_schedule(c: CollectorConfig, global_steps: int) -> float:
    """Linear decay from eps_start to eps_end over eps_decay_steps agent steps of the whole run."""
    frac = min(1.0, global_steps / max(1, c.eps_decay_steps))
    return c.eps_start + frac * (c.eps_end - c.eps_start)


def apex_epsilons(num_envs_total: int, offset: int, count: int):
    """Ape-X (Horgan et al. 2018): env i of N explores with 0.4 ** (1 + 7 i / (N - 1))."""
    i = np.arange(offset, offset + count)
    return (0.4 ** (1 + 7 * i / max(1, num_envs_total - 1))).astype(np.float32)


class RecordPusher:
    """Pushes each rollout step into the collector's ring and, when ``drop`` lets a full ring
    drop a step, keeps the replay streams honest about the gap: every env's next record starts
    a new segment (FIRST), so neither frame stacks nor n-step returns run across the missing
    records; the dropped games' statistics go out with the next push as STATS records; and the
    dropped agent steps are counted, so epsilon and the replay ratio still see them."""

    MAX_PENDING = 1024  # finished games held back from dropped pushes; older ones are given up

    def __init__(self, ring, rollout, drop: bool, stop):
        """``stop()``: whether to give up a wait for room (asked to stop, or the learner died)."""
        self.ring, self.rollout, self.drop, self.stop = ring, rollout, drop, stop
        self.pending: tuple | None = None  # (frames, fields) of STATS records still to send

    def push(self, frames, fields: dict, live: int) -> bool:
        if self.pending is not None:
            pf, pfields = self.pending
            both = np.concatenate([pf, frames])
            both_fields = {k: np.concatenate([pfields[k], v]) for k, v in fields.items()}
            if self.ring.has_room(len(both)):
                self.ring.push(both, **both_fields)
                self.pending = None
                return True
            # No room for both: the step itself may still fit; the statistics wait.
        if self.ring.push_blocking(frames, self.stop, self.drop, **fields):
            return True
        if self.stop():
            return False
        if self.pending is not None:  # this step's games join the ones still held back
            frames, fields = both, both_fields
        self.ring.block.dropped_steps += live
        self.rollout.break_streams()
        # Held back at most what fits beside the next step's records, so a push can succeed again.
        room = min(self.MAX_PENDING, self.ring.capacity - self.rollout.num_envs)
        ended = np.flatnonzero(fields["flags"] & EP_END)[-room:] if room > 0 else np.zeros(0, np.int64)
        if len(ended):
            stats = {k: v[ended].copy() for k, v in fields.items()}
            stats["flags"] = (stats["flags"] & EP_END) | STATS  # the game family's statistics ride in its fields
            self.pending = (np.zeros((len(ended), *frames.shape[1:]), frames.dtype), stats)
        else:
            self.pending = None
        return False


def collector_seed(seed: int, index: int, launch: int) -> int:
    """Env and exploration seed of one collector start: apart per collector and per start."""
    return seed + 10_007 * index + 101 * launch


# What a failure report may hold: the supervisor reads a collector's pipe only once the collector
# has exited, so the report must fit the pipe's buffer (64 KiB on Linux) or sending it would block
# the dying collector for good.
REPORT_CHARS = 16_000


def run_collector(start: CollectorStart, report) -> None:
    """The collector process's entry: collect until told to stop; any failure is sent down
    ``report`` (the send end of this start's pipe; the supervisor restarts the collector or stops
    the run)."""
    use_one_core()
    try:
        _collect(start)
    except KeyboardInterrupt:
        pass
    except BaseException as exc:  # report everything, including env errors, to the learner
        try:
            report.send((start.index, start.spec.env, f"{type(exc).__name__}: {exc}"[:REPORT_CHARS // 4],
                         traceback.format_exc()[-REPORT_CHARS:]))
        except Exception:
            pass
        raise SystemExit(1)
    if start.spec.collectors.start_method == "spawn":
        # a spawned child is an interpreter of its own, whose teardown (freeing torch, ~0.5 s) the
        # learner's join would wait out at every stop; a forked one (fork, forkserver) already
        # ends with os._exit
        from ..quick_exit import quick_exit

        quick_exit(0)


def use_one_core() -> None:
    """A collector owns one core: N collectors + the learner already fill the cores, and BLAS or
    cv2 threads inside a 1..M-sample forward pass (or Mario's gray/resize) only add contention."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    import cv2
    import torch

    torch.set_num_threads(1)
    cv2.setNumThreads(1)


class Collector:
    """What every collector is, a process with a ring or a Ray actor: its batch of envs, the
    network it acts with (its weights loaded by the caller, from shared memory or the object
    store), the rollout, its exploration, and the counters of its ``block``. ``step`` is one
    collector step; the loops around it (``_collect``, ``RemoteCollector.collect``) only differ
    in where the records go and how the allowance and the weights arrive."""

    def __init__(self, spec: CollectorSpec, index: int, seed: int, block):
        from models import NetworkSpec, build_model
        from wrappers import BatchedEnv

        from .rollout import Rollout

        opts = spec.env_options
        self.env = BatchedEnv(spec.env, opts, spec.collectors.envs_per_collector, spec.collectors.env_threads)
        try:
            network = NetworkSpec.of(spec.learner, opts.frame_stack, self.env.n_actions)
            self.model = build_model(network).eval().to(spec.collectors.collector_device)
            self.rollout = Rollout.of(self.env, self.model, opts, seed, spec.collectors.act_bf16)
        except BaseException:
            self.env.close()
            raise
        self.exploration = Exploration(spec.collectors, index)
        self.block = block

    def load_weights(self, flat) -> None:
        """The learner's weights, flat (``models.weights``): the network and the rollout's
        acting copy of it both take them."""
        from models.weights import read_flat

        read_flat(self.model, flat)
        self.rollout.weights_loaded()

    def step(self, global_steps: int) -> tuple[np.ndarray, dict, int]:
        """Act in every env and step them once, epsilon from the run's agent steps; counts the
        agent steps played, the time in acting and in the envs, and the learning episodes the
        game family's rule ended. Returns (frames, record fields, agent steps)."""
        r, b = self.rollout, self.block
        act_ns, step_ns, cuts = r.act_ns, r.step_ns, r.game.cuts
        frames, fields, live, _ = r.step(self.exploration.epsilon(global_steps))
        b.played += live
        b.act_ns += r.act_ns - act_ns
        b.env_ns += r.step_ns - step_ns
        b.cuts += r.game.cuts - cuts
        return frames, fields, live

    def close(self) -> None:
        self.env.close()


class Exploration:
    """The epsilon a collector acts with: one schedule over the run's agent steps, or with
    --apex-epsilon a fixed epsilon per env, spread over the envs of every collector (process and
    Ray collectors alike, ``index`` numbering them all)."""

    def __init__(self, c: CollectorConfig, index: int):
        self.c = c
        M = c.envs_per_collector
        self.fixed = apex_epsilons(c.total_collectors * M, index * M, M) if c.apex_epsilon else None

    def epsilon(self, global_steps: int):
        return self.fixed if self.fixed is not None else epsilon_schedule(self.c, global_steps)


def _collect(start: CollectorStart):
    import signal

    import torch

    from wrappers.families import game_family

    from ..transport.control import ControlBlock
    from .process_start import learner_alive
    from ..transport.ring import Ring

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the learner, which stops us in order
    spec = start.spec
    c = spec.collectors
    # the record's fields are the common ones and the game family's, as the learner laid them out
    ring = Ring.attach(start.ring_name, c.ring_capacity, extras=game_family(spec.env).fields)
    control = ControlBlock.attach(start.control_name, start.n_weights)

    def give_up() -> bool:
        # Every wait below (first weights, the allowance, room in a full ring) ends on this. A
        # learner killed with SIGKILL never sets the stop flag, and nobody will drain the ring,
        # raise the allowance or publish weights again: its death ends the waits too.
        return control.stop or not learner_alive()

    block = ring.block
    collector = Collector(spec, start.index, start.seed, block)
    scratch = torch.empty(start.n_weights)
    while not control.new_weights(scratch):  # act only with the learner's weights
        if give_up():
            return
        time.sleep(0.01)
    collector.load_weights(scratch)
    pusher = RecordPusher(ring, collector.rollout, c.drop_when_full, give_up)

    while not give_up():
        if control.new_weights(scratch):
            collector.load_weights(scratch)
        if block.held_back():  # replay-ratio throttle: the learner is behind
            block.wait_for_allowance(give_up)
            continue
        pusher.push(*collector.step(control.global_steps))
    collector.close()
    ring.close()
    control.close()
