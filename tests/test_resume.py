"""Resuming a run on other hardware or with other collectors: a CPU run (bf16, no loss scaling)
goes on with fp16 and a fresh GradScaler, a run with Ray collectors finds its replay, a
checkpoint of another network is refused by name, and a damaged replay file is one line and
exit code 2 before anything in the run's folder changes."""
import numpy as np
import pytest
import torch

import mario_rl_optimized
from config_optimized import Config
from pipeline.records import checkpoint as ckpt
from pipeline.agent.learner import Learner
from pipeline.replay import Replay
from pipeline.records import replay_snapshot as snapshot
from pipeline.records.files import REPLAY_NAME
from pipeline.records.resume import check_resume, owed_updates, resume
from presets import family_of, load_preset
from tests.test_replay_snapshot import catch_replay

CATCH = "tests.catch_env:Catch-v0"
N_ACTIONS = 3  # the catch game: left, stay, right


class Log(list):
    """What resume() writes to the run log, kept as lines."""

    def __call__(self, line: str) -> None:
        self.append(line)

    def start_at(self, steps: int) -> None:
        pass


def _batch(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"obs": rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8),
            "next_obs": rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8),
            "action": rng.integers(0, N_ACTIONS, n), "return": rng.standard_normal(n).astype(np.float32),
            "discount": np.full(n, 0.97, np.float32), "weights": None}


def _save_run(run_dir, cfg: Config, learner: Learner, agent_steps: int, replay: Replay | None = None,
              owed_updates: int = 0) -> None:
    """A run folder as a clean stop leaves it: the checkpoint, and the replay saved with it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    counters = {"agent_steps": agent_steps, "episodes": 0, "samples_trained": 0, "epoch": 0, "wall_s": 1.0,
                "owed_updates": owed_updates}
    rng = (replay or Replay.of(400, 1, 4)).sampler.rng.bit_generator.state
    ckpt.save(run_dir / ckpt.CHECKPOINT_NAME, ckpt.training_state(cfg, N_ACTIONS, learner.state_dict(), counters, rng))
    if replay is not None:
        snapshot.save(replay, run_dir / REPLAY_NAME,
                      {"env": CATCH, "frame_stack": 4, "agent_steps": agent_steps})


def _learner(cfg: Config) -> Learner:
    torch.manual_seed(0)
    return Learner(cfg.learner, 4, N_ACTIONS, torch.device("cpu"))


def test_a_cpu_bf16_run_resumes_with_fp16_and_a_fresh_scaler(tmp_path):
    """A CPU run (bf16 autocast, the GradScaler off: it saves {}) moved to a CUDA GPU without bf16,
    where auto picks fp16 and the scaler is on. fp16 autocast runs on the CPU too (slowly: batch 2)."""
    run_dir = tmp_path / "run"
    cpu = Config.of(env=CATCH, run_dir=str(run_dir), amp=True, amp_dtype="bf16", save_replay=False)
    trained = _learner(cpu)
    assert trained.amp_dtype == torch.bfloat16 and not trained.scaler.is_enabled()
    trained.update([trained.to_device(_batch(2))])
    _save_run(run_dir, cpu, trained, agent_steps=1000)

    gpu = cpu.replace(amp_dtype="fp16")
    moved, log = _learner(gpu), Log()
    assert moved.amp_dtype == torch.float16 and moved.scaler.is_enabled()
    counters, refill = resume(run_dir, gpu, N_ACTIONS, moved, Replay.of(400, 1, 4), log)
    assert counters.agent_steps == 1000 and moved.updates == 1
    assert any("without fp16 loss scaling" in line and "GradScaler starts at the initial scale" in line
               for line in log), log
    assert moved.scaler.get_scale() == torch.amp.GradScaler("cpu").get_scale()
    for a, b in zip(trained.model.state_dict().values(), moved.model.state_dict().values()):
        assert torch.equal(a, b)
    out = moved.update([moved.to_device(_batch(2, seed=1))])
    assert not out["skipped"] and moved.updates == 2
    assert moved.scaler.state_dict()["scale"] > 0  # and the fp16 run's own checkpoints carry its scaler


def test_a_resume_with_another_learning_rate_trains_with_it(tmp_path):
    """--lr and --adam-eps given with --resume are logged as changes; Adam's restored param groups
    (which carry the checkpoint's values) must take them too, or the change is only a log line.
    Adam's moments and step count come from the checkpoint."""
    run_dir = tmp_path / "run"
    first = Config.of(env=CATCH, run_dir=str(run_dir), amp=False, lr=1e-4, adam_eps=1.5e-4, save_replay=False)
    trained = _learner(first)
    trained.update([trained.to_device(_batch(4))])
    _save_run(run_dir, first, trained, agent_steps=1000)

    lower = first.replace(lr=2.5e-5, adam_eps=3.125e-4)
    resumed = _learner(lower)
    resume(run_dir, lower, N_ACTIONS, resumed, Replay.of(400, 1, 4), Log())
    assert [(g["lr"], g["eps"]) for g in resumed.optimizer.param_groups] == [(2.5e-5, 3.125e-4)]
    saved, loaded = trained.optimizer.state_dict()["state"], resumed.optimizer.state_dict()["state"]
    assert saved.keys() == loaded.keys()
    for k in saved:
        assert torch.equal(saved[k]["exp_avg"], loaded[k]["exp_avg"]) and float(loaded[k]["step"]) == 1.0

    before = {k: v.clone() for k, v in resumed.model.state_dict().items()}
    twin = _learner(first)  # the same weights and Adam state, stepped with the old lr and eps
    resume(run_dir, first, N_ACTIONS, twin, Replay.of(400, 1, 4), Log())
    resumed.update([resumed.to_device(_batch(4, seed=1))])
    twin.update([twin.to_device(_batch(4, seed=1))])
    name = next(k for k, v in before.items() if v.is_floating_point() and "weight" in k)
    step_new = (resumed.model.state_dict()[name] - before[name]).abs().max()
    step_old = (twin.model.state_dict()[name] - before[name]).abs().max()
    assert 0 < step_new < step_old


def test_a_checkpoint_of_another_network_is_a_handled_error(tmp_path):
    """Weights that do not fit the learner: refused by the resume check before anything starts,
    and, should a run get that far, a CheckpointError (one "[MAIN] Error:" line), not a traceback."""
    run_dir = tmp_path / "run"
    nature = Config.of(env=CATCH, run_dir=str(run_dir), resume=str(run_dir), amp=False, model_arch="nature",
                       save_replay=False)
    _save_run(run_dir, nature, _learner(nature), agent_steps=500)
    batchnorm = nature.replace(model_arch="batchnorm")
    with pytest.raises(ckpt.CheckpointError, match=r"trained with --model-arch 'nature' but this run has 'batchnorm'"):
        check_resume(batchnorm)
    with pytest.raises(ckpt.CheckpointError, match=r"checkpoint .*checkpoint.pt does not fit this run's learner "
                                                   r"\(RuntimeError: .*start a new run without --resume"):
        resume(run_dir, batchnorm, N_ACTIONS, _learner(batchnorm), Replay.of(400, 1, 4), Log())


@pytest.mark.parametrize("num_collectors,ray_collectors", [(0, 2), (1, 1), (2, 0)])
def test_the_resume_check_counts_ray_collectors_streams(tmp_path, num_collectors, ray_collectors):
    """A replay of 2 collectors x 4 envs, however many of them were Ray actors, fits a run of two
    collectors; a run of three is refused, naming both stream counts."""
    run_dir = tmp_path / "run"
    cfg = Config.of(env=CATCH, run_dir=str(run_dir), resume=str(run_dir), amp=False, buffer_size=2400,
                    envs_per_collector=4, num_collectors=num_collectors, ray_collectors=ray_collectors,
                    ray_address="127.0.0.1:6379" if ray_collectors else "")
    _save_run(run_dir, cfg, _learner(cfg), agent_steps=0, replay=Replay.of(2400, 2, 4))
    check_resume(cfg)
    with pytest.raises(snapshot.ReplayFileError, match=r"env stream count \(\(--num-collectors \+ --ray-collectors\) "
                                                       r"x --envs-per-collector\) 8 but this run has 12"):
        check_resume(cfg.replace(ray_collectors=ray_collectors + 1, ray_address="127.0.0.1:6379"))


def test_a_resume_past_its_step_or_time_limit_is_refused_naming_the_flag(tmp_path):
    """--total-steps and --time-limit count the whole run: a resume that has already reached one
    would stop at once, so it is refused before anything starts (the checkpoint: 1,000 agent
    steps, 1 second of wall clock)."""
    run_dir = tmp_path / "run"
    cfg = Config.of(env=CATCH, run_dir=str(run_dir), resume=str(run_dir), amp=False, save_replay=False,
                    total_steps=1000)
    _save_run(run_dir, cfg, _learner(cfg), agent_steps=1000)
    with pytest.raises(ckpt.CheckpointError, match=r"at 1,000 agent steps, which --total-steps 1,000 already "
                                                   r"reaches; give a larger --total-steps"):
        check_resume(cfg)
    check_resume(cfg.replace(total_steps=1001))
    with pytest.raises(ckpt.CheckpointError, match=r"trained 0.0 minutes, which --time-limit 0.01 already reaches "
                                                   r"\(it counts the whole run, resumes included\)"):
        check_resume(cfg.replace(total_steps=2000, time_limit=0.01))
    check_resume(cfg.replace(total_steps=2000, time_limit=0.02))


def test_a_resume_at_its_step_limit_with_updates_owed_is_taken_only_with_the_replay_to_train_them(tmp_path):
    """A run stopped at its --total-steps by a signal still owes the updates its collectors' head
    start paid for: the resume that trains them is taken where the replay saved with that
    checkpoint is there; without it (off, missing, saved at other steps) nothing can train them
    on the same data, and the resume is refused as before."""
    run_dir = tmp_path / "run"
    cfg = Config.of(env=CATCH, run_dir=str(run_dir), resume=str(run_dir), amp=False, buffer_size=400,
                    envs_per_collector=4, num_collectors=1, total_steps=240)
    _save_run(run_dir, cfg, _learner(cfg), agent_steps=240, replay=catch_replay(steps=60, capacity=400),
              owed_updates=5)
    check_resume(cfg)
    assert owed_updates(run_dir, {"agent_steps": 240, "owed_updates": 5}) == 5
    assert owed_updates(run_dir, {"agent_steps": 239, "owed_updates": 5}) == 0  # the replay is another stop's
    refused = r"at 240 agent steps, which --total-steps 240 already reaches"
    with pytest.raises(ckpt.CheckpointError, match=refused):
        check_resume(cfg.replace(save_replay=False))
    (run_dir / REPLAY_NAME).unlink()
    with pytest.raises(ckpt.CheckpointError, match=refused):
        check_resume(cfg)


def _cut_short(run_dir, cfg: Config, phase: str = "confirm", agent_steps: int = 800) -> None:
    """An evaluation a stop cut short, as PeriodicEval.close leaves it: the weights it was playing
    (eval_candidate.pt) and where it stood (eval_pending.json)."""
    import json

    from pipeline.records.files import CANDIDATE_NAME, PENDING_NAME

    rng = Replay.of(400, 1, 4).sampler.rng.bit_generator.state
    ckpt.save(run_dir / CANDIDATE_NAME, ckpt.training_state(cfg, N_ACTIONS, _learner(cfg).state_dict(), {}, rng))
    (run_dir / PENDING_NAME).write_text(json.dumps({"phase": phase, "agent_steps": agent_steps, "games_seed": 8719,
                                                    "screened": {"score": 1.0, "seed": 8719}}))


def test_a_run_stopped_at_its_length_during_an_evaluation_resumes_to_play_it(tmp_path):
    """The stop at --total-steps (or --time-limit, or a suite's --minutes) waits for the running
    evaluation, and a Ctrl-C during that wait keeps it for --resume. The checkpoint is at the
    run's length with nothing else owed: the resume is taken (to play the evaluation and stop),
    and the suite reads the game as one to resume, not done; without the weights it played,
    nothing is owed and both refuse as before."""
    from bench.suite_runs import game_state
    from pipeline.records.files import CANDIDATE_NAME

    run_dir = tmp_path / "run"
    cfg = Config.of(env=CATCH, run_dir=str(run_dir), resume=str(run_dir), amp=False, save_replay=False,
                    total_steps=1000)
    _save_run(run_dir, cfg, _learner(cfg), agent_steps=1000)
    _cut_short(run_dir, cfg)
    check_resume(cfg)
    check_resume(cfg.replace(total_steps=2000, time_limit=0.01))  # the run has trained 1 s of 0.6
    assert game_state(run_dir, 1000, None)[0] == "resume"
    assert game_state(run_dir, 2000, 0.01)[0] == "resume"
    log = Log()
    resume(run_dir, cfg, N_ACTIONS, _learner(cfg), Replay.of(400, 1, 4), log)
    assert any("at its --total-steps (1,000 agent steps): it plays the confirmation at 800 agent steps that the last "
               "stop cut short, then stops" in line for line in log), log

    (run_dir / CANDIDATE_NAME).unlink()  # nothing to play again
    with pytest.raises(ckpt.CheckpointError, match="already reaches"):
        check_resume(cfg)
    assert game_state(run_dir, 1000, None)[0] == "done"
    assert game_state(run_dir, 2000, 0.01)[0] == "done"


@pytest.mark.parametrize("text,wrong", [
    ('{"phase": "conf', "JSONDecodeError"),
    ('{"phase": "confirm", "games_seed": 8719}', "no agent_steps"),
    ('{"phase": "replay", "agent_steps": 800, "games_seed": 8719}', "phase 'replay'"),
    ('[1, 2]', "not a JSON object"),
])
def test_a_damaged_record_of_an_evaluation_cut_short_is_one_line_and_exit_2_with_nothing_changed(tmp_path, capsys,
                                                                                                  text, wrong):
    """eval_pending.json damaged (a disk error, an edit): the resume is refused by one line naming
    the file, what is wrong and what to do, before any process starts; the folder is left as it was."""
    from pipeline.records.files import PENDING_NAME

    run_dir = tmp_path / "run"
    args = ["--env", CATCH, "--run-dir", str(run_dir), "--buffer-size", "400", "--envs-per-collector", "4",
            "--num-collectors", "1", "--amp", "false", "--total-steps", "300"]
    cfg = Config.of(**{**load_preset(family_of(CATCH)), "env": CATCH, "run_dir": str(run_dir), "amp": False})
    _save_run(run_dir, cfg, _learner(cfg), agent_steps=240, replay=catch_replay(steps=60, capacity=400))
    _cut_short(run_dir, cfg, agent_steps=200)
    (run_dir / PENDING_NAME).write_text(text)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in run_dir.iterdir()}
    assert mario_rl_optimized.main([*args, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {run_dir / PENDING_NAME} (where an evaluation the last "
                                                   "stop cut short stood) cannot be read"), err
    assert wrong in err and f"delete {run_dir / PENDING_NAME} to resume without playing that evaluation again" in err
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in run_dir.iterdir()} == before


def test_a_resumed_run_draws_the_shifts_and_cuda_numbers_it_would_have(tmp_path, monkeypatch):
    """A checkpoint keeps every generator the run draws from: besides torch's, Python's and the
    sampler's, the --augment-shift one (it restarted at seed + 1 on every resume, so a resumed run
    shifted its batches as its first start had) and, where the run uses CUDA, the CUDA generators
    (IQN's fractions, the distributional bootstrap's draws: torch.manual_seed reseeded them). The
    CUDA calls are stood in for on a CPU machine, so the code path runs here too."""
    import time

    from pipeline.records.books import RunBooks
    from pipeline.records.counters import RunCounters
    from pipeline.settings.hardware import Hardware

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cfg = Config.of(env=CATCH, run_dir=str(run_dir), amp=False, save_replay=False, tensorboard=False, buffer_size=400,
                    num_collectors=1, envs_per_collector=4, augment_shift=4)
    hw = Hardware(2, 24 * 2**30, 20 * 2**30, "test cpu", True, False, None, 0, False)
    learner, replay = _learner(cfg), Replay.from_config(cfg)
    frames = np.random.default_rng(0).integers(0, 256, (16, 4, 84, 84), dtype=np.uint8)
    replay.shift(frames)  # the run has drawn shifts before its checkpoint
    books = RunBooks(cfg, hw, lambda line: None, [], RunCounters(), time.monotonic(), learner, replay, N_ACTIONS)
    generators = {0: torch.tensor([7, 1, 2], dtype=torch.uint8), 1: torch.tensor([9, 3, 4], dtype=torch.uint8)}
    restored = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)  # resumed on a machine with one GPU of the two
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [generators[0], generators[1]])
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda state, device="cuda": restored.update({device: state}))
    books.save_checkpoint(1000, 0, float("-inf"))
    books.close()
    would_have = replay.shift(frames)  # the first start's next shifts

    again = Replay.from_config(cfg)
    resume(run_dir, cfg, N_ACTIONS, _learner(cfg), again, Log())
    assert np.array_equal(again.shift(frames), would_have)
    assert list(restored) == [0] and torch.equal(restored[0], generators[0])


def test_a_run_folder_of_an_earlier_version_reads_under_todays_key_names(tmp_path):
    """Files written when agent steps were keyed ``env_steps`` (checkpoint counters, the kept
    weights' score, replay meta, metrics and games): resumed and read as today's files."""
    from pipeline.records.file_keys import current_keys
    from pipeline.records.episodes import read_episodes
    from pipeline.records.metrics import read_metrics

    def old(data):  # today's keys back under their old names
        return {("env_steps" if k == "agent_steps" else k): old(v) if isinstance(v, dict) else v
                for k, v in data.items()}

    run_dir = tmp_path / "run"
    cfg = Config.of(env=CATCH, run_dir=str(run_dir), resume=str(run_dir), amp=False, buffer_size=400,
                    envs_per_collector=4, num_collectors=1)
    replay, learner = catch_replay(steps=60, capacity=400), _learner(cfg)
    run_dir.mkdir()
    counters = {"agent_steps": 240, "episodes": 3, "samples_trained": 64, "epoch": 1, "wall_s": 1.0}
    state = ckpt.training_state(cfg, N_ACTIONS, learner.state_dict(), counters, replay.sampler.rng.bit_generator.state)
    ckpt.save(run_dir / ckpt.CHECKPOINT_NAME, {**state, "counters": old(counters),
                                               "best": {"metric": "return", "score": 0.5, "env_steps": 200}})
    snapshot.save(replay, run_dir / REPLAY_NAME, {"env": CATCH, "frame_stack": 4, "env_steps": 240})
    (run_dir / "metrics.jsonl").write_text('{"epoch": 1, "env_steps": 240, "env_steps_per_s": 80.0}\n')
    (run_dir / "episodes.jsonl").write_text('{"wall_s": 1.0, "env_steps": 120, "return": 1.0}\n')

    assert ckpt.load(run_dir)["best"] == {"metric": "return", "score": 0.5, "agent_steps": 200}
    check_resume(cfg)
    log = Log()
    restored, refill = resume(run_dir, cfg, N_ACTIONS, _learner(cfg), Replay.of(400, 1, 4), log)
    assert restored.agent_steps == 240 and restored.episodes == 3, log
    assert refill == cfg.learner.learning_starts - 240 and any("replay.npz: 240 transitions" in line for line in log), log
    assert read_metrics(run_dir) == [{"epoch": 1, "agent_steps": 240, "agent_steps_per_s": 80.0}]
    assert read_episodes(run_dir) == [{"wall_s": 1.0, "agent_steps": 120, "return": 1.0}]
    assert current_keys({"env_steps": 1, "agent_steps": 2}) == {"agent_steps": 2}  # today's name wins


def _flip_a_third_in(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    path.write_bytes(data)


def _drop_agent_steps(path):
    replay = Replay.of(400, 1, 4)
    snapshot.load(replay, path, CATCH, 4)
    snapshot.save(replay, path, {"env": CATCH, "frame_stack": 4})


@pytest.mark.parametrize("damage,message", [
    (_flip_a_third_in, "replay.npz is truncated or corrupt"),
    (_drop_agent_steps, "replay.npz has no valid agent_steps in its meta"),
])
def test_a_damaged_replay_is_one_line_and_exit_2_with_nothing_changed(tmp_path, capsys, damage, message):
    run_dir = tmp_path / "run"
    args = ["--env", CATCH, "--run-dir", str(run_dir), "--buffer-size", "400", "--envs-per-collector", "4",
            "--num-collectors", "1", "--amp", "false"]
    # the run as the command line builds it (the Atari preset included), so only the replay is wrong
    cfg = Config.of(**{**load_preset(family_of(CATCH)), "env": CATCH, "run_dir": str(run_dir), "amp": False})
    _save_run(run_dir, cfg, _learner(cfg), agent_steps=240, replay=catch_replay(steps=60, capacity=400))
    damage(run_dir / REPLAY_NAME)
    before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in run_dir.iterdir()}
    assert mario_rl_optimized.main([*args, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: replay file ") and message in err and err.count("\n") == 1, err
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in run_dir.iterdir()} == before


def test_a_resume_takes_the_bar_from_the_kept_weights_themselves(tmp_path):
    """A kill after an evaluation replaced best_eval.pt but before the next periodic checkpoint:
    the checkpoint's counters hold the older, lower bar. The files carry their own scores and the
    resume takes the highest, so a worse evaluation cannot replace the kept weights."""
    from pipeline.records import checkpoint as ckpt
    from pipeline.records.resume import kept_scores

    base = {"meta": {"env": "x"}, "learner": {}}
    ckpt.save(tmp_path / "best_eval.pt", {**base, "best": {"metric": "return", "score": 0.75, "agent_steps": 9000}})
    ckpt.save(tmp_path / "best.pt", {**base, "best": {"metric": "return", "score": -0.25, "agent_steps": 8000}})
    both = {"best.pt": "return", "best_eval.pt": "return"}
    assert kept_scores(tmp_path, both) == {"best.pt": -0.25, "best_eval.pt": 0.75}
    assert kept_scores(tmp_path, {"best.pt": "distance", "best_eval.pt": "flags"}) == {}  # another metric's are no bar
    assert kept_scores(tmp_path, {"best.pt": "return", "best_eval.pt": "flags"}) == {"best.pt": -0.25}
    ckpt.save(tmp_path / "best.pt", base)  # a file from before the weights carried their score
    assert kept_scores(tmp_path, both) == {"best_eval.pt": 0.75}


def test_counters_are_read_back_as_written_and_old_checkpoints_fill_the_gaps():
    from pipeline.records.counters import RunCounters

    now = RunCounters(agent_steps=123_456, episodes=78, samples_trained=9_000, wall_s=61.5, epoch=12, launches=3,
                      best_score=-4.5, best_eval=7.0, owed_updates=17)
    saved = now.to_checkpoint("return", 0.01)
    assert saved["best_metric"] == "return" and saved["epsilon"] == 0.01
    assert RunCounters.from_checkpoint(saved) == now
    # a checkpoint from before launches and best scores were saved: its step count set the seeds apart
    old = RunCounters.from_checkpoint({"agent_steps": 5_000, "episodes": 2, "samples_trained": 64, "epoch": 1, "wall_s": 3.0})
    assert old == RunCounters(5_000, 2, 64, 3.0, 1, launches=5_000, owed_updates=0)


def test_rows_a_killed_run_wrote_after_its_checkpoint_are_set_aside(tmp_path):
    """A kill between checkpoints leaves games and epochs past the checkpoint in episodes.jsonl and
    metrics.jsonl, and half a line at the end. The resume plays from the checkpoint again: those
    rows move to NAME.after_checkpoint.jsonl (kept as written), so the timeline holds each agent
    step once and the next appended row starts on a line of its own; a clean folder is left as is."""
    import json

    from pipeline.records.files import EPISODES_NAME, METRICS_NAME, after_checkpoint_name
    from pipeline.records.metrics import read_jsonl

    run_dir = tmp_path / "run"
    cfg = Config.of(env=CATCH, run_dir=str(run_dir), amp=False, save_replay=False)
    _save_run(run_dir, cfg, _learner(cfg), agent_steps=1000)
    games = [{"agent_steps": s, "return": 1.0} for s in (400, 900, 1000, 1100, 1300)]
    (run_dir / EPISODES_NAME).write_text("".join(json.dumps(g) + "\n" for g in games) + '{"agent_steps": 14')
    epochs = [{"epoch": 1, "agent_steps": 500}, {"epoch": 2, "env_steps": 1000}]  # an old key name, at the checkpoint
    (run_dir / METRICS_NAME).write_text("".join(json.dumps(e) + "\n" for e in epochs))
    log = Log()
    resume(run_dir, cfg, N_ACTIONS, _learner(cfg), Replay.of(400, 1, 4), log)
    assert [g["agent_steps"] for g in read_jsonl(run_dir / EPISODES_NAME)] == [400, 900, 1000]
    assert (run_dir / EPISODES_NAME).read_text().endswith("\n")
    aside = (run_dir / after_checkpoint_name(EPISODES_NAME)).read_text().splitlines()
    assert aside == [json.dumps(games[3]), json.dumps(games[4]), '{"agent_steps": 14']
    assert any("3 row(s) written after the checkpoint at 1,000 agent steps" in line for line in log), log
    assert (run_dir / METRICS_NAME).read_text() == "".join(json.dumps(e) + "\n" for e in epochs)
    assert not (run_dir / after_checkpoint_name(METRICS_NAME)).exists()


def test_evaluations_a_killed_run_wrote_after_its_checkpoint_are_set_aside(tmp_path):
    """A kill after the evaluation at 1,100 agent steps, with the checkpoint at 1,000: the resumed
    run evaluates at 1,100 again, so the killed run's row would count twice (the Mario report's
    screenings, the finished agent a suite reads). It moves to evals.after_checkpoint.jsonl."""
    import json

    from pipeline.records.files import EVALS_NAME, OTHER_FILES, after_checkpoint_name
    from pipeline.records.metrics import read_jsonl

    run_dir = tmp_path / "run"
    cfg = Config.of(env=CATCH, run_dir=str(run_dir), amp=False, save_replay=False)
    _save_run(run_dir, cfg, _learner(cfg), agent_steps=1000)
    rows = [{"agent_steps": 500, "phase": "screen", "score": 0.5}, {"agent_steps": 500, "phase": "confirm", "score": 0.4},
            {"agent_steps": 1100, "phase": "screen", "score": 0.9}]
    (run_dir / EVALS_NAME).write_text("".join(json.dumps(r) + "\n" for r in rows))
    log = Log()
    resume(run_dir, cfg, N_ACTIONS, _learner(cfg), Replay.of(400, 1, 4), log)
    assert read_jsonl(run_dir / EVALS_NAME) == rows[:2]
    assert read_jsonl(run_dir / after_checkpoint_name(EVALS_NAME)) == rows[2:]
    assert any(f"{EVALS_NAME}: 1 row(s) written after the checkpoint at 1,000" in line for line in log), log
    assert after_checkpoint_name(EVALS_NAME) in OTHER_FILES  # --overwrite clears it with the rest


def test_a_bar_in_another_metric_starts_over_each_for_its_own_file(tmp_path):
    """best.pt's bar is in --score-metric, best_eval.pt's in what the evaluations score (Mario:
    flags): a checkpoint whose evaluation bar was in another metric starts that bar over, and
    only that one; a checkpoint from before the evaluations had their own metric reads both
    from best_metric."""
    run_dir = tmp_path / "run"
    cfg = Config.of(env=CATCH, run_dir=str(run_dir), amp=False, save_replay=False)
    learner = _learner(cfg)
    rng = Replay.of(400, 1, 4).sampler.rng.bit_generator.state

    def resumed(**counters):
        base = {"agent_steps": 1000, "episodes": 3, "samples_trained": 0, "epoch": 0, "wall_s": 1.0,
                "best_score": 0.5, "best_eval": 0.75, "best_metric": "return"}
        ckpt.save(run_dir / ckpt.CHECKPOINT_NAME,
                  ckpt.training_state(cfg, N_ACTIONS, learner.state_dict(), {**base, **counters}, rng))
        log = Log()
        got, _ = resume(run_dir, cfg, N_ACTIONS, _learner(cfg), Replay.of(400, 1, 4), log)
        return got, log

    run_dir.mkdir(parents=True)
    got, log = resumed(best_eval_metric="flags")
    assert (got.best_score, got.best_eval) == (0.5, float("-inf"))
    assert any("best evaluation so far was in flags" in line and "best_eval.pt starts over" in line for line in log)
    got, log = resumed()  # before best_eval_metric: best_metric held for both
    assert (got.best_score, got.best_eval) == (0.5, 0.75) and not any("starts over" in line for line in log)
    got, log = resumed(best_metric="distance", best_eval_metric="return")
    assert (got.best_score, got.best_eval) == (float("-inf"), 0.75)
