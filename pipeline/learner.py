"""The DQN learner: n-step Double-DQN targets, Huber loss, mixed precision, gradient
accumulation and target-network syncs. One code path for CPU and CUDA: only the autocast dtype,
the GradScaler's ``enabled`` flag and the memory format differ."""
from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn.functional as F

from config_optimized import LearnerConfig
from models import build_model


class TrainingDiverged(RuntimeError):
    pass


def amp_dtype_for(device: torch.device, amp: bool, requested: str = "auto") -> torch.dtype | None:
    if not amp:
        return None
    if requested == "fp16" or (requested == "auto" and device.type == "cuda"):
        return torch.float16
    return torch.bfloat16


def configure_backends(device: torch.device) -> None:
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed 84x84 shapes: pick the fastest conv once
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


class Learner:
    def __init__(self, cfg: LearnerConfig, in_channels: int, n_actions: int, device: torch.device):
        """Only the learner's part of the config: the network, optimizer, precision and targets."""
        self.cfg, self.device = cfg, device
        configure_backends(device)
        self.model = build_model(cfg.model_arch, in_channels, n_actions, cfg.dueling).to(device)
        self.memory_format = torch.channels_last if cfg.channels_last else torch.contiguous_format
        self.model = self.model.to(memory_format=self.memory_format)
        self.target = copy.deepcopy(self.model).eval()  # eval forever: BatchNorm running stats
        for p in self.target.parameters():
            p.requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, eps=cfg.adam_eps)
        self.amp_dtype = amp_dtype_for(device, cfg.amp, cfg.amp_dtype)
        # GradScaler only for fp16; bf16 has fp32's exponent range and needs no loss scaling.
        self.scaler = torch.amp.GradScaler(device.type if device.type == "cuda" else "cpu",
                                           enabled=self.amp_dtype == torch.float16)
        self.net = torch.compile(self.model) if cfg.compile else self.model
        self.target_net = torch.compile(self.target) if cfg.compile else self.target
        self.updates = 0
        self.bad_steps = 0

    def _autocast(self):
        return torch.autocast(self.device.type, dtype=self.amp_dtype or torch.float32, enabled=self.amp_dtype is not None)

    def to_device(self, batch: dict) -> dict:
        """numpy batch -> tensors on the learner device, every device through the same move
        (pinned + non_blocking where the device is CUDA).

        Runs in the prefetch thread, so it does no parallel torch work: a torch copy here would
        start a second OpenMP team beside the learner's and stall both on a 2-core machine. The
        channels_last layout is therefore made by a numpy transpose, which torch then views."""
        pin = self.device.type == "cuda"
        out = {}
        for k, v in batch.items():
            if v is None or k in ("stream", "pos"):
                out[k] = v
                continue
            if k in ("obs", "next_obs") and self.memory_format is torch.channels_last:
                t = torch.from_numpy(np.ascontiguousarray(v.transpose(0, 2, 3, 1))).permute(0, 3, 1, 2)
            else:
                t = torch.from_numpy(v)
            if pin:
                t = t.pin_memory()
            out[k] = t.to(self.device, non_blocking=pin)
        return out

    def td_targets(self, b: dict) -> torch.Tensor:
        with torch.no_grad(), self._autocast():
            q_next_target = self.target_net(b["next_obs"]).float()
            if self.cfg.double_dqn:
                # Online net in eval mode: s' must not move BatchNorm's running statistics.
                self.net.eval()
                a_star = self.net(b["next_obs"]).argmax(1, keepdim=True)
                self.net.train()
                q_next = q_next_target.gather(1, a_star).squeeze(1)
            else:
                q_next = q_next_target.max(1).values
        return b["return"] + b["discount"] * q_next

    def loss(self, b: dict):
        target = self.td_targets(b)
        with self._autocast():
            q = self.net(b["obs"]).float().gather(1, b["action"].unsqueeze(1)).squeeze(1)
        td = target - q
        per_sample = F.smooth_l1_loss(q, target, reduction="none")
        if b.get("weights") is not None:
            per_sample = per_sample * b["weights"]
        return per_sample.mean(), td.detach(), q.detach()

    def update(self, micro_batches: list[dict]) -> dict:
        """One optimizer step over ``grad_accum_steps`` micro-batches (already on device)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        losses, tds, qs = [], [], []
        for b in micro_batches:
            loss, td, q = self.loss(b)
            self.scaler.scale(loss / len(micro_batches)).backward()
            losses.append(loss.detach())
            tds.append(td)
            qs.append(q)
        # One host sync per update for all three figures (the NaN check needs the loss here).
        loss, td_mean, q_mean = torch.stack([torch.stack(losses).mean(), torch.cat(tds).abs().mean().float(),
                                             torch.cat(qs).mean().float()]).tolist()
        if not math.isfinite(loss):
            self.bad_steps += 1
            if self.scaler.is_enabled():
                # fp16: let the scaler see the non-finite gradients (unscale_ records them), so
                # update() lowers the scale; update() without that record raises.
                self.scaler.unscale_(self.optimizer)
                self.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)
            self._repair_batchnorm()
            if self.bad_steps >= 100:
                raise TrainingDiverged(f"loss was NaN/inf for {self.bad_steps} updates in a row; "
                                       "lower --lr, or turn off --amp to rule out precision")
            return {"loss": float("nan"), "td_error": float("nan"), "td_abs": [t.abs() for t in tds], "skipped": True}
        self.bad_steps = 0
        if self.cfg.max_grad_norm > 0:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.updates += 1
        if self.updates % self.cfg.target_update_interval == 0:
            self.sync_target()
        return {"loss": loss, "td_error": td_mean, "q_mean": q_mean, "td_abs": [t.abs() for t in tds], "skipped": False}

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
        return all(bool(torch.isfinite(t).all()) for t in (*self.model.parameters(), *self.model.buffers())
                   if t.is_floating_point())

    def sync_target(self) -> None:
        self.target.load_state_dict(self.model.state_dict())

    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "target": self.target.state_dict(),
                "optimizer": self.optimizer.state_dict(), "scaler": self.scaler.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        self.updates = int(state["updates"])
