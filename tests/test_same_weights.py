"""Same seeds, same weights: the refactors of issue 90 (the agent apart from the engine, the
network spec, the folders) must change no arithmetic. For the catch game, Pong and Mario, each
with the learner its preset and the 2-core CPU profile resolve to, a few hundred updates from a
fixed seed, on a small replay filled with fixed records, end in weights, optimizer state and
update figures whose SHA-256 is recorded below from the code before the refactors.

The loop is the trainer's (``Trainer.update``): a batch sampled in the learner's layout, the
learning rate of the agent step reached, the update, the TD errors back into the priorities
(Mario's prioritized replay samples by them, so a changed TD error changes the later batches
too), the sampler's correction annealed. Four paths: the eager update in fp32, the same in bf16
autocast (the profile of a CPU with bf16 instructions: a refactor that moves a cast changes
only this one), the whole-update step that a CUDA learner captures as one graph, run eagerly as
a CPU runs it, and the update with the compiled loss (in fp32; the compile takes about a minute
a game, hence slow). The rules and options no preset trains (IQN, Munchausen, the epsilon-greedy
bootstrap, Double DQN on the running statistics, a dueling head, Polyak averaging) each have a
shorter case on the catch game's settings, eager in fp32.

A hash is exact: it holds for one CPU model (oneDNN and the compiled kernels pick their code by
the instruction set) and one torch version, on one thread. Elsewhere the test skips and says how
to record the table for that machine: ``python -m tests.test_same_weights`` prints it, run on
the commit before a change."""
from __future__ import annotations

import dataclasses
import hashlib
import sys

import numpy as np
import pytest
import torch

from pipeline.engine.engine import GRAPH_WARMUP_UPDATES, Engine
from pipeline.agent.learner import Learner, lr_schedule
from pipeline.replay import Replay
from pipeline.settings.hardware import cpu_info
from pipeline.settings.layers import resolve_config
from pipeline.transport.transition import FIRST, LAST, TERM, TRUNC
from tests.test_config import hw

UPDATES = 200
# Agent steps at the first update: past Pong's learning-rate fall start (500k), so the schedule
# and Learner.set_lr are in the arithmetic too.
FIRST_STEP = 600_000

# game: (env id, its settings beyond the preset and profile, number of actions)
GAMES = {
    # the catch settings the suite's learning tests train with (tests/proc_utils.py, CATCH): the
    # Atari preset, lr 1e-3 and a target sync every 100 updates
    "catch": ("tests.catch_env:Catch-v0", {"lr": 1e-3, "target_update_interval": 100}, 3),
    "pong": ("ALE/Pong-v5", {}, 6),  # QR-DQN (51 quantiles), no Double DQN, batch-normalized targets
    "mario": ("SuperMarioBros-1-1-v0", {}, 3),  # Double DQN, prioritized replay, batch-normalized targets
}
PATHS = ("eager", "eager-bf16", "graph-step", "compiled")
# The rules and options no preset trains, each on the catch game's settings, eager in fp32, for
# RULE_UPDATES updates: a refactor of the rules must keep them too.
CATCH = GAMES["catch"]
RULES = {
    "iqn": (CATCH[0], {**CATCH[1], "quantiles": 0, "iqn_taus": 8}, 3),
    "munchausen-qr": (CATCH[0], {**CATCH[1], "munchausen": True}, 3),
    "munchausen-dqn": (CATCH[0], {**CATCH[1], "munchausen": True, "quantiles": 0}, 3),
    # the epsilon-greedy bootstrap: exact with one value per action, drawn with quantiles
    "bootstrap-dqn": (CATCH[0], {**CATCH[1], "bootstrap_epsilon": 0.1, "quantiles": 0, "double_dqn": True}, 3),
    "bootstrap-qr": (CATCH[0], {**CATCH[1], "bootstrap_epsilon": 0.1, "double_dqn": True}, 3),
    # Double DQN's argmax on the running statistics (the eval-mode copy), a dueling head, Polyak
    # averaging, no clip, prioritized replay
    "running-dueling-average": (CATCH[0], {**CATCH[1], "quantiles": 0, "double_dqn": True, "bn_targets": "running",
                                           "dueling": True, "weight_average": 0.99, "max_grad_norm": 0.0,
                                           "prioritized": True}, 3),
}
RULE_UPDATES = 60
CASES = {**GAMES, **RULES}

# (torch version, CPU model) -> (game, path) -> (SHA-256 of the learner's state, of the update figures)
RECORDED: dict[tuple[str, str], dict[tuple[str, str], tuple[str, str]]] = {
    ('2.13.0+cu130', 'AMD EPYC (family 25 model 17)'): {
        ('catch', 'eager'):
            ('c6352ff462fed4b3a4d728e4d0692629350c0a494d0a34efa32892e4c64a3603',
             '0d93458319cb20c0d31b4710a3c049be6ea57d62819c51f3e2501548d0a91348'),
        ('pong', 'eager'):
            ('bdb6b6ec2bf12b90e976d6c4584ad21b04fe397d21e070b0c78ac743f514553e',
             '6f6fc25285417d451207d390659c84c6086aae58408e8e55838da61d91576246'),
        ('mario', 'eager'):
            ('1c994b062b9f517156d9b954bba90f964298b2617486ad83e5a6aadacd1f72d0',
             '92461c1032488460ba2995f170a346c56b44f831e1e292dfa95b7814676a04a3'),
        ('catch', 'eager-bf16'):
            ('e72389af1dc911fe9262e779dfc71c85c5fb72d1c2e579946ea377bf4a131e1e',
             '2174a5bbed455a4058ac4e854a1bc7a47c427c9dfa141028d46933f556eb7da0'),
        ('pong', 'eager-bf16'):
            ('928a39aacde7d6116c1223b6ce74d4c1ebf159fc43a5bce8cdc8d679d80b8347',
             '821cbbcf9beb089145061e9170554d02221f311c78b5fa1987c44796c8773a6e'),
        ('mario', 'eager-bf16'):
            ('78aec22cdc46e6e9901ccca1e8366bfdb9d9150886bb2c5821c33fc65557221b',
             '38a3a90ad0c436e5f83f5c5cbe089f9768c28d35135076e5382ccaf69da810f4'),
        ('catch', 'graph-step'):
            ('af47f357d0d61421a858b08966bcae0316fd4437b3b86a251696299c524295c2',
             'a841b7370b64660e6c4dd87b686385a4f673498139c23887c355a2b92c7f4508'),
        ('pong', 'graph-step'):
            ('16e3f3d6388332792a4ab7db5fa80f2edcfc59fb4376784f4c9c658e01891c97',
             '4e055231a088419c7afb0ed26fb3cb1f55e04cfb0013e3af566632b2f498ef0d'),
        ('mario', 'graph-step'):
            ('9ed00d39bb89f9b90b5251a414907207150bfa7dd5ee1045260a24a08989e92f',
             'cd85d464143def28cfafffe4cff9f3088ca617d9751b53abef28676bafa524fa'),
        ('catch', 'compiled'):
            ('1b183e111bc7752fbcc2ef9b7fad1befd7ed4799f961e1a34d35ad143f3b6487',
             '1f4dbccaa94abe2e50de3a76682c3a45e8db51a44d9e3f537dd0315d7f03ba39'),
        ('pong', 'compiled'):
            ('68a9cc0b142bae9886e8d4402612dac8916797e0d6170d4e77790f8549c391ef',
             '43b848e279cfd53ac6cf74e90b1bcd5376a8ef8b996e076b6a2b2f2b1aad67a2'),
        ('mario', 'compiled'):
            ('4ad1674d78c6b4c731c95583946224eaa8d6cf880e68810b8114a2490d0904e2',
             'bc566801bae48d4f366dd79a54a5f4bfaf14141c55aad042a5012913bea0d083'),
        ('iqn', 'eager'):
            ('381107f2134b52fbc84e04ae63d1b69323c2cdad7f3cecc651333d38edfb53ef',
             'dd303906c0f3275a94b036cfe482aff17f4cc7ae6d8b7e5e63b3591eb043ec00'),
        ('munchausen-qr', 'eager'):
            ('6940607aaaaab0ac77441dfa473c1adbe6d5ffe62faaa1079b326acb9c158fb1',
             '20ee7fe75b9938a03f34598d62da334147690efb2d4cf5b2642699f792275677'),
        ('munchausen-dqn', 'eager'):
            ('968b309f5f8bba5a8c66588092b01b400cb2ec4ab75aab938fbdd39621f25924',
             '704bc3621ab68f2862b7f295740d67c33472f05288f73de34b7bcee8322d5a39'),
        ('bootstrap-dqn', 'eager'):
            ('649aba6ae858702eaea7174946417ec18184f334d5eee740d91cf9abd38fc5cc',
             '3ff57fe6b2ac70dd79178e09140487f9cbc99db606c45ee747102dfb46378452'),
        ('bootstrap-qr', 'eager'):
            ('3125bfe02df6171ff523526a308bb19745069451700cbe544a091f70a8516de2',
             '321bbf41659e947609aca5ddc382478fa1b66588726c5305e0ecb7d8c0c310f0'),
        ('running-dueling-average', 'eager'):
            ('feda8dc2db87200c71f804ee4374c735db61a5db63e520a6444272b5ad2584e5',
             'af160873a87654da78b2fafbf293858fdde03d413e32f619af138d40c5509494'),
    },
}


def machine() -> tuple[str, str]:
    model, _, cpu_id = cpu_info()
    return torch.__version__, f"{model} ({cpu_id})"


def config(game: str, bf16: bool = False):
    """The resolved config of ``game`` on a 2-core CPU (the cpu-small profile: channels_last, and
    bf16 autocast where the CPU has bf16 instructions; no C++ compiler, so no compile), with a
    small replay."""
    env, over, _ = CASES[game]
    return resolve_config({"env": env, "buffer_size": 4_096, **over}, dataclasses.replace(hw(2), cpu_bf16=bf16)).cfg


def fill(replay: Replay, game: str, n_actions: int, seed: int) -> None:
    """Fixed records, as a collector writes them: each stream's episodes of 10-60 steps end with
    TERM (or now and then TRUNC), then a LAST record with the final frame, then FIRST. Frames are
    noise, rewards Atari's -1/0/+1 (Catch, Pong) or dense and scaled (Mario)."""
    rng = np.random.default_rng(seed)
    st = replay.storage
    streams, per_stream = st.num_streams, st.stream_len - 8
    flags = np.zeros((streams, per_stream), np.uint8)
    for s in range(streams):
        t = 0
        while t < per_stream:
            flags[s, t] |= FIRST
            end = t + int(rng.integers(10, 60))
            if end + 1 >= per_stream:
                break
            flags[s, end] |= TRUNC if rng.random() < 0.2 else TERM
            flags[s, end + 1] = LAST
            t = end + 2
    if game == "mario":
        rewards = (rng.normal(0.2, 0.6, flags.shape)).astype(np.float32)
    else:
        rewards = rng.choice(np.array([-1.0, 0.0, 0.0, 0.0, 0.0, 1.0], np.float32), flags.shape)
    actions = rng.integers(0, n_actions, flags.shape).astype(np.uint8)
    envs = replay.writer.envs_per_collector
    for t in range(per_stream):  # one step of every env a write, as a collector's chunk holds
        for c in range(streams // envs):
            rows = slice(c * envs, (c + 1) * envs)
            replay.writer.write(c, rng.integers(0, 256, (envs, 84, 84), dtype=np.uint8), {
                "env": np.arange(envs, dtype=np.uint16), "action": actions[rows, t],
                "reward": rewards[rows, t], "flags": flags[rows, t]})


def digest(obj, h) -> None:
    """Feed ``obj`` (a state dict: dicts, lists, tensors, numbers) into ``h``, keys in order."""
    if isinstance(obj, dict):
        for k in sorted(obj, key=str):
            h.update(repr(k).encode())
            digest(obj[k], h)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            digest(v, h)
    elif isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        h.update(f"{t.dtype}{tuple(t.shape)}".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    else:
        h.update(repr(obj).encode())


def train(game: str, path: str, updates: int = UPDATES) -> tuple[str, str]:
    """(SHA-256 of the learner's state after ``updates`` updates on ``path``, of every update's
    loss, TD error, Q mean and gradient norm)."""
    cfg = config(game, bf16=path == "eager-bf16")
    lrn_cfg = cfg.learner
    assert lrn_cfg.amp == (path == "eager-bf16") and not lrn_cfg.compile and lrn_cfg.grad_accum_steps == 1
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)  # as a run's learner process (flush_denormals): it changes the arithmetic
    try:
        torch.manual_seed(cfg.seed)  # as build_pipeline seeds before it builds the learner
        learner = Learner(lrn_cfg, cfg.env_options.frame_stack, CASES[game][2], torch.device("cpu"))
        replay = Replay.from_config(cfg)
        fill(replay, game, CASES[game][2], cfg.seed)
        if path == "compiled":
            engine = Engine(learner, compile_after=0)  # as a benchmark row: compiled from the first update
            engine.compile_loss()
        elif path == "graph-step":
            engine = Engine(learner, scope="update", compile_after=0)  # what CUDA captures, run eagerly
        else:
            engine = Engine(learner)
        figures = hashlib.sha256()
        batch = lrn_cfg.batch_size
        for i in range(updates):
            steps = FIRST_STEP + int(i * batch / lrn_cfg.replay_ratio)
            b = learner.batch_from(replay, batch)
            if lrn_cfg.lr_decay_steps:
                learner.set_lr(lr_schedule(lrn_cfg, steps))
            out = engine.update([b])
            assert not out["skipped"]
            digest([out["loss"], out["td_error"], out["q_mean"], out["grad_norm"]], figures)
            for td in out["td_abs"]:
                replay.update_priorities(b["stream"], b["pos"], td, b["seq"])
            replay.anneal(steps / cfg.total_steps)
        assert engine.compile_error is None and engine.graph_error is None
        assert (path == "graph-step") == engine.graph.active
        state = hashlib.sha256()
        digest(learner.state_dict(), state)
        return state.hexdigest(), figures.hexdigest()
    finally:
        torch.set_num_threads(threads)
        torch.set_flush_denormal(False)  # torch's default


def test_the_games_learners_are_the_presets():
    """What the hashes stand for: each game's learner as the issue names it."""
    catch, pong, mario = (config(g).learner for g in GAMES)
    assert pong.quantiles == 51 and not pong.double_dqn and pong.bn_targets == "batch"
    assert mario.quantiles == 0 and mario.double_dqn and mario.bn_targets == "batch"
    assert config("mario").replay.prioritized and not config("pong").replay.prioritized
    assert catch.quantiles == 51 and catch.lr == 1e-3 and catch.target_update_interval == 100
    assert all(not c.amp and not c.compile and c.channels_last for c in (catch, pong, mario))
    assert config("mario", bf16=True).learner.amp
    assert UPDATES > GRAPH_WARMUP_UPDATES


def check(case: str, path: str) -> None:
    recorded = RECORDED.get(machine())
    if recorded is None:
        pytest.skip(f"no hashes recorded for torch {machine()[0]} on a {machine()[1]} CPU; record them on the "
                    "commit before the change with `python -m tests.test_same_weights` and add them to RECORDED")
    if path == "eager-bf16" and not cpu_info()[1]:
        pytest.skip("no bf16 instructions: oneDNN would emulate them, ~10x slower than fp32")
    state, figures = train(case, path, RULE_UPDATES if case in RULES else UPDATES)
    want_state, want_figures = recorded[case, path]
    assert figures == want_figures, f"{case}, {path}: the update figures (loss, TD error, Q, gradient norm) changed"
    assert state == want_state, f"{case}, {path}: the weights or optimizer state changed"


@pytest.mark.parametrize("path", [p if p != "compiled" else pytest.param(p, marks=pytest.mark.slow) for p in PATHS])
@pytest.mark.parametrize("game", list(GAMES))
def test_the_same_seed_gives_the_same_weights(game, path):
    check(game, path)


@pytest.mark.parametrize("rule", list(RULES))
def test_the_same_seed_gives_the_same_weights_under_every_rule(rule):
    check(rule, "eager")


if __name__ == "__main__":  # prints this machine's table, for RECORDED
    chosen = sys.argv[1:] or ([f"{g}/{p}" for p in PATHS for g in GAMES if p != "eager-bf16" or cpu_info()[1]]
                              + [f"{r}/eager" for r in RULES])
    print(f"    {machine()!r}: {{")
    for gp in chosen:
        case, path = gp.split("/")
        state, figures = train(case, path, RULE_UPDATES if case in RULES else UPDATES)
        print(f"        ({case!r}, {path!r}):\n            ({state!r},\n             {figures!r}),", flush=True)
    print("    },")
