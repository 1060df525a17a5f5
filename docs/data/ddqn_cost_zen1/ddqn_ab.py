"""Mario preset's learner alone, 1 thread, fp32, eager: Double DQN targets against the target
network's own action (--double-dqn false), updates/s on one preloaded batch, 15-second blocks
interleaved 4 times. Run from the repository root: python ddqn_ab.py"""
import json
import statistics
import sys
import time

import torch

sys.path.insert(0, ".")
from bench.learner_grid import random_batch  # noqa: E402
from pipeline.learner import Learner  # noqa: E402
from pipeline.settings.layers import resolve_config  # noqa: E402

torch.set_num_threads(1)
dev = torch.device("cpu")


def make(double):
    cfg = resolve_config({"env": "SuperMarioBros-1-1-v0", "learner_threads": 1, "compile": False, "amp": False,
                          "double_dqn": double}).cfg
    lrn = Learner(cfg.learner, 4, 3, dev)
    b = random_batch(lrn, cfg.learner.batch_size)
    b["action"] = b["action"] % 3
    b["weights"] = torch.ones(cfg.learner.batch_size)
    for _ in range(5):
        lrn.update([b])
    print("double_dqn", cfg.learner.double_dqn, {k: getattr(cfg.learner, k, None) for k in
                                                  ("quantiles", "bn_targets", "channels_last", "batch_size")}, flush=True)
    return lrn, b


def rate(lrn, b, secs=15.0):
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < secs:
        lrn.update([b])
        n += 1
    return n / (time.perf_counter() - t0)


L = {True: make(True), False: make(False)}
out = {True: [], False: []}
for rep in range(4):
    for d in (True, False):
        out[d].append(rate(*L[d]))
        print("double" if d else "own action", f"{out[d][-1]:.2f} updates/s", flush=True)
a, b = statistics.median(out[True]), statistics.median(out[False])
print(json.dumps({"double_dqn": out[True], "own_action": out[False], "median_double_dqn": a,
                  "median_own_action": b, "ratio": b / a}))
