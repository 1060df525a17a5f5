"""Single Atari envs with the seven classic wrappers, each switchable.

gymnasium's AtariPreprocessing already does NoopReset, MaxAndSkip and WarpFrame in one pass,
ClipReward and FrameStackObservation exist too; EpisodicLife and FireReset are not in gymnasium
(its ``terminal_on_life_loss`` resets the whole game), so those two are written here, after
SB3's well-known versions.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

from .options import EnvOptions
from .registry import check_env_id, sticky_probability
from .stacking import stack_frames


class EpisodicLife(gym.Wrapper):
    """A lost life ends the learning episode; reset() then continues the same game with a no-op
    instead of restarting it, so the agent still sees every life (Mnih et al. 2015)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        lives = self.env.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.game_over:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.lives = self.env.unwrapped.ale.lives()
        return obs, info


class FireReset(gym.Wrapper):
    """Press FIRE after reset, for games (Breakout, Pong's serve) that wait for it."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()
        if "FIRE" not in meanings:
            raise ValueError("FireReset needs a FIRE action")
        self.fire = meanings.index("FIRE")

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(self.fire)
        if terminated or truncated:
            obs, info = self.env.reset(**kwargs)
        return obs, info


def has_fire(env: gym.Env) -> bool:
    return "FIRE" in env.unwrapped.get_action_meanings()


def make_atari_env(env_id: str, opts: EnvOptions, render_mode: str | None = None) -> gym.Env:
    """One Atari env: uint8 [stack, 84, 84] observations, raw returns in info['episode']."""
    import ale_py

    gym.register_envs(ale_py)
    check_env_id(env_id)
    sticky = sticky_probability(env_id, opts.sticky_actions)
    # With max_pool the skipping happens in AtariPreprocessing (which max-pools the last two
    # frames); without it the emulator skips by itself, the cheaper plain skip.
    env = gym.make(env_id, frameskip=1 if opts.max_pool else opts.frame_skip,
                   repeat_action_probability=sticky, render_mode=render_mode)
    env = gym.wrappers.AtariPreprocessing(
        env, noop_max=opts.noop_max, frame_skip=opts.frame_skip if opts.max_pool else 1,
        screen_size=opts.frame_size, terminal_on_life_loss=False, grayscale_obs=True, scale_obs=False)
    # Below the life/clip wrappers, so the logged return is the raw score of a whole game.
    env = gym.wrappers.RecordEpisodeStatistics(env)
    if opts.episodic_life:
        env = EpisodicLife(env)
    if opts.fire_reset and has_fire(env):
        env = FireReset(env)
    if opts.clip_rewards:
        env = gym.wrappers.TransformReward(env, np.sign)
    return stack_frames(env, opts)
