"""The Python API (``train(**overrides)``, ``load(run)``) and the ``fast-dqn`` console script."""
import json
import subprocess
import sys
import uuid

import numpy as np
import pytest
import torch

from config_optimized import ConfigError
from mario_rl_optimized import cli, train
from tests.proc_utils import ROOT, env_for, marked_processes
from tests.run_folders import CATCH


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


def _play(agent, seed, epsilon=0.0):
    """One whole game of ``agent.make_env()`` acted by ``agent.act``: its actions and return."""
    env = agent.make_env()
    obs, _ = env.reset(seed=seed)
    actions, ret, done = [], 0.0, False
    while not done:
        action = agent.act(obs, epsilon)
        actions.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        ret, done = ret + reward, terminated or truncated
    env.close()
    return actions, ret


def test_load_gives_an_agent_that_acts_on_the_envs_observations(tmp_path):
    """load(RUN) takes the weights --eval RUN plays (best_eval.pt first), and act() on the
    observations of agent.make_env() plays the games --eval plays: same actions, same returns."""
    import hashlib

    from mario_rl_optimized import load
    from pipeline.evaluation.evaluate import evaluate
    from tests.run_folders import make_run

    run = make_run(tmp_path)
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    bias = state["learner"]["model"]["head.q.2.bias"]
    state["learner"]["model"]["head.q.2.bias"] = bias + torch.tensor([0.0, 0.0, 5.0])  # these weights always go right
    torch.save(state, run / "best_eval.pt")
    state["learner"]["model"]["head.q.2.bias"] = bias + torch.tensor([5.0, 0.0, 0.0])  # and the last ones left
    torch.save(state, run / "checkpoint.pt")
    agent = load(run)
    assert agent.path == run / "best_eval.pt" and agent.env_id == CATCH and agent.n_actions == 3
    assert agent.describe().startswith(f"{run / 'best_eval.pt'}: ")
    for seed in (0, 1):
        actions, ret = _play(agent, seed)
        played = evaluate(run, 1, seed=seed, log=lambda *_: None)
        assert actions == [2] * 6 and played.returns == [ret] and played.lengths == [len(actions)]
        assert played.action_digests == [hashlib.sha1(bytes(actions)).hexdigest()]
    assert load(run / "checkpoint.pt").act(agent.make_env().reset(seed=0)[0]) == 0  # a file: that file's weights


def test_an_agent_acts_on_a_batch_explores_at_epsilon_and_refuses_what_is_not_an_observation(tmp_path):
    from mario_rl_optimized import load
    from tests.run_folders import make_run

    agent = load(make_run(tmp_path), seed=7)
    obs, _ = agent.make_env().reset(seed=0)
    greedy = agent.act(obs)
    assert isinstance(greedy, int) and agent.predict(obs) == (greedy, None)
    batch = np.stack([obs] * 5)
    assert agent.act(batch).tolist() == [greedy] * 5 and agent.q_values(batch).shape == (5, 3)
    random = [agent.act(obs, epsilon=1.0) for _ in range(60)]
    assert set(random) == {0, 1, 2}  # uniform over the three actions
    again = load(agent.path, seed=7)
    assert [again.act(obs, epsilon=1.0) for _ in range(60)] == random  # seeded
    with pytest.raises(ValueError, match=r"acts on uint8 \[4, 84, 84\] frame stacks"):
        agent.act(obs[0])
    with pytest.raises(ValueError, match="acts on uint8"):
        agent.act(obs.astype(np.float32))
    with pytest.raises(ValueError, match=r"epsilon 2: must be in \[0, 1\]"):
        agent.act(obs, epsilon=2)


def test_load_names_what_it_cannot_load(tmp_path):
    from mario_rl_optimized import load
    from pipeline.records.checkpoint import CheckpointError

    with pytest.raises(CheckpointError, match=f"checkpoint {tmp_path / 'none'} does not exist; pass a .pt file or a run directory"):
        load(tmp_path / "none")
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="bad.pt is truncated or corrupt"):
        load(tmp_path / "bad.pt")


def test_load_plays_a_shared_agent_from_the_hub(tmp_path, monkeypatch):
    """hf://user/repo: downloaded with huggingface_hub (its download simulated here, offline)."""
    import huggingface_hub

    from mario_rl_optimized import load
    from pipeline.records.hub import package_run
    from tests.run_folders import make_run

    run = make_run(tmp_path)
    folder = package_run(run, "someone/catch-dqn", tmp_path / "pkg", {"returns": [1.0], "checkpoint": str(run)})
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: str(folder))
    agent = load("hf://someone/catch-dqn")
    assert agent.path == folder / "checkpoint.pt" and agent.env_id == CATCH
    assert agent.act(agent.make_env().reset(seed=0)[0]) in (0, 1, 2)


def test_the_load_example_in_usage_md_runs_as_written(tmp_path, capsys):
    """docs/usage.md's load() example, run as a user pastes it (on a run folder of catch)."""
    import re

    from tests.run_folders import make_run

    usage = (ROOT / "docs" / "usage.md").read_text()
    example = next(block for block in re.findall(r"```python\n(.*?)```", usage, re.S) if "load(" in block)
    assert '"runs/pong"' in example
    run = make_run(tmp_path)
    exec(example.replace('"runs/pong"', repr(str(run))), {})
    assert capsys.readouterr().out.startswith(f"{run / 'checkpoint.pt'}: the run's last weights")
