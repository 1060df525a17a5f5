"""Random shifts of sampled frame stacks (DrQ: Kostrikov, Yarats and Fergus 2020; DrQ-epsilon:
Agarwal et al. 2021 used it with DQN on Atari).

Each sampled stack moves sideways by a whole number of pixels drawn from [-pad, pad], its edge
column repeated into the gap (DrQ pads with the edge and crops, which is the same), all frames of
the stack alike; a transition's state and next state draw their shifts apart, as DrQ's K = M = 1.
The aim is a Q-network that values a scene wherever it sits in the frame, as Mario meets it when a
random action puts him a few pixels off the path the greedy policy learned; whether that lifts the
play under noise is for the Mario suite to say (not measured yet).

Sideways only: the frame's bottom rows hold the action mark (``wrappers/action_mark.py``), which a
vertical shift would crop away; a sideways shift of a few pixels leaves each action's block (28
pixels wide for Mario's three actions) readable. Mario's level scrolls sideways too, so the shift
is a camera a few pixels off.

Why by hand: torchvision's and TorchRL's random crops draw one crop per call (per batch or per
image in a Python loop) and run in torch, and here the shift runs in the prefetch thread on the
sampled numpy batch, where a torch op would start a second OpenMP team beside the learner's.
"""
from __future__ import annotations

import numpy as np


class RandomShift:
    """Shifts [B, C, H, W] (or channels_last [B, H, W, C]) uint8 frame stacks sideways by up to
    ``pad`` pixels, one draw per stack from its own generator."""

    def __init__(self, pad: int, seed: int = 0):
        if pad < 1:
            raise ValueError(f"a random shift needs pad >= 1 pixel, got {pad}")
        self.pad = pad
        self.rng = np.random.default_rng(seed)

    def __call__(self, frames: np.ndarray, channels_last: bool = False) -> np.ndarray:
        """A new array of ``frames``' shape and layout, each stack shifted; ``frames`` is not changed.
        Two slice copies per stack (0.25 ms for 32 stacks of 4 x 84 x 84, where padding the batch
        and cropping it took 2.9 ms)."""
        width = frames.shape[2 if channels_last else 3]
        if self.pad >= width:
            raise ValueError(f"a shift of up to {self.pad} pixels does not fit frames {width} pixels wide")
        shifts = self.rng.integers(-self.pad, self.pad + 1, len(frames))  # > 0: the scene moves left
        out = np.empty_like(frames)
        # width last in both layouts (a channels_last array's view, so the copies write ``out``)
        src, dst = (frames.transpose(0, 3, 1, 2), out.transpose(0, 3, 1, 2)) if channels_last else (frames, out)
        for i, d in enumerate(shifts):
            if d >= 0:
                dst[i, ..., :width - d] = src[i, ..., d:]
                dst[i, ..., width - d:] = src[i, ..., width - 1:]
            else:
                dst[i, ..., -d:] = src[i, ..., :width + d]
                dst[i, ..., :-d] = src[i, ..., :1]
        return out
