"""The same checkpoint played with fp32 acting and with the collectors' folded bf16 acting copy;
and how often the two pick different greedy actions on the states the bf16 games visit."""
import sys, json, torch, numpy as np
import pipeline.rollout as ro
from pipeline.evaluation.evaluate import evaluate

stats = {"n": 0, "differ": 0, "gaps": []}
class Bf16Rollout(ro.Rollout):
    def __init__(self, env, model, frame_stack, clip, seed, *_, **__):
        super().__init__(env, model, frame_stack, clip, seed, act_bf16=True)
        self.fp32 = model
    def step(self, eps):
        with torch.inference_mode():
            obs = torch.from_numpy(self.stack)
            q32 = self.fp32(obs).float()
            q16 = self.policy(obs.contiguous(memory_format=torch.channels_last)).float()
        a32, a16 = q32.argmax(1), q16.argmax(1)
        stats["n"] += len(a32); stats["differ"] += int((a32 != a16).sum())
        top2 = q32.topk(2, 1).values
        stats["gaps"] += (top2[:, 0] - top2[:, 1]).tolist()
        return super().step(eps)

mode, ck, n, eps = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
if mode == "bf16":
    ro.Rollout = Bf16Rollout
torch.set_num_threads(2)
res = evaluate(ck, episodes=n, epsilon=eps, seed=int(sys.argv[5]) if len(sys.argv) > 5 else 777, log=lambda *_: None)
out = {"mode": mode, "eps": eps, "returns": list(map(float, res.returns))}
if stats["n"]:
    g = np.array(stats["gaps"])
    out.update(n=stats["n"], differ_frac=stats["differ"] / stats["n"], gap_median=float(np.median(g)),
               gap_p10=float(np.percentile(g, 10)), gap_below_0p01=float((g < 0.01).mean()))
out["mean"] = float(np.mean(out["returns"]))
print(json.dumps(out))
