"""Whole games as they leave the replay writer: the EP_END records of a batch of ring records
turned into ``Episode`` rows. The consolidation thread counts them; the run records
(``pipeline/records/episodes.py``) score them and write them to ``episodes.jsonl``."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .transition import EP_END, FLAG_GET


class Episode(NamedTuple):
    """One whole game (not one life), as it left the replay writer."""
    ret: float        # raw return, before reward clipping
    length: int       # agent steps
    x_pos: float      # Mario: the distance reached; NaN for other games
    flag: bool        # Mario: the flag was reached
    agent_steps: int    # agent steps consolidated when the game ended (all envs)
    t: float          # time.monotonic() when the game reached the learner


def finished_games(fields: dict, agent_steps: int, t: float) -> list[Episode]:
    """The whole games that end in a batch of ring records (their EP_END records)."""
    flags = fields["flags"]
    return [Episode(float(fields["ep_return"][i]), int(fields["ep_len"][i]), float(fields["x_pos"][i]),
                    bool(flags[i] & FLAG_GET), agent_steps, t) for i in np.flatnonzero(flags & EP_END)]
