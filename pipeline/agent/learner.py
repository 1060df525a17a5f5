"""The DQN learner: the networks the learning rule reads (``pipeline/agent/rules.py``: which network
reads what, the n-step targets and the loss), one update step written once (``update_step``),
mixed precision, gradient accumulation, the optimizer and target-network syncs. How that step
runs (eagerly, with its loss compiled by torch.compile, or captured as one CUDA graph) is the
engine's (``pipeline/engine/engine.py``): nothing here knows. One code path for CPU and CUDA: only the
autocast dtype, the GradScaler's ``enabled`` flag and the memory format differ."""
from __future__ import annotations

import copy
import math

import numpy as np
import torch
from torch.profiler import record_function

from config_optimized import LearnerConfig
from models import NetworkSpec, build_model

from . import rules


class TrainingDiverged(RuntimeError):
    pass



def amp_dtype_for(device: torch.device, amp: bool, requested: str = "auto",
                  cuda_bf16: bool | None = None) -> torch.dtype | None:
    """The autocast dtype: bf16, except fp16 where asked or where auto meets a CUDA GPU without
    bf16 (before Ampere; ``cuda_bf16`` None asks the device). bf16 needs no GradScaler and its
    checks: on an H100 the compiled batch-32 update took 6.4 ms in bf16 and 8.1 in fp16 (3.5 and
    3.9 with CUDA graphs), and bf16 is the precision every CPU figure of the recipes trained in."""
    if not amp:
        return None
    if requested == "fp16":
        return torch.float16
    if requested == "auto" and device.type == "cuda":
        if cuda_bf16 is None:
            cuda_bf16 = torch.cuda.get_device_capability(device)[0] >= 8
        return torch.bfloat16 if cuda_bf16 else torch.float16
    return torch.bfloat16


def flush_denormals() -> bool:
    """Make this process's CPU treat denormal floats as zero (FTZ/DAZ); True where every torch
    thread does.

    Over a run, Adam's second-moment estimates of rarely-trained weights decay through fp32's
    denormal range (below 1.2e-38), where every x86 operation on them takes a microcode assist of
    about a hundred cycles: the checkpoint of a Pong run held 1.2 million denormals in its Adam
    state and its update ran ~1.4x slower than with them flushed, which is how a run's updates/s
    fell by a third over its first 40 minutes (docs/notebook.md, "What the pipeline takes from
    the learner"). Flushed, such a value becomes zero, far below anything Adam's epsilon lets
    matter.
    The flag is per thread, and OpenMP threads copy it from the thread that starts them, so it
    must be set before the process's first parallel torch operation. The probe splits a
    multiplication into the denormal range over the torch threads and checks that every part
    came out zero."""
    if not torch.set_flush_denormal(True):  # a CPU without the flags
        return False
    x = torch.full((1 << 20,), 1e-30).mul_(1e-9)
    return bool((x == 0).all())


def configure_backends(device: torch.device) -> None:
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed 84x84 shapes: pick the fastest conv once
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def lr_schedule(c: LearnerConfig, agent_steps: int) -> float:
    """--lr until --lr-decay-start agent steps, then a linear fall to --lr-end over --lr-decay-steps
    (0: --lr for the whole run). Counted in agent steps, as epsilon's decay is, so a run's schedule
    does not depend on its replay ratio or on how it was split by resumes."""
    if c.lr_decay_steps <= 0:
        return c.lr
    frac = min(1.0, max(0.0, (agent_steps - c.lr_decay_start) / c.lr_decay_steps))
    return c.lr + frac * (min(c.lr_end, c.lr) - c.lr)  # an --lr-end above --lr holds --lr (validate warns)


def sharing_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A second module tree over the same parameter and buffer tensors: what the optimizer, a
    load_state_dict or a BatchNorm update writes into one, the other reads. Its own modules keep
    their own train/eval mode."""
    return copy.deepcopy(model, memo={id(t): t for t in (*model.parameters(), *model.buffers())})


class Learner:
    def __init__(self, cfg: LearnerConfig, in_channels: int, n_actions: int, device: torch.device):
        """Only the learner's part of the config: the network, optimizer, precision and targets."""
        self.cfg, self.device = cfg, device
        self.rule = rules.Rule.of(cfg)
        configure_backends(device)
        self.network = NetworkSpec.of(cfg, in_channels, n_actions)
        self.model = build_model(self.network).to(device)
        self.memory_format = torch.channels_last if cfg.channels_last else torch.contiguous_format
        self.model = self.model.to(memory_format=self.memory_format)
        # bn_targets=running: eval forever, BatchNorm's running statistics. bn_targets=batch: train
        # mode, each s' batch normalized on its own statistics, as Q(s) is in the training forward;
        # the target's running statistics then move, but nothing reads them before the next sync.
        self.target = copy.deepcopy(self.model).train(cfg.bn_targets == "batch")
        for p in self.target.parameters():
            p.requires_grad_(False)
        # fused: one kernel over all parameters instead of ~10 ops per tensor; Adam's step was a
        # sixth of a batch-32 update on a 2-core CPU, and fused took 1.23x off the whole update
        # (docs/notebook.md, "Where one update's time goes"). Same arithmetic.
        self.fused = device.type in ("cpu", "cuda")
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, eps=cfg.adam_eps,
                                          fused=self.fused or None)
        self.amp_dtype = amp_dtype_for(device, cfg.amp, cfg.amp_dtype)
        # Autocast's cache of cast weights; an engine that captures the step as one CUDA graph
        # turns it off (the graph would capture the cache as memory it does not own). Either way
        # the same casts are computed.
        self.autocast_cache = True
        # GradScaler only for fp16; bf16 has fp32's exponent range and needs no loss scaling.
        self.scaler = torch.amp.GradScaler(device.type if device.type == "cuda" else "cpu",
                                           enabled=self.amp_dtype == torch.float16)
        # Double DQN's argmax on s' reads the online weights, normalized as bn_targets says. For
        # the running statistics it reads them through a second module tree over the same
        # tensors, in eval mode for good, so no forward flips the online network's mode: a flip
        # walks every module, and a compiled loss would have to guard on it.
        self.argmax_model = self.model if cfg.bn_targets == "batch" else sharing_copy(self.model).eval()
        # Polyak averaging (weight_average): the policy that evaluations and the kept weights play,
        # an exponential moving average of the online weights and BatchNorm statistics, stepped
        # after every optimizer step. Its own module in eval mode, never trained or compiled.
        # The tensors each step lerps (weights and float statistics) and copies (batch counts),
        # listed once: load_state_dict copies into these same tensors.
        self.average: torch.nn.Module | None = None
        self._lerped: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
        self._copied: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
        if cfg.weight_average:
            self.average = copy.deepcopy(self.model).eval()
            for p in self.average.parameters():
                p.requires_grad_(False)
            nets = (self.average, self.model)
            self._lerped = tuple([*(p.data for p in n.parameters()), *(b for b in n.buffers() if b.is_floating_point())]
                                 for n in nets)
            self._copied = tuple([b for b in n.buffers() if not b.is_floating_point()] for n in nets)
        self.updates = 0
        self.bad_steps = 0

    def precision(self):
        """The forwards' precision: autocast to amp_dtype, or fp32 where mixed precision is off."""
        return torch.autocast(self.device.type, dtype=self.amp_dtype or torch.float32, enabled=self.amp_dtype is not None,
                              cache_enabled=self.autocast_cache)

    @property
    def host_channels_last(self) -> bool:
        """Batches for this learner are best sampled channels_last (``Replay.sample``): it trains
        channels_last on the CPU, so ``to_device`` then views them without a copy."""
        return self.device.type == "cpu" and self.memory_format is torch.channels_last

    def batch_from(self, replay, batch_size: int) -> dict:
        """One training batch from ``replay``: sampled in the layout this learner reads, on its device."""
        return self.to_device(replay.sample(batch_size, self.host_channels_last))

    def to_device(self, batch: dict) -> dict:
        """numpy batch -> tensors on the learner device, every device through the same move
        (pinned + non_blocking where the device is CUDA).

        Runs in the prefetch thread, so it does no parallel torch work on the CPU: a torch copy
        here would start a second OpenMP team beside the learner's and stall both on a 2-core
        machine. The channels_last layout is therefore made in numpy, which torch then views, where
        the learner is on the CPU: a batch sampled channels_last (``host_channels_last``) is viewed
        as it is, another transposed here. A GPU makes the layout itself, after the copy: at the GPU
        profiles' batch of 1024 the host's transpose took ~26 ms per frame stack, more than the
        sampling (16 ms), and held the prefetch thread to ~12 batches/s on an H200's host."""
        on_host = self.device.type == "cpu"
        pin = self.device.type == "cuda"
        out = {}
        for k, v in batch.items():
            if v is None or k in ("stream", "pos", "seq", "age"):  # the replay's bookkeeping stays on the host
                out[k] = v
                continue
            frames = k in ("obs", "next_obs") and self.memory_format is torch.channels_last
            if frames and on_host:
                t = torch.from_numpy(np.ascontiguousarray(v.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
            else:
                t = torch.from_numpy(v)
            if pin:
                t = t.pin_memory()
            t = t.to(self.device, non_blocking=pin)
            out[k] = t.contiguous(memory_format=torch.channels_last) if frames and not on_host else t
        return out

    def loss(self, b: dict):
        """The rule's loss of the batch, its TD errors and Q-values (``rules.batch_loss``): what
        the engine compiles (``Engine.compile_loss``)."""
        return rules.batch_loss(self.rule, self, b)

    def update(self, micro_batches: list[dict], loss_fn=None) -> dict:
        """One optimizer step over ``grad_accum_steps`` micro-batches (already on device), run
        eagerly: the step, its figures read in one host sync, then the optimizer step, or none
        where the loss or the gradient is not finite. ``loss_fn``: the loss to run (the engine's
        compiled one), else ``loss``."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        figures, td_abs = update_step(self, micro_batches, loss_fn)
        with record_function("learner.sync"):
            loss, td_mean, q_mean, grad_norm, _ = figures.tolist()
        # fp16: the scaler skips a step with non-finite gradients itself and lowers its scale.
        bad = "loss" if not math.isfinite(loss) else (
            "gradient" if not self.scaler.is_enabled() and not math.isfinite(grad_norm) else None)
        if bad:
            if self.scaler.is_enabled():
                # fp16: update_step's unscale_ showed the scaler the non-finite gradients, so
                # update() lowers the scale; update() without that record raises.
                self.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)
            return self._skipped(bad, td_abs)
        self.bad_steps = 0
        with record_function("learner.step"):
            self.scaler.step(self.optimizer)
            self.scaler.update()
        self.count_step()
        return self.figures(loss, td_mean, q_mean, grad_norm, td_abs)

    def launched(self, figures: list[float], td_abs: list) -> dict:
        """The report of an update step the engine launched without waiting for it (a CUDA
        graph's replay, which steps fused Adam itself and is counted at launch): ``figures`` are
        the previous launch's [loss, |TD| mean, Q mean, gradient norm, 1 if skipped], so a
        skipped step is reported one update late."""
        loss, td_mean, q_mean, grad_norm, bad = figures
        if bad:
            return self._skipped("the loss or gradient", td_abs)
        self.bad_steps = 0
        return self.figures(loss, td_mean, q_mean, grad_norm, td_abs)

    @staticmethod
    def figures(loss: float, td_mean: float, q_mean: float, grad_norm: float, td_abs: list) -> dict:
        """An update's report: its figures and each batch's |TD| per sample (the priorities)."""
        return {"loss": loss, "td_error": td_mean, "q_mean": q_mean, "grad_norm": grad_norm, "td_abs": td_abs,
                "skipped": False}

    def count_step(self) -> None:
        """An optimizer step was taken (or, graphed, launched): counted, the average moved, the
        target synced when due."""
        self.updates += 1
        if self.average is not None:
            self.step_average()
        if self.updates % self.cfg.target_update_interval == 0:
            self.sync_target()

    def step_average(self) -> None:
        """The average moves 1 - weight_average of the way to the online weights and BatchNorm
        statistics (one foreach lerp over all of them); the batch counts are copied. A graphed
        step that fused Adam skipped left the weights as they were, so the lerp is harmless."""
        with torch.no_grad():
            torch._foreach_lerp_(*self._lerped, 1.0 - self.cfg.weight_average)
            for a, o in zip(*self._copied):
                a.copy_(o)

    @property
    def policy(self) -> torch.nn.Module:
        """The network whose greedy actions are the agent's when it is judged: the average
        (weight_average), else the online network."""
        return self.average if self.average is not None else self.model

    def _skipped(self, what: str, td_abs: list) -> dict:
        """A step not taken for a non-finite ``what``: counted, BatchNorm's statistics repaired,
        and the run stopped after 100 in a row."""
        self.bad_steps += 1
        self._repair_batchnorm()
        if self.bad_steps >= 100:
            raise TrainingDiverged(f"{what} was NaN/inf for {self.bad_steps} updates in a row; "
                                   "lower --lr, or turn off --amp to rule out precision")
        return {"loss": float("nan"), "td_error": float("nan"), "td_abs": td_abs, "skipped": True}

    def _repair_batchnorm(self) -> None:
        """A NaN batch also poisons BatchNorm's running statistics in the training forward pass,
        though the optimizer step was skipped: take them back from the target net (last sync)."""
        online = dict(self.model.named_buffers())
        if all(torch.isfinite(b).all() for b in online.values() if b.is_floating_point()):
            return
        with torch.no_grad():
            for name, b in self.target.named_buffers():
                online[name].copy_(b)

    def is_finite(self) -> bool:
        """Every weight and BatchNorm statistic is finite: the model is fit to be saved."""
        # One host sync for all tensors: the trainer asks before every weight push.
        nets = (self.model,) if self.average is None else (self.model, self.average)
        return bool(torch.stack([torch.isfinite(t).all() for net in nets for t in (*net.parameters(), *net.buffers())
                                 if t.is_floating_point()]).all())

    def require_finite(self) -> None:
        """Weights that are not finite reach neither the collectors nor a checkpoint file: the run
        stops, and its last checkpoint keeps the last finite ones. Every step with a non-finite
        loss or gradient is skipped, so this guards what that cannot see (an overflowing optimizer
        step, a poisoned BatchNorm statistic), asked wherever weights leave the learner."""
        if not self.is_finite():
            raise TrainingDiverged(f"the weights or BatchNorm statistics are not finite after update "
                                   f"{self.updates:,}; neither published nor saved")

    def sync_target(self) -> None:
        self.target.load_state_dict(self.model.state_dict())

    def set_lr(self, lr: float) -> None:
        """The learning rate of the next optimizer steps (``lr_schedule``); Adam's moments stay.
        A graphed update reads it from its tensor, written in place."""
        for group in self.optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(lr)
            else:
                group["lr"] = lr

    def state_dict(self) -> dict:
        # The graph's learning-rate tensor and capturable flag are this process's; the file
        # holds what an eager learner on any device loads.
        optimizer = self.optimizer.state_dict()
        for group in optimizer["param_groups"]:
            group.update(lr=float(group["lr"]), capturable=False)
        state = {"model": self.model.state_dict(), "target": self.target.state_dict(),
                 "optimizer": optimizer, "scaler": self.scaler.state_dict(), "updates": self.updates}
        if self.average is not None:
            state["average"] = self.average.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.target.load_state_dict(state["target"])
        if self.average is not None:
            # a run that averaged none yet (--weight-average added on resume) starts from the online weights
            self.average.load_state_dict(state.get("average") or state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        # Adam's restored param groups carry the checkpoint's settings; the run's own win, so a resume
        # with --lr or --adam-eps (which the run log names as a change) trains with what it names.
        # The checkpoint's fused flag (older runs: unfused) yields to ours as well.
        for group in self.optimizer.param_groups:
            group.update(lr=self.cfg.lr, eps=self.cfg.adam_eps, fused=self.fused or None)
        # A run without fp16 (CPU bf16, fp32) saved a disabled scaler's {}: an fp16 run resumed from
        # it (a CPU run moved to CUDA) starts its scaler at the initial scale, as a new run does.
        if state["scaler"] or not self.scaler.is_enabled():
            self.scaler.load_state_dict(state["scaler"])
        self.updates = int(state["updates"])


def update_step(learner: Learner, batches: list[dict], loss_fn=None,
                skip_on_device: bool = False) -> tuple[torch.Tensor, list]:
    """One update's arithmetic, written once, with no host sync: the loss of each batch (the
    rule's, ``Learner.loss``, or ``loss_fn``: the same compiled) and its backward, summed over the
    micro-batches; the gradient unscaled (fp16) and clipped to ``max_grad_norm`` (or only measured,
    at 0); the figures. The eager update calls it, and the engine's whole-update CUDA graph
    captures it (``skip_on_device``).

    Returns the figures [loss, |TD| mean, Q mean, gradient norm, 1 where the loss or the norm is
    not finite] on the device and each batch's |TD| per sample. The gradient's norm joins the
    figures because bf16 and fp32 have no GradScaler to catch a non-finite gradient (the loss
    can be finite), and clip_grad_norm_ would turn inf into NaN and Adam write it into every
    weight. ``skip_on_device``: the optimizer steps here, fused Adam holding every weight, moment
    and step count where the figures say not finite (a captured graph cannot ask the host);
    else the caller reads the figures and steps, or skips. The gradients are not zeroed: the
    caller does, or (captured) the backward writes them, as it allocated them in the capture."""
    opt, scaler = learner.optimizer, learner.scaler
    loss_fn = loss_fn or learner.loss
    losses, tds, qs = [], [], []
    for b in batches:
        loss, td, q = loss_fn(b)
        with record_function("learner.backward"):
            scaler.scale(loss / len(batches)).backward()
        losses.append(loss.detach())
        tds.append(td.abs())
        qs.append(q)
    # Unscaled first (fp16), so the scaler records its inf check before the step or the skip.
    with record_function("learner.clip"):
        scaler.unscale_(opt)
        params = [p for p in learner.model.parameters() if p.grad is not None]
        if learner.cfg.max_grad_norm > 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(params, learner.cfg.max_grad_norm)
        else:
            grad_norm = torch.nn.utils.get_total_norm([p.grad for p in params])
    loss = torch.stack(losses).mean()
    bad = ~(torch.isfinite(loss) & torch.isfinite(grad_norm))
    figures = torch.stack([loss.float(), torch.cat(tds).mean().float(), torch.cat(qs).mean().float(),
                           grad_norm.float(), bad.float()])
    if skip_on_device:
        with record_function("learner.step"):
            opt.found_inf.copy_(bad.float())  # fused Adam steps nothing where this is 1
            opt.step()
    return figures, tds
