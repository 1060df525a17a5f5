"""``--time-to-score``: wall-clock minutes (and agent steps) until the mean score of the last 20
whole games reaches a target, for the real pipeline run as a user runs it and optionally the
baseline recipe; each game's default target and milestones, and the report's table and curves."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time

from .baseline import BASELINE_RECIPE, run_baseline
from .common import machine

# Milestones are reporting marks, not training settings: the run itself never sees them.
MILESTONES = {"ALE/Pong-v5": (-15, -10, 0, 10, 18), "ALE/Pong-v4": (-15, -10, 0, 10, 18),
              "mario": (1000, 1500, 2000, 2500)}
# The score --time-to-score aims at when --target is not given: Pong's +18, and for Mario a mean
# distance of 3,000 (1-1's flag pole stands at x ~3,160, so most of the last 20 games end there).
TARGETS = {"ALE/Pong-v5": 18.0, "ALE/Pong-v4": 18.0, "mario": 3000.0}
# --time-to-score --quick: the test suite's catch game, sized to reach its target in a few minutes.
QUICK_SCORE = {"target": 0.5, "minutes": 4.0, "milestones": (-0.5, 0.0, 0.5),
               "train": ["--env", "tests.catch_env:Catch-v0", "--learning-starts", "500", "--buffer-size", "20000",
                         "--envs-per-collector", "4", "--batch-size", "32", "--replay-ratio", "4", "--lr", "1e-3",
                         "--target-update-interval", "100", "--eps-decay-steps", "4000", "--eps-end", "0.02",
                         "--epoch-steps", "1000", "--checkpoint-interval", "1000"]}
# Published curves drawn beside a run on the agent-steps axis, (agent steps, mean return):
# - Tianshou's DQN, examples/atari/PongNoFrameskip-v4/dqn/test_rew.csv (thu-ml/tianshou at ac1b676a):
#   test return at epsilon 0.005, PongNoFrameskip-v4, so no sticky actions;
# - Dopamine's QR-DQN, baselines/atari/data/pong.json (google/dopamine at 5873f549): the mean
#   training return of each 250k-step iteration, drawn at its middle; 5 seeds, sticky actions 0.25.
REFERENCES = {
    "ALE/Pong-v5": (
        ("Tianshou DQN, no sticky actions (published)",
         ((0, -21.0), (100_000, -21.0), (200_000, -17.1), (300_000, -16.3), (400_000, -14.1), (500_000, -6.3),
          (600_000, -11.1), (700_000, 12.0), (800_000, -5.5), (900_000, 19.9), (1_000_000, 20.4))),
        ("Dopamine QR-DQN, sticky actions (published)",
         ((125_000, -19.8), (375_000, -14.7), (625_000, -5.9), (875_000, 7.4), (1_125_000, 11.7), (1_375_000, 13.0))),
    ),
}
# The training script runs from the project folder, where mario_rl_optimized.py lies.
PROJECT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def send_all(procs, signum: int) -> None:
    """``signum`` to every process in ``procs``; one that has ended already is passed over."""
    for proc in procs:
        try:
            proc.send_signal(signum)  # a terminal's Ctrl-C reached the runs too: a second one is harmless
        except ProcessLookupError:
            pass


@contextlib.contextmanager
def signals_passed_on(procs):
    """Ctrl-C and SIGTERM passed on to every process in ``procs`` (a live collection: one added
    later gets them too) instead of stopping this one; yields the names of the signals that came.
    Each run then stops cleanly (checkpoint, replay, children joined), where a KeyboardInterrupt
    would leave it to be SIGKILLed and lose its work since the last checkpoint."""
    got: list[str] = []

    def on_signal(signum, _frame):
        got.append(signal.Signals(signum).name)
        send_all(procs, signum)
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def train_subprocess(cmd: list[str]) -> tuple[int, str | None]:
    """Run one training run (a child process, in the project folder) to its end: (exit code,
    the signal that stopped it, if one did). Ctrl-C and SIGTERM are passed on to the run, which
    stops cleanly, and then stop the benchmark."""
    proc = subprocess.Popen(cmd, cwd=PROJECT_DIR)
    with signals_passed_on([proc]) as got:
        code = proc.wait()
    return code, (got[0] if got else None)


def default_target(env: str) -> float | None:
    from presets import family_of

    return TARGETS.get(env, TARGETS.get(family_of(env)))


def default_milestones(env: str) -> tuple:
    from presets import family_of

    return MILESTONES.get(env, MILESTONES.get(family_of(env), ()))


def training_config(train_args: list[str]):
    """(parsed flags, config, profile) of the training options a benchmark run is given, checked
    as the training script checks them (its warnings printed) before any process starts; the run
    folder, target and time limit are the benchmark's own options, so given here they are refused."""
    from config_optimized import ConfigError
    from pipeline.settings.check import validate
    from pipeline.settings.cli import parse_args
    from pipeline.settings.layers import resolve_config

    args = parse_args(train_args)
    res = resolve_config(args)
    cfg, hw, profile = res.cfg, res.hw, res.profile
    for w in validate(cfg, hw):
        print(f"[MAIN] Warning: {w}", flush=True)
    if args.run_dir is not None or args.target_score is not None or args.time_limit is not None:
        raise ConfigError("give the run folder, target and time as --runs-dir, --target and --minutes of "
                          "--time-to-score, not as training options")
    return args, cfg, profile


def time_to_score(train_args: list[str], target: float, minutes: float, milestones, runs_dir: str,
                  baseline_minutes: float | None) -> dict:
    """Train through the real pipeline (mario_rl_optimized.py, as a user runs it) until the mean
    score of the last 20 whole games reaches ``target`` or ``minutes`` pass; then, unless
    ``baseline_minutes`` is None, the baseline recipe until the target or ``baseline_minutes``.
    Each run is scored from its episodes.jsonl."""
    from config_optimized import ConfigError
    from pipeline.records.episodes import read_episodes, score_run
    from pipeline.records.files import LOG_NAME
    from pipeline.records.metrics import most_other_runs

    runs_dir = os.path.abspath(runs_dir)  # the training run starts in the project folder
    args, cfg, profile = training_config(train_args)
    if target is None:
        target = default_target(cfg.env)
        if target is None:
            raise ConfigError(f"--target: {cfg.env} has no default target score; give one, e.g. --target 100")
    marks = sorted({*(milestones or default_milestones(cfg.env)), target})
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs = []
    pipeline_dir = os.path.join(runs_dir, f"tts-{stamp}-pipeline")
    cmd = [sys.executable, "mario_rl_optimized.py", *train_args, "--run-dir", pipeline_dir,
           "--target-score", str(target), "--time-limit", str(minutes)]
    print(f"[TTS] pipeline ({profile} profile): {' '.join(cmd[1:])}", flush=True)
    code, stopped = train_subprocess(cmd)
    if code != 0:
        raise RuntimeError(f"the training run exited with code {code}; its log is {os.path.join(pipeline_dir, LOG_NAME)}")
    if stopped:  # the run stopped cleanly: report what it reached, and run no baseline after it
        print(f"[TTS] stopped by {stopped}; the report covers the run up to there", flush=True)
        baseline_minutes = None
    runs.append({"name": "pipeline (defaults" + (": " + " ".join(train_args) if train_args else "") + ")",
                 "run_dir": pipeline_dir, "profile": profile, "settings": cfg.flat()})
    if baseline_minutes is not None:
        base_dir = os.path.join(runs_dir, f"tts-{stamp}-baseline")
        os.makedirs(base_dir, exist_ok=True)
        base_cfg = cfg.replace(**BASELINE_RECIPE, target_score=target, time_limit=baseline_minutes,
                                       run_dir=base_dir, buffer_size=min(cfg.replay.buffer_size, 1_000_000))
        print(f"[TTS] baseline recipe for up to {baseline_minutes:g} min: {BASELINE_RECIPE}", flush=True)
        res = run_baseline(base_cfg, base_dir)
        if "error" in res:
            raise RuntimeError(f"the baseline failed: {res['error']}\n{res.get('traceback', '')}")
        runs.append({"name": "baseline (row 1's recipe, one process)", "run_dir": base_dir, "profile": None,
                     "settings": base_cfg.flat()})
    for run in runs:
        rows = read_episodes(run["run_dir"])
        run["score"], run["curve"] = score_run(rows, marks, metric=cfg.run.score_metric)
        last = rows[-1] if rows else {}
        run["reached"] = run["score"]["milestones"][marks.index(target)].get("minutes") is not None
        run["minutes_to_target"] = run["score"]["milestones"][marks.index(target)].get("minutes")
        run["totals_at_last_game"] = {k: last.get(k) for k in ("wall_s", "agent_steps", "updates", "samples_trained")}
        run["other_runs"] = most_other_runs(run["run_dir"])
    return {"env": cfg.env, "target": target, "minutes_limit": minutes,
            "baseline_minutes_limit": baseline_minutes, "metric": cfg.run.score_metric,
            "window": runs[0]["score"]["window"], "milestones": marks, "runs": runs, "machine": machine()}


def print_time_to_score(res: dict) -> None:
    marks = res["milestones"]
    print(f"\nTime to score: {res['env']}, mean {res['metric']} of the last {res['window']} games, target "
          f"{res['target']:g}, limit {res['minutes_limit']:g} min"
          + (f" ({res['baseline_minutes_limit']:g} for the baseline)"
             if res.get("baseline_minutes_limit") not in (None, res["minutes_limit"]) else "")
          + " (minutes / agent steps when first reached)")
    print("| run | " + " | ".join(f"{m:g}" for m in marks) + " | best | agent steps | updates | samples trained |")
    print("|---" * (len(marks) + 5) + "|")
    for run in res["runs"]:
        cells = [f"{m['minutes']:.1f} min / {m['agent_steps']:,}" if m.get("minutes") is not None else "-"
                 for m in run["score"]["milestones"]]
        t = run["totals_at_last_game"]
        best = run["score"]["best_mean"]
        print(f"| {run['name']} | " + " | ".join(cells) + f" | {'n/a' if best is None else format(best, '.2f')} "
              f"| {t.get('agent_steps') or 0:,} | {t.get('updates') or 0:,} | {t.get('samples_trained') or 0:,} |")
    for run in res["runs"]:
        if run.get("other_runs"):
            print(f"Shared the machine: {run['name']} ended epochs beside up to {run['other_runs']} other training "
                  "run(s); its minutes are a share of the machine, its agent steps as alone")


def plot_time_to_score(res: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from pipeline.records.curves import format_steps

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for run in res["runs"]:
        if run["curve"]:
            minutes, steps, mean = zip(*run["curve"])
            label = textwrap.fill(run["name"], 60)  # a run's name holds its flags: keep the legend inside the axes
            axes[0].plot(minutes, mean, label=label)
            axes[1].plot(steps, mean, label=label)
    max_steps = max((c[-1][1] for c in (r["curve"] for r in res["runs"]) if c), default=0)
    for label, points in REFERENCES.get(res["env"], ()):
        points = [p for p in points if p[0] <= max(max_steps, 1) * 1.05]
        if points:
            axes[1].plot(*zip(*points), ls=":", marker=".", label=label)
    axes[1].legend(fontsize=8)
    for ax, xl in zip(axes, ("wall clock (minutes)", "agent steps")):
        ax.axhline(res["target"], color="gray", ls="--", lw=1)
        ax.set_xlabel(xl)
        ax.set_ylabel(f"mean {res['metric']}, last {res['window']} games")
        ax.grid(alpha=0.3)
    axes[1].xaxis.set_major_formatter(FuncFormatter(format_steps))
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Time to score, {res['env']} ({machine_label(res['machine'])})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def machine_label(m: dict) -> str:
    """The machine in a plot's title: its CPU model, cores and GPU, or "no GPU" on a CPU machine."""
    return f"{m['cpu']}, {m['cores']} cores, " + (f"GPU {m['gpu']}" if m.get("gpu") else "no GPU")
