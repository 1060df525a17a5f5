"""What one transition record holds: the layout a collector's ring and the replay share.

A record is the frame an action was taken on (uint8, stored once; stacks are rebuilt at sample
time) plus the fields below, and flags that say where it sits in its env's stream.
"""
from __future__ import annotations

import numpy as np

# Record flags.
FIRST = 1      # first observation of a (learning) episode
TERM = 2       # the transition from this observation terminated the episode (no bootstrap)
TRUNC = 4      # the transition was truncated (bootstrap from the next record)
LAST = 8       # this record only carries the final observation of an episode; not a sample start
EP_END = 16    # a whole game ended here: ep_return / ep_len / x_pos / flag hold its stats
FLAG_GET = 32  # Mario reached the flag in that game
STATS = 64     # carries only a finished game's statistics (its own record was dropped); not stored
EXPLORED = 128  # the record's action was a random (exploratory) one, not the policy's choice

# Fields beside the frame: name and dtype.
FIELDS = (("action", np.uint8), ("reward", np.float32), ("flags", np.uint8), ("env", np.uint16),
          ("ep_return", np.float32), ("ep_len", np.int32), ("x_pos", np.float32))


def is_agent_step(flags: np.ndarray) -> np.ndarray:
    """Records that stand for one agent step: not a final observation, not a statistics carrier."""
    return (flags & (LAST | STATS)) == 0
