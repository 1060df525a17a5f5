"""Sharing a run on the Hugging Face Hub, offline: the package is a pure function of the run, the
card's metadata is read back by huggingface_hub's own loader, and the upload and download calls
are simulated."""
import json
from pathlib import Path

import huggingface_hub
import pytest
import torch

from config_optimized import Config
from mario_rl_optimized import main
from pipeline.records.hub import HubError, fetch, model_card, package_run, push
from tests.run_folders import CATCH, make_run

EVALUATION = {"returns": [1.0, -1.0, 1.0, 1.0], "lengths": [9, 9, 9, 9], "distances": [], "flags": [], "epsilon": 0.05}


def test_package_holds_the_run_and_a_card_the_hub_reads(tmp_path):
    run = make_run(tmp_path)
    video = tmp_path / "v.mp4"
    video.write_bytes(b"mp4")
    out = package_run(run, "someone/catch-dqn", tmp_path / "pkg", {**EVALUATION, "checkpoint": str(run)}, video)
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "checkpoint.pt", "config.json", "eval.json",
                                                     "learning_curve.png", "replay.mp4"]
    assert (out / "checkpoint.pt").read_bytes() == (run / "checkpoint.pt").read_bytes()
    assert json.loads((out / "eval.json").read_text())["checkpoint"] == "checkpoint.pt"
    card = huggingface_hub.ModelCard.load(out / "README.md")
    assert card.data.library_name == "fast-dqn" and CATCH in card.data.tags
    result = card.data.eval_results[0]
    assert result.metric_type == "mean_reward" and result.metric_value == "0.50 +/- 0.87"
    assert result.dataset_type == CATCH and result.task_type == "reinforcement-learning"
    assert "--eval hf://someone/catch-dqn" in card.text and "| n_step | 3 |" in card.text


def test_package_refusals(tmp_path):
    run = make_run(tmp_path)
    with pytest.raises(HubError, match="give a Hub repository as user/name"):
        package_run(run, "no-slash", tmp_path / "p", EVALUATION)
    with pytest.raises(HubError, match="holds no games"):
        package_run(run, "a/b", tmp_path / "p", {**EVALUATION, "returns": []})
    (run / "config.json").unlink()
    with pytest.raises(HubError, match="has no config.json"):
        package_run(run, "a/b", tmp_path / "p", EVALUATION)


def test_upload_and_download_calls_and_eval_from_the_hub(tmp_path, monkeypatch, capsys):
    run = make_run(tmp_path)
    folder = package_run(run, "someone/catch-dqn", tmp_path / "pkg", EVALUATION)
    calls = []
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo",
                        lambda self, repo_id, **kw: calls.append(("create", repo_id, kw)))
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder",
                        lambda self, **kw: calls.append(("upload", kw["repo_id"], kw["folder_path"])))
    assert push(folder, "someone/catch-dqn") == "https://huggingface.co/someone/catch-dqn"
    assert calls[0][:2] == ("create", "someone/catch-dqn") and calls[0][2]["exist_ok"]
    assert calls[1] == ("upload", "someone/catch-dqn", str(folder))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, **kw: str(folder))
    assert fetch("hf://someone/catch-dqn") == folder / "checkpoint.pt"
    monkeypatch.chdir(tmp_path)
    assert main(["--eval", "hf://someone/catch-dqn", "--episodes", "2"]) == 0
    assert "[EVAL] tests.catch_env:Catch-v0: 2 episodes" in capsys.readouterr().out
    assert json.loads((tmp_path / "runs/hub/someone__catch-dqn/eval.json").read_text())["episodes"] == 2

    def offline(**kw):
        raise OSError("no network")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(HubError, match="downloading someone/catch-dqn failed .*no network"):
        fetch("hf://someone/catch-dqn")


def test_push_to_hub_evaluates_packages_and_uploads_a_run(tmp_path, monkeypatch, capsys):
    run = make_run(tmp_path)
    uploaded = {}

    def upload(self, **kw):
        uploaded.update({p.name: p.read_bytes() for p in Path(kw["folder_path"]).iterdir()})
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda self, repo_id, **kw: None)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload)
    assert main(["--push-to-hub", "someone/catch-dqn", "--run-dir", str(run), "--episodes", "2"]) == 0
    assert "shared at https://huggingface.co/someone/catch-dqn" in capsys.readouterr().out
    assert json.loads((run / "eval.json").read_text())["episodes"] == 2  # evaluated first: it had no eval.json
    assert {"README.md", "checkpoint.pt", "config.json", "eval.json", "replay.mp4"} <= set(uploaded)
    assert b"mean_reward" in uploaded["README.md"]


def test_card_for_mario_reports_distance_and_flag():
    rec = {"config": Config().flat(), "profile": "cpu-small"}
    card = model_card("a/b", rec, {"returns": [100.0], "distances": [3161.0], "flags": [True], "epsilon": 0.0})
    assert "Mean distance 3161; flag reached 1/1" in card and '"SuperMarioBros-1-1-v0"' in card


def test_an_evaluation_belongs_to_the_weights_it_played_not_to_file_times(tmp_path):
    """eval.json names the weights it played by their digest: weights replaced after it (as a
    periodic evaluation's os.replace does, keeping the candidate's older mtime) make it stale
    whatever the file times say, and weights left alone keep it current."""
    import os

    from pipeline.records.hub import current_evaluation

    run = make_run(tmp_path)
    assert main(["--eval", str(run), "--episodes", "2"]) == 0
    evaluation = json.loads((run / "eval.json").read_text())
    assert len(evaluation["weights_sha256"]) == 64
    assert current_evaluation(run) == evaluation
    os.utime(run / "eval.json", (1, 1))  # file times say nothing about which weights were played
    assert current_evaluation(run) == evaluation
    state = torch.load(run / "checkpoint.pt", weights_only=True)
    state["learner"]["model"] = {k: v + 1 if v.is_floating_point() else v for k, v in state["learner"]["model"].items()}
    torch.save(state, run / "checkpoint.pt")
    os.utime(run / "checkpoint.pt", (0, 0))  # other weights, and an older mtime than eval.json
    assert current_evaluation(run) is None


def test_a_second_eval_of_the_same_run_at_once_is_refused(tmp_path, capsys):
    """Two --eval runs writing one eval.json: the second is refused before it plays, naming why."""
    import fcntl
    import os

    from pipeline.evaluation.evaluate import eval_lock

    run = make_run(tmp_path)
    with eval_lock(run):
        assert main(["--eval", str(run), "--episodes", "1"]) == 2
    assert "another --eval is writing" in capsys.readouterr().err
    fd = os.open(run, os.O_RDONLY)  # the lock is the folder's flock, released with the evaluation
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    assert main(["--eval", str(run), "--episodes", "1"]) == 0
