"""Flattening a model's parameters *and* floating buffers (BatchNorm running stats) into one
float32 vector, so weights can be published through one shared-memory block without pickling."""
from __future__ import annotations

import torch
from torch import nn


def _tensors(model: nn.Module) -> list[torch.Tensor]:
    # Integer buffers (num_batches_tracked) matter only for training, never for acting.
    state = model.state_dict(keep_vars=True)
    return [t for t in state.values() if t.is_floating_point()]


def flat_size(model: nn.Module) -> int:
    return sum(t.numel() for t in _tensors(model))


@torch.no_grad()
def write_flat(model: nn.Module, out: torch.Tensor) -> None:
    """Copy the model's float state into ``out`` (a 1-D float32 tensor, e.g. over shared memory)."""
    offset = 0
    for t in _tensors(model):
        n = t.numel()
        out[offset:offset + n].copy_(t.detach().reshape(-1))
        offset += n


@torch.no_grad()
def read_flat(model: nn.Module, src: torch.Tensor) -> None:
    """Load a vector written by ``write_flat`` into a model of the same architecture."""
    offset = 0
    for t in _tensors(model):
        n = t.numel()
        t.copy_(src[offset:offset + n].view_as(t))
        offset += n
