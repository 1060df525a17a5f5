"""The learner's bf16 probe: how much faster a training step of the default network runs under
bf16 autocast than in fp32 on this CPU. Measured once per CPU model and torch version, at the
start of the first training run on it (``run.prepare_run``, before the profile picks the
learner's precision), and kept for every later run and ``python config_optimized.py``
(``settings/hardware.py`` reads it back)."""
from __future__ import annotations

import statistics
import time

import torch

from models import build_model

from .records.record import write_json
from .settings.hardware import cached_bf16_speedup, cpu_info, known_bf16_speedups, speedup_key


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


def bf16_speedup(cpu_model: str) -> float:
    """The kept speedup of ``cpu_model``, or else one measured now and kept (a read-only config
    folder: measured again next time)."""
    known = cached_bf16_speedup(cpu_model)
    if known:
        return known
    speedup = measure_bf16_speedup()
    path, kept = known_bf16_speedups()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, {**kept, speedup_key(cpu_model): round(speedup, 3)})  # whole or not at all
    except OSError:
        pass
    return speedup


def probe_this_cpu() -> None:
    """Measure this CPU's bf16 speedup if it has bf16 instructions, no CUDA learner will train,
    and nobody measured it yet; quick (a file read) once it has been."""
    model, bf16, _ = cpu_info()
    if bf16 and not torch.cuda.is_available():
        bf16_speedup(model)
