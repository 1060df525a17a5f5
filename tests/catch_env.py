"""Catch: a ball falls down a 7x7 grid and a paddle on the bottom row must be under it when it
lands (+1, else -1). Rendered as 84x84 uint8 gray frames, so it goes through exactly the
pipeline a real game does, and small enough that a DQN learns it in a minute on a CPU.

Importing this module registers ``Catch-v0`` (used as ``--env tests.catch_env:Catch-v0``) and
``CatchCrash-v0`` (raises inside ``step`` after 400 steps) and ``CatchNaN-v0`` (rewards turn
NaN after 400 steps of an env), for fault tests, ``WideCatch-v0`` (100 actions, 97 of them "stay"; more
than ``--mark-action``'s strip has columns), ``FlagCatch-v0`` (a distance and a flag, as Mario
reports them), ``WallCatch-v0`` (the paddle's column as the distance: a paddle that stays stands
still), and ``CountingCatch-v0``, whose frames carry the env
instance's id and the number of its observation (``stamp``), so a test can read from the replay
whether every stream's records arrived exactly once and in order.
"""
from __future__ import annotations

import os

import gymnasium as gym
import numpy as np

GRID, CELL = 7, 12  # 7 x 12 px = 84 px


class Catch(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(self, render_mode: str | None = None, crash_after: int = 0, nan_after: int = 0, n_actions: int = 3):
        self.observation_space = gym.spaces.Box(0, 255, (GRID * CELL, GRID * CELL), np.uint8)
        self.action_space = gym.spaces.Discrete(n_actions)  # left, stay, right (and more that stay)
        self.render_mode = render_mode
        self.crash_after, self.nan_after = crash_after, nan_after
        self.steps_taken = 0
        self.frame = np.zeros((GRID * CELL, GRID * CELL), np.uint8)

    def _draw(self) -> np.ndarray:
        self.frame[:] = 0
        r, c = self.ball
        self.frame[r * CELL:(r + 1) * CELL, c * CELL:(c + 1) * CELL] = 255
        p = self.paddle
        self.frame[(GRID - 1) * CELL + CELL // 2:, p * CELL:(p + 1) * CELL] = 128
        return self.frame.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.ball = (0, int(self.np_random.integers(GRID)))
        self.paddle = int(self.np_random.integers(GRID))
        return self._draw(), {}

    def step(self, action):
        self.steps_taken += 1
        if self.crash_after and self.steps_taken >= self.crash_after:
            raise RuntimeError(f"injected emulator fault after {self.steps_taken} steps")
        move = int(action) - 1 if action < 3 else 0
        self.paddle = int(np.clip(self.paddle + move, 0, GRID - 1))
        self.ball = (self.ball[0] + 1, self.ball[1])
        landed = self.ball[0] == GRID - 1
        reward = (1.0 if self.paddle == self.ball[1] else -1.0) if landed else 0.0
        if self.nan_after and self.steps_taken >= self.nan_after:
            reward = float("nan")
        return self._draw(), reward, landed, False, {}

    def render(self):
        return np.repeat(self.frame[..., None], 3, axis=2)


class CountingCatch(Catch):
    """Catch whose every observation is stamped in its top row's first 8 pixels: a random id of
    this env instance (4 bytes) and the observation's number in the instance's life (4 bytes,
    counting resets and steps alike)."""

    def __init__(self, render_mode: str | None = None):
        super().__init__(render_mode)
        self.uid = int.from_bytes(os.urandom(4), "little") | 1  # never 0, so a blank frame reads as no stamp
        self.count = 0

    def _draw(self) -> np.ndarray:
        frame = super()._draw()
        frame[0, :8] = np.frombuffer(np.array([self.uid, self.count], "<u4").tobytes(), np.uint8)
        self.count += 1
        return frame


class FlagCatch(Catch):
    """Catch that reports a distance and a flag, as Mario does: the ball's row as ``x_pos``, and
    ``flag_get`` when it lands, caught or not, so every whole game is a "flag run" (the finish
    line of ``--stop-at-flag``, tested without Mario's minutes)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {"x_pos": float(self.ball[0]), "flag_get": bool(terminated)}


class WallCatch(Catch):
    """Catch that reports the paddle's column as ``x_pos``, as Mario reports his: a paddle that
    stays, or presses against the right wall, stands still (``evaluate.STAND_STILL_STEPS``)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {"x_pos": float(self.paddle), "flag_get": False}


def stamp(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(instance ids, observation numbers) of CountingCatch frames [..., 84, 84]."""
    words = np.ascontiguousarray(frames[..., 0, :8]).view("<u4")
    return words[..., 0], words[..., 1]


gym.register("Catch-v0", entry_point=Catch)
gym.register("CountingCatch-v0", entry_point=CountingCatch)
gym.register("CatchCrash-v0", entry_point=Catch, kwargs={"crash_after": 400})
# 400 steps of each env: more than a collector of 4 envs can play before the first update (the
# learning start and the ratio's slack, 500 + 1,000 agent steps under tests.proc_utils.CATCH),
# so the replay holds no NaN until a good update has been trained and checkpointed. At 200, one
# collector given most of the warm-up's headroom crossed it first and every update was NaN.
gym.register("CatchNaN-v0", entry_point=Catch, kwargs={"nan_after": 400})
gym.register("FlagCatch-v0", entry_point=FlagCatch)
gym.register("WallCatch-v0", entry_point=WallCatch)
gym.register("WideCatch-v0", entry_point=Catch, kwargs={"n_actions": 100})  # more actions than the mark's strip has columns
