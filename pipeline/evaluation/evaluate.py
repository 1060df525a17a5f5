"""Greedy evaluation of a checkpoint: plays full games (no life-loss episodes, raw rewards),
prints mean and median return (Mario: distance and flag rate) and can record one episode to an
MP4 at the game's own resolution."""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import statistics
from pathlib import Path

import numpy as np
import torch

from config_optimized import FIELDS, Config
from models import build_model

from ..records import checkpoint as ckpt
from ..settings.layers import as_trained, flatten


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
        from ..records.record import write_json

        return write_json(path, self.to_json())

    def summary(self) -> str:
        n = len(self.returns)
        s = (f"[EVAL] {self.env_id}: {n} episodes, return mean {statistics.fmean(self.returns):.2f}, "
             f"median {statistics.median(self.returns):.2f}, min {min(self.returns):.2f}, max {max(self.returns):.2f}, "
             f"length mean {statistics.fmean(self.lengths):.0f}")
        if self.distances:
            s += (f", distance mean {statistics.fmean(self.distances):.0f}, best {max(self.distances):.0f}, "
                  f"flag reached {sum(self.flags)}/{n}")
        s += f", epsilon {self.epsilon:g}"
        if self.identical:
            s += (f"\n[EVAL] Warning: all {n} episodes were the same game (a greedy policy on a deterministic "
                  "game); --eval-epsilon 0.05, as CleanRL evaluates, plays different ones, and so do the "
                  "checkpoints of a run trained with --noop-max N (random no-op starts, as the Atari and "
                  "Mario defaults train)")
        return s


class VideoWriter:
    """MP4 through OpenCV's bundled FFmpeg: gymnasium's RecordVideo needs moviepy, which we would
    otherwise not install."""

    def __init__(self, path: Path, fps: float):
        self.path, self.fps, self.writer = path, fps, None

    def add(self, rgb: np.ndarray) -> None:
        import cv2

        if self.writer is None:
            h, w = rgb.shape[:2]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = cv2.VideoWriter(str(self.path), cv2.VideoWriter_fourcc(*"mp4v"), self.fps, (w, h))
            if not self.writer.isOpened():
                raise OSError(f"could not open {self.path} for writing an MP4 video")
        self.writer.write(np.ascontiguousarray(rgb[..., ::-1]))  # OpenCV wants BGR

    def close(self) -> None:
        if self.writer is not None:
            self.writer.release()


def recorded_commit(folder: Path) -> str | None:
    """The commit the run record in ``folder`` (config.json) names, if there is one."""
    import json

    from ..records.files import RECORD_NAME

    try:
        return json.loads((folder / RECORD_NAME).read_text()).get("git_commit")
    except (OSError, ValueError, AttributeError):
        return None


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
    import os

    from config_optimized import ConfigError

    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"another --eval is writing {Path(folder) / 'eval.json'}; wait for it to finish, or "
                              "evaluate a copy of the checkpoint in another folder") from None
        yield
    finally:
        os.close(fd)


def evaluate(checkpoint: str | Path, episodes: int = 10, video: str | Path | None = None, seed: int = 12345,
             epsilon: float = 0.0, max_steps: int = 27_000, log=print) -> EvalResult:
    from wrappers import make_env
    from wrappers.registry import is_mario, is_module_env_id

    digest = weights_digest(checkpoint) if ckpt.checkpoint_file(checkpoint).is_file() else ""
    state = ckpt.load(checkpoint)
    if digest and weights_digest(checkpoint) != digest:
        raise ckpt.CheckpointError(f"checkpoint {checkpoint} was replaced while it was being read (a run is saving "
                                   "it); evaluate it again")
    saved = {k: v for k, v in flatten(state["config"]).items() if k in FIELDS}
    # played as the run trained: what a record from before a setting existed leaves out is filled in
    fills, _ = as_trained(saved, recorded_commit(ckpt.checkpoint_file(checkpoint).parent), saved.get("env", Config.env))
    cfg = Config.of(**{**saved, **fills})
    meta = state["meta"]
    opts = dataclasses.replace(cfg.env_options, episodic_life=False, clip_rewards=False)
    env = make_env(cfg.env, opts, render_mode="rgb_array" if video else None)
    if int(env.action_space.n) != meta["n_actions"]:
        raise ckpt.CheckpointError(f"checkpoint {checkpoint} has {meta['n_actions']} actions but {cfg.env} with "
                                   f"these settings has {env.action_space.n}; was it trained with another action set?")
    model = build_model(meta["model_arch"], meta["frame_stack"], meta["n_actions"], meta["dueling"],
                        meta.get("quantiles", 0))  # checkpoints from before QR-DQN have none
    model.load_state_dict(state["learner"]["model"])
    model.eval()
    rng = np.random.default_rng(seed)
    # ALE and NES games run at 60 Hz and the agent sees every frame_skip-th frame
    fps = env.metadata.get("render_fps", 15) if is_module_env_id(cfg.env) else 60 / max(1, cfg.env_options.frame_skip)
    recorder = VideoWriter(Path(video), fps) if video else None
    mario = is_mario(cfg.env)
    res = EvalResult(cfg.env, [], [], [], [], epsilon=epsilon, checkpoint=str(checkpoint), weights_sha256=digest)
    try:
        for ep in range(episodes):
            obs, info = env.reset(seed=seed + ep)
            ret, length, done, x_max = 0.0, 0, False, 0.0
            actions = hashlib.sha1()
            while not done and length < max_steps:
                if recorder is not None and ep == 0:
                    recorder.add(env.render())
                if rng.random() < epsilon:
                    action = int(rng.integers(meta["n_actions"]))
                else:
                    with torch.inference_mode():
                        action = int(model(torch.from_numpy(np.asarray(obs))[None]).argmax(1))
                actions.update(bytes((action,)))
                obs, reward, term, trunc, info = env.step(action)
                ret += float(reward)
                length += 1
                x_max = max(x_max, float(info.get("x_pos", 0)))
                done = term or trunc
            res.returns.append(ret)
            res.lengths.append(length)
            res.action_digests.append(actions.hexdigest())
            if mario:
                res.distances.append(x_max)
                res.flags.append(bool(info.get("flag_get", False)))
            log(f"[EVAL] episode {ep + 1}/{episodes}: return {ret:.1f}, length {length}"
                + (f", distance {res.distances[-1]:.0f}, flag {res.flags[-1]}" if mario else ""))
    finally:
        if recorder is not None:
            recorder.close()
        env.close()
    return res
