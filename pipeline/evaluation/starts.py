"""Greedy Mario play on every start: the exact share of games the weights finish, not a sample.

Mario's games differ only by their no-op start (0 to ``noop_max`` agent steps of NOOP after the
reset; no sticky actions): the NES is deterministic, and so is greedy play, so there are
``noop_max + 1`` games in all (31 with the preset), and an evaluation's "10 fresh greedy games",
whose envs draw their starts, draw 10 of them, repeats included: a start drawn twice is the same
game counted twice. Playing each once gives the flag rate itself: World 6-4's kept weights read 9
of 10 drawn games and reach the axe from 18 of their 31 starts (docs/notebook.md, "Every start");
``distinct_starts`` picks fresh greedy games that are different games. One env per start, not
the evaluation's batch.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from wrappers.families import stand_still_step

from .agent import load
from .evaluate import STAND_STILL_STEPS


@dataclasses.dataclass(frozen=True)
class StartGame:
    noops: int        # the start: agent steps of NOOP after the reset
    distance: float   # Mario's x where the game ended (or stood)
    flag: bool
    length: int       # agent steps played after the start
    stood: bool       # cut after STAND_STILL_STEPS agent steps without passing its furthest x
    ret: float = 0.0  # the game's return (raw rewards)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def distinct_starts(starts: int, games: int, seed: int) -> list[int]:
    """``games`` starts of ``starts`` (0 to ``starts - 1``) as fresh greedy games that are
    different games: a seeded permutation of them, then another once every start is in (so a
    start repeats only past ``starts`` games)."""
    rng = np.random.default_rng(seed)
    out: list[int] = []
    while len(out) < games:
        out += [int(k) for k in rng.permutation(starts)]
    return out[:games]


def play_every_start(checkpoint: str | Path, max_steps: int = 27_000,
                     stand_still: int = STAND_STILL_STEPS) -> list[StartGame]:
    """One greedy game from each no-op start, 0 to the run's ``noop_max``, of a Mario run's
    weights (a run folder: the weights it kept; or a .pt file). A game ends as an evaluation's
    does: at the game's end, at ``max_steps`` agent steps, or where it stood still for
    ``stand_still`` agent steps. Raises ValueError where the games are not deterministic (sticky
    actions) or not Mario's."""
    from wrappers.registry import why_starts_are_not_games

    agent = load(checkpoint)
    opts = agent.config.env_options
    why = why_starts_are_not_games(agent.env_id, opts)
    if why is not None:
        raise ValueError(why)
    # Every start at once, one env each, stepped in lockstep: one batched forward an agent step
    # for all the games still playing, instead of one per game.
    envs = [agent.make_env() for _ in range(opts.noop_max + 1)]
    try:
        obs = np.stack([env.reset(seed=k, options={"noops": k} if opts.noop_max else None)[0]
                        for k, env in enumerate(envs)])
        n = len(envs)
        furthest, still, last = np.full(n, -np.inf), np.zeros(n, np.int64), np.full(n, np.nan)
        length, ret = np.zeros(n, np.int64), np.zeros(n)
        games: dict[int, StartGame] = {}
        while len(games) < n:
            playing = [k for k in range(n) if k not in games]
            actions = agent.act(obs[playing])
            for k, action in zip(playing, np.atleast_1d(actions)):
                smb = envs[k].unwrapped
                obs[k], reward, terminated, truncated, _ = envs[k].step(int(action))
                length[k] += 1
                ret[k] += reward
                x = float(smb._x_position)
                furthest[k], still[k] = stand_still_step(x, last[k], furthest[k], still[k])
                last[k] = x
                stood = not (terminated or truncated) and still[k] >= stand_still
                if terminated or truncated or stood or length[k] >= max_steps:
                    games[k] = StartGame(k, x, bool(terminated and smb._flag_get), int(length[k]), bool(stood),
                                         float(ret[k]))
    finally:
        for env in envs:
            env.close()
    return [games[k] for k in range(n)]
