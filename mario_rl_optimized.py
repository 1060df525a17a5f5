"""Train a DQN on Super Mario Bros 1-1 (default) or any ALE Atari game, with settings picked for
this machine's hardware; evaluate a checkpoint; draw a run's learning curve.

    python mario_rl_optimized.py                         # Mario 1-1, auto profile
    python mario_rl_optimized.py --env ALE/Pong-v5       # Pong
    python mario_rl_optimized.py --total-steps 200000 --run-dir runs/pong --env ALE/Pong-v5
    python mario_rl_optimized.py --env ALE/Pong-v5                   # a new folder runs/ALE-Pong-v5__1__{time}
    python mario_rl_optimized.py --run-dir runs/pong --env ALE/Pong-v5 --resume
    python mario_rl_optimized.py --env ALE/Pong-v5 --resume latest   # the newest run under runs/
    python mario_rl_optimized.py --eval runs/pong --episodes 10 --video pong.mp4
    python mario_rl_optimized.py --eval runs/pong --sticky-actions 0   # the same weights without sticky actions
    python mario_rl_optimized.py --plot runs/pong        # writes runs/pong/learning_curve.png

Every option of config_optimized.Config is a flag; ``python config_optimized.py`` shows what the
auto profile resolves to on this machine.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from config_optimized import FIELDS, ConfigError, RunConfig, UserError
from pipeline.settings.cli import flag, parse_args  # noqa: F401  (parse_args re-exported: mario_rl_optimized.parse_args)


# Each mode that does not train: the training options it reads, and why it reads no other; it
# refuses the rest, which it would otherwise ignore without a word.
MODES = {"eval": (("eval_epsilon", "seed", "sticky_actions", "noop_max"),
                  "plays with the settings the checkpoint was trained with"),
         "push_to_hub": (("run_dir", "eval_epsilon"),
                         "shares the run as it was trained (and evaluates it with its own settings)"),
         "plot": ((), "draws the curve of a run as it was trained")}


def _flags(names) -> str:
    return ", ".join(map(flag, names))


def check_mode(args: argparse.Namespace) -> str | None:
    """The mode the command line asks for instead of training (``eval``, ``push_to_hub``, ``plot``,
    or None: train), after refusing what that mode would silently drop: a second mode, a training
    option it does not read, and --video or --private outside the mode they belong to."""
    modes = [m for m in MODES if getattr(args, m)]
    if len(modes) > 1:
        raise ConfigError(f"{_flags(modes)}: give one of them (each is a command of its own)")
    mode = modes[0] if modes else None
    if args.video and mode != "eval":
        raise ConfigError("--video records an episode played by --eval; add --eval RUN_DIR, or drop --video")
    if args.video_episodes is not None and not args.video:
        raise ConfigError("--video-episodes says how many games --video films; add --video PATH.mp4, or drop it")
    if args.every_start and mode != "eval":
        raise ConfigError("--every-start plays --eval's games from every no-op start; add --eval RUN, or drop it")
    if args.every_start:
        given = [f for f, v in (("--video", args.video), ("--eval-epsilon", args.eval_epsilon),
                                ("--sticky-actions", args.sticky_actions), ("--noop-max", args.noop_max)) if v is not None]
        if given:
            raise ConfigError(f"{', '.join(given)}: --every-start plays each start the run trained with once, greedy and "
                              "unfilmed; drop them, or drop --every-start to play --episodes games")
    if args.private and mode != "push_to_hub":
        raise ConfigError("--private is for --push-to-hub REPO; add it, or drop --private")
    if mode is None:
        return None
    takes, why = MODES[mode]
    ignored = [name for name in ["config", *FIELDS] if name not in takes and getattr(args, name, None) is not None]
    if ignored:
        what = f"of the training options it takes only {_flags(takes)}" if takes else "it takes no training option"
        raise ConfigError(f"{_flags(ignored)}: {_flags([mode])} {why}; {what}")
    return mode


def eval_play_options(args: argparse.Namespace) -> dict:
    """The play options (``PLAY_OPTIONS``) given with --eval, checked as training checks them."""
    from pipeline.evaluation.evaluate import PLAY_OPTIONS
    from pipeline.settings.check import check_play_options

    play = {name: getattr(args, name) for name in PLAY_OPTIONS if getattr(args, name) is not None}
    check_play_options(play.get("sticky_actions", -1.0), play.get("noop_max", 0))
    return play


def eval_epsilon(args: argparse.Namespace) -> float:
    """--eval-epsilon, or the config's default where not given, checked as training checks it."""
    from pipeline.settings.check import check_eval_epsilon

    epsilon = RunConfig.eval_epsilon if args.eval_epsilon is None else args.eval_epsilon
    check_eval_epsilon(epsilon)
    return epsilon


def check_episodes(args: argparse.Namespace) -> None:
    if args.episodes <= 0:
        raise ConfigError(f"--episodes {args.episodes}: must be a positive integer")


def run_every_start(source: str, folder: Path) -> int:
    """--eval RUN --every-start: greedy from each no-op start, a line per missed start and the
    share at the flag; the games to ``EVERY_START_NAME`` in the folder."""
    from pipeline.evaluation.evaluate import eval_lock
    from pipeline.evaluation.starts import play_every_start
    from pipeline.records.files import EVERY_START_NAME
    from pipeline.records.record import write_json

    with eval_lock(folder):
        try:
            print(f"[EVAL] Playing {load(source).describe()}, greedy from every no-op start", flush=True)
            games = play_every_start(source)
        except ValueError as e:
            raise ConfigError(f"--every-start: {e}; drop --every-start to play its games") from None
        flags = sum(g.flag for g in games)
        for g in games:
            if not g.flag:
                print(f"[EVAL] Start {g.noops} ({g.noops} no-op agent steps): " + (f"stood still at x {g.distance:,.0f}" if g.stood
                      else f"ended at x {g.distance:,.0f}") + f" after {g.length:,} agent steps", flush=True)
        out = write_json(folder / EVERY_START_NAME, {"checkpoint": source, "flags": flags,
                                                     "games": [g.to_json() for g in games]})
    print(f"[EVAL] Greedy from every start (no-op starts 0-{len(games) - 1}): the flag in {flags} of {len(games)}; "
          f"games: {out}", flush=True)
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from pipeline.evaluation.evaluate import eval_lock, evaluate
    from pipeline.records.files import EVAL_HISTORY_NAME, EVAL_NAME
    from pipeline.records.hub import HF_PREFIX, fetch
    from pipeline.settings.check import check_video_encoder

    play = eval_play_options(args)
    check_episodes(args)
    epsilon = eval_epsilon(args)
    if args.video and Path(args.video).suffix.lower() != ".mp4":
        raise ConfigError(f"--video {args.video!r}: give a path ending in .mp4")
    filmed = 1 if args.video_episodes is None else args.video_episodes
    if not 1 <= filmed <= args.episodes:
        raise ConfigError(f"--video-episodes {filmed}: film 1 to {args.episodes} games (--episodes)")
    if args.video:
        check_video_encoder()
    source, results_dir = args.eval, None
    if source.startswith(HF_PREFIX):  # a shared agent: its results go beside the runs, not into the Hub cache
        source = str(fetch(source))
        results_dir = Path("runs") / "hub" / args.eval[len(HF_PREFIX):].replace("/", "__")
        results_dir.mkdir(parents=True, exist_ok=True)
    path = Path(source)
    folder = results_dir or (path if path.is_dir() else path.parent)
    if not folder.is_dir():
        raise ConfigError(f"--eval {args.eval}: no such run folder or checkpoint")
    if args.every_start:
        return run_every_start(source, folder)
    with eval_lock(folder):  # one --eval at a time writes a folder's eval.json
        # a corrupt or foreign checkpoint fails inside, with the file named, before any env starts
        res = evaluate(source, args.episodes, args.video, seed=args.seed if args.seed is not None else 12345,
                       epsilon=epsilon, play=play, video_games=filmed)
        print(res.summary(), flush=True)
        out = res.write(folder / EVAL_NAME)
        res.append_to(folder / EVAL_HISTORY_NAME)
    print(f"[EVAL] results: {out}", flush=True)
    if args.video:
        print(f"[EVAL] video of game{'s 1-' if filmed > 1 else ' '}{filmed} (H.264): {args.video}", flush=True)
    return 0


def run_push(args: argparse.Namespace) -> int:
    """--push-to-hub: evaluate the run unless its eval.json is of its current weights, package it, upload it."""
    import tempfile

    from pipeline.evaluation.evaluate import eval_lock, evaluate
    from pipeline.records.files import CHECKPOINT_NAME, EVAL_HISTORY_NAME, EVAL_NAME, VIDEO_NAME
    from pipeline.records.hub import check_repo_id, current_evaluation, package_run, push, weights_to_share
    from pipeline.records.run_folder import RUNS_ROOT, latest_run

    check_repo_id(args.push_to_hub)
    check_episodes(args)
    epsilon = eval_epsilon(args)
    try:
        run_dir = Path(args.run_dir) if args.run_dir else latest_run(RUNS_ROOT)
    except ConfigError:  # latest_run speaks to --resume latest, which was not given
        raise ConfigError(f"--push-to-hub {args.push_to_hub}: no run under {RUNS_ROOT}/ to share; train one first, "
                          "or pass --run-dir with the run's folder") from None
    if not (run_dir / CHECKPOINT_NAME).is_file():
        raise ConfigError(f"--push-to-hub: {run_dir} holds no run (no {CHECKPOINT_NAME}); pass --run-dir runs/NAME")
    with tempfile.TemporaryDirectory() as tmp:
        video = Path(tmp) / VIDEO_NAME
        evaluation = current_evaluation(run_dir)
        if evaluation is not None:  # eval.json is of these weights
            video = None
        else:  # no evaluation, or training went on since: evaluate the run's best weights now
            with eval_lock(run_dir):
                res = evaluate(weights_to_share(run_dir), args.episodes, video, epsilon=epsilon)
                print(res.summary(), flush=True)
                res.write(run_dir / EVAL_NAME)
                res.append_to(run_dir / EVAL_HISTORY_NAME)
            evaluation = res.to_json()
        folder = package_run(run_dir, args.push_to_hub, Path(tmp) / "package", evaluation, video)
        url = push(folder, args.push_to_hub, private=args.private)
    print(f"[MAIN] {run_dir} shared at {url}; play it with --eval hf://{args.push_to_hub}", flush=True)
    return 0


def train(**overrides):
    """Train from Python with the same layers as the command line (defaults, the game's preset,
    the hardware profile, then ``overrides``: Config fields, plus ``config="file.toml"``)::

        from mario_rl_optimized import train
        result = train(env="ALE/Pong-v5", total_steps=200_000)
        result.run_dir, result.checkpoint, result.best, result.metrics["return_mean"]

    Raises ConfigError (bad settings, named with the fix) before anything starts; returns the
    pipeline.runtime.run.TrainResult of the run, whose exit_code is 1 after a logged failure."""
    from pipeline.runtime.run import prepare_run, train_run

    unknown = set(overrides) - set(FIELDS) - {"config"}
    if unknown:
        raise ConfigError(f"train(): unknown settings {sorted(unknown)}; python config_optimized.py lists them")
    return train_run(*prepare_run(overrides))


def load(source, seed: int | None = None):
    """A trained agent from a run folder (the weights it kept: best_eval.pt, else best.pt, else
    checkpoint.pt), a .pt file or ``hf://user/repo``, to act from Python (as SB3's load/predict)::

        from mario_rl_optimized import load
        agent = load("runs/pong")
        env = agent.make_env()                  # the game as the run trained on it, whole games
        obs, info = env.reset(seed=1)
        action = agent.act(obs)                 # greedy; agent.act(obs, epsilon=0.05) explores

    Raises CheckpointError (a missing, corrupt or foreign file, named) or HubError; see
    pipeline.evaluation.agent.Agent."""
    from pipeline.evaluation.agent import load as load_agent

    return load_agent(source, seed)


def main(argv=None) -> int:
    """The training command: what the user can fix (``UserError``: a bad setting, a damaged
    checkpoint or replay file, a Hub refusal) is one line and exit code 2."""
    args = parse_args(argv)
    try:
        if args.help:  # every option on one line, with the value it takes here (the other options given count)
            from pipeline.settings.help import print_help

            print_help(args)
            return 0
        mode = check_mode(args)
        if mode == "plot":
            from pipeline.records.curves import plot_learning_curve

            try:
                print(f"[MAIN] Learning curve {plot_learning_curve(args.plot)}")
            except FileNotFoundError as e:
                raise ConfigError(f"--plot {args.plot!r}: {e}") from None
            return 0
        if mode == "eval":
            return run_eval(args)
        if mode == "push_to_hub":
            return run_push(args)
        from pipeline.runtime.run import prepare_run

        cfg, hw, notes = prepare_run(args)
    except UserError as e:  # one clear line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    from pipeline.runtime.run import train_run

    try:
        return train_run(cfg, hw, notes).exit_code
    except UserError as e:  # another run holds the folder: refused before anything starts
        print(f"error: {e}", file=sys.stderr)
        return 2


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
        from pipeline.settings.layers import show

        return show(rest)
    if command == "bench":
        import benchmark_performance

        return benchmark_performance.main(rest)
    print(f"error: unknown command {command!r}\n{USAGE}", file=sys.stderr)
    return 2


def run_script(argv: list[str] | None = None) -> int:
    """``main`` as the script runs it: a Ctrl-C (or a suite's SIGINT) that comes before the run has
    set up its own handlers, while it imports or resolves its settings, ends it with one line and
    exit code 130, not a KeyboardInterrupt traceback; once they are set, a run stops cleanly itself."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        print("[MAIN] Stopped by Ctrl-C while starting, before training began", file=sys.stderr, flush=True)
        return 130


def console() -> None:
    """The ``fast-dqn`` console script: ``cli`` ended without the interpreter's teardown."""
    from pipeline.quick_exit import quick_exit

    quick_exit(cli())


if __name__ == "__main__":
    from pipeline.quick_exit import quick_exit

    quick_exit(run_script())  # the run's end, less the 0.4-1 s the interpreter takes to free torch
