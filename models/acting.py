"""The network a collector acts with on a CPU where bf16 pays: a folded copy of a pixel DQN in
eval mode. Each BatchNorm is folded into the convolution before it and the 1/255 input scaling
into the first convolution's weights; the convolutions and the head's hidden layers hold bf16
weights, the head's output layers fp32.

Why a copy rather than autocast over the trained network: at a collector's batch of 8 frame
stacks the forward is mostly per-op overhead and weight traffic, not arithmetic. Autocast
re-casts every weight to bf16 at every call, BatchNorm and the scaling are ops of their own,
and the hidden layer's fp32 weights (3136 x 512 in the Nature stack, 6.4 MB) are read from
memory at every step. Folded and pre-cast, one acting forward of the BatchNorm DQN took
0.58-0.65x the time of the autocast one (batch 8, one thread, AMD EPYC Zen 4 family 25 model 17;
the Impala network 0.83x). BatchNorm in eval mode is an affine map per channel, so folding it is
exact arithmetic (torch's ``fuse_conv_bn_weights``); the output layers stay fp32 so that
Q-values within bf16's ~0.4% of each other do not round into ties that argmax breaks toward
the first action.

The copy has tensors of its own: ``refresh`` recomputes them from the trained network and copies
them into the copy's tensors in place (0.3-1.8 ms), and the collector calls it whenever it loads new weights
(``Rollout.weights_loaded``).
"""
from __future__ import annotations

import copy

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_weights

from .dqn import head_atoms, midpoint_taus


class _Cast(nn.Module):
    """A linear layer fed in its weights' dtype: bf16 for a hidden layer, fp32 for an output layer."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.linear = linear

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.to(self.linear.weight.dtype))


class Bf16ActingNet(nn.Module):
    """Q-values [B, n_actions] of uint8 frame stacks (channels_last, as the collector feeds
    them) from a folded bf16 copy of ``model``, a ``models.dqn`` pixel DQN whose first layer is
    a convolution and whose every BatchNorm follows a convolution."""

    def __init__(self, model: nn.Module):
        super().__init__()
        features, head = copy.deepcopy(model.features), copy.deepcopy(model.head)
        if not isinstance(features[0], nn.Conv2d):
            raise TypeError(f"{type(model).__name__}: its first layer must be a convolution to take the input scaling")
        # (folded conv, the source's conv, its BatchNorm or None, whether it takes the 1/255)
        self._convs: list[tuple[nn.Conv2d, nn.Conv2d, nn.BatchNorm2d | None, bool]] = []
        sources = dict(model.features.named_modules())
        for name, seq in list(features.named_modules()):
            if isinstance(seq, nn.Sequential):
                self._fold(seq, sources[name], top=seq is features)
        left = [type(m).__name__ for m in features.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
        if left:
            raise TypeError(f"{type(model).__name__}: a BatchNorm that follows no convolution cannot be folded ({left})")
        self.features = features.to(torch.bfloat16).to(memory_format=torch.channels_last)
        # Each stream of the head (Linear, ReLU, Linear): the hidden layer bf16, the output fp32.
        self._linears: list[tuple[nn.Linear, nn.Linear]] = []
        src_head = dict(model.head.named_modules())
        for name, stream in list(head.named_children()):
            linears = [i for i, m in enumerate(stream) if isinstance(m, nn.Linear)]
            for i in linears:
                self._linears.append((stream[i], src_head[f"{name}.{i}"]))
                stream[i] = _Cast(stream[i].to(torch.float32 if i == linears[-1] else torch.bfloat16))
        self.head = head
        # IQN: the acting fractions are fixed, so their embedding is a function of the weights,
        # computed with them in refresh: [1, N, D] in bf16. (A list: the source's embedding is
        # read, not made a submodule of this copy.)
        tau = getattr(model, "tau_embedding", None)
        self._tau_source = [tau] if tau is not None else []
        self.phi = None if tau is None else torch.zeros(1, model.iqn_taus, tau.linear.out_features, dtype=torch.bfloat16)
        self.requires_grad_(False)
        self.refresh()

    def _fold(self, seq: nn.Sequential, src: nn.Sequential, top: bool) -> None:
        """In ``seq`` (a copy of ``src``), each Conv2d and the BatchNorm2d after it become one
        convolution with a bias, and an Identity."""
        for i, conv in enumerate(seq):
            if not isinstance(conv, nn.Conv2d):
                continue
            bn = src[i + 1] if i + 1 < len(seq) and isinstance(src[i + 1], nn.BatchNorm2d) else None
            folded = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride, conv.padding,
                               conv.dilation, conv.groups, bias=True, padding_mode=conv.padding_mode)
            seq[i] = folded
            if bn is not None:
                seq[i + 1] = nn.Identity()
            self._convs.append((folded, src[i], bn, top and i == 0))

    @torch.no_grad()
    def refresh(self) -> None:
        """Recompute the copy's weights from the trained network's current ones."""
        for folded, conv, bn, first in self._convs:
            w = conv.weight
            b = conv.bias if conv.bias is not None else torch.zeros(conv.out_channels)
            if bn is not None:
                w, b = fuse_conv_bn_weights(w, b, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
            if first:
                w = w * (1.0 / 255.0)  # conv(x / 255) = (W / 255) * x + b, zero padding included
            folded.weight.copy_(w)
            folded.bias.copy_(b)
        for mine, theirs in self._linears:
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
        if self.phi is not None:
            self.phi.copy_(self._tau_source[0](midpoint_taus(self.phi.shape[1])))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.features(obs.to(torch.bfloat16)), 1)  # 0..255 are exact in bf16
        return (self.head(x) if self.phi is None else head_atoms(self.head, x, self.phi)).mean(2)
