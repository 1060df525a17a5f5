"""Ray collectors, seen from the learner: starts the actors in the cluster, keeps each fed with
requests while the replay ratio allows, and hands their batches to the consolidation thread
as if they came from a ring.

The intake thread (one per learner) is the only place that talks to the actors: it tops up
each actor's requests (at most ``IN_FLIGHT``; the next waits in Ray's queue while the actor
plays, so it never idles on a round trip), waits on the oldest request of each, and queues
the finished batches per actor. The consolidation thread drains those queues into the same
replay writer as the rings, with stream ids after the process collectors' (actor r is
collector ``num_collectors + r``), so frame stacks and n-step returns stay per stream.

Faults: an actor that dies is restarted by Ray (``max_restarts``), reported with the node it
ran on, and counted against the run's restart budget by the supervisor. Requests run at most
once (``max_task_retries=0``): the ones in flight at the death fail, and a request sent while
Ray restarts the actor would fail too, so the intake probes the actor (``where``) until it
answers and only then sends requests again. Its streams start again: the requests after a
death carry a new ``launch``, the actor builds new envs for it (every stream's next record is
FIRST), and batches of an older launch are dropped whole, so no record is torn or delivered
twice. The actors are owned by this process (never detached),
so Ray stops them when it exits, however it exits.
"""
from __future__ import annotations

import collections
import dataclasses
import threading
import time

import numpy as np
import torch

from config_optimized import Config
from models.weights import write_flat

from ..actors.collector import CollectorSpec
from ..transport.collector_block import BLOCK_WORDS, CollectorBlock
from . import cluster
from .remote_collector import Batch, RemoteCollector, Request

IN_FLIGHT = 2      # requests queued per actor: one playing, one waiting behind it
START_TIMEOUT_S = 120
# A restarted actor's new worker imports torch and builds its envs while the learner trains:
# 16-105 s on a 2-core AMD EPYC (family 23 model 1) with a local 3-node cluster, before the actors
# ran at nice 0 (see _ACTOR_ENV). The run waits this long for it, training on meanwhile.
RESTART_TIMEOUT_S = 300
# Ray starts its worker processes at nice 15, so the raylet stays responsive; a collector is its
# node's main work, and at nice 15 beside a busy learner (a one-machine cluster) a restarted actor
# got ~4% of a core and took minutes to import torch. Its worker runs at nice 0, as the learner.
_ACTOR_ENV = {"env_vars": {"RAY_worker_niceness": "0"}}
PROBE_EVERY_S = 0.5  # while Ray restarts an actor, how often to ask whether it is back


class RemoteBlock(CollectorBlock):
    """The learner's counters and allowance for one Ray collector: a ring block's words, in this
    process's memory. ``played`` counts the agent steps requested, corrected to the steps played
    when a batch returns; ``throttle_ns`` is the actor's idle time between requests (the learner
    held its next request back)."""

    def __init__(self):
        super().__init__(np.zeros(BLOCK_WORDS, np.int64))
        self.bytes = 0          # batch bytes received (frames and fields)
        self.records = 0

    def correct(self, steps: int) -> None:
        """Count ``steps`` more (or, negative, fewer) as played, and move the allowance with them:
        a batch that played fewer steps than requested (final-observation records are records,
        not steps) or a request that failed frees no room by itself. The room goes back through
        the learner's next ``allow``, which counts the run's steps and what is still in flight.
        Freed here, each returning batch let a held-back actor send one more whole request, so
        whenever the learner set the pace the actors played on past the replay ratio's head
        start (a catch run with two restarted actors led the learner by 2,316 agent steps; the
        head start is 1,000)."""
        self.played += steps
        self.allowed += steps


class RemoteSource:
    """One actor, its requests in flight (oldest first) and its batches not yet consolidated."""

    def __init__(self, actor, index: int, node: str):
        self.actor, self.index, self.node = actor, index, node
        self.block = RemoteBlock()
        self.launch = 0
        self.down_since: float | None = None  # when Ray began restarting the actor (None: up)
        self.restarting = False               # failed since its last batch: its next batch is news
        self.probe = None                     # a ``where`` request asking whether it is back
        self.last_probe = 0.0
        # Each counter has one writer, so other threads read them without a lock.
        self.in_flight: collections.deque = collections.deque()  # (ref, launch, requested steps): intake thread only
        self.in_flight_steps = 0                                 # their requested steps (intake thread)
        self.ready: collections.deque = collections.deque()      # (frames, fields) for the consolidator
        self.queued = 0                                          # records put into ``ready`` (intake thread)
        self.taken = 0                                           # records taken from it (consolidation thread)

    def pending(self) -> int:
        """Agent steps requested or played that the consolidator has not taken yet."""
        return self.in_flight_steps + self.queued - self.taken


class RayCollectors:
    # The class the actors run. The benchmark's intake row swaps in a subclass that replays a
    # batch it played at a set rate, to load the intake at rates 2 cores cannot play.
    actor_class = RemoteCollector

    def __init__(self, cfg: Config, n_weights: int, global_steps, log, launch_base: int = 0):
        """``global_steps()``: the run's agent steps (epsilon); ``launch_base``: collector starts
        before this process, so a resumed run's actors play new seeds."""
        import ray

        col = cfg.collectors
        self.log, self.global_steps = log, global_steps
        self.envs_per_collector = col.envs_per_collector
        self.steps_per_request = max(1, col.ray_batch // col.envs_per_collector)
        self.flat = torch.empty(n_weights)
        self.weights: tuple[int, list] = (0, [None])
        self.deaths_seen: collections.deque = collections.deque()  # (index, node, message) for the supervisor
        self.returns_seen: collections.deque = collections.deque()  # (index, node): first batch after a failure
        self.stop_event = threading.Event()
        self.error: BaseException | None = None
        self.launch_base = launch_base
        self.sources: list[RemoteSource] = []
        info = cluster.connect(col.ray_address)
        try:
            free = int(ray.available_resources().get("CPU", 0))
            if free < col.ray_collectors:
                raise cluster.RayClusterError(
                    f"the Ray cluster at {info['head']} has {free} free CPUs for --ray-collectors {col.ray_collectors} "
                    f"(each takes one); add nodes or lower --ray-collectors")
            actor_cls = ray.remote(num_cpus=1, max_restarts=col.max_collector_restarts, max_task_retries=0,
                                   scheduling_strategy="SPREAD", runtime_env=_ACTOR_ENV)(self.actor_class)
            # a Ray collector acts on its own node's CPU, whatever the process collectors use
            spec = dataclasses.replace(CollectorSpec.of(cfg),
                                       collectors=dataclasses.replace(col, collector_device="cpu"))
            actors = [actor_cls.remote(col.num_collectors + r, spec, col.ray_compress) for r in range(col.ray_collectors)]
            try:
                nodes = ray.get([a.where.remote() for a in actors], timeout=START_TIMEOUT_S)
            except ray.exceptions.GetTimeoutError:
                for a in actors:
                    ray.kill(a, no_restart=True)
                raise cluster.RayClusterError(
                    f"{col.ray_collectors} Ray collectors did not start within {START_TIMEOUT_S} s on the cluster at "
                    f"{info['head']}; `ray status` shows what it is waiting for") from None
            except ray.exceptions.RayError as e:
                raise cluster.RayClusterError(
                    f"a Ray collector could not start ({_reason(e)}); every node needs this project and its "
                    "packages installed in the same Python version (pip install -e '.[ray]')") from None
            self.sources = [RemoteSource(a, col.num_collectors + r, n) for r, (a, n) in enumerate(zip(actors, nodes))]
        except BaseException:  # the trainer never saw this object: leave the cluster here
            cluster.disconnect()
            raise
        self.thread = threading.Thread(target=self._run, name="ray-intake", daemon=True)
        log(f"[MAIN] Ray cluster {info['head']}: {info['nodes']} node(s), {info['cpus']} CPUs; "
            f"{len(actors)} Ray collector(s) x {col.envs_per_collector} envs, "
            f"{self.steps_per_request * col.envs_per_collector} records per batch"
            f"{', zlib frames' if col.ray_compress else ''}: " + "; ".join(nodes))

    # ------------------------------------------------------------------ learner side
    def publish(self, model: torch.nn.Module) -> None:
        """One object-store copy of the weights per publish; actors fetch it when the version
        they hold is older."""
        import ray

        write_flat(model, self.flat)
        version = self.weights[0] + 1
        self.weights = (version, [ray.put(self.flat.numpy().copy())])

    def start(self) -> None:
        self.thread.start()

    def pending(self) -> int:
        return sum(s.pending() for s in self.sources)

    def drain(self, sink_for) -> int:
        """Hand every consolidated-yet batch to ``sink_for(collector index)(frames, fields)``."""
        moved = 0
        for src in self.sources:
            while src.ready:
                frames, fields = src.ready.popleft()
                sink_for(src.index)(frames, fields)
                src.taken += len(frames)
                moved += len(frames)
        return moved

    def deaths(self) -> list[tuple[int, str, str]]:
        return _take_all(self.deaths_seen)

    def returns(self) -> list[tuple[int, str]]:
        return _take_all(self.returns_seen)

    # ------------------------------------------------------------------ intake thread
    def _request(self, src: RemoteSource) -> None:
        version, ref = self.weights
        launch = self.launch_base + src.launch
        req = Request(self.steps_per_request, self.global_steps(), launch, version, ref)
        n = self.steps_per_request * self.envs_per_collector  # at most; corrected when the batch returns
        src.in_flight.append((src.actor.collect.remote(req), src.launch, n))
        src.in_flight_steps += n
        src.block.played += n

    def _run(self) -> None:
        import ray

        try:
            while not self.stop_event.is_set():
                for src in self.sources:
                    if src.down_since is not None:
                        self._probe(src)
                        continue
                    while len(src.in_flight) < IN_FLIGHT and not src.block.held_back():
                        self._request(src)
                heads = {src.in_flight[0][0]: src for src in self.sources if src.in_flight}
                if not heads:
                    time.sleep(0.001)
                    continue
                ready, _ = ray.wait(list(heads), num_returns=1, timeout=0.01)
                for ref in ready:
                    self._receive(heads[ref])
        except BaseException as e:  # surfaced by the trainer's health check
            self.error = e

    def _receive(self, src: RemoteSource) -> None:
        import ray

        ref, launch, requested = src.in_flight.popleft()
        src.in_flight_steps -= requested
        try:
            batch: Batch = ray.get(ref)
        except ray.exceptions.RayError as e:  # the actor died, or its envs raised (it lives on)
            src.block.correct(-requested)
            if launch == src.launch:  # the first failure of this start
                src.launch += 1
                src.restarting = True
                self.deaths_seen.append((src.index, src.node, _reason(e)))
                if isinstance(e, ray.exceptions.RayActorError):  # the process is gone: Ray restarts it
                    src.down_since, src.probe = time.monotonic(), None
            return
        src.block.correct(batch.live - requested)
        if launch != src.launch:  # a batch of a start that failed since: its streams ended
            return
        frames = batch.frames_array()
        src.block.env_ns += batch.env_ns
        src.block.act_ns += batch.act_ns
        src.block.cuts += batch.cuts
        src.block.throttle_ns += batch.idle_ns
        src.block.bytes += batch.nbytes()
        src.block.records += len(frames)
        src.node = batch.node  # a restarted actor may run elsewhere
        src.ready.append((frames, batch.fields))
        src.queued += len(frames)
        if src.restarting:  # its new envs deliver: back in the run (answering a probe is not enough)
            src.restarting = False
            self.returns_seen.append((src.index, src.node))

    def _probe(self, src: RemoteSource) -> None:
        """Ask a restarting actor whether it is back; give up after RESTART_TIMEOUT_S."""
        import ray

        now = time.monotonic()
        if src.probe is None:
            if now - src.last_probe >= PROBE_EVERY_S:
                src.probe, src.last_probe = src.actor.where.remote(), now
            return
        ready, _ = ray.wait([src.probe], timeout=0)
        if not ready:
            return
        try:
            src.node = ray.get(src.probe)
            src.down_since = None
        except ray.exceptions.RayError:
            if now - src.down_since > RESTART_TIMEOUT_S:
                raise cluster.RayClusterError(
                    f"Ray collector {src.index} did not come back within {RESTART_TIMEOUT_S} s of its failure; "
                    "`ray status` shows whether the cluster has a free CPU for it") from None
        src.probe = None

    # ------------------------------------------------------------------ shutdown
    def stop(self) -> None:
        """Stop the intake and the actors (Ray would also stop them when this process exits)."""
        import ray

        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)
        if not self.thread.is_alive() and self.error is None:  # the intake thread is gone: its queues are ours
            try:
                self._receive_finished()
            except Exception:  # a lost cluster: the batches are lost with it, the shutdown goes on
                pass
        for src in self.sources:
            try:
                ray.kill(src.actor, no_restart=True)
            except Exception:
                pass

    def _receive_finished(self) -> None:
        """The last intake: batches the actors finished before the stop, oldest first per actor
        (stream order), for the consolidator's last drain; the ones still playing are given up."""
        import ray

        for src in self.sources:
            while src.in_flight and ray.wait([src.in_flight[0][0]], timeout=0)[0]:
                self._receive(src)

    def close(self) -> None:
        cluster.disconnect()


def _take_all(queue: collections.deque) -> list:
    out = []
    while queue:
        out.append(queue.popleft())
    return out


def _reason(e: BaseException) -> str:
    cause = getattr(e, "cause", None)  # RayTaskError: what the actor's code raised
    if isinstance(cause, BaseException):
        return f"raised {type(cause).__name__}: {cause}"
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"died ({type(e).__name__}: {lines[0] if lines else ''})"
