"""The baseline recipe of ``--time-to-score --vs-baseline``: the ladder's row 1 algorithm
trained in one process, acting and training in turn, its games written to episodes.jsonl the
way the trainer writes them so that both runs are scored alike."""
from __future__ import annotations

import json
import os
import time

import torch

from .common import run_in_child

# The ladder's row 1 algorithm (CleanRL's dqn_atari): Nature DQN in fp32, batch 32 every 4 agent
# steps, plain (not Double) DQN with 1-step targets, the target synced every 1,000 agent steps
# (250 updates), a constant lr 1e-4 (lr_decay_steps=0 records it: this loop never sets the rate, so
# a preset's schedule would otherwise show in the baseline's settings without being trained),
# no gradient clipping; one env, acting and training in turn in one process.
BASELINE_RECIPE = dict(model_arch="nature", amp=False, compile=False, channels_last=False, batch_size=32,
                       grad_accum_steps=1, replay_ratio=8.0, target_update_interval=250, lr=1e-4, lr_decay_steps=0, n_step=1,
                       double_dqn=False, max_grad_norm=0.0, dueling=False, prioritized=False,
                       num_collectors=1, envs_per_collector=1)


def _baseline_entry(cfg_dict: dict, run_dir: str, out_q) -> None:
    """The baseline recipe for cfg.run.time_limit minutes, writing episodes.jsonl rows the way the
    trainer does, so both runs are scored by the same ScoreTracker."""
    import contextlib

    try:
        from config_optimized import Config
        from pipeline.actors.collector import epsilon_schedule
        from pipeline.transport.games import finished_games
        from pipeline.records.episodes import ScoreTracker, episode_row
        from pipeline.records.files import EPISODES_NAME
        from pipeline.agent.learner import Learner
        from pipeline.replay.ratio import ReplayRatio
        from pipeline.replay import Replay
        from pipeline.actors.rollout import Rollout
        from wrappers import BatchedEnv

        cfg = Config.of(**cfg_dict)
        torch.set_num_threads(os.cpu_count() or 1)  # one process: it may use every core
        torch.manual_seed(cfg.seed)
        env = BatchedEnv(cfg.env, cfg.env_options, 1, native=False)
        learner = Learner(cfg.learner, cfg.env_options.frame_stack, env.n_actions, torch.device("cpu"))
        replay = Replay.of(cfg.replay.buffer_size, 1, 1, frame_stack=cfg.env_options.frame_stack,
                           n_step=cfg.replay.n_step, gamma=cfg.replay.gamma, seed=cfg.seed)
        rollout = Rollout.of(env, learner.model, cfg.env_options, cfg.seed)
        ratio = ReplayRatio(cfg.learner.replay_ratio, cfg.learner.batch_size, cfg.learner.learning_starts, env.num_envs)
        tracker = ScoreTracker([cfg.run.target_score] if cfg.run.target_score is not None else [], metric=cfg.run.score_metric)
        t0, steps, trained = time.monotonic(), 0, 0
        with open(os.path.join(run_dir, EPISODES_NAME), "w", buffering=1) as f, \
                contextlib.redirect_stdout(open(os.devnull, "w")):
            while time.monotonic() - t0 < cfg.run.time_limit * 60 and steps < cfg.total_steps and not tracker.reached:
                learner.model.eval()  # act on running statistics, as the collectors do
                frames, fields, live, _ = rollout.step(epsilon_schedule(cfg.collectors, steps))
                replay.writer.write(0, frames, fields)
                steps += live
                while ratio.update_due(steps, trained):
                    learner.update([learner.batch_from(replay, cfg.learner.batch_size)])
                    trained += cfg.learner.batch_size
                for ep in finished_games(fields, steps, time.monotonic(), env.family.game_stats):
                    row = episode_row(ep, ep.t - t0, learner.updates, trained)
                    f.write(json.dumps(row) + "\n")
                    tracker.add_row(row)
        env.close()
        out_q.put({"agent_steps": steps, "updates": learner.updates, "samples_trained": trained,
                   "wall_s": time.monotonic() - t0})
    except BaseException as e:
        import traceback

        out_q.put({"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})


def run_baseline(cfg, run_dir: str) -> dict:
    """The baseline recipe at ``cfg`` in a fresh process; its totals, or an error."""
    return run_in_child(_baseline_entry, (cfg.flat(), run_dir), "the baseline's")
