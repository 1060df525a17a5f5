"""Atomic checkpoints: written to a temp file, fsynced, then renamed over the old one, so a
crash, a full disk or a kill mid-write leaves the previous checkpoint intact."""
from __future__ import annotations

import pickle
import random
from pathlib import Path

import torch

from models import NetworkSpec

from ..errors import UserError
from .atomic import atomic_write
from .file_keys import current_keys
from .files import CHECKPOINT_NAME, WEIGHTS_BEST_FIRST


class CheckpointError(UserError, RuntimeError):
    """A checkpoint that cannot be used: missing, damaged or of another run; the message names the
    file, the problem and the fix."""


# The settings that decide what network the weights fit: kept in every checkpoint's meta (with the
# frame stack and the actions: NetworkSpec.meta, which --eval builds the network from), checked by
# a resume against the run's own.
NETWORK_KEYS = ("model_arch", "dueling", "quantiles", "iqn_taus")


def training_state(cfg, n_actions: int, learner: dict, counters: dict, sampler_rng: dict,
                   best: dict | None = None, shift_rng: dict | None = None) -> dict:
    """Everything --resume and --eval need, in the layout ``load`` checks: what the weights fit
    (meta), the config, the learner (weights, target, optimizer), the run's counters and every
    random state (torch's CPU and CUDA generators, Python's, the replay sampler's and its
    --augment-shift's), so a resumed run draws what it would have."""
    state = {
        "meta": {"env": cfg.env, **NetworkSpec.of(cfg.learner, cfg.env_options.frame_stack, n_actions).meta,
                 "version": 1},
        "config": cfg.flat(),
        "learner": learner,
        "counters": counters,
        "rng": {"torch": torch.get_rng_state(), "python": random.getstate(), "sampler": sampler_rng,
                "shift": shift_rng, "cuda": cuda_rng_state()},
    }
    if best is not None:
        state["best"] = best
    return state


def policy_weights(learner: dict) -> dict:
    """The weights a saved learner plays when judged: its Polyak average where the run kept one
    (--weight-average), else its online network."""
    return learner.get("average") or learner["model"]


def cuda_rng_state() -> list[torch.Tensor] | None:
    """The CUDA generators' states (IQN's fractions and the distributional bootstrap's draws come
    from them on a GPU), where this process has used CUDA; None otherwise: reading them would
    start a CUDA context in a run that trains on the CPU."""
    return torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None


def restore_rng(state: dict) -> dict:
    """Set torch's (CPU and, where saved and a GPU is here, CUDA) and Python's random states from
    a checkpoint; returns the replay's (``Replay.set_rng_state``: the sampler's, the shift's)."""
    rng = state["rng"]
    torch.set_rng_state(rng["torch"])
    random.setstate(rng["python"])
    cuda = rng.get("cuda")  # None: saved on the CPU, or before checkpoints kept it
    if cuda and torch.cuda.is_available():
        # applied when CUDA starts (torch defers it); a machine with fewer GPUs restores those it has
        for device, generator in enumerate(cuda[:torch.cuda.device_count()]):
            torch.cuda.set_rng_state(generator, device)
    return {"sampler": rng["sampler"], "shift": rng.get("shift")}


def save(path: str | Path, state: dict) -> None:
    path = Path(path)
    try:
        with atomic_write(path) as f:
            torch.save(state, f)
    except (OSError, RuntimeError) as e:
        # torch.save's zip writer turns a failed write (ENOSPC, EFBIG) into a RuntimeError while
        # closing the archive; the OSError behind it is the message worth showing.
        cause = e
        while not isinstance(cause, OSError) and cause.__context__ is not None:
            cause = cause.__context__
        if not isinstance(cause, OSError):
            raise
        raise CheckpointError(f"could not write checkpoint {path}: {cause.strerror or cause}; the previous checkpoint "
                              f"is untouched. Free disk space or choose a writable --run-dir.") from None


def checkpoint_file(path: str | Path) -> Path:
    """The file a checkpoint argument names: a .pt file, or a run folder's checkpoint.pt."""
    path = Path(path)
    return path / CHECKPOINT_NAME if path.is_dir() else path


def kept_weights(path: str | Path) -> Path:
    """The weights a checkpoint argument means to play: a .pt file itself; in a run folder the
    weights the run kept, best first (``WEIGHTS_BEST_FIRST``: best_eval.pt, else best.pt, else
    checkpoint.pt, the last weights)."""
    path = Path(path)
    if not path.is_dir():
        return path
    return next((path / n for n in WEIGHTS_BEST_FIRST if (path / n).is_file()), path / CHECKPOINT_NAME)


RESUME_FIX = "use an earlier checkpoint or start a new run without --resume"


def load(path: str | Path, env_id: str | None = None, n_actions: int | None = None, frame_stack: int | None = None,
         fix: str = RESUME_FIX) -> dict:
    """Load and check a checkpoint; every failure names the file and what is wrong (``fix``: what
    to do about a damaged file, for the reader at hand: a resume's by default)."""
    path = checkpoint_file(path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {path} does not exist; pass a .pt file or a run directory that has one")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (EOFError, RuntimeError, pickle.UnpicklingError, ValueError, OSError) as e:
        cause = " ".join(str(e).split())  # whole, on one line
        raise CheckpointError(f"checkpoint {path} is truncated or corrupt ({type(e).__name__}: {cause}); {fix}") from None
    if not isinstance(state, dict) or "meta" not in state or "learner" not in state:
        raise CheckpointError(f"checkpoint {path} is not a checkpoint of this project (no 'meta'/'learner' entries)")
    # a checkpoint of an earlier version reads as one of today's (the weights hold no such keys)
    state = {k: v if k == "learner" else current_keys(v) for k, v in state.items()}
    meta = state["meta"]
    for key, want in (("env", env_id), ("n_actions", n_actions), ("frame_stack", frame_stack)):
        if want is not None and meta.get(key) != want:
            raise CheckpointError(f"checkpoint {path} was trained with {key}={meta.get(key)!r} but this run has "
                                  f"{key}={want!r}; use a checkpoint of the same game and settings")
    return state
