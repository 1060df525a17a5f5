"""BatchedEnv of 8 Mario envs on 2 threads, as a Mario collector steps them: Python envs vs native vector, alternating 4-s windows."""
import time, numpy as np, cv2, torch, statistics, json, sys
torch.set_num_threads(1); cv2.setNumThreads(1)
from pipeline.settings.layers import resolve_config
from wrappers import BatchedEnv
opts = resolve_config({"env": "SuperMarioBros-1-1-v0"}).cfg.env_options
envs = {"python": BatchedEnv("SuperMarioBros-1-1-v0", opts, 8, num_threads=2, native=False),
        "native": BatchedEnv("SuperMarioBros-1-1-v0", opts, 8, num_threads=2)}
res = {k: [] for k in envs}
for e in envs.values(): e.reset(seed=0)
rng = np.random.default_rng(0)
for rnd in range(6):
    order = list(envs) if rnd % 2 == 0 else list(envs)[::-1]
    for name in order:
        e = envs[name]; t = time.perf_counter(); n = 0
        while time.perf_counter() - t < 4.0:
            e.step(rng.integers(0, e.n_actions, 8)); n += 8
        res[name].append(n / (time.perf_counter() - t))
out = {k: [round(v, 1) for v in vs] for k, vs in res.items()}
out["median_ratio_native_over_python"] = statistics.median(res["native"]) / statistics.median(res["python"])
print(out); json.dump(out, open(sys.argv[1], "w"), indent=1)
