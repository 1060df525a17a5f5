"""--suite mario: seeds trained as a user trains them, each seed's kept weights played again on
fresh games, and a report of where the games that missed the flag ended (bench/suite_mario.py)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from bench import suite_mario as M
from bench import suite_runs as R
from config_optimized import ConfigError
from pipeline.actors.collector import collector_seed
from pipeline.evaluation.periodic_eval import CONFIRM_SEED_OFFSET
from pipeline.records.episodes import read_episodes
from tests.proc_utils import ROOT, env_for, marked_processes

STAGE = "SuperMarioBros-1-1-v0"


def test_the_final_plays_use_seeds_no_game_of_the_run_used():
    seeds = [M.play_seeds(s)[how] for s in range(1, 6) for how in ("greedy", "noisy")]
    assert len(set(seeds)) == len(seeds)
    # a play's games take seed, seed + 1, ...: no two plays' ranges of 8 envs and 10 games overlap
    assert min(b - a for a, b in zip(sorted(seeds), sorted(seeds)[1:])) >= 100
    training = {collector_seed(s, i, launch) for s in range(1, 6) for i in range(64) for launch in range(100)}
    evaluations = max(s + steps + CONFIRM_SEED_OFFSET for s in range(1, 6) for steps in range(0, 50_000_001, 50_000))
    assert max(training) < min(seeds) and evaluations < min(seeds)


def test_refuses_a_stage_that_is_not_mario_and_what_the_suite_sets(tmp_path):
    with pytest.raises(ConfigError, match="not a Super Mario Bros id"):
        M.check_mario_args("ALE/Pong-v5", [], 800_000, None, None)
    with pytest.raises(ConfigError, match="--suite sets --total-steps"):
        M.check_mario_args(STAGE, ["--total-steps", "5"], 800_000, None, None)
    with pytest.raises(ConfigError, match="--steps"):
        M.check_mario_args(STAGE, [], 0, None, None)
    assert M.check_mario_args(STAGE, ["--seed", "4"], 800_000, None, None) == [4]
    assert M.mario_suite_dir(STAGE, ["--learner-threads", "1"], str(tmp_path)).name == "suite-mario"
    assert M.mario_suite_dir("SuperMarioBros-2-1-v0", ["--gamma", "0.95"], str(tmp_path)).name == \
        "suite-mario-2-1_gamma_0.95"


def _eval_row(steps: int, phase: str, greedy: int, noisy: int, games: int = 10, greedy_games: int = 0,
              stood: int | None = None) -> str:
    """One evaluations-file row: ``greedy`` of ``greedy_games`` (0: ``games``) and ``noisy`` of
    ``games`` reached the flag; ``stood`` of the greedy misses stood still (None: a row from
    before evaluations recorded it)."""
    plays = [{"epsilon": e, "flags": [True] * n + [False] * (m - n)}
             for e, n, m in ((0.0, greedy, greedy_games or games), (0.05, noisy, games))]
    if stood is not None:
        m = len(plays[0]["flags"])
        plays[0]["stood"] = [False] * (m - stood) + [True] * stood
        plays[1]["stood"] = [False] * games
    return json.dumps({"agent_steps": steps, "phase": phase, "plays": plays}) + "\n"


def _scored(row: str, score: float) -> str:
    """An evaluations-file row with the score its evaluation kept weights by."""
    return json.dumps({**json.loads(row), "score": score}) + "\n"


def _seed(suite: Path, seed: int, flags: list[bool], steps: int = 800_000, kept_at: int = 600_000,
          env: str = STAGE) -> Path:
    run = suite / f"seed{seed}" / R.game_name(env)
    run.mkdir(parents=True)
    rows = [{"wall_s": 60.0 * k, "agent_steps": 100_000 * k, "return": 1.0, "length": 300, "distance": 1000.0}
            for k in range(1, steps // 100_000 + 1)]
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    R.mark_done(run, env, {"agent_steps": steps, "wall_s": 60.0 * steps / 100_000})
    games = [{"distance": 3161.0 if f else 1300.0 + 100 * i, "length": 400 if f else 2000 - 500 * (i % 2),
              "flag": f, "return": 300.0, "random_near_end": int(not f and i % 2 == 0), "stood": not f and i % 2 == 1}
             for i, f in enumerate(flags)]
    plays = {"weights": "best_eval.pt", "weights_sha256": "x", "episodes": len(flags), "agent_steps": kept_at}
    for how, eps in (("greedy", 0.0), ("noisy", 0.05)):
        plays[how] = {"epsilon": eps, "seed": M.play_seeds(seed)[how], "flags": sum(flags),
                      "distance_mean": sum(g["distance"] for g in games) / len(games), "games": games}
    (run / M.EVAL_FILE).write_text(json.dumps(plays))
    return run


def test_report_gives_flags_kept_weights_and_where_the_games_ended(tmp_path):
    R.claim_suite_dir(tmp_path, {"suite": "mario", "env": STAGE, "steps": 800_000, "minutes": None,
                                 "train_args": []}, R.resolved_recipe(STAGE, []))
    _seed(tmp_path, 1, [True] * 9 + [False])
    _seed(tmp_path, 2, [True] * 7 + [False] * 3, kept_at=450_000)
    rep = M.write_mario_report(tmp_path)
    assert list(rep["seeds"]) == ["1", "2"]
    assert rep["seeds"]["2"]["kept_agent_steps"] == 450_000
    assert rep["seeds"]["2"]["kept_minutes"] == pytest.approx(4.5)  # interpolated between the games' ends
    md = (tmp_path / "suite_report.md").read_text()
    assert "Recipe: the preset as it is (options: none)" in md
    assert "| 1 | 9/10 | 9/10 |" in md and "| 2 | 7/10 | 7/10 |" in md
    assert "| 450,000 (4.5) | 800,000 (8.0) |" in md
    assert "Seed 2, epsilon 0.05: missed the flag at x 2,000 (1,500 steps, stood still), x 2,100 (2,000 steps), " \
           "x 2,200 (1,500 steps, stood still)." in md
    # of the 4 misses at epsilon (seed 1's game 9, seed 2's games 7, 8, 9), seed 2's game 8 had a random action near the end
    assert "At epsilon 0.05, 1 of the 4 games that missed the flag had a random action in their last 8 agent " \
           "steps (chance alone gives 8 steps one 34% of the time)." in md
    assert (tmp_path / "suite_report.png").stat().st_size > 10_000


def test_report_gives_the_kept_weights_greedy_from_every_start(tmp_path):
    """The exact share beside the 10-game draw: every no-op start's one greedy game, its flags on
    the seed's page and in the stages' row, each miss named with its start; a seed played before
    the starts were (no every_start) keeps its row as it was."""
    R.claim_suite_dir(tmp_path, {"suite": "mario", "env": STAGE, "steps": 800_000, "minutes": None,
                                 "train_args": []}, R.resolved_recipe(STAGE, []))
    run = _seed(tmp_path, 1, [True] * 9 + [False])
    _seed(tmp_path, 2, [True] * 10)
    plays = json.loads((run / M.EVAL_FILE).read_text())
    games = [{"noops": k, "distance": 3161.0 if k % 3 else 1400.0 + k, "flag": bool(k % 3), "length": 300,
              "stood": k == 3} for k in range(31)]
    plays["every_start"] = {"flags": 20, "games": games}
    (run / M.EVAL_FILE).write_text(json.dumps(plays))
    (_seed(tmp_path, 3, [True] * 10) / M.EVAL_FILE).unlink()  # still training: no plays yet
    rep = M.mario_report(tmp_path)
    md = M.mario_markdown(rep)
    assert "from every no-op start" in md and "distinct starts" in md, md
    assert "seed 1 the flag in 20 of 31 (its fresh greedy games were drawn with repeats, as plays were before)." in md
    assert "Seed 1, greedy from every start: missed the flag at x 1,400 (start 0), x 1,403 (start 3, stood still), " in md
    assert "Seed 2, greedy from every start" not in md
    rows = M.stages_markdown([rep])
    assert "| 9/10 / 9/10; every start 20/31 |" in rows and "| 10/10 / 10/10 |" in rows, rows


def test_fresh_greedy_games_are_distinct_starts_read_from_every_start(tmp_path, monkeypatch):
    """Greedy Mario has one game per start, so the kept weights' fresh greedy games are distinct
    starts (a start drawn twice is the same game twice), read from the every-start games: with
    one start of 31 missed, 10 of them hold it at most once. A file of the same weights without
    the starts (plays drawn with repeats) is played again; one with them is only read."""
    from pipeline.evaluation import evaluate as E
    from pipeline.evaluation import starts as S

    assert sorted(S.distinct_starts(31, 31, 5)) == list(range(31))
    assert S.distinct_starts(31, 10, 5) == S.distinct_starts(31, 10, 5) != S.distinct_starts(31, 10, 6)
    twice = S.distinct_starts(3, 7, 1)
    assert sorted(twice[:3]) == sorted(twice[3:6]) == [0, 1, 2]
    run = tmp_path / "run"
    run.mkdir()
    (run / "best_eval.pt").write_bytes(b"weights")
    every = [S.StartGame(k, 2017.0 if k == 13 else 3161.0, k != 13, 169 if k == 13 else 270, False, 3000.0)
             for k in range(31)]
    calls = []
    monkeypatch.setattr(S, "play_every_start", lambda w: calls.append("every") or every)
    monkeypatch.setattr(E, "evaluate", lambda w, n, seed, epsilon, log: calls.append(epsilon) or E.EvalResult(
        STAGE, [1.0] * n, [100] * n, [3161.0] * n, [True] * n, epsilon=epsilon, random_near_end=[0] * n,
        stood=[False] * n))
    monkeypatch.setattr(E, "weights_digest", lambda w: "sha")
    monkeypatch.setattr(M, "kept_weights", lambda r: r / "best_eval.pt")
    monkeypatch.setattr("pipeline.records.checkpoint.load", lambda w: {"best": {"agent_steps": 700_089}})
    plays = M.play_kept_weights(run, 2, episodes=10)
    greedy = plays["greedy"]
    assert calls == ["every", 0.05] and len(set(greedy["starts"])) == 10
    assert greedy["starts"] == S.distinct_starts(31, 10, M.play_seeds(2)["greedy"])
    assert greedy["flags"] == 10 - (13 in greedy["starts"]) == sum(g["flag"] for g in greedy["games"])
    assert [g["distance"] for g in greedy["games"]] == [every[k].distance for k in greedy["starts"]]
    assert plays["every_start"]["flags"] == 30 and plays["noisy"]["flags"] == 10
    assert M.play_kept_weights(run, 2, episodes=10) == plays and len(calls) == 2  # only read
    del plays["greedy"]["starts"]
    (run / M.EVAL_FILE).write_text(json.dumps(plays))
    assert "starts" in M.play_kept_weights(run, 2, episodes=10)["greedy"] and len(calls) == 4  # played again


def test_each_seed_is_counted_over_the_games_its_own_kept_weights_played(tmp_path):
    """Seed 1's kept weights played 10 games, seed 2's 20 (--play-games 20 on a later call): each
    row counts its own games (18/20, not 18/10), on the page and in the README's row."""
    from bench import results as RS

    R.claim_suite_dir(tmp_path, {"suite": "mario", "env": STAGE, "steps": 800_000, "minutes": None,
                                 "train_args": []}, R.resolved_recipe(STAGE, []))
    _seed(tmp_path, 1, [True] * 9 + [False])
    _seed(tmp_path, 2, [True] * 18 + [False] * 2)
    rep = M.mario_report(tmp_path)
    md = M.mario_markdown(rep)
    assert "| 1 | 9/10 | 9/10 |" in md and "| 2 | 18/20 | 18/20 |" in md, md
    assert "kept weights played again on fresh games (each seed's count in its row)" in md
    row = RS.mario_row([{"greedy": 9, "noisy": 9, "episodes": 10, "kept_at": 600_000},
                        {"greedy": 18, "noisy": 18, "episodes": 20, "kept_at": 600_000}])
    assert "the flag in 9/10, 18/20 greedy, 9/10, 18/20 at epsilon 0.05" in row and "20 fresh games" not in row, row
    # one count for every seed: said once, as before
    assert RS.mario_row([{"greedy": 9, "noisy": 8, "episodes": 10, "kept_at": 600_000}] * 2).startswith(
        "each seed's kept weights, played again on 10 fresh games: the flag in 9, 9 greedy, 8, 8 at epsilon 0.05")
    # one seed: its weights, kept at one point, not a span from a point to itself
    assert RS.mario_row([{"greedy": 9, "noisy": 7, "episodes": 10, "kept_at": 500_054}]) == (
        "the kept weights, played again on 10 fresh games: the flag in 9 greedy, 7 at epsilon 0.05 "
        "(weights kept at 500k agent steps)")


def test_report_reads_the_screenings_of_the_second_half_and_leaves_out_confirmations(tmp_path):
    R.claim_suite_dir(tmp_path, {"suite": "mario", "env": STAGE, "steps": 800_000, "minutes": None,
                                 "train_args": []}, R.resolved_recipe(STAGE, []))
    run = _seed(tmp_path, 1, [True] * 10)

    (run / "evals.jsonl").write_text(
        _eval_row(350_000, "screen", 0, 0)          # before the second half: left out
        + _eval_row(400_000, "screen", 9, 6)
        + _eval_row(400_000, "confirm", 20, 20, 20)  # a confirmation follows a high screening: left out
        + _eval_row(450_000, "screen", 10, 8))
    curve = M.flag_curve(run, [])
    assert M.screen_flags(curve, 400_000) == {"since": 400_000, "games": 20, "greedy_games": 20, "greedy": 19,
                                              "noisy": 14}
    assert M.screen_flags(curve, 500_000) is None  # no screening from there on
    assert M.screen_flags(M.flag_curve(tmp_path, []), 0) is None  # no evaluations recorded
    M.write_mario_report(tmp_path)
    assert "seed 1 from 400,000: 19/20 greedy, 14/20 at 0.05." in (tmp_path / "suite_report.md").read_text()


def test_evaluations_a_resume_played_again_count_once(tmp_path):
    """A folder a killed run left before its evaluations were set aside on resume: checkpoint at
    150k, evaluations at 100k and 200k (a finished confirmation among them), then the resumed run's
    own at 200k. The report and the suite read the resumed run's timeline: from 150k 3/10, not
    12/20, and no finished agent."""
    R.claim_suite_dir(tmp_path, {"suite": "mario", "env": STAGE, "steps": 300_000, "minutes": None,
                                 "train_args": []}, R.resolved_recipe(STAGE, []))
    run = _seed(tmp_path, 1, [True] * 10, steps=300_000)
    (run / "evals.jsonl").write_text(
        _eval_row(100_000, "screen", 2, 1) + _eval_row(200_000, "screen", 9, 8)
        + _scored(_eval_row(200_000, "confirm", 20, 18, 20), 10.0)    # the killed run's: played again below
        + _eval_row(200_000, "screen", 3, 2))                          # the resumed run's
    rep = M.mario_report(tmp_path)
    assert rep["seeds"]["1"]["screens"] == {"since": 150_000, "games": 10, "greedy_games": 10, "greedy": 3, "noisy": 2}
    assert [p["agent_steps"] for p in rep["seeds"]["1"]["curve"]] == [100_000, 200_000]
    assert rep["seeds"]["1"]["curve"][1]["confirm"] is None
    (run / "config.json").write_text(json.dumps({"config": {**R.resolved_recipe(STAGE, []), "env": STAGE},
                                                 "git_commit": "0" * 40}))
    assert not R.stopped_at_flag(run)
    with open(run / "evals.jsonl", "a") as f:  # the resumed run's confirmation: a pending one played at resume
        f.write(_scored(_eval_row(200_000, "confirm", 19, 10, 20), 9.5))
    assert R.stopped_at_flag(run)
    assert M.mario_report(tmp_path)["seeds"]["1"]["curve"][1]["confirm"] == {"games": 20, "greedy_games": 20,
                                                                            "greedy": 19, "noisy": 10,
                                                                            "greedy_stood": None}


def test_report_gives_each_seeds_flags_by_agent_steps_with_confirmations_and_training_games(tmp_path):
    R.claim_suite_dir(tmp_path, {"suite": "mario", "env": STAGE, "steps": 800_000, "minutes": None,
                                 "train_args": []}, R.resolved_recipe(STAGE, []))
    run = _seed(tmp_path, 1, [True] * 10)

    # the confirmation's greedy games cut to 16 (all 8 envs stood still once, before the rest were
    # played in a fresh batch): each way counts its own
    (run / "evals.jsonl").write_text(_eval_row(50_000, "screen", 0, 1) + _eval_row(50_000, "confirm", 0, 2, 20, 16)
                                     + _eval_row(100_000, "screen", 3, 2))
    (run / "episodes.jsonl").write_text("".join(
        json.dumps({"wall_s": s / 100, "agent_steps": s, "return": 1.0, "length": 100, "distance": 3000.0 if f else 500.0,
                    "flag": f}) + "\n"
        for s, f in ((20_000, False), (50_000, True), (60_000, True), (90_000, False), (99_000, False), (130_000, True))))
    curve = M.flag_curve(run, read_episodes(run))
    unrecorded = {"greedy_stood": None}  # rows from before evaluations recorded the games that stood still
    assert curve == [
        {"agent_steps": 50_000, "screen": {"games": 10, "greedy_games": 10, "greedy": 0, "noisy": 1, **unrecorded},
         "confirm": {"games": 20, "greedy_games": 16, "greedy": 0, "noisy": 2, **unrecorded},
         "training": {"games": 2, "flags": 1}},
        {"agent_steps": 100_000, "screen": {"games": 10, "greedy_games": 10, "greedy": 3, "noisy": 2, **unrecorded},
         "confirm": None, "training": {"games": 3, "flags": 1}}]  # the game at 130,000 comes after the last screening
    md = M.write_mario_report(tmp_path) and (tmp_path / "suite_report.md").read_text()
    assert "| 50,000 | 0/10, 1/10 | 0/16, 2/20 | 1/2 (50%) |" in md
    assert "| 100,000 | 3/10, 2/10 | - | 1/3 (33%) |" in md
    assert M.flag_curve(tmp_path, []) == []  # no evaluations recorded
    assert M.stood_still(curve) is None and "stood still until cut:" not in md


def test_report_counts_the_greedy_games_that_stood_still(tmp_path):
    """What a fix for a Mario that stands still is judged by: per evaluation, and per seed over
    its greedy games and its misses."""
    R.claim_suite_dir(tmp_path, {"suite": "mario", "env": STAGE, "steps": 800_000, "minutes": None,
                                 "train_args": []}, R.resolved_recipe(STAGE, []))
    run = _seed(tmp_path, 1, [True] * 10)
    (run / "evals.jsonl").write_text(_eval_row(50_000, "screen", 2, 1, stood=3)
                                     + _eval_row(50_000, "confirm", 5, 2, 20, stood=8)
                                     + _eval_row(100_000, "screen", 6, 2, stood=0))
    curve = M.flag_curve(run, [])
    assert [p["screen"]["greedy_stood"] for p in curve] == [3, 0] and curve[0]["confirm"]["greedy_stood"] == 8
    assert M.stood_still(curve) == {"stood": 11, "games": 40, "misses": 27}
    md = M.write_mario_report(tmp_path) and (tmp_path / "suite_report.md").read_text()
    assert "| 50,000 | 2/10 (3 stood), 1/10 | 5/20 (8 stood), 2/20 |" in md
    assert "| 100,000 | 6/10, 2/10 | - |" in md
    assert "stood still until cut: seed 1 11 of 40 (41% of the 27 that missed the flag)." in md
    # one evaluation from before the count makes the seed's total unknown, not smaller
    (run / "evals.jsonl").write_text(_eval_row(50_000, "screen", 2, 1) + _eval_row(100_000, "screen", 6, 2, stood=1))
    assert M.stood_still(M.flag_curve(run, [])) is None


def test_a_run_that_stopped_itself_at_a_finished_agent_is_done(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    R.mark_done(run, STAGE, {"agent_steps": 300_000, "wall_s": 900.0})
    record = {"config": {**R.resolved_recipe(STAGE, []), "env": STAGE}, "git_commit": "0" * 40}
    (run / "config.json").write_text(json.dumps(record))
    confirm = {"phase": "confirm", "score": 3161.0, "flags": [True] * 10, "agent_steps": 300_000}
    (run / "evals.jsonl").write_text(json.dumps({**confirm, "score": 2000.0, "flags": [True] * 5 + [False] * 5})
                                     + "\n")
    assert R.game_state(run, 800_000, None)[0] == "new"  # no finished agent yet
    with open(run / "evals.jsonl", "a") as f:
        f.write(json.dumps(confirm) + "\n")
    assert R.game_state(run, 800_000, None)[0] == "done"
    record["config"]["stop_at_flag"] = False  # told to train on: not done
    (run / "config.json").write_text(json.dumps(record))
    assert R.game_state(run, 800_000, None)[0] == "new"


@pytest.mark.slow
def test_mario_suite_trains_plays_the_kept_weights_and_then_only_reads(tmp_path):
    """Two stages as a user runs the suite, one seed (3) of a few hundred agent steps each: each
    stage trains in its own folder, its kept weights play fresh games greedy and at epsilon 0.05,
    each report names where they ended and the stages' table has a row each; the same command
    again trains and plays nothing."""
    mark = uuid.uuid4().hex
    cmd = [sys.executable, "benchmark_performance.py", "--suite", "mario", "--stages", "1-1,4-1", "--steps", "500",
           "--seeds", "3", "--play-games", "2", "--runs-dir", str(tmp_path), "--learning-starts", "300",
           "--replay-ratio", "1", "--epoch-steps", "250", "--checkpoint-interval", "20", "--buffer-size", "20000",
           "--envs-per-collector", "4", "--eval-interval", "0", "--save-replay", "false"]
    out = subprocess.run(cmd, cwd=ROOT, env=env_for(mark), capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    dirs = {d.name.split("_")[0]: d for d in tmp_path.glob("suite-mario*")}
    assert sorted(dirs) == ["suite-mario", "suite-mario-4-1"]
    for env, suite_dir in (("SuperMarioBros-1-1", dirs["suite-mario"]), ("SuperMarioBros-4-1", dirs["suite-mario-4-1"])):
        plays = json.loads((suite_dir / "seed3" / env / M.EVAL_FILE).read_text())
        assert plays["weights"] == "checkpoint.pt" and plays["agent_steps"] >= 500  # no evaluation kept weights
        assert [g["noops"] for g in plays["every_start"]["games"]] == list(range(31))  # the preset's 0-30 starts
        for how, eps in (("greedy", 0.0), ("noisy", 0.05)):
            assert plays[how]["epsilon"] == eps and len(plays[how]["games"]) == 2
            assert plays[how]["seed"] == M.play_seeds(3)[how]
        assert f"{env}-v0 seed 3: checkpoint.pt" in out.stdout
        md = (suite_dir / "suite_report.md").read_text()
        assert re.search(r"^\| 3 \| [012]/2 \| [012]/2 \|", md, re.M), md
        assert "Seed 3, greedy: missed the flag at" in md or "| 3 | 2/2 |" in md
        assert (suite_dir / "suite_report.png").is_file()
    assert "Stages, a row per stage and seed:" in out.stdout
    assert re.search(r"^\| 1-1 \| 3 \| .* \| 1,180,000 \|$", out.stdout, re.M)
    assert re.search(r"^\| 4-1 \| 3 \| .* \| 1,710,000 \|$", out.stdout, re.M)
    again = subprocess.run(cmd, cwd=ROOT, env=env_for(mark), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.count(": done (") == 2 and "mario_rl_optimized.py" not in again.stdout
    assert ": the flag in " not in again.stdout  # the same weights are not played again
    deadline = time.time() + 10
    while marked_processes(mark) and time.time() < deadline:
        time.sleep(0.1)
    assert marked_processes(mark) == [], "a process of the suite outlived it"


def test_stages_are_named_as_a_user_types_them_and_a_wrong_one_is_refused():
    assert M.parse_stages("1-1, 4-1,SuperMarioBros-2-2-v0") == [STAGE, "SuperMarioBros-4-1-v0", "SuperMarioBros-2-2-v0"]
    for bad in ("9-1", "4-5", "x", "ALE/Pong-v5"):
        with pytest.raises(ConfigError, match="is not a stage; give WORLD-STAGE"):
            M.parse_stages(bad)
    with pytest.raises(ConfigError, match="named twice"):
        M.parse_stages("1-1,1-1")
    with pytest.raises(ConfigError, match="at least one stage"):
        M.parse_stages(" , ")


def test_each_stage_reports_its_first_greedy_flag_and_kept_weights_beside_the_r2d2_agent(tmp_path):
    """Two stages, each its own suite folder: a row per stage and seed with the agent steps (and
    minutes) to the first evaluation with a greedy game at the flag (a confirmation's counts too),
    to the kept weights, and their plays, beside the R2D2 agent's agent steps on that stage."""
    reps = []
    for env, evals in (("SuperMarioBros-1-1-v0", _eval_row(100_000, "screen", 0, 0) + _eval_row(200_000, "screen", 2, 0)),
                       ("SuperMarioBros-4-1-v0", _eval_row(100_000, "screen", 0, 0)
                        + _eval_row(100_000, "confirm", 3, 0, 20) + _eval_row(200_000, "screen", 0, 1))):
        suite = M.mario_suite_dir(env, [], str(tmp_path))
        R.claim_suite_dir(suite, {"suite": "mario", "env": env, "steps": 300_000, "minutes": None,
                                  "train_args": []}, R.resolved_recipe(env, []))
        run = _seed(suite, 1, [True] * 8 + [False] * 2, steps=300_000, kept_at=200_000, env=env)
        (run / "evals.jsonl").write_text(evals)
        reps.append(M.write_mario_report(suite))
    assert [r["seeds"]["1"]["first_flag_agent_steps"] for r in reps] == [200_000, 100_000]
    assert reps[1]["seeds"]["1"]["first_flag_minutes"] == pytest.approx(1.0)  # the games' clock at 100k
    md = M.stages_markdown(reps)
    assert "| 1-1 | 1 | 200,000 (2) | 200,000 (2) | 8/10 / 8/10 | 300,000 | 1,180,000 |" in md
    assert "| 4-1 | 1 | 100,000 (1) | 200,000 (2) | 8/10 / 8/10 | 300,000 | 1,710,000 |" in md
    page = (M.mario_suite_dir("SuperMarioBros-4-1-v0", [], str(tmp_path)) / "suite_report.md").read_text()
    assert ("First evaluation with a greedy game at the flag: seed 1 at 100,000 agent steps (1 min) "
            "(R2D2, one recipe: 1,710,000 agent steps to its first greedy flag on this stage).") in page


def test_the_suite_refuses_a_wrong_stage_and_two_ways_of_naming_them_before_any_run(tmp_path):
    for extra, said in ((["--stages", "9-1"], "'9-1' is not a stage"),
                        (["--stages", "4-1", "--env", "SuperMarioBros-4-1-v0"], "--stages names the suite's stages; drop --env")):
        out = subprocess.run([sys.executable, "benchmark_performance.py", "--suite", "mario", "--runs-dir", str(tmp_path),
                              *extra], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and said in out.stderr, out.stderr
        assert not list(tmp_path.iterdir())  # no suite folder made


def test_a_run_kept_stopped_short_without_its_checkpoint_reports_how_far_it_got(tmp_path):
    """A stage run stopped short and kept (docs/data) without checkpoint.pt or suite_game.json:
    the report reads its agent steps and minutes from its last epoch and marks it not finished."""
    R.claim_suite_dir(tmp_path, {"suite": "mario", "env": STAGE, "steps": 2_000_000, "minutes": None,
                                 "train_args": []}, R.resolved_recipe(STAGE, []))
    run = tmp_path / "seed1" / "SuperMarioBros-1-1"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps({"epoch": k, "agent_steps": 10_000 * k, "wall_s": 60.0 * k})
                                               + "\n" for k in (1, 2, 3)))
    (run / "evals.jsonl").write_text(_eval_row(20_000, "screen", 1, 0))
    one = M.mario_report(tmp_path)["seeds"]["1"]
    assert (one["agent_steps"], one["minutes"], one["done"]) == (30_000, 3.0, False)
    assert one["first_flag_agent_steps"] == 20_000 and one["first_flag_minutes"] == pytest.approx(2.0)
    md = M.mario_markdown(M.mario_report(tmp_path))
    assert "| 30,000 (3.0) * |" in md and "seed 1 at 20,000 agent steps (2 min)" in md


def _suite(path: Path, train_args: list[str], env: str = STAGE) -> Path:
    R.claim_suite_dir(path, {"suite": "mario", "env": env, "steps": 2_000_000, "minutes": None,
                             "train_args": train_args}, R.resolved_recipe(env, train_args))
    return path


def test_compare_puts_recipes_side_by_side_at_equal_agent_steps(tmp_path, capsys):
    """One change judged as the notebook judges it: each evaluation beside the other recipe's
    nearest the same mark (a resumed run's 457,425 beside 450,000), then the figures up to the
    agent steps both reached, where the longer run's later evaluations count for nothing."""
    from bench.suite_compare import compare_markdown, compare_suites, upto
    import benchmark_performance

    a = _suite(tmp_path / "suite-mario", [])
    b = _suite(tmp_path / "suite-mario_stall", ["--stall-steps", "10", "--stall-penalty", "25"])
    run_a = _seed(a, 1, [True] * 10, steps=500_000)
    run_b = _seed(b, 1, [True] * 10, steps=200_000)
    _seed(a, 2, [True] * 10)  # a seed only A trained: not compared
    (run_a / "evals.jsonl").write_text(_eval_row(50_000, "screen", 0, 0, stood=4)
                                       + _eval_row(100_000, "screen", 2, 1, stood=1)
                                       + _eval_row(100_000, "confirm", 5, 2, 20, stood=6)
                                       + _eval_row(457_425, "screen", 3, 2, stood=2))
    (run_b / "evals.jsonl").write_text(_eval_row(50_000, "screen", 0, 0, stood=0)
                                       + _eval_row(100_000, "screen", 1, 0, stood=0)
                                       + _eval_row(150_000, "screen", 4, 3, stood=0)
                                       + _eval_row(150_000, "confirm", 12, 9, 20, stood=1))
    with (run_a / "episodes.jsonl").open("a") as f:  # a game that stood until the clock, within 100k-200k
        f.write(json.dumps({"wall_s": 1.0, "agent_steps": 150_000, "return": 1.0, "length": 2_100, "distance": 978.0}) + "\n")
    (run_b / "metrics.jsonl").write_text("".join(json.dumps({"epoch": k, "agent_steps": 50_000 * k, "wall_s": 30.0 * k,
                                                             "stalls": k}) + "\n" for k in (1, 2, 3, 4, 5)))
    cmp = compare_suites([a, b])
    assert list(cmp["seeds"]) == ["1"] and cmp["seeds"]["1"]["common_agent_steps"] == 200_000
    assert cmp["recipes"][str(b)] == "--stall-steps 10 --stall-penalty 25.0"
    md = compare_markdown(cmp)
    assert f"- A: {a} (the preset as it is)" in md
    assert "| 100,000 | 2/10 (1 stood), 1/10 | 5/20 (6 stood), 2/20 | 1/10, 0/10 | - |" in md
    assert "| 450,000 | 3/10 (2 stood), 2/10 | - | - | - |" in md
    assert "Up to 200,000 agent steps" in md
    # A's 457k screening lies past the 200k both reached: its 2 stand-stills are not in A's figures
    assert "| A | 100,000 | 5/20, 2/20 at 100,000 | 11 of 40 (33 missed the flag) |" in md
    assert "| B | 100,000 | 12/20, 9/20 at 150,000 | 1 of 50 (33 missed the flag) |" in md
    # the training games per 100k up to 200k: A's long game is 2,100 of its 2,400 agent steps at 100k-200k; B's
    # stall rule ended 1 + 2 games in its first 100k and 3 + 4 in its second (its 250k epoch lies past 200k)
    assert ("| 0k-100k | 1 games, 0 at the flag, 0% in long games, stall rule 0 "
            "| 1 games, 0 at the flag, 0% in long games, stall rule 3 |") in md
    assert ("| 100k-200k | 2 games, 0 at the flag, 88% in long games, stall rule 0 "
            "| 1 games, 0 at the flag, 0% in long games, stall rule 7 |") in md
    assert benchmark_performance.main(["--compare", str(a), str(b), "--json", str(tmp_path / "c.json")]) == 0
    assert "| B | 100,000 |" in capsys.readouterr().out
    assert json.loads((tmp_path / "c.json").read_text())["seeds"]["1"]["upto"][str(b)]["greedy_stood"] == 1
    # a confirmation without a flag is no best confirmation, though it is the only one
    (run_b / "evals.jsonl").write_text(_eval_row(50_000, "screen", 0, 0, stood=2)
                                       + _eval_row(50_000, "confirm", 0, 0, 20, stood=5))
    assert upto(M.flag_curve(run_b, []), 50_000) == {"first_greedy_flag": None, "best_confirmation": None,
                                                     "greedy_games": 30, "greedy_flags": 0, "greedy_stood": 7}


def test_compare_refuses_folders_it_cannot_judge_side_by_side(tmp_path, capsys):
    import benchmark_performance
    from bench.suite_compare import compare_suites

    a = _suite(tmp_path / "a", [])
    _seed(a, 1, [True] * 10)
    other = _suite(tmp_path / "b", [], env="SuperMarioBros-1-2-v0")
    _seed(other, 1, [True] * 10, env="SuperMarioBros-1-2-v0")
    lonely = _suite(tmp_path / "c", ["--gamma", "0.95"])
    _seed(lonely, 2, [True] * 10)
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="one stage, and these folders trained SuperMarioBros-1-1-v0, SuperMarioBros-1-2-v0"):
        compare_suites([a, other])
    with pytest.raises(ConfigError, match="share no trained seed: .*a: 1; .*c: 2"):
        compare_suites([a, lonely])
    with pytest.raises(ConfigError, match="plain has no suite.json: not a suite folder"):
        compare_suites([a, tmp_path / "plain"])
    with pytest.raises(ConfigError, match="two or more Mario suite folders, got 1"):
        compare_suites([a])
    with pytest.raises(SystemExit) as e:
        benchmark_performance.main(["--compare", str(a), str(lonely)])
    assert e.value.code == 2 and "share no trained seed" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        benchmark_performance.main(["--compare", str(a), str(a), "--gamma", "0.95"])
    assert "trains nothing; drop --gamma 0.95" in capsys.readouterr().err
