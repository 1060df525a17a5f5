"""--drop-when-full through the real Rollout, RecordPusher, Ring, Consolidator and Replay: a dropped
push must leave no trace in the replay streams (no frame stack or n-step return across the gap),
lose no game's statistics and no agent step from the count that drives epsilon."""
import numpy as np
import pytest
import torch

from pipeline.actors.collector import RecordPusher
from pipeline.replay.consolidator import Consolidator
from pipeline.replay import Replay
from pipeline.transport.ring import Ring
from pipeline.actors.rollout import Rollout
from wrappers.batched import BatchStep

EP_LEN = 5  # every game: 5 steps, reward 1 each, terminated on the 5th


class FiveStepEnvs:
    """BatchedEnv's contract (NEXT_STEP autoreset) with frames that name their env, game and step."""

    def __init__(self, num_envs: int):
        self.num_envs, self.n_actions = num_envs, 2
        self.t = np.zeros(num_envs, np.int64)
        self.game = np.zeros(num_envs, np.int64)
        self.done = np.zeros(num_envs, bool)
        self.games_finished = 0
        self.live_steps = 0

    def _frames(self):
        f = np.zeros((self.num_envs, 84, 84), np.uint8)
        f[:, 0, 0] = np.arange(self.num_envs)
        f[:, 0, 1] = self.game % 256
        f[:, 0, 2] = self.t
        return f

    def reset(self, seed=None):
        return self._frames()

    def step(self, actions):
        reset = self.done.copy()
        self.game[reset] += 1
        self.t[reset] = 0
        self.t[~reset] += 1
        self.live_steps += int((~reset).sum())
        term = ~reset & (self.t == EP_LEN)
        self.games_finished += int(term.sum())
        self.done = term
        return BatchStep(self._frames(), np.where(reset, 0.0, 1.0).astype(np.float32), term,
                         np.zeros(self.num_envs, bool), reset)


class ZeroQ(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(len(x), 2)


def game_of(frame):
    return int(frame[0, 1]), int(frame[0, 2])  # (game, step within the game)


@pytest.fixture
def dropped_run():
    M = 2
    env = FiveStepEnvs(M)
    rollout = Rollout(env, ZeroQ(), 4, False, seed=0)
    ring = Ring.create("droptest", 3 * M)  # room for one step beside a few held-back games
    replay = Replay.of(2000, 1, M, frame_stack=4, n_step=3, gamma=0.97, seed=0)
    cons = Consolidator([ring], replay, 1024, lambda *_: None, 1e9)
    pub = RecordPusher(ring, rollout, drop=True, stop=lambda: False)
    dropped = 0
    try:
        for step in range(600):
            frames, fields, live, _ = rollout.step(1.0)
            dropped += not pub.push(frames, fields, live)
            if step % 4 == 0:  # a slow consumer: every few steps the ring is full
                cons.drain_once()
        cons.drain_once()
        yield env, replay, cons, pub, dropped
    finally:
        ring.close()


def test_dropped_pushes_do_not_join_games_in_the_replay(dropped_run):
    env, replay, cons, pub, dropped = dropped_run
    assert dropped > 50 and cons.drops() > 0
    b = replay.sample(1000)
    terminal = 0
    for i in range(1000):
        obs = [game_of(f) for f in b["obs"][i]]
        assert len({g for g, _ in obs}) == 1, f"a frame stack spans two games: {obs}"
        distinct = sorted({t for _, t in obs})
        assert [t for _, t in obs] == sorted(t for _, t in obs), obs
        assert distinct == list(range(distinct[0], distinct[-1] + 1)), f"a frame stack skips a step: {obs}"
        game, t = obs[-1]
        left = EP_LEN - t  # rewards left in this game from this step on
        if b["discount"][i] == 0:
            terminal += 1
            assert left <= 3, "a transition more than 3 steps from the end was cut off as terminal"
            assert b["return"][i] == pytest.approx(sum(0.97 ** k for k in range(left)))
        else:
            nxt = [game_of(f) for f in b["next_obs"][i]]
            assert {g for g, _ in nxt} == {game}, f"bootstrapped from another game: {obs} -> {nxt}"
            n_used = round(np.log(b["discount"][i]) / np.log(0.97))
            assert nxt[-1][1] == t + n_used, f"bootstrapped {n_used} records on but from step {nxt[-1][1]}: {obs}"
            assert b["return"][i] == pytest.approx(sum(0.97 ** k for k in range(n_used)))
    assert terminal > 0


def test_dropped_pushes_keep_game_statistics_and_step_counts(dropped_run):
    env, replay, cons, pub, dropped = dropped_run
    held_back = 0 if pub.pending is None else len(pub.pending[0])
    assert cons.episodes_total + held_back == env.games_finished
    assert all(e.ret == EP_LEN and e.length == EP_LEN for e in cons.finished)
    assert cons.agent_steps + cons.dropped_steps() == env.live_steps
    assert cons.dropped_steps() > 0


@pytest.mark.parametrize("clip,scale,learned", [(True, 1.0, 1.0), (False, 1.0, 4.0), (False, 0.25, 1.0)])
def test_rollout_learns_from_clipped_or_scaled_rewards_and_logs_raw_returns(clip, scale, learned):
    import dataclasses

    env = FiveStepEnvs(2)
    step = env.step
    env.step = lambda a: (lambda st: dataclasses.replace(st, rewards=st.rewards * 4))(step(a))  # a reward of 4
    rollout = Rollout(env, ZeroQ(), 4, clip, seed=0, reward_scale=scale)
    seen, best_return = set(), 0.0
    for _ in range(12):
        _, fields, _, _ = rollout.step(1.0)
        seen |= {float(r) for r in fields["reward"] if r}
        best_return = max(best_return, float(rollout.ep_ret.max()))
    assert seen == {learned}
    assert best_return == 4 * EP_LEN  # what the log shows: the raw score of a whole game
