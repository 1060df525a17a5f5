"""benchmark_performance.py as users run it: --quick gives the whole ladder and the components
in under 3 minutes, as a table, JSON and a PNG; --profile writes traces; --autotune writes a
profile that config_optimized.py then picks."""
import json
import os
import subprocess
import sys
import time

import cv2
import pytest

from tests.conftest import BASELINE_MINUTES, CATCH_MINUTES
from tests.proc_utils import ROOT

pytestmark = pytest.mark.slow

ROW_KEYS = {"name", "agent_steps_per_s", "speedup_vs_baseline", "updates_per_s", "samples_per_s",
            "bytes_per_transition", "peak_rss_mb", "learner_busy", "collector_wait", "drops", "samples_per_agent_step",
            "agent_steps_measured"}


def _bench(*args, env=None, timeout=400):
    t0 = time.time()
    out = subprocess.run([sys.executable, "benchmark_performance.py", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=timeout, env={**os.environ, **(env or {})})
    return out, time.time() - t0


def test_quick_ladder_and_components(tmp_path):
    """The quick ladder on the rows whose code differs (row 1's deque loop, row 3's replay and
    vector-env loop, row 6 skipped by --quick, row 8's pipeline run with the machine's profile;
    rows 2, 4, 5 and 7 are those loops at other settings, ~15 s of CI each) and every component."""
    js, png = tmp_path / "bench.json", tmp_path / "ladder.png"
    out, took = _bench("--quick", "--seconds", "2", "--rows", "3,6,8", "--json", str(js), "--plot", str(png))
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    print(f"benchmark_performance.py --quick took {took:.0f} s")  # speed is reported, not asserted
    data = json.loads(js.read_text())
    rows = data["rows"]
    assert [r["name"][:2] for r in rows] == ["1.", "3.", "6.", "8."] and all("error" not in r for r in rows), rows
    measured = [r for r in rows if "skipped" not in r]
    assert [r["name"][:2] for r in measured] == ["1.", "3.", "8."], rows
    assert rows[2]["skipped"] in ("skipped with --quick (compiling takes about a minute)", "no fp16/bf16 hardware here")
    for r in measured:
        assert ROW_KEYS <= r.keys(), r
        assert r["agent_steps_per_s"] > 0 and r["samples_per_s"] > 0
        # the replay ratio holds in every row: samples trained per agent step stays near 8 over
        # the measured windows (from their totals, so a loaded machine's few steps a window count
        # whole), give or take one update's batch over the steps measured: a shared machine's
        # 2-thread baseline played 8 agent steps in its one window and trained 3 batches of 32 (12)
        slack = 3 + 32 / r["agent_steps_measured"]
        assert abs(r["samples_per_agent_step"] - 8) < slack, r
    assert rows[0]["speedup_vs_baseline"] == 1.0
    # --quick compiles nothing: row 8 trains the machine's profile eager, and says so
    assert rows[3]["settings"]["compile"] is False and rows[3]["note"] == "compile off with --quick", rows[3]
    assert rows[0]["bytes_per_transition"] > 50_000 and rows[1]["bytes_per_transition"] < 7_200
    c = data["components"]
    for key in ("queue", "queue_per_transition", "collector_overhead", "envs", "replay", "learner", "acting",
                "learner_in_pipeline"):
        assert key in c, key
    from pipeline.settings.hardware import detect_hardware

    hw = detect_hardware()  # bf16 rows are timed only where the hardware has bf16, as the ladder's row 7
    for r in c["learner"]:
        low = r["precision"] != "fp32"
        assert ("skipped" in r) == (low and not (hw.cuda or hw.cpu_bf16)), (r, hw)
        assert "skipped" in r or r["updates_per_s"] >= 0
    assert {"cores", "cpu", "ram_gib", "gpu"} <= data["machine"].keys()
    assert "| row | agent steps/s |" in out.stdout and "Ring / mp.Queue" in out.stdout
    assert cv2.imread(str(png)) is not None


def test_profile_writes_traces_and_top_ops(tmp_path):
    """The profile of this machine, pinned to fp32 eager: on a CPU with bf16 instructions and no
    bf16 speed kept yet (a test session's fresh profile folder) the profile trains in bf16 and
    --profile compiles the update first (42 s against 14 s in fp32 on a 2-core Zen 5 beside a
    training run; 192 s in a loaded CI); the compiled update is tested in tests/test_learner.py. A kept 1.0x speedup (as the probe writes it) picks fp32 on
    every CPU, so the test runs the same path everywhere."""
    from pipeline.settings.hardware import SPEEDUP_FILE, cpu_info, cpu_name, speedup_key

    model, _, cpu_id = cpu_info()
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / SPEEDUP_FILE).write_text(json.dumps({speedup_key(cpu_name(model, cpu_id)): 1.0}))
    out, _ = _bench("--profile", str(tmp_path), env={"DQN_PROFILE_DIR": str(tmp_path / "profiles")})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "amp False, compile False" in out.stdout, out.stdout[-3000:]
    assert "top operations" in out.stdout and "aten::" in out.stdout
    for name in ("trace_learner.json", "trace_collector.json"):
        trace = json.loads((tmp_path / name).read_text())
        assert trace["traceEvents"]


def test_autotune_writes_a_profile_that_config_picks_for_its_family_only(tmp_path):
    env = {"DQN_PROFILE_DIR": str(tmp_path)}
    out, _ = _bench("--autotune", "--quick", "--seconds", "2", env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    path = tmp_path / "autotuned-atari.json"
    data = json.loads(path.read_text())
    assert data["family"] == "atari" and data["tuned_on"] == "ALE/Pong-v5"
    assert data["agent_steps_per_s"] > 0 and len(data["trials"]) >= 3

    def show(*args):
        return subprocess.run([sys.executable, "config_optimized.py", *args], cwd=ROOT, capture_output=True,
                              text=True, env={**os.environ, **env}, timeout=120).stdout
    shown = show("--env", "ALE/Breakout-v5")
    assert f"Profile:  autotuned (from {path})" in shown
    for key, value in data["overrides"].items():
        assert f" {key} " in shown and f"= {value!r}" in shown
    assert "Profile:  cpu-" in show("--env", "SuperMarioBros-1-1-v0")  # a Pong-tuned profile is not Mario's


def test_time_to_score_quick_on_catch_with_baseline(catch_time_to_score):
    """--time-to-score --quick (--target 0.8): the catch game trained by mario_rl_optimized.py until
    the mean return of the last 20 games reaches 0.8 (or the time passes), then the baseline recipe for
    its own --baseline-minutes (BASELINE_MINUTES); milestones in a table, JSON and one plot with both curves. (The run is shared
    with tests/test_learning.py: tests/conftest.py.)"""
    tmp_path, out = catch_time_to_score["dir"], catch_time_to_score["proc"]
    js, png = tmp_path / "tts.json", tmp_path / "tts.png"
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    print(f"--time-to-score --quick --vs-baseline took {catch_time_to_score['took']:.0f} s")
    data = json.loads(js.read_text())
    assert data["env"] == "tests.catch_env:Catch-v0" and data["target"] == 0.8 and data["milestones"] == [-0.5, 0.0, 0.5, 0.8]
    pipeline, baseline = data["runs"]
    # the pipeline learns catch well inside the limit; the table and JSON time each milestone
    assert pipeline["reached"], pipeline["score"]
    marks = pipeline["score"]["milestones"]
    assert [m["value"] for m in marks] == [-0.5, 0.0, 0.5, 0.8]
    assert all(m["minutes"] is not None for m in marks)
    assert [m["agent_steps"] for m in marks] == sorted(m["agent_steps"] for m in marks)
    assert marks[-1]["minutes"] <= CATCH_MINUTES + 0.2 and marks[-1]["updates"] > 0 and marks[-1]["samples_trained"] > 0
    log = (tmp_path / os.path.basename(pipeline["run_dir"]) / "train.log").read_text()
    assert "Stopped (target_score)" in log and "[MAIN] Score: mean return of the last 20 games reached 0.8" in log
    # the baseline ran its recipe for its own limit and was scored the same way
    assert baseline["settings"]["model_arch"] == "nature" and baseline["settings"]["n_step"] == 1
    assert data["minutes_limit"] == CATCH_MINUTES and data["baseline_minutes_limit"] == BASELINE_MINUTES
    assert baseline["settings"]["time_limit"] == BASELINE_MINUTES
    assert baseline["totals_at_last_game"]["wall_s"] <= BASELINE_MINUTES * 60 + 5
    assert baseline["score"]["games"] > 20
    assert "| run | -0.5 | 0 | 0.5 | 0.8 |" in out.stdout and f"limit {CATCH_MINUTES:g} min ({BASELINE_MINUTES:g} for the baseline)" in out.stdout
    assert cv2.imread(str(png)) is not None


def test_time_to_score_refuses_run_options_it_sets_itself(tmp_path):
    out, _ = _bench("--time-to-score", "--quick", "--time-limit", "3", timeout=120)
    assert out.returncode == 2 and "--minutes" in out.stderr
    out, _ = _bench("--time-to-score", "--quick", "--baseline-minutes", "1", timeout=120)
    assert out.returncode == 2 and "--baseline-minutes goes with --vs-baseline" in out.stderr


def test_time_to_score_targets_per_game():
    from bench.time_to_score import default_milestones, default_target

    assert default_target("ALE/Pong-v5") == 18 and default_milestones("ALE/Pong-v5")[-1] == 18
    assert default_target("SuperMarioBros-1-2-v0") == 3000  # Mario by distance, any stage
    assert default_milestones("SuperMarioBros-1-1-v0") == (1000, 1500, 2000, 2500)
    assert default_target("ALE/Breakout-v5") is None and default_milestones("ALE/Breakout-v5") == ()


@pytest.mark.parametrize("env,preset", [("ALE/Pong-v5", "atari"), ("SuperMarioBros-1-1-v0", "mario")])
def test_update_parts_split_one_update_by_part_and_layer(env, preset):
    """--only update: every part of the learner's update and every layer forward and backward
    gets its share, the shares add up to the whole update, and the FLOPs per layer are the
    network's (conv1 forward on s: 2 x 32 filters x 20 x 20 outputs x 4 x 8 x 8 weights per sample);
    the Atari preset's QR-DQN and the Mario preset's Double DQN (one more forward on s')."""
    from bench.update_parts import update_parts

    res = update_parts(n_updates=2, batch_size=4, threads=1, env=env)
    assert res["env"] == env
    got = {(r["part"], r["layer"]) for r in res["rows"]}
    for part in ("targets", "forward"):
        assert {(part, layer) for layer in ("uint8 scaling", "conv1", "conv2", "conv3", "bn1", "bn2", "bn3", "fc1",
                                            "fc2")} <= got, got
    assert {("backward", layer) for layer in ("conv1", "conv2", "conv3", "bn1", "bn2", "bn3", "fc1", "fc2")} <= got
    assert {("clip", ""), ("sync", ""), ("step", "")} <= got
    assert sum(r["share"] for r in res["rows"]) == pytest.approx(1.0)
    assert sum(r["ms"] for r in res["rows"]) == pytest.approx(res["profiled_update_ms"])
    conv1 = next(r for r in res["rows"] if (r["part"], r["layer"]) == ("forward", "conv1"))
    assert conv1["gflop"] == pytest.approx(4 * 2 * 32 * 20 * 20 * 4 * 8 * 8 / 1e9)
    targets_conv1 = next(r for r in res["rows"] if (r["part"], r["layer"]) == ("targets", "conv1"))
    from presets import load_preset

    forwards = 2 if load_preset(preset).get("double_dqn", True) else 1  # the target's, and Double DQN's online one
    assert targets_conv1["gflop"] == pytest.approx(forwards * conv1["gflop"])  # on s'


def test_learner_share_times_each_condition_interleaved():
    """--only learner-share: the learner's ms per update alone, on fresh batches, beside the
    prefetch thread and beside a busy co-runner process, each with its share of alone; the
    co-runner and the prefetch thread are gone afterwards."""
    import multiprocessing as mp
    import threading

    from bench.learner_share import CONDITIONS, learner_share

    res = learner_share(rounds=2, block=2, duty=0.5, threads=1, batch_size=4, replay_size=4_000)
    assert [r["condition"] for r in res["rows"]] == list(CONDITIONS)
    assert res["batch"] == 4 and res["threads"] == 1 and res["co_runner_duty"] == 0.5
    for r in res["rows"]:
        assert r["ms_per_update"] > 0 and abs(r["updates_per_s"] * r["ms_per_update"] - 1000) < 1e-6
    assert res["rows"][0]["share_of_alone"] == 1.0
    assert not mp.active_children() and not [t for t in threading.enumerate() if t.name == "prefetch"]


def test_a_compile_row_times_a_compiled_learner_past_its_compile(monkeypatch):
    """Rows labeled compile: the learner-alone rows get a learner whose loss is compiled and whose
    compiling update has run before any window; a pipeline row's learner compiles at its first
    update (a run waits 2,000 updates, past most rows' end). torch.compile is stood in for by a
    wrapper that records its calls, so the test needs no compiler and no compile time."""
    import torch

    from bench.ladder import compile_at_once
    from bench.learner_grid import timed_learner
    from config_optimized import Config
    from pipeline.engine.engine import COMPILE_AFTER_UPDATES, Engine
    from pipeline.agent.learner import Learner

    calls = []

    def fake_compile(fn, **kw):
        def compiled(*a, **k):
            calls.append("call")
            return fn(*a, **k)
        compiled._torchdynamo_orig_callable = fn
        return compiled
    monkeypatch.setattr(torch, "compile", fake_compile)
    cfg = Config.of(compile=True, amp=False)
    lrn, _ = timed_learner(cfg, torch.device("cpu"))
    assert hasattr(lrn.loss, "_torchdynamo_orig_callable") and lrn.compiled and lrn.compile_done
    assert calls == ["call"] and lrn.learner.updates == 1  # compiled and run once, before the row's windows
    eager, _ = timed_learner(Config.of(compile=False, amp=False), torch.device("cpu"))
    assert not eager.compiled and eager.learner.updates == 0
    assert eager.compile_done  # an eager row's measurement must not wait for a compile that never comes
    row = Engine(Learner(cfg.learner, 4, 6, torch.device("cpu")))
    assert not row.compile_due() and row.compile_after == COMPILE_AFTER_UPDATES
    compile_at_once(row)
    assert row.compile_due() and not row.compile_done


def test_the_time_to_score_table_marks_a_run_that_shared_the_machine(capsys):
    from bench.time_to_score import print_time_to_score

    def run(name, others):
        return {"name": name, "score": {"milestones": [{"minutes": 2.0, "agent_steps": 9_000}], "best_mean": 0.9},
                "totals_at_last_game": {"agent_steps": 9_500, "updates": 2_000, "samples_trained": 64_000},
                "other_runs": others}
    res = {"env": "tests.catch_env:Catch-v0", "metric": "return", "window": 20, "target": 0.8, "minutes_limit": 4,
           "baseline_minutes_limit": None, "milestones": [0.8], "runs": [run("pipeline", 1), run("baseline", 0)]}
    print_time_to_score(res)
    out = capsys.readouterr().out
    assert "| pipeline | 2.0 min / 9,000 | 0.90 | 9,500 | 2,000 | 64,000 |" in out
    assert "Shared the machine: pipeline ended epochs beside up to 1 other training run(s)" in out
    assert "Shared the machine: baseline" not in out


def test_the_emulator_ceiling_times_every_layer_and_splits_the_rollouts_time():
    """``--only emulator``'s rows, each from the shared single-env or batched harness: every layer
    gives a rate, and each rollout's act/env/other shares split its whole measured time."""
    from bench.emulator import bench_emulator

    e = bench_emulator("SuperMarioBros-1-1-v0", 1, 0.05)
    for key in ("emulator_frames_per_s", "vector_emulator_frames_per_s", "wrapped_env_frames_per_s",
                "batched_env_frames_per_s", "batched_python_env_frames_per_s", "rollout_frames_per_s",
                "policy_rollout_frames_per_s"):
        assert e[key] > 0, key
    for shares in (e["rollout_shares"], e["policy_rollout_shares"]):
        assert all(0 <= v <= 1 for v in shares.values()) and sum(shares.values()) == pytest.approx(1)
    assert e["policy_rollout_shares"]["act_share"] > e["rollout_shares"]["act_share"]  # a forward pass per step
