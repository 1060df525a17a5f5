"""Evaluations during training: a screening that beats the best is confirmed on fresh games
before its weights replace best_eval.pt, and only the confirmation's score is kept."""
import json

import numpy as np
import pytest
import torch

from config_optimized import Config
from pipeline.evaluation import periodic_eval as pe
from pipeline.learner import Learner
from pipeline.records import checkpoint as ckpt
from pipeline.records.files import BEST_EVAL_NAME, CANDIDATE_NAME, EVALS_NAME


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


@pytest.fixture
def evals(tmp_path, monkeypatch):
    """A PeriodicEval whose games are the scripted results, in order; the seeds it asked for in ``asked``."""
    cfg = Config.of(amp=False, run_dir=str(tmp_path))
    learner = Learner(cfg.learner, 4, 3, torch.device("cpu"))
    rng = np.random.default_rng(0).bit_generator.state
    save = lambda name: ckpt.save(tmp_path / name, ckpt.training_state(cfg, 3, learner.state_dict(), {}, rng)) or tmp_path / name  # noqa: E731
    lines, script, asked = [], [], []
    ev = pe.PeriodicEval(tmp_path, 1000, 3, 0.05, "return", 100, lines.append)

    def launch(path, games_seed, phase):
        asked.append((phase, games_seed))
        played = _Played(script.pop(0))
        ev.proc, ev.conn, ev.phase, ev.games_seed = played, played, phase, games_seed
    monkeypatch.setattr(ev, "_launch", launch)
    return ev, save, script, asked, lines, tmp_path


def _res(returns, flags=None):
    return {"returns": returns, "lengths": [6] * len(returns), "distances": [], "flags": flags or []}


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
    assert ev.finished and ev.last_flags == (3, 3) and ckpt.load(run_dir / BEST_EVAL_NAME)["best"]["flags"] == 3
    assert "flag in 3/3" in lines[-1]
