"""PYTHONPATH=. python docs/data/suite_mario_stages/suite-mario-2-2/escape_deaths.py RUN_DIR (from
the repository root; RUN_DIR keeps the weights, which docs/data does not). Output: escape_deaths.txt.

For greedy 2-2 deaths of the kept weights: at k agent steps before the death, would another
action of right_run (then greedy play) have lived 150 agent steps more
(or reached the flag)? Replays are exact:
the same reset seed gives the same no-op start and the NES is deterministic."""
import sys

import numpy as np

from mario_rl_optimized import load

agent = load(sys.argv[1])  # a run folder (its kept weights: best_eval.pt)
env = agent.make_env()
smb = env.unwrapped

def play(seed, prefix, limit=None):
    obs, info = env.reset(seed=seed)
    acts, qs = [], []
    for a in prefix:
        obs, r, term, trunc, info = env.step(a); acts.append(a)
        if term or trunc: return acts, qs, smb._x_position, smb._flag_get, True
    n = 0
    while limit is None or n < limit:
        q = agent.q_values(obs); a = int(np.argmax(q)); qs.append(q)
        obs, r, term, trunc, info = env.step(a); acts.append(a); n += 1
        if term or trunc: return acts, qs, smb._x_position, smb._flag_get, True
    return acts, qs, smb._x_position, smb._flag_get, False

for seed in range(200, 210):
    acts, qs, x, flag, ended = play(seed, [])
    if flag: continue
    T = len(acts)
    print(f"seed {seed}: died at x {x} after {T} steps; last Q (right+B, right+A+B, right+A):",
          [np.round(q, 2).tolist() for q in qs[-3:]])
    for k in (1, 2, 3, 4, 6, 8, 12):
        saved = []
        for alt in range(3):
            if alt == acts[T - k]: continue
            a2, _, x2, f2, e2 = play(seed, acts[:T - k] + [alt], limit=150)
            saved.append(f"a{alt}: {'flag' if f2 else ('alive' if not e2 else 'dies')} x {x2}")
        print(f"   k={k:2d} (took a{acts[T-k]}):", "; ".join(saved))
