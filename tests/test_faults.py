"""Faults a long run meets: killed processes, signals, a crashing env, NaN losses, a full disk,
broken checkpoints. Each must either be survived or stop the run with a clear message, a good
checkpoint, no orphan process and nothing left in /dev/shm."""
import os
import resource
import signal
import time
import uuid

import numpy as np
import pytest
import torch

from pipeline.records import checkpoint as ckpt
from pipeline.transport.ring import HEAD, TAIL
from tests.proc_utils import (CATCH, check_clean, collector_pids, marked_processes, read_until, run, running, segments,
                              start)

pytestmark = pytest.mark.faults


def _stop(proc, lines, sig=signal.SIGINT):
    proc.send_signal(sig)
    rest, _ = proc.communicate(timeout=60)
    return "".join(lines) + rest


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_killed_collector_is_reported_and_restarted(tmp_path, method):
    mark, lines = uuid.uuid4().hex, []
    proc = start([*CATCH, "--run-dir", str(tmp_path / "run"), "--start-method", method, "--num-collectors", "1",
                  "--total-steps", "1000000000"], mark)  # one collector: the one killed is collector 0
    assert read_until(proc, "Learning starts", lines)
    os.kill(collector_pids(mark, proc.pid)[0], signal.SIGKILL)
    assert read_until(proc, "Restarting collector", lines)
    assert read_until(proc, "[MAIN] Epoch", lines), "training did not go on after the restart"
    out = _stop(proc, lines)
    assert "was killed by signal 9" in out and "Restarting collector 0 (restart 1/3)" in out
    assert proc.returncode == 0, out[-3000:]
    check_clean(proc, mark)


@pytest.mark.alone  # any run's start sweeps every dead run's segments: another test's could take these first
def test_killed_learner_takes_collectors_down_and_next_start_sweeps_shm(tmp_path):
    mark, lines = uuid.uuid4().hex, []
    proc = start([*CATCH, "--run-dir", str(tmp_path / "run"), "--num-collectors", "2", "--total-steps", "1000000000"],
                 mark, tmp_dir=tmp_path / "tmp")
    assert read_until(proc, "Learning starts", lines)
    children = collector_pids(mark, proc.pid)
    assert len(children) == 2
    left = segments(proc.pid)
    assert len(left) == 3  # two rings and the control block
    proc.kill()
    proc.communicate(timeout=30)
    deadline = time.time() + 5
    while time.time() < deadline and any(os.path.exists(f"/proc/{p}") for p in children):
        time.sleep(0.1)
    alive = [p for p in children if os.path.exists(f"/proc/{p}")]
    assert not alive, f"collectors {alive} outlived their learner by 5 s"
    # SIGKILL gives the learner no chance to unlink: the next start must find and remove them
    mark2 = uuid.uuid4().hex
    proc2, out = run([*CATCH, "--run-dir", str(tmp_path / "run2"), "--total-steps", "600"], mark2)
    assert proc2.returncode == 0, out[-3000:]
    assert "Removed 3 shared-memory segments left by a dead run" in out
    assert segments(proc.pid) == []
    check_clean(proc2, mark2)


def test_learner_killed_in_warm_up_takes_down_collectors_waiting_for_room(tmp_path):
    """During warm-up the allowance is far above a 64-slot ring's room, so a collector whose
    learner stops draining waits for room. SIGSTOP the learner first (busy, swapping, about to
    meet the OOM killer), so the rings fill and every collector waits; then SIGKILL it: no stop
    flag is ever set, and the collectors must still leave within seconds. (A learner killed
    while it drains leaves room in the rings: the collector's per-step parent check ends it.)"""
    mark, lines = uuid.uuid4().hex, []
    proc = start([*CATCH, "--run-dir", str(tmp_path / "run"), "--start-method", "fork", "--num-collectors", "2",
                  "--ring-capacity", "64", "--learning-starts", "1000000", "--total-steps", "1000000000"], mark,
                 tmp_dir=tmp_path / "tmp")
    children = []
    try:
        assert read_until(proc, "collector seeds", lines), "".join(lines)[-3000:]
        children = collector_pids(mark, proc.pid)
        assert len(children) == 2
        headers = [np.memmap(p, np.int64, "r", shape=(16,)) for p in segments(proc.pid) if "_ring" in p.name]
        assert len(headers) == 2

        def heads():
            return [int(h[HEAD]) for h in headers]
        deadline = time.time() + 60
        while time.time() < deadline and min(heads()) == 0:  # both collectors are playing
            time.sleep(0.05)
        proc.send_signal(signal.SIGSTOP)

        def full():  # no room for one more step (up to 8 records: 4 envs, each with a final observation)
            return all(int(h[HEAD]) - int(h[TAIL]) > 64 - 8 for h in headers)
        # polled for the rings' state itself, not for a spell without pushes: on a loaded machine a
        # collector starved of CPU for half a second had read as one waiting for room
        while time.time() < deadline and not full():
            time.sleep(0.05)
        assert full(), "the rings never filled up"  # so every collector waits for room
        proc.kill()
        proc.wait(timeout=30)  # not its output: forked collectors that live on hold the pipe open
        deadline = time.time() + 5
        while time.time() < deadline and any(running(p) for p in children):
            time.sleep(0.1)
        alive = [p for p in children if running(p)]
        assert not alive, f"collectors {alive} waiting for room outlived their learner by 5 s"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for p in children:  # only after a failure: processes this test started
            if running(p):
                os.kill(p, signal.SIGKILL)
        proc.stdout.close()
        for p in segments(proc.pid):  # the killed learner's, whose creator is gone
            p.unlink()


def _wait_gone(pids, seconds: float) -> list:
    deadline = time.time() + seconds
    while time.time() < deadline and any(running(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if running(p)]


def test_evaluator_ends_within_a_second_of_a_killed_learner(tmp_path):
    """An OOM kill of the learner mid-evaluation: the evaluator (a long evaluation here), the
    collectors and multiprocessing's resource tracker all end within about a second. One collector
    (the profile's count grows with the cores: 7 on 16), so two children mean the evaluator runs."""
    mark, lines = uuid.uuid4().hex, []
    proc = start([*CATCH, "--run-dir", str(tmp_path / "run"), "--num-collectors", "1", "--total-steps", "1000000000",
                  "--eval-interval", "1000", "--eval-episodes", "100000"], mark)
    assert read_until(proc, "Learning starts", lines)
    deadline = time.time() + 60
    while time.time() < deadline and len(collector_pids(mark, proc.pid)) < 2:  # the collector and the evaluator
        time.sleep(0.05)
    children = collector_pids(mark, proc.pid)
    proc.kill()  # before the count is checked: a failed check must not leave a run training on
    proc.wait(timeout=30)  # not communicate(): a surviving child would hold its stdout open
    assert len(children) == 2, "no evaluation started"
    left = _wait_gone(marked_processes(mark), 1.5)
    assert not left, f"{left} outlived the killed learner by 1.5 s"


@pytest.mark.alone  # named semaphores carry no pid: any test's run beside it would add its own
def test_a_killed_process_group_leaves_nothing_in_dev_shm(tmp_path):
    """kill -9 of the run's whole process group (a container's OOM kill): the resource tracker
    dies too, so nothing may rely on it: no named semaphore (sem.*) may be left behind, and the
    rings and control block (dqnrl_*) are swept by the next start (tested above)."""
    before = set(os.listdir("/dev/shm"))
    mark, lines = uuid.uuid4().hex, []
    proc = start([*CATCH, "--run-dir", str(tmp_path / "run"), "--total-steps", "1000000000",
                  "--eval-interval", "1000"], mark, preexec_fn=os.setsid, tmp_dir=tmp_path / "tmp")
    assert read_until(proc, "Learning starts", lines)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not _wait_gone(marked_processes(mark), 5)
    left = sorted(n for n in set(os.listdir("/dev/shm")) - before if n.startswith("sem."))
    assert left == [], f"named semaphores left in /dev/shm: {left}"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_with_checkpoint_and_cleans_up(tmp_path, sig):
    run_dir, mark, lines = tmp_path / "run", uuid.uuid4().hex, []
    proc = start([*CATCH, "--run-dir", str(run_dir), "--total-steps", "1000000000"], mark)
    assert read_until(proc, "Learning starts", lines)
    while read_until(proc, "[MAIN] Epoch", lines) and "Loss: n/a" in lines[-1]:
        pass  # an epoch line with a loss: the learner has trained
    assert "Loss: n/a" not in lines[-1], "".join(lines)
    out = _stop(proc, lines, sig)
    assert proc.returncode == 0, out[-3000:]
    assert f"Stopped ({sig.name})" in out
    state = ckpt.load(run_dir / "checkpoint.pt", "tests.catch_env:Catch-v0", 3, 4)
    assert state["learner"]["updates"] > 0
    check_clean(proc, mark)


def test_env_that_raises_is_reported_restarted_then_stops(tmp_path):
    mark = uuid.uuid4().hex
    # one collector (the profile's count grows with the cores): collector 0 crashes, is restarted
    # and crashes again; with more, another's crash would spend the budget the collectors share
    proc, out = run([*CATCH, "--env", "tests.catch_env:CatchCrash-v0", "--run-dir", str(tmp_path / "run"),
                     "--num-collectors", "1", "--max-collector-restarts", "1", "--total-steps", "1000000000"], mark)
    assert "collector 0 (tests.catch_env:CatchCrash-v0) raised RuntimeError: injected emulator fault" in out
    assert "Restarting collector 0 (restart 1/1)" in out
    assert "[MAIN] Error: collector 0 failed and the restart budget (--max-collector-restarts 1) is spent" in out
    assert proc.returncode == 1, out[-3000:]
    assert "Traceback" not in out.split("[MAIN] Error:")[-1], "the final error should be one clear line"
    check_clean(proc, mark)


def test_persistent_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    # A checkpoint after every update: a skipped update must not write one again, nor count
    # its batch as trained.
    proc, out = run([*CATCH, "--env", "tests.catch_env:CatchNaN-v0", "--run-dir", str(run_dir),
                     "--total-steps", "1000000000", "--checkpoint-interval", "1"], mark)
    assert proc.returncode == 1, out[-3000:]
    assert "[MAIN] Error: training diverged: loss was NaN/inf for 100 updates in a row" in out
    assert "No final checkpoint was written" in out
    state = ckpt.load(run_dir / "checkpoint.pt")
    assert state["learner"]["updates"] > 0
    assert state["counters"]["samples_trained"] == 32 * state["learner"]["updates"], state["counters"]
    for name, t in state["learner"]["model"].items():
        if t.is_floating_point():
            assert torch.isfinite(t).all(), f"{name} in the kept checkpoint is not finite"
    check_clean(proc, mark)


def test_updates_owed_at_a_signal_are_trained_by_the_resume(tmp_path):
    """The collectors run up to ReplayRatio.slack agent steps ahead of the learner, so a run
    stopped by a signal has played steps whose updates it has not trained. Its checkpoint keeps
    them, and a resume trains them first: even one already at its --total-steps, which trains
    exactly those (the collectors held), stops at total_steps, and owes nothing after."""
    run_dir, mark, lines = tmp_path / "run", uuid.uuid4().hex, []
    # replay ratio 8: 4 agent steps pay for an update; collectors at epsilon ~1 play far faster
    # than a learner trains, so they hold the whole head start when the signal lands
    args = [*CATCH, "--replay-ratio", "8", "--run-dir", str(run_dir)]
    proc = start([*args, "--total-steps", "1000000000"], mark)
    assert read_until(proc, "[MAIN] Epoch", lines), "".join(lines)[-3000:]
    out = _stop(proc, lines)
    assert proc.returncode == 0, out[-3000:]
    c = ckpt.load(run_dir / "checkpoint.pt")["counters"]
    steps, trained, owed = c["agent_steps"], c["samples_trained"], c["owed_updates"]
    assert owed == ((steps - 500) * 8 - trained) // 32, c  # the ratio counts from --learning-starts 500
    assert owed > 0, f"the learner had trained every update its {steps:,} agent steps paid for: {c}"

    proc, out = run([*args, "--resume", "--total-steps", str(steps)], mark)
    assert proc.returncode == 0, out[-3000:]
    assert f"paid for {owed:,} updates the learner had not trained" in out
    assert f"Stopped (total_steps) at {steps:,} agent steps" in out, out[-3000:]
    c = ckpt.load(run_dir / "checkpoint.pt")["counters"]
    assert (c["agent_steps"], c["samples_trained"], c["owed_updates"]) == (steps, trained + 32 * owed, 0)
    proc, out = run([*args, "--resume", "--total-steps", str(steps)], mark)  # nothing owed: nothing to train
    assert proc.returncode == 2 and f"which --total-steps {steps:,} already reaches" in out, out[-3000:]
    check_clean(proc, mark)


def test_an_evaluation_cut_short_at_the_runs_length_is_played_by_the_resume(tmp_path):
    """The stop at --total-steps waits for the running evaluation; a Ctrl-C during that wait keeps
    it (its weights and where it stood). The resume at the same --total-steps plays it, keeps its
    weights as its confirmation says, and stops; one more resume, with nothing owed, is refused."""
    import json

    run_dir, mark, lines = tmp_path / "run", uuid.uuid4().hex, []
    args = [*CATCH, "--run-dir", str(run_dir), "--num-collectors", "1", "--total-steps", "3000"]
    # a long evaluation from 1,000 agent steps: still playing when the run reaches 3,000
    proc = start([*args, "--eval-interval", "1000", "--eval-episodes", "100000"], mark)
    assert read_until(proc, "to report before stopping (Ctrl-C stops it)", lines), "".join(lines)[-3000:]
    out = _stop(proc, lines)
    assert proc.returncode == 0 and "Stopped (SIGINT)" in out, out[-3000:]
    assert "was stopped with the run; best_eval.pt stays, and --resume plays it again first" in out, out[-3000:]
    at = json.loads((run_dir / "eval_pending.json").read_text())["agent_steps"]
    steps = ckpt.load(run_dir / "checkpoint.pt")["counters"]["agent_steps"]
    assert steps >= 3000 and 1000 <= at < steps and not (run_dir / "best_eval.pt").exists()

    proc, out = run([*args, "--resume", "--eval-episodes", "3"], mark)
    assert proc.returncode == 0, out[-3000:]
    assert f"it plays the evaluation at {at:,} agent steps that the last stop cut short, then stops" in out
    assert f"Playing again the evaluation at {at:,} agent steps that the last stop cut short" in out
    assert f"Stopped (total_steps) at {steps:,} agent steps" in out, out[-3000:]
    rows = [json.loads(line) for line in (run_dir / "evals.jsonl").read_text().splitlines()]
    assert [(r["agent_steps"], r["phase"]) for r in rows] == [(at, "screen"), (at, "confirm")]
    assert ckpt.load(run_dir / "best_eval.pt")["best"]["agent_steps"] == at
    assert not (run_dir / "eval_pending.json").exists() and not (run_dir / "eval_candidate.pt").exists()
    proc, out = run([*args, "--resume"], mark)
    assert proc.returncode == 2 and "already reaches" in out, out[-3000:]
    check_clean(proc, mark)


def _limit_file_size(limit):
    def pre():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    return pre


def test_checkpoint_write_failure_keeps_previous_checkpoint(tmp_path):
    path = tmp_path / "checkpoint.pt"
    good = {"meta": {"env": "x"}, "learner": {"w": torch.arange(10.0)}}
    ckpt.save(path, good)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, old_limit[1]))  # the disk "fills" at 100 kB
    try:
        with pytest.raises(ckpt.CheckpointError, match="could not write checkpoint .*checkpoint.pt.*previous checkpoint"):
            ckpt.save(path, {"meta": {"env": "x"}, "learner": {"w": torch.zeros(1_000_000)}})
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    assert torch.equal(ckpt.load(path)["learner"]["w"], good["learner"]["w"])
    assert not (tmp_path / "checkpoint.pt.tmp").exists()


def test_full_disk_during_run_stops_cleanly_and_keeps_checkpoint(tmp_path):
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    proc, out = run([*CATCH, "--run-dir", str(run_dir), "--total-steps", "800"], mark)
    assert proc.returncode == 0, out[-3000:]
    before = ckpt.load(run_dir / "checkpoint.pt")["counters"]["agent_steps"]
    # The same run resumed on a "disk" that takes files up to 12 MB: logs and shared memory fit
    # (a small ring), a 27 MB checkpoint does not.
    proc, out = run([*CATCH, "--run-dir", str(run_dir), "--resume", "--ring-capacity", "512",
                     "--total-steps", "1000000000"], mark, preexec_fn=_limit_file_size(12_000_000))
    assert proc.returncode == 1, out[-3000:]
    assert "[MAIN] Error: could not write checkpoint" in out and "previous checkpoint is untouched" in out
    assert ckpt.load(run_dir / "checkpoint.pt")["counters"]["agent_steps"] == before
    assert not (run_dir / "checkpoint.pt.tmp").exists()
    check_clean(proc, mark)


def test_shared_memory_that_does_not_fit_is_a_clear_error():
    from pipeline.transport import shm

    st = os.statvfs(shm.SHM_DIR)
    with pytest.raises(shm.ShmError, match=r"does not fit in /dev/shm .*--shm-size"):
        shm.create("too_big", st.f_bavail * st.f_frsize + 2**30)
    assert not (shm.SHM_DIR / shm.segment_name("too_big")).exists()


@pytest.mark.parametrize("flag", ["--resume", "--eval"])
def test_corrupt_checkpoint_is_named_before_anything_starts(tmp_path, flag):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "checkpoint.pt").write_bytes(b"PK\x03\x04 truncated")
    args = ["--env", "ALE/Pong-v5", "--run-dir", str(run_dir), "--resume"] if flag == "--resume" else \
        ["--eval", str(run_dir)]
    proc, out = run(args, uuid.uuid4().hex)
    assert proc.returncode == 2 and "truncated or corrupt" in out and "checkpoint.pt" in out
    assert "Traceback" not in out


def test_resume_rejects_checkpoint_of_another_game(tmp_path):
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    proc, out = run([*CATCH, "--run-dir", str(run_dir), "--total-steps", "600"], mark)
    assert proc.returncode == 0, out[-3000:]
    proc, out = run(["--env", "ALE/Breakout-v5", "--run-dir", str(run_dir), "--resume"], mark)
    assert proc.returncode == 2  # refused by the run's saved config.json
    assert "--env 'ALE/Breakout-v5'" in out and "trained with --env 'tests.catch_env:Catch-v0'" in out
    assert "cannot change" in out and "Traceback" not in out
    (run_dir / "config.json").unlink()  # a run without a record: the checkpoint itself refuses
    proc, out = run(["--env", "ALE/Breakout-v5", "--run-dir", str(run_dir), "--resume"], mark)
    assert proc.returncode == 2
    assert "checkpoint.pt" in out and "env='tests.catch_env:Catch-v0'" in out and "ALE/Breakout-v5" in out


def test_failure_during_setup_is_one_clear_line(tmp_path, monkeypatch):
    """A failure before the run is whole (here: no room for a ring) must end in its own
    "[MAIN] Error:" line and exit code 1, not in a crash of the shutdown code."""
    from pipeline.settings.layers import resolve_config
    from pipeline.runtime import run, wiring
    from pipeline.transport import shm

    res = resolve_config({"env": "tests.catch_env:Catch-v0", "run_dir": str(tmp_path / "run"),
                          "buffer_size": 20_000, "envs_per_collector": 4, "tensorboard": False})
    cfg, hw = res.cfg, res.hw

    def no_room(tag, capacity, frame_shape=(84, 84), extras=()):
        raise shm.ShmError(f"shared memory dqnrl_x_{tag} does not fit in /dev/shm (0.0 MiB free)")
    monkeypatch.setattr(wiring.Ring, "create", no_room)
    assert run.train_run(cfg, hw).exit_code == 1
    log = (tmp_path / "run" / "train.log").read_text()
    assert "[MAIN] Error: shared memory dqnrl_x_ring0 does not fit in /dev/shm" in log
    assert not (tmp_path / "run" / "checkpoint.pt").exists()
    assert shm.owned_segments() == []
