"""What the machine has (cores, memory, CPU model and bf16 support, GPU) and which device the
learner runs on; the hardware profiles in ``config_optimized`` are picked from it."""
from __future__ import annotations

import os
import platform
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

    def describe(self) -> str:
        gpu = f"{self.gpu_name} ({self.gpu_mem_bytes / 2**30:.1f} GiB)" if self.cuda else ("Apple MPS" if self.mps else "none")
        return (f"CPU: {self.cpu_model}, {self.cores} cores{' (bf16)' if self.cpu_bf16 else ''}; "
                f"RAM: {self.ram_bytes / 2**30:.1f} GiB ({self.ram_available_bytes / 2**30:.1f} GiB available); GPU: {gpu}")


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


def _cpu_info() -> tuple[str, bool]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine(), platform.machine() == "arm64"
    model = next((l.split(":", 1)[1].strip() for l in text.splitlines() if l.startswith("model name")), platform.machine())
    flags = set(next((l.split(":", 1)[1].split() for l in text.splitlines() if l.startswith("flags")), []))
    return model, bool(flags & {"avx512_bf16", "amx_bf16"})


def detect_hardware() -> Hardware:
    import torch

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    total, avail = _meminfo()
    model, bf16 = _cpu_info()
    cuda = torch.cuda.is_available()
    name, mem = None, 0
    if cuda:
        props = torch.cuda.get_device_properties(0)
        name, mem = props.name, props.total_memory
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    return Hardware(cores, total, avail, model, bf16, cuda, name, mem, mps)


def resolve_device(requested: str, hw: Hardware) -> str:
    """The learner's device for --device: auto takes CUDA, then Apple MPS, then the CPU."""
    if requested == "auto":
        return "cuda" if hw.cuda else ("mps" if hw.mps else "cpu")
    return requested


def learner_threads(requested: int, collectors: int, hw: Hardware) -> int:
    """Torch threads of the learner process: ``requested`` (--learner-threads), or else the cores
    the collector processes leave."""
    return requested or max(1, hw.cores - collectors)
