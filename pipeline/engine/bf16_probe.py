"""The learner's bf16 probe: how much faster a training step of the default network runs under
bf16 autocast than in fp32 on this CPU. Measured once per CPU model (``settings.hardware.cpu_name``)
and torch version, at the start of the first training run on it (``run.prepare_run``, before the
profile picks the learner's precision), and kept for every later run and ``python
config_optimized.py`` (``settings/hardware.py`` reads it back)."""
from __future__ import annotations

import contextlib
import fcntl
import os
import statistics
import time
from pathlib import Path

import torch

from models import NetworkSpec, build_model

from ..records.record import write_json
from ..settings.hardware import (BF16_MIN_SPEEDUP, cached_bf16_speedup, cpu_info, cpu_name, known_bf16_speedups,
                                 speedup_key)
from ..transport.shm import live_runs


def measure_bf16_speedup(steps: int = 6) -> float:
    """The speed of a training step of the default network (BatchNorm DQN, batch 32,
    channels_last, forward and backward) under bf16 autocast over the same step in fp32, on this
    process's torch threads: medians of interleaved steps, so a busy machine slows both alike.
    About one to three seconds."""
    torch.manual_seed(0)
    model = build_model(NetworkSpec("batchnorm", 4, 6)).to(memory_format=torch.channels_last)
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


OTHERS_BUSY_LIMIT = 0.25  # cores other processes may use while the probe measures and its figure is kept


def _busy_seconds() -> tuple[float, float]:
    """(CPU seconds all cores have been busy since boot, CPU seconds this process has run), or
    (0.0, 0.0) where /proc/stat is missing (not Linux): the probe then cannot see other work."""
    try:
        ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return 0.0, 0.0
    own = os.times()
    # user nice system idle iowait irq softirq steal: steal is time the hypervisor gave away
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK"), own.user + own.system


def measured_alone(measure) -> tuple[float, float]:
    """``measure()`` and the cores other processes kept busy while it ran (0.0 where that cannot be
    seen, or over less than half a second, too short for the kernel's 10 ms ticks). The live-run
    check before it misses a run that is starting beside this one (its collectors not yet
    spawned, its imports running): one such start read 0.91x on a Zen 5 where a quiet probe reads
    1.25-1.58x, and fp32 was kept for every later run."""
    busy0, own0 = _busy_seconds()
    t0 = time.perf_counter()
    value = measure()
    wall = time.perf_counter() - t0
    busy1, own1 = _busy_seconds()
    if wall < 0.5 or busy1 == 0.0:
        return value, 0.0
    return value, max(0.0, (busy1 - busy0) - (own1 - own0)) / wall


def bf16_speedup(cpu: str) -> tuple[float, str]:
    """The kept speedup of ``cpu`` (``settings.hardware.cpu_name``), or else one measured now and
    kept, with a line for the run log saying which (empty when it was kept before). Measured
    under a lock beside the file: two runs started together measured against each other (one
    read 1.56x, the other chose fp32), so the second waits for the first's figure. Not measured
    while other training runs hold the cores: 0.0 (bf16 then follows the CPU's instructions) and
    measured at the next start on a quiet machine, nor kept where other processes kept the cores
    busy while it measured. A read-only config folder: measured each time."""
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
        speedup, others = measured_alone(measure_bf16_speedup)
        if others > OTHERS_BUSY_LIMIT:
            return 0.0, (f"bf16 probe not kept: other processes kept {others:.1f} cores busy while it measured "
                         f"({speedup:.2f}x), so a step's speed said little; bf16 follows the CPU's instructions "
                         "this time and is measured at the next start on a quiet machine")
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
