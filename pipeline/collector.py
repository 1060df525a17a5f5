"""Collector process: steps a batch of envs with one batched forward pass of a local policy copy
and writes every transition into its own shared-memory ring.

Runs under ``spawn`` as well as ``fork``: everything it needs arrives as plain arguments (the
config dict and segment names) and it attaches to shared memory by name.
"""
from __future__ import annotations

import os
import time
import traceback


def _epsilon_schedule(cfg: dict, global_steps: int) -> float:
    frac = min(1.0, global_steps / max(1, cfg["eps_decay_steps"]))
    return cfg["eps_start"] + frac * (cfg["eps_end"] - cfg["eps_start"])


def apex_epsilons(num_envs_total: int, offset: int, count: int):
    """Ape-X (Horgan et al. 2018): env i of N explores with 0.4 ** (1 + 7 i / (N - 1))."""
    import numpy as np

    i = np.arange(offset, offset + count)
    return (0.4 ** (1 + 7 * i / max(1, num_envs_total - 1))).astype(np.float32)


def run_collector(index: int, cfg: dict, ring_name: str, control_name: str, n_weights: int,
                  parent_pid: int, errors, restart: int = 0) -> None:
    # One thread per collector: N collectors + the learner already fill the cores, and BLAS
    # threads inside a 1..M-sample forward pass only add contention.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    try:
        _collect(index, cfg, ring_name, control_name, n_weights, parent_pid, restart)
    except KeyboardInterrupt:
        pass
    except BaseException as exc:  # report everything, including env errors, to the learner
        try:
            errors.put((index, cfg["env"], f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        except Exception:
            pass
        raise SystemExit(1)


def _collect(index, cfg, ring_name, control_name, n_weights, parent_pid, restart):
    import signal

    import numpy as np
    import torch

    from models import build_model
    from wrappers import BatchedEnv, EnvOptions

    from .control import ControlBlock
    from .control import GLOBAL_STEPS
    from .ring import (ACT_NS, ALLOWED, EP_END, EPISODES, FIRST, FLAG_GET, LAST, STEP_NS, TERM, THROTTLE_NS,
                       TRUNC, ENV_STEPS, Ring)

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the learner, which stops us in order
    torch.set_num_threads(1)
    M, k = cfg["envs_per_collector"], cfg["frame_stack"]
    ring = Ring.attach(ring_name, cfg["queue_capacity"])
    control = ControlBlock.attach(control_name, n_weights)
    opts = EnvOptions(**cfg["_env_options"])
    env = BatchedEnv(cfg["env"], opts, M)
    seed = cfg["seed"] + 10_007 * index + 101 * restart
    rng = np.random.default_rng(seed)
    model = build_model(cfg["model_arch"], k, env.n_actions, cfg["dueling"]).eval()
    scratch = torch.empty(n_weights)
    while not control.load_if_new(model, scratch):  # act only with the learner's weights
        if control.stop or os.getppid() != parent_pid:
            return
        time.sleep(0.01)

    frames = env.reset(seed=seed)
    H, W = frames.shape[-2:]
    stack = np.repeat(frames[:, None], k, axis=1)
    first = np.ones(M, bool)
    ep_ret = np.zeros(M, np.float32)
    ep_len = np.zeros(M, np.int32)
    last_x = np.full(M, np.nan, np.float32)
    got_flag = np.zeros(M, bool)
    fixed_eps = apex_epsilons(cfg["num_collectors"] * M, index * M, M) if cfg["apex_epsilon"] else None
    clip = cfg["clip_rewards"]
    env_ids = np.arange(M, dtype=np.uint16)
    header = ring.header
    stop = lambda: control.stop  # noqa: E731

    while not control.stop:
        if os.getppid() != parent_pid:  # the learner died: nobody will drain the ring
            break
        control.load_if_new(model, scratch)
        if header[ENV_STEPS] >= header[ALLOWED]:  # replay-ratio throttle: the learner is behind
            t0 = time.perf_counter_ns()
            while header[ENV_STEPS] >= header[ALLOWED] and not control.stop and os.getppid() == parent_pid:
                time.sleep(0.001)
            header[THROTTLE_NS] += time.perf_counter_ns() - t0
            continue

        t0 = time.perf_counter_ns()
        with torch.inference_mode():
            greedy = model(torch.from_numpy(stack)).argmax(1).numpy()
        eps = fixed_eps if fixed_eps is not None else _epsilon_schedule(cfg, int(control.header[GLOBAL_STEPS]))
        explore = rng.random(M) < eps
        actions = np.where(explore, rng.integers(0, env.n_actions, M), greedy)
        t1 = time.perf_counter_ns()
        st = env.step(actions)
        t2 = time.perf_counter_ns()

        reset = st.reset
        live = ~reset
        flags = np.zeros(M, np.uint8)
        flags[first & live] |= FIRST
        flags[st.terminated & live] |= TERM
        flags[st.truncated & live] |= TRUNC
        flags[reset] |= LAST | EP_END
        flags[reset & got_flag] |= FLAG_GET
        reward = np.where(live, np.sign(st.rewards) if clip else st.rewards, 0.0).astype(np.float32)
        ep_ret += np.where(live, st.rewards, 0.0)
        ep_len += live
        has_x = live & ~np.isnan(st.x_pos)
        last_x[has_x] = st.x_pos[has_x]
        got_flag |= live & st.flag
        ring.push_blocking(stack[:, -1], stop, cfg["drop_when_full"],
                           action=np.where(live, actions, 0).astype(np.uint8), reward=reward, flags=flags,
                           env=env_ids, ep_return=ep_ret, ep_len=ep_len, x_pos=last_x)
        header[ENV_STEPS] += int(live.sum())
        header[EPISODES] += int(reset.sum())

        first &= reset  # a record was written for every live env; only reset envs start anew
        stack[:, :-1] = stack[:, 1:]
        stack[:, -1] = st.frames
        restart_stack = reset | (st.terminated & live)  # a reset, or a lost life (EpisodicLife)
        if restart_stack.any():
            stack[restart_stack] = st.frames[restart_stack][:, None]
            first |= restart_stack
            ep_ret[reset], ep_len[reset], last_x[reset], got_flag[reset] = 0.0, 0, np.nan, False
        header[ACT_NS] += t1 - t0
        header[STEP_NS] += t2 - t1
    env.close()
    ring.close()
    control.close()
