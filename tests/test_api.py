"""The Python API (``train(**overrides)``) and the ``fast-dqn`` console script."""
import json
import subprocess
import sys
import uuid

import pytest

from config_optimized import ConfigError
from mario_rl_optimized import cli, train
from tests.proc_utils import ROOT, env_for, marked_processes


def test_cli_commands(capsys, tmp_path):
    assert cli([]) == 2 and "commands:" in capsys.readouterr().out
    assert cli(["--help"]) == 0
    assert cli(["fly"]) == 2 and "unknown command 'fly'" in capsys.readouterr().err
    assert cli(["eval"]) == 2 and "needs a run folder" in capsys.readouterr().err
    assert cli(["config", "--env", "ALE/Pong-v5"]) == 0 and "Preset:   atari" in capsys.readouterr().out
    assert cli(["eval", str(tmp_path / "none")]) == 2 and "does not exist" in capsys.readouterr().err
    assert cli(["train", "--env", "ALE/Pnog-v5"]) == 2 and "Did you mean" in capsys.readouterr().err


def test_train_refuses_unknown_settings_before_starting():
    with pytest.raises(ConfigError, match=r"unknown settings \['batch'\]"):
        train(batch=64)
    with pytest.raises(ConfigError, match="--gamma 2.0"):
        train(env="ALE/Pong-v5", gamma=2.0)


def test_console_script_is_declared():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"fast-dqn": "mario_rl_optimized:console"}  # cli, ended by pipeline.quick_exit


@pytest.mark.slow
def test_train_returns_the_run_from_python(tmp_path):
    mark = uuid.uuid4().hex
    code = (
        "import json\n"
        "from mario_rl_optimized import train\n"
        f"r = train(env='tests.catch_env:Catch-v0', run_dir={str(tmp_path / 'run')!r}, total_steps=2000,\n"
        "          learning_starts=500, buffer_size=20000, envs_per_collector=4, epoch_steps=1000, lr=1e-3,\n"
        "          replay_ratio=1)\n"  # the run it returns, not what it learned: an eighth of the preset's updates
        "print('RESULT', json.dumps({'run_dir': str(r.run_dir), 'checkpoint': str(r.checkpoint),\n"
        "      'steps': r.metrics['agent_steps'], 'stop': r.stop_reason, 'code': r.exit_code}))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env_for(mark), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert res["run_dir"] == str(tmp_path / "run") and res["checkpoint"] == str(tmp_path / "run" / "checkpoint.pt")
    assert res["steps"] >= 2000 and res["stop"] == "total_steps" and res["code"] == 0
    assert not marked_processes(mark)
