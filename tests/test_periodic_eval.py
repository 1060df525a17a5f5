"""Evaluations during training: a screening that beats the best is confirmed on fresh games
before its weights replace best_eval.pt, and only the confirmation's score is kept."""
import contextlib
import json
import os
import re
import resource
import signal

import numpy as np
import pytest
import torch

from config_optimized import Config
from pipeline.evaluation import periodic_eval as pe
from pipeline.agent.learner import Learner
from pipeline.records import checkpoint as ckpt
from pipeline.records.files import BEST_EVAL_NAME, CANDIDATE_NAME, EVALS_NAME, PENDING_NAME


class _Played:
    """What the evaluator process sends back, without a process: the result given."""

    def __init__(self, res):
        self.res, self.exitcode = res, 0

    def poll(self):
        return True

    def recv(self):
        return self.res

    def is_alive(self):
        return False

    def join(self, timeout=None):
        pass

    def close(self):
        pass


class _Slow(_Played):
    """A play still under way for its first ``polls`` looks, then answered."""

    def __init__(self, res, polls):
        super().__init__(res)
        self.polls = polls

    def poll(self):
        self.polls -= 1
        return self.polls < 0

    def is_alive(self):
        return self.polls >= 0

    def terminate(self):
        self.polls = -1


def _saver(tmp_path):
    """``save_weights`` for PeriodicEval.start: a real checkpoint of fresh weights in ``tmp_path``."""
    cfg = Config.of(amp=False, run_dir=str(tmp_path))
    learner = Learner(cfg.learner, 4, 3, torch.device("cpu"))
    rng = np.random.default_rng(0).bit_generator.state
    return lambda name: ckpt.save(tmp_path / name, ckpt.training_state(cfg, 3, learner.state_dict(), {}, rng)) or tmp_path / name


def _scripted(monkeypatch, ev, script, seen=lambda phase, games_seed: None):
    """Each evaluation ``ev`` launches answers with the next result of ``script`` (or is that
    play, a ``_Played``), no process;
    ``seen(phase, games_seed)`` hears of each launch."""
    def launch(path, games_seed, phase):
        seen(phase, games_seed)
        item = script.pop(0)
        played = item if isinstance(item, _Played) else _Played(item)
        ev.proc, ev.conn, ev.phase, ev.games_seed = played, played, phase, games_seed
        ev.start_clock()
    monkeypatch.setattr(ev, "_launch", launch)


@pytest.fixture
def evals(tmp_path, monkeypatch):
    """A PeriodicEval whose games are the scripted results, in order; the seeds it asked for in ``asked``."""
    save = _saver(tmp_path)
    lines, script, asked = [], [], []
    ev = pe.PeriodicEval(tmp_path, 1000, 3, (0.05,), "return", 100, lines.append)
    _scripted(monkeypatch, ev, script, lambda phase, games_seed: asked.append((phase, games_seed)))
    return ev, save, script, asked, lines, tmp_path


def _res(returns, flags=None, epsilon=0.05):
    return {"plays": [_play(returns, flags, epsilon)]}


def _play(returns, flags=None, epsilon=0.05, distances=None):
    return {"epsilon": epsilon, "returns": returns, "lengths": [6] * len(returns), "distances": distances or [],
            "flags": flags or []}


def test_a_lucky_screening_is_not_kept_unless_fresh_games_confirm_it(evals):
    ev, save, script, asked, lines, run_dir = evals
    script += [_res([1.0, 1.0, 1.0]), _res([-1.0, -1.0, 1.0])]  # lucky, then the fresh games tell
    ev.start(save, 1000)
    ev.poll()  # the screening: above the best (none yet), so its confirmation starts
    assert asked == [("screen", 1100), ("confirm", 1100 + pe.CONFIRM_SEED_OFFSET)]
    assert "confirming on 3 fresh games" in lines[-1] and not (run_dir / BEST_EVAL_NAME).exists()
    ev.poll()  # the confirmation: -0.33, above -inf, so kept, with the confirmation's score
    best = ckpt.load(run_dir / BEST_EVAL_NAME)["best"]
    assert best["score"] == pytest.approx(-1 / 3) and best["screen_score"] == 1.0 and ev.best == best["score"]
    assert not (run_dir / CANDIDATE_NAME).exists() and not ev.finished

    script += [_res([1.0, 1.0, -1.0]), _res([-1.0, -1.0, -1.0])]  # beats -0.33, then not confirmed
    ev.start(save, 2000)
    ev.poll()
    ev.poll()
    assert "not confirmed (the best so far is -0.33): best_eval.pt stays" in lines[-1]
    assert ckpt.load(run_dir / BEST_EVAL_NAME)["best"]["score"] == pytest.approx(-1 / 3)
    assert not (run_dir / CANDIDATE_NAME).exists()

    script += [_res([-1.0, -1.0, -1.0])]  # below the best: no confirmation
    ev.start(save, 3000)
    ev.poll()
    assert asked[-1] == ("screen", 3100) and ev.proc is None
    rows = [json.loads(x) for x in (run_dir / EVALS_NAME).read_text().splitlines()]
    assert [r["phase"] for r in rows] == ["screen", "confirm", "screen", "confirm", "screen"]


def test_a_confirmation_with_every_flag_is_a_finished_agent(evals):
    ev, save, script, asked, lines, run_dir = evals
    script += [_res([1.0] * 3, [True, True, True]), _res([1.0] * 3, [True, True, True])]
    ev.start(save, 1000)
    ev.poll()
    assert not ev.finished  # a screening alone never finishes the run
    ev.poll()
    assert ev.finished and ev.last_flags == "3/3 at 0.05" and ckpt.load(run_dir / BEST_EVAL_NAME)["best"]["flags"] == 3
    assert "flag in 3/3" in lines[-1]
    # a run killed after that confirmation and resumed (its bar read back) is finished from the start
    again = pe.PeriodicEval(run_dir, 1000, 3, (0.05,), "return", 100, lines.append, best=ev.best)
    assert again.finished
    assert not pe.PeriodicEval(run_dir, 1000, 3, (0.05,), "return", 100, lines.append).finished  # a new run's bar


def test_eval_plan_plays_mario_greedy_and_under_noise_and_other_games_as_asked():
    assert pe.eval_plan(True, 0.05, "distance") == ("flags", (0.0, 0.05))
    assert pe.eval_plan(True, 0.0, "distance") == ("flags", (0.0,))
    assert pe.eval_plan(False, 0.05, "return") == ("return", (0.05,))


def test_flag_score_keeps_the_greedy_flags_then_the_noisy_flags_then_distance():
    s = pe.flag_score
    # the greedy count decides: 9 greedy and 6 noisy is above 8 and 8
    assert s([8, 8], 10, [3000.0] * 20) < s([9, 6], 10, [2000.0] * 20) < s([10, 0], 10, [100.0] * 20)
    # a tie on it goes to more flags at epsilon, whatever the distance
    assert s([8, 10], 10, [1000.0] * 20) > s([8, 9], 10, [3300.0] * 20)
    # then to the longer mean distance
    assert s([8, 9], 10, [3100.0] * 20) > s([8, 9], 10, [3000.0] * 20)
    # counted per 10 games, 17 of 20 is 8.5 and its tie-breaks stay below 9 (half a flag per 10)
    assert 8.5 < s([17, 20], 20, [99_999.0] * 40, per=10) < 9 <= s([9, 0], 10, [0.0] * 20)
    assert s([8, 9], 10, [3000.0] * 20, per=10) == s([8, 9], 10, [3000.0] * 20)
    # no tie-break reaches the next greedy flag, at any number of games, with or without a noisy play
    for games in (4, 10, 1000):
        assert s([3, games], games, [99_999.0] * 2 * games) < s([4, 0], games, [0.0] * 2 * games)
        assert 3 <= s([3, games], games, [99_999.0] * 2 * games) < 4
        assert 3 <= s([3], games, [99_999.0] * games) < s([4], games, [0.0] * games)


def test_a_finished_agent_reaches_the_flag_in_19_of_20_greedy_games():
    def plays(greedy, noisy, games=20):
        return [{"epsilon": 0.0, "flags": [True] * greedy + [False] * (games - greedy)},
                {"epsilon": 0.05, "flags": [True] * noisy + [False] * (games - noisy)}]
    assert pe.finished_play(plays(19, 0)) and pe.finished_play(plays(20, 11))
    assert not pe.finished_play(plays(18, 20))  # the noisy play is reported, not judged
    assert pe.finished_play(plays(10, 0, games=10)) and not pe.finished_play(plays(9, 10, games=10))
    assert not pe.finished_play([]) and not pe.finished_play([{"epsilon": 0.0, "flags": []}])
    # a play at epsilon alone (another game that reports a flag) is judged itself
    assert pe.finished_play([{"epsilon": 0.05, "flags": [True] * 3}])


def test_mario_keeps_weights_by_their_greedy_flags(tmp_path, monkeypatch):
    """Weights that reach the flag in every noisy game but stand at a wall in greedy ones are not
    kept; weights with every greedy flag are a finished agent, whatever their noisy flags."""
    save = _saver(tmp_path)
    lines, script = [], []
    ev = pe.PeriodicEval(tmp_path, 1000, 2, (0.0, 0.05), "flags", 100, lines.append)
    _scripted(monkeypatch, ev, script)

    def both(greedy, noisy):
        return {"plays": [_play([1.0, 1.0], greedy, 0.0, [3000.0, 3000.0]), _play([1.0, 1.0], noisy, 0.05, [3100.0] * 2)]}

    script += [both([True, False], [True, True])] * 2  # 1 greedy, 2 noisy: kept, score 1.x
    ev.start(save, 1000)
    ev.poll()
    ev.poll()
    best = ckpt.load(tmp_path / BEST_EVAL_NAME)["best"]
    assert best["metric"] == "flags" and 1 < best["score"] < 2 and best["flags"] == 3
    assert best["plays"] == [{"epsilon": 0.0, "flags": 1, "games": 2}, {"epsilon": 0.05, "flags": 2, "games": 2}]
    assert ev.last_flags == "1/2 greedy, 2/2 at 0.05" and not ev.finished
    assert "flag in 1/2 greedy, 2/2 at 0.05 fresh games" in lines[-1]

    script += [both([False, False], [True, True])]  # every noisy flag, no greedy one: below the best
    ev.start(save, 2000)
    ev.poll()
    assert ev.proc is None and "confirming" not in lines[-1]

    script += [both([True, True], [False, False])] * 2  # every greedy flag, none noisy: a finished agent
    ev.start(save, 3000)
    ev.poll()
    ev.poll()
    assert ev.finished and ckpt.load(tmp_path / BEST_EVAL_NAME)["best"]["agent_steps"] == 3000
    assert "flag in 2/2 greedy, 0/2 at 0.05 fresh games" in lines[-1]
    rows = [json.loads(x) for x in (tmp_path / EVALS_NAME).read_text().splitlines()]
    assert [len(r["flags"]) for r in rows] == [4] * 5 and [len(r["plays"]) for r in rows] == [2] * 5


def test_a_longer_confirmation_counts_flags_per_screening_games_and_a_near_screening_is_confirmed(tmp_path, monkeypatch):
    """Mario's preset confirms on twice the screening's games: 17 of 20 is 8.5 per 10, the bar a
    later screening is judged against; a screening one flag below that bar is still confirmed,
    since ten games do not tell 8 from 9 flags, and one two flags below is not."""
    save = _saver(tmp_path)
    lines, script, counts = [], [], []
    ev = pe.PeriodicEval(tmp_path, 1000, 10, (0.0, 0.05), "flags", 100, lines.append, confirm_episodes=20)
    assert ev.confirm_episodes == 20

    _scripted(monkeypatch, ev, script,
              lambda phase, games_seed: counts.append((phase, ev.confirm_episodes if phase == "confirm" else ev.episodes)))

    def both(greedy, noisy):
        n = max(len(greedy), len(noisy))
        return {"plays": [_play([1.0] * n, greedy, 0.0, [3000.0] * n), _play([1.0] * n, noisy, 0.05, [3000.0] * n)]}

    script += [both([True] * 9 + [False], [True] * 10),            # screen 9 / 10
               both([True] * 17 + [False] * 3, [True] * 20)]       # confirmed 17 / 20: 8.5 per 10
    ev.start(save, 1000)
    ev.poll()
    ev.poll()
    best = ckpt.load(tmp_path / BEST_EVAL_NAME)["best"]
    assert counts == [("screen", 10), ("confirm", 20)]
    assert 8.5 <= best["score"] < 9 and best["games"] == 40 and ev.best == best["score"]
    assert best["plays"] == [{"epsilon": 0.0, "flags": 17, "games": 20}, {"epsilon": 0.05, "flags": 20, "games": 20}]
    assert "per 10 games" in lines[-1]

    script += [both([True] * 8 + [False] * 2, [True] * 10),        # 8 of 10: within a flag of 8.5
               both([True] * 18 + [False] * 2, [True] * 20)]       # 9 per 10 confirmed: kept
    ev.start(save, 2000)
    ev.poll()
    assert "within a flag of the best so far, confirming on 20 fresh games each way" in lines[-1]
    ev.poll()
    assert ckpt.load(tmp_path / BEST_EVAL_NAME)["best"]["agent_steps"] == 2000 and 9 <= ev.best < 10

    script += [both([True] * 7 + [False] * 3, [True] * 10)]        # 7 of 10: two below 9, no confirmation
    ev.start(save, 3000)
    ev.poll()
    assert ev.proc is None and counts[-1] == ("screen", 10) and "confirming" not in lines[-1]
    assert not ev.finished


def test_the_slack_is_only_for_weights_that_reach_the_flag_both_ways(tmp_path, monkeypatch):
    """Before any flag, a screening is confirmed only when it beats the best (by distance): one
    a little shorter is not, though its score is within one of the best's."""
    ev = pe.PeriodicEval(tmp_path, 1000, 2, (0.0, 0.05), "flags", 100, [].append, best=pe.flag_score([0, 0], 2, [900.0]))
    launched = []
    monkeypatch.setattr(ev, "_launch", lambda path, seed, phase: launched.append(phase))
    played = _Played({"plays": [_play([1.0] * 2, [False] * 2, 0.0, [800.0] * 2), _play([1.0] * 2, [False] * 2, 0.05, [800.0] * 2)]})
    ev.proc = ev.conn = played
    ev.poll()
    assert launched == []
    ev.best = pe.flag_score([0, 0], 2, [700.0])
    ev.proc = ev.conn = played
    ev.poll()
    assert launched == ["confirm"]


def test_a_planned_stop_waits_for_the_evaluation_and_the_confirmation_it_starts(evals, monkeypatch):
    """The last screening of a run beats the best as the run reaches --total-steps: the stop
    waits for it and for its confirmation, however many looks they take, and keeps the weights."""
    ev, save, script, asked, lines, run_dir = evals
    monkeypatch.setattr(pe.time, "sleep", lambda s: None)
    script += [_Slow(_res([1.0, 1.0, 1.0]), 50), _Slow(_res([1.0, 1.0, -1.0]), 5000)]
    ev.start(save, 1000)
    ev.finish()
    assert "Waiting for the evaluation at 1,000 agent steps" in lines[0]
    assert [phase for phase, _ in asked] == ["screen", "confirm"] and ev.proc is None
    assert "confirmed" in lines[-1] and ckpt.load(run_dir / BEST_EVAL_NAME)["best"]["agent_steps"] == 1000


def test_a_signal_during_the_wait_stops_the_evaluation_and_says_so(evals, monkeypatch):
    ev, save, script, asked, lines, run_dir = evals
    monkeypatch.setattr(pe.time, "sleep", lambda s: None)
    script += [_Slow(_res([1.0, 1.0, 1.0]), 10**9)]
    looks = iter(range(100))
    ev.start(save, 1000)
    ev.finish(interrupted=lambda: next(looks) >= 20)  # a Ctrl-C after 20 looks
    assert ev.proc is not None
    ev.close()
    assert ev.proc is None and not (run_dir / BEST_EVAL_NAME).exists()
    assert "The evaluation at 1,000 agent steps was stopped with the run; best_eval.pt stays, and --resume plays " \
           "it again first" in lines[-1]
    assert (run_dir / CANDIDATE_NAME).exists() and json.loads((run_dir / PENDING_NAME).read_text()) == \
        {"phase": "screen", "agent_steps": 1000, "games_seed": 1100, "screened": {}}


def test_a_confirmation_cut_by_a_stop_plays_again_on_resume_and_keeps_its_weights(evals, monkeypatch):
    """A stop cuts a confirmation short; the resumed run plays it first, on the same games with
    the same weights, and keeps them as its screening and confirmation say."""
    ev, save, script, asked, lines, run_dir = evals
    script += [_res([1.0, 1.0, 1.0]), _Slow(_res([1.0, 1.0, 1.0]), 10**9)]
    ev.start(save, 1000)
    ev.poll()  # the screening beats the best: its confirmation starts, and plays on
    weights = (run_dir / CANDIDATE_NAME).read_bytes()
    ev.close()  # the run stops (SIGTERM)
    assert "The confirmation at 1,000 agent steps was stopped" in lines[-1]
    again = pe.PeriodicEval(run_dir, 1000, 3, (0.05,), "return", 100, lines.append, next_at=3000)
    resumed = []
    _scripted(monkeypatch, again, [_res([1.0, 1.0, 0.0])], lambda phase, games_seed: resumed.append((phase, games_seed)))
    again.resume_pending()
    assert resumed == [asked[1]] == [("confirm", 1100 + pe.CONFIRM_SEED_OFFSET)]
    assert "Playing again the confirmation at 1,000 agent steps that the last stop cut short" in lines[-1]
    assert not (run_dir / PENDING_NAME).exists() and (run_dir / CANDIDATE_NAME).read_bytes() == weights
    again.poll()
    assert "confirmed" in lines[-1] and again.best == pytest.approx(2 / 3)
    best = ckpt.load(run_dir / BEST_EVAL_NAME)["best"]
    assert (best["agent_steps"], best["screen_score"], best["screen_seed"]) == (1000, 1.0, 1100)
    assert not (run_dir / CANDIDATE_NAME).exists()
    again.resume_pending()  # nothing left to play again
    assert len(resumed) == 1


def test_time_the_run_stood_still_is_not_play_but_a_long_play_is_stopped(evals, monkeypatch):
    """A run paused (SIGSTOP) for hours with its evaluator is not an evaluation that played for
    hours: the gap between two looks is left out, and the play still ends at TIMEOUT_S of looks."""
    ev, save, script, asked, lines, run_dir = evals
    clock = [1000.0]
    monkeypatch.setattr(pe.time, "monotonic", lambda: clock[0])
    script += [_Slow(_res([1.0, 1.0, 1.0]), 10**9)]
    ev.start(save, 1000)
    for gap in [10.0] * int((pe.TIMEOUT_S - 200) / 10) + [5 * 3600.0] + [10.0] * 5:  # a pause counts PAUSE_S at most
        clock[0] += gap
        ev.poll()
    assert ev.proc is not None and not any("failed" in line for line in lines), lines
    assert pe.TIMEOUT_S - 200 < ev.played_s <= pe.TIMEOUT_S - 200 + pe.PAUSE_S + 50
    for _ in range(20):
        clock[0] += 10.0
        ev.poll()
    assert ev.proc is None and "Evaluation at 1,000 agent steps failed: it played for more than 30 minutes" in lines[-1]
    assert not (run_dir / CANDIDATE_NAME).exists()


def test_an_evaluation_says_where_its_games_stood_still(tmp_path, monkeypatch):
    """A greedy game scored where it stood still (evaluate.STAND_STILL_STEPS) is named in the
    evaluation's line with its x, and evals.jsonl keeps which games stood."""
    lines, script = [], []
    ev = pe.PeriodicEval(tmp_path, 1000, 2, (0.0, 0.05), "flags", 100, lines.append)
    _scripted(monkeypatch, ev, script)
    greedy = {**_play([1.0, 1.0], [True, False], 0.0, [3161.0, 3154.0]), "stood": [False, True]}
    noisy = {**_play([1.0, 1.0], [True, True], 0.05, [3161.0, 3161.0]), "stood": [False, False]}
    script += [{"plays": [greedy, noisy]}]
    ev.best = 5.0  # below the best: no confirmation, the screening's line is the last
    ev.start(_saver(tmp_path), 1000)
    ev.poll()
    assert "flag in 1/2 greedy, 2/2 at 0.05 (1 stood still: x 3,154) games" in lines[-1]
    row = json.loads((tmp_path / EVALS_NAME).read_text().splitlines()[-1])
    assert row["plays"][0]["stood"] == [False, True]


@contextlib.contextmanager
def _files_up_to(limit: int):
    """A "disk" that takes files up to ``limit`` bytes: a longer write fails with EFBIG."""
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, old_limit[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)


def test_a_failed_write_of_where_the_evaluation_stood_is_one_line_and_the_stop_goes_on(evals):
    """A stop cuts an evaluation short on a full disk: eval_pending.json cannot be written. The
    stop goes on (the run's final checkpoint and replay are tried next, each saying what failed):
    one line says the evaluation will not be played again, and nothing half-written is left."""
    ev, save, script, asked, lines, run_dir = evals
    script += [_Slow(_res([1.0, 1.0, 1.0]), 10**9)]
    ev.start(save, 1000)
    with _files_up_to(20):
        ev.close()
    assert ev.proc is None
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith("eval_")) == []
    assert lines[-1] == ("[EVAL] The evaluation at 1,000 agent steps was stopped with the run; where it stood could "
                         f"not be written ({run_dir / PENDING_NAME}: File too large), so --resume will not play it "
                         "again; best_eval.pt stays")


def test_where_the_evaluation_stood_is_on_disk_before_it_takes_its_name(evals, monkeypatch):
    """eval_pending.json, as every JSON file a run keeps, is written to NAME.tmp, fsynced, then
    renamed: a power cut after the rename cannot leave an empty or half file under its name."""
    ev, save, script, asked, lines, run_dir = evals
    script += [_Slow(_res([1.0, 1.0, 1.0]), 10**9)]
    ev.start(save, 1000)
    synced, real = [], os.fsync

    def fsync(fd):
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), (run_dir / PENDING_NAME).exists()))
        real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    ev.close()
    assert (str(run_dir / (PENDING_NAME + ".tmp")), False) in synced
    assert json.loads((run_dir / PENDING_NAME).read_text())["agent_steps"] == 1000


def test_a_mario_confirmation_plays_greedy_from_every_start(tmp_path):
    """A real evaluator process on a Mario run's fresh weights (no-op starts 0-2): the screening
    plays its 2 fresh games each way, the confirmation it starts plays greedy once from each of
    the 3 starts (greedy Mario's games are one per start) and its 2 fresh games at 0.05; the
    kept weights say so, and a finished agent is judged on the starts."""
    import time

    cfg = Config.of(env="SuperMarioBros-1-1-v0", mario_actions="right_run", noop_max=2, amp=False,
                    run_dir=str(tmp_path))
    torch.manual_seed(0)
    learner = Learner(cfg.learner, 4, 3, torch.device("cpu"))
    rng = np.random.default_rng(0).bit_generator.state

    def save(name):
        ckpt.save(tmp_path / name, ckpt.training_state(cfg, 3, learner.state_dict(), {}, rng))
        return tmp_path / name

    lines = []
    ev = pe.PeriodicEval(tmp_path, 1000, 2, (0.0, 0.05), "flags", 100, lines.append, confirm_every_start=True)
    ev.start(save, 1000)
    deadline = time.monotonic() + 300
    while (ev.proc is not None or not (tmp_path / BEST_EVAL_NAME).is_file()) and time.monotonic() < deadline:
        ev.poll()
        time.sleep(0.05)
    rows = [json.loads(x) for x in (tmp_path / EVALS_NAME).read_text().splitlines()]
    assert [r["phase"] for r in rows] == ["screen", "confirm"], lines
    assert [len(p["flags"]) for p in rows[0]["plays"]] == [2, 2] and not rows[0]["plays"][0].get("every_start")
    greedy, noisy = rows[1]["plays"]
    assert greedy["every_start"] and len(greedy["flags"]) == len(greedy["returns"]) == 3 and len(noisy["flags"]) == 2
    assert "confirming greedy from every start and on 2 fresh games at 0.05" in lines[0]
    assert re.search(r"flag in [0-3]/3 greedy from every start, [0-2]/2 at 0.05 .*fresh games", lines[1]), lines[1]
    best = ckpt.load(tmp_path / BEST_EVAL_NAME)["best"]
    assert best["plays"][0] == {"epsilon": 0.0, "flags": sum(greedy["flags"]), "games": 3, "every_start": True}
    from pipeline.evaluation.evaluate import load_policy, weights_said
    from pipeline.runtime.run import last_word

    assert re.search(r"confirmed on fresh games: flag in [0-3]/3 greedy from every start, flag in [0-2]/2 at epsilon",
                     weights_said(load_policy(tmp_path / BEST_EVAL_NAME)))

    assert re.search(r"the flag in [0-3]/3 greedy from every start and [0-2]/2 at 0.05 fresh games\.",
                     last_word(tmp_path, "total_steps", 1000, 60.0))
    assert pe.finished_play([{"epsilon": 0.0, "flags": [True] * 30 + [False]}])
    assert not pe.finished_play([{"epsilon": 0.0, "flags": [True] * 29 + [False] * 2}])


def test_confirming_on_every_start_is_refused_where_greedy_games_are_not_one_per_start():
    from config_optimized import ConfigError
    from pipeline.settings.check import validate
    from pipeline.settings.hardware import Hardware

    hw = Hardware(2, 24 * 2**30, 20 * 2**30, "test cpu", True, False, None, 0, False)
    mario = dict(env="SuperMarioBros-1-1-v0", eval_interval=50_000, confirm_every_start=True)
    validate(Config.of(**mario), hw)
    for bad, said in [({"env": "ALE/Pong-v5"}, "ALE/Pong-v5: every start is for Mario's stages"),
                      ({"sticky_actions": 0.25}, "sticky actions 0.25: a start is many games"),
                      ({"eval_interval": 0}, "which are off; add --eval-interval 50000")]:
        with pytest.raises(ConfigError, match=f"--confirm-every-start True: .*{said}"):
            validate(Config.of(**{**mario, **bad}), hw)
