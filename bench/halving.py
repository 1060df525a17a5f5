"""``--time-to-score --halving FILE``: choose a recipe by time to score with successive halving
(Jamieson and Talwalkar 2016; Hyperband's inner loop): every recipe trains for the first rung's
minutes, the best 1/eta go on, resumed from their own checkpoint and replay, to eta times the
minutes, and so on, so many recipes compete for the budget of a few full runs.

Each run is the real pipeline (``mario_rl_optimized.py`` in a child process, as a user runs it,
with the training options given to every recipe plus the recipe's own), stopped at the target
score or the rung's minutes; a later rung resumes it with ``--resume DIR --time-limit M`` (the
limit counts the whole run). Runs are ranked at each rung's end: those that reached the target
by their minutes to it, then the rest by their score now (the mean of the last 20 games)."""
from __future__ import annotations

import math
import os
import sys
import time
import tomllib

from config_optimized import ConfigError

from .time_to_score import train_subprocess


EXAMPLE = "one TOML table per recipe, e.g. [qr51] args = [\"--quantiles\", \"51\"]"


def read_recipes(path: str) -> dict[str, list[str]]:
    """A recipes file: one TOML table per recipe with its training options, e.g.
    ``[qr51]`` / ``args = ["--quantiles", "51"]`` (``args = []``: the defaults). Each recipe's
    name names its runs' folder (``halving-STAMP-NAME``, ``suite-halving-.../NAME``), so it must
    be one plain folder name. Every problem is one ConfigError naming it and the fix."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"--halving {path}: no such file; write {EXAMPLE}") from None
    except IsADirectoryError:
        raise ConfigError(f"--halving {path}: is a directory, not a recipes file; give the TOML file in it "
                          f"({EXAMPLE})") from None
    except PermissionError as e:
        raise ConfigError(f"--halving {path}: cannot be read ({e.strerror}); make it readable (chmod u+r "
                          f"{path}) or give a copy this user may read") from None
    except OSError as e:
        raise ConfigError(f"--halving {path}: cannot be read ({e.strerror or e}); give the recipes file, "
                          f"{EXAMPLE}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"--halving {path}: is not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); "
                          "save it as UTF-8, the encoding TOML requires") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"--halving {path} does not parse as TOML ({e})") from None
    recipes = {}
    for name, table in data.items():
        if not is_folder_name(name):
            raise ConfigError(f"--halving {path}: recipe [{name!r}]: its name is not a folder name (a recipe's "
                              "runs go in a folder of its name inside the search folder); use one plain name (no "
                              "'/', not '.', '..' or empty, no NUL), e.g. [qr51]")
        args = table.get("args") if isinstance(table, dict) else None
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ConfigError(f"--halving {path}: recipe [{name}] needs args = [\"--flag\", \"value\", ...] "
                              "(a list of strings)")
        recipes[name] = args
    if len(recipes) < 2:
        raise ConfigError(f"--halving {path}: {len(recipes)} recipe(s); successive halving needs at least 2")
    return recipes


def is_folder_name(name: str) -> bool:
    """One plain path component: joined to a folder, it names a folder inside it, never the
    folder itself, its parent, a path below or an absolute path."""
    seps = {os.sep, os.altsep} - {None}
    return (name not in ("", ".", "..") and "\0" not in name and not any(s in name for s in seps)
            and not os.path.isabs(name) and os.path.basename(name) == name)


def rung_minutes(first: float, eta: int, rungs: int) -> list[float]:
    """Each rung's minutes, counted from each run's start: first, first x eta, ..."""
    return [first * eta ** r for r in range(rungs)]


def survivors(n: int, eta: int) -> int:
    """How many of ``n`` go on to the next rung: the best 1/eta, at least one."""
    return max(1, math.ceil(n / eta))


def rank_key(entry: dict) -> tuple:
    """Sort key, best first: reached the target (earlier is better), then the score now (higher
    is better); a run with no whole games yet ranks last."""
    if entry["minutes_to_target"] is not None:
        return (0, entry["minutes_to_target"])
    return (1, -entry["score_now"] if entry["score_now"] is not None else math.inf)


def halving(recipes: dict[str, list[str]], common: list[str], target: float, first_minutes: float, eta: int,
            rungs: int, runs_dir: str, metric: str, window: int) -> dict:
    """Run successive halving; returns every rung's standings and the winner."""
    from pipeline.records.episodes import read_episodes, score_run
    from pipeline.records.files import LOG_NAME

    runs_dir = os.path.abspath(runs_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    dirs = {name: os.path.join(runs_dir, f"halving-{stamp}-{name}") for name in recipes}
    alive = list(recipes)
    history = []
    kept_standing: dict[str, dict] = {}
    for r, minutes in enumerate(rung_minutes(first_minutes, eta, rungs)):
        standings = []
        for name in alive:
            done = finished_steps(dirs[name]) if r > 0 else None
            if done is not None:
                # the training script refuses to resume a run at its --total-steps: what it
                # reached stands as it was
                print(f"[HALVING] rung {r + 1}/{rungs}: {name} reached --total-steps {done:,} in an earlier rung; "
                      "its standing stays", flush=True)
                standings.append(kept_standing[name])
                continue
            if r == 0:
                cmd = [sys.executable, "mario_rl_optimized.py", *common, *recipes[name], "--run-dir", dirs[name],
                       "--target-score", str(target), "--time-limit", str(minutes)]
            else:
                cmd = [sys.executable, "mario_rl_optimized.py", "--resume", dirs[name], "--time-limit", str(minutes)]
            # No survivor has reached the target: once the best has, the rungs end (below).
            print(f"[HALVING] rung {r + 1}/{rungs}, {minutes:g} min: {name}: {' '.join(cmd[1:])}", flush=True)
            code, stopped = train_subprocess(cmd)
            if stopped:  # the run stopped cleanly (checkpoint saved); so does the search
                raise SystemExit(f"[HALVING] stopped by {stopped} during {name}; its run is in {dirs[name]}")
            if code != 0:
                raise RuntimeError(f"recipe {name} exited with code {code}; its log is "
                                   f"{os.path.join(dirs[name], LOG_NAME)}")
            rows = read_episodes(dirs[name])
            summary, _ = score_run(rows, (target,), window, metric)
            last = rows[-1] if rows else {}
            standings.append({"recipe": name, "args": recipes[name], "run_dir": dirs[name],
                              "minutes_to_target": summary["milestones"][0].get("minutes"),
                              "score_now": summary["last_mean"], "best_mean": summary["best_mean"],
                              "agent_steps": last.get("agent_steps", 0), "updates": last.get("updates", 0)})
            kept_standing[name] = standings[-1]
        standings.sort(key=rank_key)
        keep = survivors(len(standings), eta)
        history.append({"rung": r + 1, "minutes": minutes, "standings": standings,
                        "kept": [s["recipe"] for s in standings[:keep]]})
        print_rung(history[-1], target)
        alive = history[-1]["kept"]
        # Ranked first if any did: the best reached the target, its time to score is measured and
        # later rungs cannot beat it. One recipe left still trains the later rungs: its full-length
        # run is the winner's figure.
        if standings[0]["minutes_to_target"] is not None:
            break
    return {"target": target, "metric": metric, "window": window, "first_minutes": first_minutes, "eta": eta,
            "rungs": history, "winner": history[-1]["standings"][0]["recipe"], "common_args": common}


def finished_steps(run_dir: str) -> int | None:
    """The run's --total-steps if its last checkpoint has reached them (it cannot be resumed),
    else None."""
    import json

    from pipeline.records import checkpoint as ckpt
    from pipeline.records.files import CHECKPOINT_NAME, RECORD_NAME

    try:
        with open(os.path.join(run_dir, RECORD_NAME)) as f:
            total = json.load(f)["config"]["total_steps"]
        counters = ckpt.load(os.path.join(run_dir, CHECKPOINT_NAME)).get("counters", {})
    except (OSError, KeyError, ValueError, ckpt.CheckpointError):
        return None  # no record or checkpoint to read: the resume says what is wrong
    return total if counters.get("agent_steps", 0) >= total else None


def print_rung(rung: dict, target: float) -> None:
    print(f"\n[HALVING] rung {rung['rung']} ({rung['minutes']:g} min a run), best first; kept: "
          f"{', '.join(rung['kept'])}")
    print(f"| recipe | minutes to {target:g} | score now (last 20) | best | agent steps | updates |")
    print("|---|---|---|---|---|---|")
    for s in rung["standings"]:
        mtt = f"{s['minutes_to_target']:.1f}" if s["minutes_to_target"] is not None else "-"
        now = f"{s['score_now']:.2f}" if s["score_now"] is not None else "n/a"
        best = f"{s['best_mean']:.2f}" if s["best_mean"] is not None else "n/a"
        print(f"| {s['recipe']} | {mtt} | {now} | {best} | {s['agent_steps']:,} | {s['updates']:,} |", flush=True)
