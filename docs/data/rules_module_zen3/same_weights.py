import sys, hashlib, numpy as np, torch
sys.path.insert(0, sys.argv[1])
from config_optimized import Config
from pipeline.learner import Learner
out = []
for kw in [dict(), dict(quantiles=51, bn_targets="batch", double_dqn=False), dict(bootstrap_epsilon=0.3, bn_targets="running"),
           dict(quantiles=5, double_dqn=True, model_arch="nature")]:
    torch.manual_seed(0)
    lrn = Learner(Config.of(amp=False, lr=1e-3, target_update_interval=2, **kw).learner, 4, 6, torch.device("cpu"))
    rng = np.random.default_rng(0)
    for i in range(5):
        b = {"obs": rng.integers(0, 256, (16, 4, 84, 84), dtype=np.uint8), "next_obs": rng.integers(0, 256, (16, 4, 84, 84), dtype=np.uint8),
             "action": rng.integers(0, 6, 16), "return": rng.normal(size=16).astype(np.float32),
             "discount": np.full(16, 0.97, np.float32), "weights": rng.uniform(0.5, 1, 16).astype(np.float32)}
        r = lrn.update([lrn.to_device(b)])
    h = hashlib.sha256(b"".join(t.detach().numpy().tobytes() for t in lrn.model.state_dict().values() if t.is_floating_point())).hexdigest()[:16]
    out.append((kw, r["loss"], h))
for o in out: print(o)
