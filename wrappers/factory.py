"""``make_env``: one entry point for every supported game."""
from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np

from .atari import make_atari_env
from .mario import make_mario_env
from .options import EnvOptions
from .registry import check_env_id, is_mario, is_module_env_id
from .stacking import stack_frames


def make_env(env_id: str, opts: EnvOptions | None = None, render_mode: str | None = None, **overrides) -> gym.Env:
    """A Gymnasium env producing uint8 [frame_stack, 84, 84] gray frame stacks.

    ``env_id`` is an ALE id (``ALE/Pong-v5``), a Mario id (``SuperMarioBros-1-1-v0``) or a
    ``module:EnvId`` id of an env that gives uint8 84x84 frames;
    keyword ``overrides`` replace fields of ``opts`` (see ``EnvOptions``).
    """
    opts = dataclasses.replace(opts or EnvOptions(), **overrides)
    check_env_id(env_id)
    if is_mario(env_id):
        return make_mario_env(env_id, opts, render_mode)
    if is_module_env_id(env_id):
        return make_pixel_env(env_id, opts, render_mode)
    return make_atari_env(env_id, opts, render_mode)


def count_actions(env_id: str, opts: EnvOptions) -> int:
    """The game's number of actions, from one env built in this process."""
    env = make_env(env_id, opts)
    n = int(env.action_space.n)
    env.close()
    return n


def make_pixel_env(env_id: str, opts: EnvOptions, render_mode: str | None = None) -> gym.Env:
    """A ``module:EnvId`` env that already renders 84x84 gray frames: only episode statistics,
    reward clipping and frame stacking are added."""
    env = gym.make(env_id, render_mode=render_mode)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    if opts.clip_rewards:
        env = gym.wrappers.TransformReward(env, np.sign)
    return stack_frames(env, opts)


def make_single_frame_env(env_id: str, opts: EnvOptions, render_mode: str | None = None) -> gym.Env:
    """The same env without frame stacking, reward clipping or the action mark, for collectors:
    they stack frames themselves (so the replay stores each frame once), need raw rewards for the
    logs, and ``BatchedEnv`` paints the mark on the whole batch."""
    return make_env(env_id, opts, render_mode, frame_stack=1, clip_rewards=False, mark_action=False)
