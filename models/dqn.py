"""Q-networks for pixel DQN: the BatchNorm conv DQN (the default), Impala-style residual networks
with BatchNorm (full and strided), and the plain Nature DQN baseline.

All take uint8 frame stacks [B, C, 84, 84] and scale to [0, 1] inside the model, so the replay,
the rings and the host-to-device copy all move 1 byte per pixel instead of 4.

BatchNorm in a DQN has three traps, and this is how the project handles each:

1. Acting must not use batch statistics: a collector acts on a batch of 1..M correlated frames.
   Collectors run in ``eval()`` mode on the running statistics, which they receive with the
   weights (``models.weights`` ships buffers too).
2. The targets must be normalized as Q(s) is trained. The loss trains Q(s) in train mode, each
   batch normalized on its own statistics; a target read on the running statistics (eval mode)
   differs from it by a small gap that bootstrapping multiplies, and on Pong under sticky actions
   that gap drove the learned Q ever more pessimistic while the play improved
   (docs/notebook.md, "Pong under sticky actions"). ``bn_targets`` chooses: ``batch`` runs the
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

import math
from dataclasses import dataclass

import torch
from torch import nn

# IQN's cosine embedding of a quantile fraction: cos(pi i tau) for i = 0..63 (Dabney et al.
# 2018b, eq. 4, n = 64), mapped to the conv features' size by a linear layer and a ReLU.
TAU_EMBEDDING = 64


def _feature_size(features: nn.Module, in_channels: int, frame_size: int) -> int:
    """Features per frame stack: one forward of a blank stack (eval mode: BatchNorm's running
    statistics stay as they are)."""
    was = features.training
    with torch.no_grad():
        n = features.eval()(torch.zeros(1, in_channels, frame_size, frame_size)).numel()
    features.train(was)
    return n


def _kaiming_init(model: nn.Module) -> None:
    """Kaiming-normal weights for the ReLU networks' convs and linears, zero biases; BatchNorm
    keeps its own init (a residual block's last scale stays zero)."""
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)


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


def midpoint_taus(n: int, device=None) -> torch.Tensor:
    """The midpoints (2i + 1) / 2n as fractions, [1, n]: QR-DQN's fixed quantile fractions, and
    IQN's for acting and evaluation. The IQN paper samples those; fixed ones make the greedy policy
    a function of the weights alone, so a collector, an evaluation and Double DQN's argmax read
    the same Q."""
    return ((torch.arange(n, device=device, dtype=torch.float32) + 0.5) / n).unsqueeze(0)


def head_atoms(head: nn.Module, x: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """IQN's head: flat features [B, D] times each fraction's embedding ``phi`` [B or 1, N, D],
    one head row per (sample, fraction) -> atoms [B, n_actions, N]."""
    b, n = x.shape[0], phi.shape[1]
    rows = head((x.unsqueeze(1) * phi).reshape(b * n, -1))  # [B * N, A, 1]
    return rows.view(b, n, -1).transpose(1, 2)


class _TauEmbedding(nn.Module):
    """phi(tau) = ReLU(sum_i cos(pi i tau) w_ij + b_j), IQN's embedding of quantile fractions (eq. 4)."""

    def __init__(self, features: int):
        super().__init__()
        self.register_buffer("freq", torch.arange(TAU_EMBEDDING, dtype=torch.float32) * math.pi, persistent=False)
        self.linear = nn.Linear(TAU_EMBEDDING, features)

    def forward(self, taus: torch.Tensor) -> torch.Tensor:
        """[B, N] fractions -> [B, N, features]."""
        return torch.relu(self.linear(torch.cos(taus.unsqueeze(-1) * self.freq)))


class _PixelDQN(nn.Module):
    """``forward`` gives Q-values [B, n_actions], what acting and evaluation need; ``atoms`` gives
    what the learner trains: [B, n_actions, 1] Q-values, or [B, n_actions, K] quantiles of the
    return whose mean is the Q-value: QR-DQN's at fixed fractions (``quantiles``, Dabney et al.
    2018a), or IQN's at the fractions ``taus`` it is given (``iqn_taus``, Dabney et al. 2018b: the
    conv features times each fraction's embedding, through the head; without ``taus``, the
    ``iqn_taus`` fixed midpoints)."""

    def __init__(self, features: nn.Sequential, in_channels: int, n_actions: int, hidden: int, dueling: bool,
                 frame_size: int, quantiles: int = 0, iqn_taus: int = 0):
        super().__init__()
        if quantiles and iqn_taus:
            raise ValueError("quantiles and iqn_taus are two rules' heads; give one of them")
        self.in_channels = in_channels
        self.n_actions = n_actions
        self.quantiles = quantiles
        self.iqn_taus = iqn_taus
        self.features = features
        n_features = _feature_size(features, in_channels, frame_size)
        self.head = _QHead(n_features, n_actions, hidden, dueling, max(1, quantiles))
        self.tau_embedding = _TauEmbedding(n_features) if iqn_taus else None

    @staticmethod
    def _scaled(obs: torch.Tensor) -> torch.Tensor:
        # uint8 in, scaled here: one fused multiply, and under autocast the convs run in bf16/fp16.
        return obs.float().mul_(1.0 / 255.0) if obs.dtype == torch.uint8 else obs

    def atoms(self, obs: torch.Tensor, taus: torch.Tensor | None = None) -> torch.Tensor:
        x = torch.flatten(self.features(self._scaled(obs)), 1)
        if self.tau_embedding is None:
            return self.head(x)
        if taus is None:
            taus = midpoint_taus(self.iqn_taus, x.device)
        return head_atoms(self.head, x, self.tau_embedding(taus))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.atoms(obs).mean(2)


class BatchNormDQN(_PixelDQN):
    """Nature conv stack with BatchNorm, no conv bias (BatchNorm's shift replaces it), Kaiming init."""

    def __init__(self, in_channels: int, n_actions: int, hidden: int = 512, dueling: bool = False,
                 frame_size: int = 84, quantiles: int = 0, iqn_taus: int = 0):
        features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4, bias=False), nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 4, stride=2, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, stride=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
        )
        super().__init__(features, in_channels, n_actions, hidden, dueling, frame_size, quantiles, iqn_taus)
        _kaiming_init(self)


class NatureDQN(_PixelDQN):
    """Mnih et al. 2015, unchanged (PyTorch default init, conv bias, no BatchNorm): the benchmark baseline."""

    def __init__(self, in_channels: int, n_actions: int, hidden: int = 512, dueling: bool = False,
                 frame_size: int = 84, quantiles: int = 0, iqn_taus: int = 0):
        features = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4), nn.ReLU(inplace=True),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(inplace=True),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(inplace=True),
        )
        super().__init__(features, in_channels, n_actions, hidden, dueling, frame_size, quantiles, iqn_taus)


class _Residual(nn.Module):
    """x + BN(conv(ReLU(BN(conv(ReLU(x)))))): Impala's residual block with BatchNorm after each
    conv. The last BatchNorm starts at zero scale, so each block starts as the identity and the
    stack trains like a shallow one at first (Goyal et al. 2017)."""

    def __init__(self, channels: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.ReLU(), nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels),
            nn.ReLU(inplace=True), nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels))
        nn.init.zeros_(self.body[-1].weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


def _impala_stack(c_in: int, c_out: int, stride: int) -> list[nn.Module]:
    """conv 3x3 (stride ``stride``), BatchNorm, max-pool 3x3 stride 2, two residual blocks."""
    return [nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(c_out),
            nn.MaxPool2d(3, stride=2, padding=1), _Residual(c_out), _Residual(c_out)]


class ImpalaDQN(_PixelDQN):
    """The Impala network (Espeholt et al. 2018; Dopamine's "Impala" baselines), with BatchNorm
    after each conv, so still a BatchNorm conv DQN: three stacks of 16, 32, 32 channels, each a
    conv, a max-pool and two residual blocks, then the Q head. ``first_stride`` 2 is the strided
    variant: the first conv halves the 84x84 frame, which is where most of the network's work
    lies (5.8x the Nature stack's multiply-adds at stride 1, 1.55x at stride 2)."""

    def __init__(self, in_channels: int, n_actions: int, hidden: int = 512, dueling: bool = False,
                 frame_size: int = 84, quantiles: int = 0, iqn_taus: int = 0, first_stride: int = 1):
        layers: list[nn.Module] = []
        for c_in, c_out, stride in ((in_channels, 16, first_stride), (16, 32, 1), (32, 32, 1)):
            layers += _impala_stack(c_in, c_out, stride)
        features = nn.Sequential(*layers, nn.ReLU(inplace=True))
        super().__init__(features, in_channels, n_actions, hidden, dueling, frame_size, quantiles, iqn_taus)
        _kaiming_init(self)


class StridedImpalaDQN(ImpalaDQN):
    """ImpalaDQN whose first conv has stride 2."""

    def __init__(self, in_channels: int, n_actions: int, hidden: int = 512, dueling: bool = False,
                 frame_size: int = 84, quantiles: int = 0, iqn_taus: int = 0):
        super().__init__(in_channels, n_actions, hidden, dueling, frame_size, quantiles, iqn_taus, first_stride=2)


MODELS = {"batchnorm": BatchNormDQN, "nature": NatureDQN, "impala": ImpalaDQN, "impala-s": StridedImpalaDQN}
# The models with BatchNorm: they need at least 2 samples a batch, and train noisily below 16.
BATCHNORM_MODELS = ("batchnorm", "impala", "impala-s")


@dataclass(frozen=True)
class NetworkSpec:
    """What network a set of weights fits: the architecture (a key of MODELS), the frames it
    stacks (its input channels), the game's actions, a dueling head, and QR-DQN's quantiles or
    IQN's acting fractions (0: one value per action). Made in one place from a run's config
    (``of``) or a checkpoint's meta (``from_meta``), so the learner, the collectors, an
    evaluation and a benchmark build the same head."""
    arch: str
    frame_stack: int
    n_actions: int
    dueling: bool = False
    quantiles: int = 0
    iqn_taus: int = 0

    @classmethod
    def of(cls, learner, frame_stack: int, n_actions: int) -> NetworkSpec:
        """The network a run trains: ``learner`` is its ``LearnerConfig`` (model_arch, dueling,
        quantiles, iqn_taus), ``frame_stack`` its env options', ``n_actions`` its game's."""
        return cls(learner.model_arch, frame_stack, n_actions, learner.dueling, learner.quantiles, learner.iqn_taus)

    @classmethod
    def from_meta(cls, meta: dict) -> NetworkSpec:
        """The network a checkpoint's weights fit, from its ``meta`` (``meta`` below); those saved
        before QR-DQN or IQN have neither key, and neither head."""
        return cls(meta["model_arch"], meta["frame_stack"], meta["n_actions"], meta["dueling"],
                   meta.get("quantiles", 0), meta.get("iqn_taus", 0))

    @property
    def meta(self) -> dict:
        """The spec as a checkpoint's meta keeps it (the config's names: ``model_arch``)."""
        return {"model_arch": self.arch, "frame_stack": self.frame_stack, "n_actions": self.n_actions,
                "dueling": self.dueling, "quantiles": self.quantiles, "iqn_taus": self.iqn_taus}


def build_model(spec: NetworkSpec) -> nn.Module:
    """The Q-network ``spec`` names, freshly initialized (from torch's generator)."""
    if spec.arch not in MODELS:
        raise ValueError(f"model_arch={spec.arch!r} is not a model; choose one of {sorted(MODELS)}")
    return MODELS[spec.arch](spec.frame_stack, spec.n_actions, dueling=spec.dueling, quantiles=spec.quantiles,
                             iqn_taus=spec.iqn_taus)
