"""What each optimization buys on this machine, measured side by side in one run: the ladder
(each row adds one optimization, same game, same replay ratio) and component
benchmarks (ring vs multiprocessing.Queue, collector overhead, replay, learner, acting). Warm-up
is excluded, figures are medians over several windows, and the load average is reported.

    python benchmark_performance.py                       # ladder + components (~10 minutes)
    python benchmark_performance.py --quick               # under 3 minutes, no torch.compile rows
    python benchmark_performance.py --json out.json --plot ladder.png
    python benchmark_performance.py --only ladder --rows 4,8   # some rows (and the baseline)
    python benchmark_performance.py --profile             # torch.profiler traces in profiles/
    python benchmark_performance.py --autotune            # writes ~/.config/fast-dqn/autotuned-atari.json
    python benchmark_performance.py --time-to-score --env ALE/Pong-v5 --vs-baseline --json tts.json --plot tts.png
    python benchmark_performance.py --time-to-score --quick   # the catch game, a few minutes
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import platform
import queue
import statistics
import sys
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
    from wrappers import BatchedEnv, EnvOptions

    native = BatchedEnv("ALE/Pong-v5", EnvOptions(), num_envs)
    native.reset(seed=0)
    sync = BatchedEnv("ALE/Pong-v5", EnvOptions(), num_envs, native=False)
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
    from pipeline.transition import FIRST

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
def random_batch(lrn, bs: int) -> dict:
    """One batch of random frames (6 actions) on the learner's device: what the learner-alone
    figures train on."""
    rng = np.random.default_rng(0)
    return lrn.to_device({"obs": rng.integers(0, 255, (bs, 4, 84, 84), dtype=np.uint8),
                          "next_obs": rng.integers(0, 255, (bs, 4, 84, 84), dtype=np.uint8),
                          "action": rng.integers(0, 6, bs), "return": np.zeros(bs, np.float32),
                          "discount": np.full(bs, 0.99, np.float32), "weights": None})


def learner_updates_per_s(cfg, n_windows: int) -> float:
    """Updates/s of the learner alone on one preloaded batch (accumulated grad_accum_steps times)."""
    from pipeline.learner import Learner

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch._dynamo.reset()
    lrn = Learner(cfg, 4, 6, device)
    b = random_batch(lrn, cfg.batch_size)

    def rate():
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 1.0:
            lrn.update([b] * cfg.grad_accum_steps)
            n += 1
        if device.type == "cuda":
            torch.cuda.synchronize()
        return n / (time.perf_counter() - t0)
    return windows(rate, n_windows, warmup=3 if cfg.compile else 1)


def bench_learner(n_windows: int, compile_rows: bool) -> list[dict]:
    from config_optimized import Config

    low = "fp16" if torch.cuda.is_available() else "bf16"
    rows = []
    for bs in (32, 256, 512):
        for amp in (False, True):
            for comp in ((False, True) if compile_rows else (False,)):
                ups = learner_updates_per_s(Config(batch_size=bs, amp=amp, compile=comp), n_windows)
                rows.append({"batch": bs, "precision": low if amp else "fp32", "compile": comp,
                             "updates_per_s": ups, "samples_per_s": ups * bs})
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


def update_flops(cfg) -> float:
    """Floating-point operations of one learner update at ``cfg`` (forward and backward on s, the
    target and Double-DQN forwards on s'), counted by torch's FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    from pipeline.learner import Learner

    lrn = Learner(cfg, 4, 6, torch.device("cpu"))
    with FlopCounterMode(display=False) as fc:
        lrn.update([random_batch(lrn, cfg.batch_size)])
    return float(fc.get_total_flops())


def matmul_peak(dtype: torch.dtype, n_windows: int) -> float:
    """FLOP/s of a large matrix product at ``dtype`` on this process's threads: the practical peak
    a learner could reach here."""
    a = torch.randn(2048, 2048).to(dtype)
    b = torch.randn(2048, 2048).to(dtype)

    def rate():
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 0.5:
            torch.mm(a, b)
            n += 1
        return n * 2 * 2048 ** 3 / (time.perf_counter() - t0)
    return windows(rate, n_windows)


def bench_learner_grid(seconds: float, n_windows: int, batches=(32, 64, 128), threads=(1, 2)) -> list[dict]:
    """The learner alone (one preloaded batch) against the same learner inside the pipeline (this
    machine's profile, Pong, replay ratio 8), per batch and thread count; and the share of the
    CPU's practical peak (a large matmul at the learner's precision) that each reaches."""
    from config_optimized import build_config, detect_hardware

    hw = detect_hardware()
    rows = []
    for th in threads:
        torch.set_num_threads(th)
        base, _, _ = build_config({"env": "ALE/Pong-v5"}, hw)
        peak = matmul_peak(torch.bfloat16 if base.amp and hw.cpu_bf16 else torch.float32, n_windows)
        for bs in batches:
            cfg = dataclasses.replace(base, batch_size=bs, learner_threads=th)
            alone = learner_updates_per_s(cfg, n_windows)
            flops = update_flops(cfg)
            print(f"  learner batch {bs}, {th} thread(s): alone {alone:.1f} updates/s; in the pipeline ...", flush=True)
            res = run_row("profile", {"extra": {"batch_size": bs, "learner_threads": th}}, seconds)
            inside = res.get("updates_per_s")
            rows.append({"batch": bs, "threads": th, "precision": "bf16" if cfg.amp and hw.cpu_bf16 else "fp32",
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


# ----------------------------------------------------------------------------- collector overhead
def _collector_loop(ring_name, seconds, out_q):
    from models import build_model
    from pipeline.ring import Ring
    from pipeline.rollout import Rollout
    from wrappers import BatchedEnv, EnvOptions

    torch.set_num_threads(1)  # as in a collector
    env = BatchedEnv("ALE/Pong-v5", EnvOptions(), 8)
    model = build_model("batchnorm", 4, env.n_actions, False).eval()
    rollout = Rollout(env, model, 4, True, seed=0)
    ring = Ring.attach(ring_name, 4096) if ring_name else None
    rates, t_end = [], time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t0, n = time.perf_counter(), 0
        while time.perf_counter() - t0 < 1.0:
            frames, fields, live, _ = rollout.step(0.1)
            if ring is not None:
                ring.push_blocking(frames, lambda: False, False, **fields)
            n += live
        rates.append(n / (time.perf_counter() - t0))
    env.close()
    if ring is not None:
        ring.close()
    out_q.put(statistics.median(rates[1:]))


def bench_collector_overhead(seconds: float) -> dict:
    """A collector (8 Pong envs, batched BatchNorm-DQN acting) stepping alone, against the same
    collector writing every transition to its ring while the consolidation thread moves them
    into the replay: what the queueing costs the collector."""
    from pipeline.consolidator import Consolidator
    from pipeline.replay import Replay
    from pipeline.ring import Ring

    ctx = mp.get_context("spawn")
    out = {}
    for label, with_ring in (("alone", False), ("with_ring", True)):
        ring = Ring.create("bench_ovh", 4096) if with_ring else None
        cons = None
        if ring is not None:
            cons = Consolidator([ring], Replay(50_000, 1, 8, 4, 3, 0.99), 1024, lambda *_: None, 1e9)
            cons.start()
        q = ctx.Queue()
        p = ctx.Process(target=_collector_loop, args=(ring.name if ring else None, seconds, q))
        p.start()
        out[f"steps_per_s_{label}"] = q.get()
        p.join()
        if cons is not None:
            cons.stop_event.set()
            cons.join()
            ring.close()
    out["overhead"] = 1 - out["steps_per_s_with_ring"] / out["steps_per_s_alone"]
    return out


def bench_learner_in_pipeline(row: dict, n_windows: int) -> dict:
    """The learner alone, on preloaded batches, at the settings and thread count of a pipeline
    row: the ceiling that row's learner could reach."""
    from config_optimized import Config

    st = row["settings"]
    torch.set_num_threads(st["learner_threads"] or max(1, (os.cpu_count() or 2) - st["num_collectors"]))
    cfg = Config(model_arch=st["model_arch"], amp=st["amp"], compile=st["compile"], batch_size=st["batch_size"],
                 grad_accum_steps=st["grad_accum_steps"], channels_last=st["channels_last"])
    alone = learner_updates_per_s(cfg, n_windows)
    return {"updates_per_s_alone": alone, "updates_per_s_in_pipeline": row["updates_per_s"],
            "ratio": row["updates_per_s"] / alone, "settings": st}


# ----------------------------------------------------------------------------- ladder
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
                 tensorboard=False, processor_log_interval=1e9, epoch_steps=10**9, seed=1)


class RssPeak:
    """Peak resident memory of this process plus its children (collectors), sampled every
    0.2 s; shared-memory pages mapped by both sides count twice."""

    def __init__(self):
        import threading

        self.peak, self.stop = 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            for line in open(f"/proc/{pid}/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def _tree(self, pid: int) -> list[int]:
        out = [pid]
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                for c in open(f"/proc/{pid}/task/{task}/children").read().split():
                    out += self._tree(int(c))
        except OSError:
            pass
        return out

    def _run(self):
        while not self.stop.wait(0.2):
            self.peak = max(self.peak, sum(self._rss(p) for p in self._tree(os.getpid())))

    def mb(self) -> float:
        self.stop.set()
        return self.peak / 2**20


def _sync_row(kind: str, seconds: float, window_s: float) -> dict:
    """Rows 1-3: one process that plays and trains in turn (CleanRL's loop shape)."""
    import collections
    import random

    from config_optimized import Config
    from pipeline.learner import Learner
    from pipeline.replay import Replay
    from pipeline.rollout import Rollout
    from wrappers import BatchedEnv, make_env

    rss = RssPeak()
    torch.set_num_threads(os.cpu_count() or 1)
    cfg = Config(**LADDER_BASE, **{k: v for k, v in BENCH_RUN.items() if k in ("learning_starts", "buffer_size", "seed")})
    torch.manual_seed(cfg.seed)
    opts = cfg.env_options()
    gamma, bs = cfg.gamma, cfg.batch_size
    if kind == "deque":
        env = make_env(cfg.env, opts)
        n_actions = int(env.action_space.n)
    else:
        env = BatchedEnv(cfg.env, opts, 8 if kind == "vector" else 1, native=kind == "vector")
        n_actions = env.n_actions
    learner = Learner(cfg, cfg.frame_stack, n_actions, torch.device("cpu"))
    rng = np.random.default_rng(cfg.seed)
    steps = trained = 0
    update_s = 0.0
    if kind == "deque":
        memory = collections.deque(maxlen=cfg.buffer_size)
        obs, _ = env.reset(seed=cfg.seed)

        def play(eps):
            nonlocal obs
            with torch.no_grad():
                greedy = int(learner.model(torch.from_numpy(obs)[None]).argmax(1))
            action = int(rng.integers(n_actions)) if rng.random() < eps else greedy
            nxt, r, term, trunc, _ = env.step(action)
            memory.append((obs, action, r, nxt, term))
            obs = nxt if not (term or trunc) else env.reset()[0]
            return 1

        def sample():
            batch = random.sample(memory, bs)
            o, a, r, n, d = zip(*batch)
            return {"obs": np.stack(o), "next_obs": np.stack(n), "action": np.array(a),
                    "return": np.array(r, np.float32), "discount": gamma * (1 - np.array(d, np.float32)),
                    "weights": None}
    else:
        replay = Replay(cfg.buffer_size, 1, env.num_envs, cfg.frame_stack, cfg.n_step, gamma, seed=cfg.seed)
        rollout = Rollout(env, learner.model, cfg.frame_stack, cfg.clip_rewards, cfg.seed, cfg.reward_scale)

        def play(eps):
            frames, fields, live, _ = rollout.step(eps)
            replay.writer.write(0, frames, fields)
            return live

        def sample():
            return replay.sample(bs)
    rates, ups, busy = [], [], []
    t_learn = None
    while True:
        eps = max(0.1, 1 - steps / 100_000)
        steps += play(eps)
        while steps >= cfg.learning_starts and (steps - cfg.learning_starts) * cfg.replay_ratio - trained >= bs:
            if t_learn is None:
                t_learn = w_t = time.perf_counter()
                w_steps, w_trained, w_update = steps, trained, update_s
            t0 = time.perf_counter()
            learner.update([learner.to_device(sample())])
            update_s += time.perf_counter() - t0
            trained += bs
        if t_learn is not None and (now := time.perf_counter()) - w_t >= window_s:
            dt = now - w_t
            rates.append((steps - w_steps) / dt)
            ups.append((trained - w_trained) / bs / dt)
            busy.append((update_s - w_update) / dt)
            w_t, w_steps, w_trained, w_update = now, steps, trained, update_s
            if now - t_learn >= seconds:
                break
    if kind == "deque":
        sizes = [sum(sys.getsizeof(x) for x in t) + sys.getsizeof(t) for t in random.sample(memory, 100)]
        bpt = statistics.fmean(sizes)
    else:
        bpt = replay.storage.bytes_per_transition()
    env.close()
    rates, ups, busy = rates[1:] or rates, ups[1:] or ups, busy[1:] or busy  # first window is warm-up
    return {"env_steps_per_s": statistics.median(rates), "updates_per_s": statistics.median(ups),
            "samples_per_s": statistics.median(ups) * bs, "learner_busy": statistics.median(busy),
            "collector_wait": None, "drops": 0, "bytes_per_transition": bpt, "peak_rss_mb": rss.mb(),
            "windows": len(rates)}


def _pipeline_row(spec: dict, seconds: float, window_s: float) -> dict:
    """Rows 4-8 and autotune trials: the real Trainer (collector processes, rings, consolidation,
    replay, learner), measured for ``seconds`` in time windows once the collectors run at the
    learner's pace.
    ``spec`` is {"profile": True} (this machine's auto profile at the ladder's replay ratio, plus
    any ``"extra"`` options) or {"overrides": {...}}."""
    import tempfile
    import threading

    from config_optimized import Config, build_config, detect_hardware, validate
    from pipeline.ratio import ReplayRatio
    from pipeline.run import open_run
    from pipeline.trainer import Trainer

    rss = RssPeak()
    hw = detect_hardware()
    with tempfile.TemporaryDirectory() as tmp:
        run = {**BENCH_RUN, "run_dir": tmp, "env": spec.get("overrides", {}).get("env", "ALE/Pong-v5")}
        if spec.get("profile"):
            cfg, hw, name = build_config({**run, "replay_ratio": LADDER_BASE["replay_ratio"], **spec.get("extra", {})}, hw)
        else:
            cfg, name = Config(**{**spec["overrides"], **run}), "explicit"
        validate(cfg, hw)
        log = open_run(cfg)
        trainer = Trainer(cfg, hw, log)

        samples = []

        def sample():
            return (time.perf_counter(), trainer.env_steps(), trainer.learner.updates, trainer.update_s_total,
                    trainer.collector_time_ns(), trainer.consolidator.drops())

        def stopper():
            # Measure once the collectors have used up the head start the replay-ratio control
            # gives them (they then run at the learner's pace), in time windows of window_s.
            try:
                slack = ReplayRatio(cfg.replay_ratio, cfg.effective_batch, cfg.learning_starts,
                                    cfg.num_collectors * cfg.envs_per_collector).slack
                while trainer.stop_reason is None and trainer.env_steps() <= cfg.learning_starts + 1.5 * slack:
                    time.sleep(0.05)
                time.sleep(window_s)  # one more window of warm-up
                samples.append(sample())
                t_end = samples[0][0] + seconds
                while trainer.stop_reason is None and time.perf_counter() < t_end:
                    time.sleep(window_s)
                    samples.append(sample())
            finally:
                trainer.stop_reason = "benchmark"
        threading.Thread(target=stopper, daemon=True).start()
        try:
            trainer.train()
        finally:
            trainer.stop_workers()
            trainer.release()
            log.close()
        bpt = trainer.replay.storage.bytes_per_transition()
    if len(samples) < 2:
        raise RuntimeError("the run ended before a measuring window")
    win = []
    for a, b in zip(samples, samples[1:]):
        dt = b[0] - a[0]
        coll = {k: (b[4][k] - a[4][k]) / 1e9 for k in a[4]}
        ctot = max(sum(coll.values()), 1e-9)
        win.append({"env_steps_per_s": (b[1] - a[1]) / dt, "updates_per_s": (b[2] - a[2]) / dt,
                    "learner_busy": (b[3] - a[3]) / dt, "collector_queue_wait": coll["queue_wait"] / ctot,
                    "collector_throttled": coll["throttle"] / ctot})
    med = lambda k: statistics.median(w[k] for w in win)  # noqa: E731
    return {"env_steps_per_s": med("env_steps_per_s"), "updates_per_s": med("updates_per_s"),
            "samples_per_s": med("updates_per_s") * cfg.effective_batch, "learner_busy": med("learner_busy"),
            "collector_wait": med("collector_queue_wait"), "collector_throttled": med("collector_throttled"),
            "drops": samples[-1][5] - samples[0][5], "bytes_per_transition": bpt, "peak_rss_mb": rss.mb(),
            "windows": len(win),
            "profile": name, "settings": {k: getattr(cfg, k) for k in (
                "model_arch", "amp", "compile", "batch_size", "grad_accum_steps", "num_collectors",
                "envs_per_collector", "replay_ratio", "learner_threads", "channels_last")}}


def _row_entry(mode, params, seconds, window_s, out_q):
    import contextlib

    try:
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            if mode == "sync":
                res = _sync_row(params["kind"], seconds, window_s)
            elif mode == "profile":
                res = _pipeline_row({"profile": True, **params}, seconds, window_s)
            elif mode == "pipeline":
                res = _pipeline_row({"overrides": {**LADDER_BASE, **params}}, seconds, window_s)
            else:  # "explicit": a complete set of overrides (autotune)
                res = _pipeline_row({"overrides": params}, seconds, window_s)
        out_q.put(res)
    except BaseException as e:
        import traceback

        out_q.put({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})


def run_in_child(entry, args: tuple, what: str) -> dict:
    """``entry(*args, out_q)`` in a fresh spawned process, so its memory peak and thread settings
    are its own; its one report, or an error if it died without one."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=entry, args=(*args, q))
    p.start()
    while True:
        try:
            res = q.get(timeout=1.0)
            break
        except queue.Empty:
            if not p.is_alive():  # died without a word (killed, out of memory, a crash in C)
                res = {"error": f"{what} process exited with code {p.exitcode} before reporting"}
                break
    p.join()
    return res


def run_row(mode: str, params: dict, seconds: float, window_s: float = 2.0) -> dict:
    """One row in a fresh process."""
    return run_in_child(_row_entry, (mode, params, seconds, window_s), "the row's")


def bench_ladder(seconds: float, quick: bool, only: set[int] | None = None) -> list[dict]:
    from config_optimized import detect_hardware

    hw = detect_hardware()
    rows = []
    for number, (name, mode, params) in enumerate(LADDER, 1):
        row = {"name": name}
        if only and number not in only and number != 1:  # row 1 stays: every speed-up is against it
            continue
        if params.get("compile") and quick:
            row["skipped"] = "skipped with --quick (compiling takes about a minute)"
        elif params.get("amp") and not (hw.cuda or _cpu_has_bf16()):
            row["skipped"] = "no fp16/bf16 hardware here"
        else:
            print(f"  ladder {name} ...", flush=True)
            row.update(run_row(mode, params, seconds))
        rows.append(row)
    base = rows[0].get("env_steps_per_s")
    for row in rows:
        if base and row.get("env_steps_per_s"):
            row["speedup_vs_baseline"] = row["env_steps_per_s"] / base
    return rows


def _cpu_has_bf16() -> bool:
    try:
        return "avx512_bf16" in open("/proc/cpuinfo").read() or "amx_bf16" in open("/proc/cpuinfo").read()
    except OSError:
        return False


# ----------------------------------------------------------------------------- profiling
def profile_run(out_dir: str, steps: int = 30) -> dict:
    """torch.profiler over learner updates (replay sampling included) and collector steps at this
    machine's profile settings; prints the top operations and writes Chrome traces (open them in
    chrome://tracing or https://ui.perfetto.dev)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    from config_optimized import build_config
    from models import build_model
    from pipeline.learner import Learner
    from pipeline.replay import Replay
    from pipeline.rollout import Rollout
    from pipeline.transition import FIRST
    from wrappers import BatchedEnv

    os.makedirs(out_dir, exist_ok=True)
    cfg, hw, name = build_config({"env": "ALE/Pong-v5"})
    device = torch.device("cuda" if hw.cuda else "cpu")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if hw.cuda else [])
    torch.set_num_threads(max(1, hw.cores - cfg.num_collectors))
    learner = Learner(cfg, cfg.frame_stack, 6, device)
    M = cfg.envs_per_collector
    replay = Replay(20_000, 1, M, cfg.frame_stack, cfg.n_step, cfg.gamma, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20_000 // 1000):
        replay.writer.write(0, rng.integers(0, 255, (1000, 84, 84), dtype=np.uint8),
                            {"env": (np.arange(1000) % M).astype(np.uint16), "action": rng.integers(0, 6, 1000).astype(np.uint8),
                             "reward": np.zeros(1000, np.float32),
                             "flags": np.where(rng.random(1000) < 0.01, FIRST, 0).astype(np.uint8)})

    def learner_step():
        with record_function("replay.sample"):
            batches = [learner.to_device(replay.sample(cfg.batch_size)) for _ in range(cfg.grad_accum_steps)]
        with record_function("learner.update"):
            learner.update(batches)
    for _ in range(3):
        learner_step()  # warm-up (and compilation, if on)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            learner_step()
    learner_trace = os.path.join(out_dir, "trace_learner.json")
    prof.export_chrome_trace(learner_trace)
    print(f"\nLearner ({name}: batch {cfg.batch_size} x {cfg.grad_accum_steps}, amp {cfg.amp}, "
          f"compile {cfg.compile}), {steps} updates, top operations by total CPU time:")
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=15))

    torch.set_num_threads(1)
    env = BatchedEnv("ALE/Pong-v5", cfg.env_options(), M)
    model = build_model(cfg.model_arch, cfg.frame_stack, env.n_actions, cfg.dueling).eval()
    rollout = Rollout(env, model, cfg.frame_stack, True, seed=0)
    for _ in range(10):
        rollout.step(0.1)
    rollout.act_ns = rollout.step_ns = 0
    t0 = time.perf_counter_ns()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps * 4):
            with record_function("collector.step"):
                rollout.step(0.1)
    total = time.perf_counter_ns() - t0
    env.close()
    collector_trace = os.path.join(out_dir, "trace_collector.json")
    prof.export_chrome_trace(collector_trace)
    print(f"\nCollector ({M} Pong envs, 1 thread), {steps * 4} steps: acting {100 * rollout.act_ns / total:.0f}%, "
          f"env stepping {100 * rollout.step_ns / total:.0f}%; top operations:")
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=10))
    print(f"Traces: {learner_trace}, {collector_trace}")
    return {"learner_trace": learner_trace, "collector_trace": collector_trace}


# ----------------------------------------------------------------------------- autotune
def autotune(seconds: float, quick: bool = False, env: str = "ALE/Pong-v5") -> dict:
    """Coordinate search over the system's knobs (collector count, envs per collector, learner
    threads; never the batch size, which changes what is learned per update), each trial a
    short real run of ``env`` at the default replay ratio; the best becomes the autotuned
    profile of env's game family (config_optimized.autotuned_path), which the auto profile then
    prefers for that family only."""
    from config_optimized import autotuned_path, detect_hardware, pick_profile, scale_profile
    from pipeline.record import write_json
    from presets import family_of

    hw = detect_hardware()
    base_name = pick_profile(hw)
    family = family_of(env)
    best = {**scale_profile(base_name, hw, env), "learner_threads": 0}
    grid = [("num_collectors", [1] if quick else sorted({1, 2, max(1, hw.cores // 2)})),
            ("envs_per_collector", [8, 16] if quick else [4, 8, 16]),
            ("learner_threads", [0, hw.cores])]
    trials, tried = [], {}

    def score(over):
        key = json.dumps(over, sort_keys=True)
        if key not in tried:
            res = run_row("explicit", {**over, "env": env}, seconds)
            tried[key] = res.get("env_steps_per_s", 0.0) if "error" not in res else 0.0
            trials.append({"settings": {k: over[k] for k, _ in grid}, "env_steps_per_s": tried[key],
                           "error": res.get("error")})
            print(f"  autotune {trials[-1]['settings']}: {tried[key]:,.0f} env steps/s", flush=True)
        return tried[key]
    best_score = score(best)
    for knob, values in grid:
        for v in values:
            cand = {**best, knob: v}
            if (sc := score(cand)) > best_score * 1.03:  # within noise, keep the simpler setting
                best, best_score = cand, sc
    best = {k: v for k, v in best.items() if k != "learner_threads" or v}
    data = {"overrides": best, "family": family, "tuned_on": env, "based_on": base_name,
            "env_steps_per_s": best_score, "trials": trials, "machine": machine(),
            "created": time.strftime("%Y-%m-%d %H:%M:%S")}
    path = autotuned_path(family)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data)
    data["path"] = str(path)
    return data


# ----------------------------------------------------------------------------- time to score
# Milestones are reporting marks, not training settings: the run itself never sees them.
MILESTONES = {"ALE/Pong-v5": (-15, -10, 0, 10, 18), "ALE/Pong-v4": (-15, -10, 0, 10, 18),
              "mario": (1000, 1500, 2000, 2500)}
# The score --time-to-score aims at when --target is not given: Pong's +18, and for Mario a mean
# distance of 3,000 (1-1's flag pole stands at x ~3,160, so most of the last 20 games end there).
TARGETS = {"ALE/Pong-v5": 18.0, "ALE/Pong-v4": 18.0, "mario": 3000.0}


def default_target(env: str) -> float | None:
    from presets import family_of

    return TARGETS.get(env, TARGETS.get(family_of(env)))


def default_milestones(env: str) -> tuple:
    from presets import family_of

    return MILESTONES.get(env, MILESTONES.get(family_of(env), ()))
# --time-to-score --quick: the test suite's catch game, sized to reach its target in a few minutes.
QUICK_SCORE = {"target": 0.5, "minutes": 4.0, "milestones": (-0.5, 0.0, 0.5),
               "train": ["--env", "tests.catch_env:Catch-v0", "--learning-starts", "500", "--buffer-size", "20000",
                         "--envs-per-collector", "4", "--batch-size", "32", "--replay-ratio", "4", "--lr", "1e-3",
                         "--target-update-interval", "100", "--eps-decay-steps", "4000", "--eps-end", "0.02",
                         "--epoch-steps", "1000", "--checkpoint-interval", "1000"]}
# The ladder's row 1 algorithm (CleanRL's dqn_atari): Nature DQN in fp32, batch 32 every 4 agent
# steps, plain (not Double) DQN with 1-step targets, the target synced every 1,000 agent steps
# (250 updates), lr 1e-4, no gradient clipping; one env, acting and training in turn in one process.
BASELINE_RECIPE = dict(model_arch="nature", amp=False, compile=False, channels_last=False, batch_size=32,
                       grad_accum_steps=1, replay_ratio=8.0, target_update_interval=250, lr=1e-4, n_step=1,
                       double_dqn=False, max_grad_norm=0.0, dueling=False, prioritized=False,
                       num_collectors=1, envs_per_collector=1)


def _baseline_entry(cfg_dict: dict, run_dir: str, out_q) -> None:
    """The baseline recipe for cfg.time_limit minutes, writing episodes.jsonl rows the way the
    trainer does, so both runs are scored by the same ScoreTracker."""
    import contextlib

    try:
        from config_optimized import Config
        from pipeline.collector import _epsilon_schedule
        from pipeline.episodes import EPISODES_NAME, ScoreTracker, episode_row, finished_games
        from pipeline.learner import Learner
        from pipeline.replay import Replay
        from pipeline.rollout import Rollout
        from wrappers import BatchedEnv

        cfg = Config(**cfg_dict)
        torch.set_num_threads(os.cpu_count() or 1)  # one process: it may use every core
        torch.manual_seed(cfg.seed)
        env = BatchedEnv(cfg.env, cfg.env_options(), 1, native=False)
        learner = Learner(cfg, cfg.frame_stack, env.n_actions, torch.device("cpu"))
        replay = Replay(cfg.buffer_size, 1, 1, cfg.frame_stack, cfg.n_step, cfg.gamma, seed=cfg.seed)
        rollout = Rollout(env, learner.model, cfg.frame_stack, cfg.clip_rewards, cfg.seed, cfg.reward_scale)
        tracker = ScoreTracker([cfg.target_score] if cfg.target_score is not None else [], metric=cfg.score_metric)
        t0, steps, trained = time.monotonic(), 0, 0
        with open(os.path.join(run_dir, EPISODES_NAME), "w", buffering=1) as f, \
                contextlib.redirect_stdout(open(os.devnull, "w")):
            while time.monotonic() - t0 < cfg.time_limit * 60 and steps < cfg.total_steps and not tracker.reached:
                learner.model.eval()  # act on running statistics, as the collectors do
                frames, fields, live, _ = rollout.step(_epsilon_schedule(cfg_dict, steps))
                replay.writer.write(0, frames, fields)
                steps += live
                while steps >= cfg.learning_starts and (steps - cfg.learning_starts) * cfg.replay_ratio - trained >= cfg.batch_size:
                    learner.update([learner.to_device(replay.sample(cfg.batch_size))])
                    trained += cfg.batch_size
                for ep in finished_games(fields, steps, time.monotonic()):
                    row = episode_row(ep, ep.t - t0, learner.updates, trained)
                    f.write(json.dumps(row) + "\n")
                    tracker.add_row(row)
        env.close()
        out_q.put({"env_steps": steps, "updates": learner.updates, "samples_trained": trained,
                   "wall_s": time.monotonic() - t0})
    except BaseException as e:
        import traceback

        out_q.put({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})


def run_baseline(cfg, run_dir: str) -> dict:
    return run_in_child(_baseline_entry, (dataclasses.asdict(cfg), run_dir), "the baseline's")


def time_to_score(train_args: list[str], target: float, minutes: float, milestones, runs_dir: str,
                  vs_baseline: bool) -> dict:
    """Train through the real pipeline (mario_rl_optimized.py, as a user runs it) until the mean
    score of the last 20 whole games reaches ``target`` or ``minutes`` pass; optionally the
    baseline recipe for the same time. Each run is scored from its episodes.jsonl."""
    import subprocess

    from config_optimized import ConfigError, build_config, validate
    from mario_rl_optimized import parse_args
    from pipeline.episodes import read_episodes, score_run

    runs_dir = os.path.abspath(runs_dir)  # the training run starts in the project folder
    args = parse_args(train_args)
    cfg, hw, profile = build_config(args)
    for w in validate(cfg, hw):
        print(f"[MAIN] Warning: {w}", flush=True)
    if args.run_dir is not None or args.target_score is not None or args.time_limit is not None:
        raise ConfigError("give the run folder, target and time as --runs-dir, --target and --minutes of "
                          "--time-to-score, not as training options")
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
    code = subprocess.call(cmd, cwd=os.path.dirname(os.path.abspath(__file__)))
    if code != 0:
        raise RuntimeError(f"the training run exited with code {code}; its log is {pipeline_dir}/train.log")
    runs.append({"name": "pipeline (defaults" + (": " + " ".join(train_args) if train_args else "") + ")",
                 "run_dir": pipeline_dir, "profile": profile, "settings": dataclasses.asdict(cfg)})
    if vs_baseline:
        base_dir = os.path.join(runs_dir, f"tts-{stamp}-baseline")
        os.makedirs(base_dir, exist_ok=True)
        base_cfg = dataclasses.replace(cfg, **BASELINE_RECIPE, target_score=target, time_limit=minutes,
                                       run_dir=base_dir, buffer_size=min(cfg.buffer_size, 1_000_000))
        print(f"[TTS] baseline recipe for up to {minutes:g} min: {BASELINE_RECIPE}", flush=True)
        res = run_baseline(base_cfg, base_dir)
        if "error" in res:
            raise RuntimeError(f"the baseline failed: {res['error']}\n{res.get('traceback', '')}")
        runs.append({"name": "baseline (row 1's recipe, one process)", "run_dir": base_dir, "profile": None,
                     "settings": dataclasses.asdict(base_cfg)})
    for run in runs:
        rows = read_episodes(run["run_dir"])
        run["score"], run["curve"] = score_run(rows, marks, metric=cfg.score_metric)
        last = rows[-1] if rows else {}
        run["reached"] = run["score"]["milestones"][marks.index(target)].get("minutes") is not None
        run["minutes_to_target"] = run["score"]["milestones"][marks.index(target)].get("minutes")
        run["totals_at_last_game"] = {k: last.get(k) for k in ("wall_s", "env_steps", "updates", "samples_trained")}
    return {"env": cfg.env, "target": target, "minutes_limit": minutes, "metric": cfg.score_metric,
            "window": runs[0]["score"]["window"], "milestones": marks, "runs": runs, "machine": machine()}


def print_time_to_score(res: dict) -> None:
    marks = res["milestones"]
    print(f"\nTime to score: {res['env']}, mean {res['metric']} of the last {res['window']} games, target "
          f"{res['target']:g}, limit {res['minutes_limit']:g} min (minutes / agent steps when first reached)")
    print("| run | " + " | ".join(f"{m:g}" for m in marks) + " | best | agent steps | updates | samples trained |")
    print("|---" * (len(marks) + 5) + "|")
    for run in res["runs"]:
        cells = [f"{m['minutes']:.1f} min / {m['env_steps']:,}" if m.get("minutes") is not None else "-"
                 for m in run["score"]["milestones"]]
        t = run["totals_at_last_game"]
        best = run["score"]["best_mean"]
        print(f"| {run['name']} | " + " | ".join(cells) + f" | {'n/a' if best is None else format(best, '.2f')} "
              f"| {t.get('env_steps') or 0:,} | {t.get('updates') or 0:,} | {t.get('samples_trained') or 0:,} |")


def plot_time_to_score(res: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from pipeline.curves import format_steps

    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for run in res["runs"]:
        if run["curve"]:
            minutes, steps, mean = zip(*run["curve"])
            axes[0].plot(minutes, mean, label=run["name"])
            axes[1].plot(steps, mean, label=run["name"])
    for ax, xl in zip(axes, ("wall clock (minutes)", "agent steps")):
        ax.axhline(res["target"], color="gray", ls="--", lw=1)
        ax.set_xlabel(xl)
        ax.set_ylabel(f"mean {res['metric']}, last {res['window']} games")
        ax.grid(alpha=0.3)
    axes[1].xaxis.set_major_formatter(FuncFormatter(format_steps))
    axes[0].legend(fontsize=8)
    m = res["machine"]
    fig.suptitle(f"Time to score, {res['env']} ({m['cpu']}, {m['cores']} cores, GPU {m['gpu']})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ----------------------------------------------------------------------------- output
def plot_ladder(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["name"] for r in rows]
    vals = [r.get("env_steps_per_s") or 0 for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(rows) + 1.5))
    bars = ax.barh(names[::-1], vals[::-1], color="tab:blue")
    for bar, r in zip(bars, rows[::-1]):
        label = f"{r['speedup_vs_baseline']:.1f}x" if r.get("speedup_vs_baseline") else r.get("skipped", "n/a")[:40]
        ax.text(bar.get_width(), bar.get_y() + bar.get_height() / 2, f" {label}", va="center", fontsize=8)
    ax.set_xlabel("env steps/s after learning starts (replay ratio 8, Pong)")
    ax.set_title("Optimization ladder")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def print_ladder(rows: list[dict]) -> None:
    f = lambda v, spec: "n/a" if v is None else format(v, spec)  # noqa: E731
    print("\n| row | env steps/s | vs baseline | updates/s | samples/s | learner busy | collector wait "
          "| drops | peak RSS MB | B/transition |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "env_steps_per_s" not in r:
            why = r.get("skipped") or r.get("error", "failed")
            print(f"| {r['name']} | {why} | | | | | | | | |")
            continue
        wait = r.get("collector_wait")
        print(f"| {r['name']} | {r['env_steps_per_s']:,.0f} | {f(r.get('speedup_vs_baseline'), '.2f')}x "
              f"| {r['updates_per_s']:,.1f} | {r['samples_per_s']:,.0f} | {100 * r['learner_busy']:.0f}% "
              f"| {'n/a (plays, then trains)' if wait is None else format(100 * wait, '.1f') + '%'} "
              f"| {r['drops']} | {r['peak_rss_mb']:,.0f} | {r['bytes_per_transition']:,.0f} |")


def machine() -> dict:
    from config_optimized import detect_hardware

    hw = detect_hardware()
    return {"cores": hw.cores, "cpu": hw.cpu_model, "ram_gib": round(hw.ram_bytes / 2**30, 1),
            "gpu": hw.gpu_name, "torch": torch.__version__, "python": platform.python_version(),
            "load_avg_at_start": os.getloadavg()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Measure what each optimization buys on this machine: the ladder "
                                             "(each row adds one optimization) plus component benchmarks, in one run.", allow_abbrev=False)
    ap.add_argument("--quick", action="store_true", help="short windows, no torch.compile rows (under 3 minutes)")
    ap.add_argument("--json", metavar="PATH", help="write all figures as JSON")
    ap.add_argument("--plot", metavar="PATH", help="write a PNG bar chart of the ladder")
    ap.add_argument("--seconds", type=float, help="measured seconds per ladder row after learning starts")
    ap.add_argument("--only", choices=["ladder", "components", "learner", "emulator"],
                    help="run one part only (learner: updates/s alone vs in the pipeline at batch 32/64/128, "
                         "1 and 2 threads, and the share of the CPU's peak; emulator: Mario's NES emulator "
                         "frames/s per core against each layer above it, up to a collector's rollout)")
    ap.add_argument("--rows", metavar="N,N", help="ladder rows to run, e.g. 4,8 (row 1, the baseline, always runs)")
    ap.add_argument("--profile", metavar="DIR", nargs="?", const="profiles",
                    help="instead: torch.profiler over learner and collector steps; traces go to DIR")
    ap.add_argument("--autotune", action="store_true",
                    help="instead: search collector/env/thread settings on --env's game and write the autotuned "
                         "profile of its family (atari or mario) into the user's config folder")
    ap.add_argument("--env", help="the game autotune tunes on (default ALE/Pong-v5); with --time-to-score, the game "
                                  "to train")
    tts = ap.add_argument_group("time to score (--time-to-score [options] [training options of mario_rl_optimized.py])")
    tts.add_argument("--time-to-score", action="store_true",
                     help="instead: train with the defaults (plus any training options given) until the mean score of "
                          "the last 20 games reaches --target, and report minutes and agent steps at milestones")
    tts.add_argument("--target", type=float, help="score to reach (default: 18 for Pong, mean distance 3000 for "
                                                  "Mario; 0.5 with --quick)")
    tts.add_argument("--minutes", type=float, help="wall-clock limit per run (default 60; 4 with --quick)")
    tts.add_argument("--milestones", metavar="A,B,...", help="scores to time on the way (Pong: -15,-10,0,10,18; "
                                                              "Mario: 1000,1500,2000,2500)")
    tts.add_argument("--vs-baseline", action="store_true",
                     help="also run the ladder's baseline recipe (row 1) for the same time; both curves on one plot")
    tts.add_argument("--runs-dir", default="runs", help="where the time-to-score runs' folders go")
    args, train_args = ap.parse_known_args(argv)
    if args.time_to_score:
        if args.profile:  # with --time-to-score, --profile NAME is the training profile
            train_args = ["--profile", args.profile, *train_args]
        if args.env:
            train_args = ["--env", args.env, *train_args]
        return main_time_to_score(args, train_args, ap)
    if train_args:
        ap.error(f"unrecognized arguments: {' '.join(train_args)} (training options go with --time-to-score only)")
    if args.seconds is not None and args.seconds <= 0:
        ap.error(f"--seconds {args.seconds}: must be positive")
    rows = None
    if args.rows:
        try:
            rows = {int(x) for x in args.rows.split(",")}
        except ValueError:
            rows = {0}
        if not rows <= set(range(1, len(LADDER) + 1)):
            ap.error(f"--rows {args.rows}: give ladder row numbers from 1 to {len(LADDER)}, e.g. --rows 4,8")
    if args.profile:
        profile_run(args.profile)
        return 0
    if args.autotune:
        data = autotune(args.seconds or (4 if args.quick else 15), args.quick, args.env or "ALE/Pong-v5")
        print(f"\nBest: {data['overrides']} at {data['env_steps_per_s']:,.0f} env steps/s; written to {data['path']} "
              f"(the auto profile uses it for {data['family']} games; python config_optimized.py --env "
              f"{data['tuned_on']} shows it)")
        return 0
    nw = 3 if args.quick else 5
    seconds = args.seconds or (6 if args.quick else 20)
    result = {"machine": machine(), "rows": [], "components": {}, "settings": {
        "game": "ALE/Pong-v5", "replay_ratio": LADDER_BASE["replay_ratio"], "seconds_per_row": seconds,
        "quick": args.quick, "ladder_base": LADDER_BASE, "bench_run": {k: v for k, v in BENCH_RUN.items()}}}
    m = result["machine"]
    print(f"Machine: {m['cpu']}, {m['cores']} cores, {m['ram_gib']} GiB, GPU {m['gpu']}; "
          f"load average at start {m['load_avg_at_start']}", flush=True)
    if args.only == "learner":
        result["learner_grid"] = bench_learner_grid(seconds, nw)
        print_learner_grid(result["learner_grid"])
    if args.only == "emulator":
        from bench.emulator import bench_emulator, print_emulator

        from wrappers.registry import is_mario

        env = args.env or "SuperMarioBros-1-1-v0"
        if not is_mario(env):
            ap.error(f"--only emulator --env {env}: the emulator benchmark measures nes-py, give a "
                     "SuperMarioBros-W-S-v0 id")
        result["emulator"] = bench_emulator(env, nw, 1.0 if args.quick else 3.0)
        print_emulator(result["emulator"])
    if args.only not in ("components", "learner", "emulator"):
        result["rows"] = bench_ladder(seconds, args.quick, rows)
        print_ladder(result["rows"])
        if args.plot:
            plot_ladder(result["rows"], args.plot)
            print(f"\nLadder chart: {args.plot}")
    if args.only not in ("ladder", "learner", "emulator"):
        print("\nComponents ...", flush=True)
        torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))
        c = result["components"]
        c["queue"] = bench_queue(20_000 if args.quick else 100_000)
        c["queue_per_transition"] = bench_queue(5_000 if args.quick else 20_000, batch=1)
        c["collector_overhead"] = bench_collector_overhead(4 if args.quick else 10)
        c["envs"] = bench_vector_envs(nw)
        c["replay"] = bench_replay(nw)
        c["learner"] = bench_learner(nw, compile_rows=not args.quick)
        c["acting"] = bench_acting(nw)
        prof_row = next((r for r in result["rows"] if r["name"].startswith("8.") and "settings" in r), None)
        if prof_row:
            c["learner_in_pipeline"] = bench_learner_in_pipeline(prof_row, nw)
        print_components(c)
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    print(f"\nLoad average at end: {result['machine']['load_avg_at_end']} (other load on the machine skews every figure)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2, default=str)
        print(f"JSON: {args.json}")
    return 0


def main_time_to_score(args, train_args: list[str], ap) -> int:
    from config_optimized import ConfigError

    if args.quick:
        train_args = [*QUICK_SCORE["train"], *train_args]
    target = args.target if args.target is not None else (QUICK_SCORE["target"] if args.quick else None)
    minutes = args.minutes if args.minutes is not None else (QUICK_SCORE["minutes"] if args.quick else 60.0)
    if minutes <= 0:
        ap.error(f"--minutes {minutes}: must be positive")
    marks = QUICK_SCORE["milestones"] if args.quick else None
    if args.milestones:
        try:
            marks = [float(x) for x in args.milestones.split(",")]
        except ValueError:
            ap.error(f"--milestones {args.milestones!r}: give scores separated by commas, e.g. -15,-10,0,10,18")
    try:
        res = time_to_score(train_args, target, minutes, marks, args.runs_dir, args.vs_baseline)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print_time_to_score(res)
    if args.plot:
        plot_time_to_score(res, args.plot)
        print(f"\nCurves: {args.plot}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2, default=str)
        print(f"JSON: {args.json}")
    return 0


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
        print(f"| {row['batch']} | {row['precision']} | {row['compile']} | {row['updates_per_s']:,.1f} "
              f"| {row['samples_per_s']:,.0f} |")
    print("\n| acting batch | obs/s |\n|---|---|")
    for row in c["acting"]:
        print(f"| {row['batch']} | {row['obs_per_s']:,.0f} |")
    if "learner_in_pipeline" in c:
        lp = c["learner_in_pipeline"]
        print(f"\nLearner in the pipeline (row 8): {lp['updates_per_s_in_pipeline']:,.2f} updates/s vs "
              f"{lp['updates_per_s_alone']:,.2f} alone at the same settings: {100 * lp['ratio']:.0f}%")


if __name__ == "__main__":
    raise SystemExit(main())
