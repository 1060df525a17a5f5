"""The ladder's rows 1-3: one process that plays and trains in turn (CleanRL's loop shape), with
a deque of tuples (row 1), the uint8 replay (row 2) or 8 vector envs with batched acting
(row 3). Updates come when the library's replay-ratio rule says one is due, and epsilon follows
the collectors' schedule, so these rows differ from the pipeline rows only in what the ladder
adds."""
from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np
import torch

from .common import RssPeak, per_agent_step


def sync_row(kind: str, settings: dict, seconds: float, window_s: float) -> dict:
    """Row ``kind`` ("deque", "replay" or "vector") at ``settings`` (Config fields), measured for
    ``seconds`` after learning starts, in time windows of ``window_s``."""
    import collections
    import random

    from config_optimized import Config
    from pipeline.actors.collector import epsilon_schedule
    from pipeline.agent.learner import Learner
    from pipeline.replay.ratio import ReplayRatio
    from pipeline.replay import Replay
    from pipeline.actors.rollout import Rollout
    from wrappers import BatchedEnv, make_env

    rss = RssPeak()
    torch.set_num_threads(os.cpu_count() or 1)
    cfg = Config.of(**settings)
    torch.manual_seed(cfg.seed)
    opts = cfg.env_options
    gamma, bs = cfg.replay.gamma, cfg.learner.batch_size
    if kind == "deque":
        env = make_env(cfg.env, opts)
        n_actions, streams = int(env.action_space.n), 1
    else:
        env = BatchedEnv(cfg.env, opts, 8 if kind == "vector" else 1, native=kind == "vector")
        n_actions, streams = env.n_actions, env.num_envs
    learner = Learner(cfg.learner, cfg.env_options.frame_stack, n_actions, torch.device("cpu"))
    ratio = ReplayRatio(cfg.learner.replay_ratio, bs, cfg.learner.learning_starts, streams)
    rng = np.random.default_rng(cfg.seed)
    steps = trained = 0
    update_s = 0.0
    if kind == "deque":
        memory = collections.deque(maxlen=cfg.replay.buffer_size)
        obs, _ = env.reset(seed=cfg.seed)

        def play(eps):
            nonlocal obs
            if rng.random() < eps:  # the forward pass only for a greedy action, as in CleanRL's loop
                action = int(rng.integers(n_actions))
            else:
                with torch.no_grad():
                    action = int(learner.model(torch.from_numpy(obs)[None]).argmax(1))
            nxt, r, term, trunc, _ = env.step(action)
            memory.append((obs, action, r, nxt, term))
            obs = nxt if not (term or trunc) else env.reset()[0]
            return 1

        def sample():
            batch = random.sample(memory, bs)
            o, a, r, n, d = zip(*batch)
            return {"obs": np.stack(o), "next_obs": np.stack(n), "action": np.array(a),
                    "return": np.array(r, np.float32), "discount": gamma * (1 - np.array(d, np.float32)),
                    "weights": None}
    else:
        replay = Replay.of(cfg.replay.buffer_size, 1, env.num_envs, frame_stack=cfg.env_options.frame_stack,
                           n_step=cfg.replay.n_step, gamma=gamma, seed=cfg.seed)
        rollout = Rollout.of(env, learner.model, cfg.env_options, cfg.seed)

        def play(eps):
            frames, fields, live, _ = rollout.step(eps)
            replay.writer.write(0, frames, fields)
            return live

        def sample():
            return replay.sample(bs, learner.host_channels_last)
    rates, ups, busy, moved = [], [], [], []  # moved: (agent steps, samples trained) per window
    t_learn = None
    while True:
        steps += play(epsilon_schedule(cfg.collectors, steps))
        while ratio.update_due(steps, trained):
            t0 = time.perf_counter()
            learner.update([learner.to_device(sample())])
            update_s += time.perf_counter() - t0
            trained += bs
        if t_learn is None and trained:
            # the first window starts paid up, after the first update: started before it, the window
            # held one batch its own steps had not paid for (a slow row's one window read 12, not 8)
            t_learn = w_t = time.perf_counter()
            w_steps, w_trained, w_update = steps, trained, update_s
        if t_learn is not None and (now := time.perf_counter()) - w_t >= window_s:
            dt = now - w_t
            rates.append((steps - w_steps) / dt)
            ups.append((trained - w_trained) / bs / dt)
            busy.append((update_s - w_update) / dt)
            moved.append((steps - w_steps, trained - w_trained))
            w_t, w_steps, w_trained, w_update = now, steps, trained, update_s
            if now - t_learn >= seconds:
                break
    if kind == "deque":
        sizes = [sum(sys.getsizeof(x) for x in t) + sys.getsizeof(t) for t in random.sample(memory, 100)]
        bpt = statistics.fmean(sizes)
    else:
        bpt = replay.storage.bytes_per_transition()
    env.close()
    rates, ups, busy = rates[1:] or rates, ups[1:] or ups, busy[1:] or busy  # first window is warm-up
    moved = moved[1:] or moved
    return {"agent_steps_per_s": statistics.median(rates), "updates_per_s": statistics.median(ups),
            "samples_per_s": statistics.median(ups) * bs, "learner_busy": statistics.median(busy),
            "collector_wait": None, "drops": 0, "bytes_per_transition": bpt, "peak_rss_mb": rss.mb(),
            "windows": len(rates), "samples_per_agent_step": per_agent_step(moved),
            "agent_steps_measured": sum(m[0] for m in moved)}
