"""Keys the run files once held under other names, and the one function that reads them as
today's: a file an earlier version wrote (metrics, games, checkpoints, replay meta, the suite's
records) reads as one written today. Beside the replay's file on disk (``replay_snapshot.py``),
whose meta it reads too."""
from __future__ import annotations

RENAMED_KEYS = {"env_steps": "agent_steps", "env_steps_per_s": "agent_steps_per_s"}


def current_keys(data):
    """``data`` (a dict or list, nested) with every renamed key under today's name; a key already
    under today's name wins over its old name."""
    if isinstance(data, list):
        return [current_keys(v) for v in data]
    if not isinstance(data, dict):
        return data
    return {RENAMED_KEYS.get(k, k): current_keys(v) for k, v in data.items()
            if not (k in RENAMED_KEYS and RENAMED_KEYS[k] in data)}
