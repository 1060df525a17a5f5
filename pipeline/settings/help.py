"""``--help``: every option on one line, with the value a run would train with on this machine.

argparse's help gave each option's default as the Config default, which is not what a game
trains with (Mario's ``--mario-actions`` read 'simple' while Mario trains with right_run: the
preset sets it), and ran to 487 lines. Here each option is one line: the flag, the value the
layers resolve it to (defaults, the game's preset, the hardware profile, --config, the flags
given) with the layer that set it where that is not the default, and its description, cut to
the terminal's width in a terminal (whole when piped). Without ``--env`` the values are those of
the default game (Mario 1-1), with an ALE game's beside them where the Atari preset differs;
``--help --env ID`` resolves one game's.
"""
from __future__ import annotations

import argparse
import shutil
import sys

from config_optimized import FIELDS

from .cli import flag

ATARI_EXAMPLE = "ALE/Pong-v5"
PARTS_SAID = {"": "the game, the run's length, the machine", "env_options": "how the game is played",
              "collectors": "collectors", "replay": "replay", "learner": "learner",
              "run": "stopping, evaluation and the run's files"}


def shown(value) -> str:
    """A value as it is typed on the command line."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else "''"
    return repr(value)


def layer(source: str) -> str:
    """A layer's name as the help gives it, short: "" for the default, "Mario" or "Atari" for a
    preset, "profile", "given" (a flag), "config" (--config FILE), "resumed"."""
    if source == "default":
        return ""
    if source.startswith("preset "):
        return source.removeprefix("preset ").capitalize()
    return {"command line": "given"}.get(source, source.split(" ")[0].lstrip("-"))


# Fields whose value an ALE game does not read, or which name the game: no "Atari" value beside them.
NOT_ATARI = ("env", "mario_actions")


def help_text(parser: argparse.ArgumentParser, args: argparse.Namespace, width: int | None = None) -> str:
    """The help of the training command for the options in ``args`` (``--env`` and any other
    flags given beside --help count as they would for a run). ``width``: cut each line to it (None:
    whole lines). Raises ConfigError where the options given do not resolve (an unknown --env)."""
    from config_optimized import ConfigError
    from wrappers.registry import UnknownEnvError, check_env_id

    from .layers import resolve_config

    res = resolve_config(args)
    try:
        check_env_id(res.cfg.env)
    except UnknownEnvError as e:
        raise ConfigError(str(e)) from None
    atari = None if args.env else resolve_config({**vars(args), "env": ATARI_EXAMPLE})
    rows: list[tuple[str, str, str]] = []  # (flag, value, description), or a heading alone

    def values(name: str) -> str:
        said = shown(res.cfg.get(name))
        if where := layer(res.sources[name]):
            said += f" ({where})"
        if atari is not None and name not in NOT_ATARI and atari.cfg.get(name) != res.cfg.get(name):
            said += f"; Atari {shown(atari.cfg.get(name))}"
        return said

    rows.append(("", "", "evaluation, plots and sharing (instead of training)"))
    for action in parser._actions:
        names = [s for s in action.option_strings if s.startswith("--")]
        if not names or names[0].removeprefix("--").replace("-", "_") in FIELDS or names[0] == "--config":
            continue
        default = "" if action.default in (None, False) or names[0] == "--help" else shown(action.default)
        rows.append((names[0], default, action.help or ""))
    part = None
    for name, (field_part, f) in FIELDS.items():
        if field_part != part:
            part = field_part
            rows.append(("", "", f"training: {PARTS_SAID.get(part, part)}"))
            if part == "":
                rows.append(("--config", "", "a TOML or JSON file of these fields (a run's config.json works too), "
                                             "over the preset and the profile, under the flags"))
        rows.append((flag(name), values(name), f.metadata["help"]))

    game = res.cfg.env
    head = [f"usage: {parser.prog} [--env ID] [--OPTION VALUE ...]   (--eval RUN, --plot RUN, --push-to-hub REPO: "
            "commands of their own)",
            "",
            f"Each option on one line: its value for {game} on this machine ({res.hw.describe()}), with the "
            f"layer that set it where it is not the default (Mario, Atari: the game's preset; profile: the hardware "
            f"profile, {res.profile} here; given: a flag)"
            + (f", and an ALE game's ({ATARI_EXAMPLE}) where the Atari preset differs" if atari is not None else "")
            + "; then what it does.",
            "--help --env ID gives one game's values; python config_optimized.py [options] the same as a table; "
            "docs/configuration.md explains the layers."]
    if width:
        head.append("Descriptions are cut to the terminal's width: --help | cat prints them whole.")
    flag_w = max(len(r[0]) for r in rows)
    value_w = min(max(len(r[1]) for r in rows), 30)
    lines = head
    for opt, value, text in rows:
        if not opt:
            lines += ["", f"{text}:"]
            continue
        line = f"  {opt:<{flag_w}}  {value:<{value_w}}  {text}"
        if width and len(line) > width:
            line = line[:max(width - 1, 0)] + "…"
        lines.append(line)
    return "\n".join(lines)


def print_help(args: argparse.Namespace) -> None:
    """--help as the training command prints it: cut to the terminal's width in a terminal."""
    from .cli import build_parser

    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    print(help_text(build_parser(), args, width))

