"""What the machine has (cores, memory, CPU model and bf16 support, GPU) and which device the
learner runs on; the hardware profiles in ``config_optimized`` are picked from it."""
from __future__ import annotations

import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Hardware:
    cores: int
    ram_bytes: int
    ram_available_bytes: int
    cpu_model: str
    cpu_bf16: bool
    cuda: bool
    gpu_name: str | None
    gpu_mem_bytes: int
    mps: bool
    # A learner step's speed in bf16 over fp32 on this CPU, measured once per CPU model and torch
    # version (bf16_speedup); 0.0 where nobody measured it (no bf16 instructions, a CUDA machine).
    cpu_bf16_speedup: float = 0.0
    # A C++ compiler on PATH ($CXX, else g++, as inductor looks), which torch.compile's CPU code generation needs.
    cpp_compiler: bool = False
    # The CPU's family and model numbers ("family 6 model 167"): vendors' model names do not tell
    # CPU generations apart (a VM's "Intel(R) Xeon(R) Processor"), and figures compare only within one.
    cpu_id: str = ""

    @property
    def bf16_pays(self) -> bool:
        """Whether the CPU learner should train in bf16: the CPU has bf16 instructions and, where
        measured, they make the step clearly faster. AVX-512 BF16 alone does not promise that:
        on an AMD EPYC Zen 5 a bf16 step ran 2.5x fp32, on an Intel Xeon (family 6 model 207,
        AMX not exposed) 0.7x."""
        return self.cpu_bf16 and (self.cpu_bf16_speedup == 0.0 or self.cpu_bf16_speedup >= BF16_MIN_SPEEDUP)

    def describe(self) -> str:
        gpu = f"{self.gpu_name} ({self.gpu_mem_bytes / 2**30:.1f} GiB)" if self.cuda else ("Apple MPS" if self.mps else "none")
        bf16 = ""
        if self.cpu_bf16:
            bf16 = (f" (bf16: a learner step {self.cpu_bf16_speedup:.2f}x fp32's speed)" if self.cpu_bf16_speedup
                    else " (bf16)")
        cpu_id = f" ({self.cpu_id})" if self.cpu_id else ""
        return (f"CPU: {self.cpu_model}{cpu_id}, {self.cores} cores{bf16}; "
                f"RAM: {self.ram_bytes / 2**30:.1f} GiB ({self.ram_available_bytes / 2**30:.1f} GiB available); GPU: {gpu}")


# bf16 must beat fp32 by this much to be chosen: the probe's noise on a busy machine is ~5%.
BF16_MIN_SPEEDUP = 1.1
SPEEDUP_FILE = "cpu-bf16-speedup.json"


def measure_bf16_speedup(steps: int = 6) -> float:
    """The speed of a training step of the default network (BatchNorm DQN, batch 32,
    channels_last, forward and backward) under bf16 autocast over the same step in fp32, on this
    process's torch threads: medians of interleaved steps, so a busy machine slows both alike.
    About one to three seconds."""
    import statistics
    import time

    import torch

    from models import build_model

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
    """``measure_bf16_speedup`` for this CPU model, measured on the first call and kept in the
    user's config folder (``config_optimized.profile_dir``) beside the autotuned profiles."""
    import json

    import torch

    from config_optimized import profile_dir

    key = f"{cpu_model} | torch {torch.__version__}"
    path = profile_dir() / SPEEDUP_FILE
    try:
        known = json.loads(path.read_text())
        if isinstance(known.get(key), (int, float)) and known[key] > 0:
            return float(known[key])
    except (OSError, ValueError, AttributeError):
        known = {}
    speedup = measure_bf16_speedup()
    from pipeline.records.record import write_json

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, {**known, key: round(speedup, 3)})
    except OSError:
        pass  # a read-only home: measured again next time
    return speedup


def _meminfo() -> tuple[int, int]:
    try:
        vals = {}
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, rest = line.split(":", 1)
            vals[key] = int(rest.split()[0]) * 1024
        return vals["MemTotal"], vals.get("MemAvailable", vals["MemFree"])
    except (OSError, KeyError, ValueError):
        page = os.sysconf("SC_PAGE_SIZE")
        total = os.sysconf("SC_PHYS_PAGES") * page
        try:
            return total, os.sysconf("SC_AVPHYS_PAGES") * page
        except (ValueError, OSError):
            return total, total // 2


def _cpu_info() -> tuple[str, bool, str]:
    """(model name, bf16 instructions, "family F model M" or ""), from the first CPU's entry."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), platform.machine() == "arm64", ""
    first = {}
    for line in text.splitlines():
        if not line.strip():
            break  # the first processor's entry ends here
        if ":" in line:
            key, value = line.split(":", 1)
            first[key.strip()] = value.strip()
    flags = set(first.get("flags", "").split())
    cpu_id = f"family {first['cpu family']} model {first['model']}" if {"cpu family", "model"} <= set(first) else ""
    return first.get("model name", platform.machine()), bool(flags & {"avx512_bf16", "amx_bf16"}), cpu_id


def detect_hardware() -> Hardware:
    import torch

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    total, avail = _meminfo()
    model, bf16, cpu_id = _cpu_info()
    cuda = torch.cuda.is_available()
    name, mem = None, 0
    if cuda:
        props = torch.cuda.get_device_properties(0)
        name, mem = props.name, props.total_memory
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    speedup = bf16_speedup(model) if bf16 and not cuda else 0.0
    cxx = shutil.which(os.environ.get("CXX") or "g++") is not None  # what inductor runs: $CXX, else g++
    return Hardware(cores, total, avail, model, bf16, cuda, name, mem, mps, speedup, cxx, cpu_id)


def resolve_device(requested: str, hw: Hardware) -> str:
    """The learner's device for --device: auto takes CUDA, then Apple MPS, then the CPU."""
    if requested == "auto":
        return "cuda" if hw.cuda else ("mps" if hw.mps else "cpu")
    return requested


def learner_threads(requested: int, collectors: int, hw: Hardware) -> int:
    """Torch threads of the learner process: ``requested`` (--learner-threads), or else the cores
    the collector processes leave."""
    return requested or max(1, hw.cores - collectors)
