"""QR-DQN (--quantiles) and the BatchNorm statistics of the targets (--bn-targets): the loss is
the paper's, the learned quantiles are those of the return, and plain DQN is unchanged."""
import numpy as np
import torch

from config_optimized import Config
from models import NetworkSpec, build_model
from pipeline.agent.learner import Learner
from pipeline.agent.rules import quantile_huber, td_targets


def _learner(**kw):
    torch.manual_seed(0)
    return Learner(Config.of(**{"amp": False, **kw}).learner, 4, 3, torch.device("cpu"))


def test_quantile_huber_is_the_papers_loss():
    # Dabney et al. 2018, eq. 10, written out with loops: sum over i of the mean over j of
    # |tau_i - 1{u_ij < 0}| * Huber(u_ij), u_ij = target_j - theta_i, tau_i = (2i + 1) / 2K.
    g = torch.Generator().manual_seed(0)
    theta, target = torch.randn(3, 4, generator=g) * 2, torch.randn(3, 5, generator=g) * 2
    want = torch.zeros(3)
    for b in range(3):
        for i in range(4):
            tau = (2 * i + 1) / 8
            for j in range(5):
                u = float(target[b, j] - theta[b, i])
                huber = 0.5 * u * u if abs(u) <= 1 else abs(u) - 0.5
                want[b] += abs(tau - (u < 0)) * huber / 5
    assert torch.allclose(quantile_huber(theta, target), want, atol=1e-6)


def test_qr_dqn_learns_the_quantiles_of_a_two_valued_return():
    # One state, one action, discount 0: the return is 0 or 10 with equal odds, so the quantiles
    # below the median settle near 0 and those above it near 10, and Q (their mean) near 5; an
    # expectation learner would put everything at 5. Not exactly 0 and 10: within kappa = 1 of a
    # target the Huber loss is squared, so quantile tau < 0.5 settles where (1 - tau) x = tau, at
    # x = tau / (1 - tau), and those above the median as far below 10.
    lrn = _learner(quantiles=8, lr=1e-3, model_arch="nature", max_grad_norm=0.0)
    rng = np.random.default_rng(0)
    obs = np.broadcast_to(rng.integers(0, 256, (1, 4, 84, 84), dtype=np.uint8), (8, 4, 84, 84)).copy()
    batch = {"obs": obs, "next_obs": obs, "action": np.zeros(8, np.int64),
             "return": np.tile([0.0, 10.0], 4).astype(np.float32), "discount": np.zeros(8, np.float32),
             "weights": None}
    b = lrn.to_device(batch)
    for _ in range(400):
        out = lrn.update([b])
    with torch.no_grad():
        q = lrn.model.atoms(b["obs"][:1])[0, 0]
    assert q.shape == (8,)
    tau = (torch.arange(8) + 0.5) / 8
    settled = torch.cat([tau[:4] / (1 - tau[:4]), 10 - (1 - tau[4:]) / tau[4:]])
    assert torch.allclose(q[:4], settled[:4], atol=0.1) and torch.allclose(q[4:], settled[4:], atol=0.7), (q, settled)
    assert abs(out["q_mean"] - 5) < 0.3


def test_plain_dqn_acts_on_the_same_q_values_as_before():
    # quantiles=0 keeps one atom per action, so old checkpoints load and act unchanged: forward()
    # is the head's output and atoms() the same numbers with a trailing axis.
    torch.manual_seed(0)
    m = build_model(NetworkSpec("batchnorm", 4, 6)).eval()
    assert m.head.q[-1].out_features == 6
    x = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        assert torch.equal(m(x), m.atoms(x)[:, :, 0])
    qr = build_model(NetworkSpec("batchnorm", 4, 6, dueling=True, quantiles=51)).eval()
    with torch.no_grad():
        assert qr(x).shape == (5, 6) and qr.atoms(x).shape == (5, 6, 51)
        assert torch.allclose(qr(x), qr.atoms(x).mean(2))


def test_batch_statistics_targets_normalize_s_prime_on_its_own_batch():
    # --bn-targets batch: the target net's s' forward uses the batch's statistics, so scaling every
    # frame of s' by the same factor (a shift the batch statistics remove) barely moves the targets;
    # with running statistics it moves them.
    def targets(bn_targets, next_obs):
        lrn = _learner(bn_targets=bn_targets)
        rng = np.random.default_rng(1)
        b = {"obs": next_obs, "next_obs": next_obs, "action": rng.integers(0, 3, 16),
             "return": np.zeros(16, np.float32), "discount": np.ones(16, np.float32), "weights": None}
        return td_targets(lrn.rule, lrn, lrn.to_device(b))[:, 0]

    rng = np.random.default_rng(0)
    dim = rng.integers(0, 120, (16, 4, 84, 84), dtype=np.uint8)
    bright = dim * 2
    assert torch.allclose(targets("batch", dim), targets("batch", bright), atol=1e-3)
    assert not torch.allclose(targets("running", dim), targets("running", bright), atol=1e-2)
