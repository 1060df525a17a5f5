"""Successive halving (``--time-to-score --halving``): rungs, ranking, bad recipe files, and one
real two-rung run on the catch game."""
import json
import subprocess
import sys

import pytest

from bench.halving import rank_key, read_recipes, rung_minutes, survivors
from config_optimized import ConfigError
from tests.proc_utils import ROOT


def test_rungs_grow_by_eta_and_keep_the_best_fraction():
    assert rung_minutes(15, 2, 3) == [15, 30, 60]
    assert rung_minutes(5, 3, 2) == [5, 15]
    assert [survivors(n, 2) for n in (1, 2, 3, 4, 7)] == [1, 1, 2, 2, 4]
    assert survivors(8, 3) == 3


def test_ranking_puts_the_target_first_then_the_score_now():
    entries = [{"recipe": "slow", "minutes_to_target": 9.0, "score_now": 18.5},
               {"recipe": "none", "minutes_to_target": None, "score_now": None},
               {"recipe": "high", "minutes_to_target": None, "score_now": 12.0},
               {"recipe": "fast", "minutes_to_target": 4.0, "score_now": 18.0},
               {"recipe": "low", "minutes_to_target": None, "score_now": -20.0}]
    assert [e["recipe"] for e in sorted(entries, key=rank_key)] == ["fast", "slow", "high", "low", "none"]


@pytest.mark.parametrize("text, match", [
    ('[a]\nargs = ["--lr", "1e-3"]\n', "1 recipe"),
    ('[a]\nargs = "--lr 1e-3"\n[b]\nargs = []\n', r"recipe \[a\] needs args"),
    ("[a\nargs = []\n", "does not parse as TOML"),
])
def test_a_bad_recipes_file_is_refused_naming_the_problem(tmp_path, text, match):
    path = tmp_path / "recipes.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        read_recipes(str(path))
    with pytest.raises(ConfigError, match="no such file"):
        read_recipes(str(tmp_path / "missing.toml"))


def test_a_recipe_with_an_unknown_option_is_refused_before_any_run(tmp_path):
    path = tmp_path / "recipes.toml"
    path.write_text('[good]\nargs = ["--lr", "1e-3"]\n[typo]\nargs = ["--lrr", "1e-3"]\n')
    out = subprocess.run([sys.executable, "benchmark_performance.py", "--time-to-score", "--quick", "--halving",
                          str(path), "--runs-dir", str(tmp_path / "runs")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "recipe [typo]" in out.stderr
    assert not (tmp_path / "runs").exists()


def _two_rungs(tmp_path, recipes: str, minutes: float):
    """``--time-to-score --quick --halving`` over ``recipes`` (TOML), two rungs: (output, JSON)."""
    path = tmp_path / "recipes.toml"
    path.write_text(recipes)
    out = subprocess.run([sys.executable, "benchmark_performance.py", "--time-to-score", "--quick", "--halving",
                          str(path), "--minutes", str(minutes), "--rungs", "2", "--target", "5",
                          "--runs-dir", str(tmp_path / "runs"), "--json", str(tmp_path / "h.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out, json.loads((tmp_path / "h.json").read_text())


@pytest.mark.slow
def test_two_rungs_resume_only_the_better_recipe(tmp_path):
    """Two recipes train a first rung; the better one goes on, resumed from its own run (its
    agent steps and games continue), and the other is not run again."""
    out, res = _two_rungs(tmp_path, '[lr3]\nargs = ["--lr", "1e-3"]\n[lr4]\nargs = ["--lr", "1e-4"]\n', 0.1)
    first, second = res["rungs"]
    assert (first["minutes"], second["minutes"]) == (0.1, 0.2)
    assert len(first["standings"]) == 2 and len(first["kept"]) == 1
    kept = first["kept"][0]
    assert [s["recipe"] for s in second["standings"]] == [kept] and res["winner"] == kept
    before = next(s for s in first["standings"] if s["recipe"] == kept)
    after = second["standings"][0]
    assert after["run_dir"] == before["run_dir"] and after["agent_steps"] > before["agent_steps"]
    log = (tmp_path / "runs").glob(f"halving-*-{kept}/train.log")
    assert "[MAIN] Resumed" in next(log).read_text()
    assert out.stdout.count("[HALVING] rung 2/2") == 1


@pytest.mark.slow
def test_a_recipe_that_reaches_total_steps_keeps_its_standing(tmp_path):
    """Both recipes reach their --total-steps in the first rung: the one kept is not resumed (the
    training script refuses a run already at --total-steps), it keeps its standing, and the
    report and JSON are written."""
    out, res = _two_rungs(tmp_path, '[lr3]\nargs = ["--lr", "1e-3", "--total-steps", "800"]\n'
                                    '[lr4]\nargs = ["--lr", "1e-4", "--total-steps", "800"]\n', 0.5)
    first, second = res["rungs"]
    kept = first["kept"][0]
    before = next(s for s in first["standings"] if s["recipe"] == kept)
    assert second["standings"] == [before] and res["winner"] == kept
    from bench.halving import finished_steps

    assert finished_steps(before["run_dir"]) == 800  # its checkpoint is at --total-steps (its last game ended before)
    assert "reached --total-steps 800 in an earlier rung" in out.stdout
    log = next((tmp_path / "runs").glob(f"halving-*-{kept}/train.log")).read_text()
    assert "[MAIN] Resumed" not in log
