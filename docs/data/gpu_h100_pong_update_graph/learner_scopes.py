"""Device check: the product's Learner on Pong's config, one update's time per CUDA-graph scope:
none, the compiled loss (torch.compile reduce-overhead), the whole update (eager loss, and the
compiled loss inside it). bf16 autocast, batch 32."""
import dataclasses, json, os, time
import numpy as np, torch
from pipeline.learner import Learner
from pipeline.settings.layers import resolve_config

base = resolve_config({"env": "ALE/Pong-v5"}).cfg.learner
dev = torch.device("cuda")
N = int(os.environ.get("N", 400))
rng = np.random.default_rng(0)
host = [{"obs": rng.integers(0, 255, (32, 4, 84, 84), dtype=np.uint8),
         "next_obs": rng.integers(0, 255, (32, 4, 84, 84), dtype=np.uint8),
         "action": rng.integers(0, 6, 32), "return": rng.standard_normal(32).astype(np.float32),
         "discount": np.full(32, 0.99, np.float32), "weights": None} for _ in range(8)]
variants = {"eager, no graphs": dict(compile=False, cuda_graphs=False),
            "compiled loss, its graphs": dict(compile=True, scope="loss"),
            "whole-update graph, eager loss": dict(compile=False),
            "whole-update graph, compiled loss": dict(compile=True)}
rows = []
for name, kw in variants.items():
    scope = kw.pop("scope", None)
    torch.manual_seed(0)
    lrn = Learner(dataclasses.replace(base, **kw), 4, 6, dev)
    lrn.compile_after = 0
    if scope:
        lrn.graph_scope = scope
    if kw.get("compile"):
        lrn.compile_loss()
    batches = [lrn.to_device(b) for b in host]
    t0 = time.perf_counter()
    losses = [lrn.update([batches[i % 8]])["loss"] for i in range(30)]
    torch.cuda.synchronize(); warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(N):
        lrn.update([batches[i % 8]])
    torch.cuda.synchronize(); dt = (time.perf_counter() - t0) / N
    row = dict(variant=name, ms_per_update=round(dt * 1e3, 3), updates_per_s=round(1 / dt, 1), warmup_s=round(warm, 1),
               graphed=lrn.graphed, loss_graphs=lrn.cuda_graphs, compile_error=lrn.compile_error,
               graph_error=lrn.graph_error, skipped=lrn.bad_steps, losses=losses)
    rows.append(row)
    print({k: v for k, v in row.items() if k != "losses"}, flush=True)
ref = rows[0]["losses"]
for r in rows[1:]:
    print(r["variant"], "30 losses vs eager, max relative difference",
          max(abs(x - y) / max(abs(y), 1e-6) for x, y in zip(r["losses"][1:], ref[:-1] if r["graphed"] else ref[1:])))
json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows),
          open(os.path.join(os.environ.get("OUT", "/tmp"), "variants.json"), "w"), indent=1)
