"""The learning rate's schedule: --lr until --lr-decay-start agent steps, then a linear fall to
--lr-end over --lr-decay-steps, counted in agent steps across resumes; the optimizer trains with
it, the log and metrics.jsonl show it, and a bad --lr-end is refused before anything starts."""
import json
import uuid

import pytest
import torch

from config_optimized import Config
from pipeline.agent.learner import lr_schedule
from tests.proc_utils import CATCH, check_clean, run


def test_the_schedule_holds_then_falls_linearly_then_holds():
    c = Config.of(lr=1e-3, lr_decay_start=1000, lr_decay_steps=2000, lr_end=1e-4).learner
    assert [lr_schedule(c, s) for s in (0, 1000)] == [1e-3, 1e-3]
    assert lr_schedule(c, 2000) == pytest.approx(5.5e-4)
    assert [lr_schedule(c, s) for s in (3000, 10**7)] == [pytest.approx(1e-4)] * 2
    # no fall: --lr for the whole run, whatever --lr-end says
    flat = Config.of(lr=1e-3, lr_decay_start=1000, lr_decay_steps=0, lr_end=1e-4).learner
    assert {lr_schedule(flat, s) for s in (0, 5000, 10**7)} == {1e-3}


def test_a_run_trains_with_the_scheduled_rate_and_a_resume_goes_on_with_it(tmp_path):
    """The optimizer's rate follows the agent steps (the checkpoint's Adam group holds it), the
    start-up and epoch lines say it, metrics.jsonl records it; a resumed run picks the schedule up
    at its agent steps rather than restarting it at --lr."""
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    # one sample per agent step, not CATCH's 4: the schedule follows agent steps whatever the
    # ratio, and the updates it needs at 4 took most of this test's ~80 s on a 2-core CPU
    sched = ["--lr-decay-start", "1600", "--lr-decay-steps", "900", "--lr-end", "1e-4", "--replay-ratio", "1"]
    proc, out = run([*CATCH, *sched, "--run-dir", str(run_dir), "--total-steps", "3000", "--seed", "2"], mark,
                    timeout=300)
    assert proc.returncode == 0, out[-3000:]
    assert "lr 0.001, falling linearly to 0.0001 from 1,600 to 2,500 agent steps" in out
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    c = Config.of(lr=1e-3, lr_decay_start=1600, lr_decay_steps=900, lr_end=1e-4).learner
    assert [r["lr"] for r in rows] == [pytest.approx(lr_schedule(c, r["agent_steps"])) for r in rows]
    # the first epoch ends before the fall: collectors can run about 1,000 steps (the replay
    # ratio's slack) past --learning-starts 500 before updates pay for more, and a few dozen in
    # flight beyond that (1,528 in one run on a fresh clone); at 1,600 it starts
    assert rows[0]["agent_steps"] < 1600 and rows[0]["lr"] == 1e-3 and rows[-1]["lr"] == pytest.approx(1e-4)
    assert "LR: 0.0001" in out

    def trained_lr():
        return torch.load(run_dir / "checkpoint.pt", weights_only=True)["learner"]["optimizer"]["param_groups"][0]["lr"]

    assert trained_lr() == pytest.approx(1e-4)
    proc, out = run([*CATCH, *sched, "--resume", str(run_dir), "--total-steps", "4000", "--seed", "2"], mark,
                    timeout=300)
    assert proc.returncode == 0, out[-3000:]
    assert trained_lr() == pytest.approx(1e-4)  # not --lr's 1e-3, where a resume would restart the fall
    check_clean(proc, mark)


def test_a_bad_lr_end_is_refused_and_one_above_lr_holds_lr_with_a_warning(tmp_path):
    proc, out = run([*CATCH, "--lr-decay-steps", "1000", "--lr-end", "0", "--run-dir", str(tmp_path / "r")],
                    uuid.uuid4().hex)
    assert proc.returncode == 2 and "--lr-end 0.0: must be above 0" in out
    assert not (tmp_path / "r").exists()
    # a lower --lr under a preset's schedule: the rate cannot fall to the preset's end, so it holds
    high = Config.of(lr=1e-5, lr_decay_steps=1000, lr_end=2.5e-5).learner
    assert {lr_schedule(high, s) for s in (0, 500, 10**6)} == {1e-5}
    from pipeline.settings.check import validate
    from pipeline.settings.hardware import detect_hardware
    said = validate(Config.of(env="tests.catch_env:Catch-v0", lr=1e-5, lr_decay_steps=1000, lr_end=2.5e-5),
                    detect_hardware())
    assert any("--lr-end 2.5e-05 is above --lr 1e-05: the learning rate stays at --lr" in w for w in said)
