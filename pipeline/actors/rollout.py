"""Acting in a batch of envs: one batched epsilon-greedy forward pass, one env step, and the
step's records (newest frame once per env, action, clipped reward, episode flags) in the layout
the ring and the replay writer share. Collector processes use it; so do the benchmark's
single-process rows, so both measure the same code.

What the game family adds (its fields in every record, a rule that ends learning episodes, as
Mario's stall rule does) is its ``GameTracker``'s (``wrappers/families.py``), which the rollout
steps once per batch step: the rollout itself is the same for every game."""
from __future__ import annotations

import time

import numpy as np
import torch

from wrappers.families import PLAIN, GameTracker

from ..transport.transition import EP_END, EXPLORED, FIRST, LAST, TERM, TRUNC


class Rollout:
    def __init__(self, env, model: torch.nn.Module, frame_stack: int, clip_rewards: bool, seed: int,
                 reward_scale: float = 1.0, act_bf16: bool = False, game: GameTracker | None = None):
        """``act_bf16``: choose actions with a folded bf16 copy of ``model``
        (``models.acting.Bf16ActingNet``, a pixel DQN of ``models``) on a CPU, under bf16 autocast
        on a GPU; actions are chosen on the device ``model`` is on. Whoever loads new weights
        into ``model`` calls ``weights_loaded``. ``game``: the game family's state over these
        envs (``GameFamily.tracker``, where a run's rules come in: ``of``); none: the env's
        family without rules (``env.family``; a stand-in env without one adds nothing)."""
        self.env, self.model, self.clip, self.scale = env, model, clip_rewards, reward_scale
        self.act_bf16 = act_bf16
        weight = next(model.parameters(), None)  # a policy without weights (a test's stand-in) acts on the host
        self.device = weight.device if weight is not None else torch.device("cpu")
        self.on_host = self.device.type == "cpu"
        if act_bf16 and self.on_host:
            from models.acting import Bf16ActingNet

            self.policy = Bf16ActingNet(model)
        else:
            self.policy = model
        M = self.num_envs = env.num_envs
        self.rng = np.random.default_rng(seed)
        frames = env.reset(seed=seed)
        self.stack = np.repeat(frames[:, None], frame_stack, axis=1)
        self.first = np.ones(M, bool)
        self.broken = np.zeros(M, bool)  # the records before the next one were lost
        self.ep_ret = np.zeros(M, np.float32)
        self.ep_len = np.zeros(M, np.int32)
        # a stand-in env without a family (the tests', the benchmarks') adds nothing to the records
        self.game = game if game is not None else getattr(env, "family", PLAIN).tracker(M)
        self.env_ids = np.arange(M, dtype=np.uint16)
        self.act_ns = self.step_ns = 0

    @classmethod
    def of(cls, env, model: torch.nn.Module, opts, seed: int, act_bf16: bool = False) -> Rollout:
        """The rollout a run's ``EnvOptions`` ask for: its frame stack, reward handling and the
        game family's rules (``env.family``)."""
        return cls(env, model, opts.frame_stack, opts.clip_rewards, seed, opts.reward_scale, act_bf16,
                   env.family.tracker(env.num_envs, opts))

    def weights_loaded(self) -> None:
        """The model took new weights: the acting copy, where there is one, follows."""
        if self.policy is not self.model:
            self.policy.refresh()

    def break_streams(self) -> None:
        """The records of the last step were lost (a dropped push): every env's next record
        starts a new segment of its replay stream. A next record that is an episode's LAST
        (final frame) is marked FIRST too: the TERM or TRUNC before it may be among the lost."""
        self.first[:] = True
        self.broken[:] = True

    def step(self, eps) -> tuple[np.ndarray, dict, int, int]:
        """Act and step once. Returns (frames [M, H, W], record fields, live steps, resets); the
        frames and fields are copies the caller may keep."""
        M = self.num_envs
        t0 = time.perf_counter_ns()
        explore = self.rng.random(M) < eps
        random_actions = self.rng.integers(0, self.env.n_actions, M)
        if explore.all():
            # every env plays a random action (the replay's first fill at epsilon 1): no forward
            # pass, as CleanRL's loop skips it. The draws are the same either way, so a seed
            # plays the same actions as before.
            actions = random_actions
        else:
            with torch.inference_mode():
                obs = torch.from_numpy(self.stack)
                if self.on_host:
                    if self.act_bf16:
                        obs = obs.contiguous(memory_format=torch.channels_last)  # oneDNN's bf16 convs run fastest on NHWC
                    greedy = self.policy(obs).argmax(1).numpy()
                else:  # the frames over, the actions back: the one wait is the .cpu()
                    with torch.autocast(self.device.type, torch.bfloat16, enabled=self.act_bf16):
                        q = self.policy(obs.to(self.device))
                    greedy = q.argmax(1).cpu().numpy()
            actions = np.where(explore, random_actions, greedy)
        t1 = time.perf_counter_ns()
        st = self.env.step(actions)
        t2 = time.perf_counter_ns()
        self.act_ns += t1 - t0
        self.step_ns += t2 - t1

        reset = st.reset
        live = ~reset
        flags = np.zeros(M, np.uint8)
        flags[(self.first & live) | self.broken] |= FIRST
        self.broken[:] = False
        terminated = st.terminated & live
        # The game family's step: its per-env state, the learning episodes its rules end (the
        # game goes on, as it does after a lost life with EpisodicLife) and the games they end
        # (the env restarts them at its next step, as it does its own), with the learned reward
        # in the game's units (the log keeps them raw).
        cut, ended, learned = self.game.step(st, live, terminated, st.rewards)
        if cut is not None:
            terminated |= cut
        if ended is not None and ended.any():  # games the rule ends: each env's next step starts a new one
            self.env.end_games(ended)
        flags[terminated] |= TERM
        flags[st.truncated & live] |= TRUNC
        flags[reset] |= LAST | EP_END
        flags[explore & live] |= EXPLORED
        learned = np.sign(learned) if self.clip else learned * self.scale
        reward = np.where(live, learned, 0.0).astype(np.float32)
        self.ep_ret += np.where(live, st.rewards, 0.0)
        self.ep_len += live
        # The record holds the frame the action was taken on; its stack is rebuilt at sample time.
        frames = self.stack[:, -1].copy()
        fields = dict(action=np.where(live, actions, 0).astype(np.uint8), reward=reward, flags=flags,
                      env=self.env_ids, ep_return=self.ep_ret.copy(), ep_len=self.ep_len.copy())
        self.game.record(fields)

        self.first &= reset  # a record was written for every live env; only reset envs start anew
        self.stack[:, :-1] = self.stack[:, 1:]
        self.stack[:, -1] = st.frames
        restart_stack = reset | terminated  # a reset, a lost life (EpisodicLife) or the family's rule
        if restart_stack.any():
            self.stack[restart_stack] = st.frames[restart_stack][:, None]
            self.first |= restart_stack
            self.game.restart(restart_stack, reset)
            self.ep_ret[reset], self.ep_len[reset] = 0.0, 0
        return frames, fields, int(live.sum()), int(reset.sum())
