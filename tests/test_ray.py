"""Ray collectors against a real Ray cluster started on this machine (a head and two worker
nodes, one CPU each), driven through mario_rl_optimized.py as a user would: records arrive
exactly once per stream and in order, the replay ratio holds, an actor whose process is killed
and an actor whose node is lost are reported with their nodes and restarted by Ray, nothing is
left running, and a run of Ray collectors resumes from the replay it saved (how the learning
curve compares with process collectors is measured in the README, not asserted here). The
cluster is stopped afterwards. Bad addresses are refused before anything starts."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from tests.catch_env import stamp
from tests.proc_utils import CATCH, ROOT, check_clean, parent_pid, read_until, run, segments, start

pytestmark = pytest.mark.ray

RAY = str(Path(sys.executable).parent / "ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cmdline(pid: int | str) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def _ray_processes() -> list[str]:
    """Command lines of Ray's processes on this machine (raylets, GCS, workers, actors)."""
    out = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            cmd = _cmdline(d.name)
        except OSError:
            continue
        if "raylet" in cmd or "gcs_server" in cmd or cmd.startswith("ray::") or "default_worker.py" in cmd:
            out.append(f"{d.name}: {cmd[:120]}")
    return out


def _actor_processes() -> list[str]:
    return [p for p in _ray_processes() if "RemoteCollector" in p]


def _ahead(process_envs: int, ray_actors: int, ray_batch: int) -> int:
    """Agent steps the collectors may play beyond what training has paid for: the replay ratio's
    slack (1,000 steps at these settings), split between the collectors; one step of each process
    collector's envs past its share; and the Ray requests in flight (IN_FLIGHT per actor, each of
    ray_batch records), which the last drain at the stop takes in without training on them."""
    from pipeline.distributed.intake import IN_FLIGHT

    return 1_000 + process_envs + ray_actors * IN_FLIGHT * ray_batch


def _lose_node(raylet: int) -> None:
    """What a machine failure looks like to Ray: the node's raylet and every process it started
    (its workers, actors and agents) vanish at once."""
    children = []
    for d in Path("/proc").glob("[0-9]*"):
        try:
            if parent_pid(int(d.name)) == raylet:
                children.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    for pid in [raylet, *children]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # a child that had just exited
            pass


def _stop_when_back(proc, lines: list[str], restarted: int) -> str:
    """How long a restart takes depends on the machine's load (a new worker process imports torch),
    so the run goes on until ``restarted`` actors are back and two more epochs have passed, then
    stops with Ctrl-C; returns the whole output."""
    from pipeline.distributed.intake import RESTART_TIMEOUT_S

    for _ in range(restarted):
        assert read_until(proc, "is back on", lines, timeout=RESTART_TIMEOUT_S + 60), "".join(lines)[-3000:]
    for _ in range(2):
        assert read_until(proc, "[MAIN] Epoch ", lines, timeout=120), "".join(lines)[-3000:]
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    out = "".join(lines) + rest
    assert proc.returncode == 0 and "[MAIN] Stopped (SIGINT)" in out, out[-4000:]
    return out


@pytest.fixture(scope="module")
def cluster():
    """``ray start --head`` plus ``ray start --address`` twice (two more nodes), one CPU each, so
    a lost node's actor has a CPU to come back on; workers import the project from the
    repository (PYTHONPATH), as an installed project would."""
    port = _free_port()
    # The head's health checks declare a lost node dead after ~3-6 s instead of Ray's default
    # ~15-20 s (5 missed checks 3 s apart, 10 s timeouts): the same failure path, sooner.
    checks = {"RAY_health_check_initial_delay_ms": "1000", "RAY_health_check_period_ms": "1000",
              "RAY_health_check_timeout_ms": "2000", "RAY_health_check_failure_threshold": "3"}
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0", **checks}
    common = ["--num-cpus=1", "--disable-usage-stats"]
    try:
        starts = [[RAY, "start", "--head", f"--port={port}", "--include-dashboard=false", *common],
                  *[[RAY, "start", f"--address=127.0.0.1:{port}", *common]] * 2]
        for cmd in starts:
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180, cwd=ROOT)
            assert out.returncode == 0, (cmd, out.stdout[-2000:], out.stderr[-3000:])
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], env=env, capture_output=True, timeout=120)
        deadline = time.monotonic() + 30
        while _ray_processes() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _ray_processes(), _ray_processes()


def _streams(run_dir: Path):
    data = np.load(run_dir / "replay.npz")
    return data["frames"], data["written"], data["pos"]


def _check_exactly_once_in_order(frames, written, pos):
    """Each stream's records, oldest first, are runs of one env instance each with observation
    numbers counting up by one (a new instance starts a new run: a restarted collector); no
    instance appears in two runs or two streams. Returns each stream's instances, oldest first."""
    seen, runs = {}, {}
    L = frames.shape[1]
    for s in range(len(written)):
        n = int(written[s])
        assert n > 0, f"stream {s} is empty"
        order = np.arange(n) if n <= L else (int(pos[s]) + np.arange(L)) % L  # a full stream wraps at pos
        ids, counts = stamp(frames[s, order])
        breaks = np.flatnonzero(ids[1:] != ids[:-1]) + 1
        for run_ids, run_counts in zip(np.split(ids, breaks), np.split(counts, breaks)):
            uid = int(run_ids[0])
            assert uid != 0, f"stream {s}: a record without a stamp"
            assert uid not in seen, f"env instance {uid} appears in stream {seen[uid]} and again in stream {s}"
            seen[uid] = s
            runs.setdefault(s, []).append(uid)
            steps = np.diff(run_counts.astype(np.int64))
            assert (steps == 1).all(), f"stream {s}: observation numbers {run_counts[:50]} skip or repeat"
    return runs


def test_plain_run_never_imports_ray():
    code = ("import sys, mario_rl_optimized, pipeline.runtime.run, pipeline.runtime.trainer, pipeline.settings.layers; "
            "assert 'ray' not in sys.modules, 'ray imported'")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("args,expected", [
    (["--ray-address", "127.0.0.1:1", "--ray-collectors", "1"], "--ray-address '127.0.0.1:1': cannot reach the Ray head"),
    (["--ray-collectors", "1"], "--ray-collectors 1: needs a cluster to start them in"),
    (["--ray-address", "127.0.0.1:1"], "--ray-address '127.0.0.1:1': starts no remote collector"),
    (["--ray-address", "no-port-here", "--ray-collectors", "1"], "--ray-address 'no-port-here'"),
])
def test_bad_ray_options_are_one_line_before_anything_starts(tmp_path, args, expected):
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "mario_rl_optimized.py", *CATCH, *args, "--run-dir", str(tmp_path / "r")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and expected in out.stderr, out.stderr
    assert not (tmp_path / "r").exists()
    assert time.monotonic() - t0 < 60


def test_catch_through_ray_actors_exactly_once_in_order_through_a_killed_actor_and_a_lost_node(cluster, tmp_path):
    """One process collector and two Ray collectors. At the second epoch one actor's process is
    killed and the other actor's node is lost (the head is never the one lost: it is the cluster)."""
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    args = [*CATCH, "--env", "tests.catch_env:CountingCatch-v0", "--run-dir", str(run_dir), "--total-steps", "1000000000",
            "--ray-address", cluster, "--ray-collectors", "2", "--ray-batch", "64", "--save-replay", "true"]
    proc = start(args, mark)
    lines = []
    assert read_until(proc, "[MAIN] Epoch 2 ", lines, timeout=300), "".join(lines)[-3000:]
    started = next(ln for ln in lines if "Ray collector(s)" in ln)
    actors = {int(pid): parent_pid(int(pid)) for pid in re.findall(r"pid (\d+)", started)}
    # raylets of the worker nodes run with socket names raylet.1, raylet.2; the head's is "raylet"
    on_worker = [pid for pid, raylet in actors.items() if re.search(r"sockets/raylet\.\d+ ", _cmdline(raylet))]
    assert on_worker, ("no actor on a worker node", started, {p: _cmdline(r)[:100] for p, r in actors.items()})
    # Ray starts workers at nice 15; beside this busy learner a restarted actor then took minutes
    assert all(os.getpriority(os.PRIO_PROCESS, pid) == 0 for pid in actors), {
        pid: os.getpriority(os.PRIO_PROCESS, pid) for pid in actors}
    lost = on_worker[0]
    killed = next(pid for pid in actors if pid != lost)
    os.kill(killed, signal.SIGKILL)
    _lose_node(actors[lost])
    out = _stop_when_back(proc, lines, restarted=2)
    died = {int(i): (node, pid) for i, node, pid in
            re.findall(r"\[MAIN\] Ray collector (\d+) on \S+ \(([0-9.]+ node [0-9a-f]{8})\), pid (\d+) died", out)}
    back = {int(i): (node, pid) for i, node, pid in
            re.findall(r"\[MAIN\] Ray collector (\d+) is back on \S+ \(([0-9.]+ node [0-9a-f]{8})\), pid (\d+)", out)}
    assert sorted(died) == sorted(back) == [1, 2], out[-4000:]
    assert sorted(int(pid) for _, pid in died.values()) == sorted([killed, lost])
    on_lost_node = next(i for i, (_, pid) in died.items() if int(pid) == lost)
    assert back[on_lost_node][0] != died[on_lost_node][0], "the lost node's actor came back on the node that was lost"
    assert "[MAIN] Ray restarts collector 1 with new envs" in out and "[MAIN] Ray restarts collector 2 with new envs" in out
    assert "(restart 2/3)" in out
    check_clean(proc, mark)

    rows = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    assert last["agent_steps"] >= 4_000
    # the replay ratio held both ways: samples trained per agent step after learning starts is
    # 4, within what the collectors may run ahead and one update
    paid = (last["agent_steps"] - 500) * 4
    ahead = _ahead(process_envs=4, ray_actors=2, ray_batch=64)
    assert paid - 4 * ahead - 32 <= last["samples_trained"] <= paid + 32, (last["samples_trained"], paid)

    frames, written, pos = _streams(run_dir)
    assert len(written) == 3 * 4  # 1 process + 2 Ray collectors, 4 envs each
    assert written[4:].sum() > 1500, "the Ray collectors delivered almost nothing"
    runs = _check_exactly_once_in_order(frames, written, pos)
    for s in range(4, 12):  # every Ray stream holds envs of the start before the failures and of the one after
        assert len(runs[s]) >= 2, f"stream {s} has no records from its restarted actor"
    deadline = time.monotonic() + 20
    while _actor_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _actor_processes(), _actor_processes()


def test_pong_through_ray_actors_alone_with_a_killed_actor(cluster, tmp_path):
    """No process collector: two Ray collectors feed the learner, held to the replay ratio; one is
    killed when learning starts and comes back."""
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    proc = start(["--env", "ALE/Pong-v5", "--num-collectors", "0", "--ray-address", cluster, "--ray-collectors", "2",
                  "--envs-per-collector", "4", "--total-steps", "1000000000", "--learning-starts", "1000",
                  "--buffer-size", "20000", "--epoch-steps", "500", "--run-dir", str(run_dir),
                  "--save-replay", "true", "--replay-ratio", "2"], mark)  # 2, not the preset's 8: epochs 4x sooner
    lines = []
    assert read_until(proc, "[MAIN] Learning starts", lines, timeout=300), "".join(lines)[-3000:]
    started = next(ln for ln in lines if "Ray collector(s)" in ln)
    killed = int(re.findall(r"pid (\d+)", started)[0])
    os.kill(killed, signal.SIGKILL)
    out = _stop_when_back(proc, lines, restarted=1)
    assert re.search(rf"\[MAIN\] Ray collector 0 on \S+ \([0-9.]+ node [0-9a-f]{{8}}\), pid {killed} died", out), out[-3000:]
    assert "[MAIN] Ray collector 0 is back on" in out, out[-3000:]
    check_clean(proc, mark)
    last = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()][-1]
    assert last["agent_steps"] >= 1500  # learning starts at 1,000, and two epochs of 500 ran after the restart
    ratio = json.loads((run_dir / "config.json").read_text())["config"]["replay_ratio"]
    paid = (last["agent_steps"] - 1000) * ratio
    ahead = _ahead(process_envs=0, ray_actors=2, ray_batch=256)
    assert paid - ratio * ahead - 32 <= last["samples_trained"] <= paid + 32, (last["samples_trained"], paid, ratio)
    _, written, _ = _streams(run_dir)
    assert len(written) == 2 * 4 and (written > 150).all(), written  # the restarted actor's streams too


def test_a_run_of_ray_collectors_alone_resumes_from_its_saved_replay(cluster, tmp_path):
    """Two Ray collectors and no process collector: a clean stop saves the replay of their 8
    streams, and --resume trains on from it at once (no refill)."""
    from pipeline.records.checkpoint import load

    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    args = [*CATCH, "--run-dir", str(run_dir), "--num-collectors", "0", "--ray-address", cluster,
            "--ray-collectors", "2", "--ray-batch", "64", "--save-replay", "true",
            "--replay-ratio", "1"]  # what is saved and restored, not what is learned: a quarter of the updates
    proc, out = run([*args, "--total-steps", "1500"], mark)
    assert proc.returncode == 0 and "[MAIN] Stopped (total_steps)" in out, out[-3000:]
    saved = np.load(run_dir / "replay.npz")["written"]
    assert len(saved) == 2 * 4 and saved.sum() >= 1500, saved
    before = load(run_dir / "checkpoint.pt")["counters"]
    # on from where the first run stopped: its actors' batches in flight at --total-steps may have
    # carried it up to _ahead(0, 2, 64) agent steps past 1,500
    total = before["agent_steps"] + 1000
    proc, out = run([*args, "--total-steps", str(total), "--resume"], mark)
    assert proc.returncode == 0 and "[MAIN] Stopped (total_steps)" in out, out[-3000:]
    assert re.search(rf"\[MAIN\] Replay restored from {re.escape(str(run_dir / 'replay.npz'))}: "
                     rf"{saved.sum():,} transitions.*training goes on at once", out), out[-3000:]
    # no refill: learning goes on before the 500 steps of --learning-starts could have been played again
    starts = int(re.search(r"\[MAIN\] Learning starts at ([\d,]+) agent steps", out).group(1).replace(",", ""))
    assert starts < before["agent_steps"] + 500, (starts, before["agent_steps"])
    after = load(run_dir / "checkpoint.pt")["counters"]
    assert after["agent_steps"] >= total and after["samples_trained"] > before["samples_trained"]
    check_clean(proc, mark)


def test_killed_learner_leaves_no_actor_running(cluster, tmp_path):
    """The actors belong to the learner's process: SIGKILL it, and Ray stops them."""
    mark = uuid.uuid4().hex
    proc = start([*CATCH, "--run-dir", str(tmp_path / "run"), "--total-steps", "10000000", "--num-collectors", "0",
                  "--ray-address", cluster, "--ray-collectors", "2"], mark, tmp_dir=tmp_path / "tmp")
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("[MAIN] Epoch 1 "):
            break
    assert len(_actor_processes()) == 2, ("".join(lines)[-3000:], _ray_processes())
    proc.kill()
    proc.wait(timeout=30)
    # a killed learner leaves its shared memory to the next start's sweep (tests/test_faults.py);
    # this test owns the segment it provoked
    left = segments(proc.pid)
    assert left, "the killed learner left no control segment: was it killed before set-up?"
    for seg in left:
        seg.unlink()
    deadline = time.monotonic() + 60
    while _actor_processes() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _actor_processes(), _actor_processes()
