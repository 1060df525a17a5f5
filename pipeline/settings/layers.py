"""Where a run's settings come from: one flag per config field, config files (TOML or JSON, flat
or in part tables), the game family's preset, the hardware profile (``profiles.py``) and a
resumed run's record (read as today's settings by ``migrate.py``), layered in that order under
the flags, with the layer that set each value; ``python config_optimized.py`` shows them (``show``)."""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from config_optimized import (FIELDS, FRAME_BYTES, PARTS, REPLAY_META_BYTES, RUN_CONTROL, Config, ConfigError,
                              UserError, flag)
from presets import family_of, load_preset

from ..records.files import RECORD_NAME
from ..records.run_folder import RUNS_ROOT, resume_target
from .check import validate
from .cli import Parser, add_config_arguments
from .hardware import Hardware, detect_hardware, resolve_device
from .migrate import as_trained, current_names
from .profiles import PROFILES, autotuned_path, layout_reason, pick_profile, scale_profile


def flatten(data: dict) -> dict:
    """Config values from a file, flat: a part's table (``[learner]`` in TOML, a nested JSON
    object) is lifted into its fields' names, and a renamed field's old name read as the new one."""
    out = {}
    for k, v in data.items():
        if k in PARTS and isinstance(v, dict):
            out.update(v)
        else:
            out[k] = v
    return current_names(out)


# What a resumed run cannot change: the checkpoint's network and replay were made for these.
FIXED_ON_RESUME = ("env", "frame_stack", "model_arch", "dueling", "quantiles", "iqn_taus", "mario_actions")


def _typed(name: str, value, where: str):
    """A value read from a file, checked against its Config field's type (ints pass as floats)."""
    f = FIELDS[name][1]
    kind = f.metadata.get("type", type(f.default))
    if f.default is None and value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise ConfigError(f"{where}: {name} = {value!r} should be {kind.__name__} (like the default {f.default!r})")


def read_config_file(path: str | Path) -> dict:
    """Config fields from a TOML or JSON file; a run's config.json gives the settings it ran with."""
    import difflib
    import tomllib

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file; give a .toml or .json file of config fields")
    try:
        if path.suffix == ".toml":
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        elif path.suffix == ".json":
            data = json.loads(path.read_text())
        else:
            raise ConfigError(f"--config {path}: give a .toml or .json file")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"--config {path} does not parse ({e}); fix the file") from None
    names = list(FIELDS)
    if isinstance(data, dict) and isinstance(data.get("config"), dict):  # a run record, maybe of another version
        kept = {k: v for k, v in flatten(data["config"]).items() if k not in RUN_CONTROL and k in names}
        return {k: _typed(k, v, f"--config {path}") for k, v in kept.items()}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a table of config fields")
    data = flatten(data)
    for key in data:
        if key in RUN_CONTROL:
            raise ConfigError(f"--config {path}: {key} says where a run writes, not how it trains; give "
                              f"{flag(key)} on the command line")
        if key not in names:
            near = difflib.get_close_matches(key, names, n=1)
            raise ConfigError(f"--config {path}: unknown field {key!r}" + (f"; did you mean {near[0]!r}?" if near else
                              "; python config_optimized.py lists the fields"))
    return {k: _typed(k, v, f"--config {path}") for k, v in data.items()}


def read_run_config(run_dir: Path) -> tuple[dict, list[str]]:
    """The config a run trained with (its config.json, completed by ``as_trained`` where the
    record predates a field), without the run-control fields, and notes on what was completed or
    dropped; empty for runs made before run records existed."""
    path = run_dir / RECORD_NAME
    if not path.is_file():
        return {}, []
    try:
        record = json.loads(path.read_text())
        saved = record["config"]
        if not isinstance(saved, dict):
            raise TypeError("'config' is not a table")
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise ConfigError(f"--resume: {path} is not a run record ({type(e).__name__}: {e}); restore it, or delete "
                          "it and resume with every setting on the command line") from None
    values, notes = saved_settings(saved, record.get("git_commit"), str(path))
    return values, [f"Resumed run: {n}" for n in notes]


def saved_settings(saved: dict, commit: str | None, origin: str) -> tuple[dict, list[str]]:
    """The settings a run trained with, from the config it saved (its run record's or a
    checkpoint's; ``commit``: the git commit the record names): old field names read as today's,
    the run-control fields left out, a field this version no longer has (or whose value no longer
    fits) dropped, and the fields added since filled with what the run trained with
    (``as_trained``). Returns the settings and a note on each change. The one reader of a saved
    config: ``--resume``, ``--eval`` and ``--value-check`` all read it here."""
    names = set(FIELDS)
    values, notes = {}, []
    flat = flatten(saved)
    for k, v in flat.items():
        if k in RUN_CONTROL:
            continue
        try:
            if k not in names:
                raise ConfigError(f"no field {k!r} in this version")
            values[k] = _typed(k, v, origin)
        except ConfigError as e:
            notes.append(f"saved setting {k} = {v!r} dropped ({e})")
    fills, why = as_trained({k: v for k, v in flat.items() if k in names}, commit, values.get("env", Config.env))
    values.update(fills)
    return values, notes + why


def recorded_commit(folder: Path) -> str | None:
    """The commit the run record in ``folder`` (config.json) names, if there is one."""
    try:
        return json.loads((Path(folder) / RECORD_NAME).read_text()).get("git_commit")
    except (OSError, ValueError, AttributeError):
        return None


def trained_config(state: dict, folder: Path) -> Config:
    """The config a checkpoint's weights were trained with (``state``: the loaded checkpoint,
    ``folder``: where it lies, whose config.json names the commit), for playing or checking them
    as the run trained them."""
    values, _ = saved_settings(state["config"], recorded_commit(folder), f"checkpoint in {folder}")
    return Config.of(**values)


@dataclass
class Resolved:
    """A config with its provenance: which layer set each field, and what a resume changed."""
    cfg: Config
    hw: Hardware
    profile: str
    sources: dict[str, str]
    resumed_from: Path | None = None
    changes: list[str] | None = field(default_factory=list)  # None: the resumed run kept no config.json
    notes: list[str] = field(default_factory=list)           # for the run log: what was dropped or ignored


def resolve_config(args: argparse.Namespace | dict | None = None, hw: Hardware | None = None,
                   root: Path = RUNS_ROOT) -> Resolved:
    """Layers, each overriding the one before: defaults, the game family's preset, the hardware
    profile, the resumed run's config.json, --config FILE, then the flags given."""
    hw = hw or detect_hardware()
    raw = vars(args) if isinstance(args, argparse.Namespace) else dict(args or {})
    names = set(FIELDS)
    given = {k: v for k, v in raw.items() if v is not None and k in names}
    from_file = read_config_file(raw["config"]) if raw.get("config") else {}
    saved, resumed_from, notes = {}, None, []
    if given.get("resume"):
        resumed_from = resume_target(given["resume"], given.get("run_dir", ""), root)
        saved, notes = read_run_config(resumed_from)
    env = given.get("env") or from_file.get("env") or saved.get("env") or Config.env
    profile = given.get("profile") or from_file.get("profile") or "auto"
    if profile not in ("auto", "autotuned", *PROFILES):
        raise ConfigError(f"--profile {profile!r}: unknown profile; choose auto, autotuned or one of {sorted(PROFILES)}")
    family = family_of(env)
    name = ("autotuned" if autotuned_path(family).exists() else pick_profile(hw)) if profile == "auto" else profile
    layers = [(f"preset {family}", checked_preset(family)), (f"profile {name}", scale_profile(name, hw, env))]
    if saved:
        layers.append((f"resumed {resumed_from / RECORD_NAME}", {k: v for k, v in saved.items() if k != "profile"}))
        if "profile" in given:
            notes.append(f"--profile {given['profile']} sets nothing on a resumed run (its saved settings win); "
                         "give the fields to change instead")
        name = saved.get("profile", name) if "profile" not in given else name
    layers += [(f"--config {raw.get('config')}", from_file), ("command line", given)]
    values, sources = {}, dict.fromkeys(names, "default")
    for label, over in layers:
        for k, v in over.items():
            values[k] = v
            sources[k] = label
    cfg = Config.of(**{**values, "profile": name})
    # None: the resumed run has no config.json (made before run records), so nothing to compare
    changes = [] if saved or resumed_from is None else None
    for k, old in saved.items():
        new = cfg.get(k)
        if k == "profile" or new == old:
            continue
        if k in FIXED_ON_RESUME:
            raise ConfigError(f"{flag(k)} {new!r}: the run in {resumed_from} was trained with {flag(k)} {old!r}, which "
                              f"a resumed run cannot change; drop {flag(k)}, or start a new run without --resume")
        changes.append(f"{flag(k)} {old!r} -> {new!r} ({sources[k]})")
    return Resolved(cfg, hw, name, sources, resumed_from, changes, notes)


def checked_preset(family: str) -> dict:
    """A family preset's values, each a Config field of its type (a typo names the file)."""
    from presets import preset_path

    where = f"preset {preset_path(family)}"
    over = load_preset(family)
    for key in over:
        if key not in FIELDS or key in RUN_CONTROL:
            raise ConfigError(f"{where}: {key!r} is not a setting a preset may set; fix the file")
    return {k: _typed(k, v, where) for k, v in over.items()}


def show(argv: list[str] | None = None) -> int:
    """``python config_optimized.py``: the hardware, the profile and each value with its layer."""
    parser = Parser(description="Show the detected hardware, the chosen profile and the resolved "
                                                 "config, with the layer that set each value.")
    add_config_arguments(parser)
    args = parser.parse_args(argv)
    try:
        res = resolve_config(args)
        cfg, hw, name = res.cfg, res.hw, res.profile
        warnings = validate(cfg, hw)
    except UserError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    print(f"Hardware: {hw.describe()}")
    print(f"Device:   {resolve_device(cfg.device, hw)}")
    print(f"Preset:   {family_of(cfg.env)} ({preset_path_of(cfg.env)})")
    print(f"Profile:  {name}" + (f" (from {autotuned_path(family_of(cfg.env))})" if name == "autotuned" else ""))
    if res.sources.get("num_collectors", "").startswith("profile") and (why := layout_reason(
            cfg.collectors.num_collectors, cfg.collectors.envs_per_collector, hw, name)):
        print(f"Collectors: {why}")
    if res.resumed_from:
        print(f"Resumes:  {res.resumed_from}" + "".join(f"\n  changed: {c}" for c in res.changes or []))
    for w in warnings:
        print(f"Warning:  {w}")
    print("Config (value, and the layer that set it):")
    width = max(len(name) for name in FIELDS)
    for name, (part, _) in FIELDS.items():
        print(f"  {name:<{width}} = {cfg.get(name)!r:<24} {res.sources[name]}")
    per = FRAME_BYTES + REPLAY_META_BYTES
    print(f"Replay:   {cfg.replay.buffer_size:,} transitions x {per:,} B = {cfg.replay.buffer_size * per / 2**30:.2f} GiB")
    return 0


def preset_path_of(env: str) -> Path:
    from presets import preset_path

    return preset_path(family_of(env))
