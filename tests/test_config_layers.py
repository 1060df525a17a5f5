"""Config layers: defaults, the game family's preset, the hardware profile, a resumed run's
config.json, --config FILE, then flags; each value knows the layer that set it."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from config_optimized import Config, ConfigError
from pipeline.settings.layers import read_config_file, resolve_config
from presets import family_of, load_preset
from tests.test_config import hw

ROOT = Path(__file__).resolve().parent.parent
PONG = "ALE/Pong-v5"


def test_each_layer_overrides_the_one_before_and_is_named(tmp_path):
    assert family_of(PONG) == "atari" and family_of("SuperMarioBros-2-1-v0") == "mario"
    mario = resolve_config({}, hw(2))  # the default game
    assert mario.cfg.run.score_metric == load_preset("mario")["score_metric"] == "distance"
    assert mario.sources["score_metric"] == "preset mario"
    assert mario.sources["channels_last"] == "profile cpu-small" and mario.sources["lr"] == "default"
    pong = resolve_config({"env": PONG}, hw(2))
    assert pong.cfg.run.score_metric == "return" and pong.sources["score_metric"] == "default"

    f = tmp_path / "mine.toml"
    f.write_text('env = "ALE/Pong-v5"\nlr = 2e-4\nnum_collectors = 1\nbatch_size = 64\n')
    res = resolve_config({"config": str(f), "batch_size": 128}, hw(2))
    assert res.cfg.env == PONG and res.cfg.learner.lr == 2e-4 and res.cfg.learner.batch_size == 128
    assert res.sources["lr"] == f"--config {f}" and res.sources["num_collectors"] == f"--config {f}"
    assert res.sources["batch_size"] == "command line"
    assert res.cfg.run.score_metric == "return"  # the file's game picks the preset: Atari, not Mario


def test_config_file_mistakes_are_named(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("batch_sise = 64\n")
    with pytest.raises(ConfigError, match="unknown field 'batch_sise'; did you mean 'batch_size'"):
        read_config_file(f)
    f.write_text('batch_size = "64"\n')
    with pytest.raises(ConfigError, match="batch_size = '64' should be int"):
        read_config_file(f)
    f.write_text("lr = 1\nprioritized = true\ntarget_score = 18\n")  # ints pass as floats
    got = read_config_file(f)
    assert got == {"lr": 1.0, "prioritized": True, "target_score": 18.0} and type(got["lr"]) is float
    f.write_text('run_dir = "runs/x"\n')
    with pytest.raises(ConfigError, match="run_dir says where a run writes.*--run-dir on the command line"):
        read_config_file(f)
    f.write_text("lr = [")
    with pytest.raises(ConfigError, match="does not parse"):
        read_config_file(f)
    with pytest.raises(ConfigError, match="no such file"):
        read_config_file(tmp_path / "none.toml")
    y = tmp_path / "c.yaml"
    y.write_text("lr: 1")
    with pytest.raises(ConfigError, match="give a .toml or .json file"):
        read_config_file(y)


def test_a_run_record_reproduces_its_run(tmp_path):

    ran = Config.of(env=PONG, lr=3e-4, batch_size=64, run_dir="runs/x", resume="latest", learner_threads=1)
    rec = tmp_path / "config.json"
    rec.write_text(json.dumps({"config": ran.flat(), "profile": "cpu-small"}))
    res = resolve_config({"config": str(rec)}, hw(2))
    assert (res.cfg.env, res.cfg.learner.lr, res.cfg.learner.batch_size, res.cfg.learner.learner_threads) == (PONG, 3e-4, 64, 1)
    assert res.cfg.run.run_dir == "" and res.cfg.run.resume == ""  # where it ran is not a setting
    # a record of another version: its fields this version lacks are left out, not refused
    rec.write_text(json.dumps({"config": {**ran.flat(), "retired_knob": 3}}))
    assert resolve_config({"config": str(rec)}, hw(2)).cfg.learner.lr == 3e-4


def test_a_preset_with_a_typo_names_its_file(monkeypatch):
    from pipeline.settings import layers as config_layers

    monkeypatch.setattr(config_layers, "load_preset", lambda family: {"n_stepp": 5})
    with pytest.raises(ConfigError, match=r"preset .*atari.toml: 'n_stepp' is not a setting"):
        resolve_config({"env": PONG}, hw(2))
    monkeypatch.setattr(config_layers, "load_preset", lambda family: {"n_step": "5"})
    with pytest.raises(ConfigError, match="n_step = '5' should be int"):
        resolve_config({"env": PONG}, hw(2))


def saved_run(tmp_path, **over) -> Path:

    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"x")
    cfg = Config.of(**{"env": PONG, "batch_size": 64, "lr": 3e-4, "run_dir": str(run), **over})
    (run / "config.json").write_text(json.dumps({"config": cfg.flat()}))
    return run


def test_resume_takes_the_saved_config_and_logs_each_change(tmp_path):
    run = saved_run(tmp_path)
    same = resolve_config({"resume": str(run)}, hw(2))
    assert same.cfg.env == PONG and same.cfg.learner.batch_size == 64 and same.cfg.learner.lr == 3e-4
    assert same.changes == [] and same.sources["lr"] == f"resumed {run / 'config.json'}"
    changed = resolve_config({"resume": str(run), "lr": 1e-4, "total_steps": 9}, hw(2))
    assert changed.cfg.learner.lr == 1e-4 and changed.cfg.learner.batch_size == 64
    assert sorted(changed.changes) == ["--lr 0.0003 -> 0.0001 (command line)",
                                       "--total-steps 5000000 -> 9 (command line)"]


@pytest.mark.parametrize("field,value", [("env", "ALE/Breakout-v5"), ("frame_stack", 2), ("model_arch", "nature")])
def test_resume_refuses_what_cannot_change(tmp_path, field, value):
    run = saved_run(tmp_path)
    with pytest.raises(ConfigError, match=rf"--{field.replace('_', '-')} .*trained with --{field.replace('_', '-')} "
                                          rf".*cannot change"):
        resolve_config({"resume": str(run), field: value}, hw(2))


def test_resume_drops_saved_settings_this_version_cannot_take(tmp_path):
    run = saved_run(tmp_path)
    rec = json.loads((run / "config.json").read_text())
    rec["config"].update(retired_knob=1, batch_size="64")
    (run / "config.json").write_text(json.dumps(rec))
    res = resolve_config({"resume": str(run), "profile": "cpu-small"}, hw(2))
    assert res.cfg.learner.batch_size == 32 and res.cfg.learner.lr == 3e-4
    assert any("retired_knob = 1 dropped" in n for n in res.notes)
    assert any("batch_size = '64' dropped" in n for n in res.notes)
    assert any("--profile cpu-small sets nothing on a resumed run" in n for n in res.notes)
    (run / "config.json").write_text('{"config": null}')
    with pytest.raises(ConfigError, match="is not a run record"):
        resolve_config({"resume": str(run)}, hw(2))


def test_resume_of_a_run_without_a_record(tmp_path):
    run = saved_run(tmp_path)
    (run / "config.json").unlink()
    res = resolve_config({"resume": str(run), "env": PONG}, hw(2))
    assert res.changes is None and res.cfg.learner.batch_size == 32  # from this command line's layers


def test_config_shows_the_layer_of_each_value(tmp_path):
    f = tmp_path / "c.json"
    f.write_text('{"lr": 0.0002}')
    out = subprocess.run([sys.executable, "config_optimized.py", "--env", PONG, "--config", str(f), "--seed", "7"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = {ln.split("=")[0].strip(): ln for ln in out.stdout.splitlines() if " = " in ln}
    assert lines["lr"].rstrip().endswith(f"--config {f}") and lines["seed"].rstrip().endswith("command line")
    profile = next(ln for ln in out.stdout.splitlines() if ln.startswith("Profile:")).split()[1]
    assert lines["buffer_size"].rstrip().endswith(f"profile {profile}")
    assert lines["gamma"].rstrip().endswith("default")
    assert "Preset:   atari" in out.stdout


def test_a_config_file_may_group_fields_by_part(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(f'env = "{PONG}"\n[learner]\nlr = 3e-4\n[replay]\nn_step = 5\n')
    res = resolve_config({"config": str(f)}, hw(2))
    assert (res.cfg.env, res.cfg.learner.lr, res.cfg.replay.n_step) == (PONG, 3e-4, 5)
    assert res.sources["lr"] == res.sources["n_step"] == f"--config {f}"
    f.write_text("[learner]\nlrr = 3e-4\n")
    with pytest.raises(ConfigError, match="unknown field 'lrr'; did you mean 'lr'"):
        read_config_file(f)


def test_a_renamed_field_keeps_its_old_flag_file_key_and_saved_value(tmp_path):
    from pipeline.settings.cli import parse_args

    assert parse_args(["--processor-log-interval", "3"]).consolidation_log_interval == 3.0
    f = tmp_path / "old.toml"
    f.write_text("processor_log_interval = 4.0\n")
    assert read_config_file(f) == {"consolidation_log_interval": 4.0}
    run = saved_run(tmp_path)
    rec = json.loads((run / "config.json").read_text())
    del rec["config"]["consolidation_log_interval"]
    rec["config"]["processor_log_interval"] = 5.0  # a run recorded before the rename
    (run / "config.json").write_text(json.dumps(rec))
    res = resolve_config({"resume": str(run)}, hw(2))
    assert res.cfg.run.consolidation_log_interval == 5.0 and res.notes == []


def test_resuming_a_run_recorded_before_a_setting_existed_trains_what_it_trained(tmp_path):
    """A record without bn_targets and quantiles (runs made before they existed trained DQN on
    running-statistics targets): the resume keeps that, not the Atari preset's QR-DQN on batch
    targets, and says so for each; a flag still changes what it names."""
    run = saved_run(tmp_path)
    rec = json.loads((run / "config.json").read_text())
    del rec["config"]["bn_targets"], rec["config"]["quantiles"]
    (run / "config.json").write_text(json.dumps(rec))
    assert load_preset("atari")["bn_targets"] == "batch" and load_preset("atari")["quantiles"] > 0
    res = resolve_config({"resume": str(run)}, hw(2))
    assert res.cfg.learner.bn_targets == "running" and res.cfg.learner.quantiles == 0
    assert res.changes == []
    assert any("--bn-targets 'running': the run was recorded before this setting existed" in n for n in res.notes)
    assert any("--quantiles 0: the run was recorded before" in n for n in res.notes)
    changed = resolve_config({"resume": str(run), "bn_targets": "batch"}, hw(2))
    assert changed.changes == ["--bn-targets 'running' -> 'batch' (command line)"]


def test_a_mario_run_recorded_when_mario_ignored_noop_starts_resumes_without_them(tmp_path):
    """Mario honoured --noop-max and --sticky-actions only from commit 12057b4 on: a record made
    before it that says noop_max 30 trained without no-op starts, and resumes (and plays) so."""
    from pipeline.settings.migrate import MARIO_IGNORED_UNTIL, as_trained, record_predates

    ref = MARIO_IGNORED_UNTIL[0]
    before = subprocess.run(["git", "rev-parse", f"{ref}^"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    after = subprocess.run(["git", "rev-parse", ref], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if not before:
        pytest.skip("this checkout has no history to tell the commits apart")
    assert record_predates(before, ref) is True and record_predates(after, ref) is False
    assert record_predates("not-a-commit", ref) is None
    flat = Config.of(env="SuperMarioBros-1-1-v0", noop_max=30).flat()
    run = tmp_path / "mario"
    run.mkdir()
    (run / "checkpoint.pt").write_bytes(b"x")
    cfg = Config.of(env="SuperMarioBros-1-1-v0", noop_max=30, run_dir=str(run))
    (run / "config.json").write_text(json.dumps({"config": cfg.flat(), "git_commit": before}))
    res = resolve_config({"resume": str(run)}, hw(2))
    assert res.cfg.env_options.noop_max == 0
    assert any("--noop-max 0: the record says 30, which Mario ignored" in n for n in res.notes)
    (run / "config.json").write_text(json.dumps({"config": cfg.flat(), "git_commit": after}))
    assert resolve_config({"resume": str(run)}, hw(2)).cfg.env_options.noop_max == 30
    assert as_trained(flat, before, "ALE/Pong-v5")[0] == {}  # Atari always honoured them


def test_a_renamed_field_reads_under_its_old_name_everywhere(tmp_path):
    """queue_capacity is ring_capacity now: the old flag, a config file and a run record keep working."""
    from pipeline.settings.cli import parse_args

    assert parse_args(["--queue-capacity", "512"]).ring_capacity == 512
    f = tmp_path / "old.toml"
    f.write_text("queue_capacity = 1024\n")
    assert resolve_config({"config": str(f)}, hw(2)).cfg.collectors.ring_capacity == 1024
