"""``--suite atari5``: the defaults trained on several games one after another, each scored per
250k-agent-step window beside Dopamine's published agents, with the interquartile mean (IQM) of
human-normalized scores over the suite's games.

The Atari-5 games (BattleZone, DoubleDunk, NameThisGame, Phoenix, Qbert; Aitchison et al. 2023
chose them because their scores predict the median over the 57 games) plus Pong, whose IQM is
left out as in the paper. Each game is one run of the real pipeline (``mario_rl_optimized.py`` in
a child process, as a user runs it) in ``SUITE_DIR/GAME``: a game whose run is missing starts, one
that stopped early (a kill, a crash, Ctrl-C) resumes from its last checkpoint, one that reached
``--steps`` or ``--minutes`` is only read. So the same command continues an interrupted suite, and
run again on a finished one it only writes the report.

A window's score is Dopamine's: the mean training return of the games that ended in it (epsilon
as the recipe explores, every whole game, all lives). The anchors are the 5-seed means of
Dopamine's baselines under the same sticky actions (``atari_anchors.json`` names the files); they
play the full 18-action set where ``-v5`` ids give each game its minimal set.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from config_optimized import ConfigError
from pipeline.file_keys import current_keys

from .time_to_score import PROJECT_DIR, send_all, signals_passed_on, training_config

SUITES = {"atari5": ("ALE/BattleZone-v5", "ALE/DoubleDunk-v5", "ALE/NameThisGame-v5", "ALE/Phoenix-v5",
                     "ALE/Qbert-v5", "ALE/Pong-v5"),
          # the test suite's two catch games: a whole suite (stop, resume, report) in a minute
          "quick": ("tests.catch_env:Catch-v0", "tests.catch_env:CountingCatch-v0")}
# The games the IQM is taken over: the Atari-5 (Pong is there for its own target, not the IQM).
IQM_GAMES = ("BattleZone", "DoubleDunk", "NameThisGame", "Phoenix", "Qbert")
WINDOW = 250_000           # agent steps per window: one Dopamine iteration
ANCHORS_PATH = Path(__file__).with_name("atari_anchors.json")
SUITE_FILE = "suite.json"  # the suite's options, so a rerun with other options is refused, not mixed in
# A finished game's counters, beside its run: the report and a rerun need only this, episodes.jsonl
# and config.json, so a finished suite can be kept (docs/data) without its checkpoints and replays.
GAME_FILE = "suite_game.json"
REPORT_NAMES = ("suite_report.json", "suite_report.md", "suite_report.png")
# Options the suite sets itself for every game.
OWN_FLAGS = ("--env", "--total-steps", "--run-dir", "--resume", "--time-limit", "--target-score", "--overwrite")


def game_name(env_id: str) -> str:
    """ALE/BattleZone-v5 -> BattleZone; tests.catch_env:Catch-v0 -> Catch."""
    return env_id.split(":")[-1].split("/")[-1].split("-v")[0]


def load_anchors() -> dict:
    with open(ANCHORS_PATH) as f:
        return json.load(f)


def suite_dir_name(suite: str, train_args: list[str]) -> str:
    """The suite's folder under --runs-dir: its name, then its training options, so the defaults
    and a recipe (or a second seed) never share a folder: suite-atari5, suite-atari5_seed_2."""
    slug = "_".join(re.sub(r"[^A-Za-z0-9.+-]+", "-", a.lstrip("-")) for a in train_args)
    if len(slug) > 40:  # many options: a digest of them (suite.json in the folder lists them)
        slug = hashlib.sha1("\0".join(train_args).encode()).hexdigest()[:10]
    return f"suite-{suite}" + (f"_{slug}" if slug else "")


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


def check_suite_args(suite: str, train_args: list[str], steps: int, minutes: float | None) -> None:
    """Every game's options checked as the training script checks them, before any run starts."""
    if suite not in SUITES:
        raise ConfigError(f"--suite {suite}: unknown suite; choose one of {', '.join(SUITES)}")
    if steps <= 0:
        raise ConfigError(f"--steps {steps}: must be positive, e.g. --steps 500000")
    if minutes is not None and minutes <= 0:
        raise ConfigError(f"--minutes {minutes:g}: must be positive")
    for a in train_args:
        flag = a.split("=")[0]
        if flag in OWN_FLAGS:
            raise ConfigError(f"--suite sets {flag} for each game itself; give the length as --steps or --minutes "
                              "and the folder as --runs-dir")
    for env in SUITES[suite]:
        try:
            training_config(["--env", env, *train_args])
        except ConfigError as e:
            raise ConfigError(f"{env}: {e}") from None


def game_counters(run_dir: Path) -> tuple[dict, bool]:
    """(the counters of a game's run, whether it has a checkpoint to resume from): its last
    checkpoint's, else those its finished game kept (``GAME_FILE``), else none."""
    from pipeline.records import checkpoint as ckpt
    from pipeline.records.files import CHECKPOINT_NAME

    if (run_dir / CHECKPOINT_NAME).is_file():
        return ckpt.load(run_dir / CHECKPOINT_NAME).get("counters", {}), True
    if (run_dir / GAME_FILE).is_file():  # a finished game kept without its checkpoint
        return current_keys(json.loads((run_dir / GAME_FILE).read_text())["counters"]), False
    return {}, False


def game_state(run_dir: Path, steps: int, minutes: float | None) -> tuple[str, dict]:
    """("new" | "resume" | "done", its counters) of one game's run folder. A folder with run
    files but no checkpoint (killed before its first one) starts over."""
    counters, resumable = game_counters(run_dir)
    if counters.get("agent_steps", 0) >= steps or (minutes and counters.get("wall_s", 0.0) >= minutes * 60):
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


def claim_suite_dir(suite_dir: Path, options: dict) -> None:
    """Write the suite's options into its folder, or refuse a folder that holds another suite."""
    path = suite_dir / SUITE_FILE
    if path.exists():
        with open(path) as f:
            saved = json.load(f)
        if saved != options:
            raise ConfigError(f"{suite_dir} holds a suite run with other options ({saved}); this one has {options}. "
                              "Run it with the same options to continue it, or give another --runs-dir")
        return
    from pipeline.records.record import write_json

    suite_dir.mkdir(parents=True, exist_ok=True)
    write_json(path, options)


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


def run_suite(suite: str, train_args: list[str], steps: int, minutes: float | None, runs_dir: str,
              games: str | None = None, at_once: int = 1) -> Path:
    """Train every game of the suite that has not finished, ``at_once`` at a time (only ``games``,
    in their order, where given: the suite's folder is the same, so a later run without them
    finishes the rest); returns the folder. Games trained side by side share the machine, so
    their minutes are not one game's alone; their agent steps, and so their windows, are."""
    check_suite_args(suite, train_args, steps, minutes)
    envs = pick_games(suite, games)
    suite_dir = Path(runs_dir).resolve() / suite_dir_name(suite, train_args)
    claim_suite_dir(suite_dir, {"suite": suite, "steps": steps, "minutes": minutes, "train_args": train_args})
    runs = [GameRun(env, suite_dir / game_name(env), train_args, f"[SUITE] {env}", env) for env in envs]
    if at_once > 1:
        print(f"[SUITE] {min(at_once, len(runs))} games at once: each game's minutes are its share of this machine",
              flush=True)

    def finished(run: GameRun, counters: dict) -> None:
        mark_done(run.run_dir, run.env, counters, at_once)
        print(f"[SUITE] {run.env}: done ({counters.get('agent_steps', 0):,} agent steps, "
              f"{counters.get('wall_s', 0) / 60:.1f} min)", flush=True)
    train_games(runs, steps, minutes, at_once, finished)
    return suite_dir


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


def human_normalized(score: float, random: float, human: float) -> float:
    return (score - random) / (human - random)


def iqm(values: list[float]) -> float:
    """Interquartile mean: the mean of the middle half, a quarter trimmed from each end (as
    scipy.stats.trim_mean(x, 0.25) and rliable compute it): of five scores, the middle three."""
    xs = sorted(values)
    k = int(0.25 * len(xs))
    mid = xs[k:len(xs) - k]
    return sum(mid) / len(mid)


def suite_report(suite_dir: str | Path) -> dict:
    """Read every game's run in the suite's folder: windows, minutes, and the IQM beside the anchors."""
    from pipeline.records.episodes import read_episodes
    from pipeline.records.files import EPISODES_NAME, RECORD_NAME
    from pipeline.records.metrics import most_other_runs

    from .common import machine

    suite_dir = Path(suite_dir)
    with open(suite_dir / SUITE_FILE) as f:
        options = json.load(f)
    anchors = load_anchors()
    games = {}
    for env in SUITES[options["suite"]]:
        name = game_name(env)
        run_dir = suite_dir / name
        rows = read_episodes(run_dir) if (run_dir / EPISODES_NAME).is_file() else []  # no game ended yet
        counters, _ = game_counters(run_dir)
        done = max(counters.get("agent_steps", 0), rows[-1]["agent_steps"] if rows else 0)
        points = [(r["agent_steps"], r["wall_s"]) for r in rows]
        if counters:
            points.append((counters["agent_steps"], counters["wall_s"]))
        wins = window_scores(rows, min(done, options["steps"]))  # a run overshoots its --steps by a few
        for w in wins:
            w["complete"] = done >= w["to"]
            w["minutes"] = minutes_at(points, w["to"]) if w["complete"] else None
        a = anchors["games"].get(name, {"random": None, "human": None, "dopamine": {}})
        record = {}
        if (run_dir / RECORD_NAME).is_file():
            with open(run_dir / RECORD_NAME) as f:
                record = json.load(f)
        kept = json.loads((run_dir / GAME_FILE).read_text()) if (run_dir / GAME_FILE).is_file() else {}
        games[name] = {"env": env, "random": a["random"], "human": a["human"], "windows": wins,
                       "agent_steps": done, "minutes": counters.get("wall_s", 0) / 60 if counters else None,
                       "anchors": a["dopamine"], "trained_on": trained_on(record),
                       "games_at_once": kept.get("games_at_once", 1),
                       "other_runs": most_other_runs(run_dir)}
    n_windows = max((len(g["windows"]) for g in games.values()), default=0)
    agents = list(anchors["games"][IQM_GAMES[0]]["dopamine"])
    iqms = []
    for i in range(n_windows):
        row = {"window": i + 1, "ours": None, "ours_games": 0}
        ours = [human_normalized(g["windows"][i]["mean"], g["random"], g["human"])
                for n, g in games.items() if n in IQM_GAMES and len(g["windows"]) > i
                and g["windows"][i]["complete"] and g["windows"][i]["mean"] is not None]
        row["ours_games"] = len(ours)
        if len(ours) == len(IQM_GAMES):
            row["ours"] = iqm(ours)
        for agent in agents:
            vals = [human_normalized(anchors["games"][n]["dopamine"][agent][i], anchors["games"][n]["random"],
                                     anchors["games"][n]["human"])
                    for n in IQM_GAMES if i < len(anchors["games"][n]["dopamine"][agent])]
            row[agent] = iqm(vals) if len(vals) == len(IQM_GAMES) else None
        iqms.append(row)
    return {"suite": options["suite"], "options": options, "window": WINDOW, "games": games, "iqm": iqms,
            "agents": agents, "anchor_source": anchors["dopamine"]["source"], "machine": machine()}


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
    lines = [f"Suite {rep['suite']}: mean training return of the games that ended in each window of agent steps "
             f"(windows {', '.join(spans)}; ours: minutes to the window's end in brackets, `*` = window not "
             f"finished). Options: {' '.join(rep['options']['train_args']) or 'the defaults'}, "
             f"{rep['options']['steps']:,} agent steps a game" + (f" or {rep['options']['minutes']:g} min"
                                                                  if rep['options'].get('minutes') else "") + ".",
             "",
             "| game | random | human | ours | " + " | ".join(agents) + " |",
             "|---" * (4 + len(agents)) + "|"]
    for name, g in rep["games"].items():
        ours = " / ".join(_fmt(w["mean"]) + (f" ({w['minutes']:.0f} min)" if w["minutes"] is not None else "")
                          + ("" if w["complete"] else "*") for w in g["windows"]) or "-"
        anchors = [" / ".join(_fmt(v) for v in g["anchors"].get(a, [])[:max(n, 1)]) or "-" for a in agents]
        lines.append(f"| {name} | {_fmt(g['random'])} | {_fmt(g['human'])} | {ours} | " + " | ".join(anchors) + " |")
    iq = [" / ".join(_fmt(r[key]) if r[key] is not None else "-" for r in rep["iqm"]) for key in ("ours", *agents)]
    lines.append(f"| **IQM, human-normalized** ({', '.join(IQM_GAMES)}) | 0 | 1 | **{iq[0]}** | "
                 + " | ".join(iq[1:]) + " |")
    lines.append("")
    for i in range(n):
        wins = [name for name, g in rep["games"].items() if name in IQM_GAMES and len(g["windows"]) > i
                and g["windows"][i]["complete"] and g["windows"][i]["mean"] is not None
                and g["windows"][i]["mean"] > g["anchors"]["CNN QR-DQN"][i]]
        played = sum(1 for name, g in rep["games"].items() if name in IQM_GAMES and len(g["windows"]) > i
                     and g["windows"][i]["complete"])
        lines.append(f"Window {spans[i]}: ours above CNN QR-DQN on {len(wins)} of {played} finished Atari-5 games"
                     + (f" ({', '.join(wins)})" if wins else "") + ".")
    lines.append("")
    machines: dict[str, list[str]] = {}
    for name, g in rep["games"].items():
        if g.get("trained_on"):
            machines.setdefault(g["trained_on"], []).append(name)
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
    suite_dir = Path(suite_dir)
    rep = suite_report(suite_dir)
    from pipeline.records.record import write_json

    js, md, png = (suite_dir / n for n in REPORT_NAMES)
    write_json(js, rep)
    tmp = md.with_suffix(".md.tmp")  # whole or not at all, as write_json writes
    tmp.write_text(report_markdown(rep) + "\n")
    os.replace(tmp, md)
    plot_suite(rep, png)
    return rep
