"""Game-family presets: the hyperparameters that belong to a kind of game (Atari, Mario), kept
apart from the hardware profiles in config_optimized.py, which say how fast a machine runs them.

One TOML file per family, listing only what differs from the Config defaults. Layers, each
overriding the one before: defaults, family preset, hardware profile, ``--config FILE``, flags.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

FAMILIES = ("atari", "mario")
HERE = Path(__file__).resolve().parent


def is_mario(env_id: str) -> bool:
    """A Super Mario Bros id (SuperMarioBros-1-1-v0, SuperMarioBros-v0, ...): a name test, here
    in layer 0 so the config and the presets can tell the families apart without the wrappers."""
    return env_id.startswith("SuperMarioBros")


def family_of(env_id: str) -> str:
    """The preset family of an env id: Mario ids are "mario"; ALE ids and module:EnvId pixel
    games get the Atari recipe."""
    return "mario" if is_mario(env_id) else "atari"


def preset_path(family: str) -> Path:
    return HERE / f"{family}.toml"


def load_preset(family: str) -> dict:
    """The preset's overrides; an unknown family has none (never raised: the env id check names
    the problem first)."""
    path = preset_path(family)
    if not path.exists():
        return {}
    with open(path, "rb") as f:
        return tomllib.load(f)
