"""``--profile``: torch.profiler over learner updates and collector steps at this machine's
profile settings, the top operations of each and their Chrome traces."""
from __future__ import annotations

import os
import time

import torch

from .common import fill_replay


def profiled_collector(cfg):
    """The collector ``--profile`` steps: a collector of the run ``cfg`` (its envs, the network
    the learner trains, the acting copy --act-bf16 makes), as a collector process builds it."""
    from pipeline.actors.collector import Collector, CollectorSpec
    from pipeline.transport.collector_block import CollectorBlock

    return Collector(CollectorSpec.of(cfg), 0, 0, CollectorBlock.local())


def profile_run(out_dir: str, steps: int = 30) -> dict:
    """torch.profiler over learner updates (replay sampling included) and collector steps at this
    machine's profile settings; prints the top operations and writes Chrome traces (open them in
    chrome://tracing or https://ui.perfetto.dev)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from pipeline.settings.layers import resolve_config
    from pipeline.settings.hardware import learner_threads
    from pipeline.engine.engine import Engine
    from pipeline.agent.learner import Learner
    from pipeline.replay import Replay

    os.makedirs(out_dir, exist_ok=True)
    res = resolve_config({"env": "ALE/Pong-v5"})
    cfg, hw, name = res.cfg, res.hw, res.profile
    device = torch.device("cuda" if hw.cuda else "cpu")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if hw.cuda else [])
    torch.set_num_threads(learner_threads(cfg.learner.learner_threads, cfg.collectors.num_collectors, hw))
    learner = Learner(cfg.learner, cfg.env_options.frame_stack, 6, device)
    engine = Engine(learner)
    if cfg.learner.compile:
        engine.compile_loss()  # the first warm-up step below compiles: the profile sees the compiled update
    M = cfg.collectors.envs_per_collector
    replay = Replay.of(20_000, 1, M, frame_stack=cfg.env_options.frame_stack, n_step=cfg.replay.n_step,
                       gamma=cfg.replay.gamma, seed=0)
    fill_replay(replay, 20_000, M, 0.01, 1000)

    def learner_step():
        with record_function("replay.sample"):
            batches = [learner.batch_from(replay, cfg.learner.batch_size)
                       for _ in range(cfg.learner.grad_accum_steps)]
        with record_function("learner.update"):
            engine.update(batches)
    for _ in range(3):
        learner_step()  # warm-up (and compilation, if on)
    if cfg.learner.compile and not engine.compiled:
        raise RuntimeError(f"torch.compile failed ({engine.compile_error}); profile with --compile false")
    with profile(activities=activities) as prof:
        for _ in range(steps):
            learner_step()
    learner_trace = os.path.join(out_dir, "trace_learner.json")
    prof.export_chrome_trace(learner_trace)
    print(f"\nLearner ({name}: batch {cfg.learner.batch_size} x {cfg.learner.grad_accum_steps}, amp {cfg.learner.amp}, "
          f"compile {cfg.learner.compile}), {steps} updates, top operations by total CPU time:")
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=15))

    torch.set_num_threads(1)
    collector = profiled_collector(cfg)
    rollout = collector.rollout
    for _ in range(10):
        rollout.step(0.1)
    rollout.act_ns = rollout.step_ns = 0
    t0 = time.perf_counter_ns()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps * 4):
            with record_function("collector.step"):
                rollout.step(0.1)
    total = time.perf_counter_ns() - t0
    collector.close()
    collector_trace = os.path.join(out_dir, "trace_collector.json")
    prof.export_chrome_trace(collector_trace)
    acting = "bf16" if cfg.collectors.act_bf16 else "fp32"
    print(f"\nCollector ({M} Pong envs, 1 torch thread, acting in {acting}), {steps * 4} steps: acting {100 * rollout.act_ns / total:.0f}%, "
          f"env stepping {100 * rollout.step_ns / total:.0f}%; top operations:")
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    print(f"Traces: {learner_trace}, {collector_trace}")
    return {"learner_trace": learner_trace, "collector_trace": collector_trace}
