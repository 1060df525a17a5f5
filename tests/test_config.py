"""Profiles picked from hardware, overrides, and every validation error."""
import os
import re
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace
from pathlib import Path

import pytest

from config_optimized import FIELDS, Config, ConfigError
from pipeline.settings.check import validate
from pipeline.settings.layers import resolve_config
from pipeline.settings.hardware import Hardware
from pipeline.settings.profiles import pick_profile

ROOT = Path(__file__).resolve().parent.parent
GiB = 2**30


def hw(cores=2, ram=24, cuda=False, gpu=0):
    return Hardware(cores, ram * GiB, int(ram * 0.9 * GiB), "test cpu", True, cuda, "GPU" if cuda else None,
                    int(gpu * GiB), False)


@pytest.mark.parametrize("machine,profile", [
    (hw(2), "cpu-small"), (hw(16, 64), "cpu-large"), (hw(4, 16, True, 6), "gpu-minimum"),
    (hw(8, 32, True, 8), "gpu-recommended"), (hw(32, 128, True, 24), "gpu-optimal")])
def test_profile_follows_hardware(machine, profile):
    assert pick_profile(machine) == profile


def test_explicit_option_beats_profile():
    res = resolve_config({"batch_size": 48}, hw(2))
    cfg, name = res.cfg, res.profile
    assert name == "cpu-small" and cfg.learner.batch_size == 48


def test_profile_fits_buffer_to_available_ram():
    cfg = resolve_config({"profile": "gpu-optimal"}, hw(32, 4, True, 24)).cfg
    assert cfg.replay.buffer_size * 7062 <= 0.5 * 4 * 0.9 * GiB


@pytest.mark.parametrize("cores,layout", [(2, (1, 16)), (4, (1, 16)), (8, (4, 4)), (16, (8, 2)), (64, (16, 1))])
def test_gpu_profiles_spread_atari_streams_over_the_cores_the_learner_leaves(cores, layout):
    """Atari on a GPU: the 16 env streams of the recipe (its first games end sooner than with
    more), over as many collectors as the cores the learner process (loop, consolidation,
    prefetch) leaves; the preset's replay. The streams, and so what the replay holds per agent
    step, are the same on every host."""
    for profile in ("gpu-minimum", "gpu-recommended", "gpu-optimal"):
        res = resolve_config({"profile": profile, "env": "ALE/Pong-v5"}, hw(cores, 128, True, 24))
        atari = res.cfg
        assert (atari.collectors.num_collectors, atari.collectors.envs_per_collector) == layout
        assert atari.replay.buffer_size == Config().replay.buffer_size
        assert res.sources["num_collectors"].startswith("profile")


@pytest.mark.parametrize("cores", [2, 8, 16, 64])
def test_cpu_hosts_keep_their_collectors(cores):
    """Without a GPU the learner takes the cores: cpu-small keeps one collector, cpu-large one per
    two cores beyond two (at most 8); nothing of the GPU layout applies."""
    cfg = resolve_config({"env": "ALE/Pong-v5"}, hw(cores, 64)).cfg
    assert cfg.collectors.num_collectors == (1 if cores <= 4 else max(1, min(8, (cores - 2) // 2)))
    assert cfg.collectors.envs_per_collector == Config().collectors.envs_per_collector


def test_gpu_profiles_keep_marios_streams_and_fit_its_collectors():
    mario = resolve_config({"profile": "gpu-optimal"}, hw(32, 128, True, 24)).cfg
    assert (mario.collectors.num_collectors, mario.collectors.envs_per_collector) == (16, 16)  # 256 streams
    assert resolve_config({"profile": "gpu-optimal"}, hw(16, 128, True, 24)).cfg.collectors.num_collectors == 8
    assert mario.replay.buffer_size == 1_000_000


def test_fitted_layout_divides_the_streams_evenly():
    from pipeline.settings.profiles import fitted_layout

    assert fitted_layout(16, 16) == (8, 2) and fitted_layout(16, 14) == (8, 2) and fitted_layout(16, 11) == (8, 2)
    assert fitted_layout(16, 10) == (4, 4) and fitted_layout(12, 9) == (6, 2) and fitted_layout(7, 64) == (7, 1)
    assert fitted_layout(16, 1) == (1, 16)


def test_gpu_hosts_act_in_bf16_where_the_cpu_pays_for_it():
    import dataclasses

    fast = dataclasses.replace(hw(16, 128, True, 24), cpu_bf16_speedup=1.5)
    slow = dataclasses.replace(fast, cpu_bf16_speedup=0.7)
    assert resolve_config({"env": "ALE/Pong-v5"}, fast).cfg.collectors.act_bf16 is True
    assert resolve_config({"env": "ALE/Pong-v5"}, slow).cfg.collectors.act_bf16 is False


def test_config_show_says_why_the_gpu_collectors_are_what_they_are(capsys, monkeypatch):
    from pipeline.settings import layers

    monkeypatch.setattr(layers, "detect_hardware", lambda: hw(16, 128, True, 24))
    assert layers.show(["--env", "ALE/Pong-v5"]) == 0
    out = capsys.readouterr().out
    assert "Collectors: 8 collector(s) x 2 envs: the recipe's 16 env streams over the 13 of 16 cores" in out


def _error(machine=None, **kw):
    cfg = Config().replace(**kw)
    with pytest.raises(ConfigError) as e:
        validate(cfg, machine or hw(2))
    return str(e.value)


def test_buffer_larger_than_ram_names_bytes_and_fix():
    msg = _error(buffer_size=10_000_000)
    assert "--buffer-size" in msg and "GiB" in msg and "available" in msg and "use --buffer-size" in msg


def test_batch_larger_than_buffer():
    assert "--batch-size 512" in _error(batch_size=512, buffer_size=256, num_collectors=1, envs_per_collector=1)


def test_negative_confirmation_games():
    assert "--confirm-episodes" in _error(confirm_episodes=-1) and "0 or more" in _error(confirm_episodes=-1)


def test_unknown_env_id():
    assert "not a known environment id" in _error(env="ALE/Pongg-v5")


def test_action_mark_wider_than_the_frame_is_refused_before_anything_starts():
    msg = _error(env="tests.catch_env:WideCatch-v0", mark_action=True)
    assert "WideCatch-v0: 100 actions do not fit" in msg and "84 pixels wide" in msg and "--mark-action false" in msg
    validate(Config().replace(env="tests.catch_env:WideCatch-v0"), hw(2))  # without the mark it trains


def test_zero_collectors():
    assert "--num-collectors 0" in _error(num_collectors=0)


def test_fp16_without_cuda():
    assert "needs CUDA" in _error(amp_dtype="fp16")


def test_unknown_profile():
    with pytest.raises(ConfigError, match="unknown profile"):
        resolve_config({"profile": "turbo"}, hw(2))


def test_run_dir_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    assert "is a file" in _error(run_dir=str(f))


def test_cuda_device_without_cuda():
    assert "CUDA is not available" in _error(device="cuda")


def test_defaults_validate_on_this_machine():
    """What `python mario_rl_optimized.py` with no options trains here: Mario 1-1 with the Mario
    preset over this machine's profile, on the CPU without CUDA, compiled only where bf16 pays and a
    compiler is there, and nothing about it refused."""
    from pipeline.settings.profiles import autotuned_path
    from presets import load_preset

    res = resolve_config({})
    cfg, machine, profile = res.cfg, res.hw, res.profile
    assert cfg.env == "SuperMarioBros-1-1-v0"
    for key, value in load_preset("mario").items():
        if not (profile == "autotuned" and key in ("num_collectors", "envs_per_collector", "learner_threads")):
            assert cfg.get(key) == value, key
    assert profile == ("autotuned" if autotuned_path("mario").exists() else pick_profile(machine))
    if profile.startswith("cpu"):  # bf16 and the compiled loss only where they pay and can build
        assert cfg.learner.amp == machine.bf16_pays
        assert cfg.learner.compile == (machine.bf16_pays and machine.cpp_compiler)
        assert cfg.collectors.act_bf16 == machine.bf16_pays
    assert isinstance(validate(cfg, machine), list)


def test_config_script_prints_hardware_profile_and_config():
    out = subprocess.run([sys.executable, "config_optimized.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Hardware:" in out.stdout and "Profile:" in out.stdout and "replay_ratio" in out.stdout


def test_help_lists_every_option_on_one_line_with_the_value_mario_trains_with():
    """--help: each option one line (piped: whole), its value as the layers resolve it for the
    default game (Mario 1-1) on this machine, the preset named where it set it, and an ALE
    game's value beside it where the Atari preset differs."""
    out = subprocess.run([sys.executable, "mario_rl_optimized.py", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stderr == ""
    lines = out.stdout.splitlines()
    for name in FIELDS:
        assert len([line for line in lines if line.split()[:1] == ["--" + name.replace("_", "-")]]) == 1, name
    assert len(lines) < 150  # argparse's help ran to 487 lines

    def value(option):  # (value, what it does): the columns, two spaces or more apart
        line = next(line for line in lines if line.split()[:1] == [option])
        return tuple(re.split(r"\s{2,}", line[len(option) + 2:].strip(), maxsplit=1))
    assert value("--mario-actions")[0] == "right_run (Mario)"  # the Config default is 'simple'
    assert value("--gamma") == ("0.9 (Mario); Atari 0.99", "discount factor")
    assert value("--replay-ratio")[0] == "4.0; Atari 8.0"
    assert value("--total-steps")[0] == "2000000 (Mario); Atari 5000000"
    assert "in at least 19 of every 20 greedy games" in value("--stop-at-flag")[1]


def test_bad_input_stops_before_any_process_starts(tmp_path):
    out = subprocess.run([sys.executable, "mario_rl_optimized.py", "--env", "ALE/Pnog-v5", "--run-dir", str(tmp_path / "r")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Did you mean ALE/Pong-v5" in out.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("overrides,expected", [
    ({"total_steps": 0}, "--total-steps 0: must be a positive integer"),
    ({"envs_per_collector": -2}, "--envs-per-collector -2: must be a positive integer"),
    ({"learning_starts": -1}, "--learning-starts -1: must be 0 or more"),
    ({"gamma": 1.5}, "--gamma 1.5: must be in (0, 1]"),
    ({"reward_scale": 0.0, "clip_rewards": False}, "--reward-scale 0.0: must be positive"),
    ({"eval_epsilon": 1.5}, "--eval-epsilon 1.5: must be in [0, 1]"),
    ({"eval_interval": -1}, "--eval-interval -1: must be 0 or more"),
    ({"capture_video": True, "eval_interval": 0}, "--capture-video True: films the --eval-interval evaluations, and "
                                                  "--eval-interval is 0; add --eval-interval N"),
    ({"eps_end": 2.0}, "--eps-end 2.0: must be in [0, 1]"),
    ({"bootstrap_epsilon": 1.0}, "--bootstrap-epsilon 1.0: must be in [0, 1)"),
    ({"weight_average": 1.0}, "--weight-average 1.0: must be in [0, 1)"),
    ({"augment_shift": 20}, "--augment-shift 20: must be 0 (off) to 16 pixels"),
    ({"augment_shift": -1}, "--augment-shift -1: must be 0 (off) to 16 pixels"),
    ({"start_method": "threads"}, "--start-method 'threads': choose spawn, forkserver or fork"),
    ({"env": "CartPole-v1"}, "module:EnvId"),
    ({"env": "nosuchmodule:Foo-v0"}, "importing 'nosuchmodule' did not register that id"),
])
def test_bad_values_name_option_value_and_fix(overrides, expected):
    assert expected in _error(**overrides)


def test_profile_file_that_does_not_parse(tmp_path, monkeypatch):
    monkeypatch.setenv("DQN_PROFILE_DIR", str(tmp_path))
    bad = tmp_path / "autotuned-atari.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="autotuned-atari.json does not parse"):
        resolve_config({"profile": "autotuned", "env": "ALE/Pong-v5"}, hw(2))
    bad.write_text('{"overrides": {"batch_sise": 64}}')
    with pytest.raises(ConfigError, match=r"unknown fields \['batch_sise'\]"):
        resolve_config({"profile": "autotuned", "env": "ALE/Pong-v5"}, hw(2))
    bad.write_text('{"family": "mario", "overrides": {"num_collectors": 2}}')
    with pytest.raises(ConfigError, match="tuned on the mario family, not atari"):
        resolve_config({"profile": "autotuned", "env": "ALE/Pong-v5"}, hw(2))


def test_unwritable_run_dir(tmp_path, monkeypatch):
    # CI runs as root, for whom every directory is writable; pretend tmp_path is read-only.
    locked = tmp_path / "locked"
    locked.mkdir()
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if str(p) == str(locked) else real(p, m))
    msg = _error(run_dir=str(locked / "run"))
    assert f"cannot be written ({locked} is not writable" in msg


@pytest.mark.parametrize("bf16", [True, False])
def test_cpu_profiles_use_bf16_only_where_the_cpu_has_it(bf16):
    machine = replace(hw(2), cpu_bf16=bf16)
    res = resolve_config({}, machine)
    cfg, name = res.cfg, res.profile
    assert name == "cpu-small" and cfg.learner.amp is bf16
    forced = cfg.replace(amp=True)
    warned = any("without native bf16" in w for w in validate(forced, machine))
    assert warned is not bf16
    assert cfg.collectors.act_bf16 is bf16
    acting = [w for w in validate(cfg.replace(act_bf16=True), machine) if w.startswith("--act-bf16")]
    assert bool(acting) is not bf16 and all("use --act-bf16 false" in w for w in acting)


@pytest.mark.parametrize("speedup, amp", [(0.0, True), (2.5, True), (1.05, False), (0.7, False)])
def test_cpu_profiles_use_bf16_only_where_it_was_measured_faster(speedup, amp):
    # 0.0: not measured (the flag decides); an Intel Xeon with AVX-512 BF16 but no AMX ran a
    # bf16 step at 0.7x fp32's speed, an AMD EPYC Zen 5 at 2.5x.
    machine = replace(hw(2), cpu_bf16=True, cpu_bf16_speedup=speedup)
    cfg = resolve_config({}, machine).cfg
    assert cfg.learner.amp is amp
    assert cfg.collectors.act_bf16 is amp  # the collectors' forward passes follow the same measurement
    warned = any("--amp false trains faster" in w for w in validate(cfg.replace(amp=True), machine))
    assert warned is not amp
    warned = any("--act-bf16 false likely acts faster" in w for w in validate(cfg.replace(act_bf16=True), machine))
    assert warned is not amp


def test_bf16_speedup_is_measured_once_per_cpu_model(tmp_path, monkeypatch):
    from pipeline.engine import bf16_probe
    from pipeline.settings import hardware

    monkeypatch.setenv("DQN_PROFILE_DIR", str(tmp_path))
    monkeypatch.setattr(bf16_probe, "live_runs", lambda: [])
    calls = []
    monkeypatch.setattr(bf16_probe, "measure_bf16_speedup", lambda: calls.append(1) or 0.72)
    assert hardware.cached_bf16_speedup("cpu A") == 0.0  # resolving a config never measures
    speedup, line = bf16_probe.bf16_speedup("cpu A")
    assert speedup == 0.72 and "0.72x" in line and "fp32 chosen" in line and str(tmp_path) in line
    assert bf16_probe.bf16_speedup("cpu A") == (0.72, "")  # kept: no second measurement, nothing to log
    assert len(calls) == 1 and hardware.cached_bf16_speedup("cpu A") == 0.72
    assert bf16_probe.bf16_speedup("cpu B")[0] == 0.72 and len(calls) == 2
    (tmp_path / hardware.SPEEDUP_FILE).write_text("not json")
    assert hardware.cached_bf16_speedup("cpu A") == 0.0
    assert bf16_probe.bf16_speedup("cpu A")[0] == 0.72 and len(calls) == 3  # a broken file is measured anew


def test_bf16_speedup_is_kept_per_cpu_generation_not_per_model_name():
    from pipeline.settings.hardware import cpu_name

    zen4, zen5 = cpu_name("AMD EPYC", "family 25 model 17"), cpu_name("AMD EPYC", "family 26 model 2")
    assert zen4 != zen5 and "family 25 model 17" in zen4
    assert cpu_name("Apple M2", "") == "Apple M2"


def test_a_run_started_beside_a_probing_run_waits_for_its_figure(tmp_path, monkeypatch):
    import fcntl
    import threading

    from pipeline.engine import bf16_probe
    from pipeline.records.record import write_json
    from pipeline.settings import hardware

    monkeypatch.setenv("DQN_PROFILE_DIR", str(tmp_path))
    monkeypatch.setattr(bf16_probe, "live_runs", lambda: [])
    calls = []
    monkeypatch.setattr(bf16_probe, "measure_bf16_speedup", lambda: calls.append(1) or 9.0)
    path = tmp_path / hardware.SPEEDUP_FILE
    result = []
    with open(path.with_name(path.name + ".lock"), "a") as held:  # the first run, measuring
        fcntl.flock(held, fcntl.LOCK_EX)
        second = threading.Thread(target=lambda: result.append(bf16_probe.bf16_speedup("cpu A")))
        second.start()
        second.join(0.3)
        assert second.is_alive() and not result  # it waits rather than measure against the first
        write_json(path, {hardware.speedup_key("cpu A"): 1.56})
    second.join(10)
    assert result == [(1.56, "")] and calls == []


def test_bf16_probe_is_not_run_while_other_runs_hold_the_cores(tmp_path, monkeypatch):
    from pipeline.engine import bf16_probe
    from pipeline.settings import hardware

    monkeypatch.setenv("DQN_PROFILE_DIR", str(tmp_path))
    monkeypatch.setattr(bf16_probe, "live_runs", lambda: ["123-abcd"])
    monkeypatch.setattr(bf16_probe, "measure_bf16_speedup", lambda: pytest.fail("measured on a busy machine"))
    speedup, line = bf16_probe.bf16_speedup("cpu A")
    assert speedup == 0.0 and "other training runs" in line and "quiet machine" in line
    assert hardware.cached_bf16_speedup("cpu A") == 0.0  # nothing kept: the next quiet start measures


def test_bf16_probe_is_not_kept_when_other_work_used_the_cores_while_it_measured(tmp_path, monkeypatch):
    from pipeline.engine import bf16_probe
    from pipeline.settings import hardware

    monkeypatch.setenv("DQN_PROFILE_DIR", str(tmp_path))
    monkeypatch.setattr(bf16_probe, "live_runs", lambda: [])  # a run starting beside it: not yet seen
    for others_busy, kept in ((1.0, False), (0.1, True)):  # cores other processes used over the 1 s
        readings = iter([(100.0, 10.0), (100.0 + 1.0 + others_busy, 11.0)])  # (all cores busy, ours)
        monkeypatch.setattr(bf16_probe, "_busy_seconds", lambda: next(readings))
        clock = iter([0.0, 1.0])  # the measurement took one second
        monkeypatch.setattr(bf16_probe, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
        monkeypatch.setattr(bf16_probe, "measure_bf16_speedup", lambda: 0.91)
        speedup, line = bf16_probe.bf16_speedup("cpu A")
        assert (hardware.cached_bf16_speedup("cpu A") == 0.91) is kept
        if kept:
            assert speedup == 0.91 and "kept in" in line
        else:
            assert speedup == 0.0 and "1.0 cores busy" in line and "quiet machine" in line


def test_the_probes_readings_count_this_processs_own_cpu_time():
    import time

    from pipeline.engine import bf16_probe

    busy0, own0 = bf16_probe._busy_seconds()
    t0 = time.process_time()
    while time.process_time() - t0 < 0.6:  # 0.6 s of this process's CPU time, however loaded the machine
        pass
    busy1, own1 = bf16_probe._busy_seconds()
    assert 0.4 < own1 - own0 < 0.9  # our own 0.6 s, at the kernel's 10 ms ticks
    assert busy1 - busy0 > (own1 - own0) - 0.05  # and the machine's busy time holds it


def test_bf16_speedup_probe_times_both_precisions():
    from pipeline.engine.bf16_probe import measure_bf16_speedup

    assert 0.05 < measure_bf16_speedup(steps=1) < 20


def test_machine_without_store_ordering_is_refused_before_anything_starts(monkeypatch):
    import platform

    monkeypatch.setattr(platform, "machine", lambda: "arm64")
    msg = _error()
    assert "arm64" in msg and "x86-64" in msg


def test_collectors_that_cannot_fit_in_memory_are_refused_with_the_largest_count():
    msg = _error(env="SuperMarioBros-1-1-v0", num_collectors=64)
    assert "--num-collectors 64" in msg and "GiB" in msg and "at most 56 fit" in msg and "1 suit 2 cores" in msg


def test_dqn_cores_tells_the_detection_a_core_count(monkeypatch):
    """DQN_CORES=16: the settings (and the tests) of a 16-core machine on a smaller one; a count
    that is not one is refused in one line."""
    from pipeline.settings.hardware import CORES_ENV, detect_cores, detect_hardware

    monkeypatch.setenv(CORES_ENV, "16")
    machine = detect_hardware()
    assert detect_cores() == machine.cores == 16
    if not machine.cuda:
        res = resolve_config({"env": "ALE/Pong-v5"}, machine)
        assert res.profile == "cpu-large" and res.cfg.collectors.num_collectors == 7
    for bad in ("0", "-2", "many", "1.5"):
        monkeypatch.setenv(CORES_ENV, bad)
        with pytest.raises(ConfigError, match=f"DQN_CORES='{bad}': give a core count"):
            detect_cores()
    monkeypatch.delenv(CORES_ENV)
    assert detect_cores() == len(os.sched_getaffinity(0))


def test_more_collectors_than_cores_warns_with_a_count():
    warnings = validate(Config().replace(num_collectors=3, buffer_size=10_000), hw(2))
    assert any("--num-collectors 1 suits this machine" in w for w in warnings)
    assert not any("num-collectors" in w for w in validate(Config().replace(num_collectors=1), hw(2)))


def test_score_stop_settings_are_checked():
    assert "only Mario does" in _error(env="ALE/Pong-v5", score_metric="distance")
    assert "--time-limit -1" in _error(time_limit=-1.0)
    cfg = resolve_config({"target_score": 18.0, "time_limit": 45.0}, hw(2)).cfg
    assert cfg.run.target_score == 18.0 and cfg.run.time_limit == 45.0 and validate(cfg, hw(2)) == []


def test_cpu_small_learner_threads_leave_mario_its_collector_core():
    pong = resolve_config({"env": "ALE/Pong-v5"}, hw(2)).cfg
    mario = resolve_config({}, hw(2)).cfg  # Mario 1-1 is the default game
    assert pong.learner.learner_threads == 2 and mario.learner.learner_threads == 1
    assert resolve_config({"learner_threads": 2}, hw(2)).cfg.learner.learner_threads == 2  # an explicit option wins
    # Mario's emulator-bound collector steps its envs on two threads; Pong's learner-bound one on one
    assert mario.collectors.env_threads == 2 and pong.collectors.env_threads == 1
    assert resolve_config({}, hw(1)).cfg.collectors.env_threads == 1
    assert resolve_config({"env_threads": 1}, hw(2)).cfg.collectors.env_threads == 1


def test_choices_live_in_the_fields_and_validation_reads_them():
    assert FIELDS["mario_actions"][1].metadata["choices"] == ("right_only", "simple", "complex", "right_run",
                                                                   "right_run_wait")
    for name, value in [("model_arch", "resnet"), ("mario_actions", "left_only"), ("amp_dtype", "fp8")]:
        choices = FIELDS[name][1].metadata["choices"]
        with pytest.raises(ConfigError, match=f"choose {', '.join(choices[:-1])} or {choices[-1]}"):
            validate(Config().replace(**{name: value}), hw(2))


def test_a_reward_scale_under_clipping_is_a_warning():
    warnings = validate(Config().replace(reward_scale=0.5), hw(2))  # clip_rewards is on by default
    assert any("--reward-scale 0.5 has no effect while --clip-rewards is on" in w for w in warnings)
    mario = resolve_config({"clip_rewards": True}, hw(2)).cfg  # over the Mario preset's scale
    assert mario.env_options.reward_scale == 0.1 and any("--reward-scale" in w for w in validate(mario, hw(2)))


def test_learning_starts_0_is_accepted_where_the_collectors_head_start_fills_the_first_batch():
    """The learner waits for the first batch (tests/test_learner.py); --learning-starts 0 is
    refused only where collectors would stop before every stream holds n_step + 1 records."""
    assert isinstance(validate(Config().replace(learning_starts=0), hw(2)), list)
    assert isinstance(validate(Config().replace(learning_starts=0, envs_per_collector=256, buffer_size=20_000),
                               hw(2)), list)
    msg = _error(learning_starts=0, envs_per_collector=300, n_step=5, buffer_size=20_000)
    assert msg.startswith("--learning-starts 0: is too small for 300 env streams and --n-step 5") and \
        "use --learning-starts 600 or more" in msg, msg
    assert isinstance(validate(Config().replace(learning_starts=600, envs_per_collector=300, n_step=5,
                                                buffer_size=20_000), hw(2)), list)


def test_compile_without_a_cpp_compiler_is_refused_before_anything_starts():
    """--compile on a CPU learner needs a C++ compiler for inductor's code generation: without one
    it used to fail at update 2,000 with a raw traceback (and every --resume after it at once)."""
    import dataclasses

    from pipeline.settings.check import validate

    cfg = Config.of(env="ALE/Pong-v5", compile=True)
    validate(cfg, dataclasses.replace(hw(), cpp_compiler=True))
    with pytest.raises(ConfigError, match=r"--compile True: .*C\+\+ compiler.*--compile false"):
        validate(cfg, dataclasses.replace(hw(), cpp_compiler=False))
    validate(cfg, dataclasses.replace(hw(4, 16, True, 6), cpp_compiler=False))  # CUDA: triton, no C++ compiler
    out = subprocess.run([sys.executable, "mario_rl_optimized.py", "--env", "tests.catch_env:Catch-v0",
                          "--compile", "true", "--run-dir", "/nonexistent/never-made"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={**os.environ, "CXX": "/nonexistent/c++"})
    assert out.returncode == 2 and "C++ compiler" in out.stderr and "Traceback" not in out.stderr, out.stderr
