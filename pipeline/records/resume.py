"""What a run carries across a stop and ``--resume``: the counters in its checkpoint (agent
steps, games, samples trained, updates owed, wall clock, epoch, collector starts, best scores),
the learner and every random state, and the replay saved beside the final checkpoint."""
from __future__ import annotations

import json
import time
from pathlib import Path

from wrappers.families import game_family

from ..evaluation.periodic_eval import read_pending, run_eval_plan
from ..replay import Storage
from . import checkpoint as ckpt
from . import replay_snapshot as snapshot
from .atomic import atomic_write
from .counters import RunCounters
from .file_keys import current_keys
from .files import (BEST_EVAL_NAME, BEST_NAME, CANDIDATE_NAME, CHECKPOINT_NAME, EPISODES_NAME, EVALS_NAME,
                    METRICS_NAME, REPLAY_NAME, after_checkpoint_name)


def check_resume(cfg) -> None:
    """Fail on a checkpoint or replay file that cannot continue this run, before any process starts."""
    run_dir = Path(cfg.run.run_dir)
    path = run_dir / CHECKPOINT_NAME
    state = ckpt.load(path, cfg.env, None, cfg.env_options.frame_stack)
    # The run's config.json keeps the network fixed on a resume; for a run saved before run records,
    # only the checkpoint can say what network its weights fit.
    for key in ckpt.NETWORK_KEYS:
        if key in state["meta"] and state["meta"][key] != cfg.get(key):
            raise ckpt.CheckpointError(f"checkpoint {path} was trained with --{key.replace('_', '-')} "
                                       f"{state['meta'][key]!r} but this run has {cfg.get(key)!r}; resume with the "
                                       "settings it was trained with, or start a new run without --resume")
    # read whole now (a damaged one is one line, ConfigError), not once the collectors run
    pending = owed_evaluation(run_dir)
    # --total-steps and --time-limit count the whole run, earlier sessions included: one the run
    # has already reached would stop it as soon as it started, unless something is still owed
    # there (updates its collectors paid for, an evaluation the stop cut short), which the
    # resume plays before it stops
    c = state.get("counters", {})
    if c.get("agent_steps", 0) >= cfg.total_steps and not owed_updates(run_dir, c, cfg.run.save_replay) and not pending:
        raise ckpt.CheckpointError(f"--resume: {path} is at {c['agent_steps']:,} agent steps, which --total-steps "
                                   f"{cfg.total_steps:,} already reaches; give a larger --total-steps to train on")
    if cfg.run.time_limit and c.get("wall_s", 0.0) >= cfg.run.time_limit * 60 and not pending:
        raise ckpt.CheckpointError(f"--resume: the run has trained {c['wall_s'] / 60:.1f} minutes, which --time-limit "
                                   f"{cfg.run.time_limit:g} already reaches (it counts the whole run, resumes "
                                   "included); give a larger --time-limit to train on")
    replay = run_dir / REPLAY_NAME
    if cfg.run.save_replay and replay.exists():
        streams = cfg.collectors.env_streams
        saved = snapshot.check_fits(replay, cfg.env, cfg.env_options.frame_stack,
                                    Storage.fitted_capacity(cfg.replay.buffer_size, streams), streams)
        # the file the run will load (``resume`` loads it only if it was saved with this checkpoint):
        # read it whole now, so that damage is refused here and not half-way through the load
        if saved["agent_steps"] == state.get("counters", {}).get("agent_steps"):
            snapshot.verify(replay)


def owed_updates(run_dir: Path, counters: dict, save_replay: bool = True) -> int:
    """The updates a resume of ``run_dir`` trains before anything else: the ones its checkpoint's
    agent steps (``counters``) had paid for and its learner had not trained when it stopped (the
    collectors run up to ``ReplayRatio.slack`` steps ahead), where the replay saved with that
    checkpoint is there to train them on. A run stopped by a signal at its --total-steps resumes
    to train these and stop, as it would have had it not been stopped."""
    owed = int(counters.get("owed_updates", 0))
    path = Path(run_dir) / REPLAY_NAME
    if not owed or not save_replay or not path.is_file():
        return 0
    try:
        saved_at = snapshot.read_meta(path).get("agent_steps")
    except snapshot.ReplayFileError:
        return 0  # a damaged replay trains nothing (check_resume names it where a resume goes on)
    return owed if saved_at == counters.get("agent_steps") else 0


def owed_evaluation(run_dir: Path) -> dict | None:
    """The evaluation a stop cut short (``eval_pending.json``, with the weights it was playing,
    ``eval_candidate.pt``), which a resume plays first, even one at the run's --total-steps or
    --time-limit: the stop there waits for a running evaluation, and a Ctrl-C during that wait
    would otherwise lose it for good. None where none is owed; ConfigError where the file is damaged."""
    state = read_pending(run_dir)
    return state if state is not None and (Path(run_dir) / CANDIDATE_NAME).is_file() else None


def resume(run_dir: Path, cfg, n_actions: int, learner, replay, log) -> tuple[RunCounters, int]:
    """Load the run's checkpoint into ``learner`` and the random states, and its saved replay into
    ``replay`` where it belongs to that checkpoint. Returns the counters and the agent steps still
    to collect before training goes on (the rest of warm-up, or a whole refill)."""
    path = run_dir / CHECKPOINT_NAME
    state = ckpt.load(path, cfg.env, n_actions, cfg.env_options.frame_stack)
    try:
        learner.load_state_dict(state["learner"])
    except (KeyError, RuntimeError, ValueError, TypeError) as e:  # torch names the tensors that do not fit
        raise ckpt.CheckpointError(f"checkpoint {path} does not fit this run's learner ({type(e).__name__}: "
                                   f"{' '.join(str(e).split())[:300]}); resume with the settings it was trained with, "
                                   "or start a new run without --resume") from None
    if learner.scaler.is_enabled() and not state["learner"]["scaler"]:
        log(f"[MAIN] {path} was trained without fp16 loss scaling (CPU bf16 or fp32); this run uses fp16: its "
            "GradScaler starts at the initial scale")
    c = state["counters"]
    counters = RunCounters.from_checkpoint(c)
    # checkpoints before best_metric was saved measured Mario in distance and the rest in return
    was = c.get("best_metric", game_family(cfg.env).old_score_metric)
    if was != cfg.run.score_metric:
        counters.best_score = float("-inf")
        log(f"[MAIN] The best training score so far was in {was}, this run measures {cfg.run.score_metric}: "
            "best.pt starts over")
    eval_metric = run_eval_plan(cfg)[0]
    was_eval = c.get("best_eval_metric", was)  # one metric for both before evaluations had their own
    if was_eval != eval_metric:
        counters.best_eval = float("-inf")
        log(f"[MAIN] The best evaluation so far was in {was_eval}, this run's evaluations score {eval_metric}: "
            "best_eval.pt starts over")
    # best.pt and best_eval.pt may be newer than the checkpoint (a kill between them): each
    # carries its own score, and the bar is the highest, so worse weights never replace them
    files = kept_scores(run_dir, {BEST_NAME: cfg.run.score_metric, BEST_EVAL_NAME: eval_metric})
    counters.best_score = max(counters.best_score, files.get(BEST_NAME, float("-inf")))
    counters.best_eval = max(counters.best_eval, files.get(BEST_EVAL_NAME, float("-inf")))
    replay.set_rng_state(ckpt.restore_rng(state))
    set_aside_rows_after(run_dir, counters.agent_steps, log)
    say_owed_evaluation(run_dir, cfg, counters, log)
    log.start_at(counters.agent_steps)
    log(f"[MAIN] Resumed {path}: {counters.agent_steps:,} agent steps, {learner.updates:,} updates, "
        f"epoch {counters.epoch}")
    starts = cfg.learner.learning_starts
    if _restore_replay(run_dir, cfg, replay, counters.agent_steps, log):
        if counters.owed_updates:
            log(f"[MAIN] The agent steps played had paid for {counters.owed_updates:,} updates the learner had not "
                "trained when the run stopped (the collectors' head start): it trains them first")
        return counters, max(0, starts - len(replay))  # a replay saved during warm-up still needs the rest of it
    counters.owed_updates = 0  # a refill plays new steps: training starts over at the ratio
    return counters, starts


def say_owed_evaluation(run_dir: Path, cfg, counters: RunCounters, log) -> None:
    """One line where the run resumes at its length only to play the evaluation a stop cut short."""
    pending = owed_evaluation(run_dir)
    if pending is None:
        return
    if counters.agent_steps >= cfg.total_steps:
        at = f"--total-steps ({counters.agent_steps:,} agent steps)"
    elif cfg.run.time_limit and counters.wall_s >= cfg.run.time_limit * 60:
        at = f"--time-limit ({counters.wall_s / 60:.1f} minutes trained)"
    else:
        return
    what = "confirmation" if pending["phase"] == "confirm" else "evaluation"
    log(f"[MAIN] The run is at its {at}: it plays the {what} at {pending['agent_steps']:,} agent steps that the last "
        "stop cut short, then stops")


def set_aside_rows_after(run_dir: Path, agent_steps: int, log) -> None:
    """A run stopped without a clean save (killed) may have written games, epochs and evaluations
    after its last checkpoint, and half a line at the end. The resumed run plays from the
    checkpoint again, so those rows would stand twice in its timeline (the last-20 mean, the
    curves, the benchmarks' milestones, the Mario report's screenings and the finished agent a
    suite reads all go by the files in order), and its first appended row would join the half
    line and be lost with it. They move, as written, to ``after_checkpoint_name(NAME)`` beside the file."""
    for name in (EPISODES_NAME, METRICS_NAME, EVALS_NAME):
        path = run_dir / name
        if not path.exists():
            continue
        text = path.read_text()
        keep, aside = [], []
        for line in text.splitlines(keepends=True):
            try:
                late = current_keys(json.loads(line)).get("agent_steps", 0) > agent_steps
            except json.JSONDecodeError:
                late = True  # a half-written line
            (aside if late else keep).append(line if line.endswith("\n") else line + "\n")
        if not aside and (not text or text.endswith("\n")):
            continue
        side = run_dir / after_checkpoint_name(name)
        with open(side, "a") as f:
            f.writelines(aside)
        with atomic_write(path, "w") as f:
            f.write("".join(keep))
        log(f"[MAIN] {path}: {len(aside)} row(s) written after the checkpoint at {agent_steps:,} agent steps (the run "
            f"stopped without a clean save) moved to {side.name}; the resumed run plays on from the checkpoint")


def kept_scores(run_dir: Path, metrics: dict[str, str]) -> dict[str, float]:
    """The score each kept-weights file (``metrics``: file name -> the metric its score must be
    in) records of itself, by file name; files from before they carried one, or in another
    metric, are left out."""
    out = {}
    for name, metric in metrics.items():
        path = Path(run_dir) / name
        if not path.is_file():
            continue
        try:
            best = ckpt.load(path).get("best") or {}
        except ckpt.CheckpointError:
            continue  # a damaged file is replaced by the next best weights
        if best.get("metric") == metric and best.get("score") is not None:
            out[name] = float(best["score"])
    return out


def _restore_replay(run_dir: Path, cfg, replay, agent_steps: int, log) -> bool:
    """Load the replay saved with the checkpoint, if it belongs to it; say what happened."""
    path = run_dir / REPLAY_NAME
    refill = f"the replay refills ({cfg.learner.learning_starts:,} steps) before training goes on"
    if not cfg.run.save_replay or not path.exists():
        why = "--save-replay is off" if not cfg.run.save_replay else f"no {path}"
        log(f"[MAIN] {why}: {refill}")
        return False
    t0 = time.perf_counter()
    meta = snapshot.read_meta(path)
    if meta.get("agent_steps") != agent_steps:
        log(f"[MAIN] {path} was saved at {meta.get('agent_steps'):,} agent steps, the checkpoint at "
            f"{agent_steps:,} (the run stopped without a clean save): {refill}")
        return False
    snapshot.load(replay, path, cfg.env, cfg.env_options.frame_stack)
    log(f"[MAIN] Replay restored from {path}: {len(replay):,} transitions, "
        f"{path.stat().st_size / 2**20:,.0f} MB in {time.perf_counter() - t0:.1f} s; training goes on at once")
    return True


def save_replay(run_dir: Path, cfg, replay, agent_steps: int, log) -> None:
    """The replay beside the final checkpoint (writers stopped), tagged with its step count."""
    path = run_dir / REPLAY_NAME
    size, took = snapshot.save(replay, path, {"env": cfg.env, "frame_stack": cfg.env_options.frame_stack,
                                              "agent_steps": agent_steps})
    log(f"[MAIN] Replay saved to {path}: {len(replay):,} transitions, {size / 2**20:,.0f} MB in {took:.1f} s")
