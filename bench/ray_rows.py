"""``--only ray``: collectors as Ray actors against collector processes, the same count, the same
game, in one run: env steps/s, bytes per transition on the wire (raw and zlib), and the learner
process's CPU, per 1,000 transitions and per thread (read from /proc: the intake thread, Ray's
own threads, the consolidation thread, the main loop).

Collection only: learning never starts, so the rows measure collectors, transport and
consolidation, not the learner (at the replay ratio both would run at the learner's pace).
A last row loads the intake at ``--intake-rate`` transitions/s (default 5,000), more than two
cores can play: its actors play one batch and then send that batch again at a set pace, so
the learner's side (Ray's threads, the intake thread, consolidation into the replay) does its
full work per record while the actors cost almost nothing.
Without ``--ray-address`` it starts a one-node cluster on this machine (``ray start --head``)
and stops it afterwards (``ray stop``, which stops every Ray process of this user here).
"""
from __future__ import annotations

import collections
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from .common import measured_run, run_in_child

ROOT = Path(__file__).resolve().parent.parent
RAY = str(Path(sys.executable).parent / "ray")
COLLECT_ONLY = dict(learning_starts=10**12, buffer_size=50_000, total_steps=10**12, checkpoint_interval=10**9,
                    tensorboard=False, consolidation_log_interval=1e9, epoch_steps=10**9, seed=1, save_replay=False)


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


OTHER_THREADS = "ray and libraries"


def _thread_cpu_s() -> collections.Counter:
    """CPU seconds of this process's threads: the learner's own by their names, the rest (Ray's
    driver threads, C++ and Python, and library pools) together as ``OTHER_THREADS``."""
    own = {"MainThread", "consolidator", "prefetch", "ray-intake", "bench-measure"}
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out = collections.Counter()
    for task in Path("/proc/self/task").iterdir():
        try:
            after_comm = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        name = names.get(int(task.name), "")
        out[name if name in own else OTHER_THREADS] += (int(after_comm[11]) + int(after_comm[12])) / tick  # utime, stime
    return out


def paced_replay_collector(records_per_s: float):
    """A Ray collector class that plays its first batch of each start, then returns that batch
    again for every request, ``records_per_s`` records a second. Defined in a function so that
    Ray ships it to the workers by value, the rate inside."""
    from dataclasses import replace

    from pipeline.distributed.remote_collector import RemoteCollector

    class PacedReplayCollector(RemoteCollector):
        batch = None
        due = 0.0

        def collect(self, req):
            if self.batch is None or req.launch != self.launch:
                self.batch = super().collect(req)
                self.due = time.perf_counter()
            self.due += len(self.batch.fields["action"]) / records_per_s
            time.sleep(max(0.0, self.due - time.perf_counter()))
            return replace(self.batch, launch=req.launch)

    return PacedReplayCollector


def _row(overrides: dict, seconds: float, window_s: float, actor_rate: float | None = None) -> dict:
    import tempfile

    from config_optimized import Config
    from pipeline.settings.check import validate
    from pipeline.settings.hardware import detect_hardware
    from pipeline.runtime.run import open_run
    from pipeline.runtime.trainer import Trainer

    if actor_rate is not None:
        from pipeline.distributed.intake import RayCollectors

        RayCollectors.actor_class = paced_replay_collector(actor_rate)  # this row's child process only
    hw = detect_hardware()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config.of(**{**COLLECT_ONLY, **overrides, "run_dir": tmp})
        validate(cfg, hw)
        log = open_run(cfg)
        trainer = Trainer(cfg, hw, log)
        samples, threads = [], []

        def measure():
            while trainer.stop_reason is None and trainer.agent_steps() < 500:  # envs built, first batches in
                time.sleep(0.05)
            time.sleep(window_s)
            t_end = time.perf_counter() + seconds
            while trainer.stop_reason is None:
                samples.append((time.perf_counter(), trainer.parts.consolidator.processed, _cpu_s()))
                threads.append(_thread_cpu_s())
                if time.perf_counter() >= t_end:
                    break
                time.sleep(window_s)
        wire = measured_run(trainer, log, measure, lambda t: [(s.block.bytes, s.block.records)
                                                               for s in t.parts.remote.sources])
    if len(samples) < 3:
        raise RuntimeError("the run ended before two measuring windows")
    # Rates over the whole measurement, not medians of windows: Ray batches land 256 records at
    # a time, which would quantize a 2-s window's rate to steps of 128/s.
    (t0, n0, c0), (t1, n1, c1) = samples[0], samples[-1]
    wall, records_in = t1 - t0, max(1, n1 - n0)
    records = sum(r for _, r in wire)
    return {"records_per_s": records_in / wall,
            "learner_cpu_s_per_1000": (c1 - c0) / records_in * 1000,
            # each thread's share of one core over the whole measurement
            "thread_core_share": {k: (threads[-1][k] - threads[0][k]) / wall for k in sorted(threads[-1])},
            "bytes_per_transition": sum(b for b, _ in wire) / records if records else None,
            "seconds_measured": wall}


def _entry(overrides, seconds, window_s, actor_rate, out_q):
    import contextlib

    try:
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            out_q.put(_row(overrides, seconds, window_s, actor_rate))
    except BaseException as e:
        import traceback

        out_q.put({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})


def _start_local_cluster(cpus: int) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    subprocess.run([RAY, "start", "--head", f"--port={port}", f"--num-cpus={cpus}",
                    "--include-dashboard=false", "--disable-usage-stats"], env=env, check=True, capture_output=True,
                   timeout=180, cwd=ROOT)
    return f"127.0.0.1:{port}"


def bench_ray(seconds: float, env: str, collectors: int = 1, address: str | None = None,
              envs_per_collector: int = 8, intake_rate: float = 5000) -> dict:
    """Rows: ``collectors`` process collectors; as many Ray collectors; Ray with zlib frames; Ray
    actors replaying a played batch at ``intake_rate`` transitions/s in all (the intake's load)."""
    own = address is None
    address = _start_local_cluster(collectors) if own else address
    base = dict(env=env, envs_per_collector=envs_per_collector)
    ray_base = dict(num_collectors=0, ray_collectors=collectors, ray_address=address)
    rows = [("process collectors", dict(num_collectors=collectors), None),
            ("Ray collectors", ray_base, None),
            ("Ray collectors, zlib frames", {**ray_base, "ray_compress": True}, None),
            (f"Ray intake at {intake_rate:,.0f}/s (replayed batches)", ray_base, intake_rate / collectors)]
    out = []
    try:
        for name, over, actor_rate in rows:
            res = run_in_child(_entry, ({**base, **over}, seconds, 2.0, actor_rate), "the row's")
            out.append({"name": name, **res})
            print(f"  {name}: " + (res["error"] if "error" in res else
                  f"{res['records_per_s']:,.0f} transitions/s, learner CPU {res['learner_cpu_s_per_1000'] * 1000:.1f} ms per 1,000"
                  + (f", {res['bytes_per_transition']:,.0f} B/transition" if res.get("bytes_per_transition") else "")
                  + "; share of a core: " + ", ".join(f"{k} {v:.1%}" for k, v in res["thread_core_share"].items())),
                  flush=True)
    finally:
        if own:
            subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)
    proc, played, intake = out[0], out[1:3], out[3]
    ok = "error" not in proc
    for row in played:
        if ok and "error" not in row:
            row["vs_process"] = row["records_per_s"] / proc["records_per_s"]
            # the learner process's extra CPU with Ray (our intake thread and Ray's own threads)
            row["learner_extra_cpu_s_per_1000"] = row["learner_cpu_s_per_1000"] - proc["learner_cpu_s_per_1000"]
    if "error" not in intake:
        # The learner-side cost of Ray intake, measured at the row's rate: the intake thread plus
        # Ray's threads in the learner process, less what those threads cost without Ray (the
        # process row). Consolidation into the replay is not counted: rings pay it too.
        share = intake["thread_core_share"]
        base = proc["thread_core_share"].get(OTHER_THREADS, 0.0) if ok else 0.0
        thread, ray_threads = share.get("ray-intake", 0.0), share.get(OTHER_THREADS, 0.0) - base
        intake["intake_core_share"] = thread + ray_threads
        print(f"  Ray intake at {intake['records_per_s']:,.0f} transitions/s: {intake['intake_core_share']:.1%} of a core "
              f"(intake thread {thread:.1%}, Ray's threads {ray_threads:.1%}"
              f"{'' if ok else ', without the process row to subtract'})", flush=True)
    return {"env": env, "collectors": collectors, "envs_per_collector": envs_per_collector, "seconds": seconds,
            "address": address if not own else "local one-node cluster", "rows": out}
