"""One learner's updates/s, alone in its process: python bench_one.py CHECKOUT ENV [flags...]"""
import sys, time, json
root, env, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, root)
import numpy as np, torch
torch.set_num_threads(2)
from pipeline.settings.cli import parse_args
from pipeline.settings.layers import resolve_config
from pipeline.learner import Learner
cfg = resolve_config(parse_args(["--env", env, "--amp", "false", "--compile", "false", *flags])).cfg
n_actions = 6
torch.manual_seed(0)
lrn = Learner(cfg.learner, 4, n_actions, torch.device("cpu"))
rng = np.random.default_rng(0)
def batch():
    n = cfg.learner.batch_size
    return lrn.to_device({"obs": rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8), "next_obs": rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8),
            "action": rng.integers(0, n_actions, n), "return": rng.standard_normal(n).astype(np.float32),
            "discount": np.full(n, 0.97, np.float32), "weights": rng.uniform(0.5, 1, n).astype(np.float32)})
bs = [batch() for _ in range(8)]
for i in range(20):
    lrn.update([bs[i % 8]])
t = time.perf_counter(); n = 120
for i in range(n):
    lrn.update([bs[i % 8]])
print(json.dumps({"root": root, "env": env, "flags": flags, "updates_per_s": n / (time.perf_counter() - t)}))
