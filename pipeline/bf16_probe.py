"""The learner's bf16 probe: how much faster a training step of the default network runs under
bf16 autocast than in fp32 on this CPU. Measured once per CPU model (``settings.hardware.cpu_name``)
and torch version, at the start of the first training run on it (``run.prepare_run``, before the
profile picks the learner's precision), and kept for every later run and ``python
config_optimized.py`` (``settings/hardware.py`` reads it back)."""
from __future__ import annotations

import contextlib
import fcntl
import statistics
import time

import torch

from models import build_model

from .records.record import write_json
from .settings.hardware import (BF16_MIN_SPEEDUP, cached_bf16_speedup, cpu_info, cpu_name, known_bf16_speedups,
                                speedup_key)
from .shm import live_runs


def measure_bf16_speedup(steps: int = 6) -> float:
    """The speed of a training step of the default network (BatchNorm DQN, batch 32,
    channels_last, forward and backward) under bf16 autocast over the same step in fp32, on this
    process's torch threads: medians of interleaved steps, so a busy machine slows both alike.
    About one to three seconds."""
    torch.manual_seed(0)
    model = build_model("batchnorm", 4, 6).to(memory_format=torch.channels_last)
    x = torch.randint(0, 256, (32, 4, 84, 84), dtype=torch.uint8).contiguous(memory_format=torch.channels_last)

    def step(bf16: bool) -> float:
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = model(x).float().square().mean()
        loss.backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - t0

    for bf16 in (False, True, False, True):  # oneDNN builds its kernels on first use
        step(bf16)
    times = {False: [], True: []}
    for _ in range(steps):
        for bf16 in (False, True):
            times[bf16].append(step(bf16))
    return statistics.median(times[False]) / statistics.median(times[True])


def bf16_speedup(cpu: str) -> tuple[float, str]:
    """The kept speedup of ``cpu`` (``settings.hardware.cpu_name``), or else one measured now and
    kept, with a line for the run log saying which (empty when it was kept before). Measured
    under a lock beside the file: two runs started together measured against each other (one
    read 1.56x, the other chose fp32), so the second waits for the first's figure. Not measured
    while other training runs hold the cores: 0.0 (bf16 then follows the CPU's instructions) and
    measured at the next start on a quiet machine. A read-only config folder: measured each time."""
    known = cached_bf16_speedup(cpu)
    if known:
        return known, ""
    path, _ = known_bf16_speedups()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_name(path.name + ".lock"), "a")
    except OSError:
        lock = None
    with lock or contextlib.nullcontext():
        if lock is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)  # dropped when the file closes
        known = cached_bf16_speedup(cpu)  # a run started beside this one measured it meanwhile
        if known:
            return known, ""
        if live_runs():
            return 0.0, ("bf16 probe not run: other training runs hold this machine's cores, so a step's speed "
                         "now says little; bf16 follows the CPU's instructions this time and is measured at the "
                         "next start on a quiet machine")
        speedup = measure_bf16_speedup()
        kept = f"kept in {path}"
        try:
            write_json(path, {**known_bf16_speedups()[1], speedup_key(cpu): round(speedup, 3)})  # whole or not at all
        except OSError as e:
            kept = f"not kept ({e.strerror}: {path})"
    verdict = "bf16 chosen" if speedup >= BF16_MIN_SPEEDUP else f"fp32 chosen (bf16 needs {BF16_MIN_SPEEDUP}x)"
    return speedup, f"bf16 probe: a learner step ran {speedup:.2f}x fp32's speed on {cpu}: {verdict}; {kept}"


def probe_this_cpu() -> str:
    """Measure this CPU's bf16 speedup if it has bf16 instructions and nobody measured it yet;
    quick (a file read) once it has been. A CPU learner's precision follows it, and on a GPU host
    the collectors' acting precision (their forward pass runs on the host). Returns the run log's
    line about it, or "" when nothing was measured now."""
    model, bf16, cpu_id = cpu_info()
    if bf16:
        return bf16_speedup(cpu_name(model, cpu_id))[1]
    return ""
