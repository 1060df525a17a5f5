"""Device check: the product's Learner on Pong's config, one update's rate per variant
(autocast dtype x CUDA graphs), and whether CUDA graphs change the arithmetic."""
import dataclasses, json, os, sys, time
import numpy as np, torch
from pipeline.learner import Learner
from pipeline.settings.layers import resolve_config

res = resolve_config({"env": "ALE/Pong-v5"})
base = res.cfg.learner
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
N = int(os.environ.get("N", 400))
rng = np.random.default_rng(0)
host = [{"obs": rng.integers(0, 255, (32, 4, 84, 84), dtype=np.uint8),
         "next_obs": rng.integers(0, 255, (32, 4, 84, 84), dtype=np.uint8),
         "action": rng.integers(0, 6, 32), "return": rng.standard_normal(32).astype(np.float32),
         "discount": np.full(32, 0.99, np.float32), "weights": None} for _ in range(8)]

def build(**kw):
    torch.manual_seed(0)
    lrn = Learner(dataclasses.replace(base, **kw), 4, 6, dev)
    if kw.get("compile"):
        lrn.compile_after = 0
        lrn.compile_loss()
    return lrn

rows, curves = [], {}
variants = [dict(amp_dtype="fp16", compile=True, cuda_graphs=False), dict(amp_dtype="fp16", compile=True, cuda_graphs=True),
            dict(amp_dtype="bf16", compile=True, cuda_graphs=False), dict(amp_dtype="bf16", compile=True, cuda_graphs=True)]
if os.environ.get("EAGER"):
    variants.insert(0, dict(amp_dtype="fp16", compile=False, cuda_graphs=False))
for kw in variants:
    lrn = build(**kw)
    batches = [lrn.to_device(b) for b in host]
    t0 = time.perf_counter()
    losses = [lrn.update([batches[i % 8]])["loss"] for i in range(30)]  # compile + record + the curve
    warm = time.perf_counter() - t0
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(N):
        lrn.update([batches[i % 8]])
    if dev.type == "cuda":
        torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / N
    name = f"{kw['amp_dtype']} compile={kw['compile']} graphs={kw['cuda_graphs']}"
    curves[name] = losses
    row = dict(variant=name, ms_per_update=round(dt * 1e3, 3), updates_per_s=round(1 / dt, 1), warmup_s=round(warm, 1),
               compile_mode="reduce-overhead" if lrn.cuda_graphs else None, compile_error=lrn.compile_error, skipped=lrn.bad_steps)
    rows.append(row)
    print(row, flush=True)
for dt in ("fp16", "bf16"):
    a, b = curves[f"{dt} compile=True graphs=False"], curves[f"{dt} compile=True graphs=True"]
    d = max(abs(x - y) / max(abs(x), 1e-6) for x, y in zip(a, b))
    print(f"{dt}: the first 30 losses, graphs on vs off, max relative difference {d:.2e}; on {a[:3]} ... {a[-1]:.5f}, off-vs-on last {b[-1]:.5f}")
    rows.append(dict(variant=f"{dt} graphs on vs off", max_rel_loss_diff=d, losses_off=a, losses_on=b))
out = os.environ.get("OUT", "/tmp")
json.dump(dict(device=torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", torch=torch.__version__, rows=rows),
          open(os.path.join(out, "variants.json"), "w"), indent=1)
