"""The batch of envs one collector steps: ale-py's C++ vector env for Atari; for Mario, nes-py's
native vector emulator with the game's logic on arrays (``MarioVectorEnv``), or gymnasium
SyncVectorEnvs of the Python Mario envs to render;
SyncVectorEnvs of ``module:EnvId`` pixel envs. All autoreset in NEXT_STEP mode; this adapter
gives the collector one shape of answer for all: newest gray frames [N, 84, 84] (frame stacking
is the collector's job, so the replay can store each frame once), raw rewards, a mask of the
envs whose returned frame is a fresh reset (their action was ignored), and what the env id's game
family reads from the info (``wrappers/families.py``: Mario's x position and flag).

``num_threads`` steps the envs on that many threads: ale-py's vector env has its own; the other
envs are split into as many groups (a SyncVectorEnv or a MarioVectorEnv each), each stepped on a
thread of a pool. The NES emulator releases the GIL, and so do cv2's gray conversion and resize: 8 Mario
envs in two groups of 4 on two threads stepped 1.86x as fast as one SyncVectorEnv of 8 on a quiet
2-core Xeon (family 6 model 167). gymnasium's AsyncVectorEnv would put every env in a process of
its own, with a pipe round trip per env and step; threads share the collector's process and
its arrays. Each env keeps its place and its seed (``seed + i``), so the envs play the same
games on any number of threads.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from collections.abc import Mapping
from dataclasses import dataclass

import gymnasium as gym
import numpy as np

from .action_mark import ActionMark
from .factory import make_single_frame_env
from .families import EMPTY, game_family
from .mario import lean_info
from .mario_vector import MarioVectorEnv, supports
from .options import EnvOptions
from .registry import ale_game, is_mario, is_module_env_id, sticky_probability


@dataclass
class BatchStep:
    frames: np.ndarray      # [N, H, W] uint8, newest frame of each env
    rewards: np.ndarray     # [N] float32, raw (unclipped) reward of this step
    terminated: np.ndarray  # [N] bool, for learning (a lost life counts with episodic_life)
    truncated: np.ndarray   # [N] bool
    reset: np.ndarray       # [N] bool, frames[i] is a reset observation; the action sent was ignored
    # what the game family reports besides, per env ([N] arrays by name: Mario's x_pos and
    # flag_get; empty for the ALE's games), read from the info by ``GameFamily.info_reader``
    extras: Mapping[str, np.ndarray] = EMPTY


class KeepInfo(gym.Wrapper):
    """Passes on only the named info keys: SyncVectorEnv merges every key of every env's info into
    arrays at each step, and Mario's info has 42 (1% of a collector's time for 8 envs)."""

    def __init__(self, env: gym.Env, keys: tuple[str, ...]):
        super().__init__(env)
        self.keys = keys

    def _kept(self, info: dict) -> dict:
        return {k: info[k] for k in self.keys if k in info}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs, self._kept(info)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._kept(info)


class BatchedEnv:
    def __init__(self, env_id: str, opts: EnvOptions, num_envs: int, num_threads: int = 1, native: bool = True,
                 render_mode: str | None = None):
        """``native=False`` steps Atari and Mario through gymnasium's Python wrappers (for comparisons,
        and to render: ``render_mode`` needs the Python envs)."""
        self.env_id, self.num_envs, self.mario = env_id, num_envs, is_mario(env_id)
        self.family = game_family(env_id)  # what the games report besides frames, rewards and endings
        self.read_info = self.family.info_reader(num_envs)
        # stepped in groups on this process's threads (Mario, pixel envs), not by ale-py's vector env
        self.grouped = self.mario or is_module_env_id(env_id) or not native
        if render_mode is not None and not self.grouped:
            raise ValueError("render_mode needs native=False: ale-py's vector env does not render")
        self.groups: list = []  # one vector env per thread, in env order
        self.pool: ThreadPoolExecutor | None = None
        if self.grouped:
            def make():
                env = make_single_frame_env(env_id, opts, render_mode)
                return KeepInfo(lean_info(env) if self.mario else env, self.family.info_keys)

            sizes = [len(part) for part in np.array_split(np.arange(num_envs), max(1, min(num_threads, num_envs)))]
            vector_mario = self.mario and native and render_mode is None and supports(env_id)
            try:
                for size in sizes:
                    self.groups.append(MarioVectorEnv(env_id, opts, size) if vector_mario else gym.vector.SyncVectorEnv(
                        [make] * size, copy=True, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP))
            except BaseException:
                self.close()
                raise
            self.starts = np.cumsum([0, *sizes])  # group g holds envs starts[g]..starts[g+1]-1
            self.env = self.groups[0]
            if len(self.groups) > 1:
                self.pool = ThreadPoolExecutor(len(self.groups) - 1, thread_name_prefix="envs")
        else:
            from ale_py.vector_env import AtariVectorEnv

            sticky = sticky_probability(env_id, opts.sticky_actions)
            self.env = AtariVectorEnv(
                ale_game(env_id), num_envs, num_threads=num_threads, stack_num=1,
                frameskip=opts.frame_skip, maxpool=opts.max_pool, noop_max=opts.noop_max,
                img_height=opts.frame_size, img_width=opts.frame_size, grayscale=True,
                # life_loss_info is the classic EpisodicLife (the game goes on); ale-py's own
                # episodic_life restarts the whole game on every lost life.
                episodic_life=False, life_loss_info=opts.episodic_life,
                reward_clipping=False, use_fire_reset=opts.fire_reset, repeat_action_probability=sticky)
        self.n_actions = int(self.env.single_action_space.n)
        self.mark = ActionMark(self.n_actions, opts.frame_size) if opts.mark_action else None
        self._prev_done = np.zeros(num_envs, bool)
        self._prev_efn = np.zeros(num_envs, np.int64)

    def _each_group(self, call) -> list:
        """``call(g, group)`` for every group of envs, the first on this thread and the rest
        on the pool's; the answers in group order."""
        later = [self.pool.submit(call, g, grp) for g, grp in enumerate(self.groups) if g] if self.pool else []
        return [call(0, self.groups[0]), *(f.result() for f in later)]

    def _grouped_reset(self, seed: int | None):
        # env i is seeded seed + i, as one SyncVectorEnv of them all would seed it
        parts = self._each_group(lambda g, grp: grp.reset(seed=None if seed is None else seed + int(self.starts[g])))
        return np.concatenate([o for o, _ in parts]), {}

    def _grouped_step(self, actions: np.ndarray):
        parts = self._each_group(lambda g, grp: grp.step(actions[self.starts[g]:self.starts[g + 1]]))
        if len(parts) == 1:
            return parts[0]
        obs, rew, term, trunc = (np.concatenate([p[k] for p in parts]) for k in range(4))
        info = {}
        for key in self.family.info_keys:  # each with SyncVectorEnv's "_key" mask
            for k in (key, "_" + key):
                if any(k in p[4] for p in parts):
                    info[k] = np.concatenate([p[4].get(k, np.zeros(len(p[0]), bool if k[0] == "_" else float))
                                              for p in parts])
        return obs, rew, term, trunc, info

    def reset(self, seed: int | None = None) -> np.ndarray:
        obs, info = self._grouped_reset(seed) if self.grouped else self.env.reset(seed=seed)
        self._prev_done[:] = False
        if not self.grouped:
            self._prev_efn[:] = info["episode_frame_number"]
        return self._marked(obs.reshape(self.num_envs, *obs.shape[-2:]), None, None)

    def _marked(self, frames: np.ndarray, actions: np.ndarray | None, fresh: np.ndarray | None) -> np.ndarray:
        """The frames with the previous action painted in, in place (``mark_action``), or as they came."""
        return frames if self.mark is None else self.mark(frames, actions, fresh)

    def step(self, actions: np.ndarray) -> BatchStep:
        obs, rew, term, trunc, info = self._grouped_step(actions) if self.grouped else self.env.step(actions)
        if self.grouped:
            reset = self._prev_done.copy()
        else:
            # After a life-loss termination the game goes on; the vector env restarted an env
            # exactly when its episode frame counter went back.
            efn = info["episode_frame_number"]
            reset = self._prev_done & (efn <= self._prev_efn)
            self._prev_efn[:] = efn
        term, trunc = np.asarray(term, bool), np.asarray(trunc, bool)
        self._prev_done = term | trunc
        frames = self._marked(obs.reshape(self.num_envs, *obs.shape[-2:]), actions, reset)
        return BatchStep(frames, np.asarray(rew, np.float32), term, trunc, reset, self.read_info(info))

    def end_games(self, mask: np.ndarray) -> None:
        """End the games of the envs in ``mask`` after this step, as if each had ended by itself: their
        next step is a fresh reset (its action ignored, ``BatchStep.reset``), as NEXT_STEP autoreset
        does after a game's own end. For a rule of the game family's (Mario's ``--stall-end``); the
        ALE's vector env restarts a game only by its own end, so Atari has none."""
        if not self.grouped:
            raise NotImplementedError("ale-py's vector env cannot end a game early; no Atari rule asks it to")
        mask = np.asarray(mask, bool)
        for g, grp in enumerate(self.groups):
            part = mask[self.starts[g]:self.starts[g + 1]]
            if part.any():
                # each kind's own NEXT_STEP mark: MarioVectorEnv's ``done``, gymnasium's SyncVectorEnv's
                # ``_autoreset_envs`` (gymnasium 1.x: what its step reads to reset an env instead of stepping it)
                done = grp.done if isinstance(grp, MarioVectorEnv) else grp._autoreset_envs
                done[part] = True
        self._prev_done |= mask

    def render_first(self) -> np.ndarray:
        """The first env's screen (RGB), where the envs were made with a render_mode."""
        return self.env.envs[0].render()

    def render_fps(self) -> float | None:
        """The frame rate the first env's metadata gives for its renders (Python envs)."""
        return self.env.envs[0].metadata.get("render_fps") if self.grouped else None

    def close(self):
        if self.pool is not None:
            self.pool.shutdown()
        for grp in self.groups:
            grp.close()
        if not self.grouped:
            self.env.close()
