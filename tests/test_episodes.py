"""Time to score, counted game by game: the rolling mean of the last 20 whole games, the first
crossing of each milestone, and the step axis of the learning curves."""
import json

import pytest

from pipeline.records.curves import format_steps
from pipeline.records.episodes import EPISODES_NAME, ScoreTracker, read_episodes, score_run


def row(i, ret, **kw):
    return {"wall_s": 60.0 * i, "agent_steps": 1000 * i, "updates": 10 * i, "samples_trained": 320 * i,
            "return": ret, "length": 100, **kw}


def test_milestones_count_only_with_a_full_window():
    tracker = ScoreTracker([-15, 0, 18], window=20)
    assert tracker.add_row(row(1, 21.0)) == []  # one lucky game is not a score
    for i in range(2, 20):
        tracker.add_row(row(i, -21.0))
    assert tracker.mean is None and tracker.reached == {}
    reached = tracker.add_row(row(20, -21.0))
    assert reached == [] and tracker.mean == pytest.approx((21 - 19 * 21) / 20)


def test_first_crossing_records_minutes_steps_updates_and_samples():
    rows = [row(i, -21.0) for i in range(1, 21)] + [row(i, 21.0) for i in range(21, 60)]
    summary, curve = score_run(rows, [-15, 0, 18])
    by_value = {m["value"]: m for m in summary["milestones"]}
    # the mean of the last 20 passes -15 when 3 of them are wins: game 23
    assert by_value[-15]["minutes"] == 23.0 and by_value[-15]["agent_steps"] == 23_000
    assert by_value[-15]["updates"] == 230 and by_value[-15]["samples_trained"] == 7360 and by_value[-15]["games"] == 23
    assert by_value[0]["agent_steps"] == 30_000  # 10 wins of 20
    assert by_value[18]["agent_steps"] == 39_000  # (19 * 21 - 21) / 20 = 18.9
    assert summary["best_mean"] == 21.0 and curve[0] == (20.0, 20_000, -21.0)


def test_a_milestone_never_reached_is_reported_as_none():
    summary, _ = score_run([row(i, -20.0) for i in range(1, 30)], [-15, 18])
    assert [m["minutes"] for m in summary["milestones"]] == [None, None]


def test_distance_metric_for_mario():
    rows = [row(i, 0.0, distance=1500.0, flag=False) for i in range(1, 21)]
    summary, _ = score_run(rows, [1000], metric="distance")
    assert summary["milestones"][0]["agent_steps"] == 20_000
    with pytest.raises(ValueError, match="score metric"):
        ScoreTracker([1], metric="speed")


def test_read_episodes_skips_a_half_written_last_line(tmp_path):
    (tmp_path / EPISODES_NAME).write_text(json.dumps(row(1, 1.0)) + "\n" + '{"wall_s": 1')
    assert read_episodes(tmp_path) == [row(1, 1.0)]
    with pytest.raises(FileNotFoundError, match="episodes.jsonl"):
        read_episodes(tmp_path / "nothing")


@pytest.mark.parametrize("x,label", [(0, "0"), (950, "950"), (100_000, "100k"), (150_000, "150k"),
                                     (1_000_000, "1M"), (1_200_000, "1.2M"), (12_500_000, "12.5M")])
def test_step_axis_labels_are_short(x, label):
    assert format_steps(x) == label


def test_window_means_cover_the_games_there_are_and_the_score_waits_for_twenty():
    tracker = ScoreTracker(window=20)
    assert tracker.window_means() == {"return": None, "length": None, "distance": None, "flag": None}
    for i in range(1, 4):
        tracker.add_row(row(i, float(i)))
    means = tracker.window_means()
    assert means["return"] == 2.0 and means["distance"] is None and tracker.mean is None
    for i in range(4, 26):  # the window keeps the last 20: games 6..25
        tracker.add_row(row(i, float(i)))
    assert tracker.mean == tracker.window_means()["return"] == pytest.approx(15.5)


def test_a_kept_runs_gzip_copy_reads_as_the_file(tmp_path):
    import gzip

    rows = [row(i, float(i)) for i in range(1, 4)]
    (tmp_path / (EPISODES_NAME + ".gz")).write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in rows).encode()))
    assert read_episodes(tmp_path) == rows  # asked for episodes.jsonl, found its .gz


def test_a_resumed_runs_score_goes_on_from_the_games_before_it(tmp_path):
    """A resumed run's last-20 mean (epoch lines, metrics.jsonl, best.pt, --target-score) counts
    the games booked before its checkpoint: full at once, not rebuilt from 20 new games, and a
    target those games already reached is not reported again."""
    import time

    import torch

    from config_optimized import Config
    from pipeline.transport.games import Episode
    from pipeline.agent.learner import Learner
    from pipeline.records.books import RunBooks
    from pipeline.records.counters import RunCounters
    from pipeline.replay import Replay
    from pipeline.settings.hardware import Hardware

    earlier = [row(i, -21.0 + i) for i in range(1, 31)]  # 30 games; the last 20 before the checkpoint: 1..20 - 21
    after_checkpoint = row(31, 50.0)  # booked after the last checkpoint: the resumed run plays it again
    (tmp_path / EPISODES_NAME).write_text("".join(json.dumps(r) + "\n" for r in [*earlier, after_checkpoint]))
    cfg = Config.of(amp=False, run_dir=str(tmp_path), tensorboard=False, target_score=-5.0)
    hw = Hardware(2, 24 * 2**30, 20 * 2**30, "test cpu", True, False, None, 0, False)
    start = RunCounters(agent_steps=30_000, episodes=30, wall_s=1800.0, epoch=30)
    books = RunBooks(cfg, hw, lambda line: None, [], start, time.monotonic(), Learner(cfg.learner, 4, 6, torch.device("cpu")),
                     Replay.of(400, 1, 4), 6)
    try:
        assert books.score.mean == pytest.approx(sum(-21.0 + i for i in range(11, 31)) / 20)  # games 11..30
        assert books.score.window_means()["length"] == 100
        assert not books.add_games([Episode(10.0, 100, 1000, time.monotonic())], 5)
        assert books.score.mean == pytest.approx(sum(-21.0 + i for i in range(12, 31)) / 20 + 10.0 / 20)
    finally:
        books.close()


def test_a_target_reached_in_games_booked_at_an_epochs_end_still_stops_the_run(tmp_path):
    """The epoch's end books the games finished since the last look and drops the answer; the
    target those games reach must still stop the run at the next look (it once trained on to
    the time limit, the score line logged)."""
    import time

    import torch

    from config_optimized import Config
    from pipeline.transport.games import Episode
    from pipeline.agent.learner import Learner
    from pipeline.records.books import RunBooks
    from pipeline.records.counters import RunCounters
    from pipeline.replay import Replay
    from pipeline.settings.hardware import Hardware

    cfg = Config.of(amp=False, run_dir=str(tmp_path), tensorboard=False, target_score=0.5)
    hw = Hardware(2, 24 * 2**30, 20 * 2**30, "test cpu", True, False, None, 0, False)
    books = RunBooks(cfg, hw, lambda line: None, [], RunCounters(), time.monotonic(),
                     Learner(cfg.learner, 4, 6, torch.device("cpu")), Replay.of(400, 1, 4), 6)
    try:
        game = [Episode(1.0, 6, 100, time.monotonic())]
        assert not any(books.add_games(game, 1) for _ in range(19))  # 19 games: the window is not full
        books.add_games(game, 1)  # the 20th, booked at an epoch's end: its answer is dropped
        assert books.add_games([], 1)  # the next look sees the target reached
    finally:
        books.close()
