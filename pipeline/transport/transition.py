"""What one transition record holds: the layout a collector's ring and the replay share.

A record is the frame an action was taken on (uint8, stored once; stacks are rebuilt at sample
time) plus the fields below, and flags that say where it sits in its env's stream. A game family
adds its own fields after these (``GameFamily.fields`` in ``wrappers/families.py``: Mario's x
position and flag); rings lay them out and Ray batches carry them, the replay stores none.
"""
from __future__ import annotations

import numpy as np

# Record flags.
FIRST = 1      # first observation of a (learning) episode
TERM = 2       # the transition from this observation terminated the episode (no bootstrap)
TRUNC = 4      # the transition was truncated (bootstrap from the next record)
LAST = 8       # this record only carries the final observation of an episode; not a sample start
EP_END = 16    # a whole game ended here: ep_return / ep_len (and the family's fields) hold its stats
# 32 is no longer set: it marked Mario's flag, now a field of his family's. A replay saved before
# (replay.npz) may hold it on some records; nothing reads it, and no new flag should take it.
STATS = 64     # carries only a finished game's statistics (its own record was dropped); not stored
EXPLORED = 128  # the record's action was a random (exploratory) one, not the policy's choice

# Fields beside the frame: name and dtype; a game family's own follow them.
FIELDS = (("action", np.uint8), ("reward", np.float32), ("flags", np.uint8), ("env", np.uint16),
          ("ep_return", np.float32), ("ep_len", np.int32))


def is_agent_step(flags: np.ndarray) -> np.ndarray:
    """Records that stand for one agent step: not a final observation, not a statistics carrier."""
    return (flags & (LAST | STATS)) == 0
