"""Which environment ids exist, and the errors that tell a user how to spell one."""
from __future__ import annotations

import difflib
from functools import lru_cache

import gymnasium as gym


class UnknownEnvError(ValueError):
    pass


def is_mario(env_id: str) -> bool:
    return env_id.startswith("SuperMarioBros")


@lru_cache(maxsize=1)
def _registered_ids() -> tuple[str, ...]:
    import ale_py
    import gym_super_mario_bros  # noqa: F401  (importing registers the SuperMarioBros ids)

    gym.register_envs(ale_py)
    return tuple(gym.registry.keys())


def check_env_id(env_id: str) -> str:
    """Return the env id if it is an ALE (``ALE/Pong-v5``) or Mario (``SuperMarioBros-1-1-v0``) id."""
    ids = _registered_ids()
    supported = [i for i in ids if i.startswith("ALE/") or i.startswith("SuperMarioBros-")]
    if env_id in supported:
        return env_id
    close = difflib.get_close_matches(env_id, supported, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownEnvError(
        f"--env {env_id!r} is not a known environment id.{hint} "
        "Use an ALE id such as ALE/Pong-v5 or ALE/Breakout-v5, or a Mario id such as "
        "SuperMarioBros-1-1-v0 (any world-stage: SuperMarioBros-W-S-v0)."
    )


def ale_game(env_id: str) -> str:
    """ALE ROM name (snake_case) behind a Gymnasium id, e.g. ALE/MsPacman-v5 -> ms_pacman."""
    return gym.spec(check_env_id(env_id)).kwargs["game"]


def ale_default_sticky(env_id: str) -> float:
    return float(gym.spec(check_env_id(env_id)).kwargs.get("repeat_action_probability", 0.0))
