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

from config_optimized import ConfigError, add_config_arguments, build_config, resolve_run_dir, validate


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Fast DQN for Super Mario Bros and Atari: collector processes, shared-memory rings, "
                    "a uint8 replay and a mixed-precision BatchNorm DQN learner.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    modes = parser.add_argument_group("evaluation and plots (instead of training)")
    modes.add_argument("--eval", metavar="CHECKPOINT", help="play greedy episodes with a checkpoint file or run directory")
    modes.add_argument("--episodes", type=int, default=10, help="episodes to play with --eval")
    modes.add_argument("--video", metavar="PATH.mp4", help="with --eval: record the first episode to this MP4")
    modes.add_argument("--eval-epsilon", type=float, default=0.0, help="with --eval: random-action probability")
    modes.add_argument("--plot", metavar="RUN_DIR", help="draw RUN_DIR/learning_curve.png from its metrics.jsonl")
    add_config_arguments(parser.add_argument_group("training (every field of config_optimized.Config)"))
    return parser.parse_args(argv)


def run_eval(args: argparse.Namespace) -> int:
    from pipeline.evaluate import EVAL_NAME, evaluate

    if args.episodes <= 0:
        raise ConfigError(f"--episodes {args.episodes}: must be a positive integer")
    if not 0 <= args.eval_epsilon <= 1:
        raise ConfigError(f"--eval-epsilon {args.eval_epsilon}: must be in [0, 1]")
    if args.video and Path(args.video).suffix.lower() != ".mp4":
        raise ConfigError(f"--video {args.video!r}: give a path ending in .mp4")
    # a corrupt or foreign checkpoint fails inside, with the file named, before any env starts
    res = evaluate(args.eval, args.episodes, args.video, seed=args.seed if args.seed is not None else 12345,
                   epsilon=args.eval_epsilon)
    print(res.summary(), flush=True)
    path = Path(args.eval)
    out = res.write((path if path.is_dir() else path.parent) / EVAL_NAME)
    print(f"[EVAL] results: {out}", flush=True)
    if args.video:
        print(f"[EVAL] video of episode 1: {args.video}", flush=True)
    return 0


def check_resume(cfg) -> None:
    """Fail on a checkpoint or replay file that cannot continue this run, before any process starts."""
    from pipeline.checkpoint import CHECKPOINT_NAME, load
    from pipeline.replay import Storage, snapshot

    run_dir = Path(cfg.run_dir)
    load(run_dir / CHECKPOINT_NAME, cfg.env, None, cfg.frame_stack)
    if cfg.save_replay and (run_dir / snapshot.REPLAY_NAME).exists():
        streams = cfg.num_collectors * cfg.envs_per_collector
        snapshot.check_fits(run_dir / snapshot.REPLAY_NAME, cfg.env, cfg.frame_stack,
                            Storage.fitted_capacity(cfg.buffer_size, streams), streams)


def main(argv=None) -> int:
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
        cfg, hw, profile = build_config(args)
        cfg = resolve_run_dir(cfg)
        for warning in validate(cfg, hw):
            print(f"[MAIN] Warning: {warning}", flush=True)
        if cfg.resume:
            check_resume(cfg)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # CheckpointError and friends: one clear line, no traceback
        if type(e).__name__ in ("CheckpointError", "ReplayFileError"):
            print(f"error: {e}", file=sys.stderr)
            return 2
        raise
    from pipeline.trainer import run_training

    return run_training(cfg, hw)


if __name__ == "__main__":
    sys.exit(main())
