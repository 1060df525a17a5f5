"""The command line: one option per field of ``config_optimized.Config`` (``add_config_arguments``)
and the training command's parser (``build_parser``, ``parse_args``) with its evaluation, plot and
Hub modes. ``mario_rl_optimized.py`` parses with it and dispatches; the benchmarks parse the
training options they pass on with it too."""
from __future__ import annotations

import argparse
import difflib
import re

from config_optimized import FIELDS, flag

from .migrate import RENAMED_FIELDS

# What other DQN programs (CleanRL, SB3) call an option of ours: a user who types theirs is
# pointed at ours, where spelling alone would point elsewhere (--learning-rate reads closest to
# --learning-starts)
OTHER_NAMES = {"--learning-rate": "--lr", "--total-timesteps": "--total-steps", "--env-id": "--env",
               "--target-network-frequency": "--target-update-interval", "--capture-video": "--video"}


class Parser(argparse.ArgumentParser):
    """A command line that went wrong is one line, exit code 2: the problem, and a hint (the
    closest option to a misspelled one, an example of a value), not argparse's usage block of
    every option above it (76 lines for the training command, the error last)."""

    def error(self, message: str):
        self.exit(2, f"error: {message}{self.hint(message)}\n")

    def options(self) -> list[str]:
        return [s for action in self._actions for s in action.option_strings]

    def closest(self, word: str) -> str | None:
        """The option a misspelled ``word`` most likely meant, or None."""
        name = word.split("=", 1)[0]
        options = self.options()
        for guess in (name.replace("_", "-"), OTHER_NAMES.get(name.replace("_", "-"))):
            if guess in options:
                return guess
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
        return close[0] if close else None

    def hint(self, message: str) -> str:
        if message.startswith("unrecognized arguments: "):
            words = message.removeprefix("unrecognized arguments: ").split()
            flags = [w for w in words if w.startswith("-")]
            if not flags:
                return " (each option starts with --; --help lists them)"
            guesses = [f"{w.split('=', 1)[0]}: did you mean {g}?" for w in flags if (g := self.closest(w))]
            return f"; {'; '.join(guesses)}" if guesses else " (--help lists every option)"
        return "" if "e.g." in message else " (--help lists every option)"


def _number(kind: type, example):
    """``kind`` (int or float) as an option's type, whose refusal gives an example value: argparse
    says only "invalid float value: 'abc'"."""
    what = "a whole number" if kind is int else "a number"

    def parse(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}; e.g. {example}") from None
    parse.__name__ = kind.__name__
    return parse


def _parse_bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per Config field, and --config FILE; unset options stay None so the layers
    below the command line fill them."""
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="a TOML or JSON file of Config fields (a run's config.json works too), applied over "
                             "the defaults, the game's preset and the hardware profile, under the flags")
    old_names = {new: old for old, new in RENAMED_FIELDS.items()}
    for name, (_, f) in FIELDS.items():
        # a renamed field's old flag stays as an alias (dest is the first long option: the new name)
        flags = [flag(name)] + ([flag(old_names[name])] if name in old_names else [])
        default = f.default
        kind = f.metadata.get("type", type(default))
        choices = f.metadata.get("choices")  # shown as the metavar; validation refuses the rest with the fix
        if kind in (int, float):
            kind = _number(kind, f"{flag(name)} {default if default is not None else kind(1)}")
        # argparse fills its help strings with % (%(default)s): a literal % is written %%
        help_text = f"{f.metadata['help']} (default: {default!r}, or the preset's or profile's)".replace("%", "%%")
        if "nargs" in f.metadata:
            parser.add_argument(*flags, type=kind, nargs=f.metadata["nargs"], const=f.metadata["const"], default=None,
                                metavar=f.metadata.get("metavar"), help=help_text)
        elif kind is bool:
            parser.add_argument(*flags, type=_parse_bool, nargs="?", const=True, default=None, metavar="BOOL", help=help_text)
        else:
            parser.add_argument(*flags, type=kind, default=None, metavar=f"{{{','.join(choices)}}}" if choices else None,
                                help=help_text)


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where it has one of its own. The Config options default to None
    (the layers below the command line fill them) and name their default in their help, so
    argparse's "(default: None)" after it would contradict that."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``mario_rl_optimized.py`` (and ``fast-dqn train``)."""
    parser = Parser(
        description="Fast DQN for Super Mario Bros and Atari: collector processes, shared-memory rings, "
                    "a uint8 replay and a mixed-precision BatchNorm DQN learner.",
        formatter_class=HelpFormatter, add_help=False)
    modes = parser.add_argument_group("evaluation and plots (instead of training)")
    modes.add_argument("-h", "--help", action="store_true",
                       help="this list: every option on one line, with its value here (--help --env ID: that game's)")
    modes.add_argument("--eval", metavar="RUN", help="play greedy games with a run's kept weights (its folder: "
                       "best_eval.pt, else best.pt, else checkpoint.pt, and it says which), a .pt file, or hf://user/repo")
    modes.add_argument("--episodes", type=_number(int, "--episodes 10"), default=10, help="episodes to play with --eval (--eval-epsilon sets "
                                                                "its random-action probability)")
    modes.add_argument("--every-start", action="store_true",
                       help="with --eval (Mario without sticky actions): play greedy once from each no-op start "
                            "(0 to the run's noop_max) instead of --episodes drawn games: greedy Mario has no "
                            "other games, so the flags are the exact share")
    modes.add_argument("--video", metavar="PATH.mp4", help="with --eval: film the first game (H.264, plays in a browser)")
    modes.add_argument("--video-episodes", type=_number(int, "--video-episodes 3"), metavar="N",
                       help="with --video: film the first N games, one after another (default 1)")
    modes.add_argument("--plot", metavar="RUN_DIR", help="draw RUN_DIR/learning_curve.png from its metrics.jsonl")
    modes.add_argument("--push-to-hub", metavar="REPO", help="share the run in --run-dir (default: the latest) on the "
                       "Hugging Face Hub as user/name: model card, weights, config.json, eval.json, curve and video; "
                       "it evaluates the run's kept weights first (--episodes, filmed) unless its eval.json is of "
                       "those very weights (their SHA-256); needs pip install 'fast-dqn[hub]'")
    modes.add_argument("--private", action="store_true", help="with --push-to-hub: create the repository private")
    add_config_arguments(parser.add_argument_group("training (every field of config_optimized.Config)"))
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    """The command line (``args.help``: --help was given; the entry script prints
    ``pipeline.settings.help``'s list then)."""
    return build_parser().parse_args(argv)
