"""The top of every single env: the action mark, then the frame stack."""
from __future__ import annotations

import gymnasium as gym

from .action_mark import MarkAction
from .options import EnvOptions


def stack_frames(env: gym.Env, opts: EnvOptions) -> gym.Env:
    """``env``'s [H, W] frames as [frame_stack, H, W] stacks, the previous action painted in first
    where ``mark_action`` asks (so each stacked frame keeps its own action)."""
    if opts.mark_action:
        env = MarkAction(env)
    if opts.frame_stack > 1:
        return gym.wrappers.FrameStackObservation(env, opts.frame_stack)
    return gym.wrappers.ReshapeObservation(env, (1, *env.observation_space.shape))
