"""Super Mario Bros envs from gym-super-mario-bros 9.x (Gymnasium-native).

nes-py returns observations that are live views of emulator memory: the next step overwrites
them. ``SkipMaxGray`` converts them with cv2 into arrays of its own, so nothing downstream ever
holds a view into the emulator.
"""
from __future__ import annotations

import cv2
import gymnasium as gym
import numpy as np

from .options import EnvOptions
from .registry import check_env_id
from .stacking import stack_frames


def gray_into(rgb: np.ndarray, dst: np.ndarray) -> None:
    """Write the gray image of an RGB frame into ``dst``.

    nes-py's screen is a view of the emulator's 32-bit pixels (B, G, R, unused in memory on a
    little-endian machine), read as RGB with a negative channel stride. cv2 copies such a view
    to a contiguous array before converting it (182 us a frame on the Zen 5); read as the BGRA
    image it is in memory, the same conversion takes 14 us and gives the same bytes (the unused
    byte is ignored). Any other layout takes the plain conversion.
    """
    if rgb.strides[1:] == (4, -1):
        bgra = np.lib.stride_tricks.as_strided(rgb[..., ::-1], (*rgb.shape[:2], 4), (rgb.strides[0], 4, 1))
        cv2.cvtColor(bgra, cv2.COLOR_BGRA2GRAY, dst=dst)
    else:
        cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY, dst=dst)


class SkipMaxGray(gym.Wrapper):
    """Frame skip, max-pool of the last two frames and gray 84x84, in one wrapper.

    gymnasium's MaxAndSkipObservation over an observation wrapper would convert and resize every
    emulator frame; only the last two of each skip are ever seen, so only they are converted
    (and only the pooled one resized), which is most of the preprocessing cost at skip 4. If the
    game ends inside a skip, the frames of that step alone are pooled (gymnasium's wrapper would
    pool with a stale frame of the step before). Each observation is a new array: nothing
    downstream holds a view into emulator memory.
    """

    def __init__(self, env: gym.Env, skip: int, size: int, max_pool: bool):
        super().__init__(env)
        self.skip, self.size, self.max_pool = skip, size, max_pool
        h, w = env.observation_space.shape[:2]
        self._gray = np.empty((2, h, w), np.uint8)  # the last two frames of a step, gray
        self.observation_space = gym.spaces.Box(0, 255, (size, size), np.uint8)

    def _resize(self, gray: np.ndarray) -> np.ndarray:
        return cv2.resize(gray, (self.size, self.size), interpolation=cv2.INTER_AREA)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        gray_into(obs, self._gray[0])
        return self._resize(self._gray[0]), info

    def step(self, action):
        total, pooled = 0.0, 0
        for i in range(self.skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += reward
            last = terminated or truncated or i == self.skip - 1
            if last or (self.max_pool and i == self.skip - 2):
                gray_into(obs, self._gray[pooled])
                pooled += 1
            if last:
                break
        frame = self._gray[0]
        if pooled == 2:
            frame = np.maximum(self._gray[0], self._gray[1], out=self._gray[1])
        return self._resize(frame), total, terminated, truncated, info


class NoopStart(gym.Wrapper):
    """After each reset, 0 to ``noop_max`` agent steps of NOOP, a number drawn from the env's
    seeded generator, or the number ``reset(options={"noops": k})`` names.

    The NES emulator is deterministic: every game would start in the same state, and a greedy
    policy would replay the one game it memorized, dying wherever a small change (a goomba a
    frame later) meets it (Machado et al. 2018 name random no-op starts and sticky actions as the
    ways to make such play stochastic). gymnasium has NoopReset only inside AtariPreprocessing,
    which needs the ALE, so it is written here. The same count gives the same game, so greedy play
    has ``noop_max + 1`` games in all, and ``options={"noops": k}`` plays start k of them.
    """

    def __init__(self, env: gym.Env, noop_max: int):
        super().__init__(env)
        self.noop = noop_action(env)
        self.noop_max = noop_max

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        options = dict(options or {})
        chosen = options.pop("noops", None)
        if chosen is not None and not 0 <= chosen <= self.noop_max:
            raise ValueError(f"noops={chosen}: a start of 0 to {self.noop_max} no-op steps (noop_max)")
        obs, info = self.env.reset(seed=seed, options=options or None)
        drawn = int(self.np_random.integers(0, self.noop_max + 1))  # drawn either way: the seed's later draws stay
        for _ in range(drawn if chosen is None else chosen):
            obs, _, terminated, truncated, info = self.env.step(self.noop)
            if terminated or truncated:  # cannot happen at Mario's start; kept so a start is never a game over
                obs, info = self.env.reset()
        return obs, info


def lean_info(env: gym.Env) -> gym.Env:
    """The Mario env, its per-frame info cut to what a collector reads (``x_pos``, ``flag_get``)
    and its digit counters (score, time, coins) read with one dot product; rewards, endings and
    observations stay the same.

    gym-super-mario-bros builds a 42-key info dict at every emulator frame (40 RAM reads, the
    task's metadata, reward diagnostics) and reads each counter by joining its digits as a
    string, for two keys a collector reads: cut, a batch of 8 envs steps 2.3% faster on the Xeon
    (family 6 model 167). Both are the env's own methods, replaced on this instance only."""
    smb = env.unwrapped
    joined = smb._read_mem_range
    digits = {n: 10 ** np.arange(n - 1, -1, -1) for n in (2, 3, 6)}  # coins, time, score

    def read_mem_range(address: int, length: int) -> int:
        d = smb.ram[address:address + length]
        # a byte above 9 (not a digit) joins as several characters: the original says what that reads as
        return joined(address, length) if d.max() > 9 else int(d @ digits[length])

    smb._read_mem_range = read_mem_range
    smb._get_info = lambda: {"x_pos": smb._x_position, "flag_get": smb._flag_get}
    return env


# Mario's jump rises only while A is held, and once A is let go it cannot rise again before he
# lands (docs/notebook.md, "What a random action does to a jump"). Under epsilon-greedy play a
# random action without A cuts a jump short: RIGHT_ONLY holds no A in three of its five actions
# (NOOP, right, right+B), this set in one of three, so at epsilon 0.05 a five-step rise is cut
# with probability 1 - (1 - 0.05/3)^5 = 8% instead of 14%. Running stays the rule (B in two of
# three), and right+A is the way to walk, slower, where a jump must be short or late.
RIGHT_RUN = [["right", "B"], ["right", "A", "B"], ["right", "A"]]
# right_run and a way to wait: a castle's fire bars and Bowser's fire are passed by timing, and
# right_run can only slow to a walk (right+A), never stand while a bar turns (World 6-4's games
# ended at its fire bars and Bowser's bridge). The price: two of four actions hold no A, so at
# epsilon 0.05 a five-step rise is cut with probability 1 - (1 - 0.05/2)^5 = 12% instead of 8%.
RIGHT_RUN_WAIT = [*RIGHT_RUN, ["NOOP"]]


def action_set(name: str) -> list[list[str]]:
    from gym_super_mario_bros import actions

    sets = {"right_only": actions.RIGHT_ONLY, "simple": actions.SIMPLE_MOVEMENT, "complex": actions.COMPLEX_MOVEMENT,
            "right_run": RIGHT_RUN, "right_run_wait": RIGHT_RUN_WAIT}
    if name not in sets:
        raise ValueError(f"mario_actions={name!r} is not an action set; choose one of {list(sets)}")
    return sets[name]


def joypad(env: gym.Env, name: str) -> gym.Env:
    """nes-py's JoypadSpace over the named action set. A set without NOOP (right_run) gets one
    mapped after its last action, outside the action space the agent plays: the no-op starts
    press nothing, whatever the agent may press."""
    from nes_py.wrappers import JoypadSpace

    agent = action_set(name)
    pad = JoypadSpace(env, agent if ["NOOP"] in agent else [*agent, ["NOOP"]])
    pad.action_space = gym.spaces.Discrete(len(agent))
    return pad


def noop_action(env: gym.Env) -> int:
    """The index that presses no button on ``env``'s joypad (see ``joypad``)."""
    meanings = env.get_wrapper_attr("get_action_meanings")()
    if "NOOP" not in meanings:
        raise ValueError(f"no NOOP among the joypad's actions {meanings}: build the env with wrappers.mario.joypad")
    return meanings.index("NOOP")


def make_mario_env(env_id: str, opts: EnvOptions, render_mode: str | None = None) -> gym.Env:
    """One Mario env: uint8 [stack, 84, 84] observations; info keeps x_pos, flag_get, world, stage."""
    import gym_super_mario_bros

    check_env_id(env_id)
    env = gym_super_mario_bros.make(env_id, render_mode=render_mode)
    env = joypad(env, opts.mario_actions)
    if opts.sticky_actions > 0:  # per emulator frame, below the skip, as the ALE repeats actions
        env = gym.wrappers.StickyAction(env, opts.sticky_actions)
    env = SkipMaxGray(env, opts.frame_skip, opts.frame_size, opts.max_pool)
    if opts.noop_max > 0:  # below the episode statistics, as in AtariPreprocessing: no-ops are not played
        env = NoopStart(env, opts.noop_max)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    if opts.clip_rewards:
        env = gym.wrappers.TransformReward(env, np.sign)
    return stack_frames(env, opts)
