"""Game families as plug-ins of the env layer (issue 90, item 2): what a kind of game adds to the
data path (Mario's x position, his flag, the stall rule and their statistics) comes from
``wrappers/families.py``, so the transport, the rollout, the replay and the records name no game.

The scan reads each module's code with ``ast``: names, attributes, arguments, keywords, imports
and the strings that are not docstrings. Comments and docstrings may name a game (they explain
why); the code may not, or a third family would have to touch it."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent

# the transport, the rollout, the replay and the records (whole games, epochs, metrics, files)
GAME_FREE = ("pipeline/transport", "pipeline/actors", "pipeline/replay", "pipeline/records")

# what names a game or one family's own figures: the games, the info keys, the rule and the
# statistics Mario adds; "flag" alone is the key of his games' flag in episodes.jsonl. The entry
# script's name (mario_rl_optimized.py, in messages and the Hub's model card) names the program.
GAME_WORDS = re.compile(r"mario|nes[-_]py|x_pos|flag_get|(?<![a-z])stall|distance|flag_rate|atari|ale[-_]py|\bale\b"
                        r"|pong", re.IGNORECASE)
GAME_KEYS = {"flag"}
PROGRAM = "mario_rl_optimized"


def modules() -> list[Path]:
    out = []
    for entry in GAME_FREE:
        path = ROOT / entry
        out += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return out


def code_words(tree: ast.AST):
    """(line, word) of every name and non-docstring string in a module's code."""
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                  and isinstance(node.value.value, str)}
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name):
            yield line, node.id
        elif isinstance(node, ast.Attribute):
            yield line, node.attr
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield line, node.name
        elif isinstance(node, ast.arg):
            yield line, node.arg
        elif isinstance(node, ast.keyword) and node.arg:
            yield line, node.arg
        elif isinstance(node, ast.alias):
            yield line, node.name
            if node.asname:
                yield line, node.asname
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield line, node.module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield line, node.value


def game_words(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.relative_to(ROOT)}:{line}: {word!r}" for line, word in code_words(tree)
            if GAME_WORDS.search(word.replace(PROGRAM, "")) or word in GAME_KEYS]


def test_the_scan_sees_code_and_not_comments_or_docstrings():
    tree = ast.parse('"""Mario\'s module."""\n# the stall rule\nx = 1  # x_pos\n'
                     'def f(a):\n    """flag_get"""\n    return a["x_pos"], mario.flag_get, f"{a} distance"\n')
    words = [w for _, w in code_words(tree)]
    assert "x_pos" in words and "mario" in words and "flag_get" in words and any("distance" in w for w in words)
    assert "Mario's module." not in words and "flag_get" not in [w for w in words if w != "flag_get"]
    assert not any("stall" in w or "Mario" in w for w in words)
    assert not GAME_WORDS.search("pip install wandb") and GAME_WORDS.search("--stall-steps")


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_transport_rollout_replay_and_records_name_no_game(path):
    assert game_words(path) == [], "a game family's own names belong in wrappers/families.py"


# ----------------------------------------------------------------------------- the plug-in
def test_each_env_id_gets_its_family_and_the_readers_gather_every_familys_keys():
    from wrappers.families import ATARI, ENV_PACKAGES, GAME_KEYS, MARIO, PIXEL, SCORE_METRICS, game_family

    assert game_family("SuperMarioBros-1-1-v0") is MARIO and game_family("ALE/Pong-v5") is ATARI
    assert game_family("tests.catch_env:FlagCatch-v0") is PIXEL
    assert GAME_KEYS == ("distance", "flag") and SCORE_METRICS == ("distance",)
    assert ENV_PACKAGES == ("gymnasium", "ale-py", "nes-py", "gym-super-mario-bros")  # the record's order of old
    assert ATARI.fields == () and [n for n, _ in MARIO.fields] == ["x_pos", "flag_get"]


def test_a_batch_of_envs_reports_what_its_family_reads_from_the_info():
    from wrappers import BatchedEnv, EnvOptions

    env = BatchedEnv("tests.catch_env:FlagCatch-v0", EnvOptions(episodic_life=False), 2)
    try:
        env.reset(seed=0)
        st = env.step(np.zeros(2, np.int64))
        assert set(st.extras) == {"x_pos", "flag_get"} and st.extras["x_pos"].dtype == np.float32
    finally:
        env.close()
    env = BatchedEnv("tests.catch_env:Catch-v0", EnvOptions(episodic_life=False), 2)
    try:
        env.reset(seed=0)
        st = env.step(np.zeros(2, np.int64))
        assert np.isnan(st.extras["x_pos"]).all() and not st.extras["flag_get"].any()  # reports none: NaN
    finally:
        env.close()


class LapTracker:
    """A third family's state, made up here: each game counts the laps its info reports."""

    def __init__(self, family, num_envs):
        self.family, self.cuts = family, 0
        self.laps = np.zeros(num_envs, np.int16)

    def step(self, st, live, terminated, learned):
        self.laps += (live & st.extras["lap"]).astype(np.int16)
        return None, None, learned

    def record(self, fields):
        fields["laps"] = self.laps.copy()

    def restart(self, restart, reset):
        self.laps[reset] = 0


def lap_family():
    from wrappers.families import GameFamily

    class LapFamily(GameFamily):
        fields = (("laps", np.int16),)
        game_keys = ("laps",)

        def tracker(self, num_envs, opts=None):
            return LapTracker(self, num_envs)

        def game_stats(self, fields, i):
            return {"laps": int(fields["laps"][i])}

    return LapFamily("laps")


class LapEnvs:
    """Two envs whose game lasts 5 steps, a lap at every odd step."""

    num_envs, n_actions = 2, 2

    def __init__(self):
        self.family = lap_family()
        self.t, self.done = 0, False

    def reset(self, seed=None):
        return np.zeros((2, 84, 84), np.uint8)

    def step(self, actions):
        from wrappers.batched import BatchStep

        reset = np.full(2, self.done)
        self.t = 0 if self.done else self.t + 1
        self.done = self.t == 5
        no = np.zeros(2, bool)
        return BatchStep(np.zeros((2, 84, 84), np.uint8), np.ones(2, np.float32), np.full(2, self.done), no, reset,
                         {"lap": np.full(2, self.t % 2 == 1)})


class ZeroQ(torch.nn.Module):
    def forward(self, x):
        return torch.zeros(len(x), 2)


def test_a_new_family_rides_the_rollout_ring_and_records_without_a_change_to_them():
    """A made-up family (laps): its field crosses a real ring, the consolidation thread's game
    rows carry its statistic; nothing of the data path or the records knows of it."""
    from pipeline.transport.games import finished_games
    from pipeline.records.episodes import episode_row
    from pipeline.transport.ring import Ring
    from pipeline.actors.rollout import Rollout

    env = LapEnvs()
    rollout = Rollout(env, ZeroQ(), 4, False, seed=0)
    ring = Ring.create("test_lap_family", 64, extras=env.family.fields)
    try:
        for _ in range(7):
            frames, fields, _, _ = rollout.step(0.0)
            ring.push(frames, **fields)
        got = []
        ring.drain(64, lambda frames, fields: got.extend(finished_games(fields, 0, 0.0, env.family.game_stats)))
    finally:
        ring.close()
    assert [g.stats for g in got] == [{"laps": 3}, {"laps": 3}]  # laps at steps 1, 3, 5 of the game
    row = episode_row(got[0], 0.0, 0, 0)
    assert row["laps"] == 3 and row["return"] == 5.0 and row["length"] == 5


def test_the_mario_family_gives_the_epoch_and_the_card_what_they_said_before():
    from wrappers.families import ATARI, MARIO, PIXEL
    from wrappers.options import EnvOptions

    means = {"return": 1.0, "length": 200.0, "distance": 795.04, "flag": 0.05}
    assert MARIO.epoch_figure(means) == "Distance: 795.0" and ATARI.epoch_figure(means) == "Length: 200"
    assert PIXEL.epoch_figure(means) == "Length: 200"  # a module env's line, as before the families
    assert MARIO.epoch_notes(12, True, "9/10 greedy") == ", Stalls: 12, Eval flags: 9/10 greedy"
    assert MARIO.epoch_notes(12, False, None) == "" and ATARI.epoch_notes(12, True, "x") == ""
    assert MARIO.epoch_row(means) == {"distance_mean": 795.04, "flag_rate": 0.05} and ATARI.epoch_row(means) == {}
    assert MARIO.rule_on(EnvOptions(stall_steps=5)) and not MARIO.rule_on(EnvOptions())
    assert (MARIO.card_note({"distances": [100.0, 300.0], "flags": [True, False]})
            == " Mean distance 200; flag reached 1/2.")
    assert ATARI.card_note({"returns": [1.0]}) == "" and MARIO.old_score_metric == "distance"


def test_a_collector_that_names_other_fields_than_its_ring_holds_is_refused_at_attach():
    """The learner lays out each ring for its game family's fields and each collector attaches
    naming its own: a mismatch is refused with the reason, not written where the learner reads
    other fields."""
    from pipeline.transport.ring import Ring, RingLayoutError
    from wrappers.families import MARIO

    ring = Ring.create("test_ring_layout", 16, extras=MARIO.fields)
    try:
        Ring.attach(ring.name, 16, extras=MARIO.fields).close()
        with pytest.raises(RingLayoutError, match="other record fields"):
            Ring.attach(ring.name, 16)
        with pytest.raises(RingLayoutError, match="other record fields"):
            Ring.attach(ring.name, 16, extras=(("x_pos", np.float64), ("flag_get", np.bool_)))
    finally:
        ring.close()
