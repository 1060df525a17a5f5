"""Greedy evaluation of a checkpoint: plays full games (no life-loss episodes, raw rewards),
prints mean and median return (Mario: distance and flag rate) and can record one episode to an
MP4 at the game's own resolution."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import os
import statistics
import time
from pathlib import Path

import numpy as np

from models import NetworkSpec, build_model
from wrappers.families import stand_still_step

from ..records import checkpoint as ckpt
from ..records.episodes import SCORE_WINDOW
from ..records.files import BEST_EVAL_NAME, BEST_NAME, CHECKPOINT_NAME, EVAL_NAME
from ..records.record import append_jsonl, write_json
from ..settings.layers import trained_config
from ..transport.transition import EP_END, EXPLORED, LAST, TERM, TRUNC

# How the games are played, which an evaluation may change from what the run trained with (as
# Machado et al. 2018 evaluate agents with and without sticky actions); every other setting is
# the checkpoint's own.
PLAY_OPTIONS = ("sticky_actions", "noop_max")
# A game's last agent steps in which a random action (epsilon's) is counted: 8 steps are 32 NES
# frames, about the rise of Mario's highest jump, which a random action without A cuts short.
NEAR_END = 8
# A game that has not passed its furthest x for this many agent steps stood still: it is scored
# where it stands (``Game.stood``) instead of waited out. A greedy Mario that presses right+B
# against the flagpole's base sees the same frames step after step and stands until the clock
# runs out, ~2,000 agent steps, seven games' worth of an evaluation's time; 500 steps (2,000 NES
# frames, 33 s of play) is far past any wait a level asks of a right-moving action set.
STAND_STILL_STEPS = 500


@dataclasses.dataclass
class EvalResult:
    env_id: str
    returns: list[float]
    lengths: list[int]
    distances: list[float]
    flags: list[bool]
    epsilon: float = 0.0
    checkpoint: str = ""
    action_digests: list[str] = dataclasses.field(default_factory=list)  # one per episode
    weights_sha256: str = ""  # the checkpoint file played: eval.json is of exactly these weights
    sticky_actions: float | None = None  # the games' sticky-action probability (None: the env has none)
    noop_max: int | None = None  # up to this many no-op steps began each game (None: the env has none)
    # random actions (epsilon's) among each game's last NEAR_END agent steps: did the noise end it?
    random_near_end: list[int] = dataclasses.field(default_factory=list)
    stood: list[bool] = dataclasses.field(default_factory=list)  # one per game: ended standing still (Game.stood)

    @property
    def identical(self) -> bool:
        """Every episode took the same actions: one game played N times (a greedy policy on a
        deterministic game)."""
        return len(self.action_digests) > 1 and len(set(self.action_digests)) == 1

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        d["episodes"] = len(self.returns)
        d["return_mean"] = statistics.fmean(self.returns)
        d["all_episodes_identical"] = self.identical
        return d

    def write(self, path: Path) -> Path:
        """``eval.json`` beside the checkpoint: what a script or a model card reads."""
        return write_json(path, self.to_json())

    def append_to(self, path: Path) -> Path:
        """One row of ``eval_history.jsonl``: eval.json holds the last evaluation only, so a
        greedy one and one at epsilon 0.05 of the same weights are both kept here."""
        return append_jsonl(path, {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **self.to_json()})

    def summary(self) -> str:
        n = len(self.returns)
        s = (f"[EVAL] {self.env_id}: {n} episodes, return mean {statistics.fmean(self.returns):.2f}, "
             f"median {statistics.median(self.returns):.2f}, min {min(self.returns):.2f}, max {max(self.returns):.2f}, "
             f"length mean {statistics.fmean(self.lengths):.0f}")
        if self.distances:
            s += (f", distance mean {statistics.fmean(self.distances):.0f}, best {max(self.distances):.0f}, "
                  f"flag reached {sum(self.flags)}/{n}")
            stood = [d for d, st in zip(self.distances, self.stood) if st]
            if stood:  # found, not waited out: where the policy stands still
                s += f" ({len(stood)} stood still, at x {', '.join(f'{d:,.0f}' for d in sorted(stood))})"
            misses = [k for k, f in zip(self.random_near_end, self.flags) if not f]
            if self.epsilon > 0 and misses:  # did the noise end them? (chance: 1 - (1 - epsilon) ** NEAR_END)
                s += (f" ({sum(k > 0 for k in misses)} of the {len(misses)} misses with a random action in their "
                      f"last {NEAR_END} steps)")
        s += f", epsilon {self.epsilon:g}"
        if self.sticky_actions is not None:
            s += f", sticky actions {self.sticky_actions:g}, no-op starts 0-{self.noop_max}"
        if self.identical:
            s += (f"\n[EVAL] Warning: all {n} episodes were the same game (a greedy policy on a deterministic "
                  "game); --eval-epsilon 0.05, as CleanRL evaluates, plays different ones, and so do the "
                  "checkpoints of a run trained with --noop-max N (random no-op starts, as the Atari and "
                  "Mario defaults train)")
        return s


class VideoWriter:
    """An H.264 MP4 (yuv420p, its index at the front: browsers and the Hub's preview play it as it
    downloads) through the ffmpeg build that imageio-ffmpeg ships, libx264 in it. OpenCV's own
    writer gave MPEG-4 Part 2 (mp4v), which browsers do not play. Written to PATH.tmp and renamed
    over PATH once whole: a run or an --eval stopped midway leaves no half-written video."""

    QUALITY = 8  # imageio-ffmpeg's 0-10 scale (libx264 -crf 10): sharp pixel art, ~1 MB a minute of Mario

    def __init__(self, path: Path, fps: float):
        self.path, self.fps, self.writer = Path(path), fps, None
        self.tmp = self.path.with_name(self.path.name + ".tmp")
        self.frames = 0

    def add(self, rgb: np.ndarray) -> None:
        if self.writer is None:
            import imageio_ffmpeg

            h, w = rgb.shape[:2]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = imageio_ffmpeg.write_frames(
                str(self.tmp), (w, h), fps=self.fps, codec="libx264", pix_fmt_in="rgb24", pix_fmt_out="yuv420p",
                quality=self.QUALITY, macro_block_size=2, ffmpeg_log_level="error",
                output_params=["-f", "mp4", "-movflags", "+faststart"])
            self.writer.send(None)  # starts ffmpeg
        self.writer.send(np.ascontiguousarray(rgb[..., :3]))
        self.frames += 1

    def close(self, keep: bool = True) -> None:
        """Finish the file (``keep``), or remove what was written (a play that failed)."""
        if self.writer is None:
            return
        writer, self.writer = self.writer, None
        try:
            writer.close()
        except BaseException:
            self.tmp.unlink(missing_ok=True)
            raise
        if keep:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)


def weights_digest(checkpoint: str | Path) -> str:
    """SHA-256 of the checkpoint file: what ties an evaluation to the weights it played (file
    times do not: os.replace keeps a file's mtime from when it was written)."""
    h = hashlib.sha256()
    with open(ckpt.checkpoint_file(checkpoint), "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def eval_lock(folder: str | Path):
    """Hold the folder whose eval.json an --eval writes: a second --eval of it at once is refused
    (the last to finish would win, pairing one set of weights with another's score). A flock on
    the folder itself: released by the kernel when the process ends, however it ends, and no
    lock file is left behind."""
    import fcntl

    from config_optimized import ConfigError

    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"another --eval is writing {Path(folder) / EVAL_NAME}; wait for it to finish, or "
                              "evaluate a copy of the checkpoint in another folder") from None
        yield
    finally:
        os.close(fd)


# Games played at once: one batched forward pass acts in all of them, as a collector's does.
EVAL_ENVS = 8


@dataclasses.dataclass(frozen=True)
class Game:
    ret: float
    length: int
    distance: float       # Mario's furthest x position; NaN for other games
    flag: bool
    actions: str          # digest of the actions taken: equal digests, equal games
    random_near_end: int  # random actions (epsilon's) among its last NEAR_END agent steps
    stood: bool = False   # ended after STAND_STILL_STEPS agent steps without passing its furthest x


def env_quotas(episodes: int, num_envs: int) -> list[int]:
    """Games each env plays: fixed beforehand, so that short games, which end first, are not
    over-counted (the bias of taking the first N games that end in a batch of envs)."""
    return [episodes // num_envs + (i < episodes % num_envs) for i in range(num_envs)]


def filmed_quotas(episodes: int, num_envs: int, filmed: int) -> list[int]:
    """``env_quotas``, with env 0 (the one filmed) playing at least ``filmed`` games, one after
    another; still fixed beforehand. ``filmed_envs`` gives the env count that leaves none idle."""
    quota = env_quotas(episodes, num_envs)
    if quota[0] >= filmed:
        return quota
    return [filmed, *env_quotas(episodes - filmed, num_envs - 1)] if num_envs > 1 else [episodes]


def filmed_envs(episodes: int, filmed: int) -> int:
    """Envs to play ``episodes`` games in, env 0 filming ``filmed`` of them (0 or 1: as many as
    the games, up to EVAL_ENVS)."""
    return min(episodes - max(filmed, 1) + 1, EVAL_ENVS)


def play_games(rollout, episodes: int, epsilon: float, max_steps: int, on_step=None, quota: list[int] | None = None,
               on_game=None, stand_still: int = STAND_STILL_STEPS) -> list[Game]:
    """``episodes`` whole games, played through a collector's ``Rollout`` (the same env batch,
    acting and records as training) with a fixed ``epsilon``; each env plays its quota
    (``env_quotas``, or ``quota``), and a game longer than ``max_steps`` agent steps, or one that
    reports an x position and has not passed its furthest for ``stand_still`` agent steps
    (``Game.stood``), is scored where it stands and its env plays no more (its quota passes to
    the others).
    ``on_step(fields)``: after every step, with its records; ``on_game(game)``: as each game ends."""
    quota = list(quota) if quota is not None else env_quotas(episodes, rollout.num_envs)
    if len(quota) != rollout.num_envs or sum(quota) != episodes:
        raise ValueError(f"quotas {quota} do not share {episodes} games among {rollout.num_envs} envs")
    played: list[list[Game]] = [[] for _ in quota]
    digests = [hashlib.sha1() for _ in quota]
    recent = [collections.deque(maxlen=NEAR_END) for _ in quota]  # each game's last steps: random or not
    furthest = np.full(rollout.num_envs, -np.inf)  # each game's furthest x so far, in its current area
    last = np.full(rollout.num_envs, np.nan)         # each game's x a step before
    still = np.zeros(rollout.num_envs, np.int64)   # agent steps since it last passed it
    retired = np.zeros(rollout.num_envs, bool)
    family = rollout.game.family  # what the games report besides: Mario's x position and flag
    nowhere = np.full(rollout.num_envs, np.nan, np.float32)  # a game with no x (Atari's)
    while sum(map(len, played)) < episodes and not retired.all():
        _, fields, _, _ = rollout.step(epsilon)
        if on_step is not None:
            on_step(fields)
        flags = fields["flags"]
        xs = family.positions(fields)
        xs = nowhere if xs is None else xs
        for i in range(rollout.num_envs):
            if retired[i] or len(played[i]) >= quota[i]:
                continue
            stood = False
            if flags[i] & LAST:  # the action was ignored; the record carries the game that ended
                over = bool(flags[i] & EP_END)
            else:
                digests[i].update(bytes((int(fields["action"][i]),)))
                recent[i].append(bool(flags[i] & EXPLORED))
                x = float(xs[i])  # NaN for a game with no x (Atari), which never stands still
                furthest[i], still[i] = stand_still_step(x, last[i], furthest[i], still[i])
                last[i] = x
                stood = bool(still[i] >= stand_still)
                over = int(fields["ep_len"][i]) >= max_steps or stood  # ep_len counts this step
            if over:
                # the flag counts where the game ended, not where a cut-short one stands
                got = bool(flags[i] & EP_END) and bool(family.game_stats(fields, i).get("flag", False))
                played[i].append(Game(float(fields["ep_return"][i]), int(fields["ep_len"][i]), float(xs[i]), got,
                                      digests[i].hexdigest(), sum(recent[i]), stood))
                if on_game is not None:
                    on_game(played[i][-1])
                digests[i] = hashlib.sha1()
                recent[i].clear()
                furthest[i], still[i], last[i] = -np.inf, 0, np.nan
                if not flags[i] & LAST:  # cut short: this env's game goes on, so it plays no more
                    retired[i] = True
                    left = quota[i] - len(played[i])
                    quota[i] = len(played[i])
                    others = [j for j in range(rollout.num_envs) if not retired[j]]
                    for k in range(left if others else 0):
                        quota[others[k % len(others)]] += 1
    return [g for env_games in played for g in env_games]


def played_options(env_id: str, trained, play: dict | None):
    """The EnvOptions the games are played with: the run's, as whole games with raw rewards, and
    ``play`` (fields of ``PLAY_OPTIONS``) in place of the run's own."""
    from config_optimized import ConfigError
    from wrappers.registry import is_module_env_id

    play = play or {}
    unknown = set(play) - set(PLAY_OPTIONS)
    if unknown:
        raise ValueError(f"not a play option: {sorted(unknown)}; these are: {PLAY_OPTIONS}")
    if play and is_module_env_id(env_id):
        raise ConfigError(f"{env_id} has no sticky actions or no-op starts to change; "
                          f"--{' --'.join(k.replace('_', '-') for k in play)} applies to ALE and Mario games")
    return dataclasses.replace(trained, episodic_life=False, clip_rewards=False, **play)


def played_sticky(env_id: str, opts) -> float | None:
    """The sticky-action probability the games are played with (-1 resolved to the env id's own)."""
    from wrappers.registry import is_module_env_id, sticky_probability

    return None if is_module_env_id(env_id) else sticky_probability(env_id, opts.sticky_actions)


@dataclasses.dataclass
class Policy:
    """A checkpoint's weights in the network they fit, ready to act, with what they were trained on."""
    path: Path            # the checkpoint file
    cfg: object           # the config the weights were trained with (config_optimized.Config)
    meta: dict            # the checkpoint's meta: env, n_actions, frame_stack, the network's settings
    model: object         # the network (torch.nn.Module), in eval mode, on the CPU
    digest: str           # the file's SHA-256
    state: dict           # the whole checkpoint (its counters, its "best" where the run kept it for a score)


def greedy_said(play: dict) -> str:
    """How a greedy play of a Mario evaluation is named: from every no-op start, or greedy games."""
    return "greedy from every start" if play.get("every_start") else "greedy"


def weights_said(policy: Policy) -> str:
    """What the weights played are, in words: what kept them, from when, with what score."""
    best = policy.state.get("best") or {}
    steps = best.get("agent_steps", (policy.state.get("counters") or {}).get("agent_steps"))
    at = f"at {steps:,} agent steps" if steps is not None else ""
    if policy.path.name == BEST_EVAL_NAME and "score" in best:
        if best.get("plays"):
            how = ", ".join(f"flag in {p['flags']}/{p['games']} " + (greedy_said(p) if p["epsilon"] == 0 else
                                                                     f"at epsilon {p['epsilon']:g}") for p in best["plays"])
        else:
            how = f"mean {best['metric']} {best['score']:.2f} over {best['games']} games at epsilon {best['epsilon']:g}"
        return f"the weights the run's evaluations kept ({at + '; ' if at else ''}confirmed on fresh games: {how})"
    if policy.path.name == BEST_NAME and "score" in best:
        return (f"the weights of the run's best mean {best['metric']} of {SCORE_WINDOW} training games "
                f"({best['score']:.2f}{', ' + at if at else ''})")
    what = "the run's last weights" if policy.path.name == CHECKPOINT_NAME else "its weights"
    return what + (f" ({at})" if at else "")


def load_policy(checkpoint: str | Path) -> Policy:
    """The network of a checkpoint file (or of the weights a run folder kept, ``kept_weights``)
    with its weights (the Polyak average where the run kept one), and the config it was trained
    with; every failure is a CheckpointError that names the file."""
    path = ckpt.kept_weights(checkpoint)
    digest = weights_digest(path) if path.is_file() else ""
    others = [n for n in (BEST_EVAL_NAME, BEST_NAME, CHECKPOINT_NAME) if n != path.name and (path.parent / n).is_file()]
    state = ckpt.load(path, fix=f"play another of the run's weights ({', '.join(str(path.parent / n) for n in others)})"
                      if others else "play another checkpoint, or train the run again")
    if digest and weights_digest(path) != digest:
        raise ckpt.CheckpointError(f"checkpoint {path} was replaced while it was being read (a run is saving "
                                   "it); evaluate it again")
    # played as the run trained: what a record from before a setting existed leaves out is filled in
    cfg = trained_config(state, path.parent)
    meta = state["meta"]
    model = build_model(NetworkSpec.from_meta(meta))
    model.load_state_dict(ckpt.policy_weights(state["learner"]))
    model.eval()
    return Policy(path, cfg, meta, model, digest, state)


# Seconds between --eval's progress lines while no game ends (a game of Pong is minutes on a CPU).
PROGRESS_S = 10.0


class Progress:
    """--eval's lines while it plays: one as each game ends (in the order they end), and one every
    PROGRESS_S while none does, so a long game shows it is being played."""

    def __init__(self, episodes: int, log):
        self.episodes, self.log = episodes, log
        self.done = self.steps = 0
        self.t0 = self.said = time.monotonic()

    def step(self, fields) -> None:
        self.steps += int(np.count_nonzero(~fields["flags"] & LAST))  # a LAST record is a reset, not a step
        now = time.monotonic()
        if now - self.said >= PROGRESS_S:
            self.said = now
            self.log(f"[EVAL] Playing: {self.done}/{self.episodes} games over, {self.steps:,} agent steps in "
                     f"{now - self.t0:,.0f} s")

    def game(self, game: Game) -> None:
        self.done += 1
        self.said = time.monotonic()
        self.log(f"[EVAL] game {self.done}/{self.episodes}: return {game.ret:.1f}, length {game.length:,}"
                 + ("" if np.isnan(game.distance) else f", distance {game.distance:.0f}, flag {game.flag}")
                 + (f", stood still for {STAND_STILL_STEPS} agent steps" if game.stood else ""))


@dataclasses.dataclass(frozen=True)
class Batch:
    games: list[Game]  # as many as were asked, or fewer where every env was retired (``play_games``)
    num_envs: int      # envs the batch was played in, seeded seed .. seed + num_envs - 1


def _play_batch(policy, opts, episodes: int, epsilon: float, max_steps: int, seed: int, video: str | Path | None,
                filmed: int, progress: Progress) -> Batch:
    """Up to ``episodes`` games of ``policy`` in one batch of envs built with ``opts`` (env i
    seeded ``seed + i``); env 0 films its first ``filmed`` games to ``video``."""
    from wrappers import BatchedEnv
    from wrappers.registry import is_module_env_id

    from ..actors.rollout import Rollout

    cfg, meta = policy.cfg, policy.meta
    # a video needs frames to render: the envs then step through gymnasium's Python wrappers
    num_envs = filmed_envs(episodes, filmed)
    env = BatchedEnv(cfg.env, opts, num_envs, native=video is None, render_mode="rgb_array" if video else None)
    if env.n_actions != meta["n_actions"]:
        env.close()
        raise ckpt.CheckpointError(f"checkpoint {policy.path} has {meta['n_actions']} actions but {cfg.env} with "
                                   f"these settings has {env.n_actions}; was it trained with another action set?")
    # ALE and NES games run at 60 Hz and the agent sees every frame_skip-th frame
    fps = (env.render_fps() or 15) if is_module_env_id(cfg.env) else 60 / max(1, cfg.env_options.frame_skip)
    recorder = VideoWriter(Path(video), fps) if video else None
    whole = False
    try:
        rollout = Rollout(env, policy.model, meta["frame_stack"], False, seed)
        shot = 0  # env 0's games filmed to their end

        def on_step(fields):
            nonlocal shot
            progress.step(fields)
            if shot >= filmed:
                return
            recorder.add(env.render_first())  # the screen after this step (after a reset: the next game's first)
            first = fields["flags"][0]
            if not first & LAST and (first & (TERM | TRUNC) or fields["ep_len"][0] >= max_steps):
                shot += 1  # its game is over, its last screen filmed
        if filmed:
            recorder.add(env.render_first())
        games = play_games(rollout, episodes, epsilon, max_steps, on_step,
                           filmed_quotas(episodes, num_envs, filmed), progress.game, STAND_STILL_STEPS)
        whole = True
    finally:
        if recorder is not None:
            recorder.close(keep=whole)
        env.close()
    return Batch(games, num_envs)


def evaluate(checkpoint: str | Path, episodes: int = 10, video: str | Path | None = None, seed: int = 12345,
             epsilon: float = 0.0, max_steps: int = 27_000, log=print, play: dict | None = None,
             video_games: int = 1) -> EvalResult:
    """Play ``episodes`` whole games (no life-loss episodes, raw rewards) with the checkpoint's
    weights, acting as the collectors do, in batches of up to ``EVAL_ENVS`` envs built as
    training builds them, but for ``play`` (``PLAY_OPTIONS``: e.g. ``{"sticky_actions": 0.0}``);
    ``video``: an H.264 MP4 of env 0's first ``video_games`` games, one after another. ``log``
    gets a line as each game ends and every PROGRESS_S while none does."""
    from wrappers.registry import is_mario

    filmed = video_games if video else 0
    if video and not 1 <= video_games <= episodes:
        raise ValueError(f"video_games {video_games}: film 1 to {episodes} (the games played)")
    policy = load_policy(checkpoint)
    cfg = policy.cfg
    last = Path(checkpoint) / CHECKPOINT_NAME
    log(f"[EVAL] Playing {policy.path}: {weights_said(policy)}"
        + (f"; {last} holds the last weights" if policy.path != last and last.is_file() else ""))
    opts = played_options(cfg.env, cfg.env_options, play)
    sticky = played_sticky(cfg.env, opts)
    res = EvalResult(cfg.env, [], [], [], [], epsilon=epsilon, checkpoint=str(policy.path), weights_sha256=policy.digest,
                     sticky_actions=sticky, noop_max=None if sticky is None else opts.noop_max)
    progress = Progress(episodes, log)
    games: list[Game] = []
    # A game cut where it stood still leaves its env mid-game, so that env plays no more; once
    # every env of a batch is so retired, the games still owed are played in a fresh batch, its
    # envs seeded on from the last batch's (env i of all the batches is seeded seed + i), so an
    # evaluation of N games is always N games. Only the first batch films.
    first_env = 0
    while len(games) < episodes:
        first = first_env == 0
        batch = _play_batch(policy, opts, episodes - len(games), epsilon, max_steps, seed + first_env,
                            video if first else None, filmed if first else 0, progress)
        games += batch.games
        first_env += batch.num_envs
    # Mario, or any game that reports how far it got and a flag
    mario = is_mario(cfg.env) or any(not np.isnan(g.distance) for g in games)
    for game in games:
        res.returns.append(game.ret)
        res.lengths.append(game.length)
        res.action_digests.append(game.actions)
        res.random_near_end.append(game.random_near_end)
        res.stood.append(game.stood)
        if mario:
            res.distances.append(game.distance)
            res.flags.append(game.flag)
    return res
