"""The engine that runs the learner's update step (``pipeline/agent/learner.py``, ``update_step``) on
its device (``Engine``): eagerly, with the loss compiled by torch.compile, and on CUDA which part
of an update replays as a CUDA graph, and the whole-update graph itself (``UpdateGraph``: its
inputs, the capture, the replays, the figures on their way to the host). The step's arithmetic
is not here: the compile and the graph take the very functions an eager update calls."""
from __future__ import annotations

import time
from typing import Callable

import torch

from config_optimized import LearnerConfig

from ..agent.learner import Learner, TrainingDiverged, update_step

# --compile waits this many updates before compiling: the compile costs ~25 s of a 2-core CPU
# (the update that triggers it waits), which ~10k updates at the measured 1.15x repay, so a run
# that stops sooner (a test, a quick benchmark, a short trial) gains nothing from it.
COMPILE_AFTER_UPDATES = 2_000
AUTO = "auto"  # Engine's scope: graph_scope's answer for the learner's device and settings

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


class Engine:
    """Runs a learner's update (``Learner.update``, its step ``update_step``) as the settings and
    the device allow: eagerly; from COMPILE_AFTER_UPDATES updates on (--compile) with the loss and
    its backward compiled by torch.compile; on CUDA with --cuda-graphs the whole step captured and
    replayed as one graph (``UpdateGraph``), or, under fp16, the compiled loss as torch.compile's
    own graphs. The step is the learner's, written once; the engine only chooses how it runs, and
    says so in the run's log (``say``): the compile, its time, a capture, a fallback.

    A compile or a capture that fails at run time (a C++ compiler that is there but does not work,
    an inductor bug, a capture CUDA refuses) leaves ``compile_error`` or ``graph_error``, and the
    run trains eagerly from then on: nothing was stepped by the failed attempt."""

    def __init__(self, learner: Learner, say: Callable[[str], None] | None = None, scope: str | None = AUTO,
                 compile_after: int = COMPILE_AFTER_UPDATES):
        """``scope``: what replays as a CUDA graph (``graph_scope``); tests and benchmarks name
        "update" on a CPU to run the captured step eagerly. ``compile_after``: the update from
        which the loss is compiled (a benchmark row: 0, before it measures)."""
        self.learner = learner
        self.say = say or (lambda line: None)
        self.scope = graph_scope(learner.device, learner.cfg, learner.amp_dtype) if scope == AUTO else scope
        self.graph = UpdateGraph(self.scope, learner.device)
        learner.autocast_cache = self.scope != "update"  # a captured cache would be memory the graph does not own
        self.compile_after = compile_after
        self.loss = learner.loss  # what the step runs: the learner's loss, or the same compiled
        self.compiled = False
        self.compile_error: str | None = None  # why compiling failed at run time (the run trains eagerly)
        self._compile_proven = False  # a compiled update has run: compiling can no longer fail

    @property
    def graph_error(self) -> str | None:
        """Why capturing the update as a CUDA graph failed (the run then trains eagerly)."""
        return self.graph.error

    def compile_due(self) -> bool:
        """--compile, and the run has trained ``compile_after`` updates (a resumed one counts its
        earlier ones): the next update first compiles the loss (``compile_loss``)."""
        return self.compile_ahead == self.learner.updates

    @property
    def compile_ahead(self) -> int | None:
        """The update at which the loss will be compiled (``compile_after``, or the next one where
        the run is past it), where a compile is still ahead: --compile, not compiled, never failed."""
        if self.learner.cfg.compile and not self.compiled and self.compile_error is None:
            return max(self.compile_after, self.learner.updates)
        return None

    @property
    def compile_done(self) -> bool:
        """No compile stall is ahead: --compile is off, or the compiled loss has run an update,
        or compiling failed and the learner trains eagerly."""
        return not self.learner.cfg.compile or self._compile_proven or self.compile_error is not None

    def compile_loss(self) -> None:
        """From the next update on, the targets, Q(s) and the loss run as one torch.compile graph,
        and AOTAutograd compiles its backward, so BatchNorm, ReLU, the uint8 scaling, the casts
        and the quantile loss fuse around the convolutions both ways (the update ran 1.11x alone
        and 1.15x inside the Pong pipeline on a 2-core AMD EPYC Zen 5 in bf16). The compile
        itself happens in the next update, which waits for it."""
        compiled = torch.compile(self.learner.loss, dynamic=False, mode=compile_mode(self.scope))
        self.loss = compiled
        if self.scope == "loss":
            # Under the compiled loss's CUDA graphs a replay writes its outputs where the last
            # replay wrote them: each update starts a new step, and its outputs are read (the
            # sync, td_abs) before the next one (graphs are off with accumulation: graph_scope).
            # Marking the step imports inductor's CUDA-graph trees, ~600 modules and 2 s, so only
            # a graphed run does it.
            def graphed_loss(b: dict):
                torch.compiler.cudagraph_mark_step_begin()
                return compiled(b)
            self.loss = graphed_loss
        self.compiled = True

    def update(self, micro_batches: list[dict]) -> dict:
        """One optimizer step over ``grad_accum_steps`` micro-batches (already on device), reported
        as ``Learner.update`` reports it. Compiles the loss first where that is due (the update
        waits for it); in graph mode (scope "update", as far into the run as a compile would
        wait, after any compile) launches the step as one CUDA graph."""
        lrn = self.learner
        compiling = self.compile_due()
        if compiling:
            self.compile_loss()
            graphs = ", replayed as CUDA graphs" if self.scope == "loss" else ""
            self.say(f"[MAIN] Compiling the learner's loss and its backward (torch.compile{graphs}) at "
                     f"{lrn.updates:,} updates; the collectors wait for it")
        t0 = time.perf_counter()
        if self.graph.active or self.graph.due(self.compile_done and lrn.updates >= self.compile_after):
            out = self._graphed_update(micro_batches[0])
            if out is not None:
                return out
            self.say(f"[MAIN] Warning: capturing the update as a CUDA graph failed ({self.graph.error}); "
                     "training goes on without it (--cuda-graphs false skips the attempt)")
        out = self._eager_update(micro_batches)
        if compiling and self.compile_error:
            self.say(f"[MAIN] Warning: torch.compile failed ({self.compile_error}); training goes on without it "
                     "(--compile false skips the attempt)")
        elif compiling:
            self.say(f"[MAIN] Compiled in {time.perf_counter() - t0:.1f} s")
        return out

    def _eager_update(self, micro_batches: list[dict]) -> dict:
        """The learner's update with the engine's loss; the first compiled one compiles (the
        forward here, the backward lazily in it), and should that fail, trains eagerly."""
        lrn = self.learner
        if not self.compiled or self._compile_proven:
            return lrn.update(micro_batches, self.loss)
        try:
            out = lrn.update(micro_batches, self.loss)
        except TrainingDiverged:
            raise
        except Exception as e:  # torch._dynamo's BackendCompilerFailed and whatever inductor raises
            self.compile_error = first_line(e)
            self.loss, self.compiled = lrn.loss, False
            lrn.optimizer.zero_grad(set_to_none=True)
            return lrn.update(micro_batches)
        self._compile_proven = True
        return out

    def _graphed_update(self, b: dict) -> dict | None:
        """One update launched as a graph (``UpdateGraph.launch``): nothing waits for the GPU, and
        the figures reported are the previous update's. None where the capture failed: the
        caller then trains eagerly (and so does the rest of the run)."""
        lrn = self.learner
        lrn.model.train()
        captured = self.graph.captured
        td_abs = self.graph.launch(b, lrn.optimizer,
                                   lambda inputs: update_step(lrn, [inputs], self.loss, skip_on_device=True))
        if td_abs is None:
            return None
        if self.graph.captured and not captured:
            self.say(f"[MAIN] Each update now replays as one CUDA graph (the loss, its backward, the clip and Adam) "
                     f"from update {lrn.updates + 1:,}")
        lrn.count_step()
        return lrn.launched(self.graph.figures(), td_abs)
