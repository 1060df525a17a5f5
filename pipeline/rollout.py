"""Acting in a batch of envs: one batched epsilon-greedy forward pass, one env step, and the
step's records (newest frame once per env, action, clipped reward, episode flags) in the layout
the ring and the replay writer share. Collector processes use it; so do the benchmark's
single-process rows, so both measure the same code."""
from __future__ import annotations

import time

import numpy as np
import torch

from .transition import EP_END, EXPLORED, FIRST, FLAG_GET, LAST, TERM, TRUNC


class Rollout:
    def __init__(self, env, model: torch.nn.Module, frame_stack: int, clip_rewards: bool, seed: int,
                 reward_scale: float = 1.0, act_bf16: bool = False, stall_steps: int = 0,
                 stall_penalty: float = 0.0):
        """``act_bf16``: choose actions with a folded bf16 copy of ``model``
        (``models.acting.Bf16ActingNet``, a pixel DQN of ``models``) on a CPU, under bf16 autocast
        on a GPU; actions are chosen on the device ``model`` is on. Whoever loads new weights
        into ``model`` calls ``weights_loaded``. ``stall_steps`` (``EnvOptions.stall_steps``):
        the step after which an env's x has not passed its furthest for that many agent steps
        ends the learning episode (TERM, the game goes on), as a lost life does; ``stall_penalty``
        (``EnvOptions.stall_penalty``, the game's units) is taken from that step's learned reward."""
        self.env, self.model, self.clip, self.scale = env, model, clip_rewards, reward_scale
        self.stall_steps, self.stall_penalty = stall_steps, stall_penalty
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
        self.last_x = np.full(M, np.nan, np.float32)
        self.got_flag = np.zeros(M, bool)
        self.furthest = np.full(M, -np.inf, np.float32)  # furthest x of each env's learning episode
        self.still = np.zeros(M, np.int32)  # agent steps since it last grew
        self.stalls = 0  # learning episodes ended by stall_steps
        self.env_ids = np.arange(M, dtype=np.uint16)
        self.act_ns = self.step_ns = 0

    @classmethod
    def of(cls, env, model: torch.nn.Module, opts, seed: int, act_bf16: bool = False) -> Rollout:
        """The rollout a run's ``EnvOptions`` ask for: its frame stack, reward handling and stall rule."""
        return cls(env, model, opts.frame_stack, opts.clip_rewards, seed, opts.reward_scale, act_bf16,
                   opts.stall_steps, opts.stall_penalty)

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
        has_x = live & ~np.isnan(st.x_pos)
        learned = st.rewards  # the game's units; the log keeps them raw
        if self.stall_steps:
            # The env's game goes on: the stall is the learning episode's end, as a lost life is
            # with EpisodicLife. Measured from the furthest x, not the last one, so pacing back and
            # forth in one place is standing still too.
            ahead = has_x & (st.x_pos > self.furthest)
            self.furthest[ahead] = st.x_pos[ahead]
            self.still = np.where(ahead, 0, self.still + has_x)  # an env with no x (Atari) never stalls
            stalled = live & ~terminated & (self.still >= self.stall_steps)
            self.stalls += int(stalled.sum())
            terminated |= stalled
            if self.stall_penalty:  # learned only, as the stall's TERM is
                learned = learned - self.stall_penalty * stalled
        flags[terminated] |= TERM
        flags[st.truncated & live] |= TRUNC
        flags[reset] |= LAST | EP_END
        flags[reset & self.got_flag] |= FLAG_GET
        flags[explore & live] |= EXPLORED
        learned = np.sign(learned) if self.clip else learned * self.scale
        reward = np.where(live, learned, 0.0).astype(np.float32)
        self.ep_ret += np.where(live, st.rewards, 0.0)
        self.ep_len += live
        self.last_x[has_x] = st.x_pos[has_x]
        self.got_flag |= live & st.flag
        # The record holds the frame the action was taken on; its stack is rebuilt at sample time.
        frames = self.stack[:, -1].copy()
        fields = dict(action=np.where(live, actions, 0).astype(np.uint8), reward=reward, flags=flags,
                      env=self.env_ids, ep_return=self.ep_ret.copy(), ep_len=self.ep_len.copy(),
                      x_pos=self.last_x.copy())

        self.first &= reset  # a record was written for every live env; only reset envs start anew
        self.stack[:, :-1] = self.stack[:, 1:]
        self.stack[:, -1] = st.frames
        restart_stack = reset | terminated  # a reset, a lost life (EpisodicLife) or a stall
        if restart_stack.any():
            self.stack[restart_stack] = st.frames[restart_stack][:, None]
            self.first |= restart_stack
            self.furthest[restart_stack], self.still[restart_stack] = -np.inf, 0
            self.ep_ret[reset], self.ep_len[reset], self.last_x[reset], self.got_flag[reset] = 0.0, 0, np.nan, False
        return frames, fields, int(live.sum()), int(reset.sum())
