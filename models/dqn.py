"""Q-networks for pixel DQN: the BatchNorm conv DQN (the default) and the plain Nature DQN baseline.

Both take uint8 frame stacks [B, C, 84, 84] and scale to [0, 1] inside the model, so the replay,
the rings and the host-to-device copy all move 1 byte per pixel instead of 4.

BatchNorm in a DQN has three traps, and this is how the project handles each:

1. Acting must not use batch statistics: a collector acts on a batch of 1..M correlated frames.
   Collectors run in ``eval()`` mode on the running statistics, which they receive with the
   weights (``models.weights`` ships buffers too).
2. The targets must be normalized as Q(s) is trained. The loss trains Q(s) in train mode, each
   batch normalized on its own statistics; a target read on the running statistics (eval mode)
   differs from it by a small gap that bootstrapping multiplies, and on Pong under sticky actions
   that gap drove the learned Q ever more pessimistic while the play improved
   (docs/benchmarks.md, "Pong under sticky actions"). ``bn_targets`` chooses: ``batch`` runs the
   target network and Double DQN's argmax on s' in train mode, each s' batch normalized on its
   own statistics; ``running`` runs both in eval mode (the learner's Double-DQN forward then goes
   through an eval-mode copy of the online module tree over the same tensors, so s' does not move
   the running statistics).
3. Tiny batches make batch statistics noise. The config refuses batch_size < 2 (BatchNorm
   cannot train on one sample) and warns below 16; with gradient accumulation each
   micro-batch is normalised on its own statistics ("ghost batch norm"), which is why the
   accumulation equivalence test uses the plain Nature DQN.
"""
from __future__ import annotations

import torch
from torch import nn


def _conv_out_hw(size: int) -> int:
    for k, s in ((8, 4), (4, 2), (3, 1)):
        size = (size - k) // s + 1
    return size


class _QHead(nn.Module):
    """Linear head, optionally dueling (Wang et al. 2016): Q = V + A - mean(A). It outputs
    ``n_atoms`` values per action: the Q-value (1), or the quantiles of the return (QR-DQN)."""

    def __init__(self, in_features: int, n_actions: int, hidden: int, dueling: bool, n_atoms: int = 1):
        super().__init__()
        self.dueling, self.n_actions, self.n_atoms = dueling, n_actions, n_atoms
        if dueling:
            self.value = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, n_atoms))
            self.advantage = nn.Sequential(
                nn.Linear(in_features, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, n_actions * n_atoms)
            )
        else:
            self.q = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(inplace=True),
                                   nn.Linear(hidden, n_actions * n_atoms))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[B, n_actions, n_atoms]."""
        if self.dueling:
            adv = self.advantage(x).view(-1, self.n_actions, self.n_atoms)
            return self.value(x).view(-1, 1, self.n_atoms) + adv - adv.mean(dim=1, keepdim=True)
        return self.q(x).view(-1, self.n_actions, self.n_atoms)


class _PixelDQN(nn.Module):
    """``forward`` gives Q-values [B, n_actions], what acting and evaluation need; ``atoms`` gives
    what the learner trains: [B, n_actions, 1] Q-values, or [B, n_actions, quantiles] quantiles of
    the return whose mean is the Q-value (QR-DQN, Dabney et al. 2018)."""

    def __init__(self, features: nn.Sequential, in_channels: int, n_actions: int, hidden: int, dueling: bool,
                 frame_size: int, quantiles: int = 0):
        super().__init__()
        self.in_channels = in_channels
        self.n_actions = n_actions
        self.quantiles = quantiles
        self.features = features
        hw = _conv_out_hw(frame_size)
        self.head = _QHead(64 * hw * hw, n_actions, hidden, dueling, max(1, quantiles))

    def atoms(self, obs: torch.Tensor) -> torch.Tensor:
        # uint8 in, scaled here: one fused multiply, and under autocast the convs run in bf16/fp16.
        x = obs.float().mul_(1.0 / 255.0) if obs.dtype == torch.uint8 else obs
        x = self.features(x)
        return self.head(torch.flatten(x, 1))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.atoms(obs).mean(2)


class BatchNormDQN(_PixelDQN):
    """Nature conv stack with BatchNorm, no conv bias (BatchNorm's shift replaces it), Kaiming init."""

    def __init__(self, in_channels: int, n_actions: int, hidden: int = 512, dueling: bool = False,
                 frame_size: int = 84, quantiles: int = 0):
        features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 4, stride=2, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, stride=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        )
        super().__init__(features, in_channels, n_actions, hidden, dueling, frame_size, quantiles)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)


class NatureDQN(_PixelDQN):
    """Mnih et al. 2015, unchanged (PyTorch default init, conv bias, no BatchNorm): the benchmark baseline."""

    def __init__(self, in_channels: int, n_actions: int, hidden: int = 512, dueling: bool = False,
                 frame_size: int = 84, quantiles: int = 0):
        features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(inplace=True),
        )
        super().__init__(features, in_channels, n_actions, hidden, dueling, frame_size, quantiles)


MODELS = {"batchnorm": BatchNormDQN, "nature": NatureDQN}


def build_model(arch: str, in_channels: int, n_actions: int, dueling: bool = False, quantiles: int = 0) -> nn.Module:
    """Build a Q-network by name ('batchnorm' or 'nature'); ``quantiles`` > 0 makes it a QR-DQN."""
    if arch not in MODELS:
        raise ValueError(f"model_arch={arch!r} is not a model; choose one of {sorted(MODELS)}")
    return MODELS[arch](in_channels, n_actions, dueling=dueling, quantiles=quantiles)
