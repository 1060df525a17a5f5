"""The previous action, painted into each frame.

Under sticky actions (ALE v5: each emulator frame repeats the previous action with p = 0.25) the
next frames depend on the action the agent took last, which a stack of frames shows only through
the motion it has already caused: the state the network sees is not Markov in it. Painting that
action into the frame gives it back, and the frame stack then holds the last four actions.

It is painted rather than fed to the network beside the frames because everything downstream
already moves frames: the collectors' rings, the replay (which stores each frame once and
rebuilds stacks and n-step successors from them), acting, evaluation and every network take it
with no new tensor. The strip is the frame's bottom ``MARK_ROWS`` rows, which are static in
Pong, the Atari-5 games, Breakout and Boxing (measured over 400 random agent steps each; Qbert's
change by at most 32 of 255): ``n_actions`` blocks of ``frame_width // n_actions`` columns, the
previous action's block at 255 and the rest of the strip 0. A frame right after a reset has no
previous action: its strip is all 0.

``BatchedEnv`` (collectors, Ray collectors, ``--eval``) paints a batch at once; ``MarkAction``
paints one env's frames for ``make_env`` users, with the same strip.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

MARK_ROWS = 3  # the frame's bottom rows that hold the strip; the Nature stack's last conv row reads them


class ActionMark:
    """Paints the previous action into [N, H, W] uint8 frames, in place."""

    def __init__(self, n_actions: int, frame_width: int):
        if not 0 < n_actions <= frame_width:
            raise ValueError(f"{n_actions} actions do not fit the action mark's strip, {frame_width} pixels wide "
                             "(a column or more each); turn it off with --mark-action false")
        self.block = frame_width // n_actions

    def __call__(self, frames: np.ndarray, actions: np.ndarray | None, fresh: np.ndarray | None) -> np.ndarray:
        """``actions[i]`` was sent to env i to produce ``frames[i]``; where ``fresh[i]`` (a reset
        frame, its action ignored) or ``actions`` is None (after ``reset``) the strip stays dark."""
        strip = frames[:, -MARK_ROWS:, :]
        strip[:] = 0
        if actions is None:
            return frames
        marked = np.flatnonzero(~fresh)
        cols = np.asarray(actions)[marked, None] * self.block + np.arange(self.block)  # [n, block]
        strip[marked[:, None, None], np.arange(MARK_ROWS)[None, :, None], cols[:, None, :]] = 255
        return frames


class MarkAction(gym.Wrapper):
    """One env of [H, W] uint8 frames with the previous action painted in (dark after each reset),
    as ``BatchedEnv`` paints its batches; it sits below the frame stack, so the stack holds the last
    actions too."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.mark = ActionMark(int(env.action_space.n), env.observation_space.shape[-1])
        self._reset = np.ones(1, bool)
        self._step = np.zeros(1, bool)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self._paint(obs, 0, self._reset), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._paint(obs, action, self._step), reward, terminated, truncated, info

    def _paint(self, obs: np.ndarray, action, fresh: np.ndarray) -> np.ndarray:
        frame = np.array(obs, np.uint8)  # a copy: the env below may hand out its own buffer
        return self.mark(frame[None], np.array([int(action)]), fresh)[0]
