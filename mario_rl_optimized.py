"""Train a DQN on Super Mario Bros 1-1 (default) or any ALE Atari game, with settings picked for
this machine's hardware.

    python mario_rl_optimized.py                         # Mario 1-1, auto profile
    python mario_rl_optimized.py --env ALE/Pong-v5       # Pong
    python mario_rl_optimized.py --total-steps 200000 --run-dir runs/pong --env ALE/Pong-v5
    python mario_rl_optimized.py --run-dir runs/pong --env ALE/Pong-v5 --resume

Every option of config_optimized.Config is a flag; ``python config_optimized.py`` shows what the
auto profile resolves to on this machine.
"""
from __future__ import annotations

import argparse
import sys

from config_optimized import ConfigError, add_config_arguments, build_config, validate


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Fast DQN for Super Mario Bros and Atari: collector processes, shared-memory rings, "
                    "a uint8 replay and a mixed-precision BatchNorm DQN learner.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    add_config_arguments(parser)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        cfg, hw, profile = build_config(args)
        for warning in validate(cfg, hw):
            print(f"[MAIN] Warning: {warning}", flush=True)
        if cfg.resume:
            from pathlib import Path

            from pipeline.checkpoint import CHECKPOINT_NAME, load
            load(Path(cfg.run_dir) / CHECKPOINT_NAME, cfg.env, None, cfg.frame_stack)  # fail before any process starts
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # CheckpointError and friends: one clear line, no traceback
        if type(e).__name__ == "CheckpointError":
            print(f"error: {e}", file=sys.stderr)
            return 2
        raise
    from pipeline.trainer import run_training

    return run_training(cfg, hw)


if __name__ == "__main__":
    sys.exit(main())
