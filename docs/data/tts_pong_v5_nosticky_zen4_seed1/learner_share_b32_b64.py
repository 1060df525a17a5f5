"""bench/learner_share.py's conditions at batch 32 and 64 (eager learner, co-runner 25% of a core), 2 rounds."""
import json, sys
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[3]))  # the repository root
from bench.learner_share import learner_share

if __name__ == "__main__":
    out = {}
    for r in range(2):
        for bs in (32, 64):
            res = learner_share(rounds=4, duty=0.25, batch_size=bs)
            out.setdefault(bs, []).append(res)
            print(bs, json.dumps(res, default=str)[:700], flush=True)
    json.dump(out, open("learner_share_b32_b64_zen4.json", "w"), default=str)
