"""The runs of a suite: each game and seed one run of the real pipeline (``mario_rl_optimized.py``
in a child process, as a user runs it) in ``SUITE_DIR/seedN/GAME``, brought to its length
(started, resumed from its last checkpoint, or, finished, only read), ``at_once`` at a time.

A suite's folder trains one recipe: the settings that decide what is learned per agent step are
recorded with its first game (``suite.json``), and a game started later, after a pull that moved
a preset or an edit of a ``--config`` file, is started with the recorded values as flags, so one
report never averages two recipes. The Atari suite (``bench/suite.py``), the Mario suite
(``bench/suite_mario.py``) and the suite halving search (``bench/suite_halving.py``) all train
through here."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from config_optimized import ConfigError
from pipeline.records.file_keys import current_keys

from .time_to_score import PROJECT_DIR, send_all, signals_passed_on

SUITE_FILE = "suite.json"  # the suite's options and recipe, so a rerun with other options is refused, not mixed in
# A finished game's counters, beside its run: the report and a rerun need only this, episodes.jsonl
# and config.json, so a finished suite can be kept (docs/data) without its checkpoints and replays.
GAME_FILE = "suite_game.json"
REPORT_NAMES = ("suite_report.json", "suite_report.md", "suite_report.png")  # what a suite's report writes
# Options the suite sets itself for every game (--seed: give --seeds).
OWN_FLAGS = ("--env", "--total-steps", "--run-dir", "--resume", "--time-limit", "--target-score", "--overwrite")
# Settings that say how fast or where a run trains, or what it writes, not what it learns per
# agent step: a suite continued on another machine may change them. Every other setting is the
# recipe (the seed apart: a suite trains several).
NOT_RECIPE = frozenset({
    "env", "total_steps", "seed", "profile", "device", "amp", "amp_dtype", "compile", "cuda_graphs", "channels_last",
    "learner_threads", "follow_free_cores", "act_bf16", "collector_device", "env_threads", "start_method",
    "ring_capacity", "max_collector_restarts",
    "ray_address", "ray_batch", "ray_compress", "consolidation_batch", "prefetch_batches", "target_score",
    "time_limit", "run_dir", "resume", "overwrite", "checkpoint_interval", "save_replay", "tensorboard", "track",
    "wandb_project", "wandb_entity", "epoch_steps", "consolidation_log_interval"})


def game_name(env_id: str) -> str:
    """ALE/BattleZone-v5 -> BattleZone; tests.catch_env:Catch-v0 -> Catch."""
    return env_id.split(":")[-1].split("/")[-1].split("-v")[0]


def parse_seeds(text: str | None, train_args: list[str]) -> list[int]:
    """``--seeds 1,2,3`` as a list; without it, the ``--seed`` the training options give (1 by default)."""
    given = [a for a in train_args if a.split("=")[0] == "--seed"]
    if text is not None and given:
        raise ConfigError("--seeds names the suite's seeds; drop --seed from the training options")
    if text is None:
        from pipeline.settings.cli import parse_args

        return [parse_args(train_args).seed] if given else [1]  # 0 is a seed: no "or 1" here
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--seeds {text}: give whole numbers separated by commas, e.g. --seeds 1,2,3") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError(f"--seeds {text}: give distinct non-negative seeds, e.g. --seeds 1,2,3")
    return seeds


def without_seed(train_args: list[str]) -> list[str]:
    """The training options less ``--seed N`` (the suite gives each run its own)."""
    out, skip = [], False
    for a in train_args:
        if skip:
            skip = False
        elif a == "--seed":
            skip = True
        elif not a.startswith("--seed="):
            out.append(a)
    return out


def recipe_args(train_args: list[str]) -> list[str]:
    """The training options less the seed and those of ``NOT_RECIPE`` settings (``--learner-threads 1``,
    ``--compile true``): what names a suite's folder and must match to continue it, so a suite is
    resumed beside other work, or on another machine, with other speed settings."""
    from pipeline.settings.cli import flag

    speed = {flag(k) for k in NOT_RECIPE if k != "env"} | {"--seed"}
    out, skip = [], False
    for a in train_args:
        if skip:
            skip = False
        elif a in speed:
            skip = True
        elif a.split("=")[0] not in speed:
            out.append(a)
    return out


def suite_dir_name(suite: str, train_args: list[str]) -> str:
    """The suite's folder under --runs-dir: its name, then its training options that change the
    recipe (``recipe_args``: not the seed, each seed is a folder inside; not the speed settings),
    so the defaults and another recipe never share a folder: suite-atari5, suite-mario_replay-ratio_8."""
    train_args = recipe_args(train_args)
    slug = "_".join(re.sub(r"[^A-Za-z0-9.+-]+", "-", a.lstrip("-")) for a in train_args)
    if len(slug) > 40:  # many options: a digest of them (suite.json in the folder lists them)
        slug = hashlib.sha1("\0".join(train_args).encode()).hexdigest()[:10]
    return f"suite-{suite}" + (f"_{slug}" if slug else "")


def game_dir(suite_dir: Path, seed: int, env: str) -> Path:
    """One seed's run of one game: ``SUITE_DIR/seed2/BattleZone``."""
    return Path(suite_dir) / f"seed{seed}" / game_name(env)


def read_json(path: Path, what: str, fix: str):
    """A JSON file a suite keeps, or one line saying which is damaged and what to do."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path} ({what}) cannot be read ({type(e).__name__}: {e}); {fix}") from None


# ---------------------------------------------------------------------------------- the recipe

def resolved_recipe(env: str, train_args: list[str]) -> dict:
    """The settings that decide what ``--env env`` with ``train_args`` learns per agent step, as
    this checkout resolves them (defaults, preset, profile, config file, flags)."""
    from pipeline.settings.cli import parse_args
    from pipeline.settings.layers import resolve_config

    flat = resolve_config(parse_args(["--env", env, *without_seed(train_args)])).cfg.flat()
    return {k: v for k, v in flat.items() if k not in NOT_RECIPE}


def recorded_recipe(run_dir: Path) -> dict | None:
    """The recipe a game's run started with, from its run record (its first start's settings,
    with the fields added since filled as it trained); None where it kept no record."""
    from pipeline.records.files import RECORD_NAME
    from pipeline.settings.layers import saved_settings

    path = Path(run_dir) / RECORD_NAME
    if not path.is_file():
        return None
    record = read_json(path, "the game's run record", f"delete {path.parent} to train that game again")
    first = (record.get("previous") or [record])[0]
    values, _ = saved_settings(first.get("config", {}), first.get("git_commit"), f"run record {path}")
    return {k: v for k, v in values.items() if k not in NOT_RECIPE}


def as_flag_value(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else repr(v) if isinstance(v, float) else str(v)


def recipe_flags(recorded: dict, current: dict) -> list[str]:
    """The flags that make ``current`` train as ``recorded``: one per setting that differs."""
    from pipeline.settings.cli import flag

    out = []
    for k, v in recorded.items():
        if k in current and current[k] != v and v is not None:
            out += [flag(k), as_flag_value(v)]
    return out


def runs_recipe(suite_dir: Path, runs: list[Path]) -> dict | None:
    """The recipe the games ``runs`` of a suite folder recorded (their run records), for a folder
    whose ``suite.json`` records none (from before suites recorded it); None where none kept a
    record. Every game's must agree: taking the first's would make it the suite's unchecked, and
    the games of another recipe would then count in its figures. Raises ConfigError naming the
    games that differ from the first."""
    found = [(Path(run), rec) for run in runs if (rec := recorded_recipe(run)) is not None]
    if not found:
        return None
    (first, recipe), others = found[0], found[1:]
    apart = [f"{run.relative_to(suite_dir)} trained with {' '.join(diff)}" for run, rec in others
             if (diff := recipe_flags(rec, recipe))]
    if apart:
        raise ConfigError(f"{suite_dir} records no recipe (a suite folder from before suites recorded theirs) and its "
                          f"games trained more than one: {', '.join(apart)}, unlike {first.relative_to(suite_dir)}; "
                          "move the games of the recipe you do not want out of it and run again")
    return recipe


def other_recipe(run_dir: Path, recipe: dict | None) -> list[str]:
    """The flags by which the game ``run_dir`` trained another recipe than ``recipe`` (its run
    record's settings where they differ); [] where it trained that one, or where either is not
    recorded (nothing to compare)."""
    recorded = recorded_recipe(run_dir) if recipe is not None else None
    return recipe_flags(recorded, recipe) if recorded is not None else []


def claim_suite_dir(suite_dir: Path, options: dict, recipe: dict | None = None, first_runs: list[Path] = ()) -> dict:
    """Write the suite's options (and its recipe) into its folder, or refuse a folder that holds
    another suite; returns the recipe its games train. The recipe is the one its first game
    recorded: ``recipe.json``'s where the folder has one, else the one the run records of the games
    already started agree on (``first_runs``: a folder from before suites recorded it; refused
    where they differ, ``runs_recipe``), else ``recipe``, today's."""
    from pipeline.records.record import write_json

    path = Path(suite_dir) / SUITE_FILE
    fix = f"delete {path} if the folder's games are gone, or give another --runs-dir"
    if path.exists():
        saved = read_json(path, "the suite's options", fix)
        if not isinstance(saved, dict):
            raise ConfigError(f"{path} (the suite's options) holds no JSON object; {fix}")
        mine = {k: v for k, v in saved.items() if k != "recipe"}
        if mine != options:
            raise ConfigError(f"{suite_dir} holds a suite run with other options ({mine}); this one has {options}. "
                              "Run it with the same options to continue it, or give another --runs-dir")
        if "recipe" in saved:
            return saved["recipe"]
    found = runs_recipe(Path(suite_dir), list(first_runs))
    if found is not None:
        recipe = found
    Path(suite_dir).mkdir(parents=True, exist_ok=True)
    write_json(path, {**options, "recipe": recipe} if recipe is not None else options)
    return recipe


def pinned_args(env: str, train_args: list[str], recipe: dict | None) -> list[str]:
    """``train_args`` for a game to start, with the flags that hold it to the suite's ``recipe``
    where this checkout resolves another (a preset moved, a --config file edited)."""
    return [*train_args, *recipe_flags(recipe, resolved_recipe(env, train_args))] if recipe else train_args


def say_pinned(tag: str, env: str, train_args: list[str], recipe: dict | None) -> None:
    """One line where games started from now on get flags that hold them to the suite's recipe."""
    extra = recipe_flags(recipe, resolved_recipe(env, train_args)) if recipe else []
    if extra:
        print(f"{tag}: this checkout's settings differ from the recipe the suite's first game trained; games "
              f"started from now on get the suite's: {' '.join(extra)}", flush=True)


# ---------------------------------------------------------------------------------- one game's run

def game_counters(run_dir: Path) -> tuple[dict, bool]:
    """(the counters of a game's run, whether it has a checkpoint to resume from): its last
    checkpoint's, else those its finished game kept (``GAME_FILE``), else none."""
    from pipeline.records import checkpoint as ckpt
    from pipeline.records.files import CHECKPOINT_NAME

    if (run_dir / CHECKPOINT_NAME).is_file():
        try:
            return ckpt.load(run_dir / CHECKPOINT_NAME).get("counters", {}), True
        except ckpt.CheckpointError as e:
            raise ConfigError(f"{e}; delete {run_dir} to train that game again from the start") from None
    if (run_dir / GAME_FILE).is_file():  # a finished game kept without its checkpoint
        kept = read_json(run_dir / GAME_FILE, "a finished game's counters", f"delete {run_dir} to train it again")
        try:
            return current_keys(kept["counters"]), False
        except (KeyError, TypeError, AttributeError):
            raise ConfigError(f"{run_dir / GAME_FILE} holds no counters; delete {run_dir} to train it again") from None
    return {}, False


def stopped_at_flag(run_dir: Path) -> bool:
    """The run stopped itself with a finished agent (``--stop-at-flag``, Mario): a confirmation
    that kept its weights reached the flag in enough greedy games (``finished_play``). Such a run
    is done short of its steps."""
    from pipeline.evaluation.periodic_eval import finished_play, read_evals
    from pipeline.records.files import EVALS_NAME

    if not (run_dir / EVALS_NAME).is_file() or not (recorded_recipe(run_dir) or {}).get("stop_at_flag"):
        return False
    best = float("-inf")
    for row in read_evals(run_dir):  # one timeline: a killed run's rows that a resume played again are not read
        if row.get("phase") != "confirm" or row.get("score", float("-inf")) <= best:
            continue
        best = row["score"]
        if finished_play(row.get("plays") or [{"flags": row.get("flags")}]):
            return True
    return False


def game_state(run_dir: Path, steps: int, minutes: float | None) -> tuple[str, dict]:
    """("new" | "resume" | "done", its counters) of one game's run folder. A folder with run
    files but no checkpoint (killed before its first one) starts over; one stopped by a signal at
    its length with updates still owed resumes to train them (``owed_updates``), and one with an
    evaluation the stop cut short resumes to play it (``owed_evaluation``: else it would judge
    older kept weights)."""
    from pipeline.records.resume import owed_evaluation, owed_updates

    counters, resumable = game_counters(run_dir)
    if minutes and counters.get("wall_s", 0.0) >= minutes * 60:
        return ("resume" if resumable and owed_evaluation(run_dir) else "done"), counters
    if counters.get("agent_steps", 0) >= steps:
        owed = resumable and (owed_updates(run_dir, counters) or owed_evaluation(run_dir))
        return ("resume" if owed else "done"), counters
    if counters and stopped_at_flag(run_dir):
        return "done", counters
    return ("resume", counters) if resumable else ("new", {})


def game_command(env: str, run_dir: Path, state: str, train_args: list[str], steps: int,
                 minutes: float | None, threads: list[str] = ()) -> list[str]:
    """The training command that brings a game to its length: a new run with its options, or a
    resume (its options are in its run record); ``threads`` (learner_threads_beside) on either."""
    limit = ["--time-limit", f"{minutes:g}"] if minutes else []
    if state == "resume":
        return [sys.executable, "mario_rl_optimized.py", "--resume", str(run_dir), "--total-steps", str(steps), *limit,
                *threads]
    from pipeline.records.run_folder import has_run

    fresh = ["--overwrite"] if has_run(run_dir) else []  # files of a start killed before its first checkpoint
    return [sys.executable, "mario_rl_optimized.py", "--env", env, *train_args, "--total-steps", str(steps),
            *limit, "--run-dir", str(run_dir), *fresh, *threads]


def learner_threads_beside(env: str, train_args: list[str], at_once: int) -> list[str]:
    """``--learner-threads`` for a game that trains beside ``at_once - 1`` others and whose options
    set none: its share (at least 1) of the threads its learner would have alone. A learner's
    OpenMP team stalls at every parallel step while another process holds one of its cores: two
    2-thread learners on 2 cores each ran 8-9x slower, where 1-thread learners side by side lose
    little (pipeline/settings/hardware.py, shared_cores_warning)."""
    if at_once <= 1 or any(a.split("=")[0] == "--learner-threads" for a in train_args):
        return []
    from pipeline.settings.cli import parse_args
    from pipeline.settings.hardware import learner_threads
    from pipeline.settings.layers import resolve_config

    res = resolve_config(parse_args(["--env", env, *train_args]))
    alone = learner_threads(res.cfg.learner.learner_threads, res.cfg.collectors.num_collectors, res.hw)
    return ["--learner-threads", str(max(1, alone // at_once))]


@dataclasses.dataclass(frozen=True)
class GameRun:
    """One game's run to bring to its length: the game, its folder, its options, the tag its
    printed lines open with ("[SUITE] ALE/Pong-v5") and the name errors give it."""
    env: str
    run_dir: Path
    train_args: list[str]
    tag: str
    what: str


def train_games(runs: list[GameRun], steps: int, minutes: float | None, at_once: int = 1,
                on_done: Callable[[GameRun, dict], None] | None = None) -> None:
    """Bring each run to ``steps`` agent steps (or ``minutes``), ``at_once`` of them at a time, each
    in its own child process (``mario_rl_optimized.py``, as a user runs it): start it, resume it,
    or, done already, only read it; the next starts as one ends. ``on_done(run, counters)`` is
    called as each run is found done.

    Ctrl-C or SIGTERM reach every running game, which stops cleanly (checkpoint, replay, children
    joined), and then raise SuiteInterrupted. A run that fails or stops short stops the others the
    same way (each keeps a checkpoint to resume from) and raises RuntimeError naming it: a child is
    never left running behind the suite."""
    from pipeline.records.files import LOG_NAME

    queue, running = list(runs), {}
    failed: list[str] = []   # why the first run that failed did
    cut: list[str] = []      # the runs a signal or another's failure stopped short
    with signals_passed_on(running) as got:
        try:
            while running or (queue and not (got or failed)):  # a signal or a failure starts no more runs
                while queue and len(running) < at_once and not (got or failed):
                    run = queue.pop(0)
                    state, counters = game_state(run.run_dir, steps, minutes)
                    if state == "done":
                        if on_done:
                            on_done(run, counters)
                        continue
                    cmd = game_command(run.env, run.run_dir, state, run.train_args, steps, minutes,
                                       learner_threads_beside(run.env, run.train_args, at_once))
                    how = f"resumed at {counters.get('agent_steps', 0):,} agent steps" if state == "resume" else "started"
                    print(f"{run.tag}: {how}: {' '.join(cmd[1:])}", flush=True)
                    run.run_dir.parent.mkdir(parents=True, exist_ok=True)
                    proc = subprocess.Popen(cmd, cwd=PROJECT_DIR)
                    running[proc] = run
                    if got:  # the signal came while it started: it stops too
                        proc.send_signal(signal.SIGINT)
                ended = [proc for proc in running if proc.poll() is not None]
                if not ended:
                    time.sleep(0.2)  # a child's end is polled: no wait on one child may hold up the others
                    continue
                for proc in ended:
                    run = running.pop(proc)
                    state, counters = game_state(run.run_dir, steps, minutes)
                    if state == "done":
                        if on_done:
                            on_done(run, counters)
                    elif got or failed:
                        cut.append(run.what)
                    else:
                        failed.append(f"{run.what} exited with code {proc.returncode}; its log is "
                                      f"{run.run_dir / LOG_NAME}" if proc.returncode != 0 else
                                      f"{run.what} stopped at {counters.get('agent_steps', 0):,} agent steps, before "
                                      f"{steps:,}; its log ({run.run_dir / LOG_NAME}) says why")
                        send_all(running, signal.SIGINT)
        finally:
            if running:  # an error of the suite's own: its children stop cleanly before it goes
                send_all(running, signal.SIGINT)
                for proc in running:
                    proc.wait()
    if got:
        raise SuiteInterrupted(f"{runs[0].tag.split()[0]} stopped by {got[0]} during {', '.join(cut) or 'set-up'} "
                               "(each run saved a checkpoint); run the same command again to continue where it stopped")
    if failed:
        also = f" ({', '.join(cut)} stopped with it, each with a checkpoint)" if cut else ""
        raise RuntimeError(f"{failed[0]}{also}. Run the same command again to continue where it stopped")


def mark_done(run_dir: Path, env: str, counters: dict, at_once: int = 1) -> None:
    """Record a finished game's counters beside its run (``GAME_FILE``), whole or not at all, with
    how many games trained at once (their minutes are each a share of the machine)."""
    from pipeline.records.record import write_json

    path = run_dir / GAME_FILE
    if not path.is_file():
        keep = {k: counters[k] for k in ("agent_steps", "wall_s", "episodes", "samples_trained") if k in counters}
        write_json(path, {"env": env, "counters": keep, "games_at_once": at_once})


class SuiteInterrupted(Exception):
    """Ctrl-C or SIGTERM stopped the suite after its current game's run shut down cleanly."""


def minutes_at(points: list[tuple[int, float]], agent_steps: int) -> float | None:
    """Wall-clock minutes when the run passed ``agent_steps``, interpolated between the (agent steps,
    seconds) points it recorded (each game's end and its last checkpoint); None if it never did."""
    pts = sorted(points)
    for (s0, w0), (s1, w1) in zip(pts, pts[1:]):
        if s0 <= agent_steps <= s1:
            return (w0 + (w1 - w0) * (agent_steps - s0) / max(1, s1 - s0)) / 60
    if pts and pts[-1][0] == agent_steps:
        return pts[-1][1] / 60
    return None


def trained_on(record: dict) -> str | None:
    """The machine, precision and commit of a game's run, from its config.json (the first start's,
    where a resume ran elsewhere)."""
    if not record:
        return None
    first = (record.get("previous") or [record])[0]
    cfg, hw = first.get("config", {}), first.get("hardware", {})
    precision = ("fp16" if hw.get("cuda") else "bf16") if cfg.get("amp") else "fp32"
    commit = str(first.get("git_commit", "?"))
    return (f"{first.get('hardware_summary', '?').split('; RAM')[0]}, {precision}, profile {first.get('profile')}, "
            f"commit {commit[:7]}" + (" (with uncommitted changes)" if "uncommitted" in commit else ""))


def run_record(run_dir: Path) -> dict:
    """A game's config.json, {} where it has none."""
    from pipeline.records.files import RECORD_NAME

    path = Path(run_dir) / RECORD_NAME
    return read_json(path, "the game's run record", f"delete {run_dir} to train it again") if path.is_file() else {}


def recipe_text(recipe: dict | None, env: str) -> str:
    """The recipe as the flags that set it apart from the preset of ``env`` as this checkout
    resolves it with no options ("the preset as it is" where none): what a report prints."""
    if not recipe:
        return "not recorded (a suite folder from before suites recorded their recipe)"
    extra = recipe_flags(recipe, resolved_recipe(env, []))
    return " ".join(extra) if extra else "the preset as it is"


def write_report_files(suite_dir: Path, rep: dict, markdown: str, plot: Callable[[dict, Path], None]) -> dict:
    """A suite's report into its folder (``REPORT_NAMES``): the JSON, the Markdown table and the
    plot, the first two whole or not at all."""
    from pipeline.records.atomic import atomic_write
    from pipeline.records.record import write_json

    js, md, png = (Path(suite_dir) / n for n in REPORT_NAMES)
    write_json(js, rep)
    with atomic_write(md, "w") as f:
        f.write(markdown + "\n")
    plot(rep, png)
    return rep
