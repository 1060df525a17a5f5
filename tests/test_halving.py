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


@pytest.mark.parametrize("case, match", [
    ("directory", r"is a directory, not a recipes file; give the TOML file"),
    ("not utf-8", r"is not UTF-8 text \(byte 0xff at offset 13\); save it as UTF-8"),
    ("unreadable", r"cannot be read \(Permission denied\); make it readable"),
])
def test_a_recipes_file_that_cannot_be_read_is_refused_in_one_line(tmp_path, monkeypatch, case, match):
    """A folder, a file in another encoding, a file this user may not read: one ConfigError naming
    the problem and the fix, not IsADirectoryError, UnicodeDecodeError or PermissionError."""
    import builtins

    import bench.halving

    path = tmp_path / "recipes.toml"
    if case == "directory":
        path.mkdir()
    elif case == "not utf-8":
        path.write_bytes('[a]\nargs = ["\xff"]\n[b]\nargs = []\n'.encode("latin-1"))
    else:  # root (the tests' user) reads any file: the error open() gives a user who may not
        path.write_text('[a]\nargs = []\n[b]\nargs = []\n')

        def refuse(file, *args, **kwargs):
            if str(file) == str(path):
                raise PermissionError(13, "Permission denied", str(file))
            return builtins.open(file, *args, **kwargs)
        monkeypatch.setattr(bench.halving, "open", refuse, raising=False)
    with pytest.raises(ConfigError, match=match) as e:
        read_recipes(str(path))
    assert str(e.value).startswith(f"--halving {path}") and "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["/abs/dir", "..", ".", "a/b", "", "a\u0000b", "../up"])
def test_a_recipe_name_that_is_not_a_folder_name_is_refused(tmp_path, name):
    """Each recipe's runs go in a folder of its name under the search folder: a name that is not one
    plain path component ("/abs/dir", "..", "a/b", "") would put them elsewhere; refused on reading."""
    path = tmp_path / "recipes.toml"
    key = name.replace("\0", "\\u0000")
    path.write_text(f'["{key}"]\nargs = []\n[good]\nargs = []\n')
    with pytest.raises(ConfigError, match=r"recipe \[.*\]: its name is not a folder name") as e:
        read_recipes(str(path))
    assert repr(name) in str(e.value) and "\n" not in str(e.value)
    path.write_text('["qr-51_v2.b"]\nargs = []\n[good]\nargs = []\n')  # one plain component, dots and all
    assert list(read_recipes(str(path))) == ["qr-51_v2.b", "good"]


def test_a_bad_recipes_file_or_name_stops_the_command_with_one_line(tmp_path):
    """As a user meets it: exit code 2, one error line (no traceback), no run folder made."""
    (tmp_path / "names.toml").write_text('["../escaped"]\nargs = []\n[good]\nargs = []\n')
    for given in (tmp_path, tmp_path / "names.toml"):  # a folder; a recipe named out of the search folder
        out = subprocess.run([sys.executable, "benchmark_performance.py", "--time-to-score", "--quick", "--halving",
                              str(given), "--runs-dir", str(tmp_path / "runs")],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2 and out.stderr.startswith(f"error: --halving {given}"), out.stderr
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr, out.stderr
        assert not (tmp_path / "runs").exists()


def test_a_recipe_with_an_unknown_option_is_refused_before_any_run(tmp_path):
    path = tmp_path / "recipes.toml"
    path.write_text('[good]\nargs = ["--lr", "1e-3"]\n[typo]\nargs = ["--lrr", "1e-3"]\n')
    out = subprocess.run([sys.executable, "benchmark_performance.py", "--time-to-score", "--quick", "--halving",
                          str(path), "--runs-dir", str(tmp_path / "runs")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "recipe [typo]" in out.stderr
    assert not (tmp_path / "runs").exists()


def _two_rungs(tmp_path, recipes: str, minutes: float, eta: int = 2):
    """``--time-to-score --quick --halving`` over ``recipes`` (TOML), two rungs: (output, JSON)."""
    path = tmp_path / "recipes.toml"
    path.write_text(recipes)
    out = subprocess.run([sys.executable, "benchmark_performance.py", "--time-to-score", "--quick", "--halving",
                          str(path), "--minutes", str(minutes), "--rungs", "2", "--eta", str(eta), "--target", "5",
                          "--runs-dir", str(tmp_path / "runs"), "--json", str(tmp_path / "h.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out, json.loads((tmp_path / "h.json").read_text())


@pytest.mark.slow
def test_two_rungs_resume_only_the_better_recipe(tmp_path):
    """Two recipes train a first rung; the better one goes on, resumed from its own run (its
    agent steps and games continue), and the other is not run again."""
    # eta 4: the second rung's limit is 1 min from the run's start, 45 s beyond the first's, as the
    # limits count set-up (a slow CPU needs ~10 s of it, a loaded one more: at eta 2 a resume
    # beside a training run spent its 15 s setting up and trained no step)
    out, res = _two_rungs(tmp_path, '[lr3]\nargs = ["--lr", "1e-3"]\n[lr4]\nargs = ["--lr", "1e-4"]\n', 0.25, eta=4)
    first, second = res["rungs"]
    assert (first["minutes"], second["minutes"]) == (0.25, 1.0)
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
