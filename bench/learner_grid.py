"""The learner alone against the same learner inside the pipeline (``--only learner``): updates/s
on one preloaded batch, the FLOPs of one update, the CPU's practical matmul peak, and the grid of
batch sizes and thread counts that puts them side by side; also the learner-alone ceiling of
the ladder's row 8 for the components report."""
from __future__ import annotations

import time

import numpy as np
import torch

from .common import rate, windows
from .ladder import run_row


def random_batch(lrn, bs: int, weights: bool = False) -> dict:
    """One batch of random frames and actions on the learner's device: what the learner-alone
    figures train on. ``weights``: importance-sampling weights (all 1) as a prioritized replay's
    batch carries them, so its loss weighs the samples as a run's does."""
    rng = np.random.default_rng(0)
    return lrn.to_device({"obs": rng.integers(0, 255, (bs, 4, 84, 84), dtype=np.uint8),
                          "next_obs": rng.integers(0, 255, (bs, 4, 84, 84), dtype=np.uint8),
                          "action": rng.integers(0, lrn.network.n_actions, bs), "return": np.zeros(bs, np.float32),
                          "discount": np.full(bs, 0.99, np.float32),
                          "weights": np.ones(bs, np.float32) if weights else None})


def timed_learner(cfg, device) -> tuple:
    """(engine, batch) as a row times them: the engine runs the learner's update as a run does;
    with --compile the loss is compiled and its first,
    compiling update has run, so the row measures the compiled update and not eager code or the
    compile stall (a run compiles only at update 2,000). A compile that fails is an error here, not
    a row labeled compiled that measured eager code."""
    from pipeline.engine.engine import Engine
    from pipeline.agent.learner import Learner

    lrn = Learner(cfg.learner, 4, 6, device)
    engine = Engine(lrn)
    b = random_batch(lrn, cfg.learner.batch_size)
    if cfg.learner.compile:
        engine.compile_loss()
        engine.update([b] * cfg.learner.grad_accum_steps)
        if not engine.compiled:
            raise RuntimeError(f"torch.compile failed ({engine.compile_error}); the compiled row cannot be measured")
    return engine, b


def learner_updates_per_s(cfg, n_windows: int, window_s: float = 1.0) -> float:
    """Updates/s of the learner alone on one preloaded batch (accumulated grad_accum_steps times),
    the median of ``n_windows`` windows of ``window_s`` seconds."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch._dynamo.reset()
    lrn, b = timed_learner(cfg, device)

    def rate():
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < window_s:
            lrn.update([b] * cfg.learner.grad_accum_steps)
            n += 1
        if device.type == "cuda":  # the window ends when the queued GPU work has run
            torch.cuda.synchronize()
        return n / (time.perf_counter() - t0)
    return windows(rate, n_windows, warmup=1)


def update_flops(cfg) -> float:
    """Floating-point operations of one learner update at ``cfg`` (forward and backward on s, the
    target and Double-DQN forwards on s'), counted by torch's FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    from pipeline.agent.learner import Learner

    lrn = Learner(cfg.learner, 4, 6, torch.device("cpu"))
    with FlopCounterMode(display=False) as fc:
        lrn.update([random_batch(lrn, cfg.learner.batch_size)])
    return float(fc.get_total_flops())


def matmul_peak(dtype: torch.dtype, n_windows: int) -> float:
    """FLOP/s of a large matrix product at ``dtype`` on this process's threads: the practical peak
    a learner could reach here."""
    a = torch.randn(2048, 2048).to(dtype)
    b = torch.randn(2048, 2048).to(dtype)

    def step():
        torch.mm(a, b)
        return 2 * 2048 ** 3
    return windows(lambda: rate(step, 0.5), n_windows)


def bench_learner_grid(seconds: float, n_windows: int, batches=(32, 64, 128), threads=(1, 2)) -> list[dict]:
    """The learner alone (one preloaded batch) against the same learner inside the pipeline (this
    machine's profile, Pong, replay ratio 8), per batch and thread count; and the share of the
    CPU's practical peak (a large matmul at the learner's precision) that each reaches."""
    from pipeline.settings.layers import resolve_config
    from pipeline.settings.hardware import detect_hardware

    hw = detect_hardware()
    rows = []
    for th in threads:
        torch.set_num_threads(th)
        base = resolve_config({"env": "ALE/Pong-v5"}, hw).cfg
        peak = matmul_peak(torch.bfloat16 if base.learner.amp and hw.cpu_bf16 else torch.float32, n_windows)
        for bs in batches:
            cfg = base.replace(batch_size=bs, learner_threads=th)
            alone = learner_updates_per_s(cfg, n_windows)
            flops = update_flops(cfg)
            print(f"  learner batch {bs}, {th} thread(s): alone {alone:.1f} updates/s; in the pipeline ...", flush=True)
            res = run_row("profile", {"extra": {"batch_size": bs, "learner_threads": th}}, seconds)
            inside = res.get("updates_per_s")
            rows.append({"batch": bs, "threads": th, "precision": "bf16" if cfg.learner.amp and hw.cpu_bf16 else "fp32",
                         "updates_per_s_alone": alone, "updates_per_s_in_pipeline": inside,
                         "in_pipeline_vs_alone": inside / alone if inside else None,
                         "gflop_per_update": flops / 1e9, "peak_gflops": peak / 1e9,
                         "peak_share_alone": alone * flops / peak,
                         "peak_share_in_pipeline": inside * flops / peak if inside else None,
                         "error": res.get("error")})
    return rows


def print_learner_grid(rows: list[dict]) -> None:
    print("\n| batch | threads | precision | updates/s alone | updates/s in pipeline | in pipeline / alone "
          "| GFLOP/update | share of peak alone | in pipeline |\n|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        inside = r["updates_per_s_in_pipeline"]
        print(f"| {r['batch']} | {r['threads']} | {r['precision']} | {r['updates_per_s_alone']:.1f} "
              f"| {'failed' if inside is None else format(inside, '.1f')} "
              f"| {'n/a' if inside is None else format(100 * r['in_pipeline_vs_alone'], '.0f') + '%'} "
              f"| {r['gflop_per_update']:.2f} | {100 * r['peak_share_alone']:.0f}% of {r['peak_gflops']:.0f} GFLOP/s "
              f"| {'n/a' if inside is None else format(100 * r['peak_share_in_pipeline'], '.0f') + '%'} |")


def bench_learner_in_pipeline(row: dict, n_windows: int, window_s: float = 1.0) -> dict:
    """The learner alone, on preloaded batches, at the settings and thread count of a pipeline
    row: the ceiling that row's learner could reach."""
    from config_optimized import Config
    from pipeline.settings.hardware import detect_hardware, learner_threads

    st = row["settings"]
    cfg = Config.of(model_arch=st["model_arch"], amp=st["amp"], compile=st["compile"], batch_size=st["batch_size"],
                 grad_accum_steps=st["grad_accum_steps"], channels_last=st["channels_last"],
                 learner_threads=st["learner_threads"], num_collectors=st["num_collectors"])
    torch.set_num_threads(learner_threads(cfg.learner.learner_threads, cfg.collectors.num_collectors, detect_hardware()))
    alone = learner_updates_per_s(cfg, n_windows, window_s)
    return {"updates_per_s_alone": alone, "updates_per_s_in_pipeline": row["updates_per_s"],
            "ratio": row["updates_per_s"] / alone, "settings": st}
