"""``benchmark_performance.py --suite``: the scoring (Dopamine's windows, the IQM of human-normalized
scores), the anchors it ships, what it refuses before any run starts, and a whole suite run as a
user runs it: stopped by SIGTERM in its first game, resumed by the same command, then only read."""
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from bench import suite as S
from bench import suite_runs as R
from config_optimized import ConfigError
from pipeline.settings.hardware import detect_cores
from tests.proc_utils import CATCH, ROOT, env_for, marked_processes, read_until, segments_left

# The quick suite's training options: CATCH's without its game, at one sample per agent step (not
# 4): these tests check how a suite stops, resumes, shares the machine and reports, not what the
# games learn, and the updates at 4 were most of their minutes on a 2-core CPU.
SUITE_OPTS = [*(a for a in CATCH if a not in ("--env", "tests.catch_env:Catch-v0")), "--replay-ratio", "1"]


@pytest.fixture
def mark():
    """A marker for the processes a test starts; any left by a failing test are killed at teardown,
    so a suite that does not stop cannot go on using the machine's cores."""
    m = uuid.uuid4().hex
    yield m
    for pid in marked_processes(m):
        if pid != os.getpid():
            os.kill(pid, signal.SIGKILL)


def test_window_scores_put_each_game_in_the_window_it_ended_in():
    rows = [{"agent_steps": 10, "return": 1.0}, {"agent_steps": 250_000, "return": 3.0},
            {"agent_steps": 250_001, "return": 10.0}, {"agent_steps": 400_000, "return": 20.0}]
    w = S.window_scores(rows, 430_000)
    assert [x["mean"] for x in w] == [2.0, 15.0]
    assert [x["games"] for x in w] == [2, 2]
    assert [x["complete"] for x in w] == [True, False]  # the run stopped at 430k, inside window 2
    assert S.window_scores(rows, 500_000)[1]["complete"] is True
    assert S.window_scores([], 0) == []


def test_minutes_at_interpolates_between_recorded_points():
    pts = [(100_000, 600.0), (300_000, 1800.0)]
    assert S.minutes_at(pts, 250_000) == pytest.approx(25.0)
    assert S.minutes_at(pts, 300_000) == pytest.approx(30.0)
    assert S.minutes_at(pts, 300_001) is None


def test_iqm_is_the_mean_of_the_middle_half():
    assert S.iqm([100.0, 1.0, 2.0, 3.0, -50.0]) == pytest.approx(2.0)  # of five, the middle three
    assert S.iqm([1.0, 2.0, 3.0, 4.0]) == pytest.approx(2.5)
    assert S.human_normalized(-16.4, -18.6, -16.4) == pytest.approx(1.0)


def test_anchors_hold_the_published_values_the_issue_quotes():
    a = S.load_anchors()
    assert "5873f549" in a["dopamine"]["source"]
    for name in (*S.IQM_GAMES, "Pong"):
        g = a["games"][name]
        assert g["human"] > g["random"]
        assert set(g["dopamine"]) == {"CNN QR-DQN", "CNN IQN", "Impala QR-DQN", "Impala IQN", "Impala Rainbow"}
    # iterations 1-3 of three rows of the table in the suite's docs (Dopamine's 5-seed means)
    assert [round(x, 1) for x in a["games"]["Pong"]["dopamine"]["Impala QR-DQN"][:3]] == [-18.1, 8.8, 16.0]
    assert [round(x) for x in a["games"]["Qbert"]["dopamine"]["CNN QR-DQN"][:3]] == [282, 699, 1303]
    assert [round(x, 1) for x in a["games"]["DoubleDunk"]["dopamine"]["CNN QR-DQN"][:3]] == [-18.6, -20.4, -17.8]


def test_suite_refuses_what_it_sets_itself_and_bad_lengths():
    with pytest.raises(ConfigError, match="--total-steps"):
        S.check_suite_args("atari5", ["--total-steps", "5"], 500_000, None)
    with pytest.raises(ConfigError, match="--env"):
        S.check_suite_args("atari5", ["--env=ALE/Pong-v5"], 500_000, None)
    with pytest.raises(ConfigError, match="unknown suite"):
        S.check_suite_args("atari57", [], 500_000, None)
    with pytest.raises(ConfigError, match="--steps"):
        S.check_suite_args("atari5", [], 0, None)
    with pytest.raises(ConfigError, match="ALE/BattleZone-v5: .*--lr"):
        S.check_suite_args("atari5", ["--lr", "-1"], 500_000, None)
    assert R.suite_dir_name("atari5", []) == "suite-atari5"
    assert R.suite_dir_name("atari5", ["--seed", "2"]) == "suite-atari5"  # each seed is a folder inside
    long = R.suite_dir_name("atari5", ["--learning-starts", "500", "--buffer-size", "20000", "--lr", "1e-3"])
    assert len(long) == len("suite-atari5_") + 10 and long != R.suite_dir_name("atari5", ["--lr", "1e-3"])


def test_a_suite_folder_is_not_continued_with_other_options(tmp_path):
    R.claim_suite_dir(tmp_path, {"suite": "atari5", "steps": 500_000, "minutes": None, "train_args": []})
    R.claim_suite_dir(tmp_path, {"suite": "atari5", "steps": 500_000, "minutes": None, "train_args": []})
    with pytest.raises(ConfigError, match="other options"):
        R.claim_suite_dir(tmp_path, {"suite": "atari5", "steps": 1_000_000, "minutes": None, "train_args": []})


def _write_games(d: Path, name: str, scores_per_window: list[float], games_per_window: int = 4, seed: int = 1):
    run = d / f"seed{seed}" / name
    run.mkdir(parents=True)
    rows, wall = [], 0.0
    for i, score in enumerate(scores_per_window):
        for k in range(games_per_window):
            wall += 60.0
            rows.append({"wall_s": wall, "agent_steps": i * S.WINDOW + (k + 1) * S.WINDOW // games_per_window,
                         "updates": 0, "samples_trained": 0, "return": score, "length": 100})
    (run / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_shared_with_names_how_a_game_shared_the_machine():
    assert S.shared_with({"games_at_once": 1, "other_runs": 0}) is None
    assert S.shared_with({"games_at_once": 2, "other_runs": 1}) == "2 at once"  # the other is its partner
    assert S.shared_with({"games_at_once": 2, "other_runs": 2}) == "up to 2 other training runs beside it"
    assert S.shared_with({}) is None  # a report of a folder from before either was recorded


def test_report_scores_windows_and_the_iqm_beside_the_anchors(tmp_path):
    a = S.load_anchors()["games"]
    R.claim_suite_dir(tmp_path, {"suite": "atari5", "steps": 500_000, "minutes": None, "train_args": []})
    # each Atari-5 game at its own human score in window 1 and random in window 2; Pong half-way
    for name in S.IQM_GAMES:
        _write_games(tmp_path, name, [a[name]["human"], a[name]["random"]])
    _write_games(tmp_path, "Pong", [-2.0, 14.6])
    rep = S.write_report(tmp_path)
    assert [r["ours"] for r in rep["iqm"]] == [pytest.approx(1.0), pytest.approx(0.0)]
    # each anchor's IQM is over its 25 runs (5 games x 5 seeds), as ours is over games and seeds,
    # with its interval; not the IQM of its five per-game means
    cnn = [[[S.human_normalized(v, a[n]["random"], a[n]["human"]) for v in a[n]["dopamine_seeds"]["CNN QR-DQN"][i]]
            for n in S.IQM_GAMES] for i in range(2)]
    assert [r["CNN QR-DQN"] for r in rep["iqm"]] == [pytest.approx(S.iqm(c)) for c in cnn]
    assert all(len(sum(c, [])) == 25 for c in cnn)
    assert rep["iqm"][1]["CNN QR-DQN low"] < rep["iqm"][1]["CNN QR-DQN"] < rep["iqm"][1]["CNN QR-DQN high"]
    means = S.iqm([S.human_normalized(a[n]["dopamine"]["CNN QR-DQN"][1], a[n]["random"], a[n]["human"])
                   for n in S.IQM_GAMES])
    assert rep["iqm"][1]["CNN QR-DQN"] != pytest.approx(means, abs=1e-3)
    bz = rep["games"]["BattleZone"]["windows"]
    assert bz[1]["minutes"] == pytest.approx(8.0)  # the 8th game ended exactly at 500k, 8 minutes in
    md = (tmp_path / "suite_report.md").read_text()
    assert "Window 0k-250k: ours (mean over seeds) above CNN QR-DQN on 5 of 5" in md
    # at random play only DoubleDunk is above CNN QR-DQN, whose 250k-500k mean (-20.4) is below random
    assert "Window 250k-500k: ours (mean over seeds) above CNN QR-DQN on 1 of 5 finished Atari-5 games (DoubleDunk)" in md
    assert (tmp_path / "suite_report.png").stat().st_size > 10_000
    assert "Trained side by side" not in md  # no game recorded another run beside it
    # a game whose epochs ended beside another run (a second suite process): its minutes are a share
    (tmp_path / "seed1" / "Phoenix" / "metrics.jsonl").write_text("".join(
        json.dumps({"agent_steps": s, "other_runs": n}) + "\n" for s, n in ((250_000, 0), (500_000, 1))))
    md = S.report_markdown(S.suite_report(tmp_path))
    assert "Trained side by side: Phoenix (up to 1 other training run beside it);" in md
    # a game not yet played leaves the IQM open rather than averaging four games
    for f in (tmp_path / "seed1" / "Qbert").iterdir():
        f.unlink()
    rep = S.suite_report(tmp_path)
    assert rep["iqm"][0]["ours"] is None and rep["games"]["Qbert"]["windows"] == []


@pytest.mark.slow
def test_suite_stops_on_sigterm_resumes_and_then_only_reads(tmp_path, mark):
    """The quick suite (two catch games) as a user runs it: SIGTERM during the first game stops the
    run cleanly and the suite after it (exit 130, the report still written); the same command
    resumes that game from its checkpoint and plays the second; a third time trains nothing."""
    opts = SUITE_OPTS
    # 2,000 agent steps a game, past learning's start (500) plus the head start the collectors may
    # play before the learner's updates pay for it (ReplayRatio.slack, 1,000): at 1,500 a slow
    # first update let the first game play all its steps before the signal reached it, and this
    # test needs a game the signal stopped short of its length
    steps = 2000
    cmd = [sys.executable, "benchmark_performance.py", "--suite", "quick", "--steps", str(steps),
           "--runs-dir", str(tmp_path), *opts]
    before = set(Path("/dev/shm").glob("dqnrl_*"))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env_for(mark), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines: list[str] = []
    # SIGTERM as the first game starts learning (~500 of its 2,000 agent steps)
    assert read_until(proc, "[MAIN] Learning starts", lines), "".join(lines)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    out = "".join(lines) + out
    assert proc.returncode == 130, out
    assert "stopped by SIGTERM during tests.catch_env:Catch-v0 seed 1" in out
    (suite_dir,) = tmp_path.glob("suite-quick_*")
    first = suite_dir / "seed1" / "Catch"
    assert not (suite_dir / "seed1" / "CountingCatch").exists()
    assert (suite_dir / "suite_report.md").exists()
    state, counters = R.game_state(first, steps, None)
    assert state == "resume" and 0 < counters["agent_steps"] < steps

    out = subprocess.run(cmd, cwd=ROOT, env=env_for(mark), capture_output=True, text=True, timeout=300).stdout
    assert f"resumed at {counters['agent_steps']:,} agent steps" in out
    assert "tests.catch_env:CountingCatch-v0 seed 1: started" in out
    for name in ("Catch", "CountingCatch"):
        assert R.game_state(suite_dir / "seed1" / name, steps, None)[0] == "done"
        assert json.loads((suite_dir / "seed1" / name / R.GAME_FILE).read_text())["counters"]["agent_steps"] >= steps
    rep = json.loads((suite_dir / "suite_report.json").read_text())
    assert all(g["windows"][0]["games"] > 0 for g in rep["games"].values())

    again = subprocess.run(cmd, cwd=ROOT, env=env_for(mark), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.count(": done (") == 2 and "mario_rl_optimized.py" not in again.stdout
    deadline = time.time() + 10
    while marked_processes(mark) and time.time() < deadline:
        time.sleep(0.1)
    assert marked_processes(mark) == [], "a process of the suite outlived it"
    assert segments_left(before) == [], "shared memory left in /dev/shm"


def test_two_games_at_once_stop_together_resume_and_are_reported_as_shared(tmp_path, mark):
    """--games-at-once 2: both catch games train side by side; SIGTERM stops both cleanly (exit 130,
    each named); the same command resumes both; the report says they shared the machine."""
    opts = SUITE_OPTS
    cmd = [sys.executable, "benchmark_performance.py", "--suite", "quick", "--steps", "1500", "--games-at-once", "2",
           "--runs-dir", str(tmp_path), *opts]
    before = set(Path("/dev/shm").glob("dqnrl_*"))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env_for(mark), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines: list[str] = []
    assert read_until(proc, "[MAIN] Learning starts", lines), "".join(lines)
    assert read_until(proc, "[MAIN] Learning starts", lines), "".join(lines)  # the second game's
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    out = "".join(lines) + out
    assert proc.returncode == 130, out
    assert "2 games at once" in out and "tests.catch_env:Catch-v0 seed 1: started" in out
    assert "tests.catch_env:CountingCatch-v0 seed 1: started" in out
    # each learner gets its share of the threads one game alone would have (2-thread learners side
    # by side on 2 cores stall each other at every parallel step)
    share = R.learner_threads_beside("tests.catch_env:Catch-v0", opts, 2)
    alone = R.learner_threads_beside("tests.catch_env:Catch-v0", opts, 1)
    assert alone == [] and share[0] == "--learner-threads" and 1 <= int(share[1]) <= max(1, detect_cores() // 2)
    started = re.findall(r"\[SUITE\] \S+ seed 1: started: .*", out)
    assert len(started) == 2 and all(line.endswith(" ".join(share)) for line in started), out
    (suite_dir,) = tmp_path.glob("suite-quick_*")
    stopped = re.search(r"stopped by SIGTERM during (.*) \(each run", out)
    assert stopped, out
    running = set(stopped.group(1).split(", "))  # a game may reach its 1,500 steps before the signal
    assert running and running <= {"tests.catch_env:Catch-v0 seed 1", "tests.catch_env:CountingCatch-v0 seed 1"}, out

    out = subprocess.run(cmd, cwd=ROOT, env=env_for(mark), capture_output=True, text=True, timeout=300).stdout
    assert out.count(": done (") == 2, out
    resumed = re.findall(r"\[SUITE\] (\S+ seed 1): resumed at .*", out)
    assert set(resumed) == running, out  # each game the signal stopped, and only those
    resumed = re.findall(r"\[SUITE\] \S+ seed 1: resumed at .*", out)
    assert all(line.endswith(" ".join(share)) for line in resumed), out
    for name in ("Catch", "CountingCatch"):
        assert json.loads((suite_dir / "seed1" / name / R.GAME_FILE).read_text())["games_at_once"] == 2
    md = (suite_dir / "suite_report.md").read_text()
    # "2 at once"; where other training runs shared the machine too (a developer's background
    # runs), their count, which includes the other game
    how = r"(2 at once|up to \d+ other training runs beside it)"
    assert re.search(rf"Trained side by side: Catch \({how}\), CountingCatch \({how}\)", md), md
    deadline = time.time() + 10
    while marked_processes(mark) and time.time() < deadline:
        time.sleep(0.1)
    assert marked_processes(mark) == [], "a process of the suite outlived it"
    assert segments_left(before) == [], "shared memory left in /dev/shm"


def test_a_game_that_fails_stops_the_games_beside_it(tmp_path, monkeypatch, mark):
    """A run that fails (here: a setting its script refuses) stops the run beside it cleanly and
    the error names the one that failed; no child outlives the suite."""
    monkeypatch.setenv("DQN_TEST_MARK", mark)
    opts = SUITE_OPTS
    runs = [R.GameRun("tests.catch_env:Catch-v0", tmp_path / "Catch", opts, "[SUITE] catch", "the good run"),
            R.GameRun("tests.catch_env:CountingCatch-v0", tmp_path / "Bad", [*opts, "--lr", "-1"], "[SUITE] bad",
                      "the bad run")]
    with pytest.raises(RuntimeError, match=r"the bad run exited with code 2; its log is .*the good run stopped with it"):
        R.train_games(runs, 100_000, None, at_once=2)
    assert R.game_state(tmp_path / "Catch", 100_000, None)[0] != "done"
    deadline = time.time() + 10  # each run's resource tracker outlives it for a moment
    while marked_processes(mark) and time.time() < deadline:
        time.sleep(0.1)
    assert marked_processes(mark) == [], "a run outlived the suite"


def test_a_finished_game_kept_without_its_checkpoint_counts_as_done(tmp_path):
    """A finished suite kept as its records (episodes, config, the game's counters; no checkpoint
    or replay) is read and continued, not trained again."""
    run = tmp_path / "BattleZone"
    run.mkdir()
    assert R.game_state(run, 500_000, None)[0] == "new"
    R.mark_done(run, "ALE/BattleZone-v5", {"agent_steps": 500_004, "wall_s": 2500.0, "episodes": 300})
    assert R.game_state(run, 500_000, None) == ("done", {"agent_steps": 500_004, "wall_s": 2500.0, "episodes": 300})
    assert R.game_state(run, 1_000_000, None)[0] == "new"  # a longer suite trains it again from the start


def test_a_game_stopped_at_its_length_with_updates_owed_resumes_to_train_them(tmp_path):
    """A game a signal stopped within its collectors' head start of its length has played its
    steps but not trained all they paid for: with the replay saved beside that checkpoint it
    resumes (to train them and stop); without it nothing can train them, and it is done."""
    from config_optimized import Config
    from pipeline.records.files import REPLAY_NAME
    from tests.test_replay_snapshot import catch_replay
    from tests.test_resume import CATCH as CATCH_ENV, _learner, _save_run

    run = tmp_path / "Catch"
    cfg = Config.of(env=CATCH_ENV, run_dir=str(run), amp=False, buffer_size=400, envs_per_collector=4, num_collectors=1)
    _save_run(run, cfg, _learner(cfg), agent_steps=240, replay=catch_replay(steps=60, capacity=400), owed_updates=3)
    assert R.game_state(run, 240, None)[0] == "resume"
    assert R.game_state(run, 200, None)[0] == "resume"  # steps past the length: the head start
    (run / REPLAY_NAME).unlink()
    assert R.game_state(run, 240, None)[0] == "done"
    _save_run(run, cfg, _learner(cfg), agent_steps=240, replay=catch_replay(steps=60, capacity=400), owed_updates=0)
    assert R.game_state(run, 240, None)[0] == "done"


def test_suite_games_trains_only_those_in_the_same_folder(tmp_path, capsys):
    """``--games`` picks the suite's games to train now; the folder is the suite's own, so a finished
    game there is read and the game left out is not started (it would train for a minute here)."""
    suite_dir = tmp_path / R.suite_dir_name("quick", [])
    (suite_dir / "seed1" / "CountingCatch").mkdir(parents=True)
    R.mark_done(suite_dir / "seed1" / "CountingCatch", "tests.catch_env:CountingCatch-v0", {"agent_steps": 2_500, "wall_s": 9.0})
    assert S.run_suite("quick", [], 2_500, None, str(tmp_path), games="CountingCatch") == suite_dir
    assert not (suite_dir / "seed1" / "Catch").exists()
    assert "CountingCatch-v0 seed 1: done (2,500 agent steps" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="Pong not in suite quick"):
        S.run_suite("quick", [], 2_500, None, str(tmp_path), games="Catch,Pong")


def test_suite_halving_rungs_and_refusals(tmp_path):
    from bench import suite_halving as H

    assert H.rung_steps(500_000, 2, 3) == [125_000, 250_000, 500_000]
    assert H.rung_steps(900_000, 3, 2) == [300_000, 900_000]
    assert S.pick_games("atari5", "DoubleDunk, Qbert") == ["ALE/DoubleDunk-v5", "ALE/Qbert-v5"]
    assert len(S.pick_games("atari5", None)) == 6
    with pytest.raises(ConfigError, match="Breakout not in suite atari5"):
        S.pick_games("atari5", "Qbert,Breakout")
    with pytest.raises(ConfigError, match=r"recipe \[long\]: --total-steps is the search's own"):
        H.check_recipes({"long": ["--total-steps", "9"]}, [], ["ALE/Pong-v5"])
    with pytest.raises(ConfigError, match=r"recipe \[bad\] on ALE/Pong-v5: .*--lr"):
        H.check_recipes({"bad": ["--lr", "-1"]}, [], ["ALE/Pong-v5"])


def test_suite_halving_ranks_recipes_by_their_mean_rank_over_the_games():
    """A recipe ahead on two games of three goes first, though its DoubleDunk (human and random
    2.2 points apart) is half a point behind: in a mean of human-normalized scores that half point
    would outweigh 600 points of NameThisGame and 500 of Phoenix."""
    from bench.suite_halving import rank_standings

    def standing(name, returns, hns_mean):
        return {"recipe": name, "games": [{"return": r} for r in returns], "hns_mean": hns_mean}
    ahead = standing("ahead", [-20.5, 3000.0, 1000.0], -0.233)
    dd_only = standing("dd_only", [-20.0, 2400.0, 500.0], -0.220)
    unscored = standing("unscored", [-20.0, None, 500.0], None)
    ranked = rank_standings([dd_only, unscored, ahead])
    assert [s["recipe"] for s in ranked] == ["ahead", "dd_only", "unscored"]
    assert ranked[0]["mean_rank"] == pytest.approx((3 + 1 + 1) / 3)  # DoubleDunk: last of three
    assert ranked[1]["mean_rank"] == pytest.approx((1.5 + 2 + 2.5) / 3)  # tied on two games: shared places
    assert ranked[2]["mean_rank"] == pytest.approx((1.5 + 3 + 2.5) / 3)  # no score ranks last
    tie = rank_standings([standing("low", [1.0], -0.5), standing("high", [1.0], 0.5)])
    assert [s["recipe"] for s in tie] == ["high", "low"]  # equal ranks: the mean human-normalized score decides


@pytest.mark.slow
def test_suite_halving_screens_recipes_and_continues_the_winner(tmp_path, mark):
    """Two recipes on one of the quick suite's catch games (``--games``), two rungs: both train
    it to the first rung's steps, the better one is resumed to --steps, and the same command again
    only reads. (How standings over several games rank is
    test_suite_halving_ranks_recipes_by_their_mean_rank_over_the_games; each game is one more
    run per recipe and rung, ~15 s of CI.)"""
    recipes = tmp_path / "recipes.toml"
    recipes.write_text('[defaults]\nargs = []\n\n[no_learning]\nargs = ["--lr", "1e-9"]\n')
    opts = SUITE_OPTS
    cmd = [sys.executable, "benchmark_performance.py", "--suite", "quick", "--halving", str(recipes), "--steps",
           "2000", "--rungs", "2", "--games", "Catch", "--runs-dir", str(tmp_path), *opts]
    proc = subprocess.run(cmd, cwd=ROOT, env=env_for(mark), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (root,) = tmp_path.glob("suite-halving-quick_*")
    res = json.loads((root / "halving.json").read_text())
    first, second = res["rungs_run"]
    assert first["agent_steps"] == 1000 and second["agent_steps"] == 2000
    assert {s["recipe"] for s in first["standings"]} == {"defaults", "no_learning"}
    (kept,) = first["kept"]
    assert [s["recipe"] for s in second["standings"]] == [kept] and res["winner"] == kept
    dropped = ({"defaults", "no_learning"} - {kept}).pop()
    assert R.game_state(root / kept / "Catch", 2000, None)[0] == "done"
    assert R.game_state(root / dropped / "Catch", 2000, None)[0] == "resume"  # stopped at the first rung
    assert not (root / kept / "CountingCatch").exists()  # not in --games
    assert proc.stdout.count("--resume") == 1  # the winner's game, continued from its checkpoint
    assert "samples per agent step" in proc.stdout
    again = subprocess.run(cmd, cwd=ROOT, env=env_for(mark), capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "mario_rl_optimized.py" not in again.stdout, again.stdout + again.stderr
    assert marked_processes(mark) == []


@pytest.mark.parametrize("screen", ["atari_screen.toml", "atari_screen_rr8.toml", "atari_screen_rules.toml"])
def test_the_shipped_atari_screens_parse_and_check(screen):
    from bench.halving import read_recipes
    from bench.suite import pick_games
    from bench.suite_halving import check_recipes

    recipes = read_recipes(str(ROOT / "bench" / screen))
    assert recipes["defaults"] == [] and len(recipes) >= 3
    check_recipes(recipes, [], pick_games("atari5", "DoubleDunk,Phoenix,Qbert"))
