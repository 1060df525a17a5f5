"""Collector supervision (the learner process's view of its rollout workers): starts each
collector process with a seed of its own, notices one that died, reports why (its traceback
when it raised) and restarts it within the run's restart budget, and stops them all in order.
Ray collectors share that budget: Ray restarts them, and this reports each failure the intake
saw, with the node the actor ran on.
"""
from __future__ import annotations

from .collector import CollectorSpec, CollectorStart, run_collector
from .ray_errors import RayClusterError
from .no_ray import NoRayCollectors


class CollectorsFailed(RuntimeError):
    pass


class Collectors:
    def __init__(self, ctx, cfg, ring_names: list[str], control_name: str, n_weights: int, log, launches: int = 0,
                 remote=None):
        """``launches``: collector starts before this process (a resumed run's), so no two starts
        of the run play the same env seeds and exploration draws. ``remote``: the Ray
        collectors' intake (``RayCollectors``), or None: no Ray."""
        self.ctx, self.cfg, self.log = ctx, cfg, log
        self.remote = NoRayCollectors() if remote is None else remote
        self.ring_names, self.control_name, self.n_weights = ring_names, control_name, n_weights
        self.spec = CollectorSpec.of(cfg)
        # One pipe per collector start for its failure report, not a multiprocessing.Queue: a
        # queue's locks are named semaphores (/dev/shm/sem.mp-*) that only the resource tracker
        # unlinks, and a kill of the run's whole process group (a container's OOM kill) takes
        # the tracker too, leaving them for good. A pipe leaves nothing behind.
        self.reports: list = [None] * len(ring_names)
        self.launches = launches
        self.restarts = 0
        self.procs: list = [None] * len(ring_names)
        self.seeds: list = [None] * len(ring_names)
        try:
            for i in range(len(ring_names)):
                self._start(i)
        except BaseException:  # none of the started ones may outlive a failed start
            for p in self.procs:
                if p is not None:
                    p.kill()
                    p.join()
            self.close()
            raise

    def _start(self, i: int) -> None:
        start = CollectorStart(i, self.spec, self.ring_names[i], self.control_name, self.n_weights,
                               self.launches)
        self.seeds[i] = start.seed
        recv, send = self.ctx.Pipe(duplex=False)
        p = self.ctx.Process(target=run_collector, name=f"collector-{i}", args=(start, send), daemon=True)
        self.launches += 1
        try:
            p.start()
        finally:
            send.close()  # the child's copy is its own: the pipe reads EOF once the child is gone
        self.procs[i], self.reports[i] = p, recv

    def check(self) -> None:
        """Restart a collector that died; CollectorsFailed once the restart budget is spent."""
        limit = self.cfg.collectors.max_collector_restarts
        for i, p in enumerate(self.procs):
            if p.is_alive():
                continue
            code = p.exitcode
            p.join()
            detail = ""
            try:
                if self.reports[i].poll():
                    idx, env_id, msg, tb = self.reports[i].recv()
                    detail = f"\n[MAIN] collector {idx} ({env_id}) raised {msg}\n{tb}"
            except (OSError, EOFError):
                pass  # it died without a report (a kill)
            self.reports[i].close()
            how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
            self.log(f"[MAIN] Collector {i} {how}.{detail}")
            self._spend_restart(f"collector {i}")
            self.log(f"[MAIN] Restarting collector {i} (restart {self.restarts}/{limit})")
            self._start(i)
        if self.remote.error:
            if isinstance(self.remote.error, RayClusterError):  # one line for the user: the message says it all
                raise self.remote.error
            raise RuntimeError("the Ray intake thread failed") from self.remote.error
        for index, node, reason in self.remote.deaths():
            self.log(f"[MAIN] Ray collector {index} on {node} {reason}.")
            self._spend_restart(f"Ray collector {index}")
            self.log(f"[MAIN] Ray restarts collector {index} with new envs (restart {self.restarts}/{limit})")
        for index, node in self.remote.returns():
            self.log(f"[MAIN] Ray collector {index} is back on {node}: its new envs deliver")

    def _spend_restart(self, who: str) -> None:
        limit = self.cfg.collectors.max_collector_restarts
        if self.restarts >= limit:
            raise CollectorsFailed(f"{who} failed and the restart budget (--max-collector-restarts {limit}) is spent; "
                                   "see the report above")
        self.restarts += 1

    def join(self) -> None:
        """Wait for every collector to leave (after the control block's stop flag), killing any
        that does not within seconds."""
        for p in self.procs:
            if p is not None:
                p.join(timeout=10)
                if p.is_alive():
                    p.terminate()
                    p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join()

    def close(self) -> None:
        for r in self.reports:
            if r is not None:
                r.close()
