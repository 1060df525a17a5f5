"""The optimization ladder: each row adds one optimization (same game, same replay ratio), each
row measured in a fresh process; rows 4-8 (and autotune's trials) run the real Trainer, rows
1-3 the single-process loop of ``bench.sync_row``. Also the ladder's table and bar chart."""
from __future__ import annotations

import os
import statistics
import time

from .common import RssPeak, measured_run, per_agent_step, run_in_child
from .sync_row import sync_row

LADDER = [
    ("1. baseline: 1 env, deque of tuples, Nature DQN fp32", "sync", {"kind": "deque"}),
    ("2. + uint8 replay, each frame once", "sync", {"kind": "replay"}),
    ("3. + 8 vector envs, batched acting", "sync", {"kind": "vector"}),
    ("4. + collector process, ring, consolidation thread", "pipeline", {}),
    ("5. + mixed precision", "pipeline", {"amp": True}),
    ("6. + torch.compile", "pipeline", {"amp": True, "compile": True}),
    ("7. batch 128 x 2 accumulated: fewer, larger updates (a recipe change, not a systems gain)", "pipeline",
     {"amp": True, "compile": True, "batch_size": 128, "grad_accum_steps": 2}),
    ("8. auto profile for this machine (its model and batch, at the ladder's replay ratio 8)", "profile", {}),
]
# Settings every ladder row shares; rows 1-7 differ only in what the ladder adds.
LADDER_BASE = dict(env="ALE/Pong-v5", model_arch="nature", amp=False, compile=False, batch_size=32,
                   grad_accum_steps=1, replay_ratio=8.0, n_step=1, num_collectors=1, envs_per_collector=8)
BENCH_RUN = dict(learning_starts=2_000, buffer_size=50_000, total_steps=10**12, checkpoint_interval=10**9,
                 tensorboard=False, consolidation_log_interval=1e9, epoch_steps=10**9, seed=1)
# --quick rows and autotune trials start learning at 500 agent steps: filling the replay to 2,000
# first is acting alone, which no row measures (row 1, one env and then a forward pass a step, took
# 18 s on a 2-core AMD EPYC family 23 model 1 to measure 2; it now skips the forward pass for a
# random action, as CleanRL's loop does); the updates measured after it sample a smaller replay,
# at the same cost per update.
QUICK_LEARNING_STARTS = 500


def bench_run(quick: bool) -> dict:
    """The run settings every row and trial shares (BENCH_RUN), with --quick's learning start."""
    return {**BENCH_RUN, "learning_starts": QUICK_LEARNING_STARTS} if quick else dict(BENCH_RUN)


def compile_at_once(engine) -> None:
    """A "compile" row's learner compiles at its first update, not at update 2,000 (past most
    rows' end), and the row measures once that update is behind it."""
    if engine.learner.cfg.compile:
        engine.compile_after = 0


def _pipeline_row(spec: dict, seconds: float, window_s: float, quick: bool) -> dict:
    """Rows 4-8 and autotune trials: the real Trainer (collector processes, rings, consolidation,
    replay, learner), measured for ``seconds`` in time windows once the collectors run at the
    learner's pace.
    ``spec`` is {"profile": True} (this machine's auto profile at the ladder's replay ratio, plus
    any ``"extra"`` options) or {"overrides": {...}}."""
    import tempfile

    from config_optimized import Config
    from pipeline.settings.check import validate
    from pipeline.settings.layers import resolve_config
    from pipeline.records.epoch_stats import speed
    from pipeline.settings.hardware import detect_hardware
    from pipeline.runtime.run import open_run
    from pipeline.runtime.trainer import Trainer

    rss = RssPeak()
    hw = detect_hardware()
    with tempfile.TemporaryDirectory() as tmp:
        run = {**bench_run(quick), "run_dir": tmp, "env": spec.get("overrides", {}).get("env", "ALE/Pong-v5")}
        if spec.get("profile"):
            res = resolve_config({**run, "replay_ratio": LADDER_BASE["replay_ratio"], **spec.get("extra", {})}, hw)
            cfg, hw, name = res.cfg, res.hw, res.profile
        else:
            cfg, name = Config.of(**{**spec["overrides"], **run}), "explicit"
        validate(cfg, hw)
        log = open_run(cfg)
        trainer = Trainer(cfg, hw, log)
        compile_at_once(trainer.parts.engine)

        samples = []

        def sample():
            return (time.perf_counter(), trainer.agent_steps(), trainer.learner.updates, trainer.update_s_total,
                    trainer.parts.collector_time_ns(), trainer.parts.consolidator.drops())

        def measure():
            # Measure once the collectors have used up the head start the replay-ratio control
            # gives them (past it they play only what the learner's updates pay for, at its pace),
            # after one window of warm-up, in time windows of window_s.
            head_start = trainer.parts.ratio.start + trainer.parts.ratio.slack
            give_up = time.perf_counter() + 600  # a row that never reaches its window fails, not hangs
            while trainer.stop_reason is None and (trainer.agent_steps() <= head_start
                                                   or not trainer.parts.engine.compile_done):
                if time.perf_counter() > give_up:
                    return  # no samples: the row reports that it ended before a measuring window
                time.sleep(0.05)
            time.sleep(window_s)  # one more window of warm-up
            samples.append(sample())
            t_end = samples[0][0] + seconds
            while trainer.stop_reason is None and time.perf_counter() < t_end:
                time.sleep(window_s)
                samples.append(sample())
        measured_run(trainer, log, measure)
        bpt = trainer.replay.storage.bytes_per_transition()
    if len(samples) < 2:
        raise RuntimeError("the run ended before a measuring window")
    win = [speed(b[0] - a[0], b[1] - a[1], b[2] - a[2], b[3] - a[3], {k: b[4][k] - a[4][k] for k in a[4]})
           for a, b in zip(samples, samples[1:])]
    med = lambda get: statistics.median(get(w) for w in win)  # noqa: E731
    moved = [(b[1] - a[1], (b[2] - a[2]) * cfg.learner.effective_batch) for a, b in zip(samples, samples[1:])]
    return {"agent_steps_per_s": med(lambda w: w["agent_steps_per_s"]), "updates_per_s": med(lambda w: w["updates_per_s"]),
            "samples_per_s": med(lambda w: w["updates_per_s"]) * cfg.learner.effective_batch,
            "learner_busy": med(lambda w: w["learner_busy"]),
            "collector_wait": med(lambda w: w["collector_share"]["ring_wait"]),
            "collector_throttled": med(lambda w: w["collector_share"]["throttle"]),
            "drops": samples[-1][5] - samples[0][5], "bytes_per_transition": bpt, "peak_rss_mb": rss.mb(),
            "windows": len(win), "compiled": trainer.parts.engine.compiled,
            "samples_per_agent_step": per_agent_step(moved), "agent_steps_measured": sum(m[0] for m in moved),
            "profile": name, "settings": {k: cfg.get(k) for k in (
                "model_arch", "amp", "compile", "batch_size", "grad_accum_steps", "num_collectors",
                "envs_per_collector", "replay_ratio", "learner_threads", "channels_last")}}


def _row_entry(mode, params, seconds, window_s, quick, out_q):
    import contextlib

    try:
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            if mode == "sync":
                run = bench_run(quick)
                settings = {**LADDER_BASE, **{k: run[k] for k in ("learning_starts", "buffer_size", "seed")}}
                res = sync_row(params["kind"], settings, seconds, window_s)
            elif mode == "profile":
                res = _pipeline_row({"profile": True, **params}, seconds, window_s, quick)
            else:  # "pipeline"
                res = _pipeline_row({"overrides": {**LADDER_BASE, **params}}, seconds, window_s, quick)
        out_q.put(res)
    except BaseException as e:
        import traceback

        out_q.put({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})


def run_row(mode: str, params: dict, seconds: float, window_s: float = 2.0, quick: bool = False) -> dict:
    """One row in a fresh process (``quick``: learning from QUICK_LEARNING_STARTS agent steps)."""
    return run_in_child(_row_entry, (mode, params, seconds, window_s, quick), "the row's")


def bench_ladder(seconds: float, quick: bool, only: set[int] | None = None) -> list[dict]:
    from pipeline.settings.hardware import detect_hardware

    hw = detect_hardware()
    rows = []
    for number, (name, mode, params) in enumerate(LADDER, 1):
        row = {"name": name}
        if only and number not in only and number != 1:  # row 1 stays: every speed-up is against it
            continue
        if params.get("compile") and quick:
            row["skipped"] = "skipped with --quick (compiling takes about a minute)"
        elif params.get("amp") and not hw.has_mixed_precision:
            row["skipped"] = "no fp16/bf16 hardware here"
        else:
            if mode == "profile" and quick:  # the profile's own compile costs ~7-30 s: --quick trains it eager
                params = {"extra": {**params.get("extra", {}), "compile": False}}
                row["note"] = "compile off with --quick"
            print(f"  ladder {name} ...", end="", flush=True)
            t0 = time.perf_counter()
            row.update(run_row(mode, params, seconds, quick=quick))
            row["row_s"] = time.perf_counter() - t0  # the whole row: start-up, warm-up, measuring, stop
            print(f" {row['row_s']:.0f} s", flush=True)
        rows.append(row)
    base = rows[0].get("agent_steps_per_s")
    for row in rows:
        if base and row.get("agent_steps_per_s"):
            row["speedup_vs_baseline"] = row["agent_steps_per_s"] / base
    return rows


def print_ladder(rows: list[dict]) -> None:
    f = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
    print("\n| row | agent steps/s | vs baseline | updates/s | samples/s | learner busy | collector wait "
          "| drops | peak RSS MB | B/transition |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "agent_steps_per_s" not in r:
            why = r.get("skipped") or r.get("error", "failed")
            print(f"| {r['name']} | {why} | | | | | | | | |")
            continue
        wait = r.get("collector_wait")
        name = f"{r['name']} ({r['note']})" if r.get("note") else r["name"]
        print(f"| {name} | {r['agent_steps_per_s']:,.0f} | {f(r.get('speedup_vs_baseline'), '.2f')}x "
              f"| {r['updates_per_s']:,.1f} | {r['samples_per_s']:,.0f} | {100 * r['learner_busy']:.0f}% "
              f"| {'n/a (plays, then trains)' if wait is None else format(100 * wait, '.1f') + '%'} "
              f"| {r['drops']} | {r['peak_rss_mb']:,.0f} | {r['bytes_per_transition']:,.0f} |")


def plot_ladder(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["name"] for r in rows]
    vals = [r.get("agent_steps_per_s") or 0 for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 1.5))
    bars = ax.barh(names[::-1], vals[::-1], color="tab:blue")
    for bar, r in zip(bars, rows[::-1]):
        label = f"{r['speedup_vs_baseline']:.1f}x" if r.get("speedup_vs_baseline") else r.get("skipped", "n/a")[:40]
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {label}", va="center", fontsize=8)
    ax.set_xlabel("agent steps/s after learning starts (replay ratio 8, Pong)")
    ax.set_title("Optimization ladder")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
