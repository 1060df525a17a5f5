"""Super Mario Bros envs from gym-super-mario-bros 9.x (Gymnasium-native).

nes-py returns observations that are live views of emulator memory: the next step overwrites
them. ``GrayResize`` produces a new array with cv2 (gray + area resize in one pass), so nothing
downstream ever holds a view into the emulator.
"""
from __future__ import annotations

import cv2
import gymnasium as gym
import numpy as np

from .options import EnvOptions
from .registry import check_env_id

ACTION_SETS = ("right_only", "simple", "complex")


class GrayResize(gym.ObservationWrapper):
    """RGB 240x256 -> gray size x size uint8, copied out of emulator memory."""

    def __init__(self, env: gym.Env, size: int):
        super().__init__(env)
        self.size = size
        self.observation_space = gym.spaces.Box(0, 255, (size, size), np.uint8)

    def observation(self, obs):
        gray = cv2.cvtColor(obs, cv2.COLOR_RGB2GRAY)
        return cv2.resize(gray, (self.size, self.size), interpolation=cv2.INTER_AREA)


class SkipFrames(gym.Wrapper):
    """Repeat the action ``skip`` times, summing rewards; used when max-pooling is switched off."""

    def __init__(self, env: gym.Env, skip: int):
        super().__init__(env)
        self.skip = skip

    def step(self, action):
        total = 0.0
        for _ in range(self.skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += reward
            if terminated or truncated:
                break
        return obs, total, terminated, truncated, info


def action_set(name: str) -> list[list[str]]:
    from gym_super_mario_bros import actions

    sets = {"right_only": actions.RIGHT_ONLY, "simple": actions.SIMPLE_MOVEMENT, "complex": actions.COMPLEX_MOVEMENT}
    if name not in sets:
        raise ValueError(f"mario_actions={name!r} is not an action set; choose one of {list(sets)}")
    return sets[name]


def make_mario_env(env_id: str, opts: EnvOptions, render_mode: str | None = None) -> gym.Env:
    """One Mario env: uint8 [stack, 84, 84] observations; info keeps x_pos, flag_get, world, stage."""
    import gym_super_mario_bros
    from nes_py.wrappers import JoypadSpace

    check_env_id(env_id)
    env = gym_super_mario_bros.make(env_id, render_mode=render_mode)
    env = JoypadSpace(env, action_set(opts.mario_actions))
    env = GrayResize(env, opts.frame_size)
    if opts.max_pool:
        env = gym.wrappers.MaxAndSkipObservation(env, skip=opts.frame_skip)
    elif opts.frame_skip > 1:
        env = SkipFrames(env, opts.frame_skip)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    if opts.clip_rewards:
        env = gym.wrappers.TransformReward(env, np.sign)
    if opts.frame_stack > 1:
        env = gym.wrappers.FrameStackObservation(env, opts.frame_stack)
    else:
        env = gym.wrappers.ReshapeObservation(env, (1, opts.frame_size, opts.frame_size))
    return env
