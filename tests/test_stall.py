"""--stall-steps: a Mario learning episode ends (TERM, the game goes on, as a lost life does) once
Mario has not passed his furthest x for that many agent steps; the rule is his game family's
(``wrappers/families.py``), which the real Rollout steps, scripted and on the real emulator, and
the real Replay's targets."""
import dataclasses

import numpy as np
import pytest
import torch

from config_optimized import Config
from pipeline.replay import Replay
from pipeline.actors.rollout import Rollout
from pipeline.settings.check import ConfigError, validate
from pipeline.settings.hardware import Hardware
from pipeline.transport.transition import EP_END, FIRST, LAST, TERM
from wrappers.batched import BatchStep
from wrappers.families import MARIO
from wrappers.options import EnvOptions


class ScriptedX:
    """BatchedEnv's contract for one env whose x at each step is given (NaN: no x); the game
    ends (terminated) only where the script says."""

    num_envs, n_actions, family = 1, 2, MARIO

    def __init__(self, xs, ends=()):
        self.xs, self.ends, self.t = list(xs), set(ends), 0
        self.done = False

    def reset(self, seed=None):
        return np.zeros((1, 84, 84), np.uint8)

    def end_games(self, mask):  # BatchedEnv's: the next step is a reset
        self.done = self.done or bool(mask[0])

    def step(self, actions):
        reset = self.done
        x = np.float32(np.nan if reset else self.xs[self.t])
        term = not reset and self.t in self.ends
        if not reset:
            self.t += 1
        self.done = term
        frame = np.full((1, 84, 84), self.t % 256, np.uint8)
        return BatchStep(frame, np.zeros(1, np.float32), np.array([term]), np.zeros(1, bool), np.array([reset]),
                         {"x_pos": np.array([x], np.float32), "flag_get": np.zeros(1, bool)})


class ZeroQ(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(len(x), 2)


class NoopSimple(torch.nn.Module):
    """A greedy policy over Mario's simple set that always presses NOOP: Mario stands still."""

    def forward(self, x):
        q = torch.zeros(len(x), 7)
        q[:, 0] = 1.0
        return q


def rules(stall_steps: int, stall_penalty: float = 0.0, num_envs: int = 1, stall_end: int = 0):
    """Mario's family's state over the envs, with the run's stall rules."""
    return MARIO.tracker(num_envs, EnvOptions(stall_steps=stall_steps, stall_penalty=stall_penalty,
                                              stall_end=stall_end))


def flags_of(xs, stall_steps, ends=(), stall_end=0):
    rollout = Rollout(ScriptedX(xs, ends), ZeroQ(), 4, False, seed=0, game=rules(stall_steps, stall_end=stall_end))
    out = []
    for _ in range(len(xs) + len(ends)):
        _, fields, _, _ = rollout.step(0.0)
        out.append(int(fields["flags"][0]))
    return out, rollout


def term_steps(flags):
    return [i for i, f in enumerate(flags) if f & TERM]


def test_standing_still_ends_the_learning_episode_every_stall_steps_and_the_game_goes_on():
    xs = [40, 41, 42] + [42] * 9  # moves for 3 steps, then stands
    flags, rollout = flags_of(xs, stall_steps=4)
    # still counts from the step after the furthest x: steps 3, 4, 5, 6 -> TERM on step 6;
    # the next learning episode starts (FIRST) at step 7 with its own furthest x (42 at step 7)
    # and stands 4 more steps -> TERM on step 11
    assert term_steps(flags) == [6, 11]
    assert flags[7] & FIRST and not any(f & (LAST | EP_END) for f in flags)  # no reset: the game goes on
    assert rollout.game.cuts == 2


def test_pacing_back_and_forth_below_the_furthest_x_is_standing_still():
    xs = [40, 50, 45, 49, 44, 50, 46, 51]  # 50 reached at step 1, passed only at step 7
    assert term_steps(flags_of(xs, stall_steps=5)[0]) == [6]
    assert term_steps(flags_of(xs, stall_steps=6)[0]) == []  # step 7 passes it in time


def test_coming_out_of_a_pipe_at_a_smaller_x_is_not_standing_still():
    """A pipe from x ~3,000 to a place at x ~40: an x that jumps further than Mario moves in a
    step (AREA_CHANGE_X) starts the measure over where he comes out, and standing there still
    stalls."""
    xs = [3000, 3001, 3002] + list(range(40, 48)) + [47] * 4
    assert term_steps(flags_of(xs, stall_steps=4)[0]) == [14]  # only the stand at 47 (steps 11-14)
    # a step back within reach of a step is not an area change: pacing below the furthest still counts
    assert term_steps(flags_of([100, 110, 60, 61, 62, 63], stall_steps=4)[0]) == [5]


def test_moving_on_never_stalls_and_zero_or_no_x_never_cuts():
    assert term_steps(flags_of(list(range(40, 80)), stall_steps=1)[0]) == []
    assert term_steps(flags_of([42] * 30, stall_steps=0)[0]) == []
    assert term_steps(flags_of([np.nan] * 30, stall_steps=3)[0]) == []  # Atari reports no x


def test_a_game_that_ends_is_not_also_a_stall_and_the_count_starts_over_after_a_reset():
    xs = [42] * 6 + [42] * 6
    flags, rollout = flags_of(xs, stall_steps=4, ends=[3])
    # the game ends at step 3 (its own TERM; the stall would have fallen on step 4); step 4 is the
    # reset's record; the new game starts at x 42 and stands 4 steps after it -> TERM
    assert flags[3] & TERM and flags[4] & LAST
    assert term_steps(flags) == [3, 9] and rollout.game.cuts == 1


def test_the_stalled_step_is_a_terminal_target_in_the_replay():
    """The replay learns no bootstrap across a stall: the n-step return of a record before it
    stops at the stall, with discount 0."""
    gamma, n = 0.9, 3
    env = ScriptedX([40, 41] + [41] * 10)
    rollout = Rollout(env, ZeroQ(), 4, False, seed=0, game=rules(3))
    replay = Replay.of(64, 1, 1, frame_stack=4, n_step=n, gamma=gamma, seed=0)
    recs = []
    for _ in range(12):
        frames, fields, _, _ = rollout.step(0.0)
        replay.writer.write(0, frames, fields)
        recs.append(int(fields["flags"][0]))
    stall = term_steps(recs)[0]
    assert stall == 4  # furthest 41 at step 1; still at 2, 3, 4
    # records sit at positions 0.. of the one stream: the return from two steps before the stall
    # ends at it, terminated (discount 0); from the record after it, it does not
    _, terminated, _, _ = replay.storage.n_step(np.zeros(2, np.int64), np.array([stall - 2, stall + 1]), n, gamma)
    assert terminated.tolist() == [True, False]


class ScriptedReward(ScriptedX):
    """ScriptedX whose every step pays ``reward`` (the game's units)."""

    def __init__(self, xs, reward, ends=()):
        super().__init__(xs, ends)
        self.reward = reward

    def step(self, actions):
        st = super().step(actions)
        return dataclasses.replace(st, rewards=np.full(1, self.reward, np.float32))


@pytest.mark.parametrize("clip,scale,expected", [(False, 0.1, -0.1 - 2.5), (True, 1.0, -1.0)])
def test_the_stall_penalty_is_learned_at_the_stall_only_and_the_log_keeps_the_raw_return(clip, scale, expected):
    rollout = Rollout(ScriptedReward([40, 41] + [41] * 8, -1.0), ZeroQ(), 4, clip, seed=0, reward_scale=scale,
                      game=rules(3, 25.0))
    steps = [rollout.step(0.0)[1] for _ in range(10)]
    stall = term_steps([int(f["flags"][0]) for f in steps])
    assert stall == [4, 8]  # the count starts over after a stall: x 41 at step 5 is the new furthest
    plain = -1.0 if clip else -0.1
    for i, f in enumerate(steps):
        assert f["reward"][0] == pytest.approx(expected if i in stall else plain), i
        assert f["ep_return"][0] == pytest.approx(-(i + 1))  # the raw game's return: no penalty in it
    assert Rollout(ScriptedReward([41] * 8, -1.0), ZeroQ(), 4, False, seed=0,
                   game=rules(0)).step(0.0)[1]["reward"][0] == pytest.approx(-1.0)


class ScriptedFlag(ScriptedReward):
    """ScriptedReward whose info reports the flag at the steps ``flags`` names."""

    def __init__(self, xs, reward, flags, ends=()):
        super().__init__(xs, reward, ends)
        self.flags = set(flags)

    def step(self, actions):
        t = self.t
        st = super().step(actions)
        return dataclasses.replace(st, extras={**st.extras, "flag_get": np.array([t in self.flags])})


def test_the_flag_bonus_is_learned_once_at_the_flag_and_the_log_keeps_the_raw_return():
    """The flag's own 50 is clipped to the frame's 15: --flag-bonus adds a value (the game's
    units, then --reward-scale) to the learned reward of the step that first reports it."""
    tracker = MARIO.tracker(1, EnvOptions(flag_bonus=50.0))
    rollout = Rollout(ScriptedFlag([40 + i for i in range(8)], 1.0, flags=[4, 5]), ZeroQ(), 4, False, seed=0,
                      reward_scale=0.1, game=tracker)
    steps = [rollout.step(0.0)[1] for _ in range(8)]
    assert [round(float(f["reward"][0]), 4) for f in steps] == [0.1] * 4 + [5.1] + [0.1] * 3  # once, at step 4
    assert [float(f["ep_return"][0]) for f in steps] == [float(i + 1) for i in range(8)]  # raw: no bonus in it
    assert steps[-1]["flag_get"][0]
    plain = Rollout(ScriptedFlag([40 + i for i in range(8)], 1.0, flags=[4]), ZeroQ(), 4, False, seed=0,
                    reward_scale=0.1, game=rules(0))
    assert [round(float(plain.step(0.0)[1]["reward"][0]), 4) for _ in range(8)] == [0.1] * 8


def test_the_death_penalty_is_learned_where_a_game_ends_without_the_flag_only():
    """--death-penalty takes its value (the game's units, then --reward-scale) from the learned
    reward of the step a game ends without the flag: not at the flag's end, not at a stall's cut,
    and the log keeps the raw return."""
    env = ScriptedFlag([40 + i for i in range(7)], 1.0, flags=[6], ends=[2, 6])  # a death at 2, the flag at 6
    rollout = Rollout(env, ZeroQ(), 4, False, seed=0, reward_scale=0.1,
                      game=MARIO.tracker(1, EnvOptions(death_penalty=50.0)))
    steps = [rollout.step(0.0)[1] for _ in range(8)]  # step 3 is the reset's record
    ended = [i for i, f in enumerate(steps) if int(f["flags"][0]) & TERM]
    assert ended == [2, 7] and steps[7]["flag_get"][0]
    assert [round(float(steps[i]["reward"][0]), 4) for i in (0, 1, 2, 4, 5, 6, 7)] == [0.1, 0.1, -4.9] + [0.1] * 4
    assert float(steps[2]["ep_return"][0]) == 3.0  # raw: no penalty in it
    # a stall's cut is a learning episode's end, not the game's: no death penalty there
    stalled = Rollout(ScriptedReward([41] * 6, 1.0), ZeroQ(), 4, False, seed=0, reward_scale=0.1,
                      game=MARIO.tracker(1, EnvOptions(stall_steps=3, death_penalty=50.0)))
    rewards = [round(float(stalled.step(0.0)[1]["reward"][0]), 4) for _ in range(6)]
    assert rewards == [0.1] * 6


def test_the_stall_rules_are_refused_where_there_is_no_x_and_below_zero():
    hw = Hardware(2, 24 * 2**30, 20 * 2**30, "test cpu", True, False, None, 0, False)
    for rule in ("stall_steps", "stall_end"):
        flag = "--" + rule.replace("_", "-")
        with pytest.raises(ConfigError, match=f"{flag} 20: .*no x position"):
            validate(Config.of(env="ALE/Pong-v5", **{rule: 20}), hw)
        with pytest.raises(ConfigError, match=f"{flag} -1: must be 0"):
            validate(Config.of(env="SuperMarioBros-1-1-v0", **{rule: -1}), hw)
    validate(Config.of(env="SuperMarioBros-1-1-v0", stall_end=100, stall_penalty=25.0), hw)  # the penalty applies there
    with pytest.raises(ConfigError, match="--stall-penalty 25.0: applies where --stall-steps ends.*add --stall-steps N"):
        validate(Config.of(env="SuperMarioBros-1-1-v0", stall_penalty=25.0), hw)
    with pytest.raises(ConfigError, match="--stall-penalty -1.0: .*must be 0 or more"):
        validate(Config.of(env="SuperMarioBros-1-1-v0", stall_steps=10, stall_penalty=-1.0), hw)
    validate(Config.of(env="SuperMarioBros-1-1-v0", stall_steps=10, stall_penalty=25.0), hw)
    with pytest.raises(ConfigError, match="--flag-bonus 50.0: ALE/Pong-v5 reports no flag"):
        validate(Config.of(env="ALE/Pong-v5", flag_bonus=50.0), hw)
    with pytest.raises(ConfigError, match="--flag-bonus -1.0: .*must be 0 or more"):
        validate(Config.of(env="SuperMarioBros-1-1-v0", flag_bonus=-1.0), hw)
    validate(Config.of(env="SuperMarioBros-1-1-v0", flag_bonus=50.0), hw)
    with pytest.raises(ConfigError, match="--death-penalty 50.0: ALE/Pong-v5 is not Mario"):
        validate(Config.of(env="ALE/Pong-v5", death_penalty=50.0), hw)
    with pytest.raises(ConfigError, match="--death-penalty -1.0: .*must be 0 or more"):
        validate(Config.of(env="SuperMarioBros-1-1-v0", death_penalty=-1.0), hw)
    validate(Config.of(env="SuperMarioBros-1-1-v0", death_penalty=50.0), hw)


def test_mario_pressing_nothing_stalls_on_the_emulator_and_plays_on():
    """The real env, native and Python: with the simple set's NOOP Mario stands at his start; every
    stall_steps agent steps the learning episode ends, and the game goes on (no reset)."""
    from wrappers import BatchedEnv
    from wrappers.options import EnvOptions

    for native in (True, False):
        env = BatchedEnv("SuperMarioBros-1-1-v0", EnvOptions(mario_actions="simple", noop_max=0), 1, native=native)
        try:
            rollout = Rollout(env, NoopSimple(), 4, False, seed=0, game=env.family.tracker(1, EnvOptions(stall_steps=5)))
            flags = [int(rollout.step(0.0)[1]["flags"][0]) for _ in range(16)]
        finally:
            env.close()
        # x is 40 from the first step (the furthest), then still 5 steps: TERM at steps 5, 11
        assert term_steps(flags) == [5, 11], (native, flags)
        assert not any(f & (LAST | EP_END) for f in flags)


def test_a_collector_counts_its_stalls_in_its_block_for_the_epoch_line():
    """The real Collector on the real emulator: the stalls its rollout cut reach the block the
    learner reads (``Pipeline.mark`` sums them into the epoch line's Stalls)."""
    from pipeline.actors.collector import Collector, CollectorSpec
    from pipeline.transport.collector_block import CollectorBlock

    cfg = Config.of(env="SuperMarioBros-1-1-v0", mario_actions="simple", noop_max=0, stall_steps=5,
                    envs_per_collector=1, env_threads=1, eps_start=0.0, eps_end=0.0)
    block = CollectorBlock.local()
    collector = Collector(CollectorSpec.of(cfg), 0, 0, block)
    try:
        collector.rollout.policy = NoopSimple()  # stand at the start: NOOP is the greedy action
        for _ in range(16):
            collector.step(0)
    finally:
        collector.close()
    assert block.cuts == 2 and block.played == 16  # TERM at steps 5 and 11, as on the bare rollout


def test_stall_end_ends_the_game_and_counts_over_the_learning_episodes_a_stall_cut():
    """--stall-end: once Mario has not passed his game's furthest x for N agent steps the game is
    over (TERM, then the env's reset record), where --stall-steps only cuts the learning episode;
    its count is the game's, which those cuts do not start over."""
    xs = [40, 41, 42] + [42] * 12
    flags, rollout = flags_of(xs, stall_steps=0, stall_end=4)
    # the game's furthest x is 42 from step 2; still 4 steps at step 6: TERM, step 7 the reset's record
    assert term_steps(flags)[0] == 6 and flags[7] & LAST and flags[7] & EP_END
    assert not any(f & LAST for f in flags[:7])
    # the new game (the script's x goes on at 42) stands again: its count starts with it
    assert term_steps(flags)[1] == 12 and flags[13] & LAST
    # beside --stall-steps 2: learning episodes cut at steps 4 and 7 (each starting its own count),
    # the game still ends 6 steps after its furthest x, at step 8
    flags, rollout = flags_of(xs, stall_steps=2, stall_end=6)
    assert term_steps(flags)[:3] == [4, 7, 8] and flags[9] & LAST and not any(f & LAST for f in flags[:9])
    assert rollout.game.cuts >= 3


def test_mario_pressing_nothing_is_restarted_by_stall_end_on_the_emulator():
    """The real env, native and Python: Mario stands at his start; --stall-end 5 ends the game 5
    agent steps after his furthest x, the env starts a new one at its next step, and the game's
    record says how long it lasted."""
    from wrappers import BatchedEnv

    for native in (True, False):
        env = BatchedEnv("SuperMarioBros-1-1-v0", EnvOptions(mario_actions="simple", noop_max=0), 1, native=native)
        try:
            rollout = Rollout(env, NoopSimple(), 4, False, seed=0, game=env.family.tracker(1, EnvOptions(stall_end=5)))
            frames, steps = zip(*(rollout.step(0.0)[:2] for _ in range(14)))
        finally:
            env.close()
        # the emulator started over: the new game's first frame is the first game's (the clock at
        # 400 again, where the old game's had ticked), not the old game's next
        assert np.array_equal(frames[7], frames[0]) and not np.array_equal(frames[7], frames[6]), native
        flags = [int(f["flags"][0]) for f in steps]
        # x 40 from the first step, still 5 steps: TERM at step 5; step 6 is the reset's record (the
        # game of 6 agent steps ends there); the new game's first step is 7, its stall 12, its reset 13
        assert term_steps(flags) == [5, 12], (native, flags)
        assert [i for i, f in enumerate(flags) if f & LAST] == [6, 13], (native, flags)
        assert int(steps[6]["ep_len"][0]) == 6 and float(steps[6]["x_pos"][0]) == 40.0


def test_only_envs_that_can_restart_a_game_early_are_asked_to():
    from wrappers import BatchedEnv

    env = BatchedEnv("ALE/Pong-v5", EnvOptions(), 1)
    try:
        with pytest.raises(NotImplementedError, match="cannot end a game early"):
            env.end_games(np.ones(1, bool))
    finally:
        env.close()
