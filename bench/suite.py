"""``--suite atari5``: the defaults trained on several games and seeds, each game scored per
250k-agent-step window beside Dopamine's published agents, with the interquartile mean (IQM) of
human-normalized scores over the suite's games and seeds and its 95% stratified-bootstrap interval
(Agarwal et al. 2021, as rliable computes them).

The Atari-5 games (BattleZone, DoubleDunk, NameThisGame, Phoenix, Qbert; Aitchison et al. 2023
chose them because their scores predict the median over the 57 games) plus Pong, whose IQM is
left out as in the paper. Each game and seed is one run of the real pipeline (bench/suite_runs.py)
in ``SUITE_DIR/seedN/GAME``: a game whose run is missing starts, one that stopped early (a kill, a
crash, Ctrl-C) resumes from its last checkpoint, one that reached ``--steps`` or ``--minutes`` is
only read. So the same command continues an interrupted suite (or adds seeds to it), and run again
on a finished one it only writes the report.

A window's score is Dopamine's: the mean training return of the games that ended in it (epsilon
as the recipe explores, every whole game, all lives). The anchors are Dopamine's baselines
under the same sticky actions (``atari_anchors.json`` names the files and holds each of their 5
seeds): per game the 5-seed mean, in the IQM every seed, with its interval computed as ours is;
they play the full 18-action set where ``-v5`` ids give each game its minimal set.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import partial
from pathlib import Path

from config_optimized import ConfigError

from .suite_runs import (GAME_FILE, OWN_FLAGS, SUITE_FILE, GameRun, claim_suite_dir, game_counters, game_dir,
                         game_name, mark_done, minutes_at, other_recipe, parse_seeds, pinned_args, read_json,
                         recipe_args, recipe_text, resolved_recipe, run_record, runs_recipe, say_pinned, suite_dir_name,
                         train_games, trained_on, without_seed, write_report_files)
from .suite_stats import iqm, iqm_interval
from .time_to_score import training_config

SUITES = {"atari5": ("ALE/BattleZone-v5", "ALE/DoubleDunk-v5", "ALE/NameThisGame-v5", "ALE/Phoenix-v5",
                     "ALE/Qbert-v5", "ALE/Pong-v5"),
          # the test suite's two catch games: a whole suite (stop, resume, report) in a minute
          "quick": ("tests.catch_env:Catch-v0", "tests.catch_env:CountingCatch-v0")}
# The games the IQM is taken over: the Atari-5 (Pong is there for its own target, not the IQM).
IQM_GAMES = ("BattleZone", "DoubleDunk", "NameThisGame", "Phoenix", "Qbert")
WINDOW = 250_000           # agent steps per window: one Dopamine iteration
ANCHORS_PATH = Path(__file__).with_name("atari_anchors.json")
def load_anchors() -> dict:
    with open(ANCHORS_PATH) as f:
        return json.load(f)


def pick_games(suite: str, games: str | None) -> list[str]:
    """The suite's env ids for ``--games A,B`` (game names, e.g. DoubleDunk,Phoenix), or all of them."""
    by_name = {game_name(env): env for env in SUITES[suite]}
    if not games:
        return list(by_name.values())
    names = [g.strip() for g in games.split(",") if g.strip()]
    unknown = [g for g in names if g not in by_name]
    if unknown or not names:
        raise ConfigError(f"--games {games}: {', '.join(unknown) or 'no game'} not in suite {suite}; choose from "
                          f"{', '.join(by_name)}")
    return [by_name[g] for g in names]


def check_suite_args(suite: str, train_args: list[str], steps: int, minutes: float | None,
                     seeds: str | None = None) -> list[int]:
    """Every game's options checked as the training script checks them, before any run starts;
    returns the seeds (``--seeds``, else the options' ``--seed``, else 1)."""
    if suite not in SUITES:
        raise ConfigError(f"--suite {suite}: unknown suite; choose one of {', '.join(SUITES)}, or mario")
    check_lengths(steps, minutes)
    check_own_flags(train_args)
    picked = parse_seeds(seeds, train_args)
    for env in SUITES[suite]:
        try:
            training_config(["--env", env, *train_args])
        except ConfigError as e:
            raise ConfigError(f"{env}: {e}") from None
    return picked


def check_lengths(steps: int, minutes: float | None) -> None:
    if steps <= 0:
        raise ConfigError(f"--steps {steps}: must be positive, e.g. --steps 500000")
    if minutes is not None and minutes <= 0:
        raise ConfigError(f"--minutes {minutes:g}: must be positive")


def check_own_flags(train_args: list[str]) -> None:
    for a in train_args:
        flag = a.split("=")[0]
        if flag in OWN_FLAGS:
            raise ConfigError(f"--suite sets {flag} for each game itself; give the length as --steps or --minutes "
                              "and the folder as --runs-dir")


def refuse_old_layout(suite_dir: Path, envs: list[str]) -> None:
    """A suite folder from before seeds held its games directly (``SUITE_DIR/GAME``): say how to
    move them rather than train the same games again beside them."""
    old = [game_name(e) for e in envs if (suite_dir / game_name(e)).is_dir()]
    if old:
        raise ConfigError(f"{suite_dir} holds games without a seed folder ({', '.join(old)}), as suites kept them "
                          f"before --seeds; move each into seedN/ for the seed it trained (1 unless its options "
                          f"gave --seed), e.g. mkdir {suite_dir}/seed1 && mv {suite_dir}/{old[0]} {suite_dir}/seed1/")


def run_suite(suite: str, train_args: list[str], steps: int, minutes: float | None, runs_dir: str,
              games: str | None = None, at_once: int = 1, seeds: str | None = None) -> Path:
    """Train every game and seed of the suite that has not finished, ``at_once`` at a time, seed by
    seed (only ``games``, in their order, where given: the suite's folder is the same, so a later
    run without them finishes the rest); returns the folder. Games trained side by side share the
    machine, so their minutes are not one game's alone; their agent steps, and so their windows, are."""
    picked = check_suite_args(suite, train_args, steps, minutes, seeds)
    envs = pick_games(suite, games)
    train_args = without_seed(train_args)
    suite_dir = Path(runs_dir).resolve() / suite_dir_name(suite, train_args)
    refuse_old_layout(suite_dir, list(SUITES[suite]))
    started = [d for d in sorted(suite_dir.glob("seed*/*")) if d.is_dir()]
    recipe = claim_suite_dir(suite_dir, {"suite": suite, "steps": steps, "minutes": minutes,
                                         "train_args": recipe_args(train_args)},
                             resolved_recipe(SUITES[suite][0], train_args), started)
    say_pinned("[SUITE]", envs[0], train_args, recipe)
    runs = [GameRun(env, game_dir(suite_dir, seed, env), pinned_args(env, [*train_args, "--seed", str(seed)], recipe),
                    f"[SUITE] {env} seed {seed}", f"{env} seed {seed}")
            for seed in picked for env in envs]
    if at_once > 1:
        print(f"[SUITE] {min(at_once, len(runs))} games at once: each game's minutes are its share of this machine",
              flush=True)

    def finished(run: GameRun, counters: dict) -> None:
        mark_done(run.run_dir, run.env, counters, at_once)
        print(f"[SUITE] {run.what}: done ({counters.get('agent_steps', 0):,} agent steps, "
              f"{counters.get('wall_s', 0) / 60:.1f} min)", flush=True)
    train_games(runs, steps, minutes, at_once, finished)
    return suite_dir


def seed_folders(suite_dir: Path, options: dict) -> dict[int, Path]:
    """Each seed's folder of games: ``seedN/``, or, in a folder from before seeds, the suite's own
    folder for the one seed its options gave."""
    found = {int(d.name[4:]): d for d in Path(suite_dir).glob("seed*") if d.is_dir() and d.name[4:].isdigit()}
    if found:
        return dict(sorted(found.items()))
    return {parse_seeds(None, options.get("train_args", []))[0]: Path(suite_dir)}


# ---------------------------------------------------------------------------------- the report

def window_scores(rows: list[dict], steps_done: int, window: int = WINDOW) -> list[dict]:
    """Per window of ``window`` agent steps: the mean return of the games that ended in it, how
    many, and whether the run covered the whole window (``steps_done`` is where it stopped)."""
    n = max(1, math.ceil(steps_done / window)) if steps_done else 0
    out = []
    for i in range(n):
        lo, hi = i * window, (i + 1) * window
        games = [r["return"] for r in rows if lo < r["agent_steps"] <= hi]
        out.append({"window": i + 1, "from": lo, "to": hi, "games": len(games),
                    "mean": sum(games) / len(games) if games else None, "complete": steps_done >= hi})
    return out


def human_normalized(score: float, random: float, human: float) -> float:
    return (score - random) / (human - random)


def seed_run(run_dir: Path, steps: int) -> dict:
    """One seed's run of one game: its windows, agent steps, minutes and how it shared the machine."""
    from pipeline.records.episodes import read_episodes
    from pipeline.records.metrics import most_other_runs

    try:
        rows = read_episodes(run_dir)  # episodes.jsonl, or the episodes.jsonl.gz a kept run has
    except FileNotFoundError:
        rows = []  # no game ended yet
    counters, _ = game_counters(run_dir)
    done = max(counters.get("agent_steps", 0), rows[-1]["agent_steps"] if rows else 0)
    points = [(r["agent_steps"], r["wall_s"]) for r in rows]
    if counters:
        points.append((counters["agent_steps"], counters["wall_s"]))
    wins = window_scores(rows, min(done, steps))  # a run overshoots its --steps by a few
    for w in wins:
        w["complete"] = done >= w["to"]
        w["minutes"] = minutes_at(points, w["to"]) if w["complete"] else None
    kept = read_json(run_dir / GAME_FILE, "a finished game's counters", f"delete {run_dir / GAME_FILE}") \
        if (run_dir / GAME_FILE).is_file() else {}
    return {"windows": wins, "agent_steps": done, "minutes": counters.get("wall_s", 0) / 60 if counters else None,
            "trained_on": trained_on(run_record(run_dir)), "games_at_once": kept.get("games_at_once", 1),
            "other_runs": most_other_runs(run_dir)}


def over_seeds(runs: dict[int, dict], n_windows: int) -> list[dict]:
    """Each window's mean over the seeds that finished it, their range, and how many did."""
    out = []
    for i in range(n_windows):
        done = [r["windows"][i] for r in runs.values() if len(r["windows"]) > i and r["windows"][i]["complete"]
                and r["windows"][i]["mean"] is not None]
        first = next((r["windows"][i] for r in runs.values() if len(r["windows"]) > i), {})
        means = [w["mean"] for w in done]
        mins = [w["minutes"] for w in done if w["minutes"] is not None]
        out.append({"window": i + 1, "from": first.get("from", i * WINDOW), "to": first.get("to", (i + 1) * WINDOW),
                    "games": sum(r["windows"][i]["games"] for r in runs.values() if len(r["windows"]) > i),
                    "seeds": len(done), "mean": sum(means) / len(means) if means else first.get("mean"),
                    "min": min(means) if means else None, "max": max(means) if means else None,
                    "complete": bool(done) and len(done) == len(runs),
                    "minutes": sum(mins) / len(mins) if mins else None})
    return out


def suite_report(suite_dir: str | Path, differs: Callable[[Path], list[str]] | None = None) -> dict:
    """Read every game's runs in the suite's folder, seed by seed: windows, minutes, and the IQM
    over games and seeds (with its interval) beside the anchors. A run of another recipe is in
    no figure (``left_out``: each, by its folder in the suite's, with the flags it trained with):
    ``differs(run_dir)`` names those flags ([] for a run that counts); by default each game's run
    record is compared with the suite's recipe (``suite.json``'s, else the one its games agree on)."""
    from .common import machine

    suite_dir = Path(suite_dir)
    options = read_json(suite_dir / SUITE_FILE, "the suite's options",
                        "delete it and run the suite again with the options its games trained with")
    recipe = options.pop("recipe", None)
    anchors = load_anchors()
    folders = seed_folders(suite_dir, options)
    every = [folder / game_name(env) for folder in folders.values() for env in SUITES[options["suite"]]
             if (folder / game_name(env)).is_dir()]
    if differs is None:
        suites = recipe if recipe is not None else runs_recipe(suite_dir, every)
        differs = partial(other_recipe, recipe=suites)
    left_out = {str(run.relative_to(suite_dir)): d for run in every if (d := differs(run))}
    games = {}
    for env in SUITES[options["suite"]]:
        name = game_name(env)
        runs = {seed: seed_run(folder / name, options["steps"]) for seed, folder in folders.items()
                if (folder / name).is_dir() and str((folder / name).relative_to(suite_dir)) not in left_out}
        n = max((len(r["windows"]) for r in runs.values()), default=0)
        a = anchors["games"].get(name, {"random": None, "human": None, "dopamine": {}})
        first = next(iter(runs.values()), {})
        games[name] = {"env": env, "random": a["random"], "human": a["human"], "windows": over_seeds(runs, n),
                       "seeds": {str(s): r for s, r in runs.items()}, "anchors": a["dopamine"],
                       "agent_steps": min((r["agent_steps"] for r in runs.values()), default=0),
                       "minutes": first.get("minutes"), "trained_on": first.get("trained_on"),
                       "games_at_once": max((r["games_at_once"] for r in runs.values()), default=1),
                       "other_runs": max((r["other_runs"] for r in runs.values()), default=0)}
    n_windows = max((len(g["windows"]) for g in games.values()), default=0)
    agents = list(anchors["games"][IQM_GAMES[0]]["dopamine"])
    iqms = [iqm_row(games, folders, i, anchors, agents) for i in range(n_windows)]
    return {"suite": options["suite"], "options": options, "recipe": recipe,
            "recipe_text": recipe_text(recipe, SUITES[options["suite"]][0]), "seeds": list(folders), "window": WINDOW,
            "left_out": left_out,
            "games": games, "iqm": iqms, "agents": agents, "anchor_source": anchors["dopamine"]["source"],
            "machine": machine()}


def iqm_row(games: dict, folders: dict, i: int, anchors: dict, agents: list[str]) -> dict:
    """Window ``i``'s IQM of human-normalized scores: ours over the Atari-5 games and the seeds
    that finished the window on every one of them, and each anchor's over its 5 seeds, each with
    its 95% stratified-bootstrap interval, computed the same way."""
    row = {"window": i + 1, "ours": None, "ours_low": None, "ours_high": None, "ours_games": 0, "ours_seeds": []}

    def score(g: dict, seed: str) -> float | None:
        r = g["seeds"].get(seed)
        if not r or len(r["windows"]) <= i or not r["windows"][i]["complete"] or r["windows"][i]["mean"] is None:
            return None
        return human_normalized(r["windows"][i]["mean"], g["random"], g["human"])
    iqm_games = [games[n] for n in IQM_GAMES if n in games]
    row["ours_games"] = sum(1 for g in iqm_games if any(score(g, str(s)) is not None for s in folders))
    seeds = [str(s) for s in folders if len(iqm_games) == len(IQM_GAMES)
             and all(score(g, str(s)) is not None for g in iqm_games)]
    if seeds:
        per_game = [[score(g, s) for s in seeds] for g in iqm_games]
        row["ours"] = iqm(per_game)
        if len(seeds) > 1:  # one run per game: every bootstrap draw is that run, a zero-width "interval"
            row["ours_low"], row["ours_high"] = iqm_interval(per_game)
        row["ours_seeds"] = [int(s) for s in seeds]
    for agent in agents:
        per_game = [[human_normalized(v, anchors["games"][n]["random"], anchors["games"][n]["human"])
                     for v in anchors["games"][n]["dopamine_seeds"][agent][i]]
                    for n in IQM_GAMES if i < len(anchors["games"][n]["dopamine_seeds"][agent])]
        whole = len(per_game) == len(IQM_GAMES)
        row[agent] = iqm(per_game) if whole else None
        row[f"{agent} low"], row[f"{agent} high"] = iqm_interval(per_game) if whole else (None, None)
    return row


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}"


def report_markdown(rep: dict) -> str:
    """The suite's table: per game and window, ours (minutes to the window's end in brackets)
    beside each anchor; then the IQM of human-normalized scores; then the count against CNN QR-DQN."""
    n = max((len(g["windows"]) for g in rep["games"].values()), default=0)
    labels = [f"{w * rep['window'] // 1000:,}k" for w in range(n + 1)]
    spans = [f"{labels[i]}-{labels[i + 1]}" for i in range(n)]
    agents = rep["agents"]
    seeds = rep.get("seeds") or [1]
    lines = [f"Suite {rep['suite']}: mean training return of the games that ended in each window of agent steps "
             f"(windows {', '.join(spans)}; ours: the mean over seeds {', '.join(map(str, seeds))}, their range "
             f"in square brackets where more than one finished it, minutes to the window's end in round brackets, "
             f"`*` = window not finished by every seed). Recipe: {rep.get('recipe_text') or 'not recorded'}"
             f" (options: {' '.join(rep['options']['train_args']) or 'none'}), "
             f"{rep['options']['steps']:,} agent steps a game" + (f" or {rep['options']['minutes']:g} min"
                                                                  if rep['options'].get('minutes') else "") + ".",
             "",
             "| game | random | human | ours | " + " | ".join(agents) + " |",
             "|---" * (4 + len(agents)) + "|"]
    for name, g in rep["games"].items():
        ours = " / ".join(_fmt(w["mean"]) + (f" [{_fmt(w['min'])}, {_fmt(w['max'])}]" if w.get("seeds", 1) > 1 else "")
                          + (f" ({w['minutes']:.0f} min)" if w["minutes"] is not None else "")
                          + ("" if w["complete"] else "*") for w in g["windows"]) or "-"
        anchors = [" / ".join(_fmt(v) for v in g["anchors"].get(a, [])[:max(n, 1)]) or "-" for a in agents]
        lines.append(f"| {name} | {_fmt(g['random'])} | {_fmt(g['human'])} | {ours} | " + " | ".join(anchors) + " |")
    def with_interval(r: dict, key: str, low: str, high: str) -> str:
        return (f"{_fmt(r[key])} [{_fmt(r[low])}, {_fmt(r[high])}]" if r.get(key) is not None and r.get(low) is not None
                else _fmt(r.get(key)))
    iq = [" / ".join(with_interval(r, "ours", "ours_low", "ours_high") for r in rep["iqm"])]
    iq += [" / ".join(with_interval(r, a, f"{a} low", f"{a} high") for r in rep["iqm"]) for a in agents]
    lines.append(f"| **IQM, human-normalized** ({', '.join(IQM_GAMES)}) | 0 | 1 | **{iq[0]}** | "
                 + " | ".join(iq[1:]) + " |")
    lines.append("")
    for r in rep["iqm"]:
        if r["ours"] is not None and r.get("ours_low") is not None and len(r["ours_seeds"]) > 1:
            lines.append(f"IQM {spans[r['window'] - 1]}: {_fmt(r['ours'])}, 95% stratified-bootstrap interval "
                         f"[{_fmt(r['ours_low'])}, {_fmt(r['ours_high'])}] over seeds "
                         f"{', '.join(map(str, r['ours_seeds']))} (each anchor's over its 5 seeds, the same way).")
        elif r["ours"] is not None:
            lines.append(f"IQM {spans[r['window'] - 1]}: {_fmt(r['ours'])} over seed {r['ours_seeds'][0]} (one seed: "
                         "no interval; two or more give one).")
    for i in range(n):
        wins = [name for name, g in rep["games"].items() if name in IQM_GAMES and len(g["windows"]) > i
                and g["windows"][i]["complete"] and g["windows"][i]["mean"] is not None
                and g["windows"][i]["mean"] > g["anchors"]["CNN QR-DQN"][i]]
        played = sum(1 for name, g in rep["games"].items() if name in IQM_GAMES and len(g["windows"]) > i
                     and g["windows"][i]["complete"])
        lines.append(f"Window {spans[i]}: ours (mean over seeds) above CNN QR-DQN on {len(wins)} of {played} "
                     "finished Atari-5 games"
                     + (f" ({', '.join(wins)})" if wins else "") + ".")
    if rep.get("left_out"):
        lines.append("Left out (another recipe than the suite's): "
                     + "; ".join(f"{run}, trained with {' '.join(d)}" for run, d in rep["left_out"].items()) + ".")
    lines.append("")
    machines: dict[str, list[str]] = {}
    for name, g in rep["games"].items():
        for seed, r in g.get("seeds", {"": g}).items():
            if r.get("trained_on"):
                machines.setdefault(r["trained_on"], []).append(name + (f" seed {seed}" if len(g["seeds"]) > 1 else ""))
    for where, names in machines.items():
        lines.append(f"Trained on: {where} ({', '.join(names)}).")
    shared = [f"{name} ({shared_with(g)})" for name, g in rep["games"].items() if shared_with(g)]
    if shared:
        lines.append(f"Trained side by side: {', '.join(shared)}; their minutes are each a share of the machine, "
                     "their windows (per agent step) as alone.")
    lines.append(f"Anchors: {rep['anchor_source']} (5 seeds, sticky actions 0.25, full action set).")
    return "\n".join(lines)


def shared_with(game: dict) -> str | None:
    """How a game's run shared the machine, from what it recorded: the suite's --games-at-once, and
    the most other training runs any of its epochs ended beside (a second suite process, a run
    started by hand); None when it trained alone."""
    at_once, others = game.get("games_at_once", 1), game.get("other_runs", 0)
    if others > at_once - 1:
        return f"up to {others} other training run{'s' if others > 1 else ''} beside it"
    return f"{at_once} at once" if at_once > 1 else None


def plot_suite(rep: dict, path: str | Path) -> None:
    """One panel per game (ours and the anchors per window, on agent steps) and one for the IQM."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from pipeline.records.curves import format_steps

    from .time_to_score import machine_label

    names = list(rep["games"])
    cols = 4
    rows = math.ceil((len(names) + 1) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows))
    axes = axes.ravel()
    n = max((len(g["windows"]) for g in rep["games"].values()), default=0)
    mid = [(i + 0.5) * rep["window"] for i in range(max(n, 1))]
    styles = {a: s for a, s in zip(rep["agents"], ("o:", "s:", "^--", "v--", "d--"))}
    for ax, name in zip(axes, names):
        g = rep["games"][name]
        for a in rep["agents"]:
            if a in g["anchors"]:
                ax.plot(mid, g["anchors"][a][:len(mid)], styles[a], lw=1, ms=3, label=f"Dopamine {a}")
        pts = [(m, w["mean"]) for m, w in zip(mid, g["windows"]) if w["mean"] is not None]
        if pts:
            ax.plot(*zip(*pts), "k-o", lw=2, ms=5, label="ours")
        if g["random"] is not None:
            ax.axhline(g["random"], color="gray", lw=0.8, ls="-.", label="random")
        ax.set_title(name, fontsize=10)
        ax.xaxis.set_major_formatter(FuncFormatter(format_steps))
        ax.grid(alpha=0.3)
    ax = axes[len(names)]
    for a in rep["agents"]:
        pts = [(m, r[a]) for m, r in zip(mid, rep["iqm"]) if r[a] is not None]
        if pts:
            ax.plot(*zip(*pts), styles[a], lw=1, ms=3, label=f"Dopamine {a}")
    pts = [(m, r["ours"]) for m, r in zip(mid, rep["iqm"]) if r["ours"] is not None]
    if pts:
        ax.plot(*zip(*pts), "k-o", lw=2, ms=5, label="ours")
    ax.set_title("IQM, human-normalized (Atari-5)", fontsize=10)
    ax.xaxis.set_major_formatter(FuncFormatter(format_steps))
    ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    for extra in axes[len(names) + 1:]:
        extra.axis("off")
    fig.legend(handles, labels, loc="lower right", fontsize=8)
    fig.supxlabel("agent steps (each point: the mean training return of the games in its 250k window)", fontsize=9)
    fig.suptitle(f"Suite {rep['suite']} ({machine_label(rep['machine'])})", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_report(suite_dir: str | Path) -> dict:
    """The report's JSON, Markdown table and plot, written into the suite's folder."""
    rep = suite_report(suite_dir)
    return write_report_files(Path(suite_dir), rep, report_markdown(rep), plot_suite)
