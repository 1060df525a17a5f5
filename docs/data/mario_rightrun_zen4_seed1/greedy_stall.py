"""Where a Mario checkpoint's greedy games stand still: plays games FIRST..LAST-1 (seeds of the
no-op starts) greedily, one Python env, up to 600 agent steps each, and for a game still going
then prints its last actions (indices of the run's action set), x positions and Q-values, and
the step from which x stood. Run from the repository root:
python docs/data/mario_rightrun_zen4_seed1/greedy_stall.py RUN/checkpoint.pt FIRST LAST"""
import sys, numpy as np, torch
sys.path.insert(0, ".")
from pipeline.records import checkpoint as ckpt
from pipeline.evaluation.evaluate import trained_config
from models.dqn import build_model
from wrappers import make_env
p = sys.argv[1]
state = ckpt.load(p); meta = state["meta"]
cfg = trained_config(state, ckpt.checkpoint_file(p).parent)
model = build_model(meta["model_arch"], meta["frame_stack"], meta["n_actions"], meta["dueling"], meta.get("quantiles", 0), meta.get("iqn_taus", 0))
model.load_state_dict(ckpt.policy_weights(state["learner"])); model.eval()
o = cfg.env_options
env = make_env(cfg.env, noop_max=o.noop_max, mario_actions=o.mario_actions, clip_rewards=False)
torch.set_num_threads(1)
for seed in range(int(sys.argv[2]), int(sys.argv[3])):
    obs, _ = env.reset(seed=seed)
    acts, xs, qs = [], [], []
    for t in range(600):
        with torch.no_grad():
            q = model(torch.from_numpy(np.asarray(obs))[None]).float()
        a = int(q.argmax()); acts.append(a); qs.append(q[0].numpy().round(2))
        obs, r, term, trunc, info = env.step(a)
        xs.append(info["x_pos"])
        if term or trunc: break
    stuck = len(xs) >= 600
    print(seed, "flag" if info.get("flag_get") else ("STUCK" if stuck else "died"), "x", xs[-1], "steps", len(xs))
    if stuck:
        print("  last actions", acts[-12:], "x", xs[-12:]); print("  q", qs[-3:])
        first = next(i for i in range(len(xs)) if xs[i] == xs[-1]); print("  stuck from step", first, "actions there", acts[first-6:first+6])
