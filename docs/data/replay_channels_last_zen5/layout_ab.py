"""A/B in one process: batches gathered channels_last by the replay vs transposed in to_device,
the learner (cpu-small profile, Pong, compiled loss) fed by each way, interleaved blocks."""
import statistics, time, json, sys
import torch
from pipeline.learner import Learner
from pipeline.prefetch import Prefetcher
from pipeline.replay import Replay
from pipeline.settings.hardware import detect_hardware, learner_threads
from pipeline.settings.layers import resolve_config
from bench.common import fill_replay

res = resolve_config({"env": "ALE/Pong-v5"}, detect_hardware())
cfg, hw = res.cfg, res.hw
lrn, col = cfg.learner, cfg.collectors
torch.set_num_threads(learner_threads(lrn.learner_threads, col.num_collectors, hw))
learner = Learner(lrn, 4, 6, torch.device("cpu"))
replay = Replay.of(100_000, 1, col.envs_per_collector, n_step=cfg.replay.n_step, gamma=cfg.replay.gamma, seed=1)
fill_replay(replay, 100_000, col.envs_per_collector, 0.001, 1024)
bs = lrn.batch_size
assert learner.host_channels_last

class Old:  # the learner as the prefetcher saw it before: NCHW batches, transposed in to_device
    host_channels_last = False
    to_device = staticmethod(learner.to_device)

pf = {"old": Prefetcher(replay, Old(), bs, 2), "new": Prefetcher(replay, learner, bs, 2)}
for p in pf.values(): p.start()
learner.compile_loss()
for _ in range(5): learner.update([pf["new"].get()])

def block(cond, n):
    t0 = time.perf_counter()
    for _ in range(n):
        kind, how = cond.split()
        if how == "serial":
            b = learner.to_device(replay.sample(bs, kind == "new"))
        else:
            b = pf[kind].get()
        learner.update([b])
    return (time.perf_counter() - t0) / n * 1000

conds = ["old serial", "new serial", "old prefetch", "new prefetch"]
ms = {c: [] for c in conds}
for c in conds: block(c, 8)
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
    for c in (conds if r % 2 == 0 else conds[::-1]):
        ms[c].append(block(c, 24))
for p in pf.values(): p.stop_event.set(); p.join()
out = {c: round(statistics.median(v), 3) for c, v in ms.items()}
print(json.dumps({"ms_per_update_median": out, "rounds": ms}, indent=1))
