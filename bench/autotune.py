"""``--autotune``: a coordinate search over the system's knobs, each trial a short real run, and
the autotuned profile of the game's family that the auto profile then prefers."""
from __future__ import annotations

import json
import time

from .common import machine
from .ladder import run_row


def autotune(seconds: float, quick: bool = False, env: str = "ALE/Pong-v5") -> dict:
    """Coordinate search over the system's knobs (collector count, envs per collector, learner
    threads; never the batch size, which changes what is learned per update), each trial a
    short real run of ``env`` at the default replay ratio; the best becomes the autotuned
    profile of env's game family (pipeline.settings.profiles.autotuned_path), which the auto profile then
    prefers for that family only."""
    from pipeline.settings.hardware import detect_hardware
    from pipeline.settings.layers import resolve_config
    from pipeline.settings.profiles import autotuned_path, pick_profile, scale_profile
    from pipeline.records.record import write_json
    from presets import family_of

    hw = detect_hardware()
    base_name = pick_profile(hw)
    family = family_of(env)
    grid = [("num_collectors", [1] if quick else sorted({1, 2, max(1, hw.cores // 2)})),
            ("envs_per_collector", [8, 16] if quick else [4, 8, 16]),
            ("learner_threads", [0, hw.cores])]
    # Every trial is the run a user gets on this game (its preset, then the machine's profile;
    # never an older autotuned profile), with only the searched knobs set: Mario's preset changes
    # its actions and replay, and so what a step costs.
    base = resolve_config({"env": env, "profile": base_name}, hw).cfg
    best = {**{k: base.get(k) for k, _ in grid}, "learner_threads": 0}
    trials, tried = [], {}

    def score(over):
        key = json.dumps(over, sort_keys=True)
        if key not in tried:
            flags = {**over, "env": env, "profile": base_name, "replay_ratio": base.learner.replay_ratio,
                     **({"compile": False} if quick else {})}  # --quick: no compile in any trial
            res = run_row("profile", {"extra": flags}, seconds, quick=quick)
            tried[key] = res.get("agent_steps_per_s", 0.0) if "error" not in res else 0.0
            trials.append({"settings": {k: over[k] for k, _ in grid}, "agent_steps_per_s": tried[key],
                           "error": res.get("error")})
            print(f"  autotune {trials[-1]['settings']}: {tried[key]:,.0f} agent steps/s", flush=True)
        return tried[key]
    best_score = score(best)
    for knob, values in grid:
        for v in values:
            cand = {**best, knob: v}
            if (sc := score(cand)) > best_score * 1.03:  # within noise, keep the simpler setting
                best, best_score = cand, sc
    # the profile's own values with the best knobs on top: the autotuned profile replaces it
    best = {**scale_profile(base_name, hw, env), **{k: v for k, v in best.items() if k != "learner_threads" or v}}
    data = {"overrides": best, "family": family, "tuned_on": env, "based_on": base_name,
            "agent_steps_per_s": best_score, "trials": trials, "trials_compiled": not quick, "machine": machine(),
            "created": time.strftime("%Y-%m-%d %H:%M:%S")}
    path = autotuned_path(family)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, data)
    data["path"] = str(path)
    return data
