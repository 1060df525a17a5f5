"""Config validation: every impossible setting is refused with a message that names the field,
the value and the fix, before any process starts; dubious ones come back as warnings."""
from __future__ import annotations

import math
import multiprocessing
import os
import platform
from pathlib import Path

from config_optimized import (COLLECTOR_BYTES, DEFAULT_START_METHOD, FIELDS, FRAME_BYTES, REPLAY_META_BYTES, Config,
                              ConfigError)
from models.dqn import BATCHNORM_MODELS

from ..replay.ratio import ReplayRatio
from .hardware import Hardware, resolve_device

# The rings and the weight seqlock publish with plain stores and rely on the CPU keeping them in
# program order, which x86-64 (TSO) does and arm64 does not.
TSO_MACHINES = ("x86_64", "amd64", "i386", "i686", "x86")


def check_choices(cfg: Config) -> None:
    """Each field with ``choices`` in its metadata holds one of them (the flags' help lists them)."""
    for name, (_, f) in FIELDS.items():
        choices = f.metadata.get("choices")
        if choices and cfg.get(name) not in choices:
            listed = f"{', '.join(choices[:-1])} or {choices[-1]}"
            raise ConfigError(f"--{name.replace('_', '-')} {cfg.get(name)!r}: choose {listed}")


def check_play_options(sticky_actions: float, noop_max: int) -> None:
    """How the games are played, checked alike for training and for --eval's own choice of them."""
    if not (sticky_actions == -1.0 or 0 <= sticky_actions < 1):
        raise ConfigError(f"--sticky-actions {sticky_actions!r}: must be -1 (env default) or in [0, 1): at 1 the "
                          "first action would repeat forever")
    if noop_max < 0:
        raise ConfigError(f"--noop-max {noop_max!r}: must be 0 or more")


def check_video_encoder() -> None:
    """Refuse a video (--video, --capture-video) before anything starts where its encoder, the
    ffmpeg that the imageio-ffmpeg package ships, is not installed."""
    try:
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError) as e:
        raise ConfigError(f"a video needs the imageio-ffmpeg package and its ffmpeg ({type(e).__name__}: {e}); "
                          "pip install imageio-ffmpeg (make train installs it)") from None


def check_eval_epsilon(eval_epsilon: float) -> None:
    """The evaluation's random-action probability, checked alike for training and --eval."""
    if not 0 <= eval_epsilon <= 1:
        raise ConfigError(f"--eval-epsilon {eval_epsilon!r}: must be in [0, 1]")


def validate(cfg: Config, hw: Hardware) -> list[str]:
    """Raise ConfigError for the first impossible setting; return warnings for dubious ones."""
    from wrappers.registry import UnknownEnvError, check_env_id, is_mario, is_module_env_id, why_starts_are_not_games

    opts, col, rep, lrn, run = cfg.env_options, cfg.collectors, cfg.replay, cfg.learner, cfg.run

    def bad(name, msg):
        raise ConfigError(f"--{name.replace('_', '-')} {cfg.get(name)!r}: {msg}")

    if platform.machine().lower() not in TSO_MACHINES:
        raise ConfigError(f"this machine is {platform.machine()}: the shared-memory rings between collectors and "
                          "learner rely on x86-64's store ordering, which this CPU does not give, so training could "
                          "read torn transitions; train on an x86-64 machine (--eval and --plot work here)")
    check_choices(cfg)
    try:
        check_env_id(cfg.env)
    except UnknownEnvError as e:
        raise ConfigError(str(e)) from None
    positive = ["total_steps", "frame_stack", "frame_skip", "envs_per_collector", "env_threads", "ring_capacity",
                "ray_batch", "consolidation_batch", "model_update_frequency", "buffer_size", "n_step", "batch_size",
                "grad_accum_steps", "target_update_interval", "checkpoint_interval", "epoch_steps", "prefetch_batches",
                "eval_episodes"]
    for name in positive:
        if cfg.get(name) <= 0:
            bad(name, "must be a positive integer")
    check_play_options(opts.sticky_actions, opts.noop_max)
    for name in ["learning_starts", "max_collector_restarts", "eps_decay_steps", "lr_decay_start", "lr_decay_steps",
                 "learner_threads",
                 "eval_interval", "confirm_episodes", "num_collectors", "ray_collectors"]:
        if cfg.get(name) < 0:
            bad(name, "must be 0 or more")
    if lrn.compile and not hw.cuda and not hw.cpp_compiler:
        bad("compile", "torch.compile's CPU code generation needs a C++ compiler, and none was found ($CXX, else "
                       "g++, on PATH); install one (e.g. apt install g++) or train with --compile false")
    if col.total_collectors == 0:
        bad("num_collectors", "leaves no collector (and --ray-collectors is 0); use --num-collectors 1 or more")
    if col.ray_collectors and not col.ray_address:
        bad("ray_collectors", "needs a cluster to start them in: add --ray-address HOST:PORT (or auto)")
    if col.ray_address and not col.ray_collectors:
        bad("ray_address", "starts no remote collector while --ray-collectors is 0; add --ray-collectors N")
    if col.start_method not in multiprocessing.get_all_start_methods():
        bad("start_method", f"{col.start_method} is not available on this platform; use {DEFAULT_START_METHOD}")
    if col.collector_device == "cuda":
        if not hw.cuda:
            bad("collector_device", "CUDA is not available on this machine; use --collector-device cpu")
        if col.start_method == "fork":
            bad("collector_device", "cuda cannot start in a forked collector (CUDA refuses a context in a child forked "
                                    "after its parent used it); add --start-method spawn")
    if cfg.device == "cuda" and not hw.cuda:
        bad("device", "CUDA is not available on this machine; use --device cpu (or auto)")
    if cfg.device == "mps" and not hw.mps:
        bad("device", "Apple MPS is not available on this machine; use --device cpu (or auto)")
    if run.score_metric == "distance" and not is_mario(cfg.env):
        bad("score_metric", f"{cfg.env} reports no distance; only Mario does. Use --score-metric return")
    if run.confirm_every_start:
        why = why_starts_are_not_games(cfg.env, opts)
        if why is not None:
            bad("confirm_every_start", f"{why}; confirming from every start needs one game per start (Mario "
                                       "without sticky actions): leave it false")
        elif not run.eval_interval:
            bad("confirm_every_start", "confirms --eval-interval's evaluations, which are off; add --eval-interval "
                                       "50000 or leave it false")
    if not 0 <= rep.augment_shift <= 16:
        bad("augment_shift", "must be 0 (off) to 16 pixels of the 84-pixel frame (DrQ shifts by 4)")
    for rule in ("stall_steps", "stall_end"):  # the two stall rules: a learning episode's end, a game's
        if getattr(opts, rule) < 0:
            bad(rule, "must be 0 (never) or a number of agent steps")
        if getattr(opts, rule) and not is_mario(cfg.env):
            bad(rule, f"{cfg.env} reports no x position to stand still at; only Mario does. Leave it 0")
    if opts.stall_penalty < 0:
        bad("stall_penalty", "is taken from the reward where a stall ends, so it must be 0 or more (25: a lost life)")
    if opts.stall_penalty and not (opts.stall_steps or opts.stall_end):
        bad("stall_penalty", "applies where --stall-steps ends a learning episode or --stall-end a game, and both "
                             "are 0; add --stall-steps N (e.g. 10) or leave --stall-penalty 0")
    if opts.flag_bonus < 0:
        bad("flag_bonus", "is added to the reward where Mario reaches the flag, so it must be 0 or more (50: R2D2's)")
    if opts.flag_bonus and not is_mario(cfg.env):
        bad("flag_bonus", f"{cfg.env} reports no flag; only Mario does. Leave it 0")
    if opts.death_penalty < 0:
        bad("death_penalty", "is taken from the reward where a Mario game ends without the flag, so it must be 0 or "
                             "more (50: R2D2's)")
    if opts.death_penalty and not is_mario(cfg.env):
        bad("death_penalty", f"{cfg.env} is not Mario; Atari's lost lives are learned as ends (--episodic-life). "
                             "Leave it 0")
    if run.time_limit < 0:
        bad("time_limit", "must be 0 (no limit) or a number of minutes")
    if run.capture_video and not run.eval_interval:
        bad("capture_video", "films the --eval-interval evaluations, and --eval-interval is 0; add --eval-interval N "
                             "(the Mario preset's is 50000)")
    if run.capture_video:
        check_video_encoder()
    device = resolve_device(cfg.device, hw)
    if lrn.amp and lrn.amp_dtype == "fp16" and device != "cuda":
        bad("amp_dtype", f"fp16 autocast needs CUDA but the learner runs on {device}; use --amp-dtype bf16 (or auto)")
    if not 0 < rep.gamma <= 1:
        bad("gamma", "must be in (0, 1]")
    if lrn.replay_ratio <= 0:
        bad("replay_ratio", "must be positive (samples trained per agent step; 8 = batch 32 every 4 steps)")
    if run.track:
        from ..records.tracking import INSTALL, available

        if not run.tensorboard:
            bad("track", "sends the TensorBoard events to W&B; leave --tensorboard on")
        if not available():
            bad("track", f"needs the wandb package, which is not installed: {INSTALL}")
    if opts.reward_scale <= 0:
        bad("reward_scale", "must be positive (1 = raw rewards)")
    if opts.mark_action and is_module_env_id(cfg.env):  # ALE's 18 and Mario's 12 actions always fit the strip
        from wrappers.factory import count_actions

        try:
            count_actions(cfg.env, opts)
        except ValueError as e:  # the strip has a column or more per action
            bad("mark_action", f"{cfg.env}: {e}")
    check_eval_epsilon(run.eval_epsilon)
    if not (0 <= col.eps_end <= 1 and 0 <= col.eps_start <= 1):
        bad("eps_start" if not 0 <= col.eps_start <= 1 else "eps_end", "must be in [0, 1]")
    if not 0 <= lrn.bootstrap_epsilon < 1:
        bad("bootstrap_epsilon", "must be in [0, 1) (0 = the greedy bootstrap; --eval-epsilon's value bootstraps "
                                 "from the policy as it is judged)")
    if not 0 <= lrn.weight_average < 1:
        bad("weight_average", "must be in [0, 1) (0 = the online weights; 0.999 averages about the last 1,000 updates)")
    if lrn.quantiles < 0 or lrn.iqn_taus < 0:
        bad("quantiles" if lrn.quantiles < 0 else "iqn_taus", "must be 0 (off) or a positive count")
    if lrn.quantiles and lrn.iqn_taus:
        bad("iqn_taus", f"and --quantiles {lrn.quantiles} are two rules (IQN draws its fractions, QR-DQN fixes them); "
                        "add --quantiles 0 to train IQN, or drop --iqn-taus")
    if lrn.munchausen:
        if lrn.munchausen_tau <= 0:
            bad("munchausen_tau", "must be positive (the softmax policy's temperature)")
        if not 0 <= lrn.munchausen_alpha <= 1:
            bad("munchausen_alpha", "must be in [0, 1] (the paper's 0.9)")
        if lrn.munchausen_clip >= 0:
            bad("munchausen_clip", "must be below 0 (tau log pi is at most 0; the paper's -1)")
        if lrn.bootstrap_epsilon:
            bad("bootstrap_epsilon", "does not apply with --munchausen, whose softmax policy values s'; drop one")
    if lrn.lr <= 0:
        bad("lr", "must be positive")
    if lrn.lr_decay_steps and lrn.lr_end <= 0:
        bad("lr_end", "must be above 0 (the learning rate falls to it); or keep --lr constant with --lr-decay-steps 0")
    if lrn.model_arch in BATCHNORM_MODELS and lrn.batch_size < 2:
        bad("batch_size", "BatchNorm needs at least 2 samples per micro-batch; use --batch-size 32 or --model-arch nature")
    if lrn.batch_size > rep.buffer_size:
        bad("batch_size", f"is larger than --buffer-size {rep.buffer_size}; lower the batch or raise the buffer")
    total_envs = col.env_streams
    per_env = rep.buffer_size // total_envs
    if per_env < opts.frame_stack + rep.n_step + 2:
        bad("buffer_size", f"gives {per_env} slots to each of {total_envs} envs; need at least "
                           f"frame_stack + n_step + 2 = {opts.frame_stack + rep.n_step + 2}")
    # The first update samples n_step + 1 records of a stream; the prefetcher waits for them (a
    # --learning-starts of 0 is fine), but collectors play only a head start past --learning-starts
    # before the learner trains, so with many streams and a long n_step they could wait on each other.
    first_batch = total_envs * (rep.n_step + 1)
    head_start = ReplayRatio(lrn.replay_ratio, lrn.effective_batch, lrn.learning_starts, total_envs).slack
    if lrn.learning_starts + head_start < first_batch:
        bad("learning_starts", f"is too small for {total_envs} env streams and --n-step {rep.n_step}: the first batch "
                               f"needs {rep.n_step + 1} records in a stream ({first_batch:,} agent steps in all) and "
                               f"collectors play only {head_start:,.0f} steps past --learning-starts before the "
                               f"learner trains; use --learning-starts {math.ceil(first_batch - head_start)} or more")
    if col.ring_capacity < col.envs_per_collector:
        bad("ring_capacity", f"must hold at least one step of all {col.envs_per_collector} envs of a collector")
    collectors_need = col.num_collectors * COLLECTOR_BYTES
    usable = hw.ram_available_bytes * 0.9
    if collectors_need > usable:
        fit = max(0, int(usable // COLLECTOR_BYTES))
        bad("num_collectors", f"needs about {collectors_need / 2**30:.1f} GiB for the collector processes alone "
                              f"(~{COLLECTOR_BYTES / 2**20:.0f} MB each) but {hw.ram_available_bytes / 2**30:.1f} GiB "
                              f"is available; at most {fit} fit, and {max(1, hw.cores - 1)} suit {hw.cores} cores")
    need = (rep.buffer_size * (FRAME_BYTES + REPLAY_META_BYTES) + col.num_collectors * col.ring_capacity * (FRAME_BYTES + 32)
            + collectors_need)
    if need > usable:
        bad("buffer_size", f"needs {need / 2**30:.2f} GiB for replay, queues and collectors but only "
                           f"{hw.ram_available_bytes / 2**30:.2f} GiB of RAM is available; "
                           f"use --buffer-size {int(hw.ram_available_bytes * 0.5 // (FRAME_BYTES + REPLAY_META_BYTES)):d} or less")
    run_dir = Path(run.run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        bad("run_dir", "is a file, not a directory; choose another --run-dir")
    existing = next(p for p in (run_dir, *run_dir.absolute().parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        bad("run_dir", f"cannot be written ({existing} is not writable by this user); choose a writable --run-dir")
    warnings = []
    if lrn.lr_decay_steps and lrn.lr_end > lrn.lr:
        warnings.append(f"--lr-end {lrn.lr_end:g} is above --lr {lrn.lr:g}: the learning rate stays at --lr (a schedule "
                        "only falls); give a lower --lr-end for it to fall, or --lr-decay-steps 0")
    if opts.clip_rewards and opts.reward_scale != 1.0:
        # a warning, not an error: the Mario preset scales its rewards, and --clip-rewards true
        # over it is a valid choice that simply makes the scale moot
        warnings.append(f"--reward-scale {opts.reward_scale:g} has no effect while --clip-rewards is on (sign() "
                        "comes after any scale); pass --clip-rewards false to learn from scaled rewards")
    # collectors act on the CPU whatever the learner's device; the learner's --amp is bf16 only on a CPU
    for option, on, slow, fast in (("--amp", lrn.amp and device == "cpu", "each update runs ~10x slower", "trains"),
                                   ("--act-bf16", col.act_bf16, "the collectors act several times slower",
                                    "likely acts")):
        if on and not hw.cpu_bf16:
            warnings.append(f"{option} on a CPU without native bf16 (no AVX-512 BF16 or AMX): bf16 is emulated and "
                            f"{slow} than fp32; use {option} false")
        elif on and not hw.bf16_pays:
            warnings.append(f"{option} on this CPU: a bf16 learner step measured {hw.cpu_bf16_speedup:.2f}x the speed "
                            f"of fp32 here; {option} false {fast} faster")
    if lrn.model_arch in BATCHNORM_MODELS and lrn.batch_size < 16:
        warnings.append(f"batch_size {lrn.batch_size} < 16: BatchNorm statistics over so few samples are noisy")
    if col.num_collectors > max(1, hw.cores - 1):
        warnings.append(f"{col.num_collectors} collector processes and a learner on {hw.cores} cores: each collector "
                        f"wants most of a core, so they slow each other and the learner; "
                        f"--num-collectors {max(1, hw.cores - 1)} suits this machine")
    return warnings
