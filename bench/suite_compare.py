"""``--compare DIR DIR ...``: Mario suite folders of one stage, each a recipe, side by side at equal
agent steps, the way one change is judged (docs/notebook.md): per periodic evaluation, the flags
greedy and at epsilon 0.05 and the greedy games that stood still until cut, of the screening and of
the confirmation a new best started; then, up to the agent steps every run reached, each run's
first greedy flag, its best confirmation, and its greedy evaluation games that stood still; and
what its exploring training games did per 100k agent steps (how many, how many at the flag, the
share of their agent steps in games that stood until the clock nearly ran out, and the games a
stall rule ended), which is what a change to the learning episode acts on.

Evaluations fall near, not on, their interval after a resume (457,425 where 450,000 was due), so a
row takes each run's evaluation nearest its multiple of the interval. Only seeds every folder
trained are compared; the figures come from the runs' own records (``bench.suite_mario.flag_curve``),
so a folder can be compared while its run trains."""
from __future__ import annotations

from pathlib import Path

from config_optimized import ConfigError

DEFAULT_INTERVAL = 50_000  # the preset's eval_interval: where a folder's recipe does not say
TRAINING_BIN = 100_000  # agent steps per row of the training games' table
# A game that crosses a stage lasts ~300-800 agent steps (1-2, the longest of the stages run so
# far, at most ~800); one of 1,000 or more stood somewhere for hundreds of steps, and a pocket
# that right_run cannot leave holds the game until the clock runs out (~2,000).
LONG_GAME = 1_000


def compare_suites(suite_dirs: list[str | Path]) -> dict:
    """Each folder's report (``bench.suite_mario.mario_report``), checked to be one stage, and the
    seeds they share, aligned by evaluation. Raises ConfigError naming a folder that is not a
    Mario suite's, folders of different stages, or folders that share no seed."""
    from .suite_mario import mario_report
    from .suite_runs import SUITE_FILE, game_dir

    if len(suite_dirs) < 2:
        raise ConfigError(f"--compare takes two or more Mario suite folders, got {len(suite_dirs)}: "
                          f"give each recipe's folder, e.g. --compare runs/suite-mario-1-2 "
                          f"runs/suite-mario-1-2_stall-steps_10_stall-penalty_25")
    reps = {}
    for d in map(Path, suite_dirs):
        if not (d / SUITE_FILE).is_file():
            raise ConfigError(f"{d} has no {SUITE_FILE}: not a suite folder; give the folders "
                              f"`benchmark_performance.py --suite mario` trains in (runs/suite-mario-...)")
        rep = mario_report(d)
        if rep["options"].get("suite") != "mario":
            raise ConfigError(f"{d} is a {rep['options'].get('suite')} suite's folder; --compare compares Mario stages")
        reps[str(d)] = rep
    stages = {rep["env"] for rep in reps.values()}
    if len(stages) > 1:
        raise ConfigError(f"--compare judges recipes on one stage, and these folders trained "
                          f"{', '.join(sorted(stages))}: give the folders of one stage")
    seeds = sorted(set.intersection(*(set(rep["seeds"]) for rep in reps.values())), key=int)
    if not seeds:
        raise ConfigError("the folders share no trained seed: " + "; ".join(
            f"{d}: {', '.join(rep['seeds']) or 'none'}" for d, rep in reps.items()))
    interval = next((rep["recipe"] or {}).get("eval_interval") for rep in reps.values()) or DEFAULT_INTERVAL
    env = stages.pop()
    cmp = {"env": env, "interval": interval, "seeds": {
        seed: compare_seed({d: rep["seeds"][seed] for d, rep in reps.items()}, interval) for seed in seeds},
        "recipes": {d: rep["recipe_text"] for d, rep in reps.items()}}
    for seed, s in cmp["seeds"].items():
        s["training"] = {d: training_games(game_dir(d, seed, env), s["common_agent_steps"])
                         for d in reps}
    return cmp


def compare_seed(runs: dict[str, dict], interval: int) -> dict:
    """One seed's runs (``seed_report``s by folder): their evaluations by the multiple of
    ``interval`` each lies nearest, and each run's figures up to the agent steps all reached."""
    common = min(run["agent_steps"] for run in runs.values())
    rows: dict[int, dict[str, dict]] = {}
    for d, run in runs.items():
        for point in run["curve"]:
            at = round(point["agent_steps"] / interval) * interval
            rows.setdefault(at, {}).setdefault(d, point)  # a second evaluation near one mark: the first stands
    return {"common_agent_steps": common, "rows": dict(sorted(rows.items())),
            "upto": {d: upto(run["curve"], common) for d, run in runs.items()}}


def upto(curve: list[dict], agent_steps: int) -> dict:
    """A run's evaluations up to ``agent_steps``: its first greedy flag, its best confirmation
    (greedy flags, then those at epsilon) and where it was, and its greedy games that stood
    still until cut, of its greedy games and of those that missed the flag."""
    from .suite_mario import first_greedy_flag

    points = [p for p in curve if p["agent_steps"] <= agent_steps]
    ways = [f for p in points for f in (p["screen"], p["confirm"]) if f is not None]
    confirmed = [(p["confirm"]["greedy"] / p["confirm"]["greedy_games"], p["confirm"]["noisy"] / p["confirm"]["games"],
                  p) for p in points if p["confirm"] and p["confirm"]["greedy_games"]]
    best = max(confirmed, key=lambda c: c[:2], default=None)
    if best is not None and not (best[0] or best[1]):  # no confirmation reached the flag: none is best
        best = None
    recorded = all(f.get("greedy_stood") is not None for f in ways)
    return {"first_greedy_flag": first_greedy_flag(points),
            "best_confirmation": None if best is None else {"agent_steps": best[2]["agent_steps"], **best[2]["confirm"]},
            "greedy_games": sum(f["greedy_games"] for f in ways),
            "greedy_flags": sum(f["greedy"] for f in ways),
            "greedy_stood": sum(f["greedy_stood"] for f in ways) if recorded else None}


def training_games(run_dir: Path, agent_steps: int) -> list[dict]:
    """A run's exploring training games (episodes.jsonl) and its stall rule's ends (metrics.jsonl's
    per-epoch ``stalls``) per ``TRAINING_BIN`` agent steps up to ``agent_steps``, each row: the
    bin's agent steps, the games that ended in it, those at the flag, the share of their agent
    steps in games of ``LONG_GAME`` or more, and the stall rule's ends and cuts (0 without one)."""
    from pipeline.records.metrics import read_metrics

    from .results import episodes

    games = episodes(run_dir)
    try:
        epochs = read_metrics(run_dir)
    except FileNotFoundError:  # a run that has ended no epoch yet
        epochs = []
    rows = []
    for lo in range(0, agent_steps, TRAINING_BIN):
        hi = min(lo + TRAINING_BIN, agent_steps)
        inside = [g for g in games if lo < g["agent_steps"] <= hi]
        steps = sum(g["length"] for g in inside)
        rows.append({"from": lo, "to": hi, "games": len(inside), "flags": sum(bool(g.get("flag")) for g in inside),
                     "long_share": sum(g["length"] for g in inside if g["length"] >= LONG_GAME) / steps if steps else None,
                     "stalls": sum(e.get("stalls", 0) for e in epochs if lo < e["agent_steps"] <= hi)})
    return rows


def training_cell(row: dict) -> str:
    long = "-" if row["long_share"] is None else f"{row['long_share']:.0%}"
    return f"{row['games']:,} games, {row['flags']:,} at the flag, {long} in long games, stall rule {row['stalls']:,}"


def compare_markdown(cmp: dict) -> str:
    """The comparison as Markdown: the recipes by letter, then per seed a row per evaluation and
    the figures up to the agent steps every run reached."""
    from .suite_mario import flags_cell

    names = list(cmp["recipes"])
    letter = {d: chr(ord("A") + i) for i, d in enumerate(names)}
    lines = [f"{cmp['env']}, recipes side by side at equal agent steps:", ""]
    lines += [f"- {letter[d]}: {d} ({cmp['recipes'][d]})" for d in names]
    for seed, s in cmp["seeds"].items():
        lines += ["", f"Seed {seed}: flags greedy (greedy games that stood still until cut), at epsilon 0.05; "
                      f"each evaluation at its nearest {cmp['interval']:,} agent steps.", "",
                  "| agent steps | " + " | ".join(f"{letter[d]} screening | {letter[d]} confirmation" for d in names) + " |",
                  "|---|" + "---|---|" * len(names)]
        for at, cells in s["rows"].items():
            row = []
            for d in names:
                p = cells.get(d)
                row += [flags_cell(p and p["screen"]), flags_cell(p and p["confirm"])]
            lines.append(f"| {at:,} | " + " | ".join(row) + " |")
        common = s["common_agent_steps"]
        lines += ["", f"Up to {common:,} agent steps (the fewest any of them reached):", "",
                  "| recipe | first greedy flag | best confirmation (greedy, at 0.05) | greedy games that stood still |",
                  "|---|---|---|---|"]
        for d in names:
            u = s["upto"][d]
            b = u["best_confirmation"]
            best = "no flag" if b is None else (f"{b['greedy']}/{b['greedy_games']}, {b['noisy']}/{b['games']} "
                                          f"at {b['agent_steps']:,}")
            stood = "not recorded" if u["greedy_stood"] is None else (
                f"{u['greedy_stood']} of {u['greedy_games']} ({u['greedy_games'] - u['greedy_flags']} missed the flag)")
            first = "-" if u["first_greedy_flag"] is None else f"{u['first_greedy_flag']:,}"
            lines.append(f"| {letter[d]} | {first} | {best} | {stood} |")
        lines += ["", f"Exploring training games per {TRAINING_BIN:,} agent steps: how many ended, how many at the "
                      f"flag, the share of their agent steps in games of {LONG_GAME:,}+ agent steps (games that stood "
                      f"still for hundreds of steps), and the learning episodes a stall rule ended or cut:", "",
                  "| agent steps | " + " | ".join(letter[d] for d in names) + " |", "|---|" + "---|" * len(names)]
        for i, row in enumerate(s["training"][names[0]]):
            cells = [training_cell(s["training"][d][i]) for d in names]
            lines.append(f"| {row['from'] // 1000:,}k-{row['to'] // 1000:,}k | " + " | ".join(cells) + " |")
    return "\n".join(lines)
