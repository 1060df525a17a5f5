"""Game families: what a kind of game adds to the data path beyond frames, rewards and endings.

The transport (rings, Ray batches), the rollout, the replay and the run's records are the same
for every game; what one family of games reports besides (Mario's x position and flag), a rule
it shapes learning episodes with (Mario's stall rule) and the statistics it adds to a game's,
an epoch's and a run's records come from its ``GameFamily``, chosen once from the env id where
the envs are built (``BatchedEnv.family``). A new family is a subclass here and a line in
``game_family``: the data path and the records do not change.

Where each hook runs:

- ``read_info``: ``BatchedEnv.step``, once per step of a batch: the family's per-env arrays
  (``BatchStep.extras``) from the vector env's info (only ``info_keys`` of it: ``KeepInfo``);
- ``tracker``: the rollout's per-env state of the family (``GameTracker``), stepped once per
  batch step; its ``step`` may end learning episodes (the rollout counts them, ``cuts``) and
  change the learned reward, and its ``record`` adds the family's ``fields`` to every record;
- ``fields``: the record's extra fields after ``pipeline/transport/transition.py``'s, laid out in every
  ring (``Ring.create(extras=...)``) and carried by Ray batches; the replay stores none of them;
- ``game_stats``: a game-ending record's statistics, as the keys of its ``episodes.jsonl`` row;
- the epoch's line, its ``metrics.jsonl`` row and TensorBoard tags, the learning curve's
  panels, the model card's note: ``epoch_figure``, ``epoch_notes``, ``epoch_row``, ``tb_tags``,
  ``curves``, ``card_note``.

The records read files without knowing which family wrote them (a resumed or plotted run):
``GAME_KEYS``, ``SCORE_METRICS`` and ``CURVES`` gather every family's, and a key a run's rows
lack is left out.
"""
from __future__ import annotations

import math
import statistics
from types import MappingProxyType

import numpy as np

from .registry import is_mario, is_module_env_id

EMPTY = MappingProxyType({})  # a family that adds nothing: no extras, no statistics (shared, read-only)


def _fmt(v, f: str) -> str:
    return "n/a" if v is None else format(v, f)


class GameTracker:
    """A family's state over a batch of envs, kept by the rollout and stepped once per batch step.
    This one adds nothing (a game of frames, rewards and endings only)."""

    def __init__(self, family: GameFamily):
        self.family = family
        self.cuts = 0  # learning episodes its rule ended (a collector's block counts them for the epoch line)

    def step(self, st, live: np.ndarray, terminated: np.ndarray, learned: np.ndarray):
        """After the env step ``st`` (a ``BatchStep``), before its records are made: the family's
        per-env state follows the live envs (``live``: not a reset; ``terminated``: the env's
        own learning-episode ends). Returns (the envs whose learning episode the family's rule
        ends here, or None; those of them whose game it ends too, which the env is to restart,
        or None; the learned reward, in the game's units)."""
        return None, None, learned

    def record(self, fields: dict) -> None:
        """Adds the family's ``fields`` to this step's records (copies: the caller keeps them)."""

    def restart(self, restart: np.ndarray, reset: np.ndarray) -> None:
        """Envs whose learning episode starts anew (``restart``) and whose game does (``reset``)."""


class GameFamily:
    """A family that adds nothing to the data path: the ALE's games (their lives and endings are
    the vector env's own). Subclasses add what their games report."""

    info_keys: tuple[str, ...] = ()  # what a batch keeps of a Python env's info (each with its "_key" mask)
    fields: tuple[tuple[str, type], ...] = ()  # the record's extra fields: (name, dtype)
    game_keys: tuple[str, ...] = ()  # per-game statistics of an episodes.jsonl row (game_stats' keys)
    score_metrics: tuple[str, ...] = ()  # statistics the run's score may be taken in, besides the return
    old_score_metric = "return"  # what checkpoints saved before ``best_metric`` measured the score in
    tb_tags: dict[str, str] = EMPTY  # its metrics.jsonl keys -> TensorBoard tags
    curves: tuple[tuple[str, str], ...] = ()  # learning-curve panels: (metrics.jsonl key, y label)
    packages: tuple[str, ...] = ()  # the Python packages its envs come from (the run record's versions)
    # The metrics.jsonl key of the learning episodes a family's rule ended in an epoch (Mario's
    # stall rule named it): every family's rows carry it, 0 where there is no rule, as they have
    # since the rule came, so readers of metrics.jsonl find it in every run.
    cuts_key = "stalls"

    def __init__(self, name: str, packages: tuple[str, ...] = ()):
        self.name = name
        if packages:
            self.packages = packages

    def __repr__(self) -> str:
        return f"<game family {self.name}>"

    # ------------------------------------------------------------------ the data path
    def info_reader(self, num_envs: int):
        """``read(info) -> extras``: the family's per-env arrays of one step of ``num_envs`` envs."""
        return lambda info: EMPTY

    def tracker(self, num_envs: int, opts=None) -> GameTracker:
        """The rollout's state for ``num_envs`` envs; ``opts`` (``EnvOptions``): the rules a run
        trains with (none: play without them, as evaluations do)."""
        return GameTracker(self)

    def game_stats(self, fields: dict, i: int) -> dict:
        """The statistics of the game whose record ``i`` of ``fields`` ends it, as its
        ``episodes.jsonl`` row names them; empty where it reported none."""
        return EMPTY

    def positions(self, fields: dict) -> np.ndarray | None:
        """Each record's position in the level where the family reports one (the evaluation's
        stand-still rule reads it), else None."""
        return None

    # ------------------------------------------------------------------ the records
    def rule_on(self, opts) -> bool:
        """Whether ``opts`` turn on a rule of the family's that ends learning episodes."""
        return False

    def epoch_figure(self, means: dict) -> str:
        """The game figure of the epoch line, from the last games' means (``ScoreTracker.window_means``)."""
        return f"Length: {_fmt(means['length'], '.0f')}"

    def epoch_notes(self, cuts: int, rule_on: bool, eval_summary: str | None) -> str:
        """What the epoch line adds at its end: the learning episodes the family's rule ended in
        the epoch (``cuts``, where ``rule_on``), the last evaluation's summary."""
        return ""

    def epoch_row(self, means: dict) -> dict:
        """What the family adds to an epoch's metrics.jsonl row."""
        return {}

    def card_note(self, evaluation: dict) -> str:
        """A sentence the Hub's model card adds after the mean return (``eval.json``'s figures)."""
        return ""


# Further than Mario moves in one agent step (at most ~3 pixels a frame, so ~12 at frame skip 4):
# an x that jumps by more did not come from running but from a change of place (a pipe, a vine, a
# respawn), and the stand-still measure starts over where Mario comes out instead of holding him
# to the furthest x of the place he left.
AREA_CHANGE_X = 64.0


def stand_still_step(x, last_x, furthest, still):
    """One agent step of the stand-still measure, the stall rule's and the evaluations' alike:
    (the furthest x, the agent steps since it was last passed) once Mario's x went from ``last_x``
    to ``x``. Measured from the furthest x, so pacing back and forth below it counts as standing;
    an x that jumps by more than ``AREA_CHANGE_X`` starts it over where Mario comes out; a NaN x
    (no x this step) leaves both as they were. Arrays (one entry per env) or scalars."""
    furthest = np.where(np.abs(x - last_x) > AREA_CHANGE_X, -np.inf, furthest)  # NaN compares False
    ahead = x > furthest
    return np.where(ahead, x, furthest), np.where(ahead, 0, still + ~np.isnan(x))


class PositionTracker(GameTracker):
    """The x position each env's game reached and whether it got the flag, and the stall rules:
    once an env's x has not passed its learning episode's furthest for ``stall_steps`` agent
    steps, that learning episode ends (TERM, the game goes on), as a lost life does with
    EpisodicLife; once it has not passed its game's furthest for ``stall_end`` agent steps, the
    game ends too (TERM, and the env is told to start a new one); ``stall_penalty`` (the game's
    units) is taken from the learned reward of either stall's step (``stand_still_step``: from the
    furthest x, and afresh out of a pipe; an env that reports no x never stalls); ``flag_bonus``
    (the game's units) is added to the learned reward of the step that reaches the flag, and
    ``death_penalty`` taken from that of the step a game ends without it (a stall's end is the
    rule's, not the game's own)."""

    def __init__(self, family: GameFamily, num_envs: int, stall_steps: int = 0, stall_penalty: float = 0.0,
                 flag_bonus: float = 0.0, death_penalty: float = 0.0, stall_end: int = 0):
        super().__init__(family)
        M = num_envs
        self.stall_steps, self.stall_penalty, self.flag_bonus = stall_steps, stall_penalty, flag_bonus
        self.death_penalty, self.stall_end = death_penalty, stall_end
        self.last_x = np.full(M, np.nan, np.float32)
        self.got_flag = np.zeros(M, bool)
        self.furthest = np.full(M, -np.inf, np.float32)  # furthest x of each env's learning episode
        self.still = np.zeros(M, np.int32)  # agent steps since it last grew
        # the same of each env's game, which a stall's cut of the learning episode does not start over
        self.game_furthest = np.full(M, -np.inf, np.float32)
        self.game_still = np.zeros(M, np.int32)

    def step(self, st, live, terminated, learned):
        x = st.extras["x_pos"]
        has_x = live & ~np.isnan(x)
        seen = np.where(live, x, np.nan)
        stalled = ended = None
        if self.stall_steps:
            self.furthest, self.still = stand_still_step(seen, self.last_x, self.furthest, self.still)
            stalled = live & ~terminated & (self.still >= self.stall_steps)
        if self.stall_end:
            self.game_furthest, self.game_still = stand_still_step(seen, self.last_x, self.game_furthest,
                                                                   self.game_still)
            ended = live & ~terminated & (self.game_still >= self.stall_end)
            stalled = ended if stalled is None else stalled | ended
        if stalled is not None:
            self.cuts += int(stalled.sum())
            if self.stall_penalty:  # learned only, as the stall's TERM is; the log keeps the game's return
                learned = learned - self.stall_penalty * stalled
        self.last_x[has_x] = x[has_x]
        reached = live & st.extras["flag_get"] & ~self.got_flag
        if self.flag_bonus:  # learned only, as the stall penalty is; the log keeps the game's return
            learned = learned + self.flag_bonus * reached
        self.got_flag |= reached
        if self.death_penalty:  # the game's own end (a stall is not one), without the flag
            learned = learned - self.death_penalty * (terminated & ~self.got_flag)
        return stalled, ended, learned

    def record(self, fields):
        fields["x_pos"] = self.last_x.copy()
        fields["flag_get"] = self.got_flag.copy()

    def restart(self, restart, reset):
        self.furthest[restart], self.still[restart] = -np.inf, 0
        self.game_furthest[reset], self.game_still[reset] = -np.inf, 0
        self.last_x[reset], self.got_flag[reset] = np.nan, False


class PositionFamily(GameFamily):
    """Games whose info reports an x position and a flag as gym-super-mario-bros' does
    (``x_pos``, ``flag_get``): Mario, and the ``module:EnvId`` pixel envs that report them (the
    test suite's FlagCatch and WallCatch). Each game then records the distance it reached and
    whether it got the flag; a pixel env that reports neither records neither."""

    info_keys = ("x_pos", "flag_get")
    # x_pos: the game's last x (NaN before it reports one); flag_get: it got the flag
    fields = (("x_pos", np.float32), ("flag_get", np.bool_))
    game_keys = ("distance", "flag")

    def info_reader(self, num_envs):
        nan, false = np.full(num_envs, np.nan, np.float32), np.zeros(num_envs, bool)

        def read(info):  # gymnasium's vector info: each key with its "_key" mask of the envs that gave one
            return {"x_pos": np.where(info.get("_x_pos", false), info.get("x_pos", nan), np.nan).astype(np.float32),
                    "flag_get": np.asarray(info.get("flag_get", false), bool)}
        return read

    def tracker(self, num_envs, opts=None):
        if opts is None:
            return PositionTracker(self, num_envs)
        return PositionTracker(self, num_envs, opts.stall_steps, opts.stall_penalty, opts.flag_bonus,
                               opts.death_penalty, opts.stall_end)

    def game_stats(self, fields, i):
        x = float(fields["x_pos"][i])
        return EMPTY if math.isnan(x) else {"distance": x, "flag": bool(fields["flag_get"][i])}

    def positions(self, fields):
        return fields["x_pos"]

    def card_note(self, evaluation):
        if not evaluation.get("distances"):
            return ""
        flags = evaluation.get("flags", [])
        return (f" Mean distance {statistics.fmean(evaluation['distances']):.0f}; flag reached "
                f"{sum(flags)}/{len(flags)}.")


class MarioFamily(PositionFamily):
    """Super Mario Bros: the x position and the flag, the stall rule (``--stall-steps``), the
    distance as a score (``--score-metric distance``), and the epoch's distance and flag rate."""

    score_metrics = ("distance",)
    old_score_metric = "distance"  # checkpoints before best_metric was saved measured Mario in distance
    tb_tags = MappingProxyType({"distance_mean": "charts/distance", "flag_rate": "charts/flag_rate"})
    curves = (("distance_mean", "mean x distance, last 20 episodes"),)

    def rule_on(self, opts):
        return bool(opts.stall_steps or opts.stall_end)

    def epoch_figure(self, means):
        return f"Distance: {_fmt(means['distance'], '.1f')}"

    def epoch_notes(self, cuts, rule_on, eval_summary):
        return ((f", Stalls: {cuts:,}" if rule_on else "")
                + (f", Eval flags: {eval_summary}" if eval_summary else ""))

    def epoch_row(self, means):
        return {"distance_mean": means["distance"], "flag_rate": means["flag"]}


PLAIN = GameFamily("plain")  # an env that reports nothing besides (a test's or a benchmark's stand-in)
ATARI = GameFamily("atari", ("ale-py",))
PIXEL = PositionFamily("pixel")  # a module:EnvId env: gymnasium's, whatever its info reports
MARIO = MarioFamily("mario", ("nes-py", "gym-super-mario-bros"))
FAMILIES = (ATARI, PIXEL, MARIO)


def game_family(env_id: str) -> GameFamily:
    """The family of an env id (any string: an id this checkout does not know is the ALE's)."""
    if is_mario(env_id):
        return MARIO
    return PIXEL if is_module_env_id(env_id) else ATARI


def _every(attr: str) -> tuple:
    out: list = []
    for family in FAMILIES:
        out += [v for v in getattr(family, attr) if v not in out]
    return tuple(out)


# What readers of any run's files look for: every family's, in the order the families add them.
GAME_KEYS = _every("game_keys")            # an episodes.jsonl row's per-game statistics
SCORE_METRICS = _every("score_metrics")    # what a score may be taken in, besides the return
CURVES = _every("curves")                  # learning-curve panels, drawn where a run's rows have them
# The run record's package versions: gymnasium, then each family's own.
ENV_PACKAGES = ("gymnasium", *_every("packages"))
