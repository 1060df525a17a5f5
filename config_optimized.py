"""The typed training config: every setting of a run, with its default and one line of help.

``Config`` names what to train on and holds one part per component (env options, collectors,
replay, learner, run); each component is handed only its part. Every field is also a flag of
``mario_rl_optimized.py`` (``batch_size`` -> ``--batch-size``) and a key of config files, named
flat. ``python config_optimized.py`` prints the detected hardware, the profile picked for it and
the resolved config with the layer that set each value (``pipeline/settings/layers.py``). The
hardware profiles live in ``pipeline/settings/profiles.py`` (tune one there, or save one with
``benchmark_performance.py --autotune``); validation in ``pipeline/settings/check.py``.
"""
from __future__ import annotations

import multiprocessing
import sys
from dataclasses import Field, dataclass, field, fields

from pipeline.errors import ConfigError, UserError  # noqa: F401  (the user errors, by the names users import them)

FRAME_BYTES = 84 * 84
REPLAY_META_BYTES = 6          # action uint8 + reward float32 + flags uint8
# Private memory of one collector process (python, torch, model, 8 envs): 318 MB anonymous RSS
# measured for Pong on an AMD EPYC, ~300 MB reported for Mario; rounded up. Shared libraries are
# mapped once for all processes and not counted.
COLLECTOR_BYTES = 350 * 2**20
# Collectors and evaluators fork from a server that imported torch once (pipeline/actors/process_start.py)
# where the platform can (Linux, macOS); Windows spawns them.
DEFAULT_START_METHOD = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
# --profile's choices: auto picks one for the machine (pipeline/settings/profiles.py holds them)
PROFILE_NAMES = ("auto", "autotuned", "cpu-small", "cpu-large", "gpu-minimum", "gpu-recommended", "gpu-optimal")
RESUME_HERE = "here"  # a bare --resume: the run in --run-dir, or the latest

# gym-super-mario-bros' RIGHT_ONLY, SIMPLE_MOVEMENT and COMPLEX_MOVEMENT, and right_run and right_run_wait
# (wrappers.mario.RIGHT_RUN, RIGHT_RUN_WAIT)
MARIO_ACTION_SETS = ("right_only", "simple", "complex", "right_run", "right_run_wait")


def doc(text: str, default, *, choices: tuple | None = None, **kw):
    """A config field declared once: its default, its one line of help and, where only some values
    work, its ``choices``; the command line, the config files and validation all read them.
    ``type`` in ``kw`` overrides the type read from the default (a field whose default is None)."""
    return field(default=default, metadata={"help": text, "choices": choices, **kw})


@dataclass(frozen=True)
class EnvOptions:
    """What an environment is built with: the env part of the config, also handed on its own to
    the single-env factory and the collectors' batched envs (``wrappers/``)."""
    frame_stack: int = doc("frames stacked per observation", 4)
    frame_skip: int = doc("emulator frames per agent step", 4)
    max_pool: bool = doc("max-pool the last two skipped frames (MaxAndSkip)", True)
    noop_max: int = doc("up to this many no-op agent steps after each reset, a seeded random number (Atari's "
                        "NoopReset; Mario's NoopStart); 0 disables", 30)
    episodic_life: bool = doc("a lost life ends the learning episode, Atari (EpisodicLife)", True)
    fire_reset: bool = doc("press FIRE after reset where the game needs it, Atari (FireReset)", True)
    clip_rewards: bool = doc("learn from rewards clipped to [-1, 1] (ClipReward); logs keep raw returns", True)
    reward_scale: float = doc("with --clip-rewards false: learn from rewards times this (Mario's lie in [-15, 15]: "
                              "1/15 keeps their size, which sign() throws away)", 1.0)
    stall_steps: int = doc("Mario: a learning episode ends (as a lost life does in Atari: the game goes on) once Mario has "
                           "not passed his furthest x for this many agent steps, so a state he stands in pressing into "
                           "a wall learns the value of going nowhere; 0 never; games played and judged are not cut", 0)
    stall_end: int = doc("Mario: a training game ends (the env starts a new one; its last step is learned as an end) "
                         "once Mario has not passed his furthest x for this many agent steps, so a game stuck where "
                         "the actions cannot get him on (a ledge under the ceiling, the top of a pipe) does not fill "
                         "the replay with standing until the clock runs out; 0 never; games played and judged are "
                         "not cut", 0)
    stall_penalty: float = doc("Mario with --stall-steps or --stall-end: subtracted from the reward of the step a stall ends, in the "
                               "game's units before --reward-scale (25: what gym-super-mario-bros takes for a lost life, "
                               "before nes-py clips each frame to [-15, 15]), so standing "
                               "still is learned as a death rather than as a quiet end; 0 adds nothing", 0.0)
    flag_bonus: float = doc("Mario: added to the learned reward of the step that reaches the flag, where "
                            "gym-super-mario-bros' own 50 is cut to 15 by nes-py's clip of each frame to [-15, 15] "
                            "(that step pays ~16-18, a running one ~11) (the game's units, before --reward-scale; "
                            "50: the published R2D2 and PPO Mario agents'); the log keeps the game's return; 0 adds "
                            "nothing", 0.0)
    death_penalty: float = doc("Mario: subtracted from the learned reward of the step a game ends without the flag "
                               "(a lost life, the clock's end included; gym-super-mario-bros' own -25 is clipped with "
                               "the frame to -15) (the game's units, before --reward-scale; 50: the published R2D2 and "
                               "PPO Mario agents'); the log keeps the game's return; 0 adds nothing", 0.0)
    sticky_actions: float = doc("probability that an emulator frame repeats the previous action instead of the "
                                "agent's (repeat_action_probability); -1 keeps the env id's default (ALE v5: "
                                "0.25, Mario: 0)", -1.0)
    mark_action: bool = doc("paint the previous action into each frame's bottom rows (a one-hot strip), so the network "
                            "sees what sticky actions may repeat", False)
    mario_actions: str = doc("Mario action set: right_only (NOOP, right, right+A, right+B, right+A+B), simple (7), "
                             "complex (12), right_run (right+B, right+A+B, right+A: one in three holds no A), right_run_wait "
                             "(right_run and NOOP, to wait for a fire bar: two in four hold no A)", "simple",
                             choices=MARIO_ACTION_SETS)
    # not a setting: the replay and the networks are built for 84x84 frames
    frame_size: int = field(default=84, metadata={"fixed": True})


@dataclass
class CollectorConfig:
    """The rollout workers: how many, how many envs each, their rings, their exploration."""
    num_collectors: int = doc("collector processes stepping envs", 1)
    envs_per_collector: int = doc("envs each collector steps with one batched forward pass", 8)
    env_threads: int = doc("threads each collector steps its envs on (ale-py's vector env threads; Python envs such "
                           "as Mario's in as many groups): the emulators release the GIL", 1)
    act_bf16: bool = doc("collectors choose actions with the conv stack in bf16 (channels_last) and the Q head in "
                         "fp32; the CPU profiles turn it on where bf16 pays", False)
    collector_device: str = doc("where the process collectors choose actions: on their own CPU core, or on the "
                                "learner's CUDA GPU (a frame stack batch goes over and the actions come back; each "
                                "collector process then holds a CUDA context of its own, and --act-bf16 means bf16 "
                                "autocast there); Ray collectors act on their own CPU", "cpu", choices=("cpu", "cuda"))
    start_method: str = doc("how the collector and evaluator processes start: forkserver forks them from a server that "
                            "imported torch and the envs once, while the learner was built (pipeline/actors/process_start.py); "
                            "spawn imports them in each; fork copies the learner", DEFAULT_START_METHOD,
                            choices=("spawn", "forkserver", "fork"))
    ring_capacity: int = doc("slots (transitions) in each collector's shared-memory ring", 4096)
    drop_when_full: bool = doc("drop (and count) transitions when a ring is full instead of waiting", False)
    model_update_frequency: int = doc("learner updates between weight pushes to the collectors", 50)
    max_collector_restarts: int = doc("crashed-collector restarts before the run stops", 3)
    apex_epsilon: bool = doc("spread epsilon over envs Ape-X style (eps_i = 0.4^(1+7i/(N-1))) instead of one schedule", False)
    eps_start: float = doc("epsilon at the first step", 1.0)
    eps_end: float = doc("epsilon after the decay", 0.01)
    eps_decay_steps: int = doc("agent steps over which epsilon decays linearly", 100_000)
    ray_address: str = doc("Ray cluster for remote collectors: host:port of its head, or auto (the one this "
                           "machine belongs to); empty: no Ray", "")
    ray_collectors: int = doc("collector actors started in the Ray cluster, beside the process collectors", 0)
    ray_batch: int = doc("records a Ray collector sends per object-store batch (rounded to whole env steps)", 256)
    ray_compress: bool = doc("zlib-compress each Ray batch's frames (fewer bytes on the wire, more CPU on both ends)",
                             False)

    @property
    def total_collectors(self) -> int:
        """Process collectors and Ray collectors: each owns envs_per_collector replay streams."""
        return self.num_collectors + self.ray_collectors

    @property
    def env_streams(self) -> int:
        """The replay's env streams, one per env of every collector: whatever builds, checks or
        paces a run's replay counts them here (the trainer, the resume and buffer checks)."""
        return self.total_collectors * self.envs_per_collector


@dataclass
class ReplayConfig:
    """The replay buffer, its n-step returns, and the intake and prefetch threads around it."""
    buffer_size: int = doc("replay capacity in transitions (each 84x84 frame stored once)", 100_000)
    n_step: int = doc("n-step return length", 3)
    gamma: float = doc("discount factor", 0.99)
    n_step_cut: bool = doc("end each n-step return before the first random (epsilon) action after the sample's "
                           "own, bootstrapping there (Watkins' Q(lambda)): the summed rewards are the greedy "
                           "policy's, not the exploration's", False)
    augment_shift: int = doc("move each sampled frame stack sideways by a random -N..N pixels, its edge repeated "
                             "(DrQ's random shift, Kostrikov et al. 2020); 0 trains on the frames as stored", 0)
    prioritized: bool = doc("prioritized replay (Schaul et al. 2016) instead of uniform", False)
    per_alpha: float = doc("prioritized replay: priority exponent", 0.6)
    per_beta: float = doc("prioritized replay: importance-sampling exponent at the start (annealed to 1)", 0.4)
    consolidation_batch: int = doc("most transitions the consolidation thread moves from one ring per drain", 1024)
    prefetch_batches: int = doc("batches sampled ahead of the learner by the prefetch thread", 4)


@dataclass
class LearnerConfig:
    """The Q-network, its optimizer and precision, and the replay ratio that paces it."""
    model_arch: str = doc("Q-network: the Nature conv stack with BatchNorm, the Impala residual network with "
                          "BatchNorm (impala, 5.8x the Nature stack's multiply-adds; impala-s, its first conv strided, 1.55x) "
                          "or the plain Nature DQN", "batchnorm",
                          choices=("batchnorm", "impala", "impala-s", "nature"))
    dueling: bool = doc("dueling Q head", False)
    quantiles: int = doc("QR-DQN (Dabney et al. 2018): learn this many quantiles of the return per action with the "
                         "quantile Huber loss, and act on their mean; 0 = plain DQN (the expected return)", 0)
    iqn_taus: int = doc("IQN (Dabney et al. 2018b): learn the return's quantile function, trained at this many "
                        "fractions drawn for Q(s) and as many for the target, acting on its mean at as many fixed "
                        "ones; each fraction is a pass of the head: at 8 the learner made 0.65x the QR-DQN preset's "
                        "updates/s on a 2-core CPU (Dopamine uses 64 on a GPU); 0 = off. Not with --quantiles", 0)
    munchausen: bool = doc("Munchausen RL (Vieillard et al. 2020) on top of the rule: the reward gains alpha x "
                           "tau log pi(a|s) of the target network's softmax policy, and s' is valued by that "
                           "policy's soft value instead of an argmax (--double-dqn does not apply)", False)
    munchausen_alpha: float = doc("Munchausen: scale of the log-policy bonus", 0.9)
    munchausen_tau: float = doc("Munchausen: temperature of the softmax policy, in the reward's units", 0.03)
    munchausen_clip: float = doc("Munchausen: the lowest tau log pi(a|s) the bonus counts", -1.0)
    batch_size: int = doc("samples per micro-batch", 32)
    grad_accum_steps: int = doc("micro-batches accumulated per optimizer step (effective batch = batch_size x this)", 1)
    replay_ratio: float = doc("samples trained per agent step, enforced both ways (4 = batch 32 every 8 steps)", 4.0)
    learning_starts: int = doc("agent steps collected before the first update", 10_000)
    lr: float = doc("Adam learning rate", 1e-4)
    adam_eps: float = doc("Adam epsilon", 1.5e-4)
    lr_decay_start: int = doc("agent steps at which the learning rate starts to fall linearly from --lr to --lr-end", 0)
    lr_decay_steps: int = doc("agent steps the fall takes; 0 keeps --lr for the whole run", 0)
    lr_end: float = doc("learning rate at the end of the fall, and after it", 2.5e-5)
    max_grad_norm: float = doc("gradient-norm clip; 0 disables", 10.0)
    target_update_interval: int = doc("optimizer steps between target-network syncs", 500)
    double_dqn: bool = doc("Double DQN targets", True)
    bootstrap_epsilon: float = doc("the targets bootstrap from the epsilon-greedy policy at this epsilon instead of "
                                   "the greedy one (expected SARSA; exact for DQN, one action drawn per target for the "
                                   "distributional rules): the values of the "
                                   "policy as it plays at that epsilon, which steer clear of where one random action "
                                   "is fatal (Sutton and Barto's cliff walk); 0 = Q-learning's greedy bootstrap", 0.0)
    weight_average: float = doc("Polyak averaging (Nikishin et al. 2018): evaluations, the kept weights and --eval play "
                                "an exponential moving average of the online weights and BatchNorm statistics, moved "
                                "this far toward its old value at each update (0.999 averages about the last 1,000 "
                                "updates); the collectors still act with the online weights. 0 = off: the online weights",
                                0.0)
    bn_targets: str = doc("BatchNorm statistics the s' forwards of the targets normalize with: the running ones "
                          "(eval mode), or the s' batch's own, as Q(s) is normalized in training", "running",
                          choices=("running", "batch"))
    amp: bool = doc("mixed precision (bf16 autocast; fp16 + GradScaler on CUDA GPUs older than Ampere)", True)
    amp_dtype: str = doc("autocast dtype (fp16 needs CUDA; auto: bf16, fp16 on CUDA GPUs without bf16)", "auto",
                         choices=("auto", "bf16", "fp16"))
    compile: bool = doc("torch.compile the learner's loss (the targets' and Q(s)'s forwards, the loss) and its "
                        "backward as one graph; the first updates wait for the compile", False)
    cuda_graphs: bool = doc("on a CUDA learner, capture each update (the loss, its backward, the clip and Adam) as one "
                            "CUDA graph and replay it with one launch instead of one per kernel (bf16, fp32; under fp16 "
                            "with --compile, the compiled loss and its backward only); no effect on a CPU or with "
                            "--grad-accum-steps above 1", True)
    channels_last: bool = doc("channels_last (NHWC) memory format for the convs (CUDA, and CPU bf16 via oneDNN)", False)
    learner_threads: int = doc("torch threads in the learner process; 0 = the profile's choice (cpu-small: all "
                               "cores, others: cores left after collectors)", 0)
    follow_free_cores: bool = doc("on a CPU learner, use fewer of those threads while other processes hold cores "
                                  "(read from /proc every few seconds), and all of them again once the cores free; "
                                  "false keeps them fixed", True)

    @property
    def effective_batch(self) -> int:
        return self.batch_size * self.grad_accum_steps


@dataclass
class RunConfig:
    """When the run stops, what it evaluates, and what it writes where."""
    target_score: float | None = doc("stop once the mean score of the last 20 whole games reaches this (time to score); "
                              "unset = never", None, type=float)
    score_metric: str = doc("what --target-score is measured in: the raw (unclipped) return, or the distance (Mario)",
                            "return", choices=("return", "distance"))
    time_limit: float = doc("stop once the run has trained this many minutes of wall clock (a resumed run's earlier "
                            "parts count, as its agent steps count for --total-steps); 0 = no limit", 0.0)
    eval_interval: int = doc("agent steps between evaluations of the current weights in a process of their own, "
                             "keeping the best in best_eval.pt; 0 = off (best.pt still follows training games)", 0)
    eval_episodes: int = doc("whole games per --eval-interval evaluation (--eval plays --episodes)", 5)
    confirm_episodes: int = doc("whole games the confirmation of an evaluation that beat the best plays (each way "
                                "for Mario); 0 = --eval-episodes. More games keep weights by their rate, not by a "
                                "lucky draw; a Mario confirmation counts its flags per --eval-episodes games", 0)
    confirm_every_start: bool = doc("Mario without sticky actions: a confirmation's greedy play is one game from each "
                                    "no-op start (0 to --noop-max) instead of --confirm-episodes drawn games: greedy "
                                    "Mario has one game per start, so these are all of them, the exact share; the keep "
                                    "and stop rules then judge it (--stop-at-flag: 30 of 31 starts)", False)
    eval_epsilon: float = doc("random-action probability when evaluating (--eval-interval and --eval); CleanRL uses 0.05", 0.0)
    capture_video: bool = doc("film one greedy game of each --eval-interval evaluation, as <run_dir>/videos/"
                              "eval-{agent steps}.mp4 (H.264), to watch the agent improve (CleanRL's --capture-video)",
                              False)
    stop_at_flag: bool = doc("stop once the kept weights (best_eval.pt) reach the flag in at least 19 of every 20 greedy "
                             "games of the evaluation that confirmed them (Mario, with --eval-interval), "
                             "saving an MP4 of a flag run beside them; false trains on to --total-steps", True)
    run_dir: str = doc("the run's folder (checkpoints, metrics, logs); unset = a new runs/{env}__{seed}__{time}", "")
    resume: str = doc("continue a run from its last checkpoint: its folder, or 'latest'; a bare --resume "
                      "continues --run-dir (or, without one, the latest run)", "", nargs="?", const=RESUME_HERE,
                      metavar="RUN")
    overwrite: bool = doc("start a new run in a --run-dir that already holds one, deleting that run's files", False)
    checkpoint_interval: int = doc("optimizer steps between checkpoints", 5_000)
    save_replay: bool = doc("save the replay (compressed) with the final checkpoint, so --resume trains on at once "
                            "instead of refilling it; turn off for huge buffers", True)
    tensorboard: bool = doc("also write the epoch metrics as TensorBoard events in <run_dir>/tb", True)
    track: bool = doc("also send the run to Weights & Biases (TensorBoard synced, the run record as its config); "
                      "needs pip install 'fast-dqn[track]'", False)
    wandb_project: str = doc("W&B project for --track", "fast-dqn")
    wandb_entity: str = doc("W&B entity (user or team) for --track; unset = your default", "")
    epoch_steps: int = doc("agent steps per epoch: two [MAIN] log lines (the epoch's figures, its speed) and one "
                           "metrics.jsonl row", 10_000)
    consolidation_log_interval: float = doc("seconds between the consolidation thread's [PROCESSOR] log lines while "
                                            "the replay fills; once epochs end, one follows an epoch's lines at most",
                                            10.0)


PARTS = {"env_options": EnvOptions, "collectors": CollectorConfig, "replay": ReplayConfig, "learner": LearnerConfig,
         "run": RunConfig}


@dataclass
class Config:
    """The whole training config: what to train on, then one part per component. Each component
    is handed its own part; files and flags name fields flat (``lr``, not ``learner.lr``)."""
    env: str = doc("environment id: an ALE id (ALE/Pong-v5) or a Mario id (SuperMarioBros-1-1-v0)", "SuperMarioBros-1-1-v0")
    total_steps: int = doc("stop after this many agent steps (after frame skip), summed over all envs", 5_000_000)
    seed: int = doc("seed for envs, exploration and network init", 1)
    profile: str = doc("hardware profile (auto picks one for this machine)", "auto", choices=PROFILE_NAMES)
    device: str = doc("learner device: auto takes cuda, then mps, then cpu", "auto",
                      choices=("auto", "cuda", "mps", "cpu"))
    env_options: EnvOptions = field(default_factory=EnvOptions)
    collectors: CollectorConfig = field(default_factory=CollectorConfig)
    replay: ReplayConfig = field(default_factory=ReplayConfig)
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    run: RunConfig = field(default_factory=RunConfig)

    # ---- the flat view that flags and files use: one name per field
    def get(self, name: str):
        part = FIELDS[name][0]
        return getattr(getattr(self, part) if part else self, name)

    def flat(self) -> dict:
        return {name: self.get(name) for name in FIELDS}

    @classmethod
    def of(cls, **values) -> Config:
        """A config from flat field names (``Config.of(env=..., lr=3e-4)``); the rest default."""
        unknown = set(values) - set(FIELDS)
        if unknown:
            raise TypeError(f"Config has no fields {sorted(unknown)}")
        by_part = {p: {} for p in PARTS}
        top = {}
        for name, v in values.items():
            part = FIELDS[name][0]
            (by_part[part] if part else top)[name] = v
        return cls(**top, **{p: PARTS[p](**kw) for p, kw in by_part.items()})

    def replace(self, **values) -> Config:
        return Config.of(**{**self.flat(), **values})


def _flat_fields() -> dict[str, tuple[str, Field]]:
    """Each settable field's flat name -> (its part, "" at the top level; its dataclass field)."""
    out = {}
    for f in fields(Config):
        if f.name in PARTS:
            out.update((g.name, (f.name, g)) for g in fields(PARTS[f.name]) if not g.metadata.get("fixed"))
        else:
            out[f.name] = ("", f)
    return out


FIELDS = _flat_fields()
# Fields that say where a start writes, not how it trains: a run record and a config file never set them.
RUN_CONTROL = ("resume", "run_dir", "overwrite")


def flag(name: str) -> str:
    """A Config field's command-line option (``adam_eps`` -> ``--adam-eps``)."""
    return "--" + name.replace("_", "-")


if __name__ == "__main__":  # python config_optimized.py: the show runs as the program, importing this file afresh
    from pipeline.settings.layers import show

    sys.exit(show())
