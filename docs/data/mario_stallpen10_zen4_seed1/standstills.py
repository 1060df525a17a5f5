"""Per periodic evaluation of Mario runs: flags greedy / at epsilon, and how many games stood
still until the clock (longer than LONG agent steps; a game that reaches the flag takes ~300-400).

    python docs/data/mario_stallpen10_zen4_seed1/standstills.py RUN_DIR [RUN_DIR ...]
"""
import json
import sys
from pathlib import Path

LONG = 1500


def rows(run: Path):
    for line in (run / "evals.jsonl").read_text().splitlines():
        r = json.loads(line)
        plays = {p["epsilon"]: p for p in r.get("plays", [])}
        yield r["agent_steps"], r["phase"], plays


for run in map(Path, sys.argv[1:]):
    print(run)
    print("agent steps | phase | flags greedy | flags at 0.05 | greedy games > 1,500 steps | at 0.05 > 1,500")
    totals = {}
    for steps, phase, plays in rows(run):
        g, e = plays.get(0.0), plays.get(0.05)
        cell = lambda p, k: "-" if p is None else (sum(p["flags"]) if k == "f" else sum(l > LONG for l in p["lengths"]))
        print(f"{steps:,} | {phase} | {cell(g, 'f')} | {cell(e, 'f')} | {cell(g, 'l')} | {cell(e, 'l')}")
        if phase == "screen" and steps >= 200_000 and g is not None:
            t = totals.setdefault("x", [0, 0, 0, 0, 0])
            t[0] += 1; t[1] += sum(g["flags"]); t[2] += sum(e["flags"]); t[3] += cell(g, "l"); t[4] += cell(e, "l")
    if totals:
        n, fg, fe, lg, le = totals["x"]
        print(f"screens from 200k: {n}; per screen: flags greedy {fg / n:.1f}, at 0.05 {fe / n:.1f}; "
              f"greedy games > {LONG:,} steps {lg / n:.1f}, at 0.05 {le / n:.1f}")
