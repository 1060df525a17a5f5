"""What the machine has (cores, memory, CPU model and bf16 support, GPU) and which device the
learner runs on; the hardware profiles (``profiles.py``) are picked from it."""
from __future__ import annotations

import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from .profiles import profile_dir


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
    # version at the first training run's start-up (pipeline/engine/bf16_probe.py); 0.0 where not yet
    # measured (bf16_pays then trusts the instructions), or not wanted (no bf16 instructions); on a GPU host it
    # decides the collectors' acting precision.
    cpu_bf16_speedup: float = 0.0
    # A C++ compiler on PATH ($CXX, else g++, as inductor looks), which torch.compile's CPU code generation needs.
    cpp_compiler: bool = False
    # The CPU's family and model numbers ("family 6 model 167"): vendors' model names do not tell
    # CPU generations apart (a VM's "Intel(R) Xeon(R) Processor"), and figures compare only within one.
    cpu_id: str = ""

    @property
    def has_mixed_precision(self) -> bool:
        """Whether the hardware computes in 16 bits natively (fp16 on a CUDA GPU, bf16
        instructions on the CPU); elsewhere a mixed-precision row is fp32 code emulating it."""
        return self.cuda or self.cpu_bf16

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


def speedup_key(cpu_model: str) -> str:
    """Where a bf16 speedup is kept in SPEEDUP_FILE: it holds for one CPU model and torch version."""
    import torch

    return f"{cpu_model} | torch {torch.__version__}"


def cpu_name(model: str, cpu_id: str) -> str:
    """The name a bf16 speedup is kept under: the model name and, where /proc/cpuinfo gives them,
    the family and model numbers. A VM's model name alone does not tell generations apart: Zen 3,
    4 and 5 all read "AMD EPYC", and a bf16 step ran 2.5x fp32 on the Zen 5 but 1.56x on the Zen 4."""
    return f"{model} ({cpu_id})" if cpu_id else model


def known_bf16_speedups() -> tuple[Path, dict]:
    """SPEEDUP_FILE, in the user's config folder (``profiles.profile_dir``, beside the
    autotuned profiles), and the speedups it holds ({} where it is missing or unreadable)."""
    import json

    path = profile_dir() / SPEEDUP_FILE
    try:
        known = json.loads(path.read_text())
        return path, known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        return path, {}


def cached_bf16_speedup(cpu_model: str) -> float:
    """The bf16 speedup measured for this CPU model (``pipeline/engine/bf16_probe.py``, at the first
    training run's start-up), or 0.0 where it was never measured."""
    value = known_bf16_speedups()[1].get(speedup_key(cpu_model))
    return float(value) if isinstance(value, (int, float)) and value > 0 else 0.0


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


def cpu_info() -> tuple[str, bool, str]:
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


# A core count to detect instead of the CPUs this process may run on: the profile, collectors and
# learner threads a machine of that many cores gets, seen (python config_optimized.py) or tested on
# a smaller one, e.g. DQN_CORES=16 for a 16-core GPU host's CPU side. Read here only.
CORES_ENV = "DQN_CORES"


def detect_cores() -> int:
    """The CPUs this process may run on (its affinity, as taskset or a container's cpuset sets it),
    or the count $DQN_CORES tells."""
    told = os.environ.get(CORES_ENV, "").strip()
    if told:
        if not told.isdigit() or int(told) < 1:
            raise ConfigError(f"{CORES_ENV}={told!r}: give a core count (a positive integer), or unset it to "
                              "detect this machine's cores")
        return int(told)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def detect_hardware() -> Hardware:
    import torch

    cores = detect_cores()
    total, avail = _meminfo()
    model, bf16, cpu_id = cpu_info()
    cuda = torch.cuda.is_available()
    name, mem = None, 0
    if cuda:
        props = torch.cuda.get_device_properties(0)
        name, mem = props.name, props.total_memory
    mps = bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())
    speedup = cached_bf16_speedup(cpu_name(model, cpu_id)) if bf16 else 0.0  # on a GPU host: the collectors' acting
    cxx = shutil.which(os.environ.get("CXX") or "g++") is not None  # what inductor runs: $CXX, else g++
    return Hardware(cores, total, avail, model, bf16, cuda, name, mem, mps, speedup, cxx, cpu_id)


def resolve_device(requested: str, hw: Hardware) -> str:
    """The learner's device for --device: auto takes CUDA, then Apple MPS, then the CPU."""
    if requested == "auto":
        return "cuda" if hw.cuda else ("mps" if hw.mps else "cpu")
    return requested


def shared_cores_warning(other_runs: int, threads: int, collectors: int, cores: int) -> str | None:
    """The warning for a CPU run started while ``other_runs`` training runs use this machine, when
    they cannot all have their cores: a learner's OpenMP team of ``threads`` stalls at every
    barrier while another process holds one of its cores, so two 2-thread learners on 2 cores
    each fall to a fraction of their speed (8-9x slower measured), where 1-thread learners side by
    side lose little. None when they fit (each run counted as this one: learner plus collectors)."""
    if not other_runs or threads <= 1 or (threads + collectors) * (1 + other_runs) <= cores:
        return None
    return (f"[MAIN] Warning: {other_runs} other training run(s) use this machine's {cores} cores now; a "
            f"{threads}-thread learner beside them stalls at every parallel step whenever another run holds one "
            "of its cores, and so does theirs beside this one. Side by side, give each run --learner-threads 1 "
            "(docs/usage.md#run-length); alone, a run keeps the profile's threads")


def learner_threads(requested: int, collectors: int, hw: Hardware) -> int:
    """Torch threads of the learner process: ``requested`` (--learner-threads), or else the cores
    the collector processes leave."""
    return requested or max(1, hw.cores - collectors)
