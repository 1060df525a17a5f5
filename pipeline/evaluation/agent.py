"""A trained agent from Python (``load``), as Stable-Baselines3's ``load``/``predict``::

    from mario_rl_optimized import load
    agent = load("runs/pong")              # a run folder, a .pt file, or hf://user/repo
    env = agent.make_env()                 # the game as the run trained on it, played whole
    obs, info = env.reset(seed=1)
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs))
        done = terminated or truncated

``act`` takes the env's observation as it comes (a uint8 [frame_stack, 84, 84] stack, or a batch
of them) and returns the action the weights choose, greedy or at ``epsilon``: the same actions
``--eval`` plays.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from .evaluate import Policy, load_policy, played_options, weights_said


class Agent:
    """The weights of a run (or a checkpoint file) and the game they were trained on."""

    def __init__(self, policy: Policy, seed: int | None = None):
        self.policy = policy
        self.env_id: str = policy.cfg.env
        self.n_actions: int = int(policy.meta["n_actions"])
        self.obs_shape = (int(policy.meta["frame_stack"]), policy.cfg.env_options.frame_size,
                          policy.cfg.env_options.frame_size)
        self.rng = np.random.default_rng(seed)

    @property
    def path(self) -> Path:
        """The weights file played (for a run folder: the one it kept, best first)."""
        return self.policy.path

    @property
    def config(self):
        """The config the weights were trained with (``config_optimized.Config``)."""
        return self.policy.cfg

    def describe(self) -> str:
        """Which weights these are and what kept them, as ``--eval`` says it."""
        return f"{self.path}: {weights_said(self.policy)}"

    def make_env(self, render_mode: str | None = None, **play):
        """One env of the game as the run trained on it (frames, frame skip, stack, action set,
        no-op starts, sticky actions, action mark), played as ``--eval`` plays: whole games (no
        life-loss episodes) and raw rewards. ``play``: ``sticky_actions`` or ``noop_max`` in place
        of the run's own, as ``--eval`` takes them. ``render_mode="rgb_array"`` or ``"human"`` to
        see it."""
        from wrappers import make_env

        return make_env(self.env_id, played_options(self.env_id, self.policy.cfg.env_options, play), render_mode)

    def q_values(self, obs) -> np.ndarray:
        """The network's action values for one observation ([A]) or a batch ([N, A])."""
        frames = self._frames(obs)
        with torch.inference_mode():
            q = self.policy.model(torch.from_numpy(frames if frames.ndim == 4 else frames[None])).float().numpy()
        return q if frames.ndim == 4 else q[0]

    def act(self, obs, epsilon: float = 0.0):
        """The action for one observation of ``make_env()``'s env (an int), or an array of
        actions for a batch of them: the greedy one, or at probability ``epsilon`` a random one."""
        if not 0 <= epsilon <= 1:
            raise ValueError(f"epsilon {epsilon!r}: must be in [0, 1]")
        q = self.q_values(obs)
        greedy = q.argmax(-1)
        if epsilon > 0:
            explore = self.rng.random(greedy.shape) < epsilon
            greedy = np.where(explore, self.rng.integers(0, self.n_actions, greedy.shape), greedy)
        return int(greedy) if greedy.ndim == 0 else greedy.astype(np.int64)

    def predict(self, obs, deterministic: bool = True, epsilon: float = 0.05):
        """Stable-Baselines3's spelling: (action, None); not ``deterministic``: at ``epsilon``."""
        return self.act(obs, 0.0 if deterministic else epsilon), None

    def _frames(self, obs) -> np.ndarray:
        frames = np.asarray(obs)
        if frames.dtype != np.uint8 or frames.shape[-3:] != self.obs_shape or frames.ndim not in (3, 4):
            raise ValueError(f"obs of shape {frames.shape} and dtype {frames.dtype}: the agent acts on uint8 "
                             f"{list(self.obs_shape)} frame stacks (or a batch of them), the observations of "
                             "agent.make_env()")
        return np.ascontiguousarray(frames)


def load(source: str | Path, seed: int | None = None) -> Agent:
    """The agent of a run folder (the weights it kept: best_eval.pt, else best.pt, else
    checkpoint.pt), a checkpoint file, or a shared one (``hf://user/repo``, downloaded with
    huggingface_hub). ``seed``: of its random actions at ``epsilon``. A file that is missing,
    corrupt or not a checkpoint raises CheckpointError naming it; a Hub download that fails,
    HubError."""
    from ..records.hub import HF_PREFIX, fetch

    source = str(source)
    path = fetch(source) if source.startswith(HF_PREFIX) else Path(source)
    return Agent(load_policy(path), seed)
