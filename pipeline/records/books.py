"""The run's books: where it stands (the counters its checkpoint carries), the games it played
(``episodes.jsonl`` and the score they add up to), its epochs (two ``[MAIN]`` lines and a
``metrics.jsonl`` row each), the weights it keeps (``checkpoint.pt``, ``best.pt``) and its
record (``config.json``, TensorBoard, W&B). The trainer tells the books what happened; they
decide what is written where."""
from __future__ import annotations

import json
import time
from pathlib import Path

from wrappers.families import game_family

from ..actors.collector import epsilon_schedule
from ..evaluation.periodic_eval import run_eval_plan
from ..transport.games import Episode
from ..agent.learner import lr_schedule
from ..settings.profiles import profile_reason
from . import checkpoint as ckpt
from .counters import RunCounters
from .episodes import SCORE_WINDOW, ScoreTracker, episode_row, read_episodes
from .epoch_stats import EpochEnd, EpochWindow, PathMark, epoch_report, eta, trained_at_its_ratio
from .files import BEST_NAME, CHECKPOINT_NAME, EPISODES_NAME
from .metrics import MetricsLog
from .record import record_markdown, run_record, write_record
from .tracking import Tracker


class RunBooks:
    """Open on a run folder (``start``: where the run stood before this process, as ``resume``
    read it); ``close`` closes its files. ``learner`` and ``replay`` are what a checkpoint saves
    besides the counters (the weights, the sampler's random state)."""

    def __init__(self, cfg, hw, log, notes: list[str], start: RunCounters, t_start: float, learner, replay,
                 n_actions: int):
        run = cfg.run
        self.cfg, self.log, self.run_dir = cfg, log, Path(run.run_dir)
        self.start, self.t_start = start, t_start
        self.learner, self.replay, self.n_actions = learner, replay, n_actions
        self.game = game_family(cfg.env)  # what its games add to the epoch lines and metrics rows
        self.episodes, self.samples_trained = start.episodes, start.samples_trained
        self.epoch, self.best_score = start.epoch, start.best_score
        self.score = ScoreTracker([] if run.target_score is None else [run.target_score], metric=run.score_metric)
        self.target_reached = False  # by this process's games: the run stops at the next look
        self.eval_metric = run_eval_plan(cfg)[0]  # what best_eval is in
        if start.episodes:  # resumed: the last 20 games go on from the ones before it (up to its checkpoint)
            self.score.replay_rows([r for r in read_episodes(self.run_dir) if r["agent_steps"] <= start.agent_steps])
        self.record = {**run_record(cfg, hw, cfg.profile, profile_reason(cfg.profile, hw, cfg.env)), "notes": list(notes)}
        self.tracker = self.metrics = self.episodes_file = None
        try:
            self.tracker = Tracker(self.run_dir, run.wandb_project, run.wandb_entity, self.record) if run.track else None
            self.metrics = MetricsLog(self.run_dir, run.tensorboard, self.game.tb_tags)
            write_record(self.run_dir, self.record)
            self.metrics.text("run_record", record_markdown(self.record))
            self.episodes_file = open(self.run_dir / EPISODES_NAME, "a", buffering=1)
        except BaseException:
            self.close()
            raise

    def wall_s(self, t: float) -> float:
        """The run's wall clock at monotonic time ``t``: a resumed run's earlier parts included."""
        return self.start.wall_s + t - self.t_start

    def epsilon(self, agent_steps: int) -> float:
        return epsilon_schedule(self.cfg.collectors, agent_steps)

    # ------------------------------------------------------------------ games
    def add_games(self, games: list[Episode], updates: int) -> bool:
        """Record whole games (``Episode.agent_steps`` counted from this process's start); True
        once the score has reached --target-score, in these games or in any booked before by this
        process (games booked at an epoch's end, whose answer no one reads, still stop the run)."""
        for ep in games:
            row = episode_row(ep._replace(agent_steps=self.start.agent_steps + ep.agent_steps), self.wall_s(ep.t),
                              updates, self.samples_trained)
            self.episodes_file.write(json.dumps(row) + "\n")
            self.episodes += 1
            for m in self.score.add_row(row):
                self.log(f"[MAIN] Score: mean {self.score.metric} of the last {self.score.window} games reached "
                         f"{m.value:g} at {m.minutes:.1f} min, {m.agent_steps:,} agent steps, {m.updates:,} updates")
                self.target_reached = True
        return self.target_reached

    # ------------------------------------------------------------------ epochs
    def end_epoch(self, window: EpochWindow, at: PathMark, launches: int, best_eval: float,
                  eval_summary: str | None = None, other_runs: int = 0) -> None:
        """An epoch's two log lines and metrics row (``eval_summary``: the last evaluation's, where
        the game family's line shows one: Mario's flags; ``other_runs``: training runs beside this
        one now); best.pt when the last-20 mean beats every earlier epoch's (free: it uses the
        games training played anyway)."""
        cfg = self.cfg
        self.epoch += 1
        sps = (at.agent_steps - window.start.agent_steps) / max(at.t - window.start.t, 1e-9)
        wall_s = self.wall_s(at.t)
        end = EpochEnd(at, self.epoch, self.score.window_means(), self.episodes, self.epsilon(at.agent_steps),
                       len(self.replay), self.samples_trained, cfg.learner.effective_batch, self.game, wall_s,
                       eta(cfg.total_steps, at.agent_steps, sps, cfg.run.time_limit, wall_s,
                           trained_at_its_ratio(at.agent_steps - window.start.agent_steps,
                                                at.updates - window.start.updates, cfg.learner.effective_batch,
                                                cfg.learner.replay_ratio)), eval_summary,
                       lr_schedule(cfg.learner, at.agent_steps) if cfg.learner.lr_decay_steps else None, other_runs,
                       self.game.rule_on(cfg.env_options))
        lines, row = epoch_report(window, end)
        for line in lines:
            self.log(line)
        self.metrics.write(row)
        score = self.score.mean
        if score is not None and score > self.best_score:
            self.best_score = score
            metric = self.score.metric
            path = self.save_checkpoint(at.agent_steps, launches, best_eval, BEST_NAME,
                                        best={"metric": metric, "score": score, "agent_steps": at.agent_steps,
                                              "updates": at.updates})
            self.log(f"[MAIN] Best so far: mean {metric} {score:.2f} of the last {SCORE_WINDOW} games at "
                     f"{at.agent_steps:,} agent steps; weights in {path}")

    # ------------------------------------------------------------------ checkpoints
    def counters(self, agent_steps: int, launches: int, best_eval: float, owed_updates: int = 0) -> RunCounters:
        """Where the run stands now; ``agent_steps``, ``launches``, ``best_eval`` and
        ``owed_updates`` are counted by the data path, the collectors' supervisor, the periodic
        evaluation and the replay ratio."""
        return RunCounters(agent_steps, self.episodes, self.samples_trained, self.wall_s(time.monotonic()), self.epoch,
                           launches, self.best_score, best_eval, owed_updates)

    def save_checkpoint(self, agent_steps: int, launches: int, best_eval: float, name: str = CHECKPOINT_NAME,
                        best: dict | None = None, owed_updates: int = 0) -> Path:
        """The learner, every random state and the counters, atomically, as ``name`` in the run
        folder (``best``: the score that chose these weights, for best.pt)."""
        self.learner.require_finite()
        path = self.run_dir / name
        counters = self.counters(agent_steps, launches, best_eval, owed_updates)
        rng = self.replay.rng_state()
        ckpt.save(path, ckpt.training_state(self.cfg, self.n_actions, self.learner.state_dict(),
                                            counters.to_checkpoint(self.score.metric, self.epsilon(agent_steps),
                                                                   self.eval_metric),
                                            rng["sampler"], best, shift_rng=rng["shift"]))
        return path

    def close(self) -> None:
        for f in (self.metrics, self.tracker, self.episodes_file):
            if f is not None:
                f.close()
        self.metrics = self.tracker = self.episodes_file = None
