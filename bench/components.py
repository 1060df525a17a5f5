"""Component benchmarks (``--only components``): the shared-memory ring against
multiprocessing.Queue, what writing to its ring costs a collector, ale-py's vector env against
gymnasium's, replay sampling, the learner alone per batch and precision, and batched acting;
and their report."""
from __future__ import annotations

import multiprocessing as mp
import statistics
import time

import numpy as np
import torch

from .common import fill_replay, get_from, rate, then_exit, windows
from .learner_grid import learner_updates_per_s


# ----------------------------------------------------------------------------- collector overhead
def _collector_loop(ring_name, seconds, out_q):
    from models import NetworkSpec, build_model
    from pipeline.actors.collector import RecordPusher
    from pipeline.transport.ring import Ring
    from pipeline.actors.rollout import Rollout
    from wrappers import BatchedEnv, EnvOptions

    torch.set_num_threads(1)  # as in a collector
    env = BatchedEnv("ALE/Pong-v5", EnvOptions(), 8)
    model = build_model(NetworkSpec("batchnorm", 4, env.n_actions)).eval()
    rollout = Rollout(env, model, 4, True, seed=0)
    ring = Ring.attach(ring_name, 4096) if ring_name else None
    pusher = RecordPusher(ring, rollout, False, lambda: False) if ring is not None else None

    def step():
        frames, fields, live, _ = rollout.step(0.1)
        if pusher is not None:
            pusher.push(frames, fields, live)
        return live
    # the first window warms up and is dropped: at least one more is measured however long the
    # first took (on a loaded machine it can outlast ``seconds``, which left none to report)
    rates, t_end = [], time.perf_counter() + seconds
    while len(rates) < 2 or time.perf_counter() < t_end:
        rates.append(rate(step, 1.0))
    env.close()
    if ring is not None:
        ring.close()
    out_q.put(statistics.median(rates[1:]))


def bench_collector_overhead(seconds: float) -> dict:
    """A collector (8 Pong envs, batched BatchNorm-DQN acting) stepping alone, against the same
    collector writing every transition to its ring while the consolidation thread moves them
    into the replay: what the queueing costs the collector."""
    from pipeline.replay.consolidator import Consolidator
    from pipeline.replay import Replay
    from pipeline.transport.ring import Ring

    ctx = mp.get_context("spawn")
    out = {}
    for label, with_ring in (("alone", False), ("with_ring", True)):
        ring = Ring.create("bench_ovh", 4096) if with_ring else None
        cons = None
        if ring is not None:
            cons = Consolidator([ring], Replay.of(50_000, 1, 8), 1024, lambda *_: None, 1e9)
            cons.start()
        q = ctx.Queue()
        p = ctx.Process(target=then_exit, args=(_collector_loop, ring.name if ring else None, seconds, q))
        p.start()
        out[f"steps_per_s_{label}"] = get_from(q, p, f"the collector ({label.replace('_', ' ')})")
        p.join()
        if cons is not None:
            cons.stop_event.set()
            cons.join()
            ring.close()
    out["overhead"] = 1 - out["steps_per_s_with_ring"] / out["steps_per_s_alone"]
    return out


# ----------------------------------------------------------------------------- envs
def bench_vector_envs(n_windows: int, num_envs: int = 8, window_s: float = 1.0) -> dict:
    """Agent steps/s of ale-py's C++ AtariVectorEnv (what collectors use) against gymnasium's
    SyncVectorEnv over single envs with the same preprocessing (Pong, random actions)."""
    from wrappers import BatchedEnv, EnvOptions

    native = BatchedEnv("ALE/Pong-v5", EnvOptions(), num_envs)
    native.reset(seed=0)
    sync = BatchedEnv("ALE/Pong-v5", EnvOptions(), num_envs, native=False)
    sync.reset(seed=0)
    rng = np.random.default_rng(0)

    def steps_per_s(env):
        def step():
            env.step(rng.integers(0, 6, num_envs))
            return num_envs
        return rate(step, window_s)
    a = windows(lambda: steps_per_s(native), n_windows)
    b = windows(lambda: steps_per_s(sync), n_windows)
    native.close()
    sync.close()
    return {"num_envs": num_envs, "ale_vector_steps_per_s": a, "gymnasium_sync_steps_per_s": b, "ratio": a / b}


# ----------------------------------------------------------------------------- replay
def bench_replay(n_windows: int, window_s: float = 0.5) -> dict:
    from pipeline.replay import Replay

    replay = Replay.of(100_000, 1, 8, seed=0)
    fill_replay(replay, 100_000, 8, 0.001, 1024)
    out = {"bytes_per_transition": replay.storage.bytes_per_transition()}
    for bs in (32, 256):
        def step():
            replay.sample(bs, channels_last=True)  # the stacks laid out as a CPU learner trains on them
            return 1
        out[f"batches_per_s_at_{bs}"] = windows(lambda: rate(step, window_s), n_windows)
    return out


# ----------------------------------------------------------------------------- learner, acting
def bench_learner(n_windows: int, compile_rows: bool, batches=(32, 256, 512), window_s: float = 1.0) -> list[dict]:
    from config_optimized import Config

    from pipeline.settings.hardware import detect_hardware

    hw = detect_hardware()
    low = "fp16" if hw.cuda else "bf16"
    rows = []
    for bs in batches:
        for amp in (False, True):
            for comp in ((False, True) if compile_rows else (False,)):
                if amp and not hw.has_mixed_precision:
                    # as the ladder's mixed-precision row: bf16 emulated in fp32 code paths ran
                    # 0.0-0.3 updates/s on a 2-core AMD EPYC family 23 model 1, most of --quick's minutes
                    rows.append({"batch": bs, "precision": low, "compile": comp, "skipped": f"no {low} hardware here"})
                    continue
                ups = learner_updates_per_s(Config.of(batch_size=bs, amp=amp, compile=comp), n_windows, window_s)
                rows.append({"batch": bs, "precision": low if amp else "fp32", "compile": comp,
                             "updates_per_s": ups, "samples_per_s": ups * bs})
    return rows


def bench_acting(n_windows: int, window_s: float = 0.5) -> list[dict]:
    from models import BatchNormDQN

    torch.set_num_threads(1)  # as in a collector
    model = BatchNormDQN(4, 6).eval()
    rows = []
    for bs in (1, 8, 32):
        x = torch.from_numpy(np.random.default_rng(0).integers(0, 255, (bs, 4, 84, 84), dtype=np.uint8))

        def step():
            model(x).argmax(1)
            return bs

        def obs_per_s():
            with torch.inference_mode():
                return rate(step, window_s)
        rows.append({"batch": bs, "obs_per_s": windows(obs_per_s, n_windows)})
    return rows


# ----------------------------------------------------------------------------- report
def print_components(c: dict) -> None:
    for label, q in (("batches of 8 frames", c["queue"]), ("one frame per message", c["queue_per_transition"])):
        print(f"\n| queue, {label} | transitions/s | MB/s |\n|---|---|---|")
        print(f"| shared-memory ring | {q['ring_transitions_per_s']:,.0f} | {q['ring_MB_per_s']:,.0f} |")
        print(f"| multiprocessing.Queue | {q['mp_queue_transitions_per_s']:,.0f} | {q['mp_queue_MB_per_s']:,.0f} |")
        print(f"Ring / mp.Queue: {q['ring_vs_mp_queue']:.1f}x")
    o = c["collector_overhead"]
    print(f"\nCollector (8 Pong envs): {o['steps_per_s_alone']:,.0f} steps/s alone, {o['steps_per_s_with_ring']:,.0f} "
          f"writing to its ring with consolidation running: overhead {100 * o['overhead']:.1f}%")
    e = c["envs"]
    print(f"\nPong, {e['num_envs']} envs, 1 core: ale-py AtariVectorEnv {e['ale_vector_steps_per_s']:,.0f} steps/s, "
          f"gymnasium SyncVectorEnv {e['gymnasium_sync_steps_per_s']:,.0f} steps/s ({e['ratio']:.1f}x)")
    r = c["replay"]
    print(f"\nReplay: {r['bytes_per_transition']:,.0f} B/transition; "
          f"{r['batches_per_s_at_32']:,.0f} batches/s at 32, {r['batches_per_s_at_256']:,.0f} at 256")
    print("\n| learner batch | precision | compile | updates/s | samples/s |\n|---|---|---|---|---|")
    for row in c["learner"]:
        if "skipped" in row:
            print(f"| {row['batch']} | {row['precision']} | {row['compile']} | {row['skipped']} | |")
            continue
        print(f"| {row['batch']} | {row['precision']} | {row['compile']} | {row['updates_per_s']:,.1f} "
              f"| {row['samples_per_s']:,.0f} |")
    print("\n| acting batch | obs/s |\n|---|---|")
    for row in c["acting"]:
        print(f"| {row['batch']} | {row['obs_per_s']:,.0f} |")
    if "learner_in_pipeline" in c:
        lp = c["learner_in_pipeline"]
        print(f"\nLearner in the pipeline (row 8): {lp['updates_per_s_in_pipeline']:,.2f} updates/s vs "
              f"{lp['updates_per_s_alone']:,.2f} alone at the same settings: {100 * lp['ratio']:.0f}%")
