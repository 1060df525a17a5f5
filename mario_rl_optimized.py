"""Train a DQN on Super Mario Bros 1-1 (default) or any ALE Atari game, with settings picked for
this machine's hardware; evaluate a checkpoint; draw a run's learning curve.

    python mario_rl_optimized.py                         # Mario 1-1, auto profile
    python mario_rl_optimized.py --env ALE/Pong-v5       # Pong
    python mario_rl_optimized.py --total-steps 200000 --run-dir runs/pong --env ALE/Pong-v5
    python mario_rl_optimized.py --env ALE/Pong-v5                   # a new folder runs/ALE-Pong-v5__1__{time}
    python mario_rl_optimized.py --run-dir runs/pong --env ALE/Pong-v5 --resume
    python mario_rl_optimized.py --env ALE/Pong-v5 --resume latest   # the newest run under runs/
    python mario_rl_optimized.py --eval runs/pong --episodes 10 --video pong.mp4
    python mario_rl_optimized.py --plot runs/pong        # writes runs/pong/learning_curve.png

Every option of config_optimized.Config is a flag; ``python config_optimized.py`` shows what the
auto profile resolves to on this machine.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from config_optimized import FIELDS, ConfigError, RunConfig
from pipeline.config_check import validate
from pipeline.config_layers import add_config_arguments, resolve_config
from pipeline.run_folder import resolve_run_dir


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Fast DQN for Super Mario Bros and Atari: collector processes, shared-memory rings, "
                    "a uint8 replay and a mixed-precision BatchNorm DQN learner.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    modes = parser.add_argument_group("evaluation and plots (instead of training)")
    modes.add_argument("--eval", metavar="CHECKPOINT", help="play greedy episodes with a checkpoint file or run directory")
    modes.add_argument("--episodes", type=int, default=10, help="episodes to play with --eval (--eval-epsilon sets "
                                                                "its random-action probability)")
    modes.add_argument("--video", metavar="PATH.mp4", help="with --eval: record the first episode to this MP4")
    modes.add_argument("--plot", metavar="RUN_DIR", help="draw RUN_DIR/learning_curve.png from its metrics.jsonl")
    modes.add_argument("--push-to-hub", metavar="REPO", help="share the run in --run-dir (default: the latest) on the "
                       "Hugging Face Hub as user/name: model card, weights, config.json, eval.json, curve and video "
                       "(evaluates it first if it has no eval.json); needs pip install 'fast-dqn[hub]'")
    modes.add_argument("--private", action="store_true", help="with --push-to-hub: create the repository private")
    add_config_arguments(parser.add_argument_group("training (every field of config_optimized.Config)"))
    return parser.parse_args(argv)


def run_eval(args: argparse.Namespace) -> int:
    from pipeline.evaluate import EVAL_NAME, evaluate
    from pipeline.hub import HF_PREFIX, fetch

    if args.episodes <= 0:
        raise ConfigError(f"--episodes {args.episodes}: must be a positive integer")
    if args.eval_epsilon is None:
        args.eval_epsilon = RunConfig.eval_epsilon
    if not 0 <= args.eval_epsilon <= 1:
        raise ConfigError(f"--eval-epsilon {args.eval_epsilon}: must be in [0, 1]")
    if args.video and Path(args.video).suffix.lower() != ".mp4":
        raise ConfigError(f"--video {args.video!r}: give a path ending in .mp4")
    source, results_dir = args.eval, None
    if source.startswith(HF_PREFIX):  # a shared agent: its results go beside the runs, not into the Hub cache
        source = str(fetch(source))
        results_dir = Path("runs") / "hub" / args.eval[len(HF_PREFIX):].replace("/", "__")
        results_dir.mkdir(parents=True, exist_ok=True)
    # a corrupt or foreign checkpoint fails inside, with the file named, before any env starts
    res = evaluate(source, args.episodes, args.video, seed=args.seed if args.seed is not None else 12345,
                   epsilon=args.eval_epsilon)
    print(res.summary(), flush=True)
    path = Path(source)
    out = res.write((results_dir or (path if path.is_dir() else path.parent)) / EVAL_NAME)
    print(f"[EVAL] results: {out}", flush=True)
    if args.video:
        print(f"[EVAL] video of episode 1: {args.video}", flush=True)
    return 0


def run_push(args: argparse.Namespace) -> int:
    """--push-to-hub: evaluate the run unless its eval.json is of its current weights, package it, upload it."""
    import json
    import tempfile

    from pipeline.run_folder import RUNS_ROOT, latest_run
    from pipeline.evaluate import EVAL_NAME, evaluate
    from pipeline.hub import check_repo_id, package_run, push

    check_repo_id(args.push_to_hub)
    run_dir = Path(args.run_dir) if args.run_dir else latest_run(RUNS_ROOT)
    if not (run_dir / "checkpoint.pt").is_file():
        raise ConfigError(f"--push-to-hub: {run_dir} holds no run (no checkpoint.pt); pass --run-dir runs/NAME")
    with tempfile.TemporaryDirectory() as tmp:
        video = Path(tmp) / "replay.mp4"
        eval_path = run_dir / EVAL_NAME
        evaluation = json.loads(eval_path.read_text()) if eval_path.is_file() else None
        evaluated = Path(evaluation["checkpoint"]) if evaluation and evaluation.get("checkpoint") else None
        if evaluated is not None and evaluated.is_dir():
            evaluated = evaluated / "checkpoint.pt"
        if (evaluated is not None and evaluated.is_file()
                and evaluated.stat().st_mtime <= eval_path.stat().st_mtime):  # eval.json is of these weights
            video = None
        else:  # no evaluation, or training went on since: evaluate the run's best weights now
            weights = next(run_dir / n for n in ("best_eval.pt", "best.pt", "checkpoint.pt") if (run_dir / n).is_file())
            epsilon = RunConfig.eval_epsilon if args.eval_epsilon is None else args.eval_epsilon
            res = evaluate(weights, args.episodes, video, epsilon=epsilon)
            print(res.summary(), flush=True)
            res.write(eval_path)
            evaluation = res.to_json()
        folder = package_run(run_dir, args.push_to_hub, Path(tmp) / "package", evaluation, video)
        url = push(folder, args.push_to_hub, private=args.private)
    print(f"[MAIN] {run_dir} shared at {url}; play it with --eval hf://{args.push_to_hub}", flush=True)
    return 0


def check_resume(cfg) -> None:
    """Fail on a checkpoint or replay file that cannot continue this run, before any process starts."""
    from pipeline.checkpoint import CHECKPOINT_NAME, CheckpointError, load
    from pipeline.replay import Storage, snapshot

    run_dir = Path(cfg.run.run_dir)
    path = run_dir / CHECKPOINT_NAME
    state = load(path, cfg.env, None, cfg.env_options.frame_stack)
    # The run's config.json keeps the network fixed on a resume; for a run saved before run records,
    # only the checkpoint can say what network its weights fit.
    for key in ("model_arch", "dueling", "quantiles"):
        if key in state["meta"] and state["meta"][key] != cfg.get(key):
            raise CheckpointError(f"checkpoint {path} was trained with --{key.replace('_', '-')} "
                                  f"{state['meta'][key]!r} but this run has {cfg.get(key)!r}; resume with the "
                                  "settings it was trained with, or start a new run without --resume")
    replay = run_dir / snapshot.REPLAY_NAME
    if cfg.run.save_replay and replay.exists():
        streams = cfg.collectors.env_streams
        saved = snapshot.check_fits(replay, cfg.env, cfg.env_options.frame_stack,
                                    Storage.fitted_capacity(cfg.replay.buffer_size, streams), streams)
        # the file the run will load (pipeline.resume loads it only if it was saved with this checkpoint):
        # read it whole now, so that damage is refused here and not half-way through the load
        if saved["env_steps"] == state.get("counters", {}).get("env_steps"):
            snapshot.verify(replay)


def train(**overrides):
    """Train from Python with the same layers as the command line (defaults, the game's preset,
    the hardware profile, then ``overrides``: Config fields, plus ``config="file.toml"``)::

        from mario_rl_optimized import train
        result = train(env="ALE/Pong-v5", total_steps=200_000)
        result.run_dir, result.checkpoint, result.best, result.metrics["return_mean"]

    Raises ConfigError (bad settings, named with the fix) before anything starts; returns the
    pipeline.run.TrainResult of the run, whose exit_code is 1 after a logged failure."""
    from pipeline.run import train_run

    unknown = set(overrides) - set(FIELDS) - {"config"}
    if unknown:
        raise ConfigError(f"train(): unknown settings {sorted(unknown)}; python config_optimized.py lists them")
    return train_run(*prepare_run(overrides))


def prepare_run(args):
    """Config layers, run folder, validation and the resume checks: every refusal happens here,
    before any process starts. Returns the config, the hardware and the notes for the run log."""
    res = resolve_config(args)
    cfg, hw = resolve_run_dir(res.cfg), res.hw
    notes = [f"Warning: {w}" for w in validate(cfg, hw)] + res.notes
    if cfg.run.resume:
        check_resume(cfg)
        if res.changes is None:
            notes.append(f"Resumed run: {cfg.run.run_dir} has no config.json (it predates run records); its settings "
                         "come from this command line")
        else:
            notes += [f"Resumed run: {c}" for c in res.changes] or ["Resumed run: every setting as it was saved"]
    return cfg, hw, notes


def main(argv=None) -> int:
    from pipeline.checkpoint import CheckpointError
    from pipeline.hub import HubError
    from pipeline.replay.snapshot import ReplayFileError

    args = parse_args(argv)
    try:
        if args.plot:
            from pipeline.curves import plot_learning_curve

            try:
                print(f"[MAIN] Learning curve {plot_learning_curve(args.plot)}")
            except FileNotFoundError as e:
                raise ConfigError(f"--plot {args.plot!r}: {e}") from None
            return 0
        if args.eval:
            return run_eval(args)
        if args.push_to_hub:
            return run_push(args)
        cfg, hw, notes = prepare_run(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (CheckpointError, ReplayFileError, HubError) as e:  # one clear line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    from pipeline.run import run_training

    return run_training(cfg, hw, notes)


USAGE = """usage: fast-dqn COMMAND [options]

commands:
  train [options]          train (every option: fast-dqn train --help)
  eval RUN [options]       play greedy episodes with RUN's checkpoint (--episodes, --video, --eval-epsilon)
  plot RUN                 draw RUN/learning_curve.png
  config [options]         show the resolved config and the layer that set each value
  bench [options]          benchmark_performance.py (ladder, learner grid, --time-to-score, --autotune)"""


def cli(argv=None) -> int:
    """The ``fast-dqn`` console script: one command per job of this project."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "train":
        return main(rest)
    if command in ("eval", "plot"):
        if not rest or rest[0].startswith("-"):
            print(f"error: fast-dqn {command} needs a run folder or checkpoint first, e.g. fast-dqn {command} runs/latest",
                  file=sys.stderr)
            return 2
        return main([f"--{command}", *rest])
    if command == "config":
        import config_optimized

        return config_optimized.main(rest)
    if command == "bench":
        import benchmark_performance

        return benchmark_performance.main(rest)
    print(f"error: unknown command {command!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
