"""The engine that runs the learner's update step (``pipeline/learner.py``, ``update_step``) on
its device: which part of an update replays as a CUDA graph, and the whole-update graph itself
(its inputs, the capture, the replays, the figures on their way to the host). The step's
arithmetic is not here: the graph captures the very function an eager update calls."""
from __future__ import annotations

from typing import Callable

import torch

from config_optimized import LearnerConfig

# Updates run eagerly on a side stream before the whole-update graph is captured, as CUDA's
# capture asks (cuBLAS's workspaces, the compiled loss's backward and Adam's state exist by then).
GRAPH_WARMUP_UPDATES = 3


def graph_scope(device: torch.device, cfg: LearnerConfig, amp_dtype: torch.dtype | None) -> str | None:
    """What replays as a CUDA graph with --cuda-graphs on a CUDA learner: the whole update
    ("update": the loss, its backward, the gradient clip and Adam, one launch; bf16 and fp32), or,
    under fp16, the compiled loss and its backward ("loss": torch.compile's reduce-overhead, needs
    --compile), since fp16's GradScaler decides on the host whether to step. None elsewhere.

    At the preset's batch of 32 a CUDA update is launch-bound: on an H100 (16-core Xeon host) one
    uncompiled update took 6.9 ms for ~0.1 ms of arithmetic (docs/notebook.md, "On a GPU"); the
    compiled loss's graphs took it to 3.5 ms, the rest being the eager clip, Adam, zero_grad and
    the update's host sync, which the whole-update graph also folds in. Not with gradient
    accumulation: the captured backward writes each micro-batch's gradients where the last one's
    are, instead of summing them."""
    if not (cfg.cuda_graphs and device.type == "cuda" and cfg.grad_accum_steps == 1):
        return None
    if amp_dtype == torch.float16:
        return "loss" if cfg.compile else None
    return "update"


def compile_mode(scope: str | None) -> str | None:
    """torch.compile's mode for the loss: "reduce-overhead" (its own CUDA graphs) where only the
    loss is graphed, else the default (inside a whole-update graph, or on a CPU)."""
    return "reduce-overhead" if scope == "loss" else None


def first_line(e: Exception) -> str:
    """An exception as the one line a run's warning quotes: its type and its message's first line."""
    return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:300]}"


class _DoneEvent:
    """A CPU learner's stand-in for a CUDA event: its work is done when the call returns."""

    def record(self) -> None:
        pass

    def synchronize(self) -> None:
        pass


# The step a graph captures: the batch (the graph's inputs) -> (figures [5] on the device, |TD| per
# batch), stepping the optimizer itself (``update_step`` with skip_on_device).
Step = Callable[[dict], tuple[torch.Tensor, list[torch.Tensor]]]


class UpdateGraph:
    """The whole update as one CUDA graph (graph scope "update"): each batch is copied into the
    graph's inputs and the captured step (loss, backward, clip, Adam) replays with one launch.
    Nothing waits for the GPU at a launch: the step's figures travel to pinned host memory behind
    it, and ``figures`` gives the *previous* launch's (an epoch's means shift by one update), a
    skipped step (fused Adam's found_inf held every weight, moment and step count on the GPU)
    included, so a skip is reported one update late.

    The first GRAPH_WARMUP_UPDATES launches run the step eagerly, then the graph is captured and
    replayed for the launch that captured it. On a CPU (tests) every launch runs the step eagerly:
    the graph's Python is the CPU's. A capture that fails leaves ``error``; the learner then
    trains with its eager update."""

    def __init__(self, scope: str | None, device: torch.device):
        self.scope, self.device = scope, device
        # Set from the first launch on (the learner is then in graph mode): the graph's inputs,
        # fused Adam's found_inf, the host slots of the figures and their events; once captured,
        # the graph and its outputs.
        self.inputs: dict | None = None
        self.found_inf: torch.Tensor | None = None
        self.host: tuple[list, list] = ([], [])
        self.graph: torch.cuda.CUDAGraph | None = None
        self.outputs: tuple | None = None
        self.warmups_left = GRAPH_WARMUP_UPDATES
        self.launches = 0
        self.pending: int | None = None  # the host slot whose figures are still on their way
        self.reported: int | None = None  # the slot ``figures`` reads
        self.error: str | None = None  # why capturing failed

    @property
    def active(self) -> bool:
        """In graph mode: every update goes through ``launch``."""
        return self.inputs is not None

    @property
    def captured(self) -> bool:
        """Every update now replays as one captured CUDA graph."""
        return self.graph is not None

    def due(self, ready: bool) -> bool:
        """The learner should enter graph mode: the scope says so, it is not in it, it never
        failed to capture, and the learner is ``ready`` (no compile ahead, as far into the run as
        a compile would wait, so a short run trains as the CPU does)."""
        return self.scope == "update" and not self.active and self.error is None and ready

    def enter(self, b: dict, optimizer: torch.optim.Optimizer) -> None:
        """The graph's inputs (copies of the first batch's tensors), fused Adam's found_inf, and
        a learning rate held in a tensor, so lr_schedule's changes reach the replays."""
        self.inputs = {k: v.clone() for k, v in b.items() if isinstance(v, torch.Tensor)}
        self.found_inf = torch.zeros((), device=self.device)  # the shape of fused Adam's step counts
        optimizer.found_inf = self.found_inf
        for group in optimizer.param_groups:
            group["lr"] = torch.tensor(float(group["lr"]), device=self.device)
            group["capturable"] = self.device.type == "cuda"
        pin = self.device.type == "cuda"
        self.host = ([torch.zeros(5, pin_memory=pin) for _ in range(2)],
                     [torch.cuda.Event() if pin else _DoneEvent() for _ in range(2)])

    def leave(self, why: str, optimizer: torch.optim.Optimizer) -> None:
        """Out of graph mode for good (a capture CUDA refused): the optimizer as an eager
        update steps it."""
        self.error = why
        self.graph, self.outputs, self.inputs, self.pending, self.reported = None, None, None, None, None
        self.warmups_left = GRAPH_WARMUP_UPDATES
        if hasattr(optimizer, "found_inf"):
            del optimizer.found_inf
        for group in optimizer.param_groups:
            group.update(lr=float(group["lr"]), capturable=False)
        optimizer.zero_grad(set_to_none=True)

    def launch(self, b: dict, optimizer: torch.optim.Optimizer, step: Step) -> list[torch.Tensor] | None:
        """One update of the batch ``b``: replayed, or run eagerly while warming up or on a CPU,
        or captured. Returns each batch's |TD| (copies: the next replay writes where this one
        did), or None where the capture failed (``error`` says why; nothing was stepped)."""
        if self.inputs is None:
            self.enter(b, optimizer)
        for k, t in self.inputs.items():
            t.copy_(b[k], non_blocking=True)
        previous = self.pending
        try:
            if self.graph is not None:
                self.graph.replay()
                stats, td_abs = self.outputs
            elif self.warmups_left > 0 or self.device.type != "cuda":  # a CPU never captures
                self.warmups_left -= 1
                stats, td_abs = self._warm(optimizer, step)
            else:
                stats, td_abs = self._capture(optimizer, step)
        except Exception as e:  # a capture CUDA refuses: the learner trains eagerly
            self.leave(first_line(e), optimizer)
            return None
        # Two pinned slots, by turns: this launch's figures land in one while the previous
        # launch's, waited for in ``figures`` (its graph only, not this one's), are read from the other.
        slot = self.launches % 2
        self.launches += 1
        host, events = self.host
        host[slot].copy_(stats, non_blocking=True)
        events[slot].record()
        self.pending = slot
        self.reported = slot if previous is None else previous  # the first launch reports itself
        return [t.clone() for t in td_abs]

    def figures(self) -> list[float]:
        """The reported launch's [loss, |TD| mean, Q mean, gradient norm, 1 if skipped]."""
        host, events = self.host
        events[self.reported].synchronize()
        return host[self.reported].tolist()

    def _warm(self, optimizer: torch.optim.Optimizer, step: Step):
        if self.device.type != "cuda":
            optimizer.zero_grad(set_to_none=True)
            return step(self.inputs)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            optimizer.zero_grad(set_to_none=True)
            out = step(self.inputs)
        torch.cuda.current_stream(self.device).wait_stream(side)
        return out

    def _capture(self, optimizer: torch.optim.Optimizer, step: Step):
        """Capture the update, then replay it once: the capture itself computes nothing. The
        prefetch thread keeps copying batches meanwhile, hence thread_local: its calls are not
        the capture's. Gradients start as None, so the captured backward allocates them in the
        graph's pool and every replay writes them afresh."""
        optimizer.zero_grad(set_to_none=True)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            outputs = step(self.inputs)
        self.graph, self.outputs = graph, outputs
        graph.replay()
        return outputs
