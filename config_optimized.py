"""Typed training config, hardware detection and per-hardware profiles.

``python config_optimized.py`` prints the detected hardware, the profile picked for it and the
fully resolved config, with the layer that set each value. Every field below is also a
command-line option of ``mario_rl_optimized.py`` (``batch_size`` -> ``--batch-size``), so users
tune per machine without editing code. Tune a profile here, or save one with
``benchmark_performance.py --autotune`` (written per game family to the user's config folder,
``autotuned_path``).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path

from presets import family_of, load_preset
from wrappers.options import EnvOptions

FRAME_BYTES = 84 * 84
REPLAY_META_BYTES = 6          # action uint8 + reward float32 + flags uint8
# Private memory of one collector process (python, torch, model, 8 envs): 318 MB anonymous RSS
# measured for Pong on an AMD EPYC, ~300 MB reported for Mario; rounded up. Shared libraries are
# mapped once for all processes and not counted.
COLLECTOR_BYTES = 350 * 2**20
# The rings and the weight seqlock publish with plain stores and rely on the CPU keeping them in
# program order, which x86-64 (TSO) does and arm64 does not.
TSO_MACHINES = ("x86_64", "amd64", "i386", "i686", "x86")


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


def doc(text: str, default, **kw):
    return field(default=default, metadata={"help": text, **kw})


RUNS_ROOT = Path("runs")
RESUME_HERE = "here"  # a bare --resume: the run in --run-dir, or the latest
# What makes a folder a run's: a new run must not write into another's (issue: runs overwrote
# each other silently in a shared runs/latest).
RUN_FILES = ("checkpoint.pt", "metrics.jsonl", "episodes.jsonl", "train.log", "config.json", "replay.npz", "best.pt",
             "evals.jsonl", "best_eval.pt")


@dataclass
class Config:
    # --- what to train
    env: str = doc("environment id: an ALE id (ALE/Pong-v5) or a Mario id (SuperMarioBros-1-1-v0)", "SuperMarioBros-1-1-v0")
    total_steps: int = doc("stop after this many agent steps (after frame skip), summed over all envs", 5_000_000)
    seed: int = doc("seed for envs, exploration and network init", 1)
    profile: str = doc("hardware profile: auto, cpu-small, cpu-large, gpu-minimum, gpu-recommended, gpu-optimal, autotuned", "auto")
    device: str = doc("learner device: auto (cuda, then mps, then cpu), cuda, mps or cpu", "auto")
    # --- environment
    frame_stack: int = doc("frames stacked per observation", 4)
    frame_skip: int = doc("emulator frames per agent step", 4)
    max_pool: bool = doc("max-pool the last two skipped frames (MaxAndSkip)", True)
    noop_max: int = doc("random no-ops at reset, Atari (NoopReset); 0 disables", 30)
    episodic_life: bool = doc("a lost life ends the learning episode, Atari (EpisodicLife)", True)
    fire_reset: bool = doc("press FIRE after reset where the game needs it, Atari (FireReset)", True)
    clip_rewards: bool = doc("learn from rewards clipped to [-1, 1] (ClipReward); logs keep raw returns", True)
    reward_scale: float = doc("with --clip-rewards false: learn from rewards times this (Mario's lie in [-15, 15]: "
                              "1/15 keeps their size, which sign() throws away)", 1.0)
    sticky_actions: float = doc("repeat_action_probability; -1 keeps the env id's default (v5: 0.25)", -1.0)
    mario_actions: str = doc("Mario action set: right_only, simple or complex", "simple")
    # --- collectors and queues
    num_collectors: int = doc("collector processes stepping envs", 1)
    envs_per_collector: int = doc("envs each collector steps with one batched forward pass", 8)
    start_method: str = doc("multiprocessing start method: spawn, forkserver or fork", "spawn")
    queue_capacity: int = doc("slots (transitions) in each collector's shared-memory ring", 4096)
    drop_when_full: bool = doc("drop (and count) transitions when a ring is full instead of waiting", False)
    consolidation_batch: int = doc("most transitions the consolidation thread moves from one ring per drain", 1024)
    model_update_frequency: int = doc("learner updates between weight pushes to the collectors", 50)
    max_collector_restarts: int = doc("crashed-collector restarts before the run stops", 3)
    apex_epsilon: bool = doc("spread epsilon over envs Ape-X style (eps_i = 0.4^(1+7i/(N-1))) instead of one schedule", False)
    # --- replay
    buffer_size: int = doc("replay capacity in transitions (each 84x84 frame stored once)", 100_000)
    learning_starts: int = doc("agent steps collected before the first update", 10_000)
    n_step: int = doc("n-step return length", 3)
    gamma: float = doc("discount factor", 0.99)
    prioritized: bool = doc("prioritized replay (Schaul et al. 2016) instead of uniform", False)
    per_alpha: float = doc("prioritized replay: priority exponent", 0.6)
    per_beta: float = doc("prioritized replay: importance-sampling exponent at the start (annealed to 1)", 0.4)
    prefetch_batches: int = doc("batches sampled ahead of the learner by the prefetch thread", 4)
    # --- learner
    model_arch: str = doc("Q-network: batchnorm (conv layers with BatchNorm) or nature (plain Nature DQN)", "batchnorm")
    dueling: bool = doc("dueling Q head", False)
    batch_size: int = doc("samples per micro-batch", 32)
    grad_accum_steps: int = doc("micro-batches accumulated per optimizer step (effective batch = batch_size x this)", 1)
    replay_ratio: float = doc("samples trained per agent step, enforced both ways (4 = batch 32 every 8 steps)", 4.0)
    lr: float = doc("Adam learning rate", 1e-4)
    adam_eps: float = doc("Adam epsilon", 1.5e-4)
    max_grad_norm: float = doc("gradient-norm clip; 0 disables", 10.0)
    target_update_interval: int = doc("optimizer steps between target-network syncs", 500)
    double_dqn: bool = doc("Double DQN targets", True)
    amp: bool = doc("mixed precision (bf16 autocast on CPU, fp16 + GradScaler on CUDA)", True)
    amp_dtype: str = doc("autocast dtype: auto, bf16 or fp16 (fp16 needs CUDA)", "auto")
    compile: bool = doc("torch.compile the learner's network", False)
    channels_last: bool = doc("channels_last (NHWC) memory format for the convs (CUDA, and CPU bf16 via oneDNN)", False)
    learner_threads: int = doc("torch threads in the learner process; 0 = the profile's choice (cpu-small: all "
                               "cores, others: cores left after collectors)", 0)
    # --- exploration
    eps_start: float = doc("epsilon at the first step", 1.0)
    eps_end: float = doc("epsilon after the decay", 0.01)
    eps_decay_steps: int = doc("agent steps over which epsilon decays linearly", 100_000)
    # --- when to stop besides total_steps
    target_score: float | None = doc("stop once the mean score of the last 20 whole games reaches this (time to score); "
                              "unset = never", None, type=float)
    score_metric: str = doc("what --target-score is measured in: return (raw, unclipped) or distance (Mario)", "return")
    time_limit: float = doc("stop after this many minutes of wall clock; 0 = no limit", 0.0)
    # --- evaluation during training
    eval_interval: int = doc("agent steps between evaluations of the current weights in a process of their own, "
                             "keeping the best in best_eval.pt; 0 = off (best.pt still follows training games)", 0)
    eval_episodes: int = doc("whole games per --eval-interval evaluation (--eval plays --episodes)", 5)
    eval_epsilon: float = doc("random-action probability when evaluating (--eval-interval and --eval); CleanRL uses 0.05", 0.0)
    # --- run directory, logs, checkpoints
    run_dir: str = doc("the run's folder (checkpoints, metrics, logs); unset = a new runs/{env}__{seed}__{time}", "")
    resume: str = doc("continue a run from its last checkpoint: its folder, or 'latest'; a bare --resume "
                      "continues --run-dir (or, without one, the latest run)", "", nargs="?", const=RESUME_HERE,
                      metavar="RUN")
    overwrite: bool = doc("start a new run in a --run-dir that already holds one, deleting that run's files", False)
    checkpoint_interval: int = doc("optimizer steps between checkpoints", 5_000)
    save_replay: bool = doc("save the replay (compressed) with the final checkpoint, so --resume trains on at once "
                            "instead of refilling it; turn off for huge buffers", True)
    tensorboard: bool = doc("also write the epoch metrics as TensorBoard events in <run_dir>/tb", True)
    track: bool = doc("also send the run to Weights & Biases (TensorBoard synced, the run record as its config); "
                      "needs pip install 'fast-dqn[track]'", False)
    wandb_project: str = doc("W&B project for --track", "fast-dqn")
    wandb_entity: str = doc("W&B entity (user or team) for --track; unset = your default", "")
    epoch_steps: int = doc("agent steps per epoch: one [MAIN] log line and one metrics.jsonl row", 10_000)
    processor_log_interval: float = doc("seconds between [PROCESSOR] log lines", 10.0)

    def env_options(self) -> EnvOptions:
        return EnvOptions(frame_stack=self.frame_stack, frame_skip=self.frame_skip, max_pool=self.max_pool,
                          noop_max=self.noop_max, episodic_life=self.episodic_life, fire_reset=self.fire_reset,
                          clip_rewards=self.clip_rewards, sticky_actions=self.sticky_actions,
                          mario_actions=self.mario_actions)

    @property
    def effective_batch(self) -> int:
        return self.batch_size * self.grad_accum_steps

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ----------------------------------------------------------------------------- hardware
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
    if requested == "auto":
        return "cuda" if hw.cuda else ("mps" if hw.mps else "cpu")
    return requested


# ----------------------------------------------------------------------------- profiles
# Each profile is a set of overrides over the Config defaults. The replay ratio is never part
# of a profile: a faster machine trains on more samples per second, not fewer per frame.
PROFILES: dict[str, dict] = {
    # 2-4 cores, no GPU (our developer and CI machines): one collector process, and a learner on
    # every core: at Pong's pace the collector sleeps ~90% of the time, and two learner threads
    # made 10% more updates/s than one in the pipeline (AMD EPYC, fp32). Batch 32, the size that
    # learns fastest per minute (Tianshou's and CleanRL's), from the Config defaults.
    # channels_last: oneDNN's convolutions run faster on NHWC (bf16 ~15% on AVX-512, fp32 ~35%
    # on an AVX2 EPYC).
    "cpu-small": dict(num_collectors=1, envs_per_collector=8, buffer_size=100_000, model_update_frequency=50,
                      queue_capacity=4096, compile=False, amp=True, channels_last=True),
    "cpu-large": dict(num_collectors=2, envs_per_collector=8, buffer_size=200_000, model_update_frequency=50,
                      queue_capacity=4096, compile=False, amp=True, channels_last=True),
    # Seed 004's tables: minimum (GTX 1060, 6 GB), recommended (RTX 3070, 8 GB+), optimal (4090/A100).
    "gpu-minimum": dict(num_collectors=2, envs_per_collector=8, batch_size=256, grad_accum_steps=1,
                        buffer_size=100_000, model_update_frequency=5, queue_capacity=8192,
                        compile=False, amp=True, channels_last=True),
    "gpu-recommended": dict(num_collectors=4, envs_per_collector=16, batch_size=512, grad_accum_steps=1,
                            buffer_size=500_000, model_update_frequency=5, queue_capacity=16384,
                            compile=True, amp=True, channels_last=True),
    "gpu-optimal": dict(num_collectors=8, envs_per_collector=32, batch_size=1024, grad_accum_steps=1,
                        buffer_size=1_000_000, model_update_frequency=5, queue_capacity=32768,
                        compile=True, amp=True, channels_last=True),
}


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
    overrides = data.get("overrides", data)
    unknown = set(overrides) - {f.name for f in fields(Config)}
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
    if name == "autotuned":
        family = family_of(env or Config.env)
        over = load_autotuned(family)
        if over is None:
            raise ConfigError(f"--profile autotuned: no {autotuned_path(family)}; run benchmark_performance.py "
                              f"--autotune --env <{family} game> first")
        return dict(over)
    over = dict(PROFILES[name])
    if not name.startswith("gpu"):
        # bf16 autocast pays only where the CPU computes in bf16 (AVX-512 BF16, AMX, Arm BF16);
        # elsewhere oneDNN emulates it and an update is ~10x slower than fp32 (measured on an
        # AVX2-only AMD EPYC), so the CPU profiles train in fp32 there.
        over["amp"] = hw.cpu_bf16
    if name == "cpu-small":
        from wrappers.registry import is_mario

        # The NES emulator keeps a Mario collector busy on its core (94% of its time), so there the
        # learner takes only the cores left; two threads slowed Mario from ~195 to ~125 env steps/s.
        mario = is_mario(env or Config.env)
        over["learner_threads"] = max(1, hw.cores - over["num_collectors"]) if mario else hw.cores
    if name == "cpu-large":
        over["num_collectors"] = max(1, min(8, (hw.cores - 2) // 2))
    elif name.startswith("gpu"):
        over["num_collectors"] = max(1, min(over["num_collectors"], hw.cores - 2))
    per = FRAME_BYTES + REPLAY_META_BYTES
    fit = int(hw.ram_available_bytes * 0.5 // per)
    over["buffer_size"] = max(10_000, min(over["buffer_size"], fit))
    return over


# ----------------------------------------------------------------------------- validation
class ConfigError(ValueError):
    """A config value that cannot work; the message names the field, the value and the fix."""


def validate(cfg: Config, hw: Hardware) -> list[str]:
    """Raise ConfigError for the first impossible setting; return warnings for dubious ones."""
    from wrappers.mario import ACTION_SETS
    from wrappers.registry import UnknownEnvError, check_env_id, is_mario

    def bad(name, msg):
        raise ConfigError(f"--{name.replace('_', '-')} {getattr(cfg, name)!r}: {msg}")

    if platform.machine().lower() not in TSO_MACHINES:
        raise ConfigError(f"this machine is {platform.machine()}: the shared-memory rings between collectors and "
                          "learner rely on x86-64's store ordering, which this CPU does not give, so training could "
                          "read torn transitions; train on an x86-64 machine (--eval and --plot work here)")
    try:
        check_env_id(cfg.env)
    except UnknownEnvError as e:
        raise ConfigError(str(e)) from None
    positive = ["total_steps", "frame_stack", "frame_skip", "num_collectors", "envs_per_collector", "queue_capacity",
                "consolidation_batch", "model_update_frequency", "buffer_size", "n_step", "batch_size",
                "grad_accum_steps", "target_update_interval", "checkpoint_interval", "epoch_steps", "prefetch_batches",
                "eval_episodes"]
    for name in positive:
        if getattr(cfg, name) <= 0:
            bad(name, "must be a positive integer")
    for name in ["noop_max", "learning_starts", "max_collector_restarts", "eps_decay_steps", "learner_threads",
                 "eval_interval"]:
        if getattr(cfg, name) < 0:
            bad(name, "must be 0 or more")
    if cfg.profile not in ("auto", "autotuned", *PROFILES):
        bad("profile", f"unknown profile; choose auto, autotuned or one of {sorted(PROFILES)}")
    if cfg.device not in ("auto", "cpu", "cuda", "mps"):
        bad("device", "choose auto, cpu, cuda or mps")
    if cfg.device == "cuda" and not hw.cuda:
        bad("device", "CUDA is not available on this machine; use --device cpu (or auto)")
    if cfg.device == "mps" and not hw.mps:
        bad("device", "Apple MPS is not available on this machine; use --device cpu (or auto)")
    if cfg.start_method not in ("spawn", "forkserver", "fork"):
        bad("start_method", "choose spawn, forkserver or fork")
    if cfg.mario_actions not in ACTION_SETS:
        bad("mario_actions", f"choose one of {list(ACTION_SETS)}")
    if cfg.model_arch not in ("batchnorm", "nature"):
        bad("model_arch", "choose batchnorm or nature")
    if cfg.score_metric not in ("return", "distance"):
        bad("score_metric", "choose return or distance")
    if cfg.score_metric == "distance" and not is_mario(cfg.env):
        bad("score_metric", f"{cfg.env} reports no distance; only Mario does. Use --score-metric return")
    if cfg.time_limit < 0:
        bad("time_limit", "must be 0 (no limit) or a number of minutes")
    if cfg.amp_dtype not in ("auto", "bf16", "fp16"):
        bad("amp_dtype", "choose auto, bf16 or fp16")
    device = resolve_device(cfg.device, hw)
    if cfg.amp and cfg.amp_dtype == "fp16" and device != "cuda":
        bad("amp_dtype", f"fp16 autocast needs CUDA but the learner runs on {device}; use --amp-dtype bf16 (or auto)")
    if not 0 < cfg.gamma <= 1:
        bad("gamma", "must be in (0, 1]")
    if cfg.replay_ratio <= 0:
        bad("replay_ratio", "must be positive (samples trained per agent step; 8 = batch 32 every 4 steps)")
    if cfg.track:
        from pipeline.tracking import INSTALL, available

        if not cfg.tensorboard:
            bad("track", "sends the TensorBoard events to W&B; leave --tensorboard on")
        if not available():
            bad("track", f"needs the wandb package, which is not installed: {INSTALL}")
    if cfg.reward_scale <= 0:
        bad("reward_scale", "must be positive (1 = raw rewards)")
    if cfg.clip_rewards and cfg.reward_scale != 1.0:
        bad("reward_scale", "has no effect while --clip-rewards is on (sign() comes after any scale); "
                            "pass --clip-rewards false")
    if not 0 <= cfg.eval_epsilon <= 1:
        bad("eval_epsilon", "must be in [0, 1]")
    if not (0 <= cfg.eps_end <= 1 and 0 <= cfg.eps_start <= 1):
        bad("eps_start" if not 0 <= cfg.eps_start <= 1 else "eps_end", "must be in [0, 1]")
    if cfg.lr <= 0:
        bad("lr", "must be positive")
    if not (cfg.sticky_actions == -1.0 or 0 <= cfg.sticky_actions <= 1):
        bad("sticky_actions", "must be -1 (env default) or in [0, 1]")
    if cfg.model_arch == "batchnorm" and cfg.batch_size < 2:
        bad("batch_size", "BatchNorm needs at least 2 samples per micro-batch; use --batch-size 32 or --model-arch nature")
    if cfg.batch_size > cfg.buffer_size:
        bad("batch_size", f"is larger than --buffer-size {cfg.buffer_size}; lower the batch or raise the buffer")
    total_envs = cfg.num_collectors * cfg.envs_per_collector
    per_env = cfg.buffer_size // total_envs
    if per_env < cfg.frame_stack + cfg.n_step + 2:
        bad("buffer_size", f"gives {per_env} slots to each of {total_envs} envs; need at least "
                           f"frame_stack + n_step + 2 = {cfg.frame_stack + cfg.n_step + 2}")
    if cfg.queue_capacity < cfg.envs_per_collector:
        bad("queue_capacity", f"must hold at least one step of all {cfg.envs_per_collector} envs of a collector")
    collectors_need = cfg.num_collectors * COLLECTOR_BYTES
    usable = hw.ram_available_bytes * 0.9
    if collectors_need > usable:
        fit = max(0, int(usable // COLLECTOR_BYTES))
        bad("num_collectors", f"needs about {collectors_need / 2**30:.1f} GiB for the collector processes alone "
                              f"(~{COLLECTOR_BYTES / 2**20:.0f} MB each) but {hw.ram_available_bytes / 2**30:.1f} GiB "
                              f"is available; at most {fit} fit, and {max(1, hw.cores - 1)} suit {hw.cores} cores")
    need = (cfg.buffer_size * (FRAME_BYTES + REPLAY_META_BYTES) + cfg.num_collectors * cfg.queue_capacity * (FRAME_BYTES + 32)
            + collectors_need)
    if need > usable:
        bad("buffer_size", f"needs {need / 2**30:.2f} GiB for replay, queues and collectors but only "
                           f"{hw.ram_available_bytes / 2**30:.2f} GiB of RAM is available; "
                           f"use --buffer-size {int(hw.ram_available_bytes * 0.5 // (FRAME_BYTES + REPLAY_META_BYTES)):d} or less")
    run_dir = Path(cfg.run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        bad("run_dir", "is a file, not a directory; choose another --run-dir")
    existing = next(p for p in (run_dir, *run_dir.absolute().parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        bad("run_dir", f"cannot be written ({existing} is not writable by this user); choose a writable --run-dir")
    warnings = []
    if cfg.amp and device == "cpu" and not hw.cpu_bf16:
        warnings.append("--amp on a CPU without native bf16 (no AVX-512 BF16 or AMX): bf16 is emulated and "
                        "each update runs ~10x slower than fp32; use --amp false")
    if cfg.model_arch == "batchnorm" and cfg.batch_size < 16:
        warnings.append(f"batch_size {cfg.batch_size} < 16: BatchNorm statistics over so few samples are noisy")
    if cfg.num_collectors > max(1, hw.cores - 1):
        warnings.append(f"{cfg.num_collectors} collector processes and a learner on {hw.cores} cores: each collector "
                        f"wants most of a core, so they slow each other and the learner; "
                        f"--num-collectors {max(1, hw.cores - 1)} suits this machine")
    return warnings


# ----------------------------------------------------------------------------- CLI
def _parse_bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per Config field, and --config FILE; unset options stay None so the layers
    below the command line fill them."""
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="a TOML or JSON file of Config fields (a run's config.json works too), applied over "
                             "the defaults, the game's preset and the hardware profile, under the flags")
    for f in fields(Config):
        flag = "--" + f.name.replace("_", "-")
        default = f.default
        kind = f.metadata.get("type", type(default))
        help_text = f"{f.metadata['help']} (default: {default!r}, or the preset's or profile's)"
        if "nargs" in f.metadata:
            parser.add_argument(flag, type=kind, nargs=f.metadata["nargs"], const=f.metadata["const"], default=None,
                                metavar=f.metadata.get("metavar"), help=help_text)
        elif kind is bool:
            parser.add_argument(flag, type=_parse_bool, nargs="?", const=True, default=None, metavar="BOOL", help=help_text)
        else:
            parser.add_argument(flag, type=kind, default=None, help=help_text)


# Fields a saved run record never sets: they say where this start writes, not how it trains.
RUN_CONTROL = ("resume", "run_dir", "overwrite")
# What a resumed run cannot change: the checkpoint's network and replay were made for these.
FIXED_ON_RESUME = ("env", "frame_stack", "model_arch", "dueling", "mario_actions")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _typed(name: str, value, where: str):
    """A value read from a file, checked against its Config field's type (ints pass as floats)."""
    f = next(f for f in fields(Config) if f.name == name)
    kind = f.metadata.get("type", type(f.default))
    if f.default is None and value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise ConfigError(f"{where}: {name} = {value!r} should be {kind.__name__} (like the default {f.default!r})")


def read_config_file(path: str | Path) -> dict:
    """Config fields from a TOML or JSON file; a run's config.json gives the settings it ran with."""
    import difflib
    import tomllib

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"--config {path}: no such file; give a .toml or .json file of config fields")
    try:
        if path.suffix == ".toml":
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        elif path.suffix == ".json":
            data = json.loads(path.read_text())
        else:
            raise ConfigError(f"--config {path}: give a .toml or .json file")
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"--config {path} does not parse ({e}); fix the file") from None
    names = [f.name for f in fields(Config)]
    if isinstance(data, dict) and isinstance(data.get("config"), dict):  # a run record, maybe of another version
        kept = {k: v for k, v in data["config"].items() if k not in RUN_CONTROL and k in names}
        return {k: _typed(k, v, f"--config {path}") for k, v in kept.items()}
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path}: expected a table of config fields")
    for key in data:
        if key in RUN_CONTROL:
            raise ConfigError(f"--config {path}: {key} says where a run writes, not how it trains; give "
                              f"{_flag(key)} on the command line")
        if key not in names:
            near = difflib.get_close_matches(key, names, n=1)
            raise ConfigError(f"--config {path}: unknown field {key!r}" + (f"; did you mean {near[0]!r}?" if near else
                              "; python config_optimized.py lists the fields"))
    return {k: _typed(k, v, f"--config {path}") for k, v in data.items()}


def read_run_config(run_dir: Path) -> tuple[dict, list[str]]:
    """The config a run started with (its config.json), without the run-control fields, and notes
    on saved fields this version drops; empty for runs made before run records existed."""
    path = run_dir / "config.json"
    if not path.is_file():
        return {}, []
    try:
        saved = json.loads(path.read_text())["config"]
        if not isinstance(saved, dict):
            raise TypeError("'config' is not a table")
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise ConfigError(f"--resume: {path} is not a run record ({type(e).__name__}: {e}); restore it, or delete "
                          "it and resume with every setting on the command line") from None
    names = {f.name for f in fields(Config)}
    values, notes = {}, []
    # fields added since the run started keep this version's defaults; removed or retyped ones go
    for k, v in saved.items():
        if k in RUN_CONTROL:
            continue
        try:
            if k not in names:
                raise ConfigError(f"no field {k!r} in this version")
            values[k] = _typed(k, v, str(path))
        except ConfigError as e:
            notes.append(f"Resumed run: saved setting {k} = {v!r} dropped ({e})")
    return values, notes


@dataclass
class Resolved:
    """A config with its provenance: which layer set each field, and what a resume changed."""
    cfg: Config
    hw: Hardware
    profile: str
    sources: dict[str, str]
    resumed_from: Path | None = None
    changes: list[str] | None = field(default_factory=list)  # None: the resumed run kept no config.json
    notes: list[str] = field(default_factory=list)           # for the run log: what was dropped or ignored


def resolve_config(args: argparse.Namespace | dict | None = None, hw: Hardware | None = None,
                   root: Path = RUNS_ROOT) -> Resolved:
    """Layers, each overriding the one before: defaults, the game family's preset, the hardware
    profile, the resumed run's config.json, --config FILE, then the flags given."""
    hw = hw or detect_hardware()
    raw = vars(args) if isinstance(args, argparse.Namespace) else dict(args or {})
    names = {f.name for f in fields(Config)}
    given = {k: v for k, v in raw.items() if v is not None and k in names}
    from_file = read_config_file(raw["config"]) if raw.get("config") else {}
    saved, resumed_from, notes = {}, None, []
    if given.get("resume"):
        resumed_from = resume_target(given["resume"], given.get("run_dir", ""), root)
        saved, notes = read_run_config(resumed_from)
    env = given.get("env") or from_file.get("env") or saved.get("env") or Config.env
    profile = given.get("profile") or from_file.get("profile") or "auto"
    if profile not in ("auto", "autotuned", *PROFILES):
        raise ConfigError(f"--profile {profile!r}: unknown profile; choose auto, autotuned or one of {sorted(PROFILES)}")
    family = family_of(env)
    name = ("autotuned" if autotuned_path(family).exists() else pick_profile(hw)) if profile == "auto" else profile
    layers = [(f"preset {family}", checked_preset(family)), (f"profile {name}", scale_profile(name, hw, env))]
    if saved:
        layers.append((f"resumed {resumed_from / 'config.json'}", {k: v for k, v in saved.items() if k != "profile"}))
        if "profile" in given:
            notes.append(f"--profile {given['profile']} sets nothing on a resumed run (its saved settings win); "
                         "give the fields to change instead")
        name = saved.get("profile", name) if "profile" not in given else name
    layers += [(f"--config {raw.get('config')}", from_file), ("command line", given)]
    values, sources = {}, dict.fromkeys(names, "default")
    for label, over in layers:
        for k, v in over.items():
            values[k] = v
            sources[k] = label
    cfg = Config(**values)
    cfg.profile = name
    # None: the resumed run has no config.json (made before run records), so nothing to compare
    changes = [] if saved or resumed_from is None else None
    for k, old in saved.items():
        new = getattr(cfg, k)
        if k == "profile" or new == old:
            continue
        if k in FIXED_ON_RESUME:
            raise ConfigError(f"{_flag(k)} {new!r}: the run in {resumed_from} was trained with {_flag(k)} {old!r}, which "
                              f"a resumed run cannot change; drop {_flag(k)}, or start a new run without --resume")
        changes.append(f"{_flag(k)} {old!r} -> {new!r} ({sources[k]})")
    return Resolved(cfg, hw, name, sources, resumed_from, changes, notes)


def checked_preset(family: str) -> dict:
    """A family preset's values, each a Config field of its type (a typo names the file)."""
    from presets import preset_path

    where = f"preset {preset_path(family)}"
    over = load_preset(family)
    for key in over:
        if key not in {f.name for f in fields(Config)} or key in RUN_CONTROL:
            raise ConfigError(f"{where}: {key!r} is not a setting a preset may set; fix the file")
    return {k: _typed(k, v, where) for k, v in over.items()}


def build_config(args: argparse.Namespace | dict | None = None, hw: Hardware | None = None) -> tuple[Config, Hardware, str]:
    """The layered config (``resolve_config``) as (config, hardware, profile name)."""
    res = resolve_config(args, hw)
    return res.cfg, res.hw, res.profile


# ----------------------------------------------------------------------------- run folders
def has_run(run_dir: Path) -> bool:
    return run_dir.is_dir() and any((run_dir / name).exists() for name in RUN_FILES)


def resumable(run_dir: Path) -> bool:
    return (run_dir / "checkpoint.pt").is_file()


def latest_run(root: Path = RUNS_ROOT) -> Path:
    """The newest resumable run under ``root``: the ``latest`` link new runs leave (a real folder
    of that name is an old run, not a pointer), else the newest folder."""
    link = root / "latest"
    if link.is_symlink() and resumable(link):
        return link.resolve()
    runs = [d for d in root.glob("*") if d.is_dir() and not d.is_symlink() and resumable(d)] if root.is_dir() else []
    if not runs:
        raise ConfigError(f"--resume latest: no run under {root}/; pass the run's folder (--resume runs/NAME)")
    return max(runs, key=lambda d: d.stat().st_mtime)


def resume_target(resume: str, run_dir: str, root: Path = RUNS_ROOT) -> Path:
    """The folder --resume names: a folder, 'latest', or (bare) --run-dir, else the latest."""
    if resume == "latest" or (resume == RESUME_HERE and not run_dir):
        target = latest_run(root)
    elif resume != RESUME_HERE:
        target = Path(resume)
        if run_dir and Path(run_dir).resolve() != target.resolve():
            raise ConfigError(f"--resume {resume} and --run-dir {run_dir} name different runs; give one")
    else:
        target = Path(run_dir)
    if not resumable(target):
        raise ConfigError(f"--resume: {target} holds no run (no checkpoint.pt); pass a run's folder or 'latest'")
    return target


def resolve_run_dir(cfg: Config, now: float | None = None, root: Path = RUNS_ROOT) -> Config:
    """The folder this run writes: the one to resume, the one given, or a new
    ``runs/{env}__{seed}__{time}``. A given folder that holds another run is refused unless
    --resume or --overwrite says what to do with it."""
    import time

    if cfg.resume:
        return dataclasses.replace(cfg, run_dir=str(resume_target(cfg.resume, cfg.run_dir, root)))
    if not cfg.run_dir:
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
        base = root / f"{cfg.env.replace('/', '-').replace(':', '-')}__{cfg.seed}__{stamp}"
        target, n = base, 1
        while target.exists():
            n += 1
            target = base.with_name(f"{base.name}-{n}")
        return dataclasses.replace(cfg, run_dir=str(target))
    if has_run(Path(cfg.run_dir)) and not cfg.overwrite:
        raise ConfigError(f"--run-dir {cfg.run_dir!r}: already holds a run (its checkpoint, metrics or log); pass "
                          "--resume to continue it, --overwrite to replace it, or choose another --run-dir")
    return cfg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Show the detected hardware, the chosen profile and the resolved "
                                                 "config, with the layer that set each value.")
    add_config_arguments(parser)
    args = parser.parse_args(argv)
    try:
        res = resolve_config(args)
        cfg, hw, name = res.cfg, res.hw, res.profile
        warnings = validate(cfg, hw)
    except ConfigError as e:
        print(f"config error: {e}", file=sys.stderr)
        return 2
    print(f"Hardware: {hw.describe()}")
    print(f"Device:   {resolve_device(cfg.device, hw)}")
    print(f"Preset:   {family_of(cfg.env)} ({preset_path_of(cfg.env)})")
    print(f"Profile:  {name}" + (f" (from {autotuned_path(family_of(cfg.env))})" if name == "autotuned" else ""))
    if res.resumed_from:
        print(f"Resumes:  {res.resumed_from}" + "".join(f"\n  changed: {c}" for c in res.changes or []))
    for w in warnings:
        print(f"Warning:  {w}")
    print("Config (value, and the layer that set it):")
    width = max(len(f.name) for f in fields(Config))
    for f in fields(Config):
        print(f"  {f.name:<{width}} = {getattr(cfg, f.name)!r:<24} {res.sources[f.name]}")
    per = FRAME_BYTES + REPLAY_META_BYTES
    print(f"Replay:   {cfg.buffer_size:,} transitions x {per:,} B = {cfg.buffer_size * per / 2**30:.2f} GiB")
    return 0


def preset_path_of(env: str) -> Path:
    from presets import preset_path

    return preset_path(family_of(env))


if __name__ == "__main__":
    sys.exit(main())
