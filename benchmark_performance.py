"""Component benchmarks: what the ring, the replay, the learner and batched acting each deliver
on this machine, measured in one run with warm-up excluded and medians over several windows.

    python benchmark_performance.py                  # all components
    python benchmark_performance.py --quick          # shorter windows, no torch.compile rows
    python benchmark_performance.py --json out.json

The optimization ladder (issue 4) is not measured by this script yet.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import time

import numpy as np
import torch

FRAME = 84 * 84


def windows(fn, n_windows: int, warmup: int = 1) -> float:
    """Median of ``fn()`` (a rate) over ``n_windows`` windows after ``warmup`` discarded ones."""
    for _ in range(warmup):
        fn()
    return statistics.median(fn() for _ in range(n_windows))


# ----------------------------------------------------------------------------- queue
def _ring_producer(name, capacity, n, batch):
    from pipeline.ring import Ring

    ring = Ring.attach(name, capacity)
    frames = np.random.default_rng(0).integers(0, 255, (batch, 84, 84), dtype=np.uint8)
    fields = dict(action=np.zeros(batch, np.uint8), reward=np.zeros(batch, np.float32), flags=np.zeros(batch, np.uint8))
    for _ in range(n // batch):
        ring.push_blocking(frames, lambda: False, False, **fields)
    ring.close()


def _mpq_producer(q, n, batch):
    frames = np.random.default_rng(0).integers(0, 255, (batch, 84, 84), dtype=np.uint8)
    for _ in range(n // batch):
        q.put((frames, np.zeros(batch, np.uint8), np.zeros(batch, np.float32), np.zeros(batch, np.uint8)))
    q.put(None)


def bench_queue(n: int, batch: int = 8) -> dict:
    from pipeline.ring import Ring

    ctx = mp.get_context("spawn")
    ring = Ring.create("bench_ring", 4096)
    sink_buf = np.empty((4096, 84, 84), np.uint8)
    try:
        p = ctx.Process(target=_ring_producer, args=(ring.name, 4096, n, batch))
        p.start()
        got, t0 = 0, None

        def sink(frames, fields):
            sink_buf[:len(frames)] = frames  # the consolidation thread's copy into the replay
        while got < (n // batch) * batch:
            k = ring.drain(1024, sink)
            if k and t0 is None:
                t0 = time.perf_counter()
            got += k
        ring_rate = got / (time.perf_counter() - t0)
        p.join()
    finally:
        ring.close()
    q = ctx.Queue(maxsize=512)
    p = ctx.Process(target=_mpq_producer, args=(q, n, batch))
    p.start()
    got, t0 = 0, None
    while (item := q.get()) is not None:
        if t0 is None:
            t0 = time.perf_counter()
        got += len(item[0])
    mpq_rate = got / (time.perf_counter() - t0)
    p.join()
    return {"ring_transitions_per_s": ring_rate, "ring_MB_per_s": ring_rate * FRAME / 1e6,
            "mp_queue_transitions_per_s": mpq_rate, "mp_queue_MB_per_s": mpq_rate * FRAME / 1e6,
            "ring_vs_mp_queue": ring_rate / mpq_rate, "batch": batch}


# ----------------------------------------------------------------------------- envs
def bench_vector_envs(n_windows: int, num_envs: int = 8) -> dict:
    """Agent steps/s of ale-py's C++ AtariVectorEnv (what collectors use) against gymnasium's
    SyncVectorEnv over single envs with the same preprocessing (Pong, random actions)."""
    import gymnasium as gym

    from wrappers import BatchedEnv, EnvOptions, make_single_frame_env

    opts = EnvOptions()
    native = BatchedEnv("ALE/Pong-v5", opts, num_envs)
    native.reset(seed=0)
    sync = gym.vector.SyncVectorEnv([lambda: make_single_frame_env("ALE/Pong-v5", opts) for _ in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)
    sync.reset(seed=0)
    rng = np.random.default_rng(0)

    def rate(step):
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 1.0:
            step(rng.integers(0, 6, num_envs))
            n += num_envs
        return n / (time.perf_counter() - t0)
    a = windows(lambda: rate(native.step), n_windows)
    b = windows(lambda: rate(sync.step), n_windows)
    native.close()
    sync.close()
    return {"num_envs": num_envs, "ale_vector_steps_per_s": a, "gymnasium_sync_steps_per_s": b, "ratio": a / b}


# ----------------------------------------------------------------------------- replay
def bench_replay(n_windows: int) -> dict:
    from pipeline.replay import Replay
    from pipeline.ring import FIRST

    replay = Replay(100_000, 1, 8, 4, 3, 0.99, seed=0)
    rng = np.random.default_rng(0)
    for start in range(0, 100_000, 1024):
        k = 1024
        flags = np.where(rng.random(k) < 0.001, FIRST, 0).astype(np.uint8)
        replay.writer.write(0, rng.integers(0, 255, (k, 84, 84), dtype=np.uint8),
                            {"env": (np.arange(k) % 8).astype(np.uint16), "action": np.zeros(k, np.uint8),
                             "reward": np.zeros(k, np.float32), "flags": flags})
    out = {"bytes_per_transition": replay.storage.bytes_per_transition()}
    for bs in (32, 256):
        def rate():
            t0, n = time.perf_counter(), 0
            while time.perf_counter() - t0 < 0.5:
                replay.sample(bs)
                n += 1
            return n / (time.perf_counter() - t0)
        out[f"batches_per_s_at_{bs}"] = windows(rate, n_windows)
    return out


# ----------------------------------------------------------------------------- learner
def bench_learner(n_windows: int, compile_rows: bool) -> list[dict]:
    from config_optimized import Config
    from pipeline.learner import Learner

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    low = "fp16" if device.type == "cuda" else "bf16"
    rows = []
    for bs in (32, 256, 512):
        for amp in (False, True):
            for comp in ((False, True) if compile_rows else (False,)):
                torch._dynamo.reset()
                lrn = Learner(Config(batch_size=bs, amp=amp, compile=comp), 4, 6, device)
                rng = np.random.default_rng(0)
                b = lrn.to_device({"obs": rng.integers(0, 255, (bs, 4, 84, 84), dtype=np.uint8),
                                   "next_obs": rng.integers(0, 255, (bs, 4, 84, 84), dtype=np.uint8),
                                   "action": rng.integers(0, 6, bs), "return": np.zeros(bs, np.float32),
                                   "discount": np.full(bs, 0.99, np.float32), "weights": None})

                def rate():
                    t0, n = time.perf_counter(), 0
                    while time.perf_counter() - t0 < 1.0:
                        lrn.update([b])
                        n += 1
                    if device.type == "cuda":
                        torch.cuda.synchronize()
                    return n * bs / (time.perf_counter() - t0)
                rows.append({"batch": bs, "precision": low if amp else "fp32", "compile": comp,
                             "samples_per_s": windows(rate, n_windows, warmup=2 if comp else 1)})
    return rows


# ----------------------------------------------------------------------------- acting
def bench_acting(n_windows: int) -> list[dict]:
    from models import BatchNormDQN

    torch.set_num_threads(1)  # as in a collector
    model = BatchNormDQN(4, 6).eval()
    rows = []
    for bs in (1, 8, 32):
        x = torch.from_numpy(np.random.default_rng(0).integers(0, 255, (bs, 4, 84, 84), dtype=np.uint8))

        def rate():
            t0, n = time.perf_counter(), 0
            with torch.inference_mode():
                while time.perf_counter() - t0 < 0.5:
                    model(x).argmax(1)
                    n += 1
            return n * bs / (time.perf_counter() - t0)
        rows.append({"batch": bs, "obs_per_s": windows(rate, n_windows)})
    return rows


def machine() -> dict:
    from config_optimized import detect_hardware

    hw = detect_hardware()
    return {"cores": hw.cores, "cpu": hw.cpu_model, "ram_gib": round(hw.ram_bytes / 2**30, 1),
            "gpu": hw.gpu_name, "torch": torch.__version__, "python": platform.python_version(),
            "load_avg_at_start": os.getloadavg()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer windows, no torch.compile rows")
    ap.add_argument("--json", metavar="PATH", help="write all figures as JSON")
    args = ap.parse_args(argv)
    nw = 3 if args.quick else 5
    result = {"machine": machine(), "components": {}}
    torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))
    c = result["components"]
    c["queue"] = bench_queue(20_000 if args.quick else 100_000)
    c["envs"] = bench_vector_envs(nw)
    c["replay"] = bench_replay(nw)
    c["learner"] = bench_learner(nw, compile_rows=not args.quick)
    c["acting"] = bench_acting(nw)
    m = result["machine"]
    print(f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB, GPU {m['gpu']}; load {m['load_avg_at_start']}")
    q = c["queue"]
    print("\n| queue (batches of 8 frames) | transitions/s | MB/s |\n|---|---|---|")
    print(f"| shared-memory ring | {q['ring_transitions_per_s']:,.0f} | {q['ring_MB_per_s']:,.0f} |")
    print(f"| multiprocessing.Queue | {q['mp_queue_transitions_per_s']:,.0f} | {q['mp_queue_MB_per_s']:,.0f} |")
    print(f"\nRing / mp.Queue: {q['ring_vs_mp_queue']:.1f}x")
    e = c["envs"]
    print(f"\nPong, {e['num_envs']} envs, 1 core: ale-py AtariVectorEnv {e['ale_vector_steps_per_s']:,.0f} steps/s, "
          f"gymnasium SyncVectorEnv {e['gymnasium_sync_steps_per_s']:,.0f} steps/s ({e['ratio']:.1f}x)")
    r = c["replay"]
    print(f"\nReplay: {r['bytes_per_transition']:,.0f} B/transition; "
          f"{r['batches_per_s_at_32']:,.0f} batches/s at 32, {r['batches_per_s_at_256']:,.0f} at 256")
    print("\n| learner batch | precision | compile | samples/s |\n|---|---|---|---|")
    for row in c["learner"]:
        print(f"| {row['batch']} | {row['precision']} | {row['compile']} | {row['samples_per_s']:,.0f} |")
    print("\n| acting batch | obs/s |\n|---|---|")
    for row in c["acting"]:
        print(f"| {row['batch']} | {row['obs_per_s']:,.0f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
