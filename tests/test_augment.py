"""The random shift of sampled frame stacks: each stack a sideways copy of itself with its edge
repeated, all its frames alike, either layout, the stored frames untouched, and in the replay's
batches without changing which records are drawn."""
import numpy as np
import pytest

from pipeline.replay import RandomShift, Replay
from pipeline.transport.transition import FIRST
from wrappers.action_mark import MARK_ROWS, ActionMark


def shifted(stack, d):
    """``stack`` [C, H, W] moved by d pixels (content moves left for d > 0), edge repeated: the reference."""
    w = stack.shape[-1]
    cols = np.clip(np.arange(w) + d, 0, w - 1)
    return stack[..., cols]


def stacks(n=64, c=4, h=12, w=20, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, c, h, w), dtype=np.uint8)


def test_each_stack_is_itself_moved_sideways_by_at_most_pad_pixels():
    frames = stacks()
    before = frames.copy()
    out = RandomShift(3, seed=1)(frames)
    assert out.shape == frames.shape and out.dtype == np.uint8
    np.testing.assert_array_equal(frames, before)  # a new array; the replay's frames stay as stored
    seen = []
    for f, o in zip(frames, out):
        matches = [d for d in range(-3, 4) if np.array_equal(shifted(f, d), o)]
        assert len(matches) == 1, "every frame of a stack moves by one shift within [-pad, pad]"
        seen.append(matches[0])
    assert set(seen) == set(range(-3, 4)), "64 draws cover every shift of 7"


def test_channels_last_stacks_shift_along_their_width():
    frames = stacks()
    first = RandomShift(2, seed=5)(frames)
    last = RandomShift(2, seed=5)(np.ascontiguousarray(frames.transpose(0, 2, 3, 1)), channels_last=True)
    np.testing.assert_array_equal(last, first.transpose(0, 2, 3, 1))


def test_the_action_mark_stays_in_the_bottom_rows_and_readable():
    """Sideways only: the strip keeps its rows, and each action's block (84 // 3 wide) still lights
    the most of the strip's columns at the action's place."""
    frames = np.zeros((30, 4, 84, 84), np.uint8)
    actions = np.arange(30) % 3
    mark = ActionMark(3, 84)
    for k in range(4):
        mark(frames[:, k], actions, np.zeros(30, bool))
    out = RandomShift(4, seed=2)(frames)
    assert not out[:, :, :-MARK_ROWS].any(), "nothing moved into the rows above the strip"
    lit = out[:, 0, -1].reshape(30, 3, 28).sum(axis=2)
    np.testing.assert_array_equal(lit.argmax(axis=1), actions)


def test_replay_batches_are_shifted_and_drawn_as_without_the_shift():
    """Same seed, same records: the shift has its own generator, so actions, returns and where
    the samples came from match a replay without it; the frames differ only by the shift."""
    def filled(shift):
        rep = Replay.of(500, 1, 2, frame_stack=4, n_step=3, gamma=0.9, seed=3, frame_shape=(8, 16), shift=shift)
        rng = np.random.default_rng(0)
        for t in range(200):
            frames = rng.integers(0, 256, (2, 8, 16), dtype=np.uint8)
            rep.writer.write(0, frames, {"env": np.arange(2), "action": rng.integers(0, 3, 2),
                                         "reward": rng.normal(size=2).astype(np.float32),
                                         "flags": np.full(2, FIRST if t == 0 else 0, np.uint8)})
        return rep
    plain, moved = filled(0), filled(2)
    a, b = plain.sample(32), moved.sample(32)
    for k in ("action", "return", "discount", "stream", "pos"):
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["obs"], b["obs"])
    for key in ("obs", "next_obs"):
        for x, y in zip(a[key], b[key]):
            assert any(np.array_equal(shifted(x, d), y) for d in range(-2, 3))


def test_a_shift_needs_a_pixel_and_a_frame_wider_than_itself():
    with pytest.raises(ValueError, match="pad >= 1"):
        RandomShift(0)
    with pytest.raises(ValueError, match="does not fit"):
        RandomShift(20)(stacks(w=20))
