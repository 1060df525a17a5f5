"""Learner: it learns a fixed batch; accumulation and AMP give the one-big-batch gradients."""
import copy
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from config_optimized import Config
from pipeline.engine.engine import COMPILE_AFTER_UPDATES, GRAPH_WARMUP_UPDATES, Engine, compile_mode, graph_scope
from pipeline.agent.learner import Learner, amp_dtype_for
from pipeline.agent.rules import td_targets
from tests.proc_utils import ROOT


def _batch(n, seed=0):
    rng = np.random.default_rng(seed)
    return {"obs": rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8),
            "next_obs": rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8),
            "action": rng.integers(0, 6, n), "return": rng.standard_normal(n).astype(np.float32),
            "discount": np.full(n, 0.97, np.float32), "weights": None}


def _learner(**kw):
    """fp32 unless a test asks for autocast: bf16 is emulated (slow) on CPUs without it."""
    torch.manual_seed(0)
    return Learner(Config.of(**{"amp": False, **kw}).learner, 4, 6, torch.device("cpu"))


def test_updates_lower_loss_on_a_fixed_batch():
    lrn = _learner(lr=1e-3, target_update_interval=10_000)
    b = lrn.to_device(_batch(32))
    first = lrn.update([b])["loss"]
    for _ in range(30):
        last = lrn.update([b])["loss"]
    assert last < 0.5 * first
    assert lrn.updates == 31


def _grads(lrn, micro):
    """The gradient of one ``Learner.update`` over ``micro`` (micro-batches), as it stepped with it."""
    lrn.update([lrn.to_device(b) for b in micro])
    return torch.cat([p.grad.flatten() for p in lrn.model.parameters()])


def test_gradient_accumulation_equals_one_big_batch():
    # Nature DQN: without BatchNorm, 4 micro-batches of 8 are exactly one batch of 32.
    whole, accum = (_learner(model_arch="nature", max_grad_norm=0.0) for _ in range(2))  # same seed, same weights
    big = _batch(32)
    parts = [{k: (v[i:i + 8] if v is not None else None) for k, v in big.items()} for i in range(0, 32, 8)]
    assert torch.allclose(_grads(whole, [big]), _grads(accum, parts), rtol=1e-4, atol=1e-6)
    for a, b in zip(whole.model.parameters(), accum.model.parameters()):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)  # and the optimizer took the same step


def test_bf16_amp_gradients_match_fp32():
    fp32 = _learner(model_arch="nature", amp=False, max_grad_norm=0.0)
    bf16 = _learner(model_arch="nature", amp=True, max_grad_norm=0.0)
    bf16.model.load_state_dict(fp32.model.state_dict())
    bf16.target.load_state_dict(fp32.target.state_dict())
    b = _batch(32)
    g32, g16 = _grads(fp32, [b]), _grads(bf16, [b])
    cos = torch.nn.functional.cosine_similarity(g32, g16, dim=0)
    assert bf16.amp_dtype == torch.bfloat16 and cos > 0.98


def test_double_dqn_target_does_not_move_batchnorm_stats():
    lrn = _learner()
    before = [b.clone() for n, b in lrn.model.named_buffers() if "running" in n]
    td_targets(lrn.rule, lrn, lrn.to_device(_batch(16)))
    after = [b for n, b in lrn.model.named_buffers() if "running" in n]
    assert all(torch.equal(x, y) for x, y in zip(before, after))
    assert lrn.model.training and not lrn.target.training


def test_double_dqn_argmax_reads_the_online_weights_in_eval_mode_through_updates_and_loads():
    """bn_targets=running: a' comes from the online weights and running statistics as they are
    now (after optimizer steps, BatchNorm updates and a checkpoint load), in eval mode, while the
    online network itself stays in train mode."""
    lrn = _learner(bn_targets="running", lr=1e-2)
    b = lrn.to_device(_batch(16))
    for _ in range(3):
        lrn.update([b])
    other = _learner(bn_targets="running", lr=1e-2)  # trained apart: other weights and statistics
    for _ in range(2):
        other.update([other.to_device(_batch(16, seed=1))])
    lrn.load_state_dict(other.state_dict())
    x = b["next_obs"]
    with torch.no_grad():
        want = copy.deepcopy(lrn.model).eval().atoms(x)
        got = lrn.argmax_model.atoms(x)
        assert torch.equal(got, want)  # a stale copy (made at construction) would differ after the load
    assert lrn.model.training and not lrn.argmax_model.training


@pytest.mark.slow
@pytest.mark.parametrize("bn_targets", ["batch", "running"])
def test_compiled_loss_trains_as_the_eager_one(bn_targets):
    """--compile (the bf16 CPU and GPU profiles' choice) compiles targets, Q(s) and the loss as
    one graph and its backward: from the same state (weights, BatchNorm statistics, Adam, target
    net), each update gives the eager update's loss and weights."""
    eager = _learner(lr=1e-3, bn_targets=bn_targets, target_update_interval=2)
    compiled = _learner(lr=1e-3, bn_targets=bn_targets, target_update_interval=2, compile=True)
    said = []
    engine, eager_engine = Engine(compiled, said.append), Engine(eager)
    assert not engine.compile_due()  # a short run never pays for the compile
    compiled.updates = eager.updates = COMPILE_AFTER_UPDATES  # as a run that has trained that long
    assert engine.compile_due() and not eager_engine.compile_due()
    for i in range(4):
        # Each step from the eager learner's state: float reordering in the compiled kernels can
        # flip a near-tie in Double DQN's argmax, which later steps would then compound.
        compiled.load_state_dict(copy.deepcopy(eager.state_dict()))  # Adam's state would be shared, not copied
        b = _batch(16, seed=i)
        got, want = engine.update([compiled.to_device(b)]), eager.update([eager.to_device(b)])
        assert got["loss"] == pytest.approx(want["loss"], rel=1e-4)
        # Adam divides by the gradient's scale, so a gradient element near Adam's epsilon can turn
        # a float-reordering difference into a visible step: a handful of weights may differ
        # (measured: 2 in 1.7M); a wrong target or statistic moves most of them (measured: 67%).
        diff = torch.cat([(x.float() - y.float()).abs().flatten()
                          for x, y in zip(compiled.model.state_dict().values(), eager.model.state_dict().values())])
        assert (diff > 1e-5).float().mean() < 1e-4 and diff.max() < 2e-3, (i, diff.max())
    # the first update compiled, and the run's log heard of it before and after, once
    assert hasattr(engine.loss, "_torchdynamo_orig_callable") and not engine.compile_due() and engine.compile_done
    assert len(said) == 2 and said[0].startswith("[MAIN] Compiling the learner's loss and its backward (torch.compile) "
                                                 "at 2,000 updates") and re.match(r"\[MAIN\] Compiled in \d+\.\d s$", said[1]), said


def test_the_bootstrap_epsilon_values_s_by_the_epsilon_greedy_policy_exactly_with_one_value_per_action():
    """DQN at --bootstrap-epsilon 0.5: every target is R + d (0.5 Q(s', a*) + 0.5 mean_a Q(s', a)),
    a* the greedy action (Double DQN's, chosen on the online network); no draw."""
    greedy_lrn, eps_lrn = (_learner(bootstrap_epsilon=e) for e in (0.0, 0.5))
    b = greedy_lrn.to_device(_batch(64))
    greedy = td_targets(greedy_lrn.rule, greedy_lrn, b)
    got = td_targets(eps_lrn.rule, eps_lrn, b)
    with torch.no_grad():
        every = eps_lrn.target.atoms(b["next_obs"]).float()[:, :, 0]  # [B, A]
    mean = b["return"] + b["discount"] * every.mean(1)
    assert torch.allclose(got[:, 0], 0.5 * greedy[:, 0] + 0.5 * mean, atol=1e-5)
    assert not torch.allclose(got, greedy, atol=1e-3)  # the random half moved every target
    assert torch.equal(td_targets(eps_lrn.rule, eps_lrn, b), got)  # exact: the same batch, the same targets


def test_the_bootstrap_epsilon_draws_the_epsilon_greedy_policys_next_action_for_quantiles():
    """QR-DQN at --bootstrap-epsilon 0.5: about half the targets (5/12 with 6 actions: a random
    draw can be the greedy action) bootstrap from another action than the greedy one, each exactly
    from one action's quantiles; at 0 every target is the greedy one."""
    quantiles = 5
    greedy_lrn, eps_lrn = (_learner(quantiles=quantiles, bootstrap_epsilon=e) for e in (0.0, 0.5))
    b = greedy_lrn.to_device(_batch(512))
    greedy = td_targets(greedy_lrn.rule, greedy_lrn, b)
    torch.manual_seed(1)
    drawn = td_targets(eps_lrn.rule, eps_lrn, b)
    with torch.no_grad():
        every = eps_lrn.target.atoms(b["next_obs"]).float()  # [B, A, K]
    per_action = b["return"][:, None, None] + b["discount"][:, None, None] * every
    matches = (drawn[:, None, :] - per_action).abs().amax(2) < 1e-5  # [B, A]: which action each target bootstrapped from
    assert matches.any(1).all()
    other = ~(drawn - greedy).abs().amax(1).lt(1e-5)
    assert abs(other.float().mean().item() - 5 / 12) < 0.1, other.float().mean()
    assert torch.equal(td_targets(greedy_lrn.rule, greedy_lrn, b), greedy)  # 0: the greedy bootstrap, no draw


def test_target_sync_interval():
    lrn = _learner(target_update_interval=3, lr=1e-2)
    b = lrn.to_device(_batch(16))
    for _ in range(2):
        lrn.update([b])
    assert not all(torch.equal(p, q) for p, q in zip(lrn.model.parameters(), lrn.target.parameters()))
    lrn.update([b])
    assert all(torch.equal(p, q) for p, q in zip(lrn.model.parameters(), lrn.target.parameters()))


def test_nan_batch_is_skipped_without_poisoning_weights_then_diverges():
    import pytest

    from pipeline.agent.learner import TrainingDiverged

    lrn = _learner()
    good = lrn.to_device(_batch(32))
    lrn.update([good])
    before = {k: v.clone() for k, v in lrn.model.state_dict().items()}
    bad = _batch(32)
    bad["return"][3] = np.nan
    bad = lrn.to_device(bad)
    out = lrn.update([bad])
    assert out["skipped"] and lrn.updates == 1
    for k, v in lrn.model.state_dict().items():
        if v.is_floating_point():
            assert torch.isfinite(v).all(), k
            if "running" not in k:
                assert torch.equal(v, before[k]), f"{k} changed on a skipped step"
    assert not lrn.update([good])["skipped"]  # one good batch resets the count
    with pytest.raises(TrainingDiverged, match="NaN/inf for 100 updates in a row"):
        for _ in range(100):
            lrn.update([bad])


@pytest.mark.parametrize("max_grad_norm", [10.0, 0.0])
def test_non_finite_gradient_with_a_finite_loss_is_skipped_like_a_nan_loss(max_grad_norm):
    """fp32 and bf16 have no GradScaler to catch an inf gradient behind a finite loss: the step
    must be skipped, or clipping turns inf into NaN (and without clipping Adam's inf/inf does)
    and every weight becomes NaN."""
    from pipeline.agent.learner import TrainingDiverged

    lrn = _learner(max_grad_norm=max_grad_norm)
    good = lrn.to_device(_batch(8))
    lrn.update([good])
    before = {k: v.clone() for k, v in lrn.model.state_dict().items()}
    inf_grad = next(lrn.model.parameters()).register_hook(lambda g: torch.full_like(g, float("inf")))
    out = lrn.update([good])
    assert out["skipped"] and lrn.updates == 1 and lrn.bad_steps == 1
    assert lrn.is_finite()
    for k, v in lrn.model.state_dict().items():
        if v.is_floating_point() and "running" not in k:
            assert torch.equal(v, before[k]), f"{k} changed on a skipped step"
    inf_grad.remove()
    assert not lrn.update([good])["skipped"] and lrn.updates == 2 and lrn.bad_steps == 0
    inf_grad = next(lrn.model.parameters()).register_hook(lambda g: torch.full_like(g, float("inf")))
    with pytest.raises(TrainingDiverged, match="gradient was NaN/inf for 100 updates in a row"):
        for _ in range(100):
            lrn.update([good])
    assert lrn.is_finite() and lrn.updates == 2


def test_fp16_nan_loss_lowers_the_scale_and_training_goes_on():
    """CUDA's default path (fp16 autocast + an enabled GradScaler), run on the CPU, which torch
    supports: a non-finite loss must skip the step and lower the scale, not raise."""
    lrn = _learner(amp=True, amp_dtype="fp16", model_arch="nature")
    assert lrn.amp_dtype == torch.float16 and lrn.scaler.is_enabled()
    good = lrn.to_device(_batch(16))
    assert not lrn.update([good])["skipped"]
    scale = lrn.scaler.get_scale()
    bad = _batch(16)
    bad["return"][0] = np.nan  # NaN gradients: the scaler must see them and halve its scale
    out = lrn.update([lrn.to_device(bad)])
    assert out["skipped"] and lrn.updates == 1
    assert lrn.scaler.get_scale() < scale
    assert lrn.is_finite()
    assert not lrn.update([good])["skipped"] and lrn.updates == 2


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else []) + (
    ["mps"] if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available() else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("channels_last", [False, True])
def test_batches_move_to_the_learner_device_through_one_path(device, channels_last):
    torch.manual_seed(0)
    lrn = Learner(Config.of(amp=False, channels_last=channels_last).learner, 4, 6, torch.device(device))
    b = lrn.to_device(_batch(8))
    for k, v in b.items():
        if isinstance(v, torch.Tensor):
            assert v.device.type == device, k
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    assert b["obs"].is_contiguous(memory_format=fmt) and b["next_obs"].is_contiguous(memory_format=fmt)
    assert torch.equal(b["obs"].cpu(), torch.from_numpy(_batch(8)["obs"]))
    out = lrn.update([b])
    assert not out["skipped"] and np.isfinite(out["loss"]) and np.isfinite(out["q_mean"])


class _OnHost:
    """The prefetcher's learner, minus the device copy: the batches stay numpy."""
    host_channels_last = False

    @staticmethod
    def to_device(batch):
        return batch


def _one_step_of_every_env(replay, streams: int, step: int) -> None:
    from pipeline.transport.transition import FIRST

    replay.writer.write(0, np.full((streams, 84, 84), step, np.uint8),
                        {"env": np.arange(streams, dtype=np.uint16), "action": np.zeros(streams, np.uint8),
                         "reward": np.ones(streams, np.float32),
                         "flags": np.full(streams, FIRST if step == 0 else 0, np.uint8)})


@pytest.mark.parametrize("prioritized", [False, True])
def test_the_first_batch_waits_until_the_replay_can_serve_one(prioritized):
    """--learning-starts 0 with many streams: learning is due before any stream holds the
    n_step + 1 = 4 records its first transition needs. The prefetcher waits for them (the
    collectors play on) instead of failing the run when the sampler finds nothing to draw."""
    import time

    from pipeline.replay.prefetch import Prefetcher
    from pipeline.replay import Replay

    streams = 256
    replay = Replay.of(streams * 12, 1, streams, prioritized=prioritized, seed=0)
    prefetcher = Prefetcher(replay, _OnHost(), 32, 2)
    prefetcher.start()
    def looked_again():
        """Poll until the prefetcher has read the replay as it is now (twice: a look that began
        before the last write may have missed it) and found no batch to serve."""
        seen = prefetcher.looks
        deadline = time.time() + 10
        while prefetcher.looks < seen + 2 and time.time() < deadline and prefetcher.error is None:
            time.sleep(0.005)
        return prefetcher.looks >= seen + 2

    try:
        for step in range(3):  # empty, then 1 and 2 records a stream: nothing to sample yet
            assert looked_again(), prefetcher.error
            assert prefetcher.error is None and prefetcher.is_alive(), prefetcher.error
            assert prefetcher.queue.empty()
            _one_step_of_every_env(replay, streams, step)
        assert looked_again(), prefetcher.error  # 3 records a stream
        assert prefetcher.error is None and prefetcher.queue.empty()
        _one_step_of_every_env(replay, streams, 3)  # 4: each stream's first record can be sampled
        batch = prefetcher.get(timeout=10)
        assert (batch["pos"] == 0).all() and (batch["obs"] == 0).all()
        assert (batch["next_obs"] == np.arange(4)[None, :, None, None]).all()  # the stack of steps 0..3
        np.testing.assert_allclose(batch["return"], 1 + 0.99 + 0.99 ** 2, rtol=1e-6)
    finally:
        prefetcher.stop_event.set()
        prefetcher.join(timeout=5)
    assert not prefetcher.is_alive() and prefetcher.error is None


def test_a_prefetcher_waiting_for_the_replay_stops_when_asked():
    import time

    from pipeline.replay.prefetch import Prefetcher
    from pipeline.replay import Replay

    prefetcher = Prefetcher(Replay.of(64 * 12, 1, 64), _OnHost(), 32, 2)
    prefetcher.start()
    deadline = time.time() + 10
    while prefetcher.looks == 0 and time.time() < deadline:  # it is waiting for the replay
        time.sleep(0.005)
    assert prefetcher.looks > 0 and prefetcher.queue.empty()
    prefetcher.stop_event.set()
    prefetcher.join(timeout=2)
    assert not prefetcher.is_alive() and prefetcher.error is None


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two torch threads")
def test_denormals_flush_on_every_thread_only_when_set_before_parallel_work():
    """flush_denormals() reaches every torch thread when it runs before the process's first
    parallel operation (as prepare_run and the trainer call it), and says so when it came too
    late: OpenMP threads copy the flag from the thread that starts them."""
    code = ("import torch; torch.set_num_threads(2); {before}"
            "from pipeline.agent.learner import flush_denormals; print(flush_denormals())")
    out = [subprocess.run([sys.executable, "-c", code.format(before=before)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120).stdout.strip() for before in ("", "torch.ones(1 << 20).mul_(2); ")]
    assert out == ["True", "False"], out


def test_a_compile_that_fails_at_run_time_warns_once_and_trains_on_eagerly():
    """A compiler that passes the start-up check but fails in inductor (here: one that is not
    there): the update that compiles trains eagerly instead, the learner says why once, and later
    updates (and compile_due) stay eager."""
    import torch._inductor.config as inductor

    torch._dynamo.reset()
    lrn = _learner(lr=1e-3, compile=True)
    said = []
    engine = Engine(lrn, said.append)
    lrn.updates = COMPILE_AFTER_UPDATES
    assert engine.compile_due() and engine.compile_ahead == COMPILE_AFTER_UPDATES
    before = copy.deepcopy(lrn.model.state_dict())
    with inductor.patch({"cpp.cxx": (None, "/nonexistent/c++")}):  # inductor's own override, undone after
        out = engine.update([lrn.to_device(_batch(32))])  # compiles first: it is due
    torch._dynamo.reset()
    assert not out["skipped"] and lrn.updates == COMPILE_AFTER_UPDATES + 1
    after = lrn.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before if before[k].is_floating_point())  # it trained
    assert "C++ compiler" in engine.compile_error and not engine.compiled and not engine.compile_due()
    assert not hasattr(engine.loss, "_torchdynamo_orig_callable") and engine.compile_ahead is None
    assert [line.split(" (")[0] for line in said] == ["[MAIN] Compiling the learner's loss and its backward",
                                                     "[MAIN] Warning: torch.compile failed"], said
    engine.update([lrn.to_device(_batch(32, seed=1))])
    assert lrn.updates == COMPILE_AFTER_UPDATES + 2 and len(said) == 2  # said once


def test_cuda_graphs_only_on_cuda_and_without_gradient_accumulation():
    """A CUDA learner graphs the whole update in bf16 and fp32, and only the compiled loss under
    fp16 (its GradScaler steps on the host); a CPU graphs nothing, and gradient accumulation
    keeps the eager update (a replay would write one micro-batch's gradients over the last's)."""
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    lrn = Config.of().learner
    assert graph_scope(cuda, lrn, torch.bfloat16) == "update" and graph_scope(cuda, lrn, None) == "update"
    assert graph_scope(cuda, Config.of(compile=True).learner, torch.float16) == "loss"
    assert graph_scope(cuda, Config.of(compile=False).learner, torch.float16) is None
    assert graph_scope(cpu, lrn, torch.bfloat16) is None
    assert graph_scope(cuda, Config.of(cuda_graphs=False).learner, torch.bfloat16) is None
    assert graph_scope(cuda, Config.of(grad_accum_steps=2).learner, torch.bfloat16) is None
    assert compile_mode("loss") == "reduce-overhead"
    assert compile_mode("update") is None and compile_mode(None) is None


def _graphed(device="cpu", **kw):
    """A learner whose every update takes the whole-update path from the first (on a CPU the
    step the graph captures runs eagerly; on CUDA it is captured after the warm-ups)."""
    torch.manual_seed(0)
    lrn = Learner(Config.of(**{"amp": False, **kw}).learner, 4, 6, torch.device(device))
    return Engine(lrn, scope="update", compile_after=0)


def _weights(lrn):
    return [t.detach().float().cpu().clone() for t in (*lrn.model.parameters(), *lrn.model.buffers())]


@pytest.mark.parametrize("device", DEVICES[:2] if "cuda" in DEVICES else ["cpu"])
def test_the_whole_update_step_trains_as_the_eager_update(device, monkeypatch):
    """The same weights after every update as the eager learner's, on a CPU (the step the graph
    captures) and on CUDA (captured after the warm-ups and replayed); its figures come one
    update late; a learning rate set between replays reaches them (0 holds every weight)."""
    eager, engine = _learner(target_update_interval=4, lr=1e-3), _graphed(device, target_update_interval=4, lr=1e-3)
    graphed = engine.learner
    if device == "cuda":
        eager = Learner(eager.cfg, 4, 6, torch.device("cuda"))
        eager.model.load_state_dict(graphed.model.state_dict()), eager.target.load_state_dict(graphed.target.state_dict())
        # Each learner's cuDNN benchmark may pick another conv algorithm, and TF32 rounds them
        # apart; Adam then turns the tiniest gradients' differences into lr-sized steps.
        for flag, value in (("benchmark", False), ("deterministic", True), ("allow_tf32", False)):
            monkeypatch.setattr(torch.backends.cudnn, flag, value)
        monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    for group in eager.optimizer.param_groups:  # the graph's float32 lr tensor: a Python float rounds otherwise
        group["lr"] = torch.tensor(1e-3, device=device)
    batches = [_batch(32, seed=i) for i in range(GRAPH_WARMUP_UPDATES + 5)]
    losses = []
    for i, b in enumerate(batches):
        e, g = eager.update([eager.to_device(b)]), engine.update([graphed.to_device(b)])
        losses.append(e["loss"])
        assert not g["skipped"] and g["loss"] == pytest.approx(losses[max(i - 1, 0)], rel=1e-4), i
        for x, y in zip(_weights(eager), _weights(graphed)):
            assert torch.equal(x, y), (i, (x - y).abs().max().item())
    assert engine.graph_error is None and graphed.updates == eager.updates == len(batches)
    assert engine.graph.captured == (device == "cuda")
    graphed.set_lr(0.0)
    params = [p.detach().cpu().clone() for p in graphed.model.parameters()]
    engine.update([graphed.to_device(batches[1])])
    assert all(torch.equal(x, p.detach().cpu()) for x, p in zip(params, graphed.model.parameters()))
    saved = graphed.state_dict()["optimizer"]["param_groups"][0]
    assert saved["lr"] == 0.0 and isinstance(saved["lr"], float) and saved["capturable"] is False


@pytest.mark.parametrize("device", DEVICES[:2] if "cuda" in DEVICES else ["cpu"])
def test_a_graphed_nan_batch_steps_nothing_and_is_reported_one_update_late(device):
    from pipeline.agent.learner import TrainingDiverged

    engine = _graphed(device)
    lrn = engine.learner
    good = lrn.to_device(_batch(32))
    for _ in range(GRAPH_WARMUP_UPDATES + 1):
        assert not engine.update([good])["skipped"]
    bad = _batch(32)
    bad["return"][3] = np.nan
    bad = lrn.to_device(bad)
    params = [p.detach().clone() for p in lrn.model.parameters()]
    steps = [s["step"].clone() for s in lrn.optimizer.state.values()]
    assert not engine.update([bad])["skipped"]  # the good update before it reports
    assert all(torch.equal(x, p) for x, p in zip(params, lrn.model.parameters()))  # found_inf held Adam
    assert all(torch.equal(x, s["step"]) for x, s in zip(steps, lrn.optimizer.state.values()))
    out = engine.update([good])
    assert out["skipped"] and lrn.bad_steps == 1
    assert all(torch.isfinite(b).all() for b in lrn.model.buffers() if b.is_floating_point())  # BatchNorm repaired
    assert not engine.update([good])["skipped"] and lrn.bad_steps == 0
    assert not engine.update([bad])["skipped"] and lrn.bad_steps == 0  # the good update before it reports
    lrn.bad_steps = 98  # as after 98 more: two reported skips reach the limit
    assert engine.update([bad])["skipped"] and lrn.bad_steps == 99
    with pytest.raises(TrainingDiverged, match="NaN/inf for 100 updates in a row"):
        engine.update([bad])
    assert engine.graph_error is None


def test_autocast_is_bf16_except_on_cuda_gpus_without_it():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert amp_dtype_for(cpu, True) == torch.bfloat16
    assert amp_dtype_for(cuda, True, "auto", cuda_bf16=True) == torch.bfloat16
    assert amp_dtype_for(cuda, True, "auto", cuda_bf16=False) == torch.float16
    assert amp_dtype_for(cuda, True, "fp16", cuda_bf16=True) == torch.float16
    assert amp_dtype_for(cuda, True, "bf16", cuda_bf16=False) == torch.bfloat16
    assert amp_dtype_for(cuda, False) is None



def test_the_weight_average_follows_the_online_weights_and_statistics_at_its_decay():
    """--weight-average 0.9: after each update the average holds 0.9 of itself and 0.1 of the
    online weights and BatchNorm statistics (the batch counts copied); checkpoints carry it,
    a resume loads it back, and a run that kept none starts it from the online weights."""
    from pipeline.records.checkpoint import policy_weights
    lrn = _learner(weight_average=0.9, lr=1e-3)
    assert lrn.policy is lrn.average and not lrn.average.training
    b = lrn.to_device(_batch(32))
    expected = {k: v.clone() for k, v in lrn.average.state_dict().items()}
    for _ in range(3):
        lrn.update([b])
        for k, v in lrn.model.state_dict().items():
            expected[k] = 0.9 * expected[k] + 0.1 * v if v.is_floating_point() else v.clone()
    got = lrn.average.state_dict()
    assert any("running_mean" in k for k in got) and any("num_batches_tracked" in k for k in got)
    for k, v in expected.items():
        assert torch.allclose(got[k], v, rtol=1e-5, atol=1e-6), k
    assert not torch.allclose(got["head.q.2.weight"], lrn.model.state_dict()["head.q.2.weight"])
    state = copy.deepcopy(lrn.state_dict())
    assert policy_weights(state) is state["average"]
    again = _learner(weight_average=0.9)
    again.load_state_dict(state)
    assert all(torch.equal(again.average.state_dict()[k], v) for k, v in got.items())
    del state["average"]
    fresh = _learner(weight_average=0.9)
    fresh.load_state_dict(state)
    assert all(torch.equal(fresh.average.state_dict()[k], v) for k, v in state["model"].items())


def test_without_the_weight_average_the_online_network_is_the_policy():
    from pipeline.records.checkpoint import policy_weights
    lrn = _learner()
    assert lrn.average is None and lrn.policy is lrn.model
    state = lrn.state_dict()
    assert "average" not in state and policy_weights(state) is state["model"]


def test_a_non_finite_average_is_neither_published_nor_saved():
    lrn = _learner(weight_average=0.99)
    assert lrn.is_finite()
    with torch.no_grad():
        next(lrn.average.parameters()).fill_(float("nan"))
    assert not lrn.is_finite()
