"""Last-20 mean return of Pong (no sticky actions) at equal agent steps: the 8 x 2 layout run
beside the CPU default's (1 x 8) seeds 1 and 2."""
import json, sys
from pathlib import Path

def curve(path):
    g = [json.loads(l) for l in open(path)]
    k = "agent_steps" if "agent_steps" in g[0] else "env_steps"
    out, last = [], []
    for x in g:
        last = (last + [x["return"]])[-20:]
        out.append((x[k], sum(last) / len(last)))
    return out

def at(c, s):
    before = [m for a, m in c if a <= s]
    return before[-1] if before else None

def first(c, v):
    return next((a for a, m in c if m >= v), None)

runs = {"1x8 seed 1": "docs/data/tts_pong_v5_nosticky_zen5_noddqn_seed1/episodes.jsonl",
        "1x8 seed 2": "docs/data/tts_pong_v5_nosticky_zen5_noddqn_seed2/episodes.jsonl",
        "8x2 seed 1": sys.argv[1] if len(sys.argv) > 1 else "docs/data/pong_nosticky_8x2_zen5_seed1_partial/episodes.jsonl"}
curves = {n: curve(p) for n, p in runs.items() if Path(p).exists()}
steps = [50_000 * k for k in range(1, 10)]
print("| layout, seed | " + " | ".join(f"{s // 1000}k" for s in steps) + " | -10 at | 0 at | +10 at | +18 at |")
print("|---" * (len(steps) + 5) + "|")
for n, c in curves.items():
    cells = [("-" if at(c, s) is None or s > c[-1][0] else f"{at(c, s):+.1f}") for s in steps]
    marks = [(f"{first(c, v):,}" if first(c, v) else "-") for v in (-10, 0, 10, 18)]
    print(f"| {n} | " + " | ".join(cells) + " | " + " | ".join(marks) + " |")
