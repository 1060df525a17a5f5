"""The learning rules (pipeline/agent/rules.py): IQN and Munchausen against cases computed by hand, the
Learner's targets equal to the rule's formula on its networks' outputs (Nature and BatchNorm
networks), learning on a fixed return, and a loss with no host sync, as the whole-update CUDA
graph needs (checked on the CPU)."""
import math

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from config_optimized import Config, ConfigError
from models import NetworkSpec, build_model
from pipeline.agent.learner import Learner
from pipeline.agent.rules import Rule, loss, pick, quantile_huber, targets, td_targets
from pipeline.settings.check import validate
from pipeline.settings.hardware import Hardware


def _learner(**kw):
    torch.manual_seed(0)
    return Learner(Config.of(**{"amp": False, **kw}).learner, 4, 3, torch.device("cpu"))


def _batch(n, seed=0, actions=3):
    rng = np.random.default_rng(seed)
    return {"obs": rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8),
            "next_obs": rng.integers(0, 256, (n, 4, 84, 84), dtype=np.uint8),
            "action": rng.integers(0, actions, n), "return": rng.standard_normal(n).astype(np.float32),
            "discount": np.full(n, 0.9, np.float32), "weights": rng.uniform(0.5, 1.0, n).astype(np.float32)}


def test_iqn_loss_is_the_papers_at_the_drawn_fractions():
    # Dabney et al. 2018b, eq. 3, written out with loops: each sample's own fractions tau_i, the
    # sum over i of the mean over j of |tau_i - 1{u_ij < 0}| * Huber(u_ij), u_ij = target_j - theta_i.
    g = torch.Generator().manual_seed(0)
    theta, target = torch.randn(3, 4, generator=g) * 2, torch.randn(3, 5, generator=g) * 2
    taus = torch.rand(3, 4, generator=g)
    want = torch.zeros(3)
    for b in range(3):
        for i in range(4):
            for j in range(5):
                u = float(target[b, j] - theta[b, i])
                huber = 0.5 * u * u if abs(u) <= 1 else abs(u) - 0.5
                want[b] += abs(float(taus[b, i]) - (u < 0)) * huber / 5
    assert torch.allclose(quantile_huber(theta, target, taus), want, atol=1e-6)
    assert not torch.allclose(quantile_huber(theta, target), want, atol=1e-3)  # QR-DQN's midpoints differ


def _log_softmax_by_hand(q, tau):
    z = sum(math.exp(x / tau) for x in q)
    return [tau * (x / tau - math.log(z)) for x in q]


def test_munchausen_target_is_the_papers_by_hand():
    # Vieillard et al. 2020, eq. 2 over n steps as the authors' agent adds it: y = R + alpha *
    # clip(tau log pi(a|s), l0, 0) + d * sum_a' pi(a'|s') (q(s', a') - tau log pi(a'|s')),
    # pi = softmax(q / tau) of the target network. Two samples: one whose log-policy is clipped.
    rule = Rule(munchausen=True, munchausen_alpha=0.9, munchausen_tau=0.5, munchausen_clip=-1.0)
    q_s = [[1.0, 2.0, 0.5], [0.0, 3.0, 0.0]]
    q_next = [[0.0, 1.0, 3.0], [2.0, 2.0, -1.0]]
    action, ret, disc = [0, 2], [1.5, -0.5], [0.9, 0.0]
    want = []
    for i in range(2):
        bonus = 0.9 * min(0.0, max(-1.0, _log_softmax_by_hand(q_s[i], 0.5)[action[i]]))
        log_pi = _log_softmax_by_hand(q_next[i], 0.5)
        soft = sum(math.exp(lp / 0.5) * (q - lp) for q, lp in zip(q_next[i], log_pi))
        want.append(ret[i] + bonus + disc[i] * soft)
    assert _log_softmax_by_hand(q_s[1], 0.5)[2] < -1.0  # the second sample's bonus is clipped
    b = {"return": torch.tensor(ret), "discount": torch.tensor(disc), "action": torch.tensor(action)}
    got = targets(rule, b, torch.tensor(q_next).unsqueeze(2), None, torch.tensor(q_s).unsqueeze(2))
    assert got.shape == (2, 1) and torch.allclose(got[:, 0], torch.tensor(want), atol=1e-6)


def test_munchausen_on_quantiles_weighs_each_atom_by_the_policy():
    # Per atom j: R + bonus + d * sum_a' pi(a'|s') (Z_j(s', a') - tau log pi(a'|s')), the policy
    # read on the atoms' means.
    rule = Rule(munchausen=True, munchausen_tau=0.03)
    next_target = torch.tensor([[[0.0, 2.0], [1.0, 1.2], [-1.0, 0.0]]])  # [1, 3 actions, 2 atoms]
    target_s = torch.tensor([[[1.0, 1.0], [0.9, 1.1], [0.0, 0.5]]])
    b = {"return": torch.tensor([0.25]), "discount": torch.tensor([0.5]), "action": torch.tensor([1])}
    means_s, means_next = [1.0, 1.0, 0.25], [1.0, 1.1, -0.5]
    bonus = 0.9 * max(-1.0, _log_softmax_by_hand(means_s, 0.03)[1])
    log_pi = _log_softmax_by_hand(means_next, 0.03)
    want = [0.25 + bonus + 0.5 * sum(math.exp(lp / 0.03) * (float(next_target[0, a, j]) - lp)
                                     for a, lp in enumerate(log_pi)) for j in range(2)]
    got = targets(rule, b, next_target, None, target_s)
    assert torch.allclose(got[0], torch.tensor(want), atol=1e-5)


def test_munchausen_log_policy_stays_finite_at_a_small_temperature():
    # q / tau of 1e4 would overflow exp in fp32; the rule subtracts the max first.
    rule = Rule(munchausen=True, munchausen_tau=1e-3)
    q = torch.tensor([[[10.0], [0.0], [-5.0]]])
    b = {"return": torch.zeros(1), "discount": torch.ones(1), "action": torch.tensor([1])}
    got = targets(rule, b, q, None, q)
    assert torch.isfinite(got).all() and torch.allclose(got, torch.tensor([[10.0 - 0.9]]), atol=1e-4)


@pytest.mark.parametrize("arch", ["nature", "batchnorm"])
def test_the_learners_iqn_targets_are_the_rule_on_its_networks(arch):
    # The target network at N' drawn fractions on s', a' chosen by the online network at the
    # fixed acting fractions (Double DQN), y = R + d Z_j(s', a'); the online forward then draws
    # N more for Q(s).
    lrn = _learner(model_arch=arch, iqn_taus=4)
    b = lrn.to_device(_batch(8))
    torch.manual_seed(5)
    got = td_targets(lrn.rule, lrn, b)
    torch.manual_seed(5)
    with torch.no_grad():
        taus = torch.rand(8, 4)
        z = lrn.target.atoms(b["next_obs"], taus)
        a_star = lrn.argmax_model.atoms(b["next_obs"]).mean(2).argmax(1)
        want = b["return"][:, None] + b["discount"][:, None] * pick(z, a_star)
    assert got.shape == (8, 4) and torch.allclose(got, want, atol=1e-6)
    out = lrn.update([b])
    assert math.isfinite(out["loss"]) and out["td_abs"][0].shape == (8,)


@pytest.mark.parametrize("arch", ["nature", "batchnorm"])
@pytest.mark.parametrize("quantiles", [0, 5])
def test_the_learners_munchausen_targets_are_the_rule_on_its_target_network(arch, quantiles):
    lrn = _learner(model_arch=arch, quantiles=quantiles, munchausen=True, bn_targets="batch")
    b = lrn.to_device(_batch(8))
    got = td_targets(lrn.rule, lrn, b)
    with torch.no_grad():
        z_s, z_next = lrn.target.atoms(b["obs"]), lrn.target.atoms(b["next_obs"])
    tau, k = 0.03, max(1, quantiles)
    for i in range(8):
        log_pi_s = _log_softmax_by_hand(z_s[i].mean(1).tolist(), tau)
        log_pi = _log_softmax_by_hand(z_next[i].mean(1).tolist(), tau)
        bonus = 0.9 * max(-1.0, log_pi_s[int(b["action"][i])])
        for j in range(k):
            soft = sum(math.exp(lp / tau) * (float(z_next[i, a, j]) - lp) for a, lp in enumerate(log_pi))
            assert float(got[i, j]) == pytest.approx(float(b["return"][i]) + bonus + 0.9 * soft, abs=1e-4), (i, j)


def test_iqn_learns_the_quantile_function_of_a_two_valued_return():
    # One state, one action, discount 0, the return 0 or 10 with equal odds: the quantile function
    # learned at drawn fractions is near 0 below the median and near 10 above it, its mean (Q) near 5.
    # 250 updates at lr 1.5e-3 settle it (z 0.19, 0.45, 10.7, 10.3, Q 4.83 on a Zen 4) as 500 at 1e-3
    # did, in half of what was CI's slowest unit test
    lrn = _learner(model_arch="nature", iqn_taus=8, lr=1.5e-3, max_grad_norm=0.0)
    rng = np.random.default_rng(0)
    obs = np.broadcast_to(rng.integers(0, 256, (1, 4, 84, 84), dtype=np.uint8), (16, 4, 84, 84)).copy()
    b = lrn.to_device({"obs": obs, "next_obs": obs, "action": np.zeros(16, np.int64),
                       "return": np.tile([0.0, 10.0], 8).astype(np.float32), "discount": np.zeros(16, np.float32),
                       "weights": None})
    for _ in range(250):
        lrn.update([b])
    with torch.no_grad():
        z = lrn.model.atoms(b["obs"][:1], torch.tensor([[0.1, 0.3, 0.7, 0.9]]))[0, 0]
        q = lrn.model(b["obs"][:1])[0, 0]
    assert z[0] < 1.0 and z[1] < 1.5 and z[2] > 8.5 and z[3] > 9.0, z
    assert abs(q - 5) < 0.6, q


class _HostSyncs(TorchDispatchMode):
    """Records the ops that wait for the device: a tensor read as a Python number, or a shape that
    depends on the data (a CUDA graph can capture neither)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        bool_index = name.startswith("aten.index.Tensor") and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else []) or [])
        if "_local_scalar_dense" in name or "nonzero" in name or "masked_select" in name or bool_index:
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kw", [dict(iqn_taus=4), dict(munchausen=True), dict(munchausen=True, quantiles=5),
                                dict(quantiles=5, bootstrap_epsilon=0.1), dict(bootstrap_epsilon=0.1), dict()])
def test_the_rules_loss_and_backward_read_nothing_back_to_the_host(kw, monkeypatch):
    lrn = _learner(**kw)
    b = lrn.to_device(_batch(8))

    def refuse(*_a, **_k):
        raise AssertionError("the loss read a tensor back to the host")

    for name in ("tolist", "numpy", "item", "__bool__", "__float__", "__int__"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    with _HostSyncs() as syncs:
        value, td, q = lrn.loss(b)
        value.backward()
    monkeypatch.undo()
    assert syncs.seen == [], syncs.seen
    assert td.shape == q.shape == (8,) and math.isfinite(value.item())


def test_the_rule_names_and_settings_are_refused_with_the_fix():
    assert Rule.of(Config.of(iqn_taus=8).learner).name == "IQN"
    assert Rule.of(Config.of(quantiles=51, munchausen=True).learner).name == "Munchausen-QR-DQN"
    assert Rule.of(Config.of(munchausen=True).learner).name == "Munchausen-DQN"
    assert Rule.of(Config.of(double_dqn=False).learner).name == "DQN"
    # the run's first line names the rule with what changes its targets
    assert Rule.of(Config.of(quantiles=51).learner).label == "QR-DQN (51 quantiles)"
    assert Rule.of(Config.of(quantiles=0, bootstrap_epsilon=0.05).learner).label == "Double DQN (s' valued at epsilon 0.05)"
    assert Rule.of(Config.of(quantiles=5, bootstrap_epsilon=0.1).learner).label == \
        "QR-DQN (5 quantiles, s' valued at epsilon 0.1)"
    hw = Hardware(2, 24 << 30, 20 << 30, "test cpu", True, False, None, 0, False)
    for kw, words in [(dict(quantiles=51, iqn_taus=8), "add --quantiles 0"),
                      (dict(munchausen=True, bootstrap_epsilon=0.05), "does not apply with --munchausen"),
                      (dict(munchausen=True, munchausen_tau=0.0), "must be positive"),
                      (dict(iqn_taus=-1), r"must be 0 \(off\)")]:
        with pytest.raises(ConfigError, match=words):
            validate(Config.of(**kw), hw)


def test_an_iqn_network_acts_on_its_fixed_fractions_and_refuses_two_heads():
    torch.manual_seed(0)
    m = build_model(NetworkSpec("batchnorm", 4, 6, iqn_taus=8)).eval()
    x = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        midpoints = ((torch.arange(8) + 0.5) / 8).expand(5, 8)
        assert torch.equal(m(x), m.atoms(x, midpoints).mean(2))
        assert m.atoms(x, torch.rand(5, 3)).shape == (5, 6, 3)
    with pytest.raises(ValueError, match="give one of them"):
        build_model(NetworkSpec("batchnorm", 4, 6, quantiles=5, iqn_taus=8))


def test_the_loss_weighs_each_sample_by_its_importance_weight():
    rule = Rule()
    theta_all = torch.tensor([[[1.0], [0.0]], [[3.0], [0.0]]])
    target = torch.tensor([[1.5], [0.0]])
    b = {"action": torch.tensor([0, 0]), "weights": torch.tensor([2.0, 0.5])}
    value, td, q = loss(rule, theta_all, target, b)
    # Huber: 0.5 * 0.5^2 = 0.125 and |3| - 0.5 = 2.5, weighted 2 and 0.5, then the mean
    assert value.item() == pytest.approx((0.125 * 2 + 2.5 * 0.5) / 2)
    assert torch.equal(td, torch.tensor([0.5, -3.0])) and torch.equal(q, torch.tensor([1.0, 3.0]))


@pytest.mark.parametrize("kw", [dict(iqn_taus=4), dict(munchausen=True, quantiles=5)])
def test_the_whole_update_step_trains_the_new_rules_as_the_eager_update(kw):
    # The step a CUDA graph captures (run eagerly on a CPU) draws IQN's fractions on the device
    # as the eager update does: from the same seed, the same weights after every update.
    from pipeline.engine.engine import Engine

    eager, learner = _learner(lr=1e-3, target_update_interval=2, **kw), _learner(lr=1e-3, target_update_interval=2, **kw)
    graphed = Engine(learner, scope="update", compile_after=0)
    for group in eager.optimizer.param_groups:  # the graph's float32 lr tensor
        group["lr"] = torch.tensor(1e-3)
    for i in range(4):
        b = _batch(16, seed=i)
        torch.manual_seed(i)
        eager.update([eager.to_device(b)])
        torch.manual_seed(i)
        graphed.update([learner.to_device(b)])
        for x, y in zip(eager.model.state_dict().values(), learner.model.state_dict().values()):
            assert torch.equal(x, y), i
    assert graphed.graph.active and graphed.graph_error is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (bench/gpu/check.sh runs it)")
@pytest.mark.parametrize("kw", [dict(iqn_taus=8, quantiles=0), dict(munchausen=True, quantiles=51)])
def test_the_new_rules_capture_as_one_cuda_graph(kw):
    # IQN draws its fractions on the device inside the captured update (CUDA graphs replay the
    # generator's offsets), Munchausen adds a target forward on s: both are captured after the
    # warm-ups and replay with finite figures and moving weights.
    from pipeline.engine.engine import GRAPH_WARMUP_UPDATES, Engine

    torch.manual_seed(0)
    lrn = Learner(Config.of(amp=True, **kw).learner, 4, 6, torch.device("cuda"))
    engine = Engine(lrn, scope="update", compile_after=0)
    before = [p.detach().clone() for p in lrn.model.parameters()]
    for i in range(GRAPH_WARMUP_UPDATES + 4):
        out = engine.update([lrn.to_device(_batch(32, seed=i, actions=6))])
        assert not out["skipped"] and math.isfinite(out["loss"]), i
    assert engine.graph.captured and engine.graph_error is None
    assert any(not torch.equal(a, p) for a, p in zip(before, lrn.model.parameters()))
