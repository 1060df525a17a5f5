"""Ray collector (rollout worker on another machine): a collector process's ``Collector`` (the
same envs, policy copy, rollout, exploration and counters), driven by requests instead of a ring.

Each ``collect`` request carries what a process collector reads from shared memory (the run's
step count for epsilon, the latest weights' version and object-store reference) and returns a
batch of records in the ring's schema. The learner keeps at most two requests in flight per
actor, so the actor is never idle unless the replay ratio holds it back, and Ray runs an
actor's requests one at a time in the order they were sent, so a stream's records arrive in
order. Imported by Ray workers and by the learner's intake; it imports Ray only for ``ray.get``.
"""
from __future__ import annotations

import os
import socket
import time
import zlib
from dataclasses import dataclass

import numpy as np

from ..actors.collector import Collector, CollectorSpec, collector_seed, use_one_core
from ..transport.collector_block import CollectorBlock


@dataclass(frozen=True)
class Request:
    steps: int             # rollout steps to play (each steps every env once)
    global_steps: int      # the run's agent steps, as the learner counts them (epsilon)
    launch: int            # this actor's start number in the run: new envs and seeds after a restart
    weights_version: int
    weights: list          # [ObjectRef] of the flat float32 weights; a list, so Ray does not fetch it for us


@dataclass
class Batch:
    frames: np.ndarray | bytes  # [n, 84, 84] uint8, or its zlib bytes (--ray-compress)
    fields: dict                # the ring's record fields (pipeline/transport/transition.py, and the game family's)
    live: int                   # agent steps among the records
    env_ns: int                 # time stepping the envs for this batch
    act_ns: int                 # time choosing actions
    idle_ns: int                # time since the previous request ended: waiting for the learner's next one
    node: str                   # the actor's host and pid, for the learner's reports
    launch: int                 # echo of the request's launch
    cuts: int = 0               # learning episodes the game family's rule ended in this batch (Mario's stalls)

    def frames_array(self, shape=(84, 84)) -> np.ndarray:
        if isinstance(self.frames, bytes):
            return np.frombuffer(zlib.decompress(self.frames), np.uint8).reshape(-1, *shape)
        return self.frames

    def nbytes(self) -> int:
        """Bytes the batch puts on the wire (frames and fields; Ray's own framing not counted)."""
        f = len(self.frames) if isinstance(self.frames, bytes) else self.frames.nbytes
        return f + sum(v.nbytes for v in self.fields.values())


class RemoteCollector:
    """One Ray actor: M envs stepped with one batched forward pass, like a collector process.

    Lazily built on the first request (and again after a restart, whose request carries a new
    ``launch``), so the constructor returns at once and a restarted actor never replays the
    seeds of the start before it."""

    def __init__(self, index: int, spec: CollectorSpec, compress: bool):
        use_one_core()
        self.index, self.spec, self.compress = index, spec, compress
        self.node = f"{socket.gethostname()} ({_node()}), pid {os.getpid()}"
        self.collector: Collector | None = None
        self.block = CollectorBlock.local()  # the actor's counters: the learner reads them from each batch
        self.launch = -1
        self.version = 0
        self.last_end = None

    def where(self) -> str:
        return self.node

    def collect(self, req: Request) -> Batch:
        import ray
        import torch

        t_start = time.perf_counter_ns()
        idle = 0 if self.last_end is None else t_start - self.last_end
        if req.launch != self.launch:  # the first request of this start
            if self.collector is not None:
                self.collector.close()
                self.collector = None
            self.collector = Collector(self.spec, self.index, collector_seed(self.spec.seed, self.index, req.launch),
                                       self.block)
            self.version, self.launch = 0, req.launch
        if req.weights_version != self.version:
            # a copy: the object store's array is read-only
            self.collector.load_weights(torch.from_numpy(ray.get(req.weights[0]).copy()))
            self.version = req.weights_version
        b = self.block
        played, env0, act0, cuts0 = b.played, b.env_ns, b.act_ns, b.cuts
        frames, fields = [], []
        for _ in range(req.steps):
            f, fl, _ = self.collector.step(req.global_steps)
            frames.append(f)
            fields.append(fl)
        out = np.concatenate(frames)
        cat = {k: np.concatenate([fl[k] for fl in fields]) for k in fields[0]}
        payload = zlib.compress(out.tobytes(), 1) if self.compress else out
        self.last_end = time.perf_counter_ns()
        return Batch(payload, cat, b.played - played, b.env_ns - env0, b.act_ns - act0, idle, self.node, req.launch,
                     b.cuts - cuts0)


def _node() -> str:
    """The node's IP and the first digits of its Ray node id (several nodes may share an IP)."""
    try:
        import ray

        return f"{ray.util.get_node_ip_address()} node {ray.get_runtime_context().get_node_id()[:8]}"
    except Exception:
        return "?"
