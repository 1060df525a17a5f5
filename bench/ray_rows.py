"""``--only ray``: collectors as Ray actors against collector processes, the same count, the same
game, in one run: env steps/s, bytes per transition on the wire (raw and zlib), and the learner
process's CPU per 1,000 transitions (the Ray intake's cost is the difference).

Collection only: learning never starts, so the rows measure collectors, transport and
consolidation, not the learner (at the replay ratio both would run at the learner's pace).
Without ``--ray-address`` it starts a one-node cluster on this machine (``ray start --head``)
and stops it afterwards (``ray stop``, which stops every Ray process of this user here).
"""
from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from .common import measured_run, run_in_child

ROOT = Path(__file__).resolve().parent.parent
RAY = str(Path(sys.executable).parent / "ray")
COLLECT_ONLY = dict(learning_starts=10**12, buffer_size=50_000, total_steps=10**12, checkpoint_interval=10**9,
                    tensorboard=False, processor_log_interval=1e9, epoch_steps=10**9, seed=1, save_replay=False)


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def _row(overrides: dict, seconds: float, window_s: float) -> dict:
    import tempfile

    from config_optimized import Config
    from pipeline.config_check import validate
    from pipeline.hardware import detect_hardware
    from pipeline.run import open_run
    from pipeline.trainer import Trainer

    hw = detect_hardware()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Config.of(**{**COLLECT_ONLY, **overrides, "run_dir": tmp})
        validate(cfg, hw)
        log = open_run(cfg)
        trainer = Trainer(cfg, hw, log)
        samples = []

        def measure():
            while trainer.stop_reason is None and trainer.env_steps() < 500:  # envs built, first batches in
                time.sleep(0.05)
            time.sleep(window_s)
            t_end = time.perf_counter() + seconds
            while trainer.stop_reason is None:
                samples.append((time.perf_counter(), trainer.consolidator.processed, _cpu_s(),
                                trainer.remote.thread_cpu_s if trainer.remote else 0.0))
                if time.perf_counter() >= t_end:
                    break
                time.sleep(window_s)
        wire = measured_run(trainer, log, measure, lambda t: [(s.block.bytes, s.block.records)
                                                               for s in (t.remote.sources if t.remote else [])])
    if len(samples) < 3:
        raise RuntimeError("the run ended before two measuring windows")
    win = [((b[1] - a[1]) / (b[0] - a[0]), (b[2] - a[2]) / max(1, b[1] - a[1]) * 1000,
            (b[3] - a[3]) / max(1, b[1] - a[1]) * 1000) for a, b in zip(samples, samples[1:])]
    records = sum(r for _, r in wire)
    return {"records_per_s": statistics.median(w[0] for w in win),
            "learner_cpu_s_per_1000": statistics.median(w[1] for w in win),
            "intake_thread_cpu_s_per_1000": statistics.median(w[2] for w in win),
            "bytes_per_transition": sum(b for b, _ in wire) / records if records else None,
            "windows": len(win)}


def _entry(overrides, seconds, window_s, out_q):
    import contextlib

    try:
        with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
            out_q.put(_row(overrides, seconds, window_s))
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
              envs_per_collector: int = 8) -> dict:
    """Rows: ``collectors`` process collectors; as many Ray collectors; Ray with zlib frames."""
    own = address is None
    address = _start_local_cluster(collectors) if own else address
    base = dict(env=env, envs_per_collector=envs_per_collector)
    rows = [("process collectors", dict(num_collectors=collectors)),
            ("Ray collectors", dict(num_collectors=0, ray_collectors=collectors, ray_address=address)),
            ("Ray collectors, zlib frames", dict(num_collectors=0, ray_collectors=collectors, ray_address=address,
                                                 ray_compress=True))]
    out = []
    try:
        for name, over in rows:
            res = run_in_child(_entry, ({**base, **over}, seconds, 2.0), "the row's")
            out.append({"name": name, **res})
            print(f"  {name}: " + (res["error"] if "error" in res else
                  f"{res['records_per_s']:,.0f} transitions/s, learner CPU {res['learner_cpu_s_per_1000'] * 1000:.1f} ms "
                  f"per 1,000 (intake thread {res['intake_thread_cpu_s_per_1000'] * 1000:.1f} ms)" + (f", {res['bytes_per_transition']:,.0f} B/transition"
                                  if res.get("bytes_per_transition") else "")), flush=True)
    finally:
        if own:
            subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=120)
    proc = out[0]
    for row in out[1:]:
        if "error" not in row and "error" not in proc:
            row["vs_process"] = row["records_per_s"] / proc["records_per_s"]
            # the learner process's extra CPU with Ray (our intake thread and Ray's own threads),
            # and the intake thread's alone
            extra = row["learner_cpu_s_per_1000"] - proc["learner_cpu_s_per_1000"]
            row["learner_extra_cpu_s_per_1000"] = extra
            row["intake_core_share_at_5000_per_s"] = max(extra, row["intake_thread_cpu_s_per_1000"]) * 5
    return {"env": env, "collectors": collectors, "envs_per_collector": envs_per_collector, "seconds": seconds,
            "address": address if not own else "local one-node cluster", "rows": out}
