"""The hardware profiles: what each profile changes in the Config defaults (``PROFILES``; tune
them here), which one a machine gets (``pick_profile``, and why: ``profile_reason``), how a
profile is fitted to this machine's cores and memory (``scale_profile``, ``fitted_layout``), and
the autotuned profile that ``benchmark_performance.py --autotune`` writes per game family into
the user's config folder (``profile_dir``, ``autotuned_path``, ``load_autotuned``). The layers
(``layers.py``) put a profile between the game's preset and a resumed run's record."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from config_optimized import (FIELDS, FRAME_BYTES, PROFILE_NAMES, REPLAY_META_BYTES, CollectorConfig, Config,
                              ConfigError, ReplayConfig)
from presets import family_of

from .migrate import current_names

if TYPE_CHECKING:  # annotations only: hardware.py reads profile_dir here, so this module may not import it back
    from .hardware import Hardware


def profile_dir() -> Path:
    """Where ``benchmark_performance.py --autotune`` writes its profiles: the user's config folder
    (``$XDG_CONFIG_HOME/fast-dqn``, else ``~/.config/fast-dqn``), never the installed package;
    ``DQN_PROFILE_DIR`` points elsewhere (tests, several machines sharing a home)."""
    if os.environ.get("DQN_PROFILE_DIR"):
        return Path(os.environ["DQN_PROFILE_DIR"])
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "fast-dqn"


def autotuned_path(family: str) -> Path:
    """One autotuned profile per game family: a Pong-tuned profile starves Mario's collectors."""
    return profile_dir() / f"autotuned-{family}.json"


# Each profile lists only what it changes in the Config defaults. The replay ratio is never part
# of a profile: a faster machine trains on more samples per second, not fewer per frame.
PROFILES: dict[str, dict] = {
    # 2-4 cores, no GPU: the defaults' one collector, a learner on every core (scale_profile; at
    # Pong's pace the collector sleeps ~90% of the time, and 2 threads gave +10% updates/s on an
    # AMD EPYC); NHWC convs run faster in oneDNN (bf16 ~15% on AVX-512, fp32 ~35% on AVX2).
    "cpu-small": dict(channels_last=True),
    "cpu-large": dict(buffer_size=200_000, channels_last=True),
    # GPU tiers: minimum (GTX 1060, 6 GB), recommended (RTX 3070, 8 GB+), optimal (RTX 4090 / A100).
    # A GPU trains on more samples per second, so more envs feed it and weights go out more often.
    # They keep the preset's batch, so the recipe learns per agent step as it does on a CPU: with
    # batch 1024 at the same replay ratio (32x fewer updates) Pong on an H200 was still at -19.8
    # after 546k agent steps, where batch 32 is at -14..-2. Their collectors and replay are Mario's;
    # an Atari game gets its own (scale_profile).
    "gpu-minimum": dict(num_collectors=2, model_update_frequency=5, ring_capacity=8192, channels_last=True),
    "gpu-recommended": dict(num_collectors=4, envs_per_collector=16, buffer_size=500_000,
                            model_update_frequency=5, ring_capacity=16384, compile=True, channels_last=True),
    "gpu-optimal": dict(num_collectors=8, envs_per_collector=32, buffer_size=1_000_000,
                        model_update_frequency=5, ring_capacity=32768, compile=True, channels_last=True),
}
assert set(PROFILES) == set(PROFILE_NAMES) - {"auto", "autotuned"}


def load_autotuned(family: str) -> dict | None:
    """The autotuned profile of ``family``, or None where autotune never ran for it."""
    path = autotuned_path(family)
    if not path.exists():
        return None
    redo = f"delete it or run benchmark_performance.py --autotune --env <{family} game> again"
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ConfigError(f"profile file {path} does not parse ({e}); {redo}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"profile file {path} holds no profile (a JSON object); {redo}")
    if data.get("family", family) != family:
        raise ConfigError(f"profile file {path} was tuned on the {data['family']} family, not {family}; {redo}")
    overrides = current_names(data.get("overrides", data))  # older names read as today's
    unknown = set(overrides) - set(FIELDS)
    if unknown:
        raise ConfigError(f"profile file {path} sets unknown fields {sorted(unknown)}; {redo}")
    return overrides


def pick_profile(hw: Hardware) -> str:
    if hw.cuda:
        gib = hw.gpu_mem_bytes / 2**30
        if gib >= 20 and hw.cores >= 16 and hw.ram_bytes >= 60 * 2**30:
            return "gpu-optimal"
        if gib >= 7.5 and hw.cores >= 8:
            return "gpu-recommended"
        return "gpu-minimum"
    return "cpu-small" if hw.cores <= 4 else "cpu-large"


def profile_reason(name: str, hw: Hardware, env: str | None = None) -> str:
    """Why the auto profile is ``name`` on this machine (or that it was asked for)."""
    if name == "autotuned":
        return f"{autotuned_path(family_of(env or Config.env))} exists (written by benchmark_performance.py --autotune)"
    if name.startswith("gpu"):
        return f"CUDA GPU with {hw.gpu_mem_bytes / 2**30:.1f} GiB, {hw.cores} cores, {hw.ram_bytes / 2**30:.0f} GiB RAM"
    return f"no CUDA GPU, {hw.cores} cores ({'<=' if hw.cores <= 4 else '>'} 4)"


def scale_profile(name: str, hw: Hardware, env: str | None = None) -> dict:
    """A named profile for ``env`` (default: the Config's game), with the collector count and
    learner threads fitted to this machine's cores and the replay to half of the available RAM."""
    family = family_of(env or Config.env)
    if name == "autotuned":
        over = load_autotuned(family)
        if over is None:
            raise ConfigError(f"--profile autotuned: no {autotuned_path(family)}; run benchmark_performance.py "
                              f"--autotune --env <{family} game> first")
        return dict(over)
    over = dict(PROFILES[name])
    if not name.startswith("gpu"):
        # bf16 autocast pays only where the CPU computes in bf16 (AVX-512 BF16, AMX, Arm BF16)
        # and does it faster than fp32, which the hardware detection measured once for this CPU
        # (Hardware.bf16_pays); without bf16 instructions oneDNN emulates it and an update is
        # ~10x slower than fp32 (measured on an AVX2-only AMD EPYC).
        over["amp"] = hw.bf16_pays
        # torch.compile of the learner's loss (from its 2,000th update on) took a bf16 learner from
        # 48.6 to 55.7 updates/s inside the default Pong run (AMD EPYC Zen 5, 2 cores); in fp32 it
        # is not measured yet. Its CPU code generation needs a C++ compiler.
        over["compile"] = hw.bf16_pays and hw.cpp_compiler
        # A collector's forward pass in bf16: on the Xeon (family 6 model 167, AMX), 8 envs, 1.27x
        # faster for the Atari preset's network, 1.46x for Mario's, 2.06x for impala-s; the core
        # time it frees goes to the learner, which shares the cores with the collectors (an
        # impala-s Pong run +11% agent steps/s; the default network's run unchanged).
        over["act_bf16"] = hw.bf16_pays
    if name == "cpu-small":
        # The NES emulator keeps a Mario collector busy on its core (94% of its time), so there the
        # learner takes only the cores left; two threads slowed Mario from ~195 to ~125 agent steps/s.
        mario = family == "mario"
        over["learner_threads"] = max(1, hw.cores - CollectorConfig.num_collectors) if mario else hw.cores
        # ... and steps its envs on two threads (the emulator releases the GIL), taking the core time
        # the learner leaves idle between its paced updates: 213-215 -> 232-235 agent steps/s on the
        # 2-core Xeon (family 6 model 167), alternating 4-minute runs. A learner-bound Atari run
        # gains nothing from a busier collector.
        if mario:
            over["env_threads"] = min(2, hw.cores)
    if name == "cpu-large":
        over["num_collectors"] = max(1, min(8, (hw.cores - 2) // 2))
    elif name.startswith("gpu"):
        if family == "atari":
            # 16 env streams: fewer envs end their first games sooner (on an H100, 16-core Xeon
            # host, Pong's last-20 mean reached 0 at 288k agent steps with 2 x 8 envs, where 8 x 32
            # had ended no game by 140k). The replay stays the preset's, as on a CPU (1M is a
            # recipe change, unmeasured).
            over.update(num_collectors=2, envs_per_collector=8)
            over.pop("buffer_size", None)
        # Those streams spread over as many collectors as the cores the learner process leaves:
        # with 2 x 8 envs the learner was busy 23% of the time while each collector spent ~45% of
        # its core choosing actions (H100, 16 cores: 2 of them played). The same streams, so the
        # replay holds at each agent step what it held before, and the recipe learns per agent
        # step as before; each collector's batch is smaller, and there are more of them.
        over["num_collectors"], over["envs_per_collector"] = fitted_layout(
            over.get("num_collectors", CollectorConfig.num_collectors) *
            over.get("envs_per_collector", CollectorConfig.envs_per_collector), hw.cores)
        # acting in bf16 where this CPU computes it clearly faster, as the bf16 probe measured it
        # (1.27-2.06x for a collector's forward pass on the Xeon family 6 model 167)
        over["act_bf16"] = hw.bf16_pays
    per = FRAME_BYTES + REPLAY_META_BYTES
    fit = int(hw.ram_available_bytes * 0.5 // per)
    over["buffer_size"] = max(10_000, min(over.get("buffer_size", ReplayConfig.buffer_size), fit))
    return over


# Cores the learner process keeps on a GPU host: its main thread (the update loop and CUDA
# launches), the consolidation thread and the prefetch thread.
LEARNER_PROCESS_CORES = 3


def fitted_layout(streams: int, cores: int) -> tuple[int, int]:
    """(collectors, envs each) for ``streams`` envs on a host of ``cores``: as many collectors as
    the cores the learner process leaves, each with an equal share of the streams (the most
    collectors that divide them evenly, so every collector steps as many envs)."""
    free = max(1, cores - LEARNER_PROCESS_CORES)
    n = max(d for d in range(1, min(free, streams) + 1) if streams % d == 0)
    return n, streams // n


def layout_reason(cfg_collectors: int, envs: int, hw: Hardware, name: str) -> str:
    """Why a GPU profile's collectors are what they are on this host (``python config_optimized.py``)."""
    if not name.startswith("gpu"):
        return ""
    free = max(1, hw.cores - LEARNER_PROCESS_CORES)
    return (f"{cfg_collectors} collector(s) x {envs} envs: the recipe's {cfg_collectors * envs} env streams over the "
            f"{free} of {hw.cores} cores the learner process leaves (it keeps {LEARNER_PROCESS_CORES}: its loop, "
            "the consolidation and the prefetch threads)")
