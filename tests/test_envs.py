"""Real Atari and Mario environments: shapes, each wrapper's behaviour, seeding."""
import dataclasses
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from wrappers import BatchedEnv, EnvOptions, UnknownEnvError, check_env_id, make_env, make_single_frame_env
from wrappers.action_mark import MARK_ROWS, ActionMark, MarkAction
from wrappers.atari import EpisodicLife, FireReset

ROOT = Path(__file__).resolve().parent.parent


class ActionLog(gym.Wrapper):
    """Records the actions that reach the env below (a real wrapper, not a mock)."""

    def __init__(self, env):
        super().__init__(env)
        self.actions = []

    def step(self, action):
        self.actions.append(int(action))
        return self.env.step(action)


@pytest.mark.parametrize("env_id,n_actions", [("ALE/Pong-v5", 6), ("SuperMarioBros-1-1-v0", 7)])
def test_env_produces_uint8_84x84_stacks(env_id, n_actions):
    env = make_env(env_id)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    assert env.action_space.n == n_actions
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    env.close()


def test_frame_stack_depth_is_configurable():
    env = make_env("ALE/Pong-v5", frame_stack=2)
    assert env.reset(seed=0)[0].shape == (2, 84, 84)


def test_unknown_env_id_names_close_matches():
    with pytest.raises(UnknownEnvError, match="Did you mean ALE/Pong-v5"):
        check_env_id("ALE/Pnog-v5")
    with pytest.raises(UnknownEnvError, match="Did you mean SuperMarioBros-1-1-v0"):
        check_env_id("SuperMarioBro-1-1-v0")


def test_an_atari_run_never_imports_the_nes_emulator():
    """Checking and building an ALE env leaves the NES package unimported (a machine without it,
    such as a GPU image with its own Python, trains Atari games); a Mario id imports it."""
    code = ("import sys; from wrappers import check_env_id, make_env, EnvOptions; "
            "make_env('ALE/Pong-v5', EnvOptions()).close(); print('gym_super_mario_bros' in sys.modules); "
            "check_env_id('SuperMarioBros-1-1-v0'); print('gym_super_mario_bros' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stderr


def test_fire_reset_presses_fire():
    log = ActionLog(gym.make("ALE/Breakout-v5", frameskip=4, repeat_action_probability=0.0))
    env = FireReset(log)
    env.reset(seed=0)
    assert log.actions == [env.unwrapped.get_action_meanings().index("FIRE")]


def test_episodic_life_ends_episode_on_life_loss_and_continues_game():
    env = EpisodicLife(gym.make("ALE/Breakout-v5", frameskip=4, repeat_action_probability=0.0))
    env.reset(seed=0)
    start_lives = env.unwrapped.ale.lives()
    for _ in range(5000):
        _, _, terminated, truncated, _ = env.step(0)  # NOOP never launches: wait for FIRE-less loss
        if terminated:
            break
        _, _, terminated, _, _ = env.step(1)
        if terminated:
            break
    assert terminated
    lives_after = env.unwrapped.ale.lives()
    assert 0 < lives_after < start_lives
    env.reset()
    assert env.unwrapped.ale.lives() == lives_after  # the same game goes on, not a new one


def _rewards(clip):
    env = make_env("ALE/SpaceInvaders-v5", clip_rewards=clip)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    out = []
    for _ in range(600):
        _, r, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
        out.append(r)
        if term or trunc:
            env.reset()
    return np.array(out)


def test_clip_reward_range():
    raw, clipped = _rewards(False), _rewards(True)
    assert raw.max() > 1  # Space Invaders scores 5-30 per alien
    assert set(np.unique(clipped)) <= {-1.0, 0.0, 1.0} and clipped.max() == 1.0


def test_frame_stack_order_oldest_first():
    stacked, single = make_env("ALE/Pong-v5"), make_env("ALE/Pong-v5", frame_stack=1)
    o4, _ = stacked.reset(seed=5)
    o1, _ = single.reset(seed=5)
    frames = [o1[0]]
    for a in [2, 3, 2, 2, 3]:
        o4, *_ = stacked.step(a)
        o1, *_ = single.step(a)
        frames.append(o1[0])
    assert np.array_equal(o4, np.stack(frames[-4:]))
    assert not np.array_equal(o4[0], o4[-1])


@pytest.mark.parametrize("env_id", ["ALE/Pong-v5", "SuperMarioBros-1-1-v0"])
def test_same_seed_same_observations(env_id):
    def rollout():
        env = make_env(env_id)
        obs = [env.reset(seed=11)[0]]
        for a in [1, 2, 3, 1, 0, 2]:
            obs.append(env.step(a % env.action_space.n)[0])
        return np.stack(obs)
    assert np.array_equal(rollout(), rollout())


def wrapper_types(env: gym.Env) -> list[type]:
    """The env's wrappers, outermost first."""
    types = []
    while isinstance(env, gym.Wrapper):
        types.append(type(env))
        env = env.env
    return types


def test_mario_noop_start_plays_a_seeded_number_of_noops():
    from wrappers.mario import NoopStart

    log = ActionLog(make_env("SuperMarioBros-1-1-v0", noop_max=0, frame_stack=1))
    env = NoopStart(log, 30)
    counts = []
    for seed in range(8):
        log.actions.clear()
        env.reset(seed=seed)
        assert set(log.actions) <= {0}  # NOOP only
        counts.append(len(log.actions))
    assert len(set(counts)) >= 4 and max(counts) <= 30, counts
    log.actions.clear()
    env.reset(seed=3)
    assert len(log.actions) == counts[3]  # the seed decides


def test_mario_noop_start_plays_the_start_it_is_given():
    """options={"noops": k} plays start k whatever the seed, and leaves the seed's later draws as
    they were; a start past noop_max is refused."""
    from wrappers.mario import NoopStart

    log = ActionLog(make_env("SuperMarioBros-1-1-v0", noop_max=0, frame_stack=1))
    env = NoopStart(log, 30)
    for seed, k in [(0, 0), (1, 7), (2, 30), (2, 7)]:
        log.actions.clear()
        env.reset(seed=seed, options={"noops": k})
        assert log.actions == [0] * k
    drawn = []
    for chosen in (None, 5):
        env.reset(seed=4, options=None if chosen is None else {"noops": chosen})
        log.actions.clear()
        env.reset()  # the seed's second draw
        drawn.append(len(log.actions))
    assert drawn[0] == drawn[1]
    with pytest.raises(ValueError, match="noops=31: a start of 0 to 30"):
        env.reset(seed=0, options={"noops": 31})


def test_right_run_has_no_noop_for_the_agent_and_starts_with_one():
    """right_run: three actions for the agent (all running or jumping right); the no-op starts
    press the NOOP mapped after them, so a start stands still where right+B would run."""
    from wrappers.mario import NoopStart, noop_action

    env = make_env("SuperMarioBros-1-1-v0", noop_max=0, frame_stack=1, mario_actions="right_run")
    assert env.action_space.n == 3 and env.get_wrapper_attr("get_action_meanings")() == [
        "right B", "right A B", "right A", "NOOP"]
    assert noop_action(env) == 3
    log = ActionLog(env)
    starts = NoopStart(log, 30)
    xs = []
    for seed in range(4):
        log.actions.clear()
        starts.reset(seed=seed)
        assert set(log.actions) <= {3}
        xs.append(starts.unwrapped._x_position)
    assert len(set(xs)) == 1  # standing still: x does not depend on how many no-ops were drawn
    with pytest.raises(ValueError, match="no NOOP"):
        noop_action(_NoNoop(gym.make("CartPole-v1")))


def test_right_run_wait_gives_the_agent_the_noop_its_starts_press():
    """right_run_wait: right_run's three actions and a NOOP the agent plays (to wait for a fire
    bar), the same index the no-op starts press; waiting stands still where right+B runs on."""
    from wrappers.mario import noop_action

    env = make_env("SuperMarioBros-1-1-v0", noop_max=0, frame_stack=1, mario_actions="right_run_wait")
    assert env.action_space.n == 4 and env.get_wrapper_attr("get_action_meanings")() == [
        "right B", "right A B", "right A", "NOOP"]
    assert noop_action(env) == 3
    env.reset(seed=0)
    start = env.unwrapped._x_position
    for _ in range(10):
        env.step(3)
    assert env.unwrapped._x_position == start
    for _ in range(10):
        env.step(0)
    assert env.unwrapped._x_position > start + 20


class _NoNoop(gym.Wrapper):
    def get_action_meanings(self):
        return ["LEFT", "RIGHT"]


def test_mario_sticky_actions_repeat_the_previous_action_per_emulator_frame():
    from wrappers.mario import NoopStart, SkipMaxGray

    def x_after(sticky, seed):
        env = make_env("SuperMarioBros-1-1-v0", sticky_actions=sticky, noop_max=0, mario_actions="right_only")
        env.reset(seed=seed)
        for _ in range(10):
            env.step(1)  # right
        for _ in range(10):
            info = env.step(0)[4]  # NOOP: Mario slows down, unless "right" sticks
        return info["x_pos"]

    assert [x_after(0.0, s) for s in range(3)] == [111] * 3  # the emulator alone is deterministic
    sticky = [x_after(0.9, s) for s in range(3)]
    assert min(sticky) > 111 and len(set(sticky)) > 1, sticky
    assert x_after(0.9, 1) == sticky[1]
    # below the frame skip, as the ALE repeats per frame; the no-ops are not part of the game
    types = wrapper_types(make_env("SuperMarioBros-1-1-v0", sticky_actions=0.25, noop_max=30))
    assert types.index(gym.wrappers.RecordEpisodeStatistics) < types.index(NoopStart) < types.index(SkipMaxGray) \
        < types.index(gym.wrappers.StickyAction)
    plain = wrapper_types(make_env("SuperMarioBros-1-1-v0", sticky_actions=-1, noop_max=0))
    assert NoopStart not in plain and gym.wrappers.StickyAction not in plain  # Mario's default: neither


def test_mario_info_and_observations_are_copies():
    env = make_env("SuperMarioBros-1-1-v0", mario_actions="right_only")
    obs0, info = env.reset(seed=0)
    keep = obs0.copy()
    for _ in range(30):
        obs, r, term, trunc, info = env.step(1)  # right
    assert np.array_equal(obs0, keep), "an observation changed after later steps: it was a view of emulator memory"
    for key in ("x_pos", "flag_get", "world", "stage"):
        assert key in info
    assert info["x_pos"] > 40 and info["world"] == 1 and info["stage"] == 1
    assert env.action_space.n == 5


def test_a_collectors_lean_mario_env_plays_the_same_game_as_the_full_one():
    """lean_info (the collectors' Mario env) cuts the info to x_pos and flag_get and reads the
    score, time and coin digits with a dot product: over the same seeded random play, deaths and
    resets included, every observation, reward, ending, x_pos and flag equals the full env's."""
    from wrappers.mario import lean_info

    opts = EnvOptions(mario_actions="simple", noop_max=0)
    full, lean = (make_single_frame_env("SuperMarioBros-1-1-v0", opts) for _ in range(2))
    lean_info(lean)
    rng = np.random.default_rng(0)
    a, _ = full.reset(seed=0)
    b, lean_first = lean.reset(seed=0)
    assert np.array_equal(a, b) and set(lean_first) <= {"x_pos", "flag_get", "episode"}
    ends = 0
    for _ in range(400):
        action = int(rng.choice([1, 1, 1, 2, 0, 5, 6]))  # mostly right (SIMPLE_MOVEMENT): it meets the goombas
        a, ra, ta, ua, ia = full.step(action)
        b, rb, tb, ub, ib = lean.step(action)
        assert np.array_equal(a, b) and (ra, ta, ua) == (rb, tb, ub)
        assert (ia["x_pos"], ia["flag_get"]) == (ib["x_pos"], ib["flag_get"])
        if ta or ua:
            ends += 1
            full.reset()
            lean.reset()
    assert ends >= 1  # the play went through at least one death and reset
    for address, length in ((0x07DE, 6), (0x07F8, 3), (0x07ED, 2)):
        assert lean.unwrapped._read_mem_range(address, length) == full.unwrapped._read_mem_range(address, length)


class ScriptedScreens(gym.Env):
    """RGB 240x256 screens whose gray value is the frame number (times 10), rewards 1 per frame,
    terminating at frame ``end``; it returns one reused buffer, as nes-py does."""

    observation_space = gym.spaces.Box(0, 255, (240, 256, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, end=100):
        self.end, self.t, self.screen = end, 0, np.zeros((240, 256, 3), np.uint8)

    def _show(self):
        self.screen[:] = 10 * self.t
        return self.screen

    def reset(self, seed=None, options=None):
        self.t = 0
        return self._show(), {}

    def step(self, action):
        self.t += 1
        return self._show(), 1.0, self.t >= self.end, False, {}


@pytest.mark.parametrize("max_pool", [True, False])
def test_skip_max_gray_pools_the_last_two_frames_of_each_skip(max_pool):
    from wrappers.mario import SkipMaxGray

    env = SkipMaxGray(ScriptedScreens(end=6), skip=4, size=84, max_pool=max_pool)
    obs0, _ = env.reset()
    obs, r, term, _, _ = env.step(0)  # frames 1-4: max(frame 3, frame 4) = frame 4's brightness
    assert obs.shape == (84, 84) and obs.dtype == np.uint8 and r == 4.0 and not term
    assert (obs == 40).all() and (obs0 == 0).all()
    obs2, r, term, _, _ = env.step(0)  # frames 5-6: the game ends inside the skip
    assert r == 2.0 and term and (obs2 == 60).all()
    assert (obs == 40).all(), "an earlier observation changed: it shares memory with the wrapper or the env"


def test_gray_of_the_emulator_screen_read_in_place_matches_cv2_on_a_copy():
    """nes-py's screen is a reversed-channel view of 32-bit pixels; gray_into reads it as BGRA
    in place, and must give the bytes cv2 gives for a contiguous copy."""
    import cv2

    from wrappers.mario import gray_into

    env = make_env("SuperMarioBros-1-1-v0", noop_max=0, frame_stack=1, mario_actions="right_only")
    env.reset(seed=0)
    nes = env.unwrapped
    assert nes.screen.strides[1:] == (4, -1)  # the layout the fast path is for
    fast, plain = np.empty((240, 256), np.uint8), np.empty((240, 256), np.uint8)
    for step in range(40):
        env.step(2 if step % 8 < 5 else 1)  # right+jump and right: a moving, scrolling screen
        gray_into(nes.screen, fast)
        gray_into(np.ascontiguousarray(nes.screen), plain)  # the plain cv2 path
        assert np.array_equal(fast, plain) and np.array_equal(plain, cv2.cvtColor(nes.screen.copy(), cv2.COLOR_RGB2GRAY))
    assert fast.std() > 10  # a real frame, not a blank one


def test_skip_max_gray_max_pools_flicker():
    """A sprite drawn on alternate frames (NES flicker) survives pooling; without it, it vanishes."""
    from wrappers.mario import SkipMaxGray

    class Flicker(ScriptedScreens):
        def _show(self):
            self.screen[:] = 0
            if self.t % 2 == 1:
                self.screen[100:140, 100:140] = 255
            return self.screen

    pooled = SkipMaxGray(Flicker(), skip=4, size=84, max_pool=True)
    plain = SkipMaxGray(Flicker(), skip=4, size=84, max_pool=False)
    for env in (pooled, plain):
        env.reset()
    assert pooled.step(0)[0].max() == 255 and plain.step(0)[0].max() == 0


@pytest.mark.parametrize("name,n", [("right_only", 5), ("simple", 7), ("complex", 12), ("right_run", 3),
                                        ("right_run_wait", 4)])
def test_mario_action_sets(name, n):
    assert make_env("SuperMarioBros-1-1-v0", mario_actions=name).action_space.n == n


def test_batched_atari_reports_reset_after_game_over():
    env = BatchedEnv("ALE/Pong-v5", EnvOptions(noop_max=0), 2)
    frames = env.reset(seed=0)
    assert frames.shape == (2, 84, 84) and frames.dtype == np.uint8
    done_at = done_env = None
    for t in range(5000):
        st = env.step(np.zeros(2, np.int64))
        if done_at is not None:
            assert st.reset[done_env] and not st.terminated[done_env]
            break
        if (st.terminated | st.truncated).any():
            done_at, done_env = t, int(np.flatnonzero(st.terminated | st.truncated)[0])
            assert not st.reset.any()
    assert done_at is not None


def test_batched_mario_reports_x_pos():
    env = BatchedEnv("SuperMarioBros-1-1-v0", EnvOptions(), 2)
    assert env.reset(seed=0).shape == (2, 84, 84)
    st = env.step(np.array([1, 1]))
    assert np.all(st.extras["x_pos"] >= 40) and st.frames.dtype == np.uint8 and not st.extras["flag_get"].any()


def assert_same_step(a, b, t=None) -> None:
    """Two BatchSteps alike: every field, and what the game family reports (Mario's x_pos, flag_get)."""
    assert set(a.extras) == set(b.extras) == {"x_pos", "flag_get"}, t
    for field in ("frames", "rewards", "terminated", "truncated", "reset"):
        assert np.array_equal(getattr(a, field), getattr(b, field)), (t, field)
    for key in a.extras:
        assert np.array_equal(a.extras[key], b.extras[key], equal_nan=key == "x_pos"), (t, key)


def test_mario_envs_on_threads_play_the_same_games_as_on_one():
    """BatchedEnv(num_threads=2) steps its Mario envs in two groups on two threads: every env
    keeps its place and its seed, so the same actions give the same frames, rewards, endings,
    resets and x positions as one SyncVectorEnv of them all, deaths and resets included."""
    opts = EnvOptions(mario_actions="simple", noop_max=8)
    one, two = (BatchedEnv("SuperMarioBros-1-1-v0", opts, 3, num_threads=n) for n in (1, 2))
    try:
        assert len(two.groups) == 2 and two.pool is not None and len(one.groups) == 1
        assert np.array_equal(one.reset(seed=5), two.reset(seed=5))
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(300):
            actions = rng.choice([1, 1, 1, 2, 0, 5, 6], size=3)  # mostly right: it meets the goombas
            a, b = one.step(actions), two.step(actions)
            assert_same_step(a, b)
            ends += int(a.reset.sum())
        assert ends >= 1  # the play went through a death and its reset
    finally:
        one.close()
        two.close()
    assert two.pool._shutdown


def _same_play(env_id: str, opts: EnvOptions, num_envs: int, steps: int, flag_at: int | None = None,
               num_threads: int = 1, recorded_starts: bool = True,
               choices: tuple = (1, 1, 1, 2, 0, 5, 6)) -> np.ndarray:
    """Plays the Python Mario envs and the native vector ones side by side with the same seeded,
    mostly right-moving actions; asserts every BatchStep field equal at every step and returns the
    rewards seen. At ``flag_at`` env 0's OperMode byte is set to 2 (a world's end) in both.
    ``recorded_starts=False``: the native envs emulate their no-op starts instead of loading them."""
    py = BatchedEnv(env_id, opts, num_envs, native=False)
    nat = BatchedEnv(env_id, opts, num_envs, num_threads=num_threads)
    try:
        assert type(py.groups[0]).__name__ == "SyncVectorEnv" and type(nat.groups[0]).__name__ == "MarioVectorEnv"
        assert all(len(g.starts) == opts.noop_max + 1 for g in nat.groups)
        if not recorded_starts:
            for g in nat.groups:
                g.starts = None
        assert np.array_equal(py.reset(seed=3), nat.reset(seed=3))
        rng = np.random.default_rng(0)
        rewards = []
        for t in range(steps):
            if t == flag_at:
                for ram in (py.groups[0].envs[0].unwrapped.ram, nat.groups[0].rams[0]):
                    ram[0x0770] = 2
            actions = rng.choice(choices, size=num_envs)
            a, b = py.step(actions), nat.step(actions)
            assert_same_step(a, b, t)
            rewards.append(a.rewards)
        return np.array(rewards)
    finally:
        py.close()
        nat.close()


# Two of the four pairs here and the other two in the right_run test below: each start kind meets
# both stickiness settings across the two (all four pairs here cost CI ~17 s more)
@pytest.mark.parametrize("recorded_starts,sticky", [(True, 0.0), (False, 0.25)])
def test_native_mario_vector_plays_a_stage_as_the_python_envs_do(recorded_starts, sticky):
    """MarioVectorEnv (nes-py's vector emulator, gym-super-mario-bros' logic on arrays) against the
    Python envs on a stage: seeded no-op starts (loaded from the recorded ones, or emulated),
    sticky actions (gymnasium's StickyAction, drawing from the env's generator), deaths (-25 in
    a step's reward), resets, a flag (the completion reward: +50, clipped to 15) and envs split
    over two threads all give the same frames, rewards, endings, resets, positions and flags."""
    opts = EnvOptions(mario_actions="simple", noop_max=8, sticky_actions=sticky)
    rewards = _same_play("SuperMarioBros-1-1-v0", opts, 3, 300, flag_at=20, num_threads=2,
                         recorded_starts=recorded_starts)
    assert (rewards <= -10).any() and (rewards == 15).any()


@pytest.mark.parametrize("recorded_starts,sticky", [(True, 0.25), (False, 0.0)])
def test_native_mario_vector_plays_right_run_as_the_python_envs_do(recorded_starts, sticky):
    """right_run has no NOOP among the agent's actions: both kinds of env play the no-op starts
    with the NOOP mapped after them, and the agent's three actions alike, sticky actions
    included (that those starts stand still is the test above)."""
    opts = EnvOptions(mario_actions="right_run", noop_max=8, sticky_actions=sticky)
    rewards = _same_play("SuperMarioBros-1-1-v0", opts, 3, 300, num_threads=2, recorded_starts=recorded_starts,
                         choices=(0, 0, 1, 2))
    assert (rewards <= -10).any()  # it ran into a goomba or a pit, and was reset


def test_native_mario_vector_plays_the_whole_game_as_the_python_envs_do():
    """The whole game (SuperMarioBros-v0): a death does not end the episode; the env cuts its
    animation short (_kill_mario) and plays on with a life less, and the end of a world skips its
    cut-scene (_skip_end_of_world)."""
    rewards = _same_play("SuperMarioBros-v0", EnvOptions(mario_actions="simple", noop_max=0), 2, 300, flag_at=40)
    assert (rewards <= -10).any()


def test_mario_with_a_render_mode_steps_the_python_envs():
    env = BatchedEnv("SuperMarioBros-1-1-v0", EnvOptions(), 1, render_mode="rgb_array")
    try:
        env.reset(seed=0)
        assert type(env.groups[0]).__name__ == "SyncVectorEnv" and env.render_first().shape == (240, 256, 3)
    finally:
        env.close()


def test_action_mark_paints_each_previous_action_as_a_block_of_the_bottom_strip():
    frames = np.random.default_rng(0).integers(1, 255, (3, 84, 84), dtype=np.uint8)
    above = frames[:, :-MARK_ROWS].copy()
    ActionMark(6, 84)(frames, np.array([2, 0, 5]), fresh=np.array([False, True, False]))
    strip = frames[:, -MARK_ROWS:]
    expected = np.zeros((3, MARK_ROWS, 84), np.uint8)
    expected[0, :, 28:42] = 255  # 84 // 6 = 14 columns per action: action 2 is columns 28-41
    expected[2, :, 70:84] = 255
    np.testing.assert_array_equal(strip, expected)  # env 1's frame is a reset: no previous action, dark
    np.testing.assert_array_equal(frames[:, :-MARK_ROWS], above)


def test_action_mark_refuses_more_actions_than_columns():
    with pytest.raises(ValueError, match="--mark-action false"):
        ActionMark(85, 84)


def test_batched_atari_with_mark_action_shows_the_action_sent_and_leaves_the_picture():
    opts = EnvOptions(noop_max=0, sticky_actions=0.0)
    plain, marked = BatchedEnv("ALE/Pong-v5", opts, 2), BatchedEnv(
        "ALE/Pong-v5", dataclasses.replace(opts, mark_action=True), 2)
    first = marked.reset(seed=3)
    np.testing.assert_array_equal(plain.reset(seed=3)[:, :-MARK_ROWS], first[:, :-MARK_ROWS])
    assert not first[:, -MARK_ROWS:].any()
    block = 84 // marked.n_actions
    for actions in ([1, 4], [3, 0], [5, 2]):
        a = np.array(actions)
        want, got = plain.step(a), marked.step(a)
        np.testing.assert_array_equal(want.frames[:, :-MARK_ROWS], got.frames[:, :-MARK_ROWS])
        for i, act in enumerate(actions):
            lit = np.flatnonzero(got.frames[i, -1])
            assert lit.tolist() == list(range(act * block, (act + 1) * block))
    plain.close()
    marked.close()


def test_make_env_with_mark_action_paints_what_the_batched_env_paints():
    """A single env (``make_env``, as SB3-style users build one) shows the same strip in every
    stacked frame as the collectors' ``BatchedEnv``: the action sent, dark after the reset."""
    opts = EnvOptions(noop_max=0, sticky_actions=0.0, mark_action=True)
    single, batched = make_env("ALE/Pong-v5", opts), BatchedEnv("ALE/Pong-v5", opts, 1)
    try:
        stack, _ = single.reset(seed=3)
        assert stack.shape == (4, 84, 84) and not stack[:, -MARK_ROWS:].any()
        batched.reset(seed=3)
        for a in (1, 4, 4, 0, 5):
            stack = single.step(a)[0]
            np.testing.assert_array_equal(stack[-1, -MARK_ROWS:], batched.step(np.array([a])).frames[0, -MARK_ROWS:])
        block = 84 // 6
        assert [np.flatnonzero(f[-1]).tolist() for f in stack[1:]] == [
            list(range(a * block, (a + 1) * block)) for a in (4, 0, 5)]
    finally:
        single.close()
        batched.close()


def test_collectors_single_envs_leave_the_mark_to_the_batch():
    """``make_single_frame_env`` (a collector's Python env) paints nothing: its ``BatchedEnv`` paints
    the whole batch, once."""
    opts = EnvOptions(noop_max=0, mark_action=True)
    single, collectors = make_env("SuperMarioBros-1-1-v0", opts), make_single_frame_env("SuperMarioBros-1-1-v0", opts)
    try:
        assert MarkAction in wrapper_types(single) and MarkAction not in wrapper_types(collectors)
    finally:
        single.close()
        collectors.close()


def test_batched_mario_with_mark_action_paints_on_the_native_and_python_envs_alike():
    """Mario's native vector env and the Python envs give the same marked frames: the strip of the
    action sent, and the picture above it as unmarked envs give it."""
    opts = EnvOptions(noop_max=0, mario_actions="right_only", mark_action=True)
    native, python = BatchedEnv("SuperMarioBros-1-1-v0", opts, 2), BatchedEnv("SuperMarioBros-1-1-v0", opts, 2,
                                                                               native=False)
    try:
        np.testing.assert_array_equal(native.reset(seed=5), python.reset(seed=5))
        block = 84 // native.n_actions
        for actions in ([1, 4], [2, 0], [3, 3]):
            a = np.array(actions)
            got = native.step(a).frames
            np.testing.assert_array_equal(got, python.step(a).frames)
            assert [np.flatnonzero(f[-1]).tolist() for f in got] == [list(range(x * block, (x + 1) * block))
                                                                    for x in actions]
    finally:
        native.close()
        python.close()
