"""``--suite atari5 --halving RECIPES.toml [--games A,B,C]``: choose a recipe on several games at
once, with successive halving on agent steps (Jamieson and Talwalkar 2016). Every recipe trains
each game to the first rung's agent steps; the best 1/eta by mean rank over the games (each game
counts the same; ties by mean human-normalized score) go on, each run resumed from its own
checkpoint and replay, to eta times the steps, and so on to ``--steps``. A rung's score of one run is Dopamine's: the mean
training return of the games that ended in the second half of the rung's steps (at 500k, the
250k-500k window the suite's table reports; a game without published random and human scores,
like the test suite's catch games, counts its raw return).

Judged at equal agent steps, so a recipe that trains more samples per agent step (a higher
``--replay-ratio``) is judged by what it learns per step, not per minute: the table names each
recipe's samples per agent step and its minutes beside its score. Each run is the real pipeline
in ``RUNS_DIR/suite-halving-NAME_DIGEST/RECIPE/GAME``; run the same command again to continue a
stopped search (finished runs are only read)."""
from __future__ import annotations

import hashlib
import json
import statistics
from pathlib import Path

from config_optimized import ConfigError

from .halving import survivors
from .suite import human_normalized, load_anchors, pick_games
from .suite_runs import (OWN_FLAGS, GameRun, claim_suite_dir, game_counters, game_name, pinned_args, recorded_recipe,
                         resolved_recipe, run_record, say_pinned, train_games)
from .time_to_score import training_config

HALVING_FILE = "halving.json"


def rung_steps(steps: int, eta: int, rungs: int) -> list[int]:
    """Each rung's agent steps, the last one ``steps``: 500k, eta 2, 3 rungs -> 125k, 250k, 500k."""
    return [steps // eta ** (rungs - 1 - r) for r in range(rungs)]


def check_recipes(recipes: dict[str, list[str]], common: list[str], envs: list[str]) -> None:
    """Every recipe on every game checked as the training script checks it, before any run starts."""
    for name, extra in recipes.items():
        own = [a for a in [*common, *extra] if a.split("=")[0] in OWN_FLAGS]
        if own:
            raise ConfigError(f"recipe [{name}]: {own[0]} is the search's own (it sets each run's game, length and "
                              "folder); give training options, the length as --steps and the folder as --runs-dir")
        for env in envs:
            try:
                training_config(["--env", env, *common, *extra])
            except SystemExit:  # argparse has printed what it could not read
                raise ConfigError(f"recipe [{name}]: its options (above) do not parse") from None
            except ConfigError as e:
                raise ConfigError(f"recipe [{name}] on {env}: {e}") from None


def search_dir(runs_dir: str, suite: str, options: dict) -> Path:
    digest = hashlib.sha1(json.dumps(options, sort_keys=True).encode()).hexdigest()[:10]
    return Path(runs_dir).resolve() / f"suite-halving-{suite}_{digest}"


def run_score(run_dir: Path, steps: int, anchors: dict) -> dict:
    """One run at a rung of ``steps``: the mean return of the games that ended in (steps/2, steps],
    its human-normalized value, its minutes and samples per agent step."""
    from pipeline.records.episodes import read_episodes

    name = run_dir.name
    rows = [r for r in read_episodes(run_dir) if steps / 2 < r["agent_steps"] <= steps]
    mean = statistics.fmean(r["return"] for r in rows) if rows else None
    a = anchors["games"].get(name, {})
    # a game without published random and human scores (the test suite's catch games) counts its return
    hns = mean if mean is None or a.get("random") is None else human_normalized(mean, a["random"], a["human"])
    counters, _ = game_counters(run_dir)
    ratio = run_record(run_dir).get("config", {}).get("replay_ratio")
    return {"game": name, "return": mean, "games": len(rows), "hns": hns,
            "minutes": counters.get("wall_s", 0) / 60, "samples_per_agent_step": ratio}


def suite_halving(suite: str, recipes: dict[str, list[str]], games: str | None, common: list[str], steps: int,
                  eta: int, rungs: int, runs_dir: str, at_once: int = 1) -> dict:
    """Run (or continue) the search, ``at_once`` runs side by side; returns every rung's standings
    and the winner. Recipes are ranked by score at equal agent steps, so runs side by side rank
    as runs alone; their minutes are each a share of the machine."""
    from pipeline.records.record import write_json

    envs = pick_games(suite, games)
    check_recipes(recipes, common, envs)
    options = {"suite": suite, "games": [game_name(e) for e in envs], "recipes": recipes, "common_args": common,
               "steps": steps, "eta": eta, "rungs": rungs}
    root = search_dir(runs_dir, suite, options)
    # each recipe as its first game trained it (a preset moved or a --config file edited since
    # would otherwise train its later games and rungs another way)
    recipe = claim_suite_dir(root, options, {
        name: next((found for env in envs if (found := recorded_recipe(root / name / game_name(env))) is not None),
                   None) or resolved_recipe(envs[0], [*common, *extra]) for name, extra in recipes.items()})
    for name in recipes:
        say_pinned(f"[HALVING] {name}", envs[0], [*common, *recipes[name]], recipe.get(name))
    anchors = load_anchors()
    alive, history = list(recipes), []
    for r, at in enumerate(rung_steps(steps, eta, rungs)):
        train_games([GameRun(env, root / name / game_name(env), pinned_args(env, [*common, *recipes[name]],
                                                                            recipe.get(name)),
                             f"[HALVING] rung {r + 1}/{rungs} ({at:,} agent steps): {name} on {game_name(env)}",
                             f"{name} on {env}") for name in alive for env in envs], at, None, at_once)
        standings = []
        for name in alive:
            scores = [run_score(root / name / game_name(env), at, anchors) for env in envs]
            hns = [s["hns"] for s in scores if s["hns"] is not None]
            standings.append({"recipe": name, "args": recipes[name], "games": scores,
                              "hns_mean": statistics.fmean(hns) if len(hns) == len(scores) else None})
        standings = rank_standings(standings)
        keep = survivors(len(standings), eta)
        history.append({"rung": r + 1, "agent_steps": at, "standings": standings,
                        "kept": [s["recipe"] for s in standings[:keep]]})
        print(rung_table(history[-1]), flush=True)
        alive = history[-1]["kept"]
    result = {**options, "rungs_run": history, "winner": history[-1]["standings"][0]["recipe"]}
    write_json(root / HALVING_FILE, result)
    return result


def rank_standings(standings: list[dict]) -> list[dict]:
    """Best first, by each recipe's mean rank over the games (1 = the best return on a game, ties
    share their mean rank, a game without a score ranks last), then by mean human-normalized score.
    Every game counts the same: in a mean of human-normalized scores DoubleDunk, whose human and
    random scores lie 2.2 points apart, would outweigh the rest (half a point there counts as
    much as 1,400 points of NameThisGame). Sets each standing's ``mean_rank``."""
    n_games = len(standings[0]["games"]) if standings else 0
    ranks = [[] for _ in standings]
    for g in range(n_games):
        rets = [s["games"][g]["return"] for s in standings]
        for i, r in enumerate(rets):
            if r is None:
                ranks[i].append(float(len(rets)))
                continue
            better = sum(1 for x in rets if x is not None and x > r)
            same = sum(1 for x in rets if x is not None and x == r)
            ranks[i].append(better + (same + 1) / 2)  # the mean of the places the tied returns share
    for s, rk in zip(standings, ranks):
        s["mean_rank"] = statistics.fmean(rk) if rk else None
    return sorted(standings, key=lambda s: (s["mean_rank"] if s["mean_rank"] is not None else float("inf"),
                                            -s["hns_mean"] if s["hns_mean"] is not None else float("inf")))


def rung_table(rung: dict) -> str:
    """A rung's standings, best first: each game's mean return in the rung's second half, the
    mean human-normalized score, and each recipe's samples per agent step and minutes per game."""
    names = [g["game"] for g in rung["standings"][0]["games"]]
    lines = [f"\n[HALVING] rung {rung['rung']} ({rung['agent_steps']:,} agent steps a run; score: the mean return of "
             f"the games that ended after {rung['agent_steps'] // 2:,}), best first by mean rank over the games; kept: "
             f"{', '.join(rung['kept'])}",
             f"| recipe | {' | '.join(names)} | mean rank | mean human-normalized | samples per agent step | "
             "minutes a game |",
             "|---" * (len(names) + 5) + "|"]
    for s in rung["standings"]:
        rets = [f"{g['return']:,.1f}" if g["return"] is not None else "-" for g in s["games"]]
        hns = f"{s['hns_mean']:.3f}" if s["hns_mean"] is not None else "-"
        rank = f"{s['mean_rank']:.2f}" if s.get("mean_rank") is not None else "-"
        ratios = {g["samples_per_agent_step"] for g in s["games"]}
        minutes = statistics.fmean(g["minutes"] for g in s["games"])
        lines.append(f"| {s['recipe']} | {' | '.join(rets)} | {rank} | {hns} | {', '.join(f'{x:g}' for x in ratios if x)} | "
                     f"{minutes:.1f} |")
    return "\n".join(lines)

