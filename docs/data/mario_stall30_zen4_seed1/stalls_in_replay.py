"""How often --stall-steps cut a learning episode in the last 100k agent steps of a Mario run, read
from the replay it saved at its end (replay.npz): in a single-stage Mario run every game's own end
(a death, the flag, the clock) is a TERM record followed in its env's stream by the reset's LAST
record; a stall is a TERM followed by the game going on.

    python docs/data/mario_stall30_zen4_seed1/stalls_in_replay.py RUN_DIR [RUN_DIR ...]
"""
import json
import sys
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from pipeline.transition import EP_END, FLAG_GET, LAST, TERM  # noqa: E402


def load(path: Path, name: str) -> np.ndarray:
    with zipfile.ZipFile(path) as z, z.open(f"{name}.npy") as f:
        return np.lib.format.read_array(f)


for run in map(Path, sys.argv[1:]):
    replay = run / "replay.npz"
    flags, pos, written = (load(replay, n) for n in ("flags", "pos", "written"))
    S, L = flags.shape
    stalls = games = flag_games = records = 0
    for s in range(S):
        n = int(min(written[s], L))
        order = (np.arange(int(pos[s]) - n, int(pos[s])) % L)  # oldest first
        f = flags[s, order].astype(np.int64)
        term, nxt = f[:-1] & TERM, f[1:]
        stalls += int(((term != 0) & ((nxt & LAST) == 0)).sum())
        games += int(((f & EP_END) != 0).sum())
        flag_games += int(((f & FLAG_GET) != 0).sum())
        records += int(((f & LAST) == 0).sum())
    cfg = json.loads((run / "config.json").read_text())["config"]
    print(f"{run}: --stall-steps {cfg.get('stall_steps', 0)}; last {records:,} agent steps in the replay: "
          f"{games:,} games ended ({flag_games:,} at the flag), {stalls:,} learning episodes cut by a stall "
          f"({stalls / max(records, 1) * 1000:.2f} per 1,000 agent steps)")
