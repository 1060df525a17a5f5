"""Training games of two Mario runs side by side, per window of agent steps: games, the share
that reached the flag and the mean distance (episodes.jsonl, whole games).

    python docs/data/mario_stall30_zen4_seed1/compare_training_games.py RUN_A RUN_B [WINDOW]

RUN: a run folder, or a docs/data folder holding its episodes.jsonl.gz
"""
import gzip
import json
import statistics
import sys
from pathlib import Path

runs = [Path(a) for a in sys.argv[1:3]]
window = int(sys.argv[3]) if len(sys.argv) > 3 else 100_000


def games(run: Path) -> list[dict]:
    """A run folder's episodes.jsonl, or the gzipped copy docs/data keeps."""
    plain, packed = run / "episodes.jsonl", run / "episodes.jsonl.gz"
    text = plain.read_text() if plain.is_file() else gzip.decompress(packed.read_bytes()).decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


rows = [games(r) for r in runs]
end = max(g[-1]["agent_steps"] for g in rows)
print("| agent steps | " + " | ".join(f"{r}: games, flag share, mean distance" for r in runs) + " |")
print("|---|" + "---|" * len(runs))
for lo in range(0, end, window):
    cells = []
    for g in rows:
        w = [x for x in g if lo < x["agent_steps"] <= lo + window]
        if not w:
            cells.append("-")
            continue
        share = sum(bool(x.get("flag")) for x in w) / len(w)
        cells.append(f"{len(w)}, {100 * share:.0f}%, {statistics.fmean(x['distance'] for x in w):,.0f}")
    print(f"| {lo // 1000}k-{(lo + window) // 1000}k | " + " | ".join(cells) + " |")
