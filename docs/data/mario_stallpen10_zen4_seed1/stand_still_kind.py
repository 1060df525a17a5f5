"""Why a Mario checkpoint's greedy games stand still: plays the no-op-start seeds FIRST..LAST-1
greedily (one Python env, up to 600 agent steps each) and, for each game still going then, says
where Mario stood and what the policy pressed there over its last 24 agent steps. Under
right_run (right+B, right+A+B, right+A) two kinds appear:
- "A held": it presses only right+A+B and right+A, both with A down; NES Mario starts a jump only
  when A goes down, so he never jumps again. The frames do not show that A is held, so the
  values of the jump actions there are those of the states where A was let go.
- "right+B": it presses right+B against a wall; the jump's value there is below running's.

    python docs/data/mario_stallpen10_zen4_seed1/stand_still_kind.py RUN/weights.pt FIRST LAST
"""
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from models.dqn import build_model  # noqa: E402
from pipeline.evaluation.evaluate import trained_config  # noqa: E402
from pipeline.records import checkpoint as ckpt  # noqa: E402
from wrappers import make_env  # noqa: E402

NAMES = ("right+B", "right+A+B", "right+A")  # right_run's actions, in order
HOLD_A = {1, 2}

path = sys.argv[1]
state = ckpt.load(path)
meta = state["meta"]
cfg = trained_config(state, ckpt.checkpoint_file(path).parent)
assert cfg.env_options.mario_actions == "right_run", "the kinds are right_run's"
model = build_model(meta["model_arch"], meta["frame_stack"], meta["n_actions"], meta["dueling"],
                    meta.get("quantiles", 0), meta.get("iqn_taus", 0))
model.load_state_dict(ckpt.policy_weights(state["learner"]))
model.eval()
o = cfg.env_options
env = make_env(
    cfg.env, noop_max=o.noop_max, mario_actions=o.mario_actions, clip_rewards=False, mark_action=o.mark_action)
torch.set_num_threads(1)
kinds = {}
print(f"{path}: greedy games, no-op-start seeds {sys.argv[2]}..{int(sys.argv[3]) - 1}")
for seed in range(int(sys.argv[2]), int(sys.argv[3])):
    obs, _ = env.reset(seed=seed)
    acts, xs, qs = [], [], []
    info = {}
    for t in range(600):
        with torch.no_grad():
            q = model(torch.from_numpy(np.asarray(obs))[None]).float()[0]
        a = int(q.argmax())
        acts.append(a)
        qs.append(q.numpy())
        obs, r, term, trunc, info = env.step(a)
        xs.append(info["x_pos"])
        if term or trunc:
            break
    if len(xs) < 600:
        print(f"seed {seed}: {'the flag' if info.get('flag_get') else 'died'} at x {xs[-1]}, {len(xs)} agent steps")
        continue
    last = acts[-24:]
    kind = "A held" if set(last) <= HOLD_A else "right+B" if set(last) == {0} else "mixed"
    kinds[kind] = kinds.get(kind, 0) + 1
    q = np.mean(qs[-24:], axis=0)
    print(f"seed {seed}: STOOD at x {xs[-1]} from agent step {xs.index(xs[-1])}; last 24 actions: "
          + ", ".join(f"{NAMES[i]} {last.count(i)}" for i in range(3) if last.count(i))
          + f" -> {kind}; mean Q there: " + ", ".join(f"{n} {v:.2f}" for n, v in zip(NAMES, q)))
print("stood still:", kinds or "none")
