"""A suite's seeds, its one recipe, its statistics and its damaged files: bench/suite_runs.py,
bench/suite_stats.py and the Atari report over seeds (bench/suite.py)."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench import suite as S
from bench import suite_runs as R
from bench.suite_stats import iqm, iqm_interval
from config_optimized import ConfigError
from tests.proc_utils import ROOT

CATCH = "tests.catch_env:Catch-v0"
DATA = Path(ROOT) / "docs" / "data" / "suite_atari5_noddqn"


# ------------------------------------------------------------------ statistics, worked by hand

def test_iqm_trims_a_quarter_from_each_end():
    assert iqm([1, 2, 3, 4]) == 2.5                 # the middle two of four
    assert iqm([0, 10, 1, 2, 3]) == 2.0             # int(1.25) = 1 trimmed from each end of five
    assert iqm([[0, 100], [1, 2], [3, 4]]) == 2.5   # every game and seed in one pool: 1, 2, 3, 4 of six


def test_bootstrap_interval_resamples_each_game_within_itself():
    # each game's two seeds are equal: every stratified resample is the same pool, so the interval
    # is the point (a bootstrap over the pooled runs would mix 0s and 1s and spread it)
    assert iqm_interval([[0.0, 0.0], [1.0, 1.0]]) == (0.5, 0.5)
    # one game of seeds 0 and 1: a resample is (0,0), (0,1) or (1,0), (1,1) with chances 1/4, 1/2,
    # 1/4, whose IQM (two values, none trimmed) is 0, 0.5, 1; the 30th and 70th percentiles are 0.5
    assert iqm_interval([[0.0, 1.0]], level=0.4) == (0.5, 0.5)
    lo, hi = iqm_interval([[0.0, 1.0]])
    assert (lo, hi) == (0.0, 1.0)
    # seeded: the same runs give the same interval; more spread, a wider one
    rng = np.random.default_rng(1)
    games = [list(rng.normal(g, 0.1, 3)) for g in range(5)]
    assert iqm_interval(games) == iqm_interval(games)
    wide = [[x * 3 for x in g] for g in games]
    assert np.diff(iqm_interval(wide))[0] > np.diff(iqm_interval(games))[0]
    lo, hi = iqm_interval(games)
    assert lo <= iqm(games) <= hi


# ------------------------------------------------------------------ seeds

def test_seeds_come_from_seeds_or_seed_and_each_has_a_folder(tmp_path):
    assert R.parse_seeds("1,2,3", []) == [1, 2, 3]
    assert R.parse_seeds(None, []) == [1]
    assert R.parse_seeds(None, ["--seed", "4"]) == [4]
    for bad in ("1,1", "a", "", "-1"):
        with pytest.raises(ConfigError, match="--seeds"):
            R.parse_seeds(bad, [])
    with pytest.raises(ConfigError, match="drop --seed"):
        R.parse_seeds("1,2", ["--seed", "3"])
    assert R.without_seed(["--lr", "1e-3", "--seed", "2", "--seed=3"]) == ["--lr", "1e-3"]
    assert R.game_dir(tmp_path, 2, "ALE/BattleZone-v5") == tmp_path / "seed2" / "BattleZone"


def test_seed_0_given_with_seed_is_trained_as_seed_0(tmp_path):
    """``--seed 0`` is a seed like any other: the suite trains seed 0, in ``seed0/``, not the
    default seed 1 (0 once read as "not given")."""
    assert R.parse_seeds(None, ["--seed", "0"]) == [0]
    assert R.parse_seeds(None, ["--seed=0"]) == [0]
    assert S.check_suite_args("quick", ["--seed", "0"], 100, None) == [0]
    assert S.seed_folders(tmp_path, {"train_args": ["--seed", "0"]}) == {0: tmp_path}


def test_a_suite_folder_from_before_seeds_is_refused_with_the_move_to_make(tmp_path):
    (tmp_path / "Pong").mkdir()
    with pytest.raises(ConfigError, match=r"mkdir .*seed1 && mv .*Pong"):
        S.refuse_old_layout(tmp_path, list(S.SUITES["atari5"]))


def _games(run: Path, scores_per_window: list[float], per_window: int = 4, packed: bool = False) -> None:
    run.mkdir(parents=True)
    rows, wall = [], 0.0
    for i, score in enumerate(scores_per_window):
        for k in range(per_window):
            wall += 60.0
            rows.append({"wall_s": wall, "agent_steps": i * S.WINDOW + (k + 1) * S.WINDOW // per_window,
                         "updates": 0, "samples_trained": 0, "return": score, "length": 100})
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if packed:  # as a kept run is stored in docs/data
        (run / "episodes.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    else:
        (run / "episodes.jsonl").write_text(text)


def test_report_gives_each_window_the_mean_and_range_over_seeds_and_the_iqm_interval(tmp_path):
    a = S.load_anchors()["games"]
    R.claim_suite_dir(tmp_path, {"suite": "atari5", "steps": 500_000, "minutes": None, "train_args": []})
    # seeds 1 and 2 score each game at its human score and at random in window 1; seed 3 only
    # played BattleZone (kept gzipped, as docs/data keeps runs)
    for seed, frac in ((1, 1.0), (2, 0.0)):
        for name in S.IQM_GAMES:
            score = a[name]["random"] + frac * (a[name]["human"] - a[name]["random"])
            _games(tmp_path / f"seed{seed}" / name, [score, score], packed=name == "Qbert")
    _games(tmp_path / "seed3" / "BattleZone", [a["BattleZone"]["human"]] * 2, packed=True)
    rep = S.write_report(tmp_path)
    bz = rep["games"]["BattleZone"]["windows"][0]
    assert bz["seeds"] == 3 and bz["min"] == a["BattleZone"]["random"] and bz["max"] == a["BattleZone"]["human"]
    assert bz["mean"] == pytest.approx((2 * a["BattleZone"]["human"] + a["BattleZone"]["random"]) / 3)
    qb = rep["games"]["Qbert"]["windows"][0]  # read from episodes.jsonl.gz
    assert qb["seeds"] == 2 and qb["mean"] == pytest.approx((a["Qbert"]["human"] + a["Qbert"]["random"]) / 2)
    row = rep["iqm"][0]
    # the IQM pools the seeds that finished every Atari-5 game: 1 and 2, five 1s and five 0s
    assert row["ours_seeds"] == [1, 2] and row["ours"] == pytest.approx(0.5)
    assert row["ours_low"] <= 0.5 <= row["ours_high"] and row["ours_low"] < row["ours_high"]
    md = (tmp_path / "suite_report.md").read_text()
    assert "mean over seeds 1, 2, 3" in md and "95% stratified-bootstrap interval" in md
    assert f"[{S._fmt(a['BattleZone']['random'])}, {S._fmt(a['BattleZone']['human'])}]" in md


def test_a_one_seed_suite_gives_its_iqm_without_an_interval(tmp_path):
    """With one run per game the bootstrap can only redraw that run: its "interval" is the point.
    The report gives the IQM of one seed with no interval (as results.md does), and says why."""
    a = S.load_anchors()["games"]
    R.claim_suite_dir(tmp_path, {"suite": "atari5", "steps": 500_000, "minutes": None, "train_args": []})
    for name in S.IQM_GAMES:
        _games(tmp_path / "seed1" / name, [a[name]["random"] + 0.5 * (a[name]["human"] - a[name]["random"])] * 2)
    rep = S.write_report(tmp_path)
    row = rep["iqm"][0]
    assert row["ours_seeds"] == [1] and row["ours"] == pytest.approx(0.5)
    assert row["ours_low"] is None and row["ours_high"] is None
    md = (tmp_path / "suite_report.md").read_text()
    iqm_cell = next(line for line in md.splitlines() if line.startswith("| **IQM")).split(" | ")[3]
    assert iqm_cell == "**0.50 / 0.50**", iqm_cell
    assert "95% stratified-bootstrap interval" not in md
    assert "IQM 0k-250k: 0.50 over seed 1 (one seed: no interval; two or more give one)." in md


def test_a_report_reads_a_suite_folder_from_before_seeds(tmp_path):
    """A suite trained before seeds had folders: its games sit in the suite's folder (docs/data's
    seed-1 games, laid out so)."""
    shutil.copy(DATA / "suite.json", tmp_path / "suite.json")
    for game in (DATA / "seed1").iterdir():
        shutil.copytree(game, tmp_path / game.name)
    rep = S.suite_report(tmp_path)
    assert rep["seeds"] == [1]
    assert rep["games"]["Qbert"]["windows"][1]["mean"] == pytest.approx(1972, abs=1)
    assert rep["iqm"][1]["ours"] == pytest.approx(0.20, abs=0.01)


# ------------------------------------------------------------------ one recipe a folder

def test_a_recipe_is_recorded_with_the_first_game_and_later_games_start_with_it(tmp_path):
    options = {"suite": "quick", "steps": 1500, "minutes": None, "train_args": []}
    then = R.resolved_recipe(CATCH, [])
    assert "replay_ratio" in then and "seed" not in then and "learner_threads" not in then
    assert R.claim_suite_dir(tmp_path, options, then) == then
    # a pull later moves the preset (here: a flag plays the moved preset); the folder keeps its recipe
    assert R.claim_suite_dir(tmp_path, options, {**then, "replay_ratio": 2.0}) == then
    moved = ["--replay-ratio", "2", "--double-dqn", "true"]
    pinned = R.pinned_args(CATCH, moved, then)
    assert pinned[:len(moved)] == moved and "--replay-ratio" in pinned[len(moved):]
    assert R.resolved_recipe(CATCH, pinned) == then  # the game trains the recorded recipe
    assert R.pinned_args(CATCH, [], then) == []      # nothing moved: nothing added


def test_a_config_file_edited_between_invocations_does_not_change_the_recipe(tmp_path, capsys):
    conf = tmp_path / "recipe.toml"
    conf.write_text("lr = 0.001\n")
    args = ["--config", str(conf)]
    recipe = R.claim_suite_dir(tmp_path / "suite", {"suite": "quick", "steps": 1, "minutes": None, "train_args": args},
                               R.resolved_recipe(CATCH, args))
    conf.write_text("lr = 0.0005\n")
    R.say_pinned("[SUITE]", CATCH, args, recipe)
    assert "games started from now on get the suite's: --lr 0.001" in capsys.readouterr().out
    assert R.resolved_recipe(CATCH, R.pinned_args(CATCH, args, recipe))["lr"] == 0.001


def test_a_folder_from_before_recipes_takes_its_first_games_recorded_recipe(tmp_path):
    """suite.json without a recipe: the recipe is what its first game's run record says it trained."""
    (tmp_path / "seed1").mkdir()
    game = tmp_path / "seed1" / "Qbert"
    game.mkdir()
    (game / "config.json").write_text((DATA / "seed1" / "Qbert" / "config.json").read_text())
    options = {"suite": "atari5", "steps": 500_000, "minutes": None, "train_args": []}
    (tmp_path / R.SUITE_FILE).write_text(json.dumps(options))
    recipe = R.claim_suite_dir(tmp_path, options, {"replay_ratio": 1.0}, [game])
    assert recipe["replay_ratio"] == 8.0 and recipe["double_dqn"] is False and recipe["quantiles"] == 51
    assert json.loads((tmp_path / R.SUITE_FILE).read_text())["recipe"] == recipe


def _record(run: Path, env: str, **changed) -> None:
    """A run record (config.json) of today's recipe for ``env``, with ``changed`` settings."""
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps({"config": {**R.resolved_recipe(env, []), "env": env, **changed},
                                                 "git_commit": "0" * 40}))


def test_a_game_of_another_recipe_than_the_suites_is_out_of_the_report(tmp_path):
    """Seed 2's Qbert recorded another replay ratio than the suite's recipe: it is in no figure
    (Qbert's seeds and mean, the IQM, which seed 2 no longer has every game for) and the report
    names it with the flags it trained with."""
    a = S.load_anchors()["games"]
    env = S.SUITES["atari5"][0]
    R.claim_suite_dir(tmp_path, {"suite": "atari5", "steps": 500_000, "minutes": None, "train_args": []},
                      R.resolved_recipe(env, []))
    for seed, frac in ((1, 1.0), (2, 0.0)):
        for name in S.IQM_GAMES:
            run = tmp_path / f"seed{seed}" / name
            _games(run, [a[name]["random"] + frac * (a[name]["human"] - a[name]["random"])] * 2)
            _record(run, env, **({"replay_ratio": 4.0} if (seed, name) == (2, "Qbert") else {}))
    rep = S.write_report(tmp_path)
    assert rep["left_out"] == {"seed2/Qbert": ["--replay-ratio", "4.0"]}
    assert list(rep["games"]["Qbert"]["seeds"]) == ["1"] and rep["games"]["Qbert"]["windows"][0]["seeds"] == 1
    assert rep["games"]["Qbert"]["windows"][0]["mean"] == pytest.approx(a["Qbert"]["human"])
    assert rep["games"]["Phoenix"]["windows"][0]["seeds"] == 2
    assert rep["iqm"][0]["ours_seeds"] == [1] and rep["iqm"][0]["ours"] == pytest.approx(1.0)
    md = (tmp_path / "suite_report.md").read_text()
    assert "Left out (another recipe than the suite's): seed2/Qbert, trained with --replay-ratio 4.0." in md


def test_a_folder_from_before_recipes_whose_games_trained_two_recipes_is_refused(tmp_path):
    """suite.json without a recipe, and games whose run records differ: neither starting the next
    game nor the report takes the first game's recipe as the suite's; one line names the game
    that differs, how, and what to do."""
    env = S.SUITES["atari5"][0]
    options = {"suite": "atari5", "steps": 500_000, "minutes": None, "train_args": []}
    (tmp_path / R.SUITE_FILE).write_text(json.dumps(options))
    first, other = tmp_path / "seed1" / "BattleZone", tmp_path / "seed2" / "BattleZone"
    _record(first, env)
    _record(other, env, gamma=0.9)
    refused = (r"records no recipe .* and its games trained more than one: seed2/BattleZone trained with --gamma 0.9, "
               r"unlike seed1/BattleZone; move the games of the recipe you do not want out of")
    with pytest.raises(ConfigError, match=refused):
        R.claim_suite_dir(tmp_path, options, R.resolved_recipe(env, []), [first, other])
    assert "recipe" not in json.loads((tmp_path / R.SUITE_FILE).read_text())
    with pytest.raises(ConfigError, match=refused):
        S.suite_report(tmp_path)
    _record(other, env)  # the same recipe: taken, and the report reads both
    assert R.claim_suite_dir(tmp_path, options, {"replay_ratio": 1.0}, [first, other]) == R.recorded_recipe(first)
    assert S.suite_report(tmp_path)["left_out"] == {}


def test_the_report_prints_the_recipe_not_the_defaults(tmp_path):
    options = {"suite": "quick", "steps": 1500, "minutes": None, "train_args": []}
    R.claim_suite_dir(tmp_path, options, {**R.resolved_recipe(CATCH, []), "gamma": 0.9})
    md = S.report_markdown(S.suite_report(tmp_path))
    assert "Recipe: --gamma 0.9 (options: none)" in md
    R.claim_suite_dir(tmp_path / "b", options, R.resolved_recipe(CATCH, []))
    assert "Recipe: the preset as it is" in S.report_markdown(S.suite_report(tmp_path / "b"))


# ------------------------------------------------------------------ a damaged file is one line

def _suite(cmd_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "benchmark_performance.py", "--suite", "quick", "--steps", "100",
                           "--runs-dir", str(cmd_dir), "--games", "Catch", *extra], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("damage", ["suite.json", "checkpoint.pt", "suite_game.json", "config.json"])
def test_a_damaged_file_in_a_suite_folder_is_one_line_naming_it(tmp_path, damage):
    suite_dir = tmp_path / "suite-quick"
    game = suite_dir / "seed1" / "Catch"
    game.mkdir(parents=True)
    (suite_dir / R.SUITE_FILE).write_text(json.dumps({"suite": "quick", "steps": 100, "minutes": None,
                                                      "train_args": [], "recipe": R.resolved_recipe(CATCH, [])}))
    if damage == "suite.json":
        (suite_dir / R.SUITE_FILE).write_text('{"suite": "qu')
    elif damage == "checkpoint.pt":
        (game / "checkpoint.pt").write_bytes(b"PK\x03\x04 truncated")
    elif damage == "suite_game.json":
        (game / R.GAME_FILE).write_bytes(b"\xff\xfe not json")
    else:  # the run record a finished game is reported from
        (game / R.GAME_FILE).write_text(json.dumps({"env": CATCH, "counters": {"agent_steps": 100, "wall_s": 1.0}}))
        (game / "config.json").write_text("{")
    out = _suite(tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("error: ") and damage in line, line


def test_a_ctrl_c_while_a_run_starts_is_one_line_not_a_traceback(monkeypatch, capsys):
    """A suite passes Ctrl-C on to a child that may still be importing or resolving its settings,
    before its own handlers are set: the script then ends with one line and 130."""
    import mario_rl_optimized

    def interrupted(argv=None):
        raise KeyboardInterrupt
    monkeypatch.setattr(mario_rl_optimized, "main", interrupted)
    assert mario_rl_optimized.run_script([]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "[MAIN] Stopped by Ctrl-C while starting, before training began"
