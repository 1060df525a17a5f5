"""Greedy Mario from every no-op start: one game per start, the same game each time a start is
played, a game that stands still cut as an evaluation cuts it, and no such reading where the
games are not one per start."""
import pytest
import torch

from config_optimized import Config
from models import NetworkSpec, build_model
from pipeline.evaluation.starts import play_every_start

STAGE = "SuperMarioBros-1-1-v0"


def _run(tmp_path, action: int, **settings):
    """A Mario run folder whose weights press ``action`` whatever the frame."""
    cfg = Config.of(env=STAGE, model_arch="nature", seed=3, **settings)
    network = NetworkSpec.of(cfg.learner, cfg.env_options.frame_stack, 4 if cfg.env_options.mario_actions ==
                             "right_run_wait" else 3)
    state = build_model(network).state_dict()
    state["head.q.2.weight"].zero_()
    state["head.q.2.bias"].zero_()
    state["head.q.2.bias"][action] = 1.0
    run = tmp_path / f"run{action}"
    run.mkdir()
    torch.save({"meta": {"env": STAGE, **network.meta, "version": 1}, "config": cfg.flat(),
                "learner": {"model": state}}, run / "checkpoint.pt")
    return run


def test_each_start_is_one_game_and_the_same_game_each_time(tmp_path):
    run = _run(tmp_path, 0, mario_actions="right_run", noop_max=3)  # right+B, never a jump: the first goomba
    games = play_every_start(run)
    assert [g.noops for g in games] == [0, 1, 2, 3]
    assert not any(g.flag or g.stood for g in games) and all(200 < g.distance < 1_000 for g in games), games
    assert play_every_start(run) == games  # deterministic: a start is one game


def test_a_start_that_stands_still_is_cut_where_it_stands(tmp_path):
    run = _run(tmp_path, 3, mario_actions="right_run_wait", noop_max=2)  # NOOP, always
    games = play_every_start(run, stand_still=5)
    assert [(g.stood, g.flag, g.length) for g in games] == [(True, False, 6)] * 3, games  # the first step sets the furthest
    assert len({g.distance for g in games}) == 1


def test_games_that_are_not_one_per_start_are_refused(tmp_path):
    with pytest.raises(ValueError, match="sticky actions 0.25: a start is many games"):
        play_every_start(_run(tmp_path, 0, mario_actions="right_run", sticky_actions=0.25))


def test_eval_every_start_prints_each_missed_start_and_the_share(tmp_path, capsys):
    import json

    from mario_rl_optimized import main

    run = _run(tmp_path, 0, mario_actions="right_run", noop_max=3)
    assert main(["--eval", str(run), "--every-start"]) == 0
    out = capsys.readouterr().out
    assert "[EVAL] Greedy from every start (no-op starts 0-3): the flag in 0 of 4" in out, out
    assert [line.split(" (")[0] for line in out.splitlines() if line.startswith("[EVAL] Start ")] == [
        f"[EVAL] Start {k}" for k in range(4)]
    saved = json.loads((run / "eval_every_start.json").read_text())
    assert saved["flags"] == 0 and [g["noops"] for g in saved["games"]] == [0, 1, 2, 3]


@pytest.mark.parametrize("argv,said", [
    (["--every-start"], "--every-start plays --eval's games from every no-op start; add --eval RUN"),
    (["--eval", "RUN", "--every-start", "--eval-epsilon", "0.05"], "--eval-epsilon: --every-start plays each start"),
    (["--eval", "RUN", "--every-start", "--noop-max", "5"], "--noop-max: --every-start plays each start"),
])
def test_eval_every_start_refuses_what_it_would_drop(argv, said, tmp_path, capsys):
    from mario_rl_optimized import main

    run = _run(tmp_path, 0, mario_actions="right_run", noop_max=3)
    assert main([str(run) if a == "RUN" else a for a in argv]) == 2
    assert said in capsys.readouterr().err
    assert not (run / "eval_every_start.json").exists()


def test_eval_every_start_refuses_a_run_with_sticky_actions_in_one_line(tmp_path, capsys):
    from mario_rl_optimized import main

    run = _run(tmp_path, 0, mario_actions="right_run", sticky_actions=0.25)
    assert main(["--eval", str(run), "--every-start"]) == 2
    assert "--every-start: sticky actions 0.25: a start is many games, not one; drop --every-start" in capsys.readouterr().err
