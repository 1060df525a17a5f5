"""Mario's envs as one native vector: nes-py's ``VectorNESEmulator`` steps the emulators, the game's
reward, ending and frame-skipping logic runs on all of them at once in NumPy.

A collector's Python Mario envs (``make_mario_env`` in a gymnasium SyncVectorEnv) call through
seven Python layers per emulator frame and run gym-super-mario-bros' per-frame reward code (about
fifteen RAM reads, each a Python call) once per env. Here one native call advances every emulator
a frame, one stacked read gives every env's RAM bytes, and the same rules are applied as array
operations. The logic is gym-super-mario-bros 9.x's ``SuperMarioBrosEnv`` (reward components,
termination, ``_did_step``'s skips) under our ``SkipMaxGray`` and ``NoopStart``, rewritten for
arrays: nes-py keeps such game logic out of its vector emulator on purpose, and no library has
it. ``tests/test_envs.py`` plays this env and the Python envs side by side and checks the same
frames, rewards, endings and positions at every agent step.

Sticky actions are gymnasium's ``StickyAction`` below the frame skip, drawing from each env's
generator as it does (one uniform a frame, and its duration draw when a repeat starts). Only what
a collector needs: no rendering (evaluation videos use the Python envs); Super Mario Bros and the
Lost Levels, a stage or the whole game.
"""
from __future__ import annotations

import cv2
import gymnasium as gym
import numpy as np

from .mario import gray_into, joypad, noop_action
from .options import EnvOptions
from .registry import sticky_probability

# RAM addresses gym-super-mario-bros reads (smb_env.py), by what they hold
X_PAGE, X_PIXEL = 0x006D, 0x0086            # x position = page * 256 + pixel
TIME = (0x07F8, 3)                           # time left, one decimal digit per byte
SCORE = (0x07DE, 6)
COINS = (0x07ED, 2)
STATUS = 0x0756                              # 0 small, 1 tall, 2+ fireball
PLAYER_STATE = 0x000E                        # 0x06 dead, 0x0B dying, _BUSY_STATES busy
Y_VIEWPORT = 0x00B5                          # > 1: falling below the screen
WORLD_OVER = 0x0770                          # == 2 at the end of a world
ENEMY_TYPES = (0x0016, 0x0017, 0x0018, 0x0019, 0x001A)
ENEMY_STATE = 0x001D                         # == 3 with a flagpole or Bowser loaded: the stage is over
LIVES = 0x075A                               # 0xFF: game over
CHANGE_AREA_TIMER = 0x06DE
PRELEVEL_TIMER = 0x07A0
BUSY_STATES = (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x07)
STAGE_OVER_ENEMIES = (0x2D, 0x31)            # Bowser, flagpole
REWARD_RANGE = (-15.0, 15.0)                 # SuperMarioBrosEnv.reward_range

_ADDRESSES = np.array([X_PAGE, X_PIXEL, *range(TIME[0], TIME[0] + TIME[1]), *range(SCORE[0], SCORE[0] + SCORE[1]),
                       *range(COINS[0], COINS[0] + COINS[1]), STATUS, PLAYER_STATE, Y_VIEWPORT, WORLD_OVER,
                       *ENEMY_TYPES, ENEMY_STATE, LIVES, CHANGE_AREA_TIMER])
_COL = {a: i for i, a in enumerate(_ADDRESSES.tolist())}  # address -> column of a read
_DIGITS = np.r_[_COL[TIME[0]]:_COL[TIME[0]] + TIME[1], _COL[SCORE[0]]:_COL[SCORE[0]] + SCORE[1],
                _COL[COINS[0]]:_COL[COINS[0]] + COINS[1]]
_DIGIT_WEIGHTS = np.zeros((len(_DIGITS), 3), np.int64)  # the three counters' digits -> their values
for _c, (_first, (_, _n)) in enumerate(zip((0, TIME[1], TIME[1] + SCORE[1]), (TIME, SCORE, COINS))):
    _DIGIT_WEIGHTS[_first:_first + _n, _c] = 10 ** np.arange(_n - 1, -1, -1)


def _span(start: int, length: int) -> slice:
    return slice(_COL[start], _COL[start] + length)


def joined_digits(digits: np.ndarray) -> int:
    """gym-super-mario-bros' reading of a counter: its bytes' decimal strings joined (a byte above
    9, which the game never writes into a counter, reads as several digits)."""
    return int("".join(map(str, map(int, digits))))


def counters(ram: np.ndarray, start: int, length: int) -> np.ndarray:
    """A decimal counter of every env, one digit per byte, as ``joined_digits`` reads it."""
    d = ram[:, _span(start, length)]
    value = d @ (10 ** np.arange(length - 1, -1, -1))
    for i in np.flatnonzero((d > 9).any(1)):
        value[i] = joined_digits(d[i])
    return value


def supports(env_id: str) -> bool:
    """Whether ``MarioVectorEnv`` plays ``env_id``: the ids of gym-super-mario-bros' SuperMarioBrosEnv
    (Super Mario Bros and the Lost Levels; its other games' envs keep rules of their own)."""
    import gym_super_mario_bros  # noqa: F401  registers the ids gym.spec reads

    return gym.spec(env_id).entry_point == "gym_super_mario_bros:SuperMarioBrosEnv"


class MarioVectorEnv:
    """``num_envs`` Mario envs, shaped as one of the collector's gymnasium vector envs: ``reset(seed)``
    and ``step(actions)`` answer like a SyncVectorEnv of ``make_single_frame_env`` envs in
    NEXT_STEP autoreset mode (gray [N, 84, 84] frames, raw rewards, and an info of ``x_pos`` and
    ``flag_get``); env i is seeded ``seed + i`` and draws its no-op starts as that env would."""

    def __init__(self, env_id: str, opts: EnvOptions, num_envs: int):
        import gym_super_mario_bros
        from nes_py.vector_env import VectorNESEmulator

        if not supports(env_id):
            raise ValueError(f"MarioVectorEnv plays Super Mario Bros and the Lost Levels, not {env_id!r}; use the "
                             f"Python envs (BatchedEnv native=False)")
        self.num_envs, self.opts = num_envs, opts
        self.sticky = sticky_probability(env_id, opts.sticky_actions)
        # The reference env builds the start state: its constructor skips the start screen (and
        # writes a stage's world and area) and keeps that state as the one every reset restores.
        # The snapshot points into that env's emulator (loading it after the env closed crashed),
        # so the env lives as long as this one.
        self.ref = joypad(gym_super_mario_bros.make(env_id).unwrapped, opts.mario_actions)
        smb = self.ref.unwrapped
        self.emu = None
        try:
            self.start = smb.dump_state()
            self.single_stage = bool(smb.is_single_stage_env)
            # every mapped action, the no-op starts' NOOP included where the agent's set has none
            self.buttons = np.array([self.ref._action_map[a] for a in range(len(self.ref._action_map))], np.uint8)
            self.noop = noop_action(self.ref)
            self.single_action_space = gym.spaces.Discrete(self.ref.action_space.n)
            self.emu = VectorNESEmulator(smb._rom_path, num_envs)
            self.rams = self.emu.rams        # live views of each emulator's 2 KB of RAM
            self.screens = self.emu.screens  # live views of each screen, read as RGB
            n = num_envs
            # gym-super-mario-bros' reward state, per env
            self.time_last = np.zeros(n, np.int64)
            self.x_max = np.zeros(n, np.int64)
            self.score_last = np.zeros(n, np.int64)
            self.coins_last = np.zeros(n, np.int64)
            self.status_last = np.zeros(n, np.int64)
            self.completion_rewarded = np.zeros(n, bool)
            self.rngs = [np.random.default_rng() for _ in range(n)]  # NoopStart's draws, one generator per env
            self.done = np.zeros(n, bool)    # ended at the last step: reset at the next (NEXT_STEP)
            self.last_action = np.full(n, -1)  # StickyAction's last action (-1: none since the reset)
            self._gray = np.empty((n, 2, 240, 256), np.uint8)
            self._all = np.ones(n, bool)
            self.starts = self._record_starts()
        except BaseException:
            self.close()
            raise

    # -- the game's logic, on every env's RAM at once ----------------------------------------
    def _read(self) -> np.ndarray:
        return np.stack(self.rams)[:, _ADDRESSES].astype(np.int64)

    def _frame_logic(self, ram: np.ndarray, active: np.ndarray):
        """One frame's reward, ending, x position and flag for every env, in SuperMarioBrosEnv's order
        of component reads; reward state moves only for ``active`` envs. (~0.16 ms for 8 envs on a
        Zen 4, cProfile beside a run, against the emulator's ~8 ms for their 8 frames.)"""
        x = ram[:, _COL[X_PAGE]] * 0x100 + ram[:, _COL[X_PIXEL]]
        progress = x - self.x_max
        np.copyto(self.x_max, x, where=active & (progress > 0))
        progress[(progress <= 0) | (progress > 5)] = 0
        if (ram[:, _DIGITS] > 9).any():  # never written by the game; read as the env reads it
            time, score, coins = (counters(ram, *c) for c in (TIME, SCORE, COINS))
        else:
            time, score, coins = (ram[:, _DIGITS] @ _DIGIT_WEIGHTS).T
        time_r = np.minimum(time - self.time_last, 0)
        score_d = score - self.score_last
        coins_d = coins - self.coins_last
        coins_d[coins_d < -50] += 100
        level = np.minimum(ram[:, _COL[STATUS]], 2)
        powerup = (level - self.status_last) * 5
        for last, now in ((self.time_last, time), (self.score_last, score), (self.coins_last, coins),
                          (self.status_last, level)):
            np.copyto(last, now, where=active)
        enemies = ram[:, _span(ENEMY_TYPES[0], len(ENEMY_TYPES))]
        stage_over = ((enemies == STAGE_OVER_ENEMIES[0]) | (enemies == STAGE_OVER_ENEMIES[1])).any(1) & \
            (ram[:, _COL[ENEMY_STATE]] == 3)
        flag = (ram[:, _COL[WORLD_OVER]] == 2) | stage_over
        completion = (flag & ~self.completion_rewarded) * 50
        self.completion_rewarded |= flag & active
        state = ram[:, _COL[PLAYER_STATE]]
        dying = (state == 0x0B) | (ram[:, _COL[Y_VIEWPORT]] > 1)
        death = (dying | (state == 0x06)) * -25
        # float64 sums in the components' order, as sum() of the env's component dict adds them
        reward = progress + time_r.astype(np.float64)
        reward += np.where(score_d <= 0, 0.0, score_d / 100)
        reward += np.maximum(coins_d, 0) * 5
        reward += powerup
        reward += completion
        reward += death
        np.clip(reward, *REWARD_RANGE, out=reward)
        terminated = (dying | (state == 0x06) | flag) if self.single_stage else ram[:, _COL[LIVES]] == 0xFF
        return reward, terminated, x, flag, dying

    def _did_step(self, i: int, dying: bool) -> None:
        """SuperMarioBrosEnv._did_step for env i, which did not end: the frames it skips (a death's
        animation, the end of a world, busy states) are emulated one by one."""
        ram, emu = self.rams[i], self.emu

        def time() -> int:
            return joined_digits(ram[TIME[0]:TIME[0] + TIME[1]])

        if dying:  # _kill_mario
            ram[PLAYER_STATE] = 0x06
            emu.step_one(i, 0)
        if not self.single_stage and ram[WORLD_OVER] == 2:  # _skip_end_of_world
            t = time()
            while time() == t:
                emu.step_one(i, 0)
        if 1 < ram[CHANGE_AREA_TIMER] < 255:  # _skip_change_area
            ram[CHANGE_AREA_TIMER] = 1
        while ram[PLAYER_STATE] in BUSY_STATES or ram[WORLD_OVER] == 2:  # _skip_occupied_states
            ram[PRELEVEL_TIMER] = 0
            emu.step_one(i, 0)

    def _sticky(self, active: np.ndarray, actions: np.ndarray) -> np.ndarray:
        """This frame's actions after StickyAction (duration 1): with a last action, each env draws
        a uniform; below the probability it repeats the last action (and draws the duration)."""
        acts = actions.copy()
        if self.sticky > 0:
            for i in np.flatnonzero(active & (self.last_action >= 0)):
                if self._repeats(i):
                    acts[i] = self.last_action[i]
        np.copyto(self.last_action, acts, where=active)
        return acts

    def _repeats(self, i: int) -> bool:
        """StickyAction's draw for one frame of env i that has a last action: whether the frame
        repeats it (a repeat also draws its duration, as gymnasium's wrapper does)."""
        rng = self.rngs[i]
        if rng.uniform() < self.sticky:
            rng.integers(1, 2)
            return True
        return False

    def _sticky_draws(self, i: int, frames: int) -> None:
        """The draws StickyAction makes for env i over ``frames`` frames that each have a last action."""
        if self.sticky > 0:
            for _ in range(frames):
                self._repeats(i)

    def _play(self, active: np.ndarray, actions: np.ndarray, frames: np.ndarray, x_out: np.ndarray,
              flag_out: np.ndarray):
        """One agent step (the frame skip) of the ``active`` envs with ``actions`` (the action set's
        indices): SkipMaxGray's reward sum, max-pool of the last two frames and 84x84 frame into
        ``frames``."""
        opts = self.opts
        skip = opts.frame_skip
        active = active.copy()
        total = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, bool)
        pooled = np.zeros(self.num_envs, np.int64)
        for f in range(skip):
            buttons = self.buttons[self._sticky(active, actions)]
            if active.all():
                self.emu.step(buttons)
            else:
                for i in np.flatnonzero(active):
                    self.emu.step_one(int(i), int(buttons[i]))
            ram = self._read()
            reward, term, x, flag, dying = self._frame_logic(ram, active)
            total = np.where(active, total + reward, total)
            x_out[active], flag_out[active] = x[active], flag[active]
            ended = active & term
            terminated |= ended
            state = ram[:, _COL[PLAYER_STATE]]
            busy = (state <= 0x05) | (state == 0x07)  # BUSY_STATES
            timer = ram[:, _COL[CHANGE_AREA_TIMER]]
            world_over = ram[:, _COL[WORLD_OVER]] == 2
            for i in np.flatnonzero(active & ~term & (dying | busy | world_over | ((timer > 1) & (timer < 255)))):
                self._did_step(int(i), bool(dying[i]))
            last = ended | (active & (f == skip - 1))
            capture = last | (active & (opts.max_pool and f == skip - 2))
            for i in np.flatnonzero(capture):
                gray_into(self.screens[i], self._gray[i, pooled[i]])
                pooled[i] += 1
            for i in np.flatnonzero(last):
                frame = self._gray[i, 0]
                if pooled[i] == 2:
                    frame = np.maximum(self._gray[i, 0], self._gray[i, 1], out=self._gray[i, 1])
                cv2.resize(frame, (opts.frame_size, opts.frame_size), dst=frames[i], interpolation=cv2.INTER_AREA)
            active &= ~last
        return total, terminated

    def _start(self, i: int, frames: np.ndarray, x_out: np.ndarray, flag_out: np.ndarray) -> None:
        """NESEnv.reset for env i: the start state, then SuperMarioBrosEnv._did_reset."""
        self.emu.load_state(i, self.start)
        self.last_action[i] = -1
        ram = self._read()
        self.time_last[i] = counters(ram, *TIME)[i]
        self.x_max[i] = ram[i, _COL[X_PAGE]] * 0x100 + ram[i, _COL[X_PIXEL]]
        self.score_last[i] = counters(ram, *SCORE)[i]
        self.coins_last[i] = counters(ram, *COINS)[i]
        self.status_last[i] = min(ram[i, _COL[STATUS]], 2)
        self.completion_rewarded[i] = False
        x_out[i] = self.x_max[i]
        flag_out[i] = self._frame_logic(ram, np.zeros(self.num_envs, bool))[3][i]
        gray_into(self.screens[i], self._gray[i, 0])
        cv2.resize(self._gray[i, 0], (self.opts.frame_size,) * 2, dst=frames[i], interpolation=cv2.INTER_AREA)

    def _noops(self, i: int, count: int, frames: np.ndarray, x_out: np.ndarray, flag_out: np.ndarray) -> bool:
        """NoopStart's ``count`` no-op agent steps for env i, emulated; whether one ended the game
        (NoopStart then resets and plays on)."""
        one = np.zeros(self.num_envs, bool)
        one[i] = True
        noop = np.full(self.num_envs, self.noop, np.int64)
        ended = False
        for _ in range(count):
            _, term = self._play(one, noop, frames, x_out, flag_out)
            if term[i]:
                ended = True
                self._start(i, frames, x_out, flag_out)
        return ended

    def _record_starts(self) -> list | None:
        """Every start a reset can draw, played once on env 0: the state after k no-op agent steps,
        k = 0..noop_max, with its frame, position, flag and reward state. The emulator is
        deterministic and a no-op start's inputs are fixed, so a reset that draws k loads start k
        and emulates none of its up to 4 x 30 frames (with random play ~8% of all frames); only
        StickyAction's draws over them are made. None
        where a no-op chain ends a game (NoopStart's reset inside it is then played as it is)."""
        n, size = self.num_envs, self.opts.frame_size
        frames, x, flag = np.empty((n, size, size), np.uint8), np.zeros(n, np.int64), np.zeros(n, bool)
        self._start(0, frames, x, flag)
        starts = []
        for k in range(self.opts.noop_max + 1):
            if k and self._noops(0, 1, frames, x, flag):
                return None
            starts.append((self.emu.dump_state(0), frames[0].copy(), int(x[0]), bool(flag[0]),
                           *(int(a[0]) for a in (self.time_last, self.x_max, self.score_last, self.coins_last,
                                                 self.status_last)), bool(self.completion_rewarded[0])))
        return starts

    def _reset_one(self, i: int, frames: np.ndarray, x_out: np.ndarray, flag_out: np.ndarray) -> None:
        """NESEnv.reset and NoopStart's draw of 0..noop_max no-op agent steps for env i."""
        k = int(self.rngs[i].integers(0, self.opts.noop_max + 1)) if self.opts.noop_max > 0 else 0
        if self.starts is None:
            self._start(i, frames, x_out, flag_out)
            self._noops(i, k, frames, x_out, flag_out)
            return
        state, frames[i], x_out[i], flag_out[i], *rest = self.starts[k]
        self.emu.load_state(i, state)
        (self.time_last[i], self.x_max[i], self.score_last[i], self.coins_last[i], self.status_last[i],
         self.completion_rewarded[i]) = rest
        # StickyAction's draws over the no-op frames (all but the first have a last action: NOOP)
        self._sticky_draws(i, self.opts.frame_skip * k - 1 if k else 0)
        self.last_action[i] = self.noop if k else -1

    # -- the vector env's interface ------------------------------------------------------------
    def reset(self, seed: int | None = None):
        n = self.num_envs
        if seed is not None:
            self.rngs = [gym.utils.seeding.np_random(seed + i)[0] for i in range(n)]
        frames = np.empty((n, self.opts.frame_size, self.opts.frame_size), np.uint8)
        x, flag = np.zeros(n, np.int64), np.zeros(n, bool)
        for i in range(n):
            self._reset_one(i, frames, x, flag)
        self.done[:] = False
        return frames, {"x_pos": x, "_x_pos": self._all.copy(), "flag_get": flag, "_flag_get": self._all.copy()}

    def step(self, actions: np.ndarray):
        n = self.num_envs
        frames = np.empty((n, self.opts.frame_size, self.opts.frame_size), np.uint8)
        x, flag = np.zeros(n, np.int64), np.zeros(n, bool)
        resetting = self.done
        rewards, terminated = self._play(~resetting, np.asarray(actions, np.int64), frames, x, flag)
        for i in np.flatnonzero(resetting):  # NEXT_STEP autoreset: the action sent is ignored
            self._reset_one(int(i), frames, x, flag)
            rewards[i], terminated[i] = 0.0, False
        truncated = np.zeros(n, bool)
        self.done = terminated.copy()
        info = {"x_pos": x, "_x_pos": self._all.copy(), "flag_get": flag, "_flag_get": self._all.copy()}
        return frames, rewards, terminated, truncated, info

    def close(self) -> None:
        if self.emu is not None:
            self.emu.close()
            self.emu = None
        if self.ref is not None:
            self.ref.close()
            self.ref = None
