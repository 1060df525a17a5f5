"""``--only learner-share``: what the pipeline's other parts take from the learner, one part at a
time, in one process, at this machine's profile settings (Pong).

Inside a training run the learner reaches a fraction of its speed alone (``--only learner``,
the components' "learner alone at row 8's settings"). This splits that loss: the same learner
trains blocks of updates under each condition in turn, interleaved round by round so that a
machine whose speed drifts (shared hosts do) drifts under every condition alike, and each
condition's figure is the median over rounds:

- alone: one preloaded batch, as ``--only learner`` measures;
- fresh batches: each update's batch sampled from a full replay and moved to the learner's
  device in the learner's own thread (the memory traffic of new batches, no second thread);
- prefetch thread: the batches from the trainer's ``Prefetcher`` thread (its GIL hand-offs and
  its share of the CPU);
- prefetch + co-runner: and another process busy ``duty`` of one core in 10 ms bursts, the share
  a collector takes inside a run (its env and acting shares in the ``[MAIN] Speed`` line).

The co-runner is a stand-in: a real collector's bursts follow its envs and the learner's
allowance; ``--only ladder``'s row 8 and its "learner alone" component give the real pair."""
from __future__ import annotations

import multiprocessing as mp
import statistics
import time

import torch

from .co_runner import busy
from .common import fill_replay

CONDITIONS = ("alone", "fresh batches", "prefetch thread", "prefetch + co-runner")


def learner_share(rounds: int = 8, block: int = 16, duty: float = 0.4, threads: int | None = None,
                  batch_size: int | None = None, replay_size: int = 100_000) -> dict:
    """Milliseconds per update under each of ``CONDITIONS`` (medians over ``rounds`` rounds of
    ``block`` updates each), and each one's share of the learner's speed alone."""
    from pipeline.agent.learner import Learner
    from pipeline.replay.prefetch import Prefetcher
    from pipeline.replay import Replay
    from pipeline.settings.hardware import detect_hardware, learner_threads
    from pipeline.settings.layers import resolve_config

    over = {"env": "ALE/Pong-v5", **({"batch_size": batch_size} if batch_size else {})}
    res = resolve_config(over, detect_hardware())
    cfg, hw, profile = res.cfg, res.hw, res.profile
    lrn_cfg, col = cfg.learner, cfg.collectors
    n_threads = threads or learner_threads(lrn_cfg.learner_threads, col.num_collectors, hw)
    torch.set_num_threads(n_threads)
    device = torch.device("cuda" if hw.cuda else "cpu")
    learner = Learner(lrn_cfg, cfg.env_options.frame_stack, 6, device)
    replay = Replay.of(replay_size, 1, col.envs_per_collector, frame_stack=cfg.env_options.frame_stack,
                       n_step=cfg.replay.n_step, gamma=cfg.replay.gamma, seed=cfg.seed)
    fill_replay(replay, replay_size, col.envs_per_collector, 0.001, 1024)
    bs = lrn_cfg.batch_size
    fixed = learner.to_device(replay.sample(bs))
    prefetcher = Prefetcher(replay, learner, bs, cfg.replay.prefetch_batches)
    prefetcher.start()
    # One co-runner for the whole measurement, busy only while ``active`` is set: starting one per
    # block would time its interpreter start too.
    ctx = mp.get_context("spawn")
    ready, active, stop = ctx.Event(), ctx.Event(), ctx.Event()
    co_runner = ctx.Process(target=busy, args=(duty, ready, active, stop), name="co-runner", daemon=True)
    co_runner.start()

    def run_block(condition: str, n: int) -> float:
        if condition == "prefetch + co-runner":
            active.set()
            time.sleep(0.05)  # its next burst has begun
        try:
            t0 = time.perf_counter()
            for _ in range(n):
                if condition == "alone":
                    batch = fixed
                elif condition == "fresh batches":
                    batch = learner.batch_from(replay, bs)
                else:
                    batch = prefetcher.get()
                learner.update([batch])
            if device.type == "cuda":
                torch.cuda.synchronize()
            return (time.perf_counter() - t0) / n * 1000
        finally:
            active.clear()

    try:
        if not ready.wait(120):
            raise RuntimeError(f"the co-runner process did not start (exit code {co_runner.exitcode})")
        for condition in CONDITIONS:  # warm-up: first-call allocations, the prefetch queue filled
            run_block(condition, max(2, block // 4))
        ms = {c: [] for c in CONDITIONS}
        for _ in range(rounds):
            for condition in CONDITIONS:
                ms[condition].append(run_block(condition, block))
    finally:
        stop.set()
        co_runner.join()
        prefetcher.stop_event.set()
        prefetcher.join()
    med = {c: statistics.median(v) for c, v in ms.items()}
    precision = str(learner.amp_dtype or torch.float32).removeprefix("torch.")
    return {"profile": profile, "batch": bs, "threads": n_threads, "precision": precision, "device": device.type,
            "co_runner_duty": duty, "rounds": rounds, "block": block,
            "rows": [{"condition": c, "ms_per_update": med[c], "updates_per_s": 1000 / med[c],
                      "share_of_alone": med["alone"] / med[c]} for c in CONDITIONS]}


def print_learner_share(res: dict) -> None:
    print(f"\nThe learner under the pipeline's other parts ({res['profile']} profile, batch {res['batch']}, "
          f"{res['threads']} thread(s), {res['precision']}, {res['device']}; medians of {res['rounds']} rounds of "
          f"{res['block']} updates, conditions interleaved; co-runner busy {res['co_runner_duty']:.0%} of a core)")
    print("| condition | ms per update | updates/s | share of alone |\n|---|---|---|---|")
    for r in res["rows"]:
        print(f"| {r['condition']} | {r['ms_per_update']:.1f} | {r['updates_per_s']:.1f} | {r['share_of_alone']:.0%} |")
