"""Epoch statistics: the speed figures (shared with the benchmark) and the [MAIN] lines and
metrics row an epoch's window becomes."""
import pytest

from pipeline.records.episodes import ScoreTracker
from pipeline.records.epoch_stats import EpochEnd, EpochWindow, PathMark, epoch_report, speed
from wrappers.families import ATARI, MARIO

NS = 1_000_000_000


def test_speed_gives_rates_and_shares():
    r = speed(10.0, 1_000, 120, 9.0, {"env": 3 * NS, "act": 1 * NS, "ring_wait": 0, "throttle": 4 * NS})
    assert (r["agent_steps_per_s"], r["updates_per_s"], r["learner_busy"]) == (100.0, 12.0, 0.9)
    assert r["collector_share"] == {"env": 0.375, "act": 0.125, "ring_wait": 0.0, "throttle": 0.5}


def test_an_epoch_becomes_two_log_lines_and_a_metrics_row():
    start = {"env": 0, "act": 0, "ring_wait": 0, "throttle": 0}
    w = EpochWindow(PathMark(t=100.0, agent_steps=10_000, updates=500, collector_ns=start, consolidation_s=1.0))
    for loss in (0.5, 0.3):
        w.add_update({"loss": loss, "td_error": 2 * loss, "q_mean": 1.0, "grad_norm": 3.0})
    w.update_s, w.idle_s = 15.0, 4.0
    games = ScoreTracker(metric="distance")
    for i in range(25):  # the window holds the last 20: games 5..24
        games.add_row({"wall_s": 0.0, "agent_steps": 0, "updates": 0, "samples_trained": 0, "return": 550.0 + 10 * i,
                       "length": 200, "distance": 650.0 + 10 * i, "flag": i == 24})
    at = PathMark(t=120.0, agent_steps=12_000, updates=740, consolidation_s=1.2, drops=0,
                  collector_ns={"env": 18 * NS, "act": 2 * NS, "ring_wait": 0, "throttle": 0})
    end = EpochEnd(at, epoch=3, games=games.window_means(), episodes_total=90, epsilon=0.5, buffer=12_000,
                   samples_trained=23_680, batch=32, game=MARIO, wall_s=3_725.0, eta="0:10:00")
    lines, row = epoch_report(w, end)
    assert lines[0] == ("[MAIN] Epoch 3 - Loss: 0.4000, TD Error: 0.8000, Reward: 695.00, Distance: 795.0, "
                        "Epsilon: 0.500, Buffer: 12,000")
    assert lines[1].startswith("[MAIN] Speed - 100 agent steps/s, 12.00 updates/s, 384 samples/s | learner: update 75%, "
                               "wait-batch 0%, idle 20% | consolidation 1% | collectors: env 90%, act 10%,")
    assert "elapsed 1:02:05, ETA 0:10:00" in lines[1]
    assert row["agent_steps_per_s"] == 100.0 and row["learner_busy"] == 0.75 and row["q_mean"] == 1.0 and row["grad_norm"] == 3.0
    assert row["distance_mean"] == 795.0 and row["flag_rate"] == pytest.approx(0.05)


def test_a_mario_epoch_line_shows_the_last_evaluations_flags():
    start = {"env": 0, "act": 0, "ring_wait": 0, "throttle": 0}
    w = EpochWindow(PathMark(t=0.0, agent_steps=0, updates=0, collector_ns=start, consolidation_s=0.0))
    at = PathMark(t=10.0, agent_steps=1_000, updates=0, collector_ns=start, consolidation_s=0.0)
    means = ScoreTracker(metric="distance").window_means()
    lines, _ = epoch_report(w, EpochEnd(at, 1, means, 0, 0.5, 1_000, 0, 32, MARIO, 10.0, "n/a",
                                             "9/10 greedy, 7/10 at 0.05"))
    assert lines[0].endswith("Buffer: 1,000, Eval flags: 9/10 greedy, 7/10 at 0.05")
    lines, _ = epoch_report(w, EpochEnd(at, 1, means, 0, 0.5, 1_000, 0, 32, MARIO, 10.0, "n/a", None))
    assert lines[0].endswith("Buffer: 1,000")  # no evaluation yet: the line as it always was


def test_an_epoch_beside_other_runs_says_so_in_its_speed_line_and_row():
    """The training runs beside this one at the epoch's end: none leaves the line as it was."""
    start = {"env": 0, "act": 0, "ring_wait": 0, "throttle": 0}
    w = EpochWindow(PathMark(t=0.0, agent_steps=0, updates=0, collector_ns=start, consolidation_s=0.0))
    at = PathMark(t=10.0, agent_steps=1_000, updates=0, collector_ns=start, consolidation_s=0.0)
    means = ScoreTracker(metric="return").window_means()
    alone = EpochEnd(at, 1, means, 0, 0.5, 1_000, 0, 32, ATARI, 10.0, "n/a")
    lines, row = epoch_report(w, alone)
    assert lines[1].endswith("ETA n/a") and row["other_runs"] == 0
    # a game family that adds nothing: the length in the line, no figures of its own in the row
    # but the count every row carries
    assert "Length: n/a, Epsilon" in lines[0] and row["stalls"] == 0 and "distance_mean" not in row
    lines, row = epoch_report(w, EpochEnd(at, 1, means, 0, 0.5, 1_000, 0, 32, ATARI, 10.0, "n/a", other_runs=2))
    assert lines[1].endswith("ETA n/a | shared: 2 other training run(s) on this machine") and row["other_runs"] == 2


def test_a_run_with_stall_steps_says_how_many_learning_episodes_they_ended_this_epoch():
    start = {"env": 0, "act": 0, "ring_wait": 0, "throttle": 0}
    w = EpochWindow(PathMark(t=0.0, agent_steps=0, updates=0, collector_ns=start, consolidation_s=0.0, cuts=40))
    at = PathMark(t=10.0, agent_steps=1_000, updates=0, collector_ns=start, consolidation_s=0.0, cuts=1_277)
    means = ScoreTracker(metric="distance").window_means()
    lines, row = epoch_report(w, EpochEnd(at, 1, means, 0, 0.5, 1_000, 0, 32, MARIO, 10.0, "n/a",
                                          "9/10 greedy, 7/10 at 0.05", rule_on=True))
    assert lines[0].endswith("Buffer: 1,000, Stalls: 1,237, Eval flags: 9/10 greedy, 7/10 at 0.05")
    assert row["stalls"] == 1_237
    lines, row = epoch_report(w, EpochEnd(at, 1, means, 0, 0.5, 1_000, 0, 32, MARIO, 10.0, "n/a"))
    assert lines[0].endswith("Buffer: 1,000")  # no --stall-steps: the line as it always was


def test_processor_lines_come_at_the_interval_while_the_replay_fills_then_one_after_each_epoch():
    """The consolidation thread's [PROCESSOR] line is the run's sign of life while the replay
    fills (every --consolidation-log-interval); once epochs end it follows an epoch's lines, one
    an epoch at most, so it does not bury them (a Mario log had 1,087 of them to 76 epochs)."""
    import time

    from pipeline.replay.consolidator import Consolidator

    lines = []
    c = Consolidator([], [], 1, lines.append, 0.01)  # no rings: the thread drains nothing and logs
    c.start()
    try:
        deadline = time.monotonic() + 30
        while len(lines) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert len(lines) >= 3 and all(line.startswith("[PROCESSOR] Processed: 0,") for line in lines)
        for epoch in range(2):
            c.epoch_end()
            while c.epoch_ended.is_set() and time.monotonic() < deadline:  # taken by the next line
                time.sleep(0.005)
            said = len(lines)
            time.sleep(0.2)  # twenty intervals without an epoch's end: no line
            assert len(lines) == said
    finally:
        c.stop_event.set()
        c.join()


def test_the_eta_counts_only_an_epoch_that_trained_at_its_ratio():
    """An epoch of the replay's fill plays without training, several times faster than learning:
    its pace says nothing of when the run ends (a Mario run's first ETA read 0:40:39, its second
    1:10:47). It gives no ETA, or the time limit as an upper bound; an epoch that trained does."""
    from pipeline.records.epoch_stats import eta, trained_at_its_ratio

    assert not trained_at_its_ratio(10_000, 0, 32, 4.0)          # the fill: no update
    assert not trained_at_its_ratio(10_000, 600, 32, 4.0)        # learning started late in the epoch
    assert trained_at_its_ratio(10_000, 1_250, 32, 4.0)          # 4 samples per agent step
    assert eta(5_000_000, 10_000, 700.0, 0.0, 20.0, paced=False) == "n/a until learning runs"
    assert eta(5_000_000, 10_000, 700.0, 60.0, 20.0, paced=False).startswith("0:59:40 at most (--time-limit")
    assert eta(5_000_000, 20_000, 200.0, 0.0, 80.0) == "6:55:00"  # 4,980,000 steps at 200/s
    assert eta(5_000_000, 20_000, 200.0, 60.0, 80.0) == "0:58:40"  # the time limit comes first
