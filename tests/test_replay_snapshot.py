"""The replay saved with the final checkpoint: a resume samples exactly the batches an
uninterrupted run would have, a foreign or corrupt file is refused by name, and a full disk
leaves the previous file intact."""
import resource
import signal

import numpy as np
import pytest
import torch

from models import NetworkSpec, build_model
from pipeline.replay import Replay
from pipeline.records import replay_snapshot as snapshot
from pipeline.actors.rollout import Rollout
from wrappers import BatchedEnv, EnvOptions

CATCH = "tests.catch_env:Catch-v0"
M = 4


def catch_replay(prioritized=False, steps=300, capacity=4000):
    """A replay filled by the real Rollout playing the catch game (random actions)."""
    torch.manual_seed(0)
    env = BatchedEnv(CATCH, EnvOptions(), M)
    model = build_model(NetworkSpec("batchnorm", 4, env.n_actions)).eval()
    rollout = Rollout(env, model, 4, True, seed=3)
    replay = Replay.of(capacity, 1, M, prioritized=prioritized, seed=7)
    for _ in range(steps):
        frames, fields, _, _ = rollout.step(1.0)
        replay.writer.write(0, frames, fields)
    env.close()
    return replay


def same_batch(a, b):
    for k in ("stream", "pos", "obs", "next_obs", "action", "return", "discount", "weights"):
        if a[k] is None:
            assert b[k] is None, k
        else:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


@pytest.mark.parametrize("prioritized,capacity", [(False, 4000), (True, 4000), (False, 800)])
def test_resumed_replay_samples_the_batches_of_an_uninterrupted_run(tmp_path, prioritized, capacity):
    """Half full (each stream's first 300 of 1,000 rows) or wrapped (300 records in 200 rows)."""
    replay = catch_replay(prioritized, capacity=capacity)
    if prioritized:
        b = replay.sample(64)
        replay.update_priorities(b["stream"], b["pos"], np.linspace(0.1, 5, 64))
    rng_state = replay.sampler.rng.bit_generator.state  # what the checkpoint stores
    size, took = snapshot.save(replay, tmp_path / "replay.npz", {"env": CATCH, "frame_stack": 4, "agent_steps": 1200})
    assert size < replay.storage.nbytes() / 5  # catch frames are mostly black: they compress
    rows = min(300, capacity // M)  # only the rows written are saved: the zeros past them are not
    with np.load(tmp_path / "replay.npz") as z:
        assert z["frames"].shape == (M, rows, 84, 84)
    resumed = Replay.of(capacity, 1, M, prioritized=prioritized, seed=123)
    meta = snapshot.load(resumed, tmp_path / "replay.npz", CATCH, 4)
    assert meta["agent_steps"] == 1200 and len(resumed) == len(replay) == M * rows
    np.testing.assert_array_equal(resumed.storage.frames, replay.storage.frames)
    resumed.sampler.rng.bit_generator.state = rng_state
    for _ in range(5):
        same_batch(replay.sample(32), resumed.sample(32))
    with pytest.raises(ValueError, match="fresh replay"):  # rows past the file's must be a fresh replay's zeros
        snapshot.load(resumed, tmp_path / "replay.npz", CATCH, 4)


@pytest.mark.parametrize("change,named", [
    (dict(env="ALE/Pong-v5"), "env 'tests.catch_env:Catch-v0'"),
    (dict(frame_stack=2), "frame_stack 4"),
    (dict(capacity=8000), "replay capacity (--buffer-size, rounded to whole streams) 4000"),
    (dict(num_streams=8), "env stream count ((--num-collectors + --ray-collectors) x --envs-per-collector) 4"),
])
def test_replay_of_other_settings_is_refused_naming_both(tmp_path, change, named):
    replay = catch_replay(steps=20)
    path = tmp_path / "replay.npz"
    snapshot.save(replay, path, {"env": CATCH, "frame_stack": 4, "agent_steps": 80})
    want = {"env": CATCH, "frame_stack": 4, "capacity": 4000, "num_streams": M, **change}
    with pytest.raises(snapshot.ReplayFileError) as e:
        snapshot.check_fits(path, **want)
    msg = str(e.value)
    assert str(path) in msg and named in msg and repr(list(change.values())[0]) in msg and "--save-replay false" in msg


def test_corrupt_replay_file_is_refused_by_name(tmp_path):
    path = tmp_path / "replay.npz"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(snapshot.ReplayFileError, match="replay.npz is truncated or corrupt"):
        snapshot.read_meta(path)


def test_full_disk_during_the_save_leaves_the_previous_replay(tmp_path):
    replay = Replay.of(2000, 1, 1, seed=0)
    rng = np.random.default_rng(0)
    replay.writer.write(0, rng.integers(0, 255, (100, 84, 84), dtype=np.uint8),
                        {"env": np.zeros(100, np.uint16), "action": np.zeros(100, np.uint8),
                         "reward": np.zeros(100, np.float32), "flags": np.r_[1, np.zeros(99)].astype(np.uint8)})
    path = tmp_path / "replay.npz"
    snapshot.save(replay, path, {"env": "x", "frame_stack": 4, "agent_steps": 100})
    before = path.read_bytes()
    replay.writer.write(0, rng.integers(0, 255, (900, 84, 84), dtype=np.uint8),
                        {"env": np.zeros(900, np.uint16), "action": np.zeros(900, np.uint8),
                         "reward": np.zeros(900, np.float32), "flags": np.zeros(900, np.uint8)})
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 100_000, old_limit[1]))  # the disk "fills"
    try:
        with pytest.raises(snapshot.ReplayFileError, match="could not write the replay .*previous replay file"):
            snapshot.save(replay, path, {"env": "x", "frame_stack": 4, "agent_steps": 1000})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert path.read_bytes() == before and not (tmp_path / "replay.npz.tmp").exists()
    assert snapshot.read_meta(path)["agent_steps"] == 100


def test_a_flipped_byte_anywhere_is_refused_or_harmless(tmp_path):
    """Bytes flipped, not cut: wherever the flip lands (zip headers, an array's deflate stream,
    the meta, the central directory), the checks a resume runs first refuse the file by name, or
    the file loads exactly as saved (a flip in a field zip never reads, such as a timestamp)."""
    replay = catch_replay(steps=60, capacity=400)
    path, damaged = tmp_path / "replay.npz", tmp_path / "damaged.npz"
    snapshot.save(replay, path, {"env": CATCH, "frame_stack": 4, "agent_steps": 240})
    data = path.read_bytes()
    refused = 0
    for at in [len(data) // 3, *range(0, len(data), max(1, len(data) // 150))]:
        flipped = bytearray(data)
        flipped[at] ^= 0xFF
        damaged.write_bytes(flipped)
        try:
            snapshot.check_fits(damaged, CATCH, 4, 400, M)
            snapshot.verify(damaged)
        except snapshot.ReplayFileError as e:
            assert str(damaged) in str(e) and "--save-replay false" in str(e), (at, e)
            refused += 1
            continue
        loaded = Replay.of(400, 1, M, seed=7)
        snapshot.load(loaded, damaged, CATCH, 4)
        for name in snapshot.ARRAYS:
            np.testing.assert_array_equal(getattr(loaded.storage, name), getattr(replay.storage, name), err_msg=(at, name))
    assert refused > 140


def test_replay_meta_without_its_step_count_is_refused_by_name(tmp_path):
    replay = catch_replay(steps=20, capacity=400)
    path = tmp_path / "replay.npz"
    snapshot.save(replay, path, {"env": CATCH, "frame_stack": 4})  # no agent_steps
    with pytest.raises(snapshot.ReplayFileError, match=r"replay.npz has no valid agent_steps in its meta"):
        snapshot.check_fits(path, CATCH, 4, 400, M)


def test_empty_uniform_replay_resumes_prioritized(tmp_path):
    """A run stopped before any record arrived saves an empty replay; resumed with --prioritized
    it loads as empty (no priorities to set) and fills and samples as a new one."""
    path = tmp_path / "replay.npz"
    snapshot.save(Replay.of(400, 1, M, seed=7), path, {"env": CATCH, "frame_stack": 4, "agent_steps": 0})
    resumed = Replay.of(400, 1, M, prioritized=True, seed=7)
    assert snapshot.load(resumed, path, CATCH, 4)["agent_steps"] == 0
    assert len(resumed) == 0 and resumed.sampler.tree.total == 0
    filled = catch_replay(prioritized=True, steps=20, capacity=400)
    snapshot.save(filled, path, {"env": CATCH, "frame_stack": 4, "agent_steps": 80})
    snapshot.load(resumed, path, CATCH, 4)
    assert len(resumed) == 80 and resumed.sample(8)["weights"] is not None
