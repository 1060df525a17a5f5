"""Which environment ids exist, and the errors that tell a user how to spell one."""
from __future__ import annotations

import difflib
from functools import lru_cache

import gymnasium as gym

from presets import is_mario  # the name test lives in layer 0 (presets); the other modules import it from here


class UnknownEnvError(ValueError):
    pass


@lru_cache(maxsize=2)
def _registered_ids(mario: bool) -> tuple[str, ...]:
    """The registered ids, the SuperMarioBros ones only where ``mario``: importing the NES
    package is what registers them, and an Atari run has no use for it."""
    import ale_py

    gym.register_envs(ale_py)
    if mario:
        import gym_super_mario_bros  # noqa: F401  (importing registers the SuperMarioBros ids)
    return tuple(gym.registry.keys())


def _supported(ids: tuple[str, ...]) -> list[str]:
    return [i for i in ids if i.startswith("ALE/") or i.startswith("SuperMarioBros-")]


def is_module_env_id(env_id: str) -> bool:
    """A ``module:EnvId`` id: any Gymnasium env registered by importing ``module`` whose
    observations are already uint8 84x84 gray frames (the test suite's catch game is one)."""
    return ":" in env_id


@lru_cache(maxsize=None)  # make_env checks every env it builds; building one to check it once is enough
def _check_pixel_env(env_id: str) -> str:
    module = env_id.split(":")[0]
    try:
        env = gym.make(env_id)
    except (ModuleNotFoundError, gym.error.Error) as e:
        raise UnknownEnvError(f"--env {env_id!r}: importing {module!r} did not register that id ({e}). "
                              "A module:EnvId id needs an importable module that calls gymnasium.register.") from None
    space = env.observation_space
    env.close()
    if not (isinstance(space, gym.spaces.Box) and space.dtype == "uint8" and space.shape == (84, 84)):
        raise UnknownEnvError(f"--env {env_id!r} observes {space}, but a module:EnvId env must give uint8 "
                              "84x84 gray frames (Box(0, 255, (84, 84), uint8)); wrap it to produce them.")
    return env_id


def check_env_id(env_id: str) -> str:
    """Return the env id if it is an ALE (``ALE/Pong-v5``), Mario (``SuperMarioBros-1-1-v0``) or
    ``module:EnvId`` pixel id."""
    if is_module_env_id(env_id):
        return _check_pixel_env(env_id)
    if env_id in _supported(_registered_ids(is_mario(env_id))):
        return env_id
    supported = _supported(_registered_ids(mario=True))  # a misspelled id is matched against every family
    close = difflib.get_close_matches(env_id, supported, n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise UnknownEnvError(
        f"--env {env_id!r} is not a known environment id.{hint} "
        "Use an ALE id such as ALE/Pong-v5 or ALE/Breakout-v5, or a Mario id such as "
        "SuperMarioBros-1-1-v0 (any world-stage: SuperMarioBros-W-S-v0), or module:EnvId for a "
        "Gymnasium env of your own that renders uint8 84x84 frames."
    )


def ale_game(env_id: str) -> str:
    """ALE ROM name (snake_case) behind a Gymnasium id, e.g. ALE/MsPacman-v5 -> ms_pacman."""
    return gym.spec(check_env_id(env_id)).kwargs["game"]


def ale_default_sticky(env_id: str) -> float:
    return float(gym.spec(check_env_id(env_id)).kwargs.get("repeat_action_probability", 0.0))


def sticky_probability(env_id: str, requested: float) -> float:
    """The sticky-action probability an ALE or Mario id plays with: ``requested``, or for -1 the
    id's own (ALE v5 0.25, v4 and NoFrameskip 0; Mario 0)."""
    if requested >= 0:
        return requested
    return 0.0 if is_mario(env_id) else ale_default_sticky(env_id)


def why_starts_are_not_games(env_id: str, opts) -> str | None:
    """Why greedy play of ``env_id`` with these EnvOptions is not one game per no-op start, or None
    where it is: Mario without sticky actions (the NES and greedy play are deterministic, and the
    start is all that differs between its games)."""
    if not is_mario(env_id):
        return f"{env_id}: every start is for Mario's stages, whose games differ only by their no-op start"
    sticky = sticky_probability(env_id, opts.sticky_actions)
    if sticky > 0:
        return f"sticky actions {sticky:g}: a start is many games, not one"
    return None


def greedy_games_are_starts(env_id: str, opts) -> bool:
    """Whether greedy play of ``env_id`` has one game per no-op start (``why_starts_are_not_games``)."""
    return why_starts_are_not_games(env_id, opts) is None
