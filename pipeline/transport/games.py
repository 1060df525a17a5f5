"""Whole games as they leave the replay writer: the EP_END records of a batch of ring records
turned into ``Episode`` rows. The consolidation thread counts them; the run records
(``pipeline/records/episodes.py``) score them and write them to ``episodes.jsonl``."""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from .transition import EP_END

NO_STATS = MappingProxyType({})


class Episode(NamedTuple):
    """One whole game (not one life), as it left the replay writer."""
    ret: float        # raw return, before reward clipping
    length: int       # agent steps
    agent_steps: int  # agent steps consolidated when the game ended (all envs)
    t: float          # time.monotonic() when the game reached the learner
    # the game family's statistics of it, as its episodes.jsonl row names them (Mario: the
    # distance reached and the flag; none for the ALE's games): GameFamily.game_stats
    stats: Mapping = NO_STATS


def no_stats(fields: dict, i: int) -> Mapping:
    """The statistics of records that carry no game family's fields (a stand-in env's)."""
    return NO_STATS


def finished_games(fields: dict, agent_steps: int, t: float, game_stats) -> list[Episode]:
    """The whole games that end in a batch of ring records (their EP_END records);
    ``game_stats(fields, i)``: the game family's statistics of the one record ``i`` ends."""
    flags = fields["flags"]
    return [Episode(float(fields["ep_return"][i]), int(fields["ep_len"][i]), agent_steps, t, game_stats(fields, i))
            for i in np.flatnonzero(flags & EP_END)]
