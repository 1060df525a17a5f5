"""Learner-alone updates/s of the Atari preset (Pong, this machine's profile) and recipe variants,
interleaved rounds, medians. Samples/s = updates/s x batch.
Run from anywhere with the project's environment: .venv/bin/python docs/data/tts_pong_v5_nosticky_zen4_seed1/variants.py 2"""
import json, sys, statistics
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository root
from bench.learner_grid import learner_updates_per_s
from pipeline.settings.layers import resolve_config
from pipeline.settings.hardware import detect_hardware

hw = detect_hardware()
torch.set_num_threads(2)
base = resolve_config({"env": "ALE/Pong-v5"}, hw).cfg
variants = {"b32": {}, "b32_nodouble": {"double_dqn": False}, "b64": {"batch_size": 64},
            "b64_nodouble": {"batch_size": 64, "double_dqn": False},
            "impala_s": {"model_arch": "impala-s"}}
res = {k: [] for k in variants}
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
    for k, over in variants.items():
        cfg = base.replace(**over)
        ups = learner_updates_per_s(cfg, 4)
        res[k].append(ups * cfg.learner.batch_size)
        print(r, k, f"{ups:.1f} updates/s, {ups * cfg.learner.batch_size:.0f} samples/s", flush=True)
med = {k: statistics.median(v) for k, v in res.items()}
print(json.dumps({"cpu": hw.cpu_id, "samples_per_s": res, "median": med,
                  "vs_b32": {k: v / med["b32"] for k, v in med.items()}}, indent=1))
