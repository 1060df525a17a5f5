"""What an environment is built with: the env part of the training config, also handed on its
own to the single-env factory and the collectors' batched envs.

``doc`` declares a config field once: its default, its one-line help and, where only some values
work, its ``choices``; the command line, the config files and validation all read them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# gym-super-mario-bros' RIGHT_ONLY, SIMPLE_MOVEMENT and COMPLEX_MOVEMENT, and right_run (wrappers.mario.RIGHT_RUN)
MARIO_ACTION_SETS = ("right_only", "simple", "complex", "right_run")


def doc(text: str, default, *, choices: tuple | None = None, **kw):
    """A config field with its help text (and allowed values); ``type`` in ``kw`` overrides the
    type read from the default (a field whose default is None)."""
    return field(default=default, metadata={"help": text, "choices": choices, **kw})


@dataclass(frozen=True)
class EnvOptions:
    frame_stack: int = doc("frames stacked per observation", 4)
    frame_skip: int = doc("emulator frames per agent step", 4)
    max_pool: bool = doc("max-pool the last two skipped frames (MaxAndSkip)", True)
    noop_max: int = doc("up to this many no-op agent steps after each reset, a seeded random number (Atari's "
                        "NoopReset; Mario's NoopStart); 0 disables", 30)
    episodic_life: bool = doc("a lost life ends the learning episode, Atari (EpisodicLife)", True)
    fire_reset: bool = doc("press FIRE after reset where the game needs it, Atari (FireReset)", True)
    clip_rewards: bool = doc("learn from rewards clipped to [-1, 1] (ClipReward); logs keep raw returns", True)
    reward_scale: float = doc("with --clip-rewards false: learn from rewards times this (Mario's lie in [-15, 15]: "
                              "1/15 keeps their size, which sign() throws away)", 1.0)
    stall_steps: int = doc("Mario: a learning episode ends (as a lost life does in Atari: the game goes on) once Mario has "
                           "not passed his furthest x for this many agent steps, so a state he stands in pressing into "
                           "a wall learns the value of going nowhere; 0 never; games played and judged are not cut", 0)
    stall_penalty: float = doc("Mario with --stall-steps: subtracted from the reward of the step a stall ends, in the "
                               "game's units before --reward-scale (25: what a lost life costs Mario), so standing "
                               "still is learned as a death rather than as a quiet end; 0 adds nothing", 0.0)
    sticky_actions: float = doc("probability that an emulator frame repeats the previous action instead of the "
                                "agent's (repeat_action_probability); -1 keeps the env id's default (ALE v5: "
                                "0.25, Mario: 0)", -1.0)
    mark_action: bool = doc("paint the previous action into each frame's bottom rows (a one-hot strip), so the network "
                            "sees what sticky actions may repeat", False)
    mario_actions: str = doc("Mario action set: right_only (NOOP, right, right+A, right+B, right+A+B), simple (7), "
                             "complex (12), right_run (right+B, right+A+B, right+A: one in three holds no A)", "simple",
                             choices=MARIO_ACTION_SETS)
    # not a setting: the replay and the networks are built for 84x84 frames
    frame_size: int = field(default=84, metadata={"fixed": True})
