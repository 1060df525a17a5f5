"""How long Mario goes without passing his furthest x, per game, read from a run's saved replay
(replay.npz, the last 100k agent steps). The replay keeps no x, so progress is read from the
learned reward: Mario's reward is the x gained plus -1 per clock tick (and -25 / +50 at a
death / the flag), times --reward-scale; a step passes the furthest x where the running sum of
rewards (unscaled) rises above its best by at least 1. The clock's ticks make the sum fall
slowly while Mario stands, so a stand-still reads as no progress, as it is.

    python docs/data/mario_stallpen10_zen4_seed1/still_stretches.py RUN_DIR
"""
import json
import sys
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from pipeline.transition import FLAG_GET, LAST  # noqa: E402


def load(path: Path, name: str) -> np.ndarray:
    with zipfile.ZipFile(path) as z, z.open(f"{name}.npy") as f:
        return np.lib.format.read_array(f)


run = Path(sys.argv[1])
scale = json.loads((run / "config.json").read_text())["config"].get("reward_scale", 1.0)
replay = run / "replay.npz"
flags, pos, written, reward = (load(replay, n) for n in ("flags", "pos", "written", "reward"))
S, L = flags.shape
longest = {True: [], False: []}  # per game: its longest stretch, by whether it reached the flag
for s in range(S):
    n = int(min(written[s], L))
    order = np.arange(int(pos[s]) - n, int(pos[s])) % L  # oldest first
    f, r = flags[s, order].astype(np.int64), reward[s, order].astype(np.float64) / scale
    ends = np.flatnonzero(f & LAST)
    for a, b in zip(ends[:-1], ends[1:]):  # one whole game: the records after a reset's LAST up to the next
        best, still, stretch = 0.0, 0, 0
        for v in np.cumsum(r[a + 1:b]):
            if v >= best + 1:
                best, still = v, 0
            else:
                still += 1
                stretch = max(stretch, still)
        longest[bool(f[b] & FLAG_GET)].append(stretch)
print(f"{run}: the longest stretch without passing the furthest x, per game, in the replay's last games")
for got, games in ((True, longest[True]), (False, longest[False])):
    g = np.array(games)
    print(f"{'reached the flag' if got else 'did not'}: {len(g)} games; median {np.median(g):.0f} agent steps; "
          + ", ".join(f">= {k}: {np.mean(g >= k):.0%}" for k in (5, 8, 10, 15, 20, 30, 100)))
