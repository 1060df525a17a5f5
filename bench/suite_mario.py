"""``--suite mario``: the Mario preset on its stages (1-1 unless ``--stages`` or ``--env`` name others),
a fresh run per stage and seed, each judged the way a user judges the agent it leaves: its kept weights (``best_eval.pt``,
else the last checkpoint) played again on fresh games, ``EVAL_GAMES`` greedy and as many at
epsilon ``NOISY_EPSILON``, with seeds no training or evaluation game of the run used, and greedy
once from each no-op start: greedy Mario has one game per start (``noop_max + 1``, 31 with the
preset), so those are all its games and their flags the exact share the 10 fresh games sample.

The report gives, per seed, the flags and mean distance of both plays, the agent steps and
minutes to the kept weights, and where each game that missed the flag ended: a plot of the x
position at which Mario died or stood still, against the agent steps the game lasted (a game cut
where it stood still, ``STAND_STILL_STEPS`` agent steps without passing its furthest x, is drawn
as a cross), so the obstacle that kills a policy is seen, and the greedy evaluation games that
stood still, which a fix for a Mario that stands still is judged by. Runs train in
``SUITE_DIR/seedN/STAGE`` (bench/suite_runs.py: resumable, ``--games-at-once``, one recipe per
folder); a run that stopped itself with a finished agent (``--stop-at-flag``) is done. Judged per agent step: the replay ratio holds both ways, so seeds
trained side by side learn per agent step as alone; their minutes are each a share of the machine."""
from __future__ import annotations

import statistics
from collections.abc import Callable
from functools import partial
from pathlib import Path

from config_optimized import ConfigError

from .suite_runs import (GAME_FILE, SUITE_FILE, GameRun, claim_suite_dir, game_counters, game_dir, game_name,
                         mark_done, minutes_at, other_recipe, parse_seeds, pinned_args, read_json, recipe_args,
                         recipe_text, resolved_recipe, run_record, runs_recipe, say_pinned, suite_dir_name, train_games,
                         trained_on, without_seed, write_report_files)
from .time_to_score import training_config

STAGE = "SuperMarioBros-1-1-v0"
STEPS = 2_000_000          # the preset's cap: a stage takes 1-2M agent steps, and a run stops sooner at a finished agent
EVAL_GAMES = 10            # games per play of the kept weights
NOISY_EPSILON = 0.05       # the noisy play's epsilon (CleanRL's evaluation epsilon)
# Seeds of the final plays: training's env seeds are the run's seed plus small offsets
# (pipeline/actors/collector.py), its evaluations' the seed plus agent steps (and 1,000,003 more for a
# confirmation): these lie above all of them.
EVAL_SEED_BASE = 900_000_000
EVAL_FILE = "suite_eval.json"  # a seed's final plays, beside its run; redone only when its kept weights change


def play_seeds(seed: int) -> dict[str, int]:
    """The first game seed of each final play of a run of ``seed``: apart from each other and
    from every game the run played."""
    return {"greedy": EVAL_SEED_BASE + 1_000 * seed, "noisy": EVAL_SEED_BASE + 1_000 * seed + 500}


def check_mario_args(env: str, train_args: list[str], steps: int, minutes: float | None,
                     seeds: str | None) -> list[int]:
    """The stage and options checked as the training script checks them, before any run starts."""
    from wrappers.registry import is_mario

    from .suite import check_lengths, check_own_flags

    if not is_mario(env):
        raise ConfigError(f"--suite mario --env {env}: not a Super Mario Bros id; give a stage such as "
                          "SuperMarioBros-2-1-v0, or drop --env for 1-1")
    check_lengths(steps, minutes)
    check_own_flags(train_args)
    picked = parse_seeds(seeds, train_args)
    training_config(["--env", env, *train_args])
    return picked


def mario_suite_dir(env: str, train_args: list[str], runs_dir: str) -> Path:
    """``RUNS_DIR/suite-mario[_OPTIONS]``; another stage than 1-1 is part of the name (suite-mario-2-1)."""
    stage = "" if env == STAGE else "-" + env.removeprefix("SuperMarioBros-").split("-v")[0]
    return Path(runs_dir).resolve() / suite_dir_name(f"mario{stage}", train_args)


def parse_stages(text: str) -> list[str]:
    """``--stages 1-1,4-1`` (or full ids, SuperMarioBros-4-1-v0) as Super Mario Bros ids, in order."""
    from wrappers.registry import UnknownEnvError, check_env_id, is_mario

    out = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        env = item if item.startswith("SuperMarioBros") else f"SuperMarioBros-{item}-v0"
        try:
            known = is_mario(check_env_id(env))
        except UnknownEnvError:
            known = False
        if not known:
            raise ConfigError(f"--stages {text}: {item!r} is not a stage; give WORLD-STAGE with a world of 1-8 and "
                              "a stage of 1-4, e.g. --stages 1-1,4-1")
        if env in out:
            raise ConfigError(f"--stages {text}: {item} is named twice; give each stage once")
        out.append(env)
    if not out:
        raise ConfigError(f"--stages {text!r}: name at least one stage, e.g. --stages 1-1,4-1")
    return out


def stage_name(env: str) -> str:
    """SuperMarioBros-4-1-v0 -> 4-1."""
    return env.removeprefix("SuperMarioBros-").split("-v")[0]


def run_mario_suite(train_args: list[str], steps: int, minutes: float | None, runs_dir: str,
                    stages: list[str] = (STAGE,), seeds: str | None = None, at_once: int = 1,
                    episodes: int = EVAL_GAMES) -> list[Path]:
    """Train each stage's seeds that have not finished (``at_once`` runs at a time, stage after
    stage), then play each finished run's kept weights again; returns each stage's folder (one
    suite folder a stage, so a stage's runs resume and report alone)."""
    stages = list(stages)
    picked = [check_mario_args(env, train_args, steps, minutes, seeds) for env in stages][0]
    if episodes < 1:
        raise ConfigError(f"--play-games {episodes}: play at least one game, e.g. --play-games 10")
    train_args = without_seed(train_args)
    runs, suite_dirs = [], []
    for env in stages:  # every stage's folder claimed (or refused) before any run starts
        suite_dir = mario_suite_dir(env, train_args, runs_dir)
        started = [d for d in sorted(suite_dir.glob("seed*/*")) if d.is_dir()]
        recipe = claim_suite_dir(suite_dir, {"suite": "mario", "env": env, "steps": steps, "minutes": minutes,
                                             "train_args": recipe_args(train_args)}, resolved_recipe(env, train_args),
                                 started)
        say_pinned("[SUITE]", env, train_args, recipe)
        runs += [GameRun(env, game_dir(suite_dir, seed, env), pinned_args(env, [*train_args, "--seed", str(seed)], recipe),
                         f"[SUITE] {env} seed {seed}", f"{env} seed {seed}") for seed in picked]
        suite_dirs.append(suite_dir)
    if at_once > 1:
        print(f"[SUITE] {min(at_once, len(runs))} runs at once: each run's minutes are its share of this machine",
              flush=True)
    done: list[tuple[GameRun, int]] = []

    def finished(run: GameRun, counters: dict) -> None:
        mark_done(run.run_dir, run.env, counters, at_once)
        print(f"[SUITE] {run.what}: done ({counters.get('agent_steps', 0):,} agent steps, "
              f"{counters.get('wall_s', 0) / 60:.1f} min)", flush=True)
        done.append((run, int(run.run_dir.parent.name[4:])))
    train_games(runs, steps, minutes, at_once, finished)
    for run, seed in done:
        play_kept_weights(run.run_dir, seed, tag=f"[SUITE] {run.what}", episodes=episodes)
    return suite_dirs


def kept_weights(run_dir: Path) -> Path:
    """What a user plays: best_eval.pt (the best confirmed evaluation), else the last checkpoint."""
    from pipeline.records.files import BEST_EVAL_NAME, CHECKPOINT_NAME

    best = run_dir / BEST_EVAL_NAME
    if best.is_file():
        return best
    if (run_dir / CHECKPOINT_NAME).is_file():
        return run_dir / CHECKPOINT_NAME
    raise ConfigError(f"{run_dir} keeps no weights (no best_eval.pt or checkpoint.pt) to play; delete {run_dir} "
                      "to train that seed again")


def play_kept_weights(run_dir: Path, seed: int, tag: str = "[SUITE]", episodes: int = EVAL_GAMES) -> dict:
    """The kept weights played greedy once from every no-op start, on ``episodes`` fresh greedy
    games (distinct starts of those) and on as many fresh games at ``NOISY_EPSILON``, written to
    ``EVAL_FILE`` (whole or not at all); a file of the same weights is only read."""
    from pipeline.evaluation.evaluate import evaluate, weights_digest
    from pipeline.evaluation.starts import distinct_starts, play_every_start
    from pipeline.records import checkpoint as ckpt
    from pipeline.records.record import write_json

    weights = kept_weights(run_dir)
    digest = weights_digest(weights)
    path = run_dir / EVAL_FILE
    if path.is_file():
        kept = read_json(path, "the seed's final plays", f"delete {path} to play them again")
        if (kept.get("weights_sha256") == digest and kept.get("episodes") == episodes and "every_start" in kept
                and "starts" in kept.get("greedy", {})):
            return kept
    try:
        state = ckpt.load(weights)
    except ckpt.CheckpointError as e:
        raise ConfigError(f"{e}; delete {weights} (or the seed's folder) and run the suite again") from None
    best = state.get("best") or {}
    at = best.get("agent_steps", state.get("counters", {}).get("agent_steps"))
    out = {"weights": weights.name, "weights_sha256": digest, "episodes": episodes, "agent_steps": at}
    # the exact share: greedy play has one game per no-op start (pipeline/evaluation/starts.py)
    every = play_every_start(weights)
    out["every_start"] = {"flags": sum(g.flag for g in every), "games": [g.to_json() for g in every]}
    print(f"{tag}: {weights.name} greedy on every start (no-op starts 0-{len(every) - 1}): the flag in "
          f"{out['every_start']['flags']} of {len(every)}", flush=True)
    # A fresh greedy game is a start not yet played: drawn without repeats (a start drawn twice is
    # the same game twice; 10 drawn with repeats read 7 of 10 from 30-of-31 weights,
    # docs/notebook.md), and read from the starts' games, which are those games.
    starts = distinct_starts(len(every), episodes, play_seeds(seed)["greedy"])
    res = evaluate(weights, episodes, seed=play_seeds(seed)["noisy"], epsilon=NOISY_EPSILON, log=lambda *_: None)
    played = {"greedy": (0.0, [{"distance": g.distance, "length": g.length, "flag": g.flag, "return": g.ret,
                                "random_near_end": 0, "stood": g.stood} for g in (every[k] for k in starts)]),
              "noisy": (NOISY_EPSILON, [{"distance": d, "length": n, "flag": f, "return": r, "random_near_end": k,
                                         "stood": st} for d, n, f, r, k, st in zip(res.distances, res.lengths, res.flags,
                                                                                    res.returns, res.random_near_end,
                                                                                    res.stood)])}
    for how, (epsilon, games) in played.items():
        out[how] = {"epsilon": epsilon, "seed": play_seeds(seed)[how], "flags": sum(g["flag"] for g in games),
                    "distance_mean": statistics.fmean(g["distance"] for g in games), "games": games}
        print(f"{tag}: {weights.name} ({at:,} agent steps) at epsilon {epsilon:g}: the flag in "
              f"{out[how]['flags']} of {episodes} fresh games" + (" (distinct starts)" if how == "greedy" else "")
              + f", mean distance {out[how]['distance_mean']:,.0f}", flush=True)
    out["greedy"]["starts"] = starts
    write_json(path, out)
    return out


# ---------------------------------------------------------------------------------- the report

def screen_flags(curve: list[dict], since: int) -> dict | None:
    """The flags of the run's periodic screenings from ``since`` agent steps on, greedy and at
    the noisy epsilon, and their games, summed over ``flag_curve``'s rows: an unselected reading
    of how the weights played over the run's second half (a confirmation only follows a
    screening that read high, and the kept weights are the best confirmed), with many more games
    than one replay of the kept weights, so recipes compare on it at equal agent steps. None
    where no screening is recorded from ``since`` on."""
    screens = [point["screen"] for point in curve if point["agent_steps"] >= since]
    if not screens:
        return None
    keys = ("greedy", "greedy_games", "noisy", "games")
    return {"since": since, **{key: sum(s[key] for s in screens) for key in keys}}


def first_greedy_flag(curve: list[dict]) -> int | None:
    """The agent steps of the first evaluation (a screening or its confirmation) in which a
    greedy game reached the flag: where the one-recipe R2D2 agent stopped its training, so the
    two compare per agent step on each stage. None where no greedy game has."""
    for point in curve:
        if point["screen"]["greedy"] or (point["confirm"] or {}).get("greedy"):
            return point["agent_steps"]
    return None


def flag_curve(run_dir: Path, rows: list[dict]) -> list[dict]:
    """The run's learning curve in flags, one row per periodic screening: its flags greedy and at
    the noisy epsilon, the confirmation that followed it (if any), and the share of the training
    games (the online weights exploring, which the screenings do not play) that reached the flag
    since the screening before. Two recipes compare on it at equal agent steps, row by row.
    ``rows``: the run's games (episodes.jsonl). Empty where no screening is recorded."""
    from pipeline.evaluation.periodic_eval import read_evals

    try:
        evals = read_evals(run_dir)  # one timeline: an evaluation a resume played again counts once
    except FileNotFoundError:
        return []
    curve: list[dict] = []
    for row in evals:
        plays = {p["epsilon"]: p for p in row.get("plays", [])}
        if 0.0 not in plays or NOISY_EPSILON not in plays:
            continue
        greedy, noisy = plays[0.0], plays[NOISY_EPSILON]
        # each way's own count: an evaluation whose envs all stood still once played fewer games
        # than it asked for (before it played the rest in a fresh batch), one way and not the other
        flags = {"greedy": sum(greedy["flags"]), "greedy_games": len(greedy["flags"]),
                 "noisy": sum(noisy["flags"]), "games": len(noisy["flags"]),
                 # greedy games cut where they stood still (Game.stood); None: played before it was recorded
                 "greedy_stood": sum(map(bool, greedy["stood"])) if "stood" in greedy else None}
        if row.get("phase", "screen") == "screen":
            curve.append({"agent_steps": row["agent_steps"], "screen": flags, "confirm": None})
        elif curve and curve[-1]["confirm"] is None:  # a confirmation follows its screening
            curve[-1]["confirm"] = flags
    before = 0
    for point in curve:
        games = [r for r in rows if before < r["agent_steps"] <= point["agent_steps"]]
        point["training"] = {"games": len(games), "flags": sum(bool(r.get("flag")) for r in games)}
        before = point["agent_steps"]
    return curve


def seed_report(run_dir: Path, steps: int) -> dict:
    """One seed: how far it trained, its minutes, its kept weights' plays and when they were saved."""
    from pipeline.records.episodes import read_episodes
    from pipeline.records.metrics import most_other_runs

    counters, _ = game_counters(run_dir)
    if not counters:  # a run kept stopped short without its checkpoint (docs/data): its last epoch says how far
        counters = last_epoch(run_dir)
    try:
        rows = read_episodes(run_dir)
    except FileNotFoundError:
        rows = []
    points = [(0, 0.0)] + [(r["agent_steps"], r["wall_s"]) for r in rows]  # a run's clock starts with it
    if counters:
        points.append((counters["agent_steps"], counters["wall_s"]))
    plays = read_json(run_dir / EVAL_FILE, "the seed's final plays", f"delete {run_dir / EVAL_FILE}") \
        if (run_dir / EVAL_FILE).is_file() else None
    at = plays.get("agent_steps") if plays else None
    curve = flag_curve(run_dir, rows)
    kept = read_json(run_dir / GAME_FILE, "a finished game's counters", f"delete {run_dir / GAME_FILE}") \
        if (run_dir / GAME_FILE).is_file() else {}
    first = first_greedy_flag(curve)
    return {"agent_steps": counters.get("agent_steps", 0), "minutes": counters.get("wall_s", 0) / 60 if counters else None,
            "done": (run_dir / GAME_FILE).is_file(), "plays": plays, "kept_agent_steps": at,
            "first_flag_agent_steps": first, "first_flag_minutes": minutes_at(points, first) if first is not None else None,
            "kept_minutes": minutes_at(points, at) if at is not None else None,
            "trained_on": trained_on(run_record(run_dir)), "games_at_once": kept.get("games_at_once", 1),
            "other_runs": most_other_runs(run_dir), "steps": steps, "screens": screen_flags(curve, steps // 2),
            "curve": curve}


def last_epoch(run_dir: Path) -> dict:
    """The agent steps and wall clock of a run's last epoch (metrics.jsonl), {} where it has none."""
    from pipeline.records.files import METRICS_NAME
    from pipeline.records.metrics import read_jsonl

    try:
        rows = read_jsonl(run_dir / METRICS_NAME)
    except FileNotFoundError:
        return {}
    return {"agent_steps": rows[-1]["agent_steps"], "wall_s": rows[-1]["wall_s"]} if rows else {}


def mario_report(suite_dir: str | Path, differs: Callable[[Path], list[str]] | None = None) -> dict:
    """Every seed's run in the suite's folder: its plays, its kept weights, its minutes. A run of
    another recipe is in no figure (``left_out``: each, by its folder in the suite's, with the
    flags it trained with): ``differs(run_dir)`` names those flags ([] for a run that counts); by
    default each seed's run record is compared with the suite's recipe (``suite.json``'s, else the
    one its seeds agree on)."""
    from .common import machine

    suite_dir = Path(suite_dir)
    options = read_json(suite_dir / SUITE_FILE, "the suite's options",
                        "delete it and run the suite again with the options its seeds trained with")
    recipe = options.pop("recipe", None)
    runs = {d.name[4:]: d / game_name(options["env"])
            for d in sorted(suite_dir.glob("seed*"), key=lambda p: int(p.name[4:]) if p.name[4:].isdigit() else -1)
            if d.name[4:].isdigit() and (d / game_name(options["env"])).is_dir()}
    if differs is None:
        differs = partial(other_recipe, recipe=recipe if recipe is not None else runs_recipe(suite_dir, [*runs.values()]))
    seeds, left_out = {}, {}
    for seed, run_dir in runs.items():
        if diff := differs(run_dir):
            left_out[str(run_dir.relative_to(suite_dir))] = diff
        else:
            seeds[seed] = seed_report(run_dir, options["steps"])
    # each seed's plays count their own games (a later --play-games replays only the seeds it
    # reaches); "episodes" is the one count every seed played, None where they differ
    played = {s["plays"]["episodes"] for s in seeds.values() if s["plays"]}
    return {"suite": "mario", "env": options["env"], "options": options, "recipe": recipe,
            "recipe_text": recipe_text(recipe, options["env"]), "seeds": seeds, "left_out": left_out,
            "episodes": played.pop() if len(played) == 1 else None if played else EVAL_GAMES,
            "noisy_epsilon": NOISY_EPSILON, "machine": machine()}


def _n(x, fmt="{:,.0f}") -> str:
    return "-" if x is None else fmt.format(x)


def mario_markdown(rep: dict, curves: bool = True, left_out: bool = True) -> str:
    """The suite's report; ``curves``: with each seed's flags by agent steps (the suite's own
    report has them; the page of record keeps to the kept weights' plays); ``left_out``: with the
    runs of another recipe than the suite's named (the page of record lists its own)."""
    o = rep["options"]
    games = (f"{rep['episodes']} fresh games greedy and {rep['episodes']}" if rep["episodes"] is not None
             else "fresh games (each seed's count in its row) greedy and as many")
    lines = [f"Suite mario on {rep['env']}: each seed's kept weights played again on {games} at epsilon "
             f"{rep['noisy_epsilon']:g}. Recipe: {rep['recipe_text']} "
             f"(options: {' '.join(o['train_args']) or 'none'}), {o['steps']:,} agent steps a seed"
             + (f" or {o['minutes']:g} min" if o.get("minutes") else "") + ".", "",
             "| seed | flags greedy | flags at epsilon | mean distance greedy / at epsilon | kept weights: agent steps "
             "(minutes) | trained: agent steps (minutes) |",
             "|---|---|---|---|---|---|"]
    for seed, s in rep["seeds"].items():
        p = s["plays"] or {}
        g, e = p.get("greedy"), p.get("noisy")
        of = f"/{p.get('episodes') or rep['episodes'] or EVAL_GAMES}"  # its own plays' games
        lines.append(f"| {seed} | {_n(g and g['flags'])}{of} | {_n(e and e['flags'])}{of} | "
                     f"{_n(g and g['distance_mean'])} / {_n(e and e['distance_mean'])} | "
                     f"{_n(s['kept_agent_steps'])} ({_n(s['kept_minutes'], '{:.1f}')}) | "
                     f"{_n(s['agent_steps'])} ({_n(s['minutes'], '{:.1f}')}){'' if s['done'] else ' *'} |")
    if not all(s["done"] for s in rep["seeds"].values()):
        lines += ["", "`*`: not finished (training, or stopped short of its agent steps: the suite resumes it); its plays, "
                  "if any, are of the weights kept so far."]
    anchors = stage_anchors()
    r2d2 = anchors["agent_steps_to_first_greedy_flag"].get(stage_name(rep["env"]))
    firsts = [f"seed {seed} at {s['first_flag_agent_steps']:,} agent steps ({_n(s['first_flag_minutes'], '{:.0f}')} min)"
              if s["first_flag_agent_steps"] is not None else f"seed {seed} not yet ({s['agent_steps']:,} agent steps)"
              for seed, s in rep["seeds"].items()]
    if firsts:
        lines += ["", f"First evaluation with a greedy game at the flag: {'; '.join(firsts)}"
                  + (f" ({anchors['agent']}: {r2d2:,} agent steps to its first greedy flag on this stage)." if r2d2
                     else ".")]
    every = [(seed, s["plays"]["every_start"]) for seed, s in rep["seeds"].items()
             if s["plays"] and s["plays"].get("every_start")]
    if every:
        drawn = {seed for seed, s in rep["seeds"].items() if "starts" not in ((s["plays"] or {}).get("greedy") or {})}
        lines += ["", "Greedy from every no-op start (greedy play has one game per start, so these are all of them, "
                  "and the fresh greedy games above are some of them, distinct starts): "
                  + "; ".join(f"seed {seed} the flag in {e['flags']} of {len(e['games'])}"
                              + (" (its fresh greedy games were drawn with repeats, as plays were before)"
                                 if seed in drawn else "") for seed, e in every) + "."]
    if left_out and rep.get("left_out"):
        lines += ["", "Left out (another recipe than the suite's): "
                  + "; ".join(f"{run}, trained with {' '.join(d)}" for run, d in rep["left_out"].items()) + "."]
    screens = [(seed, s["screens"]) for seed, s in rep["seeds"].items() if s.get("screens")]
    if screens:
        lines += ["", "The runs' own periodic screenings over their second half (unselected, unlike the kept "
                  "weights, and more games: recipes compare on them at equal agent steps): "
                  + "; ".join(f"seed {seed} from {c['since']:,}: {c['greedy']}/{c['greedy_games']} greedy, "
                              f"{c['noisy']}/{c['games']} at {rep['noisy_epsilon']:g}" for seed, c in screens) + "."]
    stood = [(seed, stood_still(s["curve"])) for seed, s in rep["seeds"].items() if curves and s.get("curve")]
    if any(c for _, c in stood):
        lines += ["", "Greedy evaluation games (screenings and confirmations) that stood still until cut: "
                  + "; ".join(f"seed {seed} {c['stood']} of {c['games']} ({c['stood'] / max(1, c['misses']):.0%} "
                              f"of the {c['misses']} that missed the flag)" for seed, c in stood if c) + "."]
    lines.append("")
    for seed, s in rep["seeds"].items():
        if curves and s.get("curve"):
            lines += curve_markdown(seed, s["curve"], rep["noisy_epsilon"]) + [""]
    for seed, s in rep["seeds"].items():
        for how in ("greedy", "noisy"):
            play = (s["plays"] or {}).get(how)
            if play:
                ends = [f"x {g['distance']:,.0f} ({g['length']:,} steps{', stood still' if g.get('stood') else ''})"
                        for g in sorted(play["games"], key=lambda g: g["distance"]) if not g["flag"]]
                lines.append(f"Seed {seed}, {'greedy' if how == 'greedy' else 'epsilon ' + format(play['epsilon'], 'g')}: "
                             f"missed the flag at {', '.join(ends) if ends else 'no game'}.")
        every = (s["plays"] or {}).get("every_start")
        if every:
            ends = [f"x {g['distance']:,.0f} (start {g['noops']}{', stood still' if g['stood'] else ''})"
                    for g in sorted(every["games"], key=lambda g: g["distance"]) if not g["flag"]]
            lines.append(f"Seed {seed}, greedy from every start: missed the flag at "
                         f"{', '.join(ends) if ends else 'no start'}.")
    noisy = random_before_misses(rep)
    if noisy:
        lines += ["", noisy]
    machines: dict[str, list[str]] = {}
    for seed, s in rep["seeds"].items():
        if s["trained_on"]:
            machines.setdefault(s["trained_on"], []).append(seed)
    lines.append("")
    for where, names in machines.items():
        lines.append(f"Trained on: {where} (seed {', '.join(names)}).")
    shared = [seed for seed, s in rep["seeds"].items() if s["games_at_once"] > 1 or s["other_runs"] > 0]
    if shared:
        lines.append(f"Shared the machine: seed {', '.join(shared)} (beside other runs of the trainer, a test suite's "
                     "among them): their minutes are each a share of the machine, their agent steps as alone.")
    return "\n".join(lines)


def stage_anchors() -> dict:
    """The one-recipe R2D2 agent's agent steps to its first greedy flag, per stage (bench/mario_anchors.json)."""
    import json

    return json.loads((Path(__file__).with_name("mario_anchors.json")).read_text())


def stages_markdown(reps: list[dict]) -> str:
    """One row per stage and seed of the stages' reports (``mario_report``'s): the agent steps
    (and minutes) to the first greedy flag in an evaluation and to the kept weights, those
    weights played again on fresh games greedy (judged) and at the noisy epsilon (reported),
    beside the R2D2 agent's agent steps to its first greedy flag on the same stage."""
    anchors = stage_anchors()
    lines = ["| stage | seed | first greedy flag: agent steps (minutes) | kept weights: agent steps (minutes) | "
             "kept weights played again: flags greedy / at 0.05 (and from every start, greedy, where played) | trained: agent steps | "
             f"{anchors['agent']}: agent steps to its first greedy flag |", "|---" * 7 + "|"]
    for rep in reps:
        stage = stage_name(rep["env"])
        r2d2 = anchors["agent_steps_to_first_greedy_flag"].get(stage)
        for seed, s in rep["seeds"].items() or {"-": None}.items():
            if s is None:
                lines.append(f"| {stage} | - | - | - | - | - | {_n(r2d2)} |")
                continue
            p = s["plays"] or {}
            g, e = p.get("greedy"), p.get("noisy")
            played = f"{g['flags']}/{len(g['games'])} / {e['flags']}/{len(e['games'])}" if g and e else "-"
            if p.get("every_start"):  # the exact share: every start, greedy
                played += f"; every start {p['every_start']['flags']}/{len(p['every_start']['games'])}"
            lines.append(f"| {stage} | {seed} | {_n(s['first_flag_agent_steps'])} ({_n(s['first_flag_minutes'], '{:.0f}')}) | "
                         f"{_n(s['kept_agent_steps'])} ({_n(s['kept_minutes'], '{:.0f}')}) | {played} | "
                         f"{_n(s['agent_steps'])}{'' if s['done'] else ' *'} | {_n(r2d2)} |")
    shared = [f"{stage_name(rep['env'])} seed {seed}" for rep in reps for seed, s in rep["seeds"].items()
              if s["games_at_once"] > 1 or s["other_runs"] > 0]
    lines += ["", "Minutes are each run's own wall clock on the machine it trained on (its report names it)"
              + (f"; {', '.join(shared)} shared the machine with other runs, so its minutes are a share of it and its "
                 "agent steps as alone" if shared else "")
              + f"; `*`: not finished (training, or stopped short: the suite resumes it). {anchors['agent']}: {anchors['source']}."]
    return "\n".join(lines)


def stood_still(curve: list[dict]) -> dict | None:
    """A seed's greedy evaluation games (screenings and confirmations) that stood still until
    they were cut, of its greedy games and of those that missed the flag: what a fix for a Mario
    that stands still is judged by. None where an evaluation played before it was recorded."""
    ways = [f for p in curve for f in (p["screen"], p["confirm"]) if f is not None]
    if not ways or any(f.get("greedy_stood") is None for f in ways):
        return None
    games = sum(f["greedy_games"] for f in ways)
    return {"stood": sum(f["greedy_stood"] for f in ways), "games": games,
            "misses": games - sum(f["greedy"] for f in ways)}


def flags_cell(f: dict | None) -> str:
    """One evaluation's flags (a ``flag_curve`` row's screening or confirmation) as a table cell:
    greedy (and the greedy games that stood still), then at epsilon; "-" where there is none."""
    if f is None:
        return "-"
    stood = f" ({f['greedy_stood']} stood)" if f.get("greedy_stood") else ""
    return f"{f['greedy']}/{f['greedy_games']}{stood}, {f['noisy']}/{f['games']}"


def curve_markdown(seed: str, curve: list[dict], epsilon: float) -> list[str]:
    """One seed's flags by agent steps as a table: screening, confirmation, training games."""
    lines = [f"Seed {seed} by agent steps: flags greedy (and the greedy games that stood still until cut), at "
             f"epsilon {epsilon:g} of each periodic screening and of the confirmation a new best started; the "
             f"training games (exploring) at the flag since the screening before.", "",
             "| agent steps | screening | confirmation | training games at the flag |", "|---|---|---|---|"]
    for p in curve:
        t = p["training"]
        share = f"{t['flags']}/{t['games']} ({100 * t['flags'] / t['games']:.0f}%)" if t["games"] else "-"
        lines.append(f"| {p['agent_steps']:,} | {flags_cell(p['screen'])} | {flags_cell(p['confirm'])} | {share} |")
    return lines


def random_before_misses(rep: dict) -> str:
    """Whether the noise ends the games: of the games at epsilon that missed the flag, how many
    had a random action in their last ``NEAR_END`` agent steps, against the share chance alone
    gives an ``NEAR_END``-step stretch. Far above chance, the policy dies of its random actions
    (a jump cut short); near it, of its own choices. Empty where no play recorded them."""
    from pipeline.evaluation.evaluate import NEAR_END

    misses = [g for s in rep["seeds"].values() for g in ((s["plays"] or {}).get("noisy") or {}).get("games", [])
              if not g["flag"]]
    if not misses or any("random_near_end" not in g for g in misses):  # plays from before it was counted
        return ""
    hit = sum(g["random_near_end"] > 0 for g in misses)
    chance = 1 - (1 - rep["noisy_epsilon"]) ** NEAR_END
    return (f"At epsilon {rep['noisy_epsilon']:g}, {hit} of the {len(misses)} games that missed the flag had a random "
            f"action in their last {NEAR_END} agent steps (chance alone gives {NEAR_END} steps one "
            f"{100 * chance:.0f}% of the time).")


def plot_game_ends(rep: dict, path: str | Path) -> None:
    """Where the games that missed the flag ended: x position against the agent steps the game
    lasted, greedy and at epsilon side by side, one colour per seed; the flags counted in each
    panel's title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharex=True, sharey=True)
    every = [g for s in rep["seeds"].values() for p in (s["plays"] or {}).values() if isinstance(p, dict)
             for g in p.get("games", [])]
    flag_x = max((g["distance"] for g in every if g["flag"]), default=None)
    for ax, how in zip(axes, ("greedy", "noisy")):
        flags = total = 0
        for k, (seed, s) in enumerate(rep["seeds"].items()):
            play = (s["plays"] or {}).get(how)
            if not play:
                continue
            flags, total = flags + play["flags"], total + len(play["games"])
            miss = [g for g in play["games"] if not g["flag"]]
            for stood in (False, True):
                some = [g for g in miss if bool(g.get("stood")) == stood]
                if some or not stood:  # one legend entry a seed
                    ax.scatter([g["distance"] for g in some], [g["length"] for g in some], s=30, alpha=0.75,
                               color=f"C{k}", marker="x" if stood else "o",
                               label=None if stood else f"seed {seed}: {play['flags']}/{len(play['games'])} flags")
        what = "greedy" if how == "greedy" else f"epsilon {rep['noisy_epsilon']:g}"
        ax.set_title(f"{what}: {flags} of {total} games reached the flag", fontsize=10)
        ax.set_xlabel("x position where the game ended")
        ax.grid(alpha=0.3)
        if flag_x is not None:
            ax.axvline(flag_x, color="0.5", ls="--", lw=1)
            ax.annotate("flag", (flag_x, 1), xycoords=("data", "axes fraction"), xytext=(-3, -12),
                        textcoords="offset points", ha="right", fontsize=8, color="0.35")
        if flags == total:  # nothing to scatter: say why rather than leave empty axes
            ax.text(0.5, 0.5, "every game reached the flag" if total else "no kept weights played yet",
                    transform=ax.transAxes, ha="center", va="center", fontsize=10, color="0.35")
        if total:
            ax.legend(fontsize=8, loc="upper left")
    if every:  # the level's length and the longest game, so panels and suites read on one scale
        axes[0].set_xlim(0, 1.05 * max(g["distance"] for g in every))
        axes[0].set_ylim(0, 1.1 * max(g["length"] for g in every))
    axes[0].set_ylabel("agent steps the game lasted\n(x: cut where it stood still)")
    fig.suptitle(f"Where the kept weights' games ended without the flag ({rep['env']})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_mario_report(suite_dir: str | Path) -> dict:
    """The report's JSON, Markdown table and the plot of where games ended, into the suite's folder."""
    rep = mario_report(suite_dir)
    return write_report_files(Path(suite_dir), rep, mario_markdown(rep), plot_game_ends)
