"""What an environment is built with: one small dataclass shared by the single-env factory,
the collectors' batched envs and the config (which fills it from its own fields)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnvOptions:
    frame_stack: int = 4          # frames per observation (single-env factory only; collectors stack themselves)
    frame_skip: int = 4           # emulator frames per agent step
    max_pool: bool = True         # max over the last two skipped frames (removes Atari sprite flicker)
    noop_max: int = 30            # random no-ops at reset (Atari)
    episodic_life: bool = True    # a lost life ends the learning episode, the game goes on (Atari)
    fire_reset: bool = True       # press FIRE after reset in games that wait for it (Atari)
    clip_rewards: bool = True     # rewards clipped to [-1, 1] for learning; logged returns stay raw
    sticky_actions: float = -1.0  # repeat_action_probability; -1 keeps the env id's own default (v5: 0.25)
    mario_actions: str = "simple"  # JoypadSpace action set: right_only, simple, complex
    frame_size: int = 84          # square gray frame side in pixels
