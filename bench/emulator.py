"""The NES emulator's ceiling for Mario, and what a collector keeps of it.

Each layer is timed alone on one core, in this process, with random actions from the collector's
action set, so each figure is what the layer above it could reach at most:

1. ``nes-py NESEnv``: gym-super-mario-bros' env, one emulator frame per ``step`` (frames/s);
2. ``nes-py VectorNESEmulator``: nes-py's native same-ROM vector emulator, C++ stepping of 8
   emulators plus its native grayscale copy (frames/s; no reward or episode logic, which
   gym-super-mario-bros keeps in Python, so this is an upper bound for a native Mario env);
3. ``wrapped env``: our single-frame Mario env (action set, gray 84x84, frame skip with max-pool,
   episode statistics), agent steps/s times the frame skip;
4. ``batched envs``: the collector's ``BatchedEnv`` of 8 envs, as a collector steps them (nes-py's
   vector emulator with the game's logic on arrays, ``wrappers/mario_vector.py``) and as 8 of the
   Python envs above in a gymnasium SyncVectorEnv (``native=False``);
5. ``rollout``: ``Rollout.step`` as a collector runs it: batched epsilon-greedy acting with the
   BatchNorm DQN (in bf16 where the profile acts in bf16), the env step and the records; its act
   / env shares come from its own timers. It runs twice: at epsilon 1, so it plays the uniform
   random actions of the rows above and differs from them only by its code (with no forward
   pass: a step where every env acts at random skips it, as a run's first fill of the replay
   does); and as a seeded untrained network at epsilon 0.1 (a forward pass every step), whose
   play dies more often. A death, a reset and its no-op start are emulated frames that no agent
   step counts, so how a policy plays moves agent steps/s at the same code.

The collector's efficiency is rollout steps/s against the emulator's frames/s divided by the
frame skip (the goal is at least 90%), for both plays.
"""
from __future__ import annotations

import statistics
import time

import numpy as np
import torch

from .common import rate

NUM_ENVS = 8


def _median_rate(step, windows: int, seconds: float, warmed=lambda: None) -> float:
    """The median of ``windows`` rates of ``step`` over ``seconds`` each, after a warm-up;
    ``warmed()`` runs between the two (a layer's own timers zeroed there)."""
    rate(step, min(seconds, 0.5))
    warmed()
    return statistics.median(rate(step, seconds) for _ in range(windows))


def _single_env_rate(env, windows: int, seconds: float) -> float:
    """One env (gymnasium's API) stepped with seeded uniform random actions, reset where a game
    ends, and closed after: the rate of any single-env layer."""
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    n = env.action_space.n

    def step():
        _, _, term, trunc, _ = env.step(int(rng.integers(n)))
        if term or trunc:
            env.reset()
        return 1
    try:
        return _median_rate(step, windows, seconds)
    finally:
        env.close()


def emulator_frames_per_s(env_id: str, mario_actions: str, windows: int, seconds: float) -> float:
    import gym_super_mario_bros
    from nes_py.wrappers import JoypadSpace

    from wrappers.mario import action_set

    return _single_env_rate(JoypadSpace(gym_super_mario_bros.make(env_id), action_set(mario_actions)),
                            windows, seconds)


def vector_emulator_frames_per_s(mario_actions: str, windows: int, seconds: float) -> float:
    """nes-py's native vector emulator on the SMB ROM. Its actions are raw controller bytes, so
    the action set is mapped to bytes as JoypadSpace does. Without the game's death/reset logic
    Mario dies and the title demo plays on; the emulator's cost per frame is the same."""
    from gym_super_mario_bros._roms import smb1_rom_path
    from nes_py.vector_env import VectorNESEmulator
    from nes_py.wrappers.joypad_space import JoypadSpace

    from wrappers.mario import action_set

    buttons = JoypadSpace._button_map
    codes = np.array([sum(buttons[b] for b in combo) for combo in action_set(mario_actions)], np.uint8)
    emu = VectorNESEmulator(smb1_rom_path(), NUM_ENVS)
    emu.reset()
    out = np.empty((NUM_ENVS, 240, 256), np.uint8)
    rng = np.random.default_rng(0)

    def step():
        emu.step(codes[rng.integers(len(codes), size=NUM_ENVS)])
        emu.observation("grayscale", out)
        return NUM_ENVS
    try:
        return _median_rate(step, windows, seconds)
    finally:
        emu.close()


def wrapped_env_steps_per_s(env_id: str, opts, windows: int, seconds: float) -> float:
    from wrappers.factory import make_single_frame_env

    return _single_env_rate(make_single_frame_env(env_id, opts), windows, seconds)


def batched_env_steps_per_s(env_id: str, opts, windows: int, seconds: float, native: bool = True) -> float:
    from wrappers import BatchedEnv

    env = BatchedEnv(env_id, opts, NUM_ENVS, native=native)
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def step():
        env.step(rng.integers(0, env.n_actions, NUM_ENVS))
        return NUM_ENVS
    try:
        return _median_rate(step, windows, seconds)
    finally:
        env.close()


def rollout_steps_per_s(env_id: str, opts, frame_stack: int, windows: int, seconds: float,
                        act_bf16: bool = False, eps: float = 1.0) -> dict:
    from models import NetworkSpec, build_model
    from pipeline.actors.rollout import Rollout
    from wrappers import BatchedEnv

    env = BatchedEnv(env_id, opts, NUM_ENVS)
    # a seeded network: below epsilon 1 its greedy action decides how often Mario dies, and the
    # frames a death skips unseen made unseeded runs differ by +-20%
    torch.manual_seed(0)
    model = build_model(NetworkSpec("batchnorm", frame_stack, env.n_actions)).eval()
    rollout = Rollout(env, model, frame_stack, False, seed=0, act_bf16=act_bf16)

    def step():
        return rollout.step(eps)[2]
    t0 = 0

    def warmed():  # the rollout's own act/env timers count from here
        nonlocal t0
        rollout.act_ns = rollout.step_ns = 0
        t0 = time.perf_counter_ns()
    try:
        steps_per_s = _median_rate(step, windows, seconds, warmed)
        total = time.perf_counter_ns() - t0
    finally:
        env.close()
    return {"steps_per_s": steps_per_s, "act_share": rollout.act_ns / total, "env_share": rollout.step_ns / total,
            "other_share": 1 - (rollout.act_ns + rollout.step_ns) / total}


def bench_emulator(env_id: str = "SuperMarioBros-1-1-v0", windows: int = 5, seconds: float = 2.0) -> dict:
    """Every layer's rate on one core (torch held to one thread, as in a collector)."""
    import cv2

    from pipeline.settings.layers import resolve_config

    torch.set_num_threads(1)  # as in a collector
    cv2.setNumThreads(1)
    cfg = resolve_config({"env": env_id}).cfg  # the env as a run builds it (the game's preset included)
    opts = cfg.env_options
    skip = opts.frame_skip
    emu = emulator_frames_per_s(env_id, cfg.env_options.mario_actions, windows, seconds)
    vec = vector_emulator_frames_per_s(cfg.env_options.mario_actions, windows, seconds)
    wrapped = wrapped_env_steps_per_s(env_id, opts, windows, seconds)
    batched = batched_env_steps_per_s(env_id, opts, windows, seconds)
    batched_python = batched_env_steps_per_s(env_id, opts, windows, seconds, native=False)
    roll = rollout_steps_per_s(env_id, opts, cfg.env_options.frame_stack, windows, seconds, cfg.collectors.act_bf16)
    played = rollout_steps_per_s(env_id, opts, cfg.env_options.frame_stack, windows, seconds, cfg.collectors.act_bf16,
                                 eps=0.1)
    ceiling = emu / skip
    return {"env": env_id, "frame_skip": skip, "num_envs": NUM_ENVS, "mario_actions": cfg.env_options.mario_actions,
            "emulator_frames_per_s": emu, "vector_emulator_frames_per_s": vec,
            "wrapped_env_frames_per_s": wrapped * skip, "batched_env_frames_per_s": batched * skip,
            "batched_python_env_frames_per_s": batched_python * skip,
            "rollout_frames_per_s": roll["steps_per_s"] * skip, "rollout_steps_per_s": roll["steps_per_s"],
            "rollout_shares": {k: roll[k] for k in ("act_share", "env_share", "other_share")},
            "act_bf16": cfg.collectors.act_bf16,
            "policy_rollout_frames_per_s": played["steps_per_s"] * skip, "policy_rollout_steps_per_s": played["steps_per_s"],
            "policy_rollout_shares": {k: played[k] for k in ("act_share", "env_share", "other_share")},
            "ceiling_steps_per_s": ceiling, "collector_efficiency": roll["steps_per_s"] / ceiling,
            "policy_collector_efficiency": played["steps_per_s"] / ceiling}


def print_emulator(e: dict) -> None:
    emu = e["emulator_frames_per_s"]
    print(f"\n| {e['env']}, one core | frames/s | vs the emulator |\n|---|---|---|")
    for label, key in (("nes-py NESEnv (gym-super-mario-bros)", "emulator_frames_per_s"),
                       (f"nes-py VectorNESEmulator x{e['num_envs']} + native gray copy", "vector_emulator_frames_per_s"),
                       ("wrapped env (actions, gray 84x84, skip+max, stats)", "wrapped_env_frames_per_s"),
                       (f"BatchedEnv x{e['num_envs']}, Python envs (SyncVectorEnv)", "batched_python_env_frames_per_s"),
                       (f"BatchedEnv x{e['num_envs']}, native vector (MarioVectorEnv)", "batched_env_frames_per_s"),
                       ("Rollout.step (env + records; no forward pass), random actions", "rollout_frames_per_s"),
                       ("Rollout.step, a seeded untrained network at epsilon 0.1", "policy_rollout_frames_per_s")):
        print(f"| {label} | {e[key]:,.0f} | {100 * e[key] / emu:.0f}% |")
    for what, pre in (("random actions", ""), ("the network at epsilon 0.1", "policy_")):
        s = e[f"{pre}rollout_shares"]
        print(f"Rollout, {what}: {e[f'{pre}rollout_steps_per_s']:,.0f} agent steps/s = "
              f"{100 * e[f'{pre}collector_efficiency']:.0f}% of the emulator's {emu:,.0f} frames/s / frame skip "
              f"{e['frame_skip']}; time: env {100 * s['env_share']:.0f}%, acting {100 * s['act_share']:.0f}%, "
              f"other {100 * s['other_share']:.0f}%")
