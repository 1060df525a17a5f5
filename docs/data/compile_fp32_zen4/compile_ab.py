"""Mario preset's learner alone, 1 thread, fp32: eager vs compiled updates/s, interleaved."""
import sys, time, statistics, json
import torch
sys.path.insert(0, "/work/main")
from pipeline.settings.layers import resolve_config
from bench.learner_grid import random_batch
from pipeline.learner import Learner

torch.set_num_threads(1)
res = resolve_config({"env": "SuperMarioBros-1-1-v0", "learner_threads": 1, "compile": False, "amp": False})
cfg = res.cfg
print("learner cfg:", {k: cfg.get(k) for k in ("quantiles", "double_dqn", "bn_targets", "channels_last", "amp", "batch_size", "prioritized")})
dev = torch.device("cpu")

def make(compiled):
    lrn = Learner(cfg.learner, 4, 3, dev)
    b = random_batch(lrn, cfg.learner.batch_size)
    b["action"] = b["action"] % 3
    b["weights"] = torch.ones(cfg.learner.batch_size)
    if compiled:
        t = time.perf_counter(); lrn.compile_loss(); lrn.update([b]); print(f"compile {time.perf_counter()-t:.1f} s", flush=True)
        assert lrn.compiled, lrn.compile_error
    for _ in range(5): lrn.update([b])
    return lrn, b

def rate(lrn, b, secs=15):
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < secs:
        lrn.update([b]); n += 1
    return n / (time.perf_counter() - t0)

L = {False: make(False), True: make(True)}
out = {False: [], True: []}
for rep in range(3):
    for c in (False, True):
        out[c].append(rate(*L[c]))
        print(("compiled" if c else "eager"), f"{out[c][-1]:.2f} updates/s", flush=True)
e, c = statistics.median(out[False]), statistics.median(out[True])
print(json.dumps({"eager": out[False], "compiled": out[True], "median_eager": e, "median_compiled": c, "ratio": c / e}))
