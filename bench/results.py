"""The results of record: ``python benchmark_performance.py --results`` writes docs/results.md and
the README's table from the run data committed under docs/data/, and nothing else.

Each source below names its runs' folders and the command that reproduces them. A run counts only
where the recipe its run record says it started with (every setting that decides what it learns
per agent step, bench/suite_runs.py) equals what that command resolves to today: a figure of
another recipe is left out, and the page lists it with the settings that differ. Each figure
names its seeds, the CPU (or GPU) model and precision, and the commit it ran at."""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from .suite_runs import NOT_RECIPE, as_flag_value, read_json, recipe_flags, recorded_recipe, resolved_recipe, run_record

DOCS = Path(__file__).resolve().parent.parent / "docs"
DATA = DOCS / "data"
RESULTS = DOCS / "results.md"
README = DOCS.parent / "README.md"
BEGIN, END = "<!-- results table: written by benchmark_performance.py --results -->", "<!-- end of results table -->"
TARGET_PONG = 18.0
LAST = 20  # games in the rolling mean a Pong score is


@dataclasses.dataclass(frozen=True)
class Source:
    """One result of record: its runs (folders under docs/data, one per seed), the game and the
    options of the command that made them, and that command as a user types it."""
    title: str
    kind: str                 # "atari_suite", "pong_long", "time_to_score", "mario_suite", "mario_stages"
    runs: tuple[str, ...]     # folders under docs/data (a suite: its folder)
    env: str
    args: tuple[str, ...]
    command: str


SOURCES = (
    Source("The Atari-5 suite and Pong at 500k agent steps", "atari_suite", ("suite_atari5_noddqn",),
           "ALE/Pong-v5", (), "python benchmark_performance.py --suite atari5 --seeds 1,2,3 --games-at-once 2"),
    Source("Pong `ALE/Pong-v5` (sticky actions 0.25) to 1.3M agent steps", "pong_long",
           ("pong_v5_noddqn_xeon207_seed1", "pong_v5_noddqn_zen5_seed2"), "ALE/Pong-v5", (),
           "python mario_rl_optimized.py --env ALE/Pong-v5 --total-steps 1300000 --seed N"),
    Source("Pong without sticky actions to +18", "time_to_score",
           ("tts_pong_v5_nosticky_zen5_noddqn_seed1", "tts_pong_v5_nosticky_zen5_noddqn_seed2"), "ALE/Pong-v5",
           ("--sticky-actions", "0"),
           "python benchmark_performance.py --time-to-score --env ALE/Pong-v5 --sticky-actions 0 --seed N"),
    Source("Mario 1-1", "mario_suite", ("suite_mario",), "SuperMarioBros-1-1-v0", (),
           "python benchmark_performance.py --suite mario --seeds 1,2,3"),
    # a stage's suite folder under docs/data/suite_mario_stages (suite-mario-4-1, ...): its env is its own
    Source("Mario beyond 1-1: other stages, a fresh run of the preset each", "mario_stages", ("suite_mario_stages",),
           "", (), "python benchmark_performance.py --suite mario --stages 4-1 --seeds 1"),
)


def run_facts(run_dir: Path) -> dict:
    """Seed, machine, precision and commit of a run, from its run record (its first start's)."""
    record = run_record(run_dir)
    first = (record.get("previous") or [record])[0]
    cfg, hw = first.get("config", {}), first.get("hardware", {})
    where = first.get("hardware_summary", "?").split("; RAM")[0].removeprefix("CPU: ")
    precision = ("fp16" if hw.get("cuda") else "bf16") if cfg.get("amp") else "fp32"
    return {"seed": cfg.get("seed"), "machine": re.sub(r", \d+ cores.*", "", where), "precision": precision,
            "commit": str(first.get("git_commit", "?"))[:7]}


def where_trained(runs: list[Path]) -> str:
    """The machine, precision and commit of each run's first start, the runs (seed and game: each
    folder's name) grouped under them: "AMD EPYC (...), fp32, commit 6eff6d1 (seed 3: Phoenix, Qbert)"."""
    groups: dict[str, dict] = {}
    for run in runs:
        f = run_facts(run)
        key = f"{f['machine']}, {f['precision']}, commit {f['commit']}"
        groups.setdefault(key, {}).setdefault(f["seed"], []).append(run.name)
    return "; ".join(f"{key} ({'; '.join(f'seed {seed}: ' + ', '.join(games) for seed, games in sorted(by.items()))})"
                     for key, by in sorted(groups.items()))


def recipe_differs(run_dir: Path, env: str, args: tuple[str, ...]) -> list[str]:
    """The flags that would make today's command train as ``run_dir`` did; [] where they are the same.
    The collection settings a hardware profile picks (collectors, envs, replay size) are compared
    as this machine's profile resolves them, so a GPU run differs there by its profile alone."""
    rec = recorded_recipe(run_dir)
    if rec is None:
        return ["(no run record)"]
    now = resolved_recipe(env, list(args))
    return recipe_flags({k: v for k, v in rec.items() if k not in NOT_RECIPE}, now)


def episodes(run_dir: Path) -> list[dict]:
    from pipeline.records.episodes import read_episodes

    try:
        return read_episodes(run_dir)
    except FileNotFoundError:
        return []


def first_reached(rows: list[dict], target: float, n: int = LAST) -> dict | None:
    """The game at whose end the mean return of the last ``n`` games first reached ``target``."""
    window: list[float] = []
    for r in rows:
        window = (window + [r["return"]])[-n:]
        if len(window) == n and sum(window) / n >= target:
            return r
    return None


def rolling(rows: list[dict], n: int = LAST) -> list[tuple[int, float]]:
    out, window = [], []
    for r in rows:
        window = (window + [r["return"]])[-n:]
        if len(window) == n:
            out.append((r["agent_steps"], sum(window) / n))
    return out


def fmt(x) -> str:
    return "-" if x is None else f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}"


def signed(x) -> str:
    return "-" if x is None else f"{x:+.2f}"


def seeds_text(facts: list[dict]) -> str:
    """"seeds 1 (Xeon ..., bf16, abc1234), 2 (...)"."""
    return "; ".join(f"seed {f['seed']}: {f['machine']}, {f['precision']}, commit {f['commit']}" for f in facts)


# ------------------------------------------------------------------------------ each kind

def pong_seeds(suite_runs: dict[str, dict]) -> tuple[dict[int, dict], str]:
    """Pong's seeds for the suite's row: the suite's own runs, and for each seed it lacks the first
    500k agent steps of a run to 1.3M of the same recipe (the "pong_long" source; its seed from
    its run record), and the sentence that says which seeds came from there."""
    from . import suite as S

    seeds = {int(k): r for k, r in suite_runs.items()}
    borrowed = []
    for run in (DATA / r for s in SOURCES if s.kind == "pong_long" for r in s.runs):
        seed = run_facts(run)["seed"]
        if seed not in seeds and not recipe_differs(run, "ALE/Pong-v5", ()):
            seeds[seed] = S.seed_run(run, 500_000)
            borrowed.append(seed)
    if not borrowed:
        return dict(sorted(seeds.items())), ""
    which = ", ".join(str(s) for s in sorted(borrowed))
    return (dict(sorted(seeds.items())),
            f" (Pong seed{'s' if len(borrowed) > 1 else ''} {which}: the first 500k agent steps of the runs to 1.3M, below)")


def atari_suite(src: Source) -> dict:
    from . import suite as S

    suite_dir = DATA / src.runs[0]
    # a run of another recipe than today's command is in no figure: the report leaves it out
    rep = S.suite_report(suite_dir, lambda run: recipe_differs(run, S.SUITES["atari5"][0], src.args))
    other = {str((suite_dir / run).relative_to(DATA)): d for run, d in rep["left_out"].items()}
    folders = S.seed_folders(suite_dir, rep["options"])
    runs = [folder / g for folder in folders.values() for g in rep["games"]
            if (folder / g).is_dir() and str((folder / g).relative_to(suite_dir)) not in rep["left_out"]]
    trained_on = where_trained(runs)
    lines = ["| game | ours, 250k-500k (mean over seeds) | Dopamine CNN QR-DQN | Impala QR-DQN |", "|---|---|---|---|"]
    above = 0
    pong, pong_from = pong_seeds(rep["games"]["Pong"]["seeds"])
    if pong:
        rep["games"]["Pong"]["windows"] = S.over_seeds(pong, 2)
    for name, g in rep["games"].items():
        w = g["windows"][1] if len(g["windows"]) > 1 else None
        ours = w["mean"] if w and w["complete"] else None
        cnn, impala = g["anchors"].get("CNN QR-DQN", [None] * 2)[1], g["anchors"].get("Impala QR-DQN", [None] * 2)[1]
        if name in S.IQM_GAMES and ours is not None and ours > cnn:
            above += 1
        span = f" [{fmt(w['min'])}, {fmt(w['max'])}]" if w and w.get("seeds", 1) > 1 else ""
        lines.append(f"| {name} | {fmt(ours)}{span} ({w['seeds'] if w else 0} seed{'s' if w and w['seeds'] != 1 else ''}) "
                     f"| {fmt(cnn)} | {fmt(impala)} |")
    row = rep["iqm"][1] if len(rep["iqm"]) > 1 else {}
    bounds = ((row["ours_low"], row["ours_high"])
              if row.get("ours_low") is not None and len(row.get("ours_seeds", [])) > 1 else None)
    interval = f", 95% interval [{bounds[0]:.2f}, {bounds[1]:.2f}]" if bounds else ""
    iqm = (f"IQM of human-normalized scores (BattleZone, DoubleDunk, NameThisGame, Phoenix, Qbert), 250k-500k: "
           f"**{row['ours']:.2f}**{interval} over seed{'s' if len(row['ours_seeds']) > 1 else ''} "
           f"{', '.join(map(str, row['ours_seeds']))}; Dopamine (5 seeds each, the interval computed the same way) "
           + ", ".join(f"{a} {row[a]:.2f} [{row[a + ' low']:.2f}, {row[a + ' high']:.2f}]"
                       for a in ("CNN QR-DQN", "CNN IQN", "Impala QR-DQN")) + "."
           if row.get("ours") is not None else "IQM: not every Atari-5 game has finished its 250k-500k window.")
    return {"lines": lines + ["", iqm, f"Above CNN QR-DQN on {above} of 5 Atari-5 games{pong_from}.",
                              f"Trained on: {trained_on}."],
            "other": other, "summary": {"iqm": row.get("ours"), "bounds": bounds, "seeds": row.get("ours_seeds", []),
                                        "above": above, "cnn": row.get("CNN QR-DQN")}}


def todays_runs(src: Source, other: dict):
    """(games, facts) of each of ``src``'s runs whose recipe is today's; the rest go into ``other``
    with the flags that would train them."""
    for name in src.runs:
        run = DATA / name
        if d := recipe_differs(run, src.env, src.args):
            other[name] = d
            continue
        yield episodes(run), run_facts(run)


def pong_long(src: Source) -> dict:
    lines = ["| seed | last-20 mean at 250k / 500k / 1M / 1.3M agent steps | +15 first at | best | machine |",
             "|---|---|---|---|---|"]
    other, kept = {}, []
    for rows, f in todays_runs(src, other):
        roll = rolling(rows)
        at = [next((m for s, m in roll if s >= x), None) for x in (250_000, 500_000, 1_000_000)] + \
             [roll[-1][1] if roll and roll[-1][0] >= 1_290_000 else None]
        hit = first_reached(rows, 15.0)
        best = max((m for _, m in roll), default=None)
        kept.append({"seed": f["seed"], "hit": hit["agent_steps"] if hit else None, "best": best, "end": at[3]})
        lines.append(f"| {f['seed']} | {' / '.join(signed(x) for x in at)} | "
                     + (f"{hit['agent_steps']:,} agent steps" if hit else "not reached")
                     + f" | {signed(best)} | {f['machine']}, {f['precision']}, commit {f['commit']} |")
    return {"lines": lines, "other": other, "summary": kept}


def time_to_score(src: Source) -> dict:
    lines = ["| seed | +18 at (minutes, agent steps) | agent steps/s | machine |", "|---|---|---|---|"]
    other, kept = {}, []
    for rows, f in todays_runs(src, other):
        hit = first_reached(rows, TARGET_PONG)
        rate = hit["agent_steps"] / hit["wall_s"] if hit else None
        kept.append({"seed": f["seed"], "minutes": hit["wall_s"] / 60 if hit else None,
                     "steps": hit["agent_steps"] if hit else None, "machine": f"{f['machine']}, {f['precision']}"})
        lines.append(f"| {f['seed']} | " + (f"{hit['wall_s'] / 60:.1f} min, {hit['agent_steps']:,}" if hit else
                                           "not reached") +
                     f" | {fmt(rate)} | {f['machine']}, {f['precision']}, commit {f['commit']} |")
    return {"lines": lines, "other": other, "summary": kept}


def mario_suite(src: Source) -> dict:
    from . import suite_mario as M

    suite_dir = DATA / src.runs[0]
    if not (suite_dir / "suite.json").is_file():
        return {"lines": ["No Mario suite run of today's defaults is in docs/data yet."], "other": {},
                "summary": []}
    # a seed of another recipe than today's command is in no figure: the report leaves it out
    rep = M.mario_report(suite_dir, lambda run: recipe_differs(run, src.env, src.args))
    other = {str((suite_dir / run).relative_to(DATA)): d for run, d in rep["left_out"].items()}
    if not rep["seeds"]:
        return {"lines": [f"No figure of today's recipe yet: {none_kept(rep['left_out'], src)}."], "other": other,
                "summary": []}
    lines, kept = M.mario_markdown(rep, curves=False, left_out=False).splitlines(), []
    for seed in rep["seeds"]:
        one = rep["seeds"][seed]
        p = one["plays"] or {}
        kept.append({"seed": seed, "greedy": (p.get("greedy") or {}).get("flags"),
                     "noisy": (p.get("noisy") or {}).get("flags"), "episodes": p.get("episodes"),
                     "kept_at": one["kept_agent_steps"]})
    return {"lines": lines, "other": other, "summary": kept}


def none_kept(left_out: dict[str, list[str]], src: Source) -> str:
    """Why a suite of record gives no figure: its runs (``left_out``: "seedN/GAME" -> the flags
    each trained with) all trained another recipe, with those flags beside today's values where
    every run differs the same way; or it has no run."""
    seeds = sorted(int(Path(run).parent.name[4:]) for run in left_out)
    if not seeds:
        return "no seed of the suite has trained yet"
    ways = {tuple(d) for d in left_out.values()}
    how = ""
    if len(ways) == 1:
        flags, today = list(ways.pop()), resolved_recipe(src.env, list(src.args))
        now = [f"{f} {as_flag_value(today[f.lstrip('-').replace('-', '_')])}" for f in flags[0::2]]
        how = f" ({' '.join(flags)}; today's command trains {' '.join(now)})"
    return (f"the suite's runs on record (seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}) trained "
            f"another recipe{how}, each listed under \"Runs left out\" below")


def mario_stages(src: Source) -> dict:
    """A row per stage and seed of the stage suites kept under ``src.runs[0]`` (each judged
    against today's command on its own stage), beside the one-recipe R2D2 agent."""
    from . import suite_mario as M

    folders = sorted(d for d in (DATA / src.runs[0]).glob("suite-mario*") if (d / "suite.json").is_file())
    reps, other = [], {}
    for suite_dir in folders:
        env = read_json(suite_dir / "suite.json", "the suite's options", f"delete {suite_dir}")["env"]
        rep = M.mario_report(suite_dir, lambda run, env=env: recipe_differs(run, env, src.args))
        other.update({str((suite_dir / run).relative_to(DATA)): d for run, d in rep["left_out"].items()})
        if rep["seeds"]:
            reps.append(rep)
    if not reps:
        return {"lines": ["No stage run of today's defaults is in docs/data yet."], "other": other, "summary": []}
    kept = []
    for rep in reps:
        for seed, one in rep["seeds"].items():
            p = one["plays"] or {}
            greedy = p.get("greedy")
            kept.append({"stage": M.stage_name(rep["env"]), "seed": seed, "done": one["done"],
                         "agent_steps": one["agent_steps"], "kept_at": one["kept_agent_steps"],
                         "first_flag": one["first_flag_agent_steps"],
                         "greedy": greedy["flags"] if greedy else None,
                         "games": len(greedy["games"]) if greedy else None,
                         "r2d2": M.stage_anchors()["agent_steps_to_first_greedy_flag"].get(M.stage_name(rep["env"]))})
    machines = sorted({f"{where} ({M.stage_name(rep['env'])} seed {seed})" for rep in reps
                       for seed, one in rep["seeds"].items() if (where := one["trained_on"])})
    return {"lines": M.stages_markdown(reps).splitlines() + ["", f"Trained on: {'; '.join(machines)}."],
            "other": other, "summary": kept}


def stages_row(rows: list[dict]) -> str:
    """The README's words for the stages: each stage's kept weights replayed greedy, when they
    were kept and when the first greedy flag came, beside the R2D2 agent's agent steps."""
    def one(r: dict) -> str:
        if r["greedy"] is None:
            return (f"{r['stage']}: training ({r['agent_steps'] // 1000}k agent steps"
                    + (f"; first greedy flag at {r['first_flag'] // 1000}k" if r["first_flag"] else "") + ")")
        return (f"{r['stage']}: the flag in {r['greedy']} of {r['games']} fresh greedy games (kept at "
                f"{r['kept_at'] // 1000}k agent steps; first greedy flag at "
                + (f"{r['first_flag'] // 1000}k" if r["first_flag"] else "-")
                + (f", R2D2 {r['r2d2'] / 1e6:.2f}M" if r["r2d2"] else "") + ")"
                + ("" if r["done"] else f", not finished at {r['agent_steps'] // 1000}k"))
    return "; ".join(one(r) for r in rows)


KINDS = {"atari_suite": atari_suite, "pong_long": pong_long, "time_to_score": time_to_score,
         "mario_suite": mario_suite, "mario_stages": mario_stages}


def collect() -> list[tuple[Source, dict]]:
    return [(src, KINDS[src.kind](src)) for src in SOURCES]


def mario_row(done: list[dict]) -> str:
    """The README's words for the Mario suite's seeds whose kept weights were played again."""
    at = [r["kept_at"] for r in done if r.get("kept_at") is not None]
    span = f"{min(at) // 1000}k" + (f"-{max(at) // 1000}k" if max(at) // 1000 != min(at) // 1000 else "") if at else ""
    when = f" (weights kept at {span} agent steps)" if at else ""
    whose = "each seed's kept weights" if len(done) > 1 else "the kept weights"
    counts = {r["episodes"] for r in done}
    if len(counts) == 1:  # one count for every seed: said once
        return (f"{whose}, played again on {counts.pop()} fresh games: the flag in "
                f"{', '.join(str(r['greedy']) for r in done)} greedy, "
                f"{', '.join(str(r['noisy']) for r in done)} at epsilon 0.05{when}")

    def each(how: str) -> str:  # seeds played on different counts: each over its own games
        return ", ".join(f"{r[how]}/{r['episodes']}" for r in done)
    return (f"{whose}, played again on fresh games: the flag in {each('greedy')} greedy, "
            f"{each('noisy')} at epsilon 0.05{when}")


def readme_table(results: list[tuple[Source, dict]]) -> str:
    """The README's short table: one line a source, from the same figures as results.md."""
    out = [BEGIN, "| with the defaults | what they give | seeds |", "|---|---|---|"]
    for src, res in results:
        s = res["summary"]
        if src.kind == "atari_suite":
            interval = f", 95% interval [{s['bounds'][0]:.2f}, {s['bounds'][1]:.2f}]," if s["bounds"] else ""
            what = (f"IQM {s['iqm']:.2f}{interval} of human-normalized scores at 250k-500k agent steps (Dopamine's "
                    f"CNN QR-DQN {s['cnn']:.2f}); above CNN QR-DQN on {s['above']} of 5 games"
                    if s["iqm"] is not None else "-")
            seeds = ", ".join(map(str, s["seeds"])) or "-"
        elif src.kind == "pong_long":
            hits = [r["hit"] for r in s if r["hit"]]
            what = (f"+15 (last-20 mean) within {max(hits) / 1e6:.2f}M agent steps on {len(hits)} of {len(s)} seeds; "
                    f"best {max(r['best'] for r in s):+.2f}" if s else "-")
            seeds = ", ".join(str(r["seed"]) for r in s) or "-"
        elif src.kind == "time_to_score":
            hit = [r for r in s if r["minutes"] is not None]
            what = (f"+18 in {min(r['minutes'] for r in hit):.1f}-{max(r['minutes'] for r in hit):.1f} min "
                    f"({min(r['steps'] for r in hit) // 1000}k-{max(r['steps'] for r in hit) // 1000}k agent steps) "
                    f"on {'; '.join(sorted({r['machine'] for r in hit}))}" if hit else "-")
            seeds = ", ".join(str(r["seed"]) for r in s) or "-"
        elif src.kind == "mario_stages":
            what = stages_row(s) if s else "not yet measured"
            seeds = ", ".join(sorted({f"{r['stage']}: {r['seed']}" for r in s})) or "-"
        else:
            done = [r for r in s if r["greedy"] is not None]
            what = (mario_row(done) if done else
                    "not measured with today's defaults yet (the runs on record trained another recipe)" if res["other"]
                    else "not yet measured on the Mario suite")
            seeds = ", ".join(str(r["seed"]) for r in done) or "-"
        out.append(f"| [{src.title}](docs/results.md) | {what} | {seeds} |")
    out.append(END)
    return "\n".join(out)


def results_markdown(results: list[tuple[Source, dict]]) -> str:
    out = ["# Results of record",
           "",
           "What today's defaults give, from the runs kept under [data/](data/), written by "
           "`python benchmark_performance.py --results` (which also writes the README's table). A run is shown "
           "only where the recipe its run record started with equals what its command resolves to today; the "
           "runs left out are listed at the end with the settings that differ. The lab notebook, with every "
           "measurement and how the recipe was chosen, is [notebook.md](notebook.md) and "
           "[history.md](history.md).",
           "",
           "Terms: a *score* is the mean raw return of the last 20 whole games; *agent steps* are decisions "
           "(4 frames each); *sticky actions* (ALE's `-v5` ids) repeat the previous action with probability 0.25 "
           "at each frame; the *human-normalized* score is (score - random) / (human - random); the *IQM* "
           "(interquartile mean) averages the middle half of the scores over games and seeds, with a "
           "stratified-bootstrap interval (Agarwal et al. 2021); *QR-DQN* learns quantiles of the return "
           "(Dabney et al. 2018). Dopamine's agents are the published runs (5 seeds each) under the same sticky actions: per game their mean, in the IQM every seed.",
           ""]
    for src, res in results:
        out += [f"## {src.title}", "", f"`{src.command}`", ""] + res["lines"] + [""]
    left = [(name, diff) for _, res in results for name, diff in res["other"].items()]
    out += ["## Runs left out (another recipe)", ""]
    out += [f"- `data/{name}`: trained with {' '.join(diff)}" for name, diff in left] or ["None."]
    out += ["", "GPU: no run of today's defaults on a GPU is kept yet; `bench/gpu/check.sh` measures one "
            "(Pong without sticky actions to +18, the learner's busy share, the collectors' split).", ""]
    return "\n".join(out)


def write_results() -> tuple[Path, Path]:
    """docs/results.md and the README's table, from the data."""
    results = collect()
    RESULTS.write_text(results_markdown(results) + "\n")
    readme = README.read_text()
    table = readme_table(results)
    if BEGIN in readme and END in readme:
        readme = readme[:readme.index(BEGIN)] + table + readme[readme.index(END) + len(END):]
    else:
        raise SystemExit(f"{README} has no results table markers ({BEGIN} ... {END}); put them where the table goes")
    README.write_text(readme)
    return RESULTS, README


def readme_block() -> str:
    """The table the README holds now (between the markers)."""
    text = README.read_text()
    return text[text.index(BEGIN):text.index(END) + len(END)]

