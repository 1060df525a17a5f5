"""The results of record are written from the data, and the README's table is theirs
(bench/results.py)."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from bench import results as RS


def test_readme_table_and_results_page_are_what_the_data_gives():
    """Fails where someone edits a figure by hand or commits data without running --results."""
    results = RS.collect()
    assert RS.readme_block() == RS.readme_table(results), \
        "README.md's results table differs from the data: run python benchmark_performance.py --results"
    assert RS.RESULTS.read_text() == RS.results_markdown(results) + "\n", \
        "docs/results.md differs from the data: run python benchmark_performance.py --results"


def test_the_readme_is_a_users_page():
    text = RS.README.read_text()
    assert len(text.splitlines()) <= 150
    import re
    # a commit hash: 7-40 hex digits with a letter and a digit among them
    assert not re.search(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", text), "a commit hash in the README"
    assert re.search(r"IQM -?\d\.\d\d, 95% interval \[-?\d\.\d\d, -?\d\.\d\d\]", text), \
        "the README's results table gives the suite's IQM without its interval"


def test_a_run_of_another_recipe_is_left_out_and_named(tmp_path, monkeypatch):
    src = next(s for s in RS.SOURCES if s.kind == "time_to_score")
    for name in src.runs:
        shutil.copytree(RS.DATA / name, tmp_path / name)
    record = json.loads((tmp_path / src.runs[1] / "config.json").read_text())
    record["config"]["replay_ratio"] = 4.0
    (tmp_path / src.runs[1] / "config.json").write_text(json.dumps(record))
    monkeypatch.setattr(RS, "DATA", tmp_path)
    res = RS.time_to_score(src)
    assert [r["seed"] for r in res["summary"]] == [1]
    assert res["other"] == {src.runs[1]: ["--replay-ratio", "4.0"]}
    page = RS.results_markdown([(src, res)])
    assert f"- `data/{src.runs[1]}`: trained with --replay-ratio 4.0" in page


def test_pong_scores_are_the_rolling_mean_of_the_last_20_games():
    rows = [{"return": float(r), "agent_steps": i * 100, "wall_s": i} for i, r in enumerate([10] * 19 + [18] * 30)]
    hit = RS.first_reached(rows, 14.0)
    assert hit["agent_steps"] == 2800  # the 29th game: the last 20 are 10 of 10 and 10 of 18, a mean of 14
    assert RS.first_reached(rows, 19.0) is None
    assert RS.rolling(rows)[0] == (1900, pytest.approx(10.4))


def test_pongs_row_takes_the_suites_own_seeds_and_borrows_only_the_seeds_it_lacks(tmp_path, monkeypatch):
    """The runs to 1.3M (seeds 1 and 2) fill the suite's Pong row where the suite has no run of
    that seed; a suite run of seed 2 is taken over the long run's, and seed 3 joins them."""
    src = next(s for s in RS.SOURCES if s.kind == "pong_long")
    for name in src.runs:
        shutil.copytree(RS.DATA / name, tmp_path / name)
    monkeypatch.setattr(RS, "DATA", tmp_path)
    seeds, said = RS.pong_seeds({})
    assert sorted(seeds) == [1, 2] and said == " (Pong seeds 1, 2: the first 500k agent steps of the runs to 1.3M, below)"
    assert all(r["windows"][1]["complete"] for r in seeds.values())
    own = {"windows": [{"window": 1, "complete": True, "mean": -20.0, "games": 9, "minutes": 1.0},
                       {"window": 2, "complete": True, "mean": 5.0, "games": 9, "minutes": 2.0}]}
    seeds, said = RS.pong_seeds({"2": own, "3": own})
    assert sorted(seeds) == [1, 2, 3] and seeds[2] is own and seeds[3] is own
    assert said == " (Pong seed 1: the first 500k agent steps of the runs to 1.3M, below)"
    seeds, said = RS.pong_seeds({"1": own, "2": own})
    assert said == "" and sorted(seeds) == [1, 2]


def test_the_suites_runs_are_named_under_their_machine_precision_and_commit(tmp_path):
    """Each figure names where it was trained: the suite's runs grouped by the machine, precision
    and commit of their first start, each run by seed and game."""
    def run(seed, game, cpu, amp, commit):
        folder = tmp_path / f"seed{seed}" / game
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(
            {"config": {"seed": seed, "amp": amp}, "hardware": {"cuda": False}, "git_commit": commit,
             "hardware_summary": f"CPU: {cpu}, 2 cores (bf16: a learner step 1.06x fp32's speed); RAM 24 GiB"}))
        return folder

    runs = [run(1, "Qbert", "AMD EPYC (family 26 model 2)", True, "987b3bb" + "0" * 33),
            run(2, "Qbert", "AMD EPYC (family 26 model 2)", False, "6eff6d1" + "0" * 33),
            run(3, "Phoenix", "AMD EPYC (family 26 model 2)", False, "6eff6d1" + "0" * 33),
            run(3, "Qbert", "AMD EPYC (family 26 model 2)", False, "6eff6d1" + "0" * 33)]
    assert RS.where_trained(runs) == ("AMD EPYC (family 26 model 2), bf16, commit 987b3bb (seed 1: Qbert); "
                                      "AMD EPYC (family 26 model 2), fp32, commit 6eff6d1 (seed 2: Qbert; "
                                      "seed 3: Phoenix, Qbert)")


def _suite_copy(tmp_path, monkeypatch, kind: str):
    """A copy of a suite of record's data under ``tmp_path``, read by bench/results.py in its place."""
    src = next(s for s in RS.SOURCES if s.kind == kind)
    shutil.copytree(RS.DATA / src.runs[0], tmp_path / src.runs[0])
    monkeypatch.setattr(RS, "DATA", tmp_path)
    return src, tmp_path / src.runs[0]


def _set_config(run, **values):
    """The settings of a run's first start (a resumed run keeps it under "previous") changed."""
    record = json.loads((run / "config.json").read_text())
    (record.get("previous") or [record])[0]["config"].update(values)
    (run / "config.json").write_text(json.dumps(record))


def test_an_atari_suite_run_of_another_recipe_is_out_of_every_figure(tmp_path, monkeypatch):
    """Seed 2's Qbert run recorded with another replay ratio: listed as left out, and out of the
    Qbert row's seeds and mean, the IQM (seed 2 no longer has every game) and where it trained."""
    src, suite = _suite_copy(tmp_path, monkeypatch, "atari_suite")
    before = RS.atari_suite(src)
    assert before["other"] == {} and before["summary"]["seeds"] == [1, 2, 3]
    _set_config(suite / "seed2" / "Qbert", replay_ratio=4.0)
    res = RS.atari_suite(src)
    assert res["other"] == {f"{src.runs[0]}/seed2/Qbert": ["--replay-ratio", "4.0"]}
    qbert = next(line for line in res["lines"] if line.startswith("| Qbert |"))
    assert "(2 seeds)" in qbert and qbert != next(line for line in before["lines"] if line.startswith("| Qbert |"))
    assert res["summary"]["seeds"] == [1, 3] and res["summary"]["iqm"] != before["summary"]["iqm"]
    assert "over seeds 1, 3;" in "\n".join(res["lines"])
    trained = next(line for line in res["lines"] if line.startswith("Trained on:"))
    assert "seed 2: Qbert" not in trained and "seed 2: Phoenix" in trained
    table = RS.readme_table([(src, res)])
    assert f"IQM {res['summary']['iqm']:.2f}" in table and "| 1, 3 |" in table


def test_a_mario_seed_of_another_recipe_is_out_of_every_figure(tmp_path, monkeypatch):
    """Seeds 2 and 3 trained today's recipe, seed 1 another: seed 1 is listed as left out and is
    in no row, no figure and no seed list of the page or the README; with every seed of another
    recipe, the page says so and gives no figure."""
    src, suite = _suite_copy(tmp_path, monkeypatch, "mario_suite")
    today = RS.resolved_recipe(src.env, list(src.args))
    for seed in (2, 3):  # the record's seeds 2 and 3, or where it has only seed 1 so far, copies of it
        if not (suite / f"seed{seed}").is_dir():
            shutil.copytree(suite / "seed1", suite / f"seed{seed}")
    flags = [json.loads((suite / f"seed{seed}" / "SuperMarioBros-1-1" / "suite_eval.json").read_text())["greedy"]["flags"]
             for seed in (2, 3)]
    for seed in (2, 3):
        _set_config(suite / f"seed{seed}" / "SuperMarioBros-1-1", confirm_episodes=today["confirm_episodes"])
    _set_config(suite / "seed1" / "SuperMarioBros-1-1", confirm_episodes=today["confirm_episodes"], gamma=0.95)
    res = RS.mario_suite(src)
    assert res["other"] == {f"{src.runs[0]}/seed1/SuperMarioBros-1-1": ["--gamma", "0.95"]}
    assert [r["seed"] for r in res["summary"]] == ["2", "3"]
    page = "\n".join(res["lines"])
    assert "| 1 |" not in page and "Seed 1," not in page and "seed 1 from" not in page and "(seed 1)" not in page
    assert "| 2 |" in page and "| 3 |" in page
    row = next(line for line in RS.readme_table([(src, res)]).splitlines() if line.startswith("| [Mario"))
    assert row.endswith("| 2, 3 |") and f"the flag in {flags[0]}, {flags[1]} greedy" in row, row

    _set_config(suite / "seed2" / "SuperMarioBros-1-1", gamma=0.95)
    _set_config(suite / "seed3" / "SuperMarioBros-1-1", gamma=0.95)
    res = RS.mario_suite(src)
    assert len(res["other"]) == 3 and res["summary"] == []
    assert res["lines"] == ["No figure of today's recipe yet: the suite's runs on record (seeds 1, 2, 3) trained "
                            "another recipe (--gamma 0.95; today's command trains --gamma 0.9), each listed under "
                            "\"Runs left out\" below."]
    row = next(line for line in RS.readme_table([(src, res)]).splitlines() if line.startswith("| [Mario"))
    assert row.endswith("| not measured with today's defaults yet (the runs on record trained another recipe) | - |")


def test_the_stages_give_a_row_per_stage_and_seed_beside_the_r2d2_agent_and_leave_out_another_recipe(tmp_path,
                                                                                                     monkeypatch):
    """World 4-1's stage suite of record alone under suite_mario_stages: a row with its first
    greedy flag, its kept weights and their plays beside the R2D2 agent's 1.71M, on the page and
    in the README's row; the same run recorded with another gamma is left out of both."""
    src = next(s for s in RS.SOURCES if s.kind == "mario_stages")
    suite = tmp_path / src.runs[0] / "suite-mario-4-1"
    run = suite / "seed1" / "SuperMarioBros-4-1"
    shutil.copytree(RS.DATA / src.runs[0] / "suite-mario-4-1", suite)
    monkeypatch.setattr(RS, "DATA", tmp_path)
    res = RS.mario_stages(src)
    assert res["other"] == {}
    (row,) = res["summary"]
    assert (row["stage"], row["seed"], row["r2d2"], row["greedy"], row["games"]) == ("4-1", "1", 1_710_000, 10, 10)
    page = "\n".join(res["lines"])
    assert re.search(r"^\| 4-1 \| 1 \| [\d,]+ \(\d+\) \| 368,379 \(\d+\) \| 10/10 / 4/10 \| [\d,]+ \| 1,710,000 \|$",
                     page, re.M), page
    readme = next(line for line in RS.readme_table([(src, res)]).splitlines() if line.startswith("| [Mario beyond"))
    assert "4-1: the flag in 10 of 10 fresh greedy games (kept at 368k agent steps; first greedy flag at " in readme
    assert "R2D2 1.71M)" in readme and readme.endswith("| 4-1: 1 |")

    _set_config(run, gamma=0.95)
    res = RS.mario_stages(src)
    assert res["other"] == {f"{src.runs[0]}/suite-mario-4-1/seed1/SuperMarioBros-4-1": ["--gamma", "0.95"]}
    assert res["summary"] == [] and res["lines"] == ["No stage run of today's defaults is in docs/data yet."]
