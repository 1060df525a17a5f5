"""What each optimization buys on this machine, measured side by side in one run: the ladder
(each row adds one optimization, same game, same replay ratio) and component
benchmarks (ring vs multiprocessing.Queue, collector overhead, replay, learner, acting). Warm-up
is excluded, figures are medians over several windows, and the load average is reported.
The parts live in the ``bench`` package, one module each; this file is their command line.

    python benchmark_performance.py                       # ladder + components (~10 minutes)
    python benchmark_performance.py --quick               # under 2 minutes, nothing compiled
    python benchmark_performance.py --json out.json --plot ladder.png
    python benchmark_performance.py --only ladder --rows 4,8   # some rows (and the baseline)
    python benchmark_performance.py --only update         # one learner update's time by part and layer
    python benchmark_performance.py --only learner-share  # what the pipeline's other parts take from the learner
    python benchmark_performance.py --profile             # torch.profiler traces in profiles/
    python benchmark_performance.py --value-check runs/NAME   # learned Q against the returns that followed
    python benchmark_performance.py --autotune            # writes ~/.config/fast-dqn/autotuned-atari.json
    python benchmark_performance.py --time-to-score --env ALE/Pong-v5 --vs-baseline --json tts.json --plot tts.png
    python benchmark_performance.py --time-to-score --quick   # the catch game, a few minutes
    python benchmark_performance.py --time-to-score --env ALE/Pong-v5 --halving recipes.toml   # successive halving
    python benchmark_performance.py --only ray [--ray-address HOST:PORT] [--ray-collectors N] [--intake-rate R]
    python benchmark_performance.py --suite atari5 [--steps 500000] [training options]   # Atari-5 + Pong vs Dopamine
    python benchmark_performance.py --suite atari5 --halving recipes.toml --games DoubleDunk,Phoenix,Qbert
    python benchmark_performance.py --suite mario --seeds 1,2,3 [--steps 2000000] [training options]   # Mario 1-1
    python benchmark_performance.py --suite mario --stages 1-2,4-1 [--seeds 1]   # other stages, a fresh run each
"""
from __future__ import annotations

import json
import os
import sys
import time

# Nothing heavy at module level: a spawned child (the ladder's rows, the queue's producers, the
# collector-overhead collector) runs this file again as ``__mp_main__`` before its own target, so
# an import here is paid in every child: torch alone is ~3 s of CPU each on a 2-core AMD EPYC
# family 23 model 1, where a ring producer needs only numpy. Each function imports what it uses.


def _timed(label: str, fn, *args, **kwargs):
    """One component, with how long it took on the progress line."""
    print(f"  {label} ...", end="", flush=True)
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    print(f" {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def save_json(data: dict, path: str | None) -> None:
    """--json: a mode's result written where asked, and said."""
    if path:
        with open(path, "w") as f:
            json.dump(data, f, indent=2, default=str)
        print(f"JSON: {path}")


def stopped_code(e: BaseException) -> int:
    """A suite or search whose runs stopped (each cleanly first; the same command goes on): its
    line, and the exit code, 130 for an interrupt, 1 for a run that failed."""
    from bench.suite_runs import SuiteInterrupted

    interrupted = isinstance(e, SuiteInterrupted)
    print(e if interrupted else f"error: {e}", flush=True)
    return 130 if interrupted else 1


def main(argv=None) -> int:
    """The benchmarks' command line: what the user can fix (``UserError``) is one line and exit code 2."""
    from pipeline.errors import UserError

    try:
        return run_benchmarks(argv)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def run_benchmarks(argv=None) -> int:
    import torch

    from bench.autotune import autotune
    from bench.common import machine
    from bench.components import (bench_acting, bench_collector_overhead, bench_learner, bench_replay,
                                  bench_vector_envs, print_components)
    from bench.ladder import LADDER, LADDER_BASE, bench_ladder, bench_run, plot_ladder, print_ladder
    from bench.learner_grid import bench_learner_grid, bench_learner_in_pipeline, print_learner_grid
    from bench.profile import profile_run
    from bench.ring_vs_queue import bench_queue
    from pipeline.agent.learner import flush_denormals

    from pipeline.settings.cli import Parser

    flush_denormals()  # as a training run does, before this process's first parallel torch work
    ap = Parser(description="Measure what each optimization buys on this machine: the ladder "
                                             "(each row adds one optimization) plus component benchmarks, in one run.", allow_abbrev=False)
    ap.add_argument("--quick", action="store_true", help="short windows, nothing compiled: the compile rows are "
                    "skipped and row 8 and --autotune's trials run eager (under 2 minutes)")
    ap.add_argument("--json", metavar="PATH", help="write all figures as JSON")
    ap.add_argument("--plot", metavar="PATH", help="write a PNG bar chart of the ladder")
    ap.add_argument("--seconds", type=float, help="measured seconds per ladder row after learning starts")
    ap.add_argument("--only", choices=["ladder", "components", "learner", "update", "learner-share", "emulator", "ray"],
                    help="run one part only (learner: updates/s alone vs in the pipeline at batch 32/64/128, "
                         "1 and 2 threads, and the share of the CPU's peak; update: one learner update's time "
                         "split by part and layer, with each part's GFLOP/s; learner-share: the learner's speed "
                         "alone, on fresh batches, beside the prefetch thread and beside a busy co-runner, "
                         "interleaved; emulator: Mario's NES emulator "
                         "frames/s per core against each layer above it, up to a collector's rollout; ray: "
                         "collectors as Ray actors against collector processes, collection only)")
    ap.add_argument("--co-runner-duty", type=float, default=0.4,
                    help="with --only learner-share: the share of one core the co-runner process keeps busy, as a "
                         "collector does in a run (default 0.4)")
    ap.add_argument("--ray-address", help="with --only ray: a running cluster (default: start a one-node one here)")
    ap.add_argument("--ray-collectors", type=int, default=1,
                    help="with --only ray: collectors per row, Ray actors and processes alike (default 1)")
    ap.add_argument("--intake-rate", type=float, default=5000,
                    help="with --only ray: transitions/s the last row's actors send in all, replaying a batch "
                         "they played, to load the learner's intake beyond what this machine can play (default 5000)")
    ap.add_argument("--rows", metavar="N,N", help="ladder rows to run, e.g. 4,8 (row 1, the baseline, always runs)")
    ap.add_argument("--value-check", metavar="RUN_DIR",
                    help="instead: the run's learned Q(s, a) against the discounted returns that followed in its "
                         "saved replay (over- or underestimation)")
    ap.add_argument("--profile", metavar="DIR", nargs="?", const="profiles",
                    help="instead: torch.profiler over learner and collector steps; traces go to DIR")
    ap.add_argument("--autotune", action="store_true",
                    help="instead: search collector/env/thread settings on --env's game and write the autotuned "
                         "profile of its family (atari or mario) into the user's config folder")
    ap.add_argument("--env", help="the game autotune tunes on (default ALE/Pong-v5); with --time-to-score, the game "
                                  "to train; with --only update, the one game whose update is split (default: "
                                  "Pong's and Mario's)")
    tts = ap.add_argument_group("time to score (--time-to-score [options] [training options of mario_rl_optimized.py])")
    tts.add_argument("--time-to-score", action="store_true",
                     help="instead: train with the defaults (plus any training options given) until the mean score of "
                          "the last 20 games reaches --target, and report minutes and agent steps at milestones")
    tts.add_argument("--target", type=float, help="score to reach (default: 18 for Pong, mean distance 3000 for "
                                                  "Mario; 0.5 with --quick)")
    tts.add_argument("--minutes", type=float, help="wall-clock limit per run (default 60; 4 with --quick)")
    tts.add_argument("--milestones", metavar="A,B,...", help="scores to time on the way (Pong: -15,-10,0,10,18; "
                                                              "Mario: 1000,1500,2000,2500)")
    tts.add_argument("--vs-baseline", action="store_true",
                     help="also run the ladder's baseline recipe (row 1) for the same time; both curves on one plot")
    tts.add_argument("--baseline-minutes", type=float,
                     help="with --vs-baseline: the baseline's own wall-clock limit (default: --minutes); it also "
                          "stops at --target")
    tts.add_argument("--runs-dir", default="runs", help="where the time-to-score runs' folders go")
    tts.add_argument("--halving", metavar="RECIPES.toml",
                     help="instead of one run: successive halving over the recipes in the file (one TOML table per "
                          "recipe: args = [training options]); every recipe trains --minutes (the first rung), the "
                          "best 1/--eta go on to --eta times the minutes, resumed, for --rungs rungs")
    tts.add_argument("--eta", type=int, default=2, help="with --halving: keep the best 1/eta at each rung, and give "
                                                        "the next rung eta times the minutes (default 2)")
    tts.add_argument("--rungs", type=int, default=3, help="with --halving: the most rungs (default 3)")
    suite = ap.add_argument_group("suite (--suite NAME [options] [training options of mario_rl_optimized.py])")
    suite.add_argument("--suite", metavar="NAME",
                       help="instead: train the suite's games and seeds one after another (atari5: BattleZone, "
                            "DoubleDunk, NameThisGame, Phoenix, Qbert, and Pong; -v5 ids, sticky actions on; mario: "
                            "1-1, or the stages --stages names, a fresh run of the preset per stage and seed, each "
                            "run's kept weights then played on 10 fresh games greedy and 10 at epsilon 0.05) with the defaults plus any training options, each to "
                            "--steps agent steps or --minutes; rerun to resume an interrupted suite or add seeds. "
                            "Writes a table and a plot (beside Dopamine's published agents for atari5) into "
                            "RUNS_DIR/suite-NAME[_options]/, each run in seedN/GAME/")
    suite.add_argument("--steps", type=int, default=None,
                       help="with --suite: agent steps per game and seed (default 500000 for atari5: two of "
                            "Dopamine's 250k iterations; 2000000 for mario, the preset's cap: a run stops sooner once its kept "
                            "weights reach the flag in 19 of 20 fresh greedy games)")
    suite.add_argument("--stages", metavar="W-S,W-S,...",
                       help="with --suite mario: the stages to train, in this order, e.g. 1-2,4-1 (default 1-1); "
                            "each stage is a suite folder of its own (suite-mario-4-1), resumable alone, and the "
                            "report gives a row per stage and seed beside the one-recipe R2D2 agent")
    suite.add_argument("--play-games", type=int, default=10, metavar="N",
                       help="with --suite mario: games each seed's kept weights play greedy, and again at epsilon "
                            "0.05, once it has trained (default 10)")
    suite.add_argument("--seeds", metavar="N,N,...",
                       help="with --suite: the seeds to train, each in its own seedN/ folder (default: --seed, else 1); "
                            "a later run with more seeds adds them to the same suite")
    suite.add_argument("--games", metavar="A,B,...",
                       help="with --suite: train only these of the suite's games, in this order (the same folder: "
                            "a later run without --games trains the rest); with --halving RECIPES.toml: the games to "
                            "screen the recipes on (default all); the recipes run to --steps/eta^(rungs-1), the best "
                            "1/--eta by mean human-normalized score go on to eta times the steps, ..., to --steps")
    suite.add_argument("--games-at-once", type=int, default=1, metavar="N",
                       help="with --suite (and --halving): train N games side by side, each in its own process "
                            "(default 1). On a 2-core AMD EPYC Zen 5 two at once played 1.48x the agent steps/s of "
                            "one; each game's minutes are then its share of the machine, its windows (per agent "
                            "step) the same. Without --learner-threads, each game's learner gets 1/N of the threads "
                            "it would have alone (at least 1)")
    ap.add_argument("--results", action="store_true",
                    help="instead: write docs/results.md and the README's results table from the run data under "
                         "docs/data (only runs whose recipe is today's defaults)")
    ap.add_argument("--compare", nargs="+", metavar="SUITE_DIR",
                    help="instead: Mario suite folders of one stage (one recipe each, e.g. runs/suite-mario-1-2 "
                         "runs/suite-mario-1-2_stall-steps_10) side by side at equal agent steps: each evaluation's "
                         "flags and stand-stills, then the first greedy flag, the best confirmation and the "
                         "stand-stills up to the agent steps all reached (--json: also as JSON); runs may be training")
    args, train_args = ap.parse_known_args(argv)
    if args.compare:
        return main_compare(args, train_args, ap)
    if args.results:
        from bench.results import write_results

        for path in write_results():
            print(f"wrote {path}")
        return 0
    if args.games_at_once < 1 or (args.games_at_once > 1 and not args.suite):
        ap.error(f"--games-at-once {args.games_at_once}: must be 1 or more, and goes with --suite")
    if args.seeds is not None and not args.suite:
        ap.error("--seeds goes with --suite; a single run takes --seed")
    if args.suite:
        return main_suite(args, train_args, ap)
    if args.time_to_score:
        if args.profile:  # with --time-to-score, --profile NAME is the training profile
            train_args = ["--profile", args.profile, *train_args]
        if args.env:
            train_args = ["--env", args.env, *train_args]
        return main_time_to_score(args, train_args, ap)
    if train_args:
        ap.error(f"unrecognized arguments: {' '.join(train_args)} (training options go with --time-to-score only)")
    if args.seconds is not None and args.seconds <= 0:
        ap.error(f"--seconds {args.seconds}: must be positive")
    rows = None
    if args.rows:
        try:
            rows = {int(x) for x in args.rows.split(",")}
        except ValueError:
            rows = {0}
        if not rows <= set(range(1, len(LADDER) + 1)):
            ap.error(f"--rows {args.rows}: give ladder row numbers from 1 to {len(LADDER)}, e.g. --rows 4,8")
    if args.profile:
        profile_run(args.profile)
        return 0
    if args.value_check:
        from bench.value_check import print_value_check, value_check

        res = value_check(args.value_check)
        print_value_check(res)
        save_json(res, args.json)
        return 0
    if args.autotune:
        data = autotune(args.seconds or (4 if args.quick else 15), args.quick, args.env or "ALE/Pong-v5")
        print(f"\nBest: {data['overrides']} at {data['agent_steps_per_s']:,.0f} agent steps/s; written to {data['path']} "
              f"(the auto profile uses it for {data['family']} games; python config_optimized.py --env "
              f"{data['tuned_on']} shows it)")
        return 0
    nw = 3 if args.quick else 5
    seconds = args.seconds or (6 if args.quick else 20)
    result = {"machine": machine(), "rows": [], "components": {}, "settings": {
        "game": "ALE/Pong-v5", "replay_ratio": LADDER_BASE["replay_ratio"], "seconds_per_row": seconds,
        "quick": args.quick, "ladder_base": LADDER_BASE, "bench_run": bench_run(args.quick)}}
    m = result["machine"]
    print(f"Machine: {m['cpu']}, {m['cores']} cores ({'bf16' if m['cpu_bf16'] else 'fp32'} on the CPU), "
          f"{m['ram_gib']} GiB, GPU {m['gpu']}; "
          f"load average at start {m['load_avg_at_start']}", flush=True)
    if args.only == "ray":
        from bench.ray_rows import bench_ray

        if args.ray_collectors < 1:
            ap.error(f"--ray-collectors {args.ray_collectors}: must be 1 or more")
        if args.intake_rate <= 0:
            ap.error(f"--intake-rate {args.intake_rate:g}: must be positive")
        result["ray"] = bench_ray(seconds, args.env or "ALE/Pong-v5", args.ray_collectors, args.ray_address,
                                  intake_rate=args.intake_rate)
    if args.only == "learner":
        result["learner_grid"] = bench_learner_grid(seconds, nw)
        print_learner_grid(result["learner_grid"])
    if args.only == "update":
        from bench.update_parts import print_update_parts, update_parts

        # Both presets' updates side by side (the Atari preset's QR-DQN and the Mario preset's
        # Double DQN) on one thread each, the cost per core, as their profiles' thread counts may
        # differ; or --env's alone, on its profile's learner threads. The same machine, one process.
        games = [args.env] if args.env else ["ALE/Pong-v5", "SuperMarioBros-1-1-v0"]
        result["update_parts"] = [update_parts(n_updates=10 if args.quick else 30, env=g,
                                               threads=None if args.env else 1) for g in games]
        for parts in result["update_parts"]:
            print_update_parts(parts)
    if args.only == "learner-share":
        from bench.learner_share import learner_share, print_learner_share

        if not 0 < args.co_runner_duty < 1:
            ap.error(f"--co-runner-duty {args.co_runner_duty:g}: give a share of one core between 0 and 1, e.g. 0.4")
        result["learner_share"] = learner_share(rounds=4 if args.quick else 8, duty=args.co_runner_duty)
        print_learner_share(result["learner_share"])
    if args.only == "emulator":
        from bench.emulator import bench_emulator, print_emulator

        from wrappers.registry import is_mario

        env = args.env or "SuperMarioBros-1-1-v0"
        if not is_mario(env):
            ap.error(f"--only emulator --env {env}: the emulator benchmark measures nes-py, give a "
                     "SuperMarioBros-W-S-v0 id")
        result["emulator"] = bench_emulator(env, nw, 1.0 if args.quick else 3.0)
        print_emulator(result["emulator"])
    if args.only not in ("components", "learner", "update", "learner-share", "emulator", "ray"):
        result["rows"] = bench_ladder(seconds, args.quick, rows)
        print_ladder(result["rows"])
        if args.plot:
            plot_ladder(result["rows"], args.plot)
            print(f"\nLadder chart: {args.plot}")
    if args.only not in ("ladder", "learner", "update", "learner-share", "emulator", "ray"):
        print("\nComponents ...", flush=True)
        torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))
        c = result["components"]
        w = 0.5 if args.quick else 1.0  # --quick halves every measuring window
        c["queue"] = _timed("queue", bench_queue, 20_000 if args.quick else 100_000)
        c["queue_per_transition"] = _timed("queue per transition", bench_queue, 5_000 if args.quick else 20_000, batch=1)
        c["collector_overhead"] = _timed("collector overhead", bench_collector_overhead, 2 if args.quick else 10)
        c["envs"] = _timed("vector envs", bench_vector_envs, nw, window_s=w)
        c["replay"] = _timed("replay", bench_replay, nw, window_s=0.5 * w)
        c["learner"] = _timed("learner", bench_learner, nw, compile_rows=not args.quick,
                              batches=(32, 256) if args.quick else (32, 256, 512), window_s=w)
        c["acting"] = _timed("acting", bench_acting, nw, window_s=0.5 * w)
        prof_row = next((r for r in result["rows"] if r["name"].startswith("8.") and "settings" in r), None)
        if prof_row:
            c["learner_in_pipeline"] = _timed("learner alone at row 8's settings", bench_learner_in_pipeline,
                                              prof_row, nw, window_s=w)
        print_components(c)
    result["machine"]["load_avg_at_end"] = os.getloadavg()
    print(f"\nLoad average at end: {result['machine']['load_avg_at_end']} (other load on the machine skews every figure)")
    save_json(result, args.json)
    return 0


def main_compare(args, train_args: list[str], ap) -> int:
    """--compare DIR DIR ...: the folders' runs side by side at equal agent steps; trains nothing."""
    from bench.suite_compare import compare_markdown, compare_suites
    from config_optimized import ConfigError

    if train_args or args.suite or args.time_to_score or args.results:
        ap.error("--compare reads finished or training suite folders and trains nothing; drop "
                 + " ".join(train_args or ["--suite" if args.suite else "--time-to-score" if args.time_to_score
                                           else "--results"]))
    try:
        cmp = compare_suites(args.compare)
    except ConfigError as e:
        ap.error(str(e))
    print(compare_markdown(cmp))
    save_json(cmp, args.json)
    return 0


def main_time_to_score(args, train_args: list[str], ap) -> int:
    from bench.time_to_score import QUICK_SCORE, plot_time_to_score, print_time_to_score, time_to_score

    if args.quick:
        train_args = [*QUICK_SCORE["train"], *train_args]
    if args.halving:
        return main_halving(args, train_args, ap)
    target = args.target if args.target is not None else (QUICK_SCORE["target"] if args.quick else None)
    minutes = args.minutes if args.minutes is not None else (QUICK_SCORE["minutes"] if args.quick else 60.0)
    if minutes <= 0:
        ap.error(f"--minutes {minutes}: must be positive")
    if args.baseline_minutes is not None and not args.vs_baseline:
        ap.error("--baseline-minutes goes with --vs-baseline")
    base_minutes = minutes if args.baseline_minutes is None else args.baseline_minutes
    if base_minutes <= 0:
        ap.error(f"--baseline-minutes {base_minutes}: must be positive")
    marks = QUICK_SCORE["milestones"] if args.quick else None
    if args.milestones:
        try:
            marks = [float(x) for x in args.milestones.split(",")]
        except ValueError:
            ap.error(f"--milestones {args.milestones!r}: give scores separated by commas, e.g. -15,-10,0,10,18")
    res = time_to_score(train_args, target, minutes, marks, args.runs_dir, base_minutes if args.vs_baseline else None)
    print_time_to_score(res)
    if args.plot:
        plot_time_to_score(res, args.plot)
        print(f"\nCurves: {args.plot}")
    save_json(res, args.json)
    return 0


def main_suite(args, train_args: list[str], ap) -> int:
    """--suite: every game's options checked before the first run starts; then each game not yet
    finished is trained (or resumed), and the report written whatever became of the runs."""

    from bench.suite import report_markdown, run_suite, write_report
    from bench.suite_runs import SuiteInterrupted

    if args.suite == "mario":
        return main_mario_suite(args, train_args, ap)
    if args.steps is None:
        args.steps = 500_000
    if args.halving and not args.time_to_score:
        if args.seeds is not None:
            ap.error("--halving screens each recipe on one seed (the options' --seed); drop --seeds")
        return main_suite_halving(args, train_args, ap)
    if args.time_to_score or args.halving or args.vs_baseline or args.target is not None:
        ap.error("--suite trains each game for --steps (or --minutes); drop --time-to-score, --halving, "
                 "--vs-baseline and --target")
    if args.profile:
        train_args = ["--profile", args.profile, *train_args]
    if args.env:
        ap.error("--suite chooses its games; drop --env")
    try:
        suite_dir = run_suite(args.suite, train_args, args.steps, args.minutes, args.runs_dir, args.games,
                              args.games_at_once, args.seeds)
        code = 0
    except (SuiteInterrupted, RuntimeError) as e:  # every game's run stopped cleanly first; the report still goes
        from bench.suite_runs import suite_dir_name

        code = stopped_code(e)
        suite_dir = os.path.join(os.path.abspath(args.runs_dir), suite_dir_name(args.suite, train_args))
    rep = write_report(suite_dir)
    show_report(suite_dir, report_markdown(rep), args)
    return code


def main_mario_suite(args, train_args: list[str], ap) -> int:
    """--suite mario: each seed trained (or resumed), its kept weights played again on fresh games,
    and the report written whatever became of the runs."""

    from bench.suite_mario import (STAGE, STEPS, mario_markdown, mario_suite_dir, parse_stages, run_mario_suite,
                                   stages_markdown, write_mario_report)
    from bench.suite_runs import SuiteInterrupted, without_seed

    if args.time_to_score or args.halving or args.vs_baseline or args.target is not None or args.games:
        ap.error("--suite mario trains each seed for --steps (or --minutes); drop --time-to-score, --halving, "
                 "--vs-baseline, --target and --games (give the stages with --stages)")
    if args.env and args.stages:
        ap.error("--stages names the suite's stages; drop --env")
    if args.profile:
        train_args = ["--profile", args.profile, *train_args]
    steps = args.steps if args.steps is not None else STEPS
    code = 0
    try:
        stages = parse_stages(args.stages) if args.stages else [args.env or STAGE]
        suite_dirs = run_mario_suite(train_args, steps, args.minutes, args.runs_dir, stages, args.seeds,
                                     args.games_at_once, args.play_games)
    except (SuiteInterrupted, RuntimeError) as e:  # every run stopped cleanly first; the reports still go
        code = stopped_code(e)
        suite_dirs = [mario_suite_dir(env, without_seed(train_args), args.runs_dir) for env in stages]
    reps = []
    for suite_dir in suite_dirs:
        if suite_dir.is_dir():
            reps.append(write_mario_report(suite_dir))
            show_report(suite_dir, mario_markdown(reps[-1]), args)
    if len(reps) > 1:
        print(f"\nStages, a row per stage and seed:\n\n{stages_markdown(reps)}")
    return code


def show_report(suite_dir, markdown: str, args) -> None:
    """A suite's table on the terminal, where its report files lie, and copies where --json and --plot ask."""
    import shutil

    from bench.suite_runs import REPORT_NAMES

    print("\n" + markdown)
    print(f"\nReport: {', '.join(os.path.join(suite_dir, n) for n in REPORT_NAMES)}")
    for want, name in ((args.json, REPORT_NAMES[0]), (args.plot, REPORT_NAMES[2])):
        if want:
            shutil.copyfile(os.path.join(suite_dir, name), want)


def report_winner(res: dict, recipes: dict[str, list[str]], json_path: str | None) -> int:
    """A finished search's last lines (and its JSON, with the machine, where asked)."""
    from bench.common import machine

    print(f"\n[HALVING] winner: {res['winner']} {' '.join(recipes[res['winner']])}")
    save_json({**res, "machine": machine()}, json_path)
    return 0


def main_suite_halving(args, train_args: list[str], ap) -> int:
    """--suite NAME --halving RECIPES.toml: recipes screened on the suite's games by agent steps."""
    from bench.halving import read_recipes
    from bench.suite_halving import rung_steps, suite_halving
    from bench.suite_runs import SuiteInterrupted

    if args.vs_baseline or args.target is not None or args.minutes is not None or args.env:
        ap.error("--suite --halving ranks recipes by score at equal agent steps (--steps); drop --vs-baseline, "
                 "--target, --minutes and --env")
    if args.eta < 2 or args.rungs < 1:
        ap.error(f"--eta {args.eta} --rungs {args.rungs}: eta must be 2 or more and rungs 1 or more")
    if args.profile:
        train_args = ["--profile", args.profile, *train_args]
    steps = rung_steps(args.steps, args.eta, args.rungs)
    if steps[0] < 2:
        ap.error(f"--steps {args.steps}: too few for {args.rungs} rungs of eta {args.eta}")
    try:
        recipes = read_recipes(args.halving)
        print(f"[HALVING] {len(recipes)} recipes on {args.games or 'every game of ' + args.suite}, rungs of "
              f"{', '.join(f'{s:,}' for s in steps)} agent steps, the best 1/{args.eta} go on", flush=True)
        res = suite_halving(args.suite, recipes, args.games, train_args, args.steps, args.eta, args.rungs,
                            args.runs_dir, args.games_at_once)
    except (SuiteInterrupted, RuntimeError) as e:  # every run stopped cleanly first; the same command goes on
        return stopped_code(e)
    return report_winner(res, recipes, args.json)


def main_halving(args, train_args: list[str], ap) -> int:
    """--time-to-score --halving: every setting checked before the first run starts."""
    from bench.halving import halving, read_recipes, rung_minutes
    from bench.time_to_score import QUICK_SCORE, default_target, training_config
    from config_optimized import ConfigError
    from pipeline.records.episodes import SCORE_WINDOW

    if args.vs_baseline or args.baseline_minutes is not None:
        ap.error("--halving compares recipes with each other; drop --vs-baseline")
    if args.eta < 2:
        ap.error(f"--eta {args.eta}: must be 2 or more (each rung keeps the best 1/eta)")
    if args.rungs < 1:
        ap.error(f"--rungs {args.rungs}: must be 1 or more")
    minutes = args.minutes if args.minutes is not None else 60.0 / args.eta ** (args.rungs - 1)
    if minutes <= 0:
        ap.error(f"--minutes {minutes}: must be positive")
    recipes = read_recipes(args.halving)
    metric = None
    for name, extra in recipes.items():
        try:
            a, cfg, _ = training_config([*train_args, *extra])
        except SystemExit:  # argparse has printed what it could not read
            raise ConfigError(f"recipe [{name}] in {args.halving}: its options (above) do not parse") from None
        except ConfigError as e:
            raise ConfigError(f"recipe [{name}]: {e}") from None
        if a.resume:
            raise ConfigError(f"recipe [{name}]: --resume; each recipe starts its own run (later rungs resume it)")
        if metric not in (None, cfg.run.score_metric):
            raise ConfigError(f"recipe [{name}] scores {cfg.run.score_metric}, another recipe {metric}: "
                              "compare recipes of one game")
        metric = cfg.run.score_metric
    target = args.target if args.target is not None else (
        QUICK_SCORE["target"] if args.quick else default_target(cfg.env))
    if target is None:
        raise ConfigError(f"--target: {cfg.env} has no default target score; give one, e.g. --target 100")
    print(f"[HALVING] {len(recipes)} recipes, rungs of {', '.join(f'{m:g}' for m in rung_minutes(minutes, args.eta, args.rungs))} "
          f"min, the best 1/{args.eta} go on; target {target:g}", flush=True)
    res = halving(recipes, train_args, target, minutes, args.eta, args.rungs, args.runs_dir, metric, SCORE_WINDOW)
    return report_winner(res, recipes, args.json)


if __name__ == "__main__":
    from pipeline.quick_exit import quick_exit

    quick_exit(main())
