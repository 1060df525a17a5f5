"""Runs users can trust: each run in its own folder, no run writing into another's without
--resume or --overwrite, config.json recording what ran, best.pt kept, ETA on the log line."""
import json
import os
import shutil
import time
import uuid
from pathlib import Path

import pytest
import torch

from config_optimized import RESUME_HERE, Config, ConfigError
from pipeline.records.run_folder import latest_run, resolve_run_dir
from pipeline.settings.hardware import Hardware
from pipeline.settings.profiles import pick_profile
from tests.proc_utils import CATCH, check_clean, run


def make_run(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)  # a new run's folder is made as it is named
    (folder / "checkpoint.pt").write_bytes(b"x")
    return folder


def test_a_new_run_gets_a_folder_of_its_own(tmp_path):
    cfg = resolve_run_dir(Config.of(env="ALE/Pong-v5", seed=3), now=0, root=tmp_path)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(0))
    assert Path(cfg.run.run_dir).parent == tmp_path and Path(cfg.run.run_dir).name == f"ALE-Pong-v5__3__{stamp}"
    make_run(Path(cfg.run.run_dir))
    again = resolve_run_dir(Config.of(env="ALE/Pong-v5", seed=3), now=0, root=tmp_path)
    assert again.run.run_dir == cfg.run.run_dir + "-2"  # same second: never the same folder


def test_two_runs_named_in_the_same_second_get_two_folders_even_before_either_writes(tmp_path):
    """The folder is claimed as it is named (mkdir, which one process alone wins), so a second run
    named in the same second never shares the first's, whether or not the first has written yet
    (or has already exited)."""
    first = Path(resolve_run_dir(Config.of(env="ALE/Pong-v5"), now=0, root=tmp_path).run.run_dir)
    assert first.is_dir() and not any(first.iterdir())  # claimed, nothing in it yet
    second = Path(resolve_run_dir(Config.of(env="ALE/Pong-v5"), now=0, root=tmp_path).run.run_dir)
    assert second != first and second.is_dir()


def test_a_refused_new_run_leaves_no_folder(tmp_path, monkeypatch):
    import functools

    from pipeline.runtime import run as R

    monkeypatch.setattr(R, "resolve_run_dir", functools.partial(resolve_run_dir, root=tmp_path))
    with pytest.raises(ConfigError, match="--lr"):
        R.prepare_run({"env": "tests.catch_env:Catch-v0", "lr": -1.0})
    assert list(tmp_path.iterdir()) == []


def test_a_folder_holding_a_run_is_refused_without_resume_or_overwrite(tmp_path):
    folder = make_run(tmp_path / "pong")
    with pytest.raises(ConfigError, match="already holds a run.*--resume.*--overwrite"):
        resolve_run_dir(Config.of(run_dir=str(folder)), root=tmp_path)
    assert resolve_run_dir(Config.of(run_dir=str(folder), overwrite=True), root=tmp_path).run.run_dir == str(folder)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert resolve_run_dir(Config.of(run_dir=str(empty)), root=tmp_path).run.run_dir == str(empty)


def test_overwrite_leaves_nothing_of_the_old_run(tmp_path):
    """--overwrite clears every file a run writes, each named in pipeline/records/files.py, and the
    NAME.tmp a write killed before its rename leaves: an old eval_history.jsonl would take the next
    --eval's rows, an old flag.mp4 film weights the folder no longer holds. Only train.log stays,
    emptied: the new run holds it open (the real path, open_run)."""
    from pipeline.records import files
    from pipeline.runtime.run import open_run

    outside = {files.VIDEO_NAME, files.MODEL_CARD_NAME, files.LATEST_LINK}  # the Hub upload's; runs/latest
    names = {v for k, v in vars(files).items() if k.isupper() and isinstance(v, str) and not k.endswith("_SUFFIX")}
    names = names - outside | {files.after_checkpoint_name(files.EPISODES_NAME),
                               files.after_checkpoint_name(files.METRICS_NAME)}
    folders = {files.TB_DIR, files.WANDB_DIR, files.VIDEOS_DIR}
    assert {files.EVAL_HISTORY_NAME, files.FLAG_VIDEO_NAME, files.EVAL_NAME, files.REPLAY_NAME} <= names
    run_dir = make_run(tmp_path / "run")
    for name in names - folders:
        (run_dir / name).write_text("the old run's")
        (run_dir / (name + files.TMP_SUFFIX)).write_text("the old run's, half written")
    for name in folders:
        (run_dir / name / "sub").mkdir(parents=True)
        (run_dir / name / "sub" / "events").write_text("the old run's")
    log = open_run(Config.of(run_dir=str(run_dir), overwrite=True))
    try:
        left = sorted(p.name for p in run_dir.iterdir())
        assert left == [files.LOG_NAME], f"left of the old run: {left}"
        assert (run_dir / files.LOG_NAME).read_text() == ""
    finally:
        log.close()


def test_resume_takes_a_folder_or_latest(tmp_path):
    old = make_run(tmp_path / "a")
    new = make_run(tmp_path / "b")
    os.utime(old, (1, 1))
    assert latest_run(tmp_path) == new
    (tmp_path / "latest").symlink_to("a")  # the link a run leaves wins over folder times
    make_run(tmp_path / "c").joinpath("checkpoint.pt").unlink()  # newest, but nothing to resume
    assert latest_run(tmp_path) == old.resolve()
    assert resolve_run_dir(Config.of(resume="latest"), root=tmp_path).run.run_dir == str(old.resolve())
    assert resolve_run_dir(Config.of(resume=RESUME_HERE), root=tmp_path).run.run_dir == str(old.resolve())
    assert resolve_run_dir(Config.of(resume=str(new)), root=tmp_path).run.run_dir == str(new)
    assert resolve_run_dir(Config.of(resume=RESUME_HERE, run_dir=str(new)), root=tmp_path).run.run_dir == str(new)
    with pytest.raises(ConfigError, match="holds no run"):
        resolve_run_dir(Config.of(resume=str(tmp_path / "nothing")), root=tmp_path)
    with pytest.raises(ConfigError, match="no run under"):
        resolve_run_dir(Config.of(resume="latest"), root=tmp_path / "none")


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory):
    """One catch run of 3,000 agent steps with periodic evaluations, as a user starts it; its
    record (test_run_record_best_model_and_no_silent_overwrite), its evaluations
    (test_eval_interval_keeps_the_best_evaluated_weights) and their films
    (test_capture_video_films_a_greedy_game_at_each_evaluation) are read from it: training catch
    once for all saves CI half a minute a test."""
    run_dir, mark = tmp_path_factory.mktemp("evaluated") / "run", uuid.uuid4().hex
    args = [*CATCH, "--run-dir", str(run_dir), "--total-steps", "3000", "--seed", "5", "--eval-interval", "1000",
            "--eval-episodes", "3", "--eval-epsilon", "0.05", "--capture-video",
            "--replay-ratio", "1"]  # the record and the evaluations, not the learning: a quarter of the updates
    proc, out = run(args, mark, timeout=300)
    assert proc.returncode == 0, out[-3000:]
    check_clean(proc, mark)
    return run_dir, out


@pytest.mark.slow
def test_run_record_best_model_and_no_silent_overwrite(evaluated_run, tmp_path):
    trained, out = evaluated_run
    record = json.loads((trained / "config.json").read_text())
    assert record["config"]["seed"] == 5 and record["config"]["env"] == "tests.catch_env:Catch-v0"
    # the profile this machine's hardware picks (cpu-small on 2-4 cores, cpu-large above, a GPU's own)
    assert record["profile"] == pick_profile(Hardware(**record["hardware"])) and "cores" in record["profile_reason"]
    assert record["versions"]["torch"] == torch.__version__.split("+")[0]
    assert record["git_commit"] and "--seed" in record["command"]
    assert record["hardware"]["cores"] >= 1
    # best.pt: the weights at the best epoch-end mean of the last 20 games, loadable by --eval
    best = torch.load(trained / "best.pt", weights_only=True)
    assert best["best"]["metric"] == "return" and best["best"]["score"] > -1.0
    assert f"weights in {trained / 'best.pt'}" in out
    state = torch.load(trained / "checkpoint.pt", weights_only=True)
    assert state["counters"]["best_score"] == best["best"]["score"]
    assert "ETA " in out and "elapsed 0:0" in out
    # the same folder again, without --resume: refused before anything starts (on a copy: the
    # evaluations test reads the run as it was trained)
    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    shutil.copytree(trained, run_dir)
    before = (run_dir / "metrics.jsonl").read_text()
    proc, out = run([*CATCH, "--run-dir", str(run_dir), "--total-steps", "3000", "--seed", "5"], mark)
    assert proc.returncode == 2 and "already holds a run" in out and "--overwrite" in out
    assert (run_dir / "metrics.jsonl").read_text() == before
    # --overwrite: a new run in that folder, the old run's files gone first
    proc, out = run([*CATCH, "--run-dir", str(run_dir), "--total-steps", "1200", "--overwrite", "--replay-ratio", "1"], mark)
    assert proc.returncode == 0, out[-3000:]
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert rows[0]["epoch"] == 1 and rows[-1]["agent_steps"] < 3000
    assert json.loads((run_dir / "config.json").read_text()).get("previous") is None
    assert (run_dir / "train.log").read_text().count("[MAIN] Stopped (") == 1  # the old run's log emptied too
    assert not (run_dir / "evals.jsonl").exists()  # the old run's evaluations too
    check_clean(proc, mark)


def test_a_folder_another_run_is_training_in_is_refused_and_left_as_it_was(tmp_path):
    """A second run on a live run's folder (--overwrite, or --resume latest in a second terminal)
    is refused before it writes or removes anything; the live run's log holds the folder."""
    from pipeline.records.runlog import RunLog

    folder = make_run(tmp_path / "run")
    (folder / "metrics.jsonl").write_text("{}\n")
    live = RunLog(folder, 1000)  # the run training in it
    try:
        live("[MAIN] the live run's line")
        mark = uuid.uuid4().hex
        proc, out = run([*CATCH, "--run-dir", str(folder), "--total-steps", "1200", "--overwrite"], mark)
        assert proc.returncode == 2 and "another run is training in this folder" in out and "--run-dir" in out
        assert (folder / "checkpoint.pt").read_bytes() == b"x" and (folder / "metrics.jsonl").read_text() == "{}\n"
        assert (folder / "train.log").read_text() == "[MAIN] the live run's line\n"
        check_clean(proc, mark)
    finally:
        live.close()
    RunLog(folder, 1000).close()  # released with the live run: the folder is free again


def test_resumed_run_keeps_the_earlier_record(tmp_path):
    from pipeline.records.record import write_record

    write_record(tmp_path, {"config": {"seed": 1}})
    write_record(tmp_path, {"config": {"seed": 1}, "resumed": True})
    rec = json.loads((tmp_path / "config.json").read_text())
    assert rec["resumed"] and rec["previous"] == [{"config": {"seed": 1}}]


def test_config_default_run_dir_is_unset():
    assert Config().run.run_dir == "" and Config().replace(resume="latest").run.resume == "latest"


@pytest.mark.slow
def test_eval_interval_keeps_the_best_evaluated_weights(evaluated_run):
    from pipeline.records.checkpoint import load
    from pipeline.records.files import BEST_EVAL_NAME, CANDIDATE_NAME, EVALS_NAME

    run_dir, out = evaluated_run
    evals = [json.loads(x) for x in (run_dir / EVALS_NAME).read_text().splitlines()]
    assert len(evals) >= 2 and all(len(e["returns"]) == 3 and e["epsilon"] == 0.05 for e in evals)
    assert [e["agent_steps"] for e in evals] == sorted(e["agent_steps"] for e in evals)
    # the first screening beats the best (none yet) and is confirmed on fresh games: each
    # confirmation follows its screening, on other seeds, and only confirmations are kept
    assert evals[0]["phase"] == "screen" and evals[1]["phase"] == "confirm"
    for i, e in enumerate(evals):
        if e["phase"] == "confirm":
            assert evals[i - 1]["phase"] == "screen" and evals[i - 1]["agent_steps"] == e["agent_steps"]
            assert e["seed"] != evals[i - 1]["seed"]
    best = max(e["score"] for e in evals if e["phase"] == "confirm")
    assert f"confirmed: mean return {best:.2f} over 3 fresh games (epsilon 0.05); best so far" in out
    state = load(run_dir / BEST_EVAL_NAME)  # a whole checkpoint: --eval plays it
    chosen = next(e for e in evals if e["phase"] == "confirm" and e["score"] == best)
    # the weights evaluated: saved as the evaluation started (collectors run on meanwhile)
    assert abs(state["counters"]["agent_steps"] - chosen["agent_steps"]) <= 100
    assert not (run_dir / CANDIDATE_NAME).exists()
    assert load(run_dir / "checkpoint.pt")["counters"]["best_eval"] == best
    # the file carries the evaluation that chose it, and the screening before it (a resume reads its bar from there)
    screened = next(e for e in evals if e["phase"] == "screen" and e["agent_steps"] == chosen["agent_steps"])
    assert state["best"] == {"metric": "return", "score": best, "agent_steps": chosen["agent_steps"], "games": 3,
                             "epsilon": 0.05, "seed": chosen["seed"], "screen_score": screened["score"],
                             "screen_seed": screened["seed"]}


@pytest.mark.slow
def test_capture_video_films_a_greedy_game_at_each_evaluation(evaluated_run):
    """--capture-video: each screening films one greedy game of the weights it plays, an H.264
    MP4 named by their agent steps, so a user watches the agent improve."""
    from pipeline.records.files import EVALS_NAME
    from tests.mp4 import video_track

    run_dir, out = evaluated_run
    screens = [json.loads(x)["agent_steps"] for x in (run_dir / EVALS_NAME).read_text().splitlines()
               if json.loads(x)["phase"] == "screen"]
    videos = sorted((run_dir / "videos").iterdir())
    assert [v.name for v in videos] == [f"eval-{steps:09d}.mp4" for steps in screens]
    for video in videos:  # one whole game of catch: its first screen and one after each of its six steps
        assert video_track(video) == video_track(video).__class__("isom", "avc1", 7, 84, 84)
    assert f"[EVAL] A greedy game of the weights at {screens[0]:,} agent steps: {videos[0]}" in out


def test_a_finished_agent_stops_the_run_with_a_flag_video(tmp_path):
    """--stop-at-flag (on by default): kept weights whose confirmation reaches the flag in every
    game stop the run (FlagCatch: every whole game ends at its flag), and a flag run is filmed
    beside them."""
    from pipeline.records.checkpoint import load
    from pipeline.records.files import BEST_EVAL_NAME, FLAG_VIDEO_NAME
    from tests.mp4 import video_track

    run_dir, mark = tmp_path / "run", uuid.uuid4().hex
    args = [*CATCH, "--env", "tests.catch_env:FlagCatch-v0", "--run-dir", str(run_dir),
            "--total-steps", "50000", "--eval-interval", "1000", "--eval-episodes", "3"]
    proc, out = run(args, mark, timeout=300)
    assert proc.returncode == 0, out[-3000:]
    assert "[MAIN] Finished: the kept weights reached the flag in 3/3 " in out
    assert "Stopped (finished)" in out and "A flag run of the kept weights" in out
    # the last line says how the run ended, what the kept weights reached and where they are
    last = out.strip().splitlines()[-1]
    assert last.startswith("[MAIN] Done (finished) at ") and f"Kept weights {run_dir / BEST_EVAL_NAME} (from " in last
    assert "the flag in 3/3 greedy fresh games" in last and f"--eval {run_dir / BEST_EVAL_NAME}" in last
    assert load(run_dir / BEST_EVAL_NAME)["best"]["flags"] == 3
    assert video_track(run_dir / FLAG_VIDEO_NAME).codec == "avc1"  # H.264, which a browser plays
    assert load(run_dir / "checkpoint.pt")["counters"]["agent_steps"] < 20_000  # it stopped long before --total-steps
    check_clean(proc, mark)
