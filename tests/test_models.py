"""The BatchNorm DQN and the Nature baseline: shapes, dtypes, precision, BatchNorm handling."""
import numpy as np
import pytest
import torch

from models import BatchNormDQN, NatureDQN, NetworkSpec, build_model
from models.weights import flat_size, read_flat, write_flat


def _obs(b=8, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (b, 4, 84, 84), dtype=np.uint8))


@pytest.mark.parametrize("arch", ["batchnorm", "nature", "impala", "impala-s"])
@pytest.mark.parametrize("dueling", [False, True])
def test_q_values_shape(arch, dueling):
    model = build_model(NetworkSpec(arch, 4, 6, dueling))
    assert model(_obs()).shape == (8, 6)


def test_batchnorm_dqn_has_no_conv_bias_and_kaiming_init():
    m = BatchNormDQN(4, 6)
    convs = [x for x in m.modules() if isinstance(x, torch.nn.Conv2d)]
    assert len(convs) == 3 and all(c.bias is None for c in convs)
    assert sum(isinstance(x, torch.nn.BatchNorm2d) for x in m.modules()) == 3
    w = convs[0].weight
    assert abs(w.std().item() - (2 / w[0].numel()) ** 0.5) < 0.01  # He normal std
    assert [c.out_channels for c in convs] == [32, 64, 64]


def test_uint8_input_scaled_inside():
    m = NatureDQN(4, 6).eval()
    x = _obs()
    assert torch.allclose(m(x), m(x.float() / 255.0), atol=1e-5)


def test_bf16_autocast_train_step_lowers_loss():
    torch.manual_seed(0)
    m = BatchNormDQN(4, 6)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    x, target = _obs(32), torch.randn(32, 6)
    losses = []
    for _ in range(20):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            q = m(x)
        assert q.dtype == torch.bfloat16
        loss = torch.nn.functional.mse_loss(q.float(), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_channels_last_gives_same_q_values():
    m = BatchNormDQN(4, 6).eval()
    x = _obs()
    ref = m(x)
    m2 = m.to(memory_format=torch.channels_last)
    assert torch.allclose(m2(x.contiguous(memory_format=torch.channels_last)), ref, atol=1e-4)


def _trained_stats(model):
    model.train()
    model(_obs(32))  # running statistics away from their init
    return model.eval()


@pytest.mark.parametrize("arch, quantiles, dueling, iqn_taus", [
    ("batchnorm", 0, False, 0), ("batchnorm", 51, False, 0), ("batchnorm", 0, True, 0), ("impala-s", 51, True, 0),
    ("impala", 0, False, 0), ("nature", 0, False, 0), ("batchnorm", 0, False, 8), ("impala-s", 0, True, 8)])
def test_bf16_acting_matches_fp32_acting(arch, quantiles, dueling, iqn_taus):
    """A collector acting in bf16 (BatchNorm and the input scaling folded into bf16 convs on
    channels_last frames, the head's output layer in fp32) reads the Q-values fp32 reads to
    within bf16's rounding, picks the same greedy actions but where two actions' values are that
    close, and gives fp32 Q-values, so argmax sees no rounded ties."""
    from models.acting import Bf16ActingNet

    torch.manual_seed(0)
    m = _trained_stats(build_model(NetworkSpec(arch, 4, 6, dueling, quantiles, iqn_taus)))
    net = Bf16ActingNet(m)  # IQN: its fixed acting fractions' embedding computed once per refresh
    assert not any(isinstance(x, torch.nn.BatchNorm2d) for x in net.modules())  # every one folded
    assert net.features[0].weight.dtype == torch.bfloat16
    x = _obs(64, seed=2)
    with torch.inference_mode():
        ref = m(x)
        q = net(x.contiguous(memory_format=torch.channels_last))
    assert q.dtype == torch.float32 and q.shape == ref.shape
    spread, err = (ref.max() - ref.min()).item(), (q - ref).abs().max().item()
    assert err < 0.05 * spread
    top2 = ref.topk(2, dim=1).values
    clear = (top2[:, 0] - top2[:, 1]) > 2 * err  # no rounding can swap the best two
    assert clear.sum() >= 8 and torch.equal(q.argmax(1)[clear], ref.argmax(1)[clear])
    assert len(set(q[0].tolist())) == 6  # no two actions rounded into the same value
    assert all(p.dtype == torch.float32 for p in m.parameters())  # the trained network is untouched


@pytest.mark.parametrize("head", [dict(quantiles=51), dict(iqn_taus=8)])
def test_bf16_acting_copy_follows_the_weights_it_is_refreshed_with(head):
    """The acting copy has tensors of its own: new weights loaded into the network (as a
    collector loads the learner's) reach it at ``refresh``, and only then (IQN's embedding of
    its acting fractions included)."""
    from models.acting import Bf16ActingNet

    torch.manual_seed(0)
    m, other = _trained_stats(BatchNormDQN(4, 6, **head)), _trained_stats(BatchNormDQN(4, 6, **head))
    net = Bf16ActingNet(m)
    x = _obs(16, seed=3).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        before = net(x)
        buf = torch.empty(flat_size(other))
        write_flat(other, buf)
        read_flat(m, buf)
        assert torch.equal(net(x), before)  # still the old weights
        net.refresh()
        assert torch.equal(net(x), Bf16ActingNet(m)(x))  # the new ones, as a fresh copy reads them
        assert (net(x) - before).abs().max() > 1e-3


def test_weights_loaded_into_a_channels_last_model_act_the_same():
    """The learner trains a channels_last network; its flat weights (written in logical order)
    load into a channels_last model as into an NCHW one."""
    src, nchw = BatchNormDQN(4, 6), BatchNormDQN(4, 6)
    nhwc = BatchNormDQN(4, 6).to(memory_format=torch.channels_last)
    src(_obs(16))
    buf = torch.empty(flat_size(src))
    write_flat(src, buf)
    read_flat(nchw, buf)
    read_flat(nhwc, buf)
    assert nhwc.features[0].weight.is_contiguous(memory_format=torch.channels_last)
    nchw.eval(), nhwc.eval()
    x = _obs()
    assert torch.allclose(nhwc(x.contiguous(memory_format=torch.channels_last)), nchw(x), atol=1e-4)


def test_rollout_acting_in_bf16_plays_the_bf16_greedy_actions():
    """Rollout(act_bf16=True), as a collector on a bf16 CPU builds it: the greedy actions
    (epsilon 0) are the argmax of the folded bf16 copy, and after new weights are loaded and
    announced (``weights_loaded``, as ``Collector.load_weights`` does) they follow the new ones."""
    from models.acting import Bf16ActingNet
    from pipeline.actors.rollout import Rollout
    from tests.noise_envs import NoiseEnvs

    torch.manual_seed(0)
    model = _trained_stats(build_model(NetworkSpec("batchnorm", 4, 6, quantiles=51)))
    rollout = Rollout(NoiseEnvs(), model, 4, False, seed=0, act_bf16=True)

    def greedy_now(net):
        stack = torch.from_numpy(rollout.stack.copy()).contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            return net(stack).argmax(1).numpy()

    for _ in range(3):
        expected = greedy_now(Bf16ActingNet(model))
        _, fields, _, _ = rollout.step(0.0)
        assert np.array_equal(fields["action"], expected)
    stale, other = Bf16ActingNet(model), _trained_stats(build_model(NetworkSpec("batchnorm", 4, 6, quantiles=51)))
    buf = torch.empty(flat_size(other))
    write_flat(other, buf)
    read_flat(model, buf)
    rollout.weights_loaded()
    differ = 0
    for _ in range(3):
        expected = greedy_now(Bf16ActingNet(other))
        differ += int(not np.array_equal(expected, greedy_now(stale)))  # the old weights would act otherwise
        _, fields, _, _ = rollout.step(0.0)
        assert np.array_equal(fields["action"], expected)
    assert differ > 0


def test_eval_mode_uses_running_stats_for_any_batch_size():
    m = BatchNormDQN(4, 6)
    m(_obs(32))  # train-mode pass moves the running statistics
    m.eval()
    x = _obs(4, seed=1)
    assert torch.allclose(m(x[:1]), m(x)[:1], atol=1e-5)  # acting on 1 env = acting in a batch


def test_weights_roundtrip_includes_batchnorm_running_stats():
    src, dst = BatchNormDQN(4, 6), BatchNormDQN(4, 6)
    src(_obs(16))
    buf = torch.empty(flat_size(src))
    write_flat(src, buf)
    read_flat(dst, buf)
    src.eval(), dst.eval()
    assert torch.equal(src(_obs()), dst(_obs()))


def test_impala_networks_cost_what_their_docs_say_and_start_as_shallow_stacks():
    """Multiply-adds per frame stack against the Nature stack (the trade on a CPU learner), and
    each residual block the identity at its start (its last BatchNorm scale is zero)."""
    from torch.utils.flop_counter import FlopCounterMode

    from models.dqn import _Residual

    def flops(arch):
        with FlopCounterMode(display=False) as fc:
            build_model(NetworkSpec(arch, 4, 6)).atoms(_obs(4))
        return fc.get_total_flops()
    base = flops("batchnorm")
    assert 5.5 < flops("impala") / base < 6.1 and 1.4 < flops("impala-s") / base < 1.7
    block = _Residual(16).eval()
    x = torch.randn(2, 16, 21, 21)
    assert torch.equal(block(x), x)


def test_a_network_spec_is_one_from_the_config_and_from_the_checkpoint_it_writes():
    """The learner builds its network from the config's spec, a checkpoint keeps that spec in its
    meta, and --eval builds the network back from it; a checkpoint from before QR-DQN and IQN
    (no such keys) is a one-value head."""
    from config_optimized import Config
    from pipeline.agent.learner import Learner
    from pipeline.records.checkpoint import training_state

    cfg = Config.of(quantiles=51, dueling=True, model_arch="nature", amp=False)
    learner = Learner(cfg.learner, cfg.env_options.frame_stack, 5, torch.device("cpu"))
    assert learner.network == NetworkSpec("nature", 4, 5, dueling=True, quantiles=51)
    meta = training_state(cfg, 5, {}, {}, {})["meta"]
    assert NetworkSpec.from_meta(meta) == learner.network
    assert build_model(NetworkSpec.from_meta(meta)).head.n_atoms == 51
    old = {k: v for k, v in meta.items() if k not in ("quantiles", "iqn_taus")}
    assert NetworkSpec.from_meta(old) == NetworkSpec("nature", 4, 5, dueling=True)
    with pytest.raises(ValueError, match="'resnet' is not a model"):
        build_model(NetworkSpec("resnet", 4, 5))
