"""``--only update``: where one learner update's time goes, part by part, at this machine's
profile settings (Pong, the profile's precision, memory format and threads).

The learner names its parts with ``torch.profiler.record_function`` (``learner.targets``: the
target and Double-DQN forwards on s'; ``learner.forward``: Q(s) and the loss; ``learner.backward``;
``learner.clip``: unscaling and gradient clipping; ``learner.sync``: the update's one host sync;
``learner.step``: Adam). Inside the forwards and the backward every operation is given to the
layer it belongs to (by its input shape forward, by its order backward, which runs the layers in
reverse), so the table shows each conv, BatchNorm and linear layer forward and backward, the
uint8 scaling, and the rest. FLOPs per layer come from torch's FlopCounterMode, so a part with
FLOPs also shows the GFLOP/s it reached. The profiler adds its own cost to every operation (a
few microseconds each) and between them: the parts are the profiled times, beside the update's
time without the profiler, so small operations and the "between parts" row read high."""
from __future__ import annotations

import collections
import statistics
import time

import torch

PARTS = ("learner.targets", "learner.forward", "learner.backward", "learner.clip", "learner.sync", "learner.step")
# backward functions, in the order autograd runs them for one forward: the last layer first
BACKWARD_ORDER = {"ConvolutionBackward0": ("conv3", "conv2", "conv1"),
                  "NativeBatchNormBackward0": ("bn3", "bn2", "bn1"),
                  "CudnnBatchNormBackward0": ("bn3", "bn2", "bn1"),
                  "AddmmBackward0": ("fc2", "fc1")}


def _forward_label(name: str, shapes: list, frame_stack: int) -> str:
    """The layer a forward operation belongs to, from its name and its first input's shape."""
    first = shapes[0] if shapes else []
    if name in ("aten::to", "aten::_to_copy", "aten::mul_", "aten::mul") and len(first) == 4 and \
            first[1] == frame_stack and first[2] == 84:
        return "uint8 scaling"
    if name == "aten::conv2d" and len(first) == 4:
        return {frame_stack: "conv1", 32: "conv2", 64: "conv3" if first[2] == 9 else "conv?"}.get(first[1], "conv?")
    if name == "aten::batch_norm" and len(first) == 4:
        return {(32, 20): "bn1", (64, 9): "bn2", (64, 7): "bn3"}.get((first[1], first[2]), "bn?")
    if name in ("aten::relu_", "aten::relu"):
        return "relu"
    if name == "aten::linear" and len(shapes) > 1 and len(shapes[1]) == 2:
        return "fc1" if shapes[1][0] == 512 else "fc2"
    return "other ops"


def _backward_label(name: str, seen: collections.Counter) -> str:
    fn = name.split(": ", 1)[1] if ": " in name else name
    order = BACKWARD_ORDER.get(fn)
    if order is None:
        return "relu" if fn.startswith(("ReluBackward", "ThresholdBackward")) else "other ops"
    i = seen[fn]
    seen[fn] += 1
    return order[i % len(order)]


def _layer_flops(learner, batch) -> dict[str, dict[str, float]]:
    """FLOPs of one update per part and layer: {"targets": {"conv1": ...}, "forward": ..., "backward": ...}."""
    from torch.utils.flop_counter import FlopCounterMode

    from pipeline.agent.rules import td_targets

    names = {"Sequential.0": "conv1", "Sequential.3": "conv2", "Sequential.6": "conv3",
             "_QHead.q.0": "fc1", "_QHead.q.2": "fc2"}

    def per_layer(fc, ops):
        out = {}
        for module, counts in fc.get_flop_counts().items():
            if module in names:
                out[names[module]] = float(sum(v for op, v in counts.items() if str(op) in ops))
        return out
    with FlopCounterMode(display=False) as fc:
        td_targets(learner.rule, learner, batch)
    targets = per_layer(fc, ("aten.convolution", "aten.addmm"))
    with FlopCounterMode(display=False) as fc:
        loss, _, _ = learner.loss(batch)
        loss.backward()
    learner.optimizer.zero_grad(set_to_none=True)
    forward = {k: v - targets.get(k, 0.0) for k, v in per_layer(fc, ("aten.convolution", "aten.addmm")).items()}
    backward = per_layer(fc, ("aten.convolution_backward", "aten.mm"))
    return {"targets": targets, "forward": forward, "backward": backward}


def update_parts(n_updates: int = 30, batch_size: int | None = None, threads: int | None = None,
                 env: str = "ALE/Pong-v5") -> dict:
    """The learner ``env``'s preset and this machine's profile resolve to, on one preloaded batch
    (with importance weights where its replay is prioritized): the median update time without the
    profiler, then ``n_updates`` profiled updates split into parts and layers."""
    from torch.profiler import ProfilerActivity, profile

    from pipeline.agent.learner import Learner
    from pipeline.settings.hardware import learner_threads
    from pipeline.settings.layers import resolve_config
    from wrappers.factory import count_actions

    from .learner_grid import random_batch

    res = resolve_config({"env": env, **({"batch_size": batch_size} if batch_size else {})})
    cfg, hw, name = res.cfg, res.hw, res.profile
    if cfg.learner.model_arch != "batchnorm" or cfg.learner.dueling:
        raise ValueError("--only update splits the BatchNorm DQN's update; this profile trains another network")
    th = threads or learner_threads(cfg.learner.learner_threads, cfg.collectors.num_collectors, hw)
    torch.set_num_threads(th)
    device = torch.device("cuda" if hw.cuda else "cpu")
    learner = Learner(cfg.learner, cfg.env_options.frame_stack, count_actions(env, cfg.env_options), device)
    batch = random_batch(learner, cfg.learner.batch_size, weights=cfg.replay.prioritized)
    flops = _layer_flops(learner, batch)
    for _ in range(5):
        learner.update([batch])

    def timed() -> float:
        t0 = time.perf_counter()
        learner.update([batch])
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0
    update_s = statistics.median(timed() for _ in range(n_updates))

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if hw.cuda else [])
    t0 = time.perf_counter()
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(n_updates):
            learner.update([batch])
    profiled_s = (time.perf_counter() - t0) / n_updates

    us = collections.defaultdict(float)  # (part, layer) -> profiled microseconds over all updates
    for e in prof.events():
        if e.name not in PARTS or e.cpu_parent is not None and e.cpu_parent.name in PARTS:
            continue
        part = e.name.removeprefix("learner.")
        if part not in ("targets", "forward", "backward"):
            us[(part, "")] += e.cpu_time_total
            continue
        seen = collections.Counter()  # backward: autograd's functions, "autograd::engine::evaluate_function: X"
        for c in e.cpu_children:
            layer = _backward_label(c.name, seen) if part == "backward" else \
                _forward_label(c.name, c.input_shapes, cfg.env_options.frame_stack)
            us[(part, layer)] += c.cpu_time_total
        # whatever the part's own Python and dispatch cost beyond its listed operations
        us[(part, "dispatch and Python")] += max(0.0, e.cpu_time_total - sum(c.cpu_time_total for c in e.cpu_children))
    in_parts = sum(us.values()) / n_updates / 1e6
    us[("rest", "between parts (zero_grad, Python, the profiler's own)")] += max(0.0, profiled_s - in_parts) * 1e6 * n_updates
    total_us = sum(us.values())
    rows = []
    for (part, layer), t in sorted(us.items(), key=lambda kv: -kv[1]):
        share = t / total_us
        ms = t / n_updates / 1e3  # as profiled: each operation carries the profiler's few microseconds
        fl = flops.get(part, {}).get(layer)
        rows.append({"part": part, "layer": layer, "ms": ms, "share": share,
                     "gflop": fl / 1e9 if fl else None, "gflops": fl / (ms / 1e3) / 1e9 if fl and ms > 0 else None})
    total_flops = sum(sum(d.values()) for d in flops.values())
    return {"env": env, "rule": learner.rule.label, "profile": name, "batch": cfg.learner.batch_size, "threads": th,
            "precision": str(learner.amp_dtype or torch.float32).removeprefix("torch."),
            "channels_last": cfg.learner.channels_last, "update_ms": 1e3 * update_s,
            "profiled_update_ms": 1e3 * profiled_s, "gflop_per_update": total_flops / 1e9,
            "gflops": total_flops / update_s / 1e9, "rows": rows}


def print_update_parts(res: dict) -> None:
    print(f"\nOne learner update of {res['env']} ({res['rule']}; {res['profile']} profile: batch {res['batch']}, {res['threads']} thread(s), "
          f"{res['precision']}, channels_last {res['channels_last']}): {res['update_ms']:.1f} ms "
          f"({res['profiled_update_ms']:.1f} ms under the profiler), {res['gflop_per_update']:.2f} GFLOP, "
          f"{res['gflops']:.0f} GFLOP/s overall")
    print("\n| part | layer | ms per update (profiled) | share | GFLOP | GFLOP/s |\n|---|---|---|---|---|---|")
    for r in res["rows"]:
        if r["share"] < 0.002:
            continue
        gf = "" if r["gflop"] is None else f"{r['gflop']:.3f}"
        rate = "" if r["gflops"] is None else f"{r['gflops']:.0f}"
        print(f"| {r['part']} | {r['layer']} | {r['ms']:.2f} | {100 * r['share']:.1f}% | {gf} | {rate} |")
