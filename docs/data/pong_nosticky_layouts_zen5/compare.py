"""Pong without sticky actions, last-20 mean return at equal agent steps: the collector layouts
2 x 8 and 8 x 2 (16 env streams each) beside the CPU default's 1 x 8 runs of results.md.
Run from the repository root: python docs/data/pong_nosticky_layouts_zen5/compare.py"""
import json
from pathlib import Path

HERE = Path(__file__).parent
RUNS = {"1 x 8, seed 1": HERE.parent / "tts_pong_v5_nosticky_zen5_noddqn_seed1" / "episodes.jsonl",
        "1 x 8, seed 2": HERE.parent / "tts_pong_v5_nosticky_zen5_noddqn_seed2" / "episodes.jsonl",
        **{f"{n} x {e}, seed {s}": HERE / f"{n}x{e}_seed{s}" / "episodes.jsonl"
           for n, e in ((2, 8), (8, 2)) for s in (1, 2)}}


def curve(path):
    games = [json.loads(line) for line in open(path)]
    key = "agent_steps" if "agent_steps" in games[0] else "env_steps"
    out, last = [], []
    for g in games:
        last = (last + [g["return"]])[-20:]
        out.append((g[key], sum(last) / len(last)))
    return out


def at(c, steps):
    before = [m for a, m in c if a <= steps]
    return before[-1] if before and steps <= c[-1][0] else None


def first(c, value):
    return next((a for a, m in c if m >= value), None)


steps = [50_000 * k for k in range(1, 10)]
print("| layout, seed | " + " | ".join(f"{s // 1000}k" for s in steps) + " | -10 at | 0 at | +10 at | +18 at |")
print("|---" * (len(steps) + 5) + "|")
for name, path in RUNS.items():
    if not path.exists():
        continue
    c = curve(path)
    cells = ["-" if at(c, s) is None else f"{at(c, s):+.1f}" for s in steps]
    marks = [f"{first(c, v):,}" if first(c, v) else "-" for v in (-10, 0, 10, 18)]
    print(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(marks) + " |")
