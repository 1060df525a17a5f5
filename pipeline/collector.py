"""Collector process: steps a batch of envs with one batched forward pass of a local policy copy
and writes every transition into its own shared-memory ring.

Runs under ``spawn`` as well as ``fork``: everything it needs arrives as plain arguments (the
config dict and segment names) and it attaches to shared memory by name.
"""
from __future__ import annotations

import os
import time
import traceback

import numpy as np

from .transition import EP_END, FLAG_GET, STATS


def _epsilon_schedule(cfg: dict, global_steps: int) -> float:
    frac = min(1.0, global_steps / max(1, cfg["eps_decay_steps"]))
    return cfg["eps_start"] + frac * (cfg["eps_end"] - cfg["eps_start"])


def apex_epsilons(num_envs_total: int, offset: int, count: int):
    """Ape-X (Horgan et al. 2018): env i of N explores with 0.4 ** (1 + 7 i / (N - 1))."""
    i = np.arange(offset, offset + count)
    return (0.4 ** (1 + 7 * i / max(1, num_envs_total - 1))).astype(np.float32)


class Publisher:
    """Writes each rollout step into the collector's ring and, when ``drop`` lets a full ring
    drop a step, keeps the replay streams honest about the gap: every env's next record starts
    a new segment (FIRST), so neither frame stacks nor n-step returns run across the missing
    records; the dropped games' statistics go out with the next push as STATS records; and the
    dropped agent steps are counted, so epsilon and the replay ratio still see them."""

    MAX_PENDING = 1024  # finished games held back from dropped pushes; older ones are given up

    def __init__(self, ring, rollout, drop: bool, stop):
        self.ring, self.rollout, self.drop, self.stop = ring, rollout, drop, stop
        self.pending: tuple | None = None  # (frames, fields) of STATS records still to send

    def publish(self, frames, fields: dict, live: int) -> bool:
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
            stats["flags"] = (stats["flags"] & (EP_END | FLAG_GET)) | STATS
            self.pending = (np.zeros((len(ended), *frames.shape[1:]), frames.dtype), stats)
        else:
            self.pending = None
        return False


def collector_seed(seed: int, index: int, launch: int) -> int:
    """Env and exploration seed of one collector start: apart per collector and per start."""
    return seed + 10_007 * index + 101 * launch


def run_collector(index: int, cfg: dict, ring_name: str, control_name: str, n_weights: int,
                  parent_pid: int, errors, launch: int = 0) -> None:
    """``launch`` numbers this start among every collector start of the run, resumes included,
    so no two starts play the same env seeds and exploration draws."""
    # One thread per collector: N collectors + the learner already fill the cores, and BLAS
    # threads inside a 1..M-sample forward pass only add contention.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        _collect(index, cfg, ring_name, control_name, n_weights, parent_pid, launch)
    except KeyboardInterrupt:
        pass
    except BaseException as exc:  # report everything, including env errors, to the learner
        try:
            errors.put((index, cfg["env"], f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        except Exception:
            pass
        raise SystemExit(1)


def _one_cv2_thread() -> None:
    """A collector owns one core: cv2's own thread pool (Mario's gray/resize) would only fight
    the learner for the others."""
    import cv2

    cv2.setNumThreads(1)


def _collect(index, cfg, ring_name, control_name, n_weights, parent_pid, launch):
    import signal

    import torch

    from models import build_model
    from wrappers import BatchedEnv, EnvOptions

    from .control import ControlBlock
    from .ring import Ring
    from .rollout import Rollout

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the learner, which stops us in order
    torch.set_num_threads(1)
    _one_cv2_thread()
    M, k = cfg["envs_per_collector"], cfg["frame_stack"]
    ring = Ring.attach(ring_name, cfg["queue_capacity"])
    control = ControlBlock.attach(control_name, n_weights)
    opts = EnvOptions(**cfg["_env_options"])
    env = BatchedEnv(cfg["env"], opts, M)
    seed = collector_seed(cfg["seed"], index, launch)
    model = build_model(cfg["model_arch"], k, env.n_actions, cfg["dueling"]).eval()
    scratch = torch.empty(n_weights)
    while not control.load_if_new(model, scratch):  # act only with the learner's weights
        if control.stop or os.getppid() != parent_pid:
            return
        time.sleep(0.01)

    rollout = Rollout(env, model, k, cfg["clip_rewards"], seed, cfg["reward_scale"])
    fixed_eps = apex_epsilons(cfg["num_collectors"] * M, index * M, M) if cfg["apex_epsilon"] else None
    block = ring.block
    publisher = Publisher(ring, rollout, cfg["drop_when_full"], lambda: control.stop)

    while not control.stop:
        if os.getppid() != parent_pid:  # the learner died: nobody will drain the ring
            break
        control.load_if_new(model, scratch)
        if block.held_back():  # replay-ratio throttle: the learner is behind
            block.wait_for_allowance(lambda: control.stop or os.getppid() != parent_pid)
            continue
        eps = fixed_eps if fixed_eps is not None else _epsilon_schedule(cfg, control.global_steps)
        act_ns, step_ns = rollout.act_ns, rollout.step_ns
        frames, fields, live, _ = rollout.step(eps)
        publisher.publish(frames, fields, live)
        block.played += live
        block.act_ns += rollout.act_ns - act_ns
        block.env_ns += rollout.step_ns - step_ns
    env.close()
    ring.close()
    control.close()
