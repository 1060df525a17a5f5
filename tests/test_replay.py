"""Replay against a plain reference: frame stacks at episode boundaries, n-step targets,
wrap-around, broken streams, prioritized sampling and bytes per transition."""
import numpy as np
import pytest
import torch

from pipeline.replay import Replay
from pipeline.actors.rollout import Rollout
from pipeline.transport.transition import EXPLORED, FIRST, LAST, TERM, TRUNC
from wrappers.batched import BatchStep

K, N, GAMMA = 4, 3, 0.9
SHAPE = (2, 2)


def small_replay(capacity, num_envs, **kw):
    """A replay of tiny frames (SHAPE), one collector's ``num_envs`` streams, K, N and GAMMA."""
    return Replay.of(capacity, 1, num_envs, frame_stack=K, n_step=N, gamma=GAMMA, seed=0, frame_shape=SHAPE, **kw)


def frame(i):
    f = np.zeros(SHAPE, np.uint8)
    f[0, 0], f[0, 1] = i & 255, (i >> 8) & 255
    return f


def frame_id(f):
    return int(f[..., 0, 0]) + 256 * int(f[..., 0, 1])


class ScriptedEnvs:
    """A batch of envs with random rewards, lost lives, game overs and time limits, and a frame
    of its own at every step (``frame(id)``), so each record's frame names it."""
    n_actions = 6

    def __init__(self, num_envs: int, seed: int):
        self.num_envs, self.rng, self.uid = num_envs, np.random.default_rng(seed), 0
        self.game_over = np.zeros(num_envs, bool)

    def _frames(self):
        self.uid += self.num_envs
        return np.stack([frame(i) for i in range(self.uid - self.num_envs + 1, self.uid + 1)])

    def reset(self, seed=None):
        return self._frames()

    def step(self, actions):
        M, u = self.num_envs, self.rng.random(self.num_envs)
        reset, self.game_over = self.game_over, ~self.game_over & (u < 0.09)  # the step after a game over resets
        term = ~reset & ((u < 0.06) | ((u >= 0.09) & (u < 0.12)))  # game over, or a life lost
        trunc = ~reset & (u >= 0.06) & (u < 0.09)
        rewards = np.where(reset, 0.0, self.rng.normal(size=M)).astype(np.float32)
        return BatchStep(self._frames(), rewards, term, trunc, reset)


class Uniform(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(len(x), ScriptedEnvs.n_actions)


def make_streams(num_envs, steps, seed=0, epsilon=1.0):
    """Records as a collector writes them, from the collectors' Rollout stepping ScriptedEnvs:
    lost lives (TERM, then FIRST), game overs (TERM or TRUNC, then a LAST record with the final
    frame, then FIRST)."""
    rollout = Rollout(ScriptedEnvs(num_envs, seed), Uniform(), K, clip_rewards=False, seed=seed)
    streams = [[] for _ in range(num_envs)]
    for _ in range(steps):
        frames, f, _, _ = rollout.step(epsilon)
        for e in range(num_envs):
            streams[e].append(dict(id=frame_id(frames[e]), action=int(f["action"][e]), reward=float(f["reward"][e]),
                                   flags=int(f["flags"][e])))
    return streams


def fill(replay, streams, seed=1):
    rng = np.random.default_rng(seed)
    num_envs = len(streams)
    flat = [(e, r) for t in range(len(streams[0])) for e, r in ((e, streams[e][t]) for e in range(num_envs))]
    i = 0
    while i < len(flat):
        k = int(rng.integers(1, 40))
        chunk = flat[i:i + k]
        i += k
        replay.writer.write(0, np.stack([frame(r["id"]) for _, r in chunk]), {
            "env": np.array([e for e, _ in chunk], np.uint16), "action": np.array([r["action"] for _, r in chunk], np.uint8),
            "reward": np.array([r["reward"] for _, r in chunk], np.float32),
            "flags": np.array([r["flags"] for _, r in chunk], np.uint8)})


def ref_stack(recs, i):
    ids, j = [recs[i]["id"]], i
    for _ in range(K - 1):
        if not recs[j]["flags"] & FIRST:
            j -= 1
        ids.insert(0, recs[j]["id"])
    return ids


def ref_nstep(recs, i, cut=False):
    ret = 0.0
    for m in range(N):
        r = recs[i + m]
        if cut and m > 0 and r["flags"] & EXPLORED:  # Watkins: the greedy policy's return ends here
            return ret, GAMMA ** m, i + m
        ret += GAMMA ** m * r["reward"]
        if r["flags"] & (TERM | TRUNC):
            return ret, 0.0 if r["flags"] & TERM else GAMMA ** (m + 1), i + m + 1
    return ret, GAMMA ** N, i + N


def sampled_records(replay, streams, n=512):
    """A batch of ``n``, and per sample its stream's records and its index among them."""
    st = replay.storage
    batch = replay.sample(n)
    where = []
    for b in range(n):
        s, p = batch["stream"][b], batch["pos"][b]
        where.append((b, streams[s], int(st.written[s] - ((st.pos[s] - 1 - p) % st.stream_len) - 1)))
    return batch, where


def check_n_step(batch, b, recs, i, cut=False):
    """Sample ``b`` holds the reference n-step return, discount and bootstrap stack of record ``i``."""
    ret, disc, boot = ref_nstep(recs, i, cut)
    assert batch["return"][b] == pytest.approx(ret, abs=1e-5)
    assert batch["discount"][b] == pytest.approx(disc, abs=1e-6)
    if disc > 0:
        assert [frame_id(f) for f in batch["next_obs"][b]] == ref_stack(recs, boot)
    return boot


@pytest.mark.parametrize("steps", [50, 400])  # 400 steps wrap each 120-slot stream
def test_samples_match_reference(steps):
    num_envs = 3
    streams = make_streams(num_envs, steps)
    replay = small_replay(360, num_envs)
    fill(replay, streams)
    batch, where = sampled_records(replay, streams)
    checked_boundary = 0
    for b, recs, i in where:
        assert not recs[i]["flags"] & LAST
        assert [frame_id(f) for f in batch["obs"][b]] == ref_stack(recs, i)
        check_n_step(batch, b, recs, i)
        assert batch["action"][b] == recs[i]["action"]
        checked_boundary += len(set(ref_stack(recs, i))) < K
    assert checked_boundary > 20  # the sample really covered stacks padded at episode starts


def test_newest_records_are_never_sampled_without_their_bootstrap():
    streams = make_streams(1, 30, seed=3)
    replay = small_replay(100, 1)
    fill(replay, streams)
    p = replay.sample(2000)["pos"]
    assert p.max() <= replay.storage.pos[0] - 1 - N


def test_broken_stream_is_closed_as_truncated():
    """A collector that restarts starts with FIRST records mid-episode: the old episode must end
    there instead of running into the new one."""
    replay = small_replay(100, 1)
    recs = [dict(id=i + 1, action=1, reward=1.0, flags=FIRST if i == 0 else 0) for i in range(6)]
    recs += [dict(id=100 + i, action=1, reward=5.0, flags=FIRST if i == 0 else 0) for i in range(6)]
    fill(replay, [recs])
    flags = replay.storage.flags[0]
    assert flags[5] & LAST and flags[4] & TRUNC
    batch = replay.sample(500)
    for b in range(500):
        ids = [frame_id(f) for f in batch["obs"][b]]
        assert all(x < 100 for x in ids) or all(x >= 100 for x in ids)
        assert batch["return"][b] <= 3 * 1.0 + 1e-6 or min(ids) >= 100


def test_bytes_per_transition_within_target():
    replay = Replay.of(10_000, 2, 4)
    assert replay.storage.bytes_per_transition() <= 7200


def test_prioritized_sampling_follows_priorities():
    num_envs = 2
    streams = make_streams(num_envs, 200, seed=5)
    replay = small_replay(400, num_envs, prioritized=True)
    fill(replay, streams)
    b = replay.sample(64)
    assert b["weights"] is not None and b["weights"].max() == pytest.approx(1.0)
    hot_s, hot_p = b["stream"][:1], b["pos"][:1]
    replay.update_priorities(hot_s, hot_p, np.array([1e4]))
    counts = 0
    for _ in range(10):
        s = replay.sample(64)
        counts += np.sum((s["stream"] == hot_s[0]) & (s["pos"] == hot_p[0]))
    tree = replay.sampler.tree
    share = tree.tree[tree.size + hot_s[0] * replay.storage.stream_len + hot_p[0]] / tree.total
    assert share > 0.3  # 1e4 ** 0.6 against ~390 transitions at priority 1
    assert abs(counts - 640 * share) < 0.15 * 640 * share  # uniform sampling would give ~2


def test_restart_after_a_truncation_does_not_bootstrap_from_the_new_episode():
    """The dead collector wrote the TRUNC record but not the LAST record after it; the restarted
    one begins with FIRST. The truncated transition has no final frame: it must not be sampled
    with the new episode's first frame as its bootstrap."""
    replay = small_replay(100, 1)
    recs = [dict(id=i + 1, action=1, reward=1.0, flags=(FIRST if i == 0 else 0) | (TRUNC if i == 5 else 0))
            for i in range(6)]
    recs += [dict(id=100 + i, action=1, reward=5.0, flags=FIRST if i == 0 else 0) for i in range(8)]
    fill(replay, [recs])
    flags = replay.storage.flags[0]
    assert flags[5] & LAST and flags[4] & TRUNC
    batch = replay.sample(500)
    for b in range(500):
        ids = [frame_id(f) for f in batch["obs"][b]]
        nxt = [frame_id(f) for f in batch["next_obs"][b]]
        assert (max(ids) < 100) == (max(nxt) < 100), f"{ids} bootstraps from {nxt}"


def test_prioritized_writes_update_the_tree_under_the_storage_lock():
    replay = small_replay(400, 2, prioritized=True)
    held = []
    on_write = replay.writer.on_write
    replay.writer.on_write = lambda *a: (held.append(replay.storage.lock.locked()), on_write(*a))
    fill(replay, make_streams(2, 50, seed=2))
    assert held and all(held)


def test_prioritized_beta_is_annealed_to_one():
    replay = small_replay(400, 2, prioritized=True, beta=0.4)
    fill(replay, make_streams(2, 200, seed=5))
    sampler = replay.sampler
    weights = {}
    for progress in (0.0, 0.5, 1.0, 2.0):
        sampler.anneal(progress)
        weights[progress] = sampler.beta
    assert weights == {0.0: 0.4, 0.5: pytest.approx(0.7), 1.0: 1.0, 2.0: 1.0}
    # at beta 1 the importance weights undo the priorities exactly: w ~ 1 / p
    replay.update_priorities(np.array([0]), np.array([10]), np.array([100.0]))
    b = replay.sample(256)
    flat = b["stream"] * replay.storage.stream_len + b["pos"]
    prob = sampler.tree.tree[flat + sampler.tree.size] / sampler.tree.total
    assert np.allclose(b["weights"] * prob, (b["weights"] * prob).max(), rtol=1e-4)


def test_priority_write_back_skips_slots_rewritten_since_the_sample():
    """The writer goes on while a sampled batch waits in the prefetch queue and trains: a slot
    rewritten in between holds a new record, which keeps the priority it was written with
    instead of taking the TD error of the record it replaced."""
    replay = small_replay(400, 2, prioritized=True)
    streams = make_streams(2, 260, seed=5)
    fill(replay, [s[:200] for s in streams])  # each 200-slot stream just full: the next write is at 0
    b = replay.sample(64)
    fill(replay, [s[200:] for s in streams])  # 60 more records a stream: slots 0..59 rewritten
    tree, L = replay.sampler.tree, replay.storage.stream_len
    leaf = tree.size + b["stream"] * L + b["pos"]
    written_with = tree.tree[leaf].copy()
    rewritten = b["pos"] < 60
    assert rewritten.any() and (~rewritten).any()
    replay.update_priorities(b["stream"], b["pos"], np.full(64, 1e3), b["seq"])
    assert np.array_equal(tree.tree[leaf[rewritten]], written_with[rewritten])
    assert np.allclose(tree.tree[leaf[~rewritten]], (1e3 + 1e-6) ** replay.sampler.alpha)
    assert tree.total == pytest.approx(tree.tree[tree.size:].sum())  # the sums above the leaves agree
    # a batch whose every slot was rewritten changes nothing
    before = tree.tree.copy()
    replay.update_priorities(b["stream"][rewritten], b["pos"][rewritten], np.full(rewritten.sum(), 1e3),
                             b["seq"][rewritten])
    assert np.array_equal(tree.tree, before)


def test_from_config_hands_the_replay_its_parts():
    """One stream per env of every collector; the sampler the config asks for, and the writer
    tells it of every write, so no caller needs to know which sampler it is."""
    from config_optimized import Config
    from pipeline.replay import PrioritizedSampler, UniformSampler

    cfg = Config.of(num_collectors=2, envs_per_collector=4, buffer_size=8_000, n_step=5, gamma=0.97, seed=3)
    replay = Replay.from_config(cfg)
    assert replay.storage.num_streams == 8 and (replay.n_step, replay.gamma) == (5, 0.97)
    assert type(replay.sampler) is UniformSampler and replay.writer.on_write == replay.sampler.on_write
    prioritized = Replay.from_config(cfg.replace(prioritized=True, per_alpha=0.5))
    assert isinstance(prioritized.sampler, PrioritizedSampler) and prioritized.sampler.alpha == 0.5
    assert prioritized.writer.on_write == prioritized.sampler.on_write
    # the uniform sampler takes the same calls as the prioritized one, and they change nothing
    state = replay.sampler.rng.bit_generator.state
    replay.update_priorities(np.array([0]), np.array([0]), torch.tensor([3.0]), np.array([0]))
    replay.anneal(0.5)
    assert replay.sampler.rng.bit_generator.state == state


def test_a_batch_says_how_old_its_samples_are():
    """Uniform samples from a full replay are on average half its capacity old, in agent steps."""
    num_envs = 4
    replay = small_replay(400, num_envs)
    fill(replay, make_streams(num_envs, 300))  # each stream's 100 slots rewritten three times over
    ages = [replay.sample(64)["age"] for _ in range(50)]
    assert 0.4 * 400 < np.mean(ages) < 0.6 * 400


def test_n_step_cut_ends_each_return_before_the_next_random_action():
    num_envs = 3
    streams = make_streams(num_envs, 400, epsilon=0.5)
    flags = [r["flags"] for recs in streams for r in recs if not r["flags"] & LAST]
    assert 0.3 < np.mean([bool(f & EXPLORED) for f in flags]) < 0.7  # the rollout marks its random actions
    replay = small_replay(360, num_envs, n_step_cut=True)
    fill(replay, streams)
    batch, where = sampled_records(replay, streams)
    cut = 0
    for b, recs, i in where:
        cut += check_n_step(batch, b, recs, i, cut=True) < ref_nstep(recs, i)[2]
    assert cut > 100  # about 3 of 4 samples meet a random action within their next two steps


def test_channels_last_batches_hold_the_same_stacks_laid_out_for_the_cpu_learner():
    """``sample(channels_last=True)`` gives the same frame stacks, in [B, H, W, k] memory, and a
    channels_last CPU learner takes them as they are, without a copy."""
    from pipeline.agent.learner import Learner
    from pipeline.settings.layers import resolve_config
    from pipeline.settings.hardware import detect_hardware

    streams = make_streams(3, 400)
    plain, laid = small_replay(360, 3), small_replay(360, 3)  # the same seed: the same draws
    fill(plain, streams)
    fill(laid, streams)
    a, b = plain.sample(64), laid.sample(64, channels_last=True)
    for k in ("obs", "next_obs"):
        np.testing.assert_array_equal(a[k], b[k])
        assert b[k].shape == (64, K, *SHAPE) and b[k].transpose(0, 2, 3, 1).flags.c_contiguous
    cfg = resolve_config({"env": "ALE/Pong-v5", "channels_last": True}, detect_hardware()).cfg
    learner = Learner(cfg.learner, K, 6, torch.device("cpu"))
    assert learner.host_channels_last
    on = learner.to_device(b)
    assert on["obs"].is_contiguous(memory_format=torch.channels_last)
    assert on["obs"].data_ptr() == b["obs"].__array_interface__["data"][0]  # viewed, not copied
    again = small_replay(360, 3)  # what the benches train on: the same draw, sampled in the learner's layout
    fill(again, streams)
    drawn = learner.batch_from(again, 64)
    assert drawn["obs"].is_contiguous(memory_format=torch.channels_last)
    for k in ("obs", "next_obs"):
        np.testing.assert_array_equal(drawn[k].numpy(), a[k])
