"""The learning rules: which network reads what for a batch (``batch_loss``, ``td_targets``),
each sample's n-step target and its loss, one function per rule.

The networks and the precision they run in are the learner's (``pipeline/agent/learner.py``, read
through ``Networks``); torch.compile and the CUDA graph around them are the engine's. Past the
forwards these functions only compute on tensors: no state, no host sync (no ``.item()``, no
data-dependent shape), so the whole update stays one capturable graph, and each rule's
arithmetic can be checked by hand on small tensors. A rule picks its case from its settings
(``Rule``), never from a tensor's shape. Each rule, read against its paper:

- **DQN** (Mnih et al. 2015, Algorithm 1): y = R + d max_a' Q_target(s', a'), Huber loss on
  Q(s, a). Over n steps (Sutton 1988; Hessel et al. 2018, eq. 2) the replay gives R, the
  discounted sum of the n rewards, and d, gamma^n or 0 where the game ended before s'.
- **Double DQN** (van Hasselt et al. 2016, eq. 4): a' = argmax_a Q_online(s', a), valued by the
  target network.
- **QR-DQN** (Dabney et al. 2018a): K quantiles of the return per action at the fixed fractions
  (2i + 1) / 2K, each target quantile R + d theta_j(s', a'), the quantile Huber loss (eq. 10).
- **IQN** (Dabney et al. 2018b): the quantile function at N fractions drawn from U(0, 1) for
  Q(s) and N' others for the target, the same loss over the pairs (eq. 3); Q is the mean over
  fractions, and a' is chosen on ``rule.iqn_taus`` fixed midpoints (``models.dqn.midpoint_taus``).
- **Munchausen** (Vieillard et al. 2020, eq. 2), on any of the above: pi = softmax(q / tau) of
  the target network's Q; the reward gains alpha * clip(tau log pi(a|s), l0, 0), and s' is
  valued softly, sum_a' pi(a'|s') (Z(s', a') - tau log pi(a'|s')), which replaces the argmax
  (so Double DQN and the bootstrap epsilon do not apply). Over n steps the bonus is the first
  step's, as the authors' Dopamine agent adds it to the n-step sum.
- **The epsilon-greedy bootstrap** (``bootstrap_epsilon``, expected SARSA: van Seijen et al.
  2009; Sutton and Barto 2018, eq. 6.9): s' is valued by the epsilon-greedy policy. With one value
  per action (DQN) exactly, (1 - epsilon) Q(s', a*) + epsilon mean_a Q(s', a); a distributional
  target's mixture has no closed-form quantiles, so there a' is the greedy action, or with
  probability epsilon a uniform one, one draw per target (the same expectation, sampled).
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch.profiler import record_function

from models.dqn import midpoint_taus


@dataclass(frozen=True)
class Rule:
    """A learning rule's settings: which one, and its constants (from ``LearnerConfig``)."""
    double_dqn: bool = True
    bootstrap_epsilon: float = 0.0
    quantiles: int = 0  # QR-DQN's K; 0 with iqn_taus 0: one value per action (DQN)
    iqn_taus: int = 0  # IQN's N = N' (and the acting fractions)
    munchausen: bool = False
    munchausen_alpha: float = 0.9
    munchausen_tau: float = 0.03
    munchausen_clip: float = -1.0
    kappa: float = 1.0  # the quantile Huber loss's threshold

    @classmethod
    def of(cls, cfg) -> Rule:
        """The rule a ``LearnerConfig`` trains."""
        return cls(cfg.double_dqn, cfg.bootstrap_epsilon, cfg.quantiles, cfg.iqn_taus, cfg.munchausen,
                   cfg.munchausen_alpha, cfg.munchausen_tau, cfg.munchausen_clip)

    @property
    def name(self) -> str:
        base = "IQN" if self.iqn_taus else "QR-DQN" if self.quantiles else "Double DQN" if self.double_dqn else "DQN"
        if self.munchausen:
            return "Munchausen-" + ("DQN" if base == "Double DQN" else base)
        return base

    @property
    def label(self) -> str:
        """The rule as a run's first line names it: "QR-DQN (51 quantiles)", "IQN (8 fractions)",
        "Double DQN (s' valued at epsilon 0.05)"."""
        parts = ([f"{self.iqn_taus} fractions"] if self.iqn_taus else [f"{self.quantiles} quantiles"] if self.quantiles
                 else [])
        if self.bootstrap_epsilon > 0 and not self.munchausen:
            parts.append(f"s' valued at epsilon {self.bootstrap_epsilon:g}")
        return self.name + (f" ({', '.join(parts)})" if parts else "")

    @property
    def selects_on_online(self) -> bool:
        """a' is chosen on the online network's s' forward (Double DQN without Munchausen)."""
        return self.double_dqn and not self.munchausen

    @property
    def one_value(self) -> bool:
        """One value per action: DQN's target and Huber loss. A single quantile is one value too
        (its target and loss are DQN's); IQN never is, whatever its fractions."""
        return not self.iqn_taus and self.quantiles <= 1


class Networks(Protocol):
    """What a rule reads of the learner: its three module trees and the precision their forwards
    run in (``Learner.precision``: autocast's dtype, or fp32)."""
    model: torch.nn.Module  # the online network, in train mode: Q(s) with its gradient
    target: torch.nn.Module  # the target network
    argmax_model: torch.nn.Module  # Double DQN's a' on s': the online weights, normalized as bn_targets says
    device: torch.device

    def precision(self) -> AbstractContextManager: ...


def pick(atoms: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """[B, n_actions, K] atoms, [B] actions -> the [B, K] atoms of each sample's action."""
    return atoms.gather(1, actions.view(-1, 1, 1).expand(-1, 1, atoms.shape[2])).squeeze(1)


def sample_taus(batch: int, n: int, device: torch.device) -> torch.Tensor:
    """IQN's fractions for one forward: [B, N] drawn from U(0, 1) on the device (capturable)."""
    return torch.rand(batch, n, device=device)


def quantile_huber(theta: torch.Tensor, target: torch.Tensor, taus: torch.Tensor | None = None,
                   kappa: float = 1.0) -> torch.Tensor:
    """The quantile Huber loss per sample (QR-DQN eq. 10, IQN eq. 3): theta [B, K] quantiles at the
    fractions ``taus`` ([K] or [B, K]; None: QR-DQN's midpoints), target [B, K'] samples of the
    target distribution; the sum over i of the mean over j of |tau_i - 1{u_ij < 0}| L_kappa(u_ij)
    / kappa, u_ij = target_j - theta_i. The pairwise tensor is B x K x K': F.huber_loss is one
    fused kernel each way, about 3x the Huber written out on a CPU."""
    if taus is None:
        taus = midpoint_taus(theta.shape[1], theta.device)
    u = target.unsqueeze(1) - theta.unsqueeze(2)  # [B, K, K']: every quantile against every target sample
    huber = F.huber_loss(u, torch.zeros_like(u), reduction="none", delta=kappa)
    weight = (taus.to(u.dtype).view(-1, theta.shape[1], 1) - (u.detach() < 0).to(u.dtype)).abs()
    return (weight * huber).mean(2).sum(1) / kappa


def next_action(select_q: torch.Tensor, epsilon: float) -> torch.Tensor:
    """a' [B]: the argmax of ``select_q`` [B, n_actions], or at ``epsilon`` > 0 a uniform action
    instead with that probability (one draw per sample)."""
    a_star = select_q.argmax(1)
    if epsilon > 0:
        explore = torch.rand(a_star.shape, device=a_star.device) < epsilon
        a_star = torch.where(explore, torch.randint_like(a_star, select_q.shape[1]), a_star)
    return a_star


def scaled_log_policy(q: torch.Tensor, tau: float) -> torch.Tensor:
    """tau log softmax(q / tau) over actions, [B, n_actions]; computed from q - max q, so a small
    tau cannot overflow the exponentials."""
    return tau * F.log_softmax((q - q.amax(1, keepdim=True)) / tau, dim=1)


def munchausen_parts(rule: Rule, action: torch.Tensor, target_s: torch.Tensor,
                     next_target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Munchausen's bonus [B] (alpha * clip(tau log pi(a|s), l0, 0)) and soft value of s' [B, K']
    (sum_a' pi(a'|s') (Z(s', a') - tau log pi(a'|s'))), pi the softmax of the target network's Q:
    ``target_s`` [B, A, K] and ``next_target`` [B, A, K'] are its atoms on s and s'."""
    tau = rule.munchausen_tau
    log_pi_s = scaled_log_policy(target_s.mean(2), tau)
    bonus = rule.munchausen_alpha * log_pi_s.gather(1, action.view(-1, 1)).squeeze(1).clamp(rule.munchausen_clip, 0.0)
    log_pi_next = scaled_log_policy(next_target.mean(2), tau)
    pi_next = (log_pi_next / tau).exp()
    soft_next = (pi_next.unsqueeze(2) * (next_target - log_pi_next.unsqueeze(2))).sum(1)
    return bonus, soft_next


def greedy_target(rule: Rule, b: dict, next_target: torch.Tensor, next_select: torch.Tensor | None) -> torch.Tensor:
    """Q-learning's target, per atom (DQN: Mnih et al. 2015, Algorithm 1, over n steps; QR-DQN:
    Dabney et al. 2018a, each target quantile; IQN: Dabney et al. 2018b, at the drawn
    fractions): y = R + d Z(s', a'), a' the greedy action on ``next_select``'s means (Double DQN,
    van Hasselt et al. 2016, eq. 4: the online network's; None: the target network's own), or
    at ``bootstrap_epsilon`` the epsilon-greedy policy's, one draw per target."""
    ret, discount = b["return"].unsqueeze(1), b["discount"].unsqueeze(1)
    select = next_select if next_select is not None else next_target
    a_star = next_action(select.mean(2), rule.bootstrap_epsilon)
    return ret + discount * pick(next_target, a_star)


def expected_target(rule: Rule, b: dict, next_target: torch.Tensor, next_select: torch.Tensor | None) -> torch.Tensor:
    """Expected SARSA's target with one value per action (van Seijen et al. 2009; Sutton and
    Barto 2018, eq. 6.9): y = R + d ((1 - epsilon) Q(s', a*) + epsilon mean_a Q(s', a)), a* the
    greedy action as ``greedy_target`` picks it. Exact, where a sampled draw would put all of a
    random action's cost on 5% of the targets (at epsilon 0.05), the noisiest where it matters,
    at a pit's edge."""
    ret, discount = b["return"].unsqueeze(1), b["discount"].unsqueeze(1)
    select = next_select if next_select is not None else next_target
    eps = rule.bootstrap_epsilon
    greedy = pick(next_target, select.mean(2).argmax(1))
    return ret + discount * ((1 - eps) * greedy + eps * next_target.mean(1))


def munchausen_target(rule: Rule, b: dict, next_target: torch.Tensor, target_s: torch.Tensor) -> torch.Tensor:
    """Munchausen's target (Vieillard et al. 2020, eq. 2), per atom: y = R + alpha clip(tau log
    pi(a|s), l0, 0) + d sum_a' pi(a'|s') (Z(s', a') - tau log pi(a'|s')), pi the softmax of the
    target network's Q (``munchausen_parts``); the soft value replaces the argmax."""
    ret, discount = b["return"].unsqueeze(1), b["discount"].unsqueeze(1)
    bonus, soft_next = munchausen_parts(rule, b["action"], target_s, next_target)
    return ret + bonus.unsqueeze(1) + discount * soft_next


def targets(rule: Rule, b: dict, next_target: torch.Tensor, next_select: torch.Tensor | None = None,
            target_s: torch.Tensor | None = None) -> torch.Tensor:
    """Each sample's n-step target, per atom, [B, K'] ([B, 1] for DQN), by the rule's target: from
    the batch's ``return`` and ``discount`` [B], the target network's atoms on s' ``next_target``
    [B, A, K'], the online network's on s' ``next_select`` (Double DQN; None: a' is chosen on the
    target's own) and, for Munchausen, the target network's atoms on s ``target_s``."""
    if rule.munchausen:
        return munchausen_target(rule, b, next_target, target_s)
    if rule.bootstrap_epsilon > 0 and rule.one_value:
        return expected_target(rule, b, next_target, next_select)
    return greedy_target(rule, b, next_target, next_select)


def loss(rule: Rule, theta_all: torch.Tensor, target: torch.Tensor, b: dict,
         taus: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The batch's loss and, per sample, the TD error and Q(s, a): ``theta_all`` [B, A, K] the
    online atoms on s (at IQN's fractions ``taus`` [B, K]), ``target`` [B, K'] from ``targets``.
    DQN's Huber loss of Q (Mnih et al. 2015: the error clipped to [-1, 1] in the gradient), or
    the quantile Huber loss (QR-DQN, IQN: ``quantile_huber``); importance-weighted where the
    batch carries prioritized replay's ``weights`` (Schaul et al. 2016)."""
    theta = pick(theta_all, b["action"])
    q = theta.mean(1)
    td = target.mean(1) - q
    if rule.one_value:
        per_sample = F.smooth_l1_loss(theta[:, 0], target[:, 0], reduction="none")
    else:
        per_sample = quantile_huber(theta, target, taus, rule.kappa)
    if b.get("weights") is not None:
        per_sample = per_sample * b["weights"]
    return per_sample.mean(), td.detach(), q.detach()


def fractions(rule: Rule, nets: Networks, b: dict) -> torch.Tensor | None:
    """IQN: fractions drawn for one forward of the batch; None for the other rules."""
    return sample_taus(b["obs"].shape[0], rule.iqn_taus, nets.device) if rule.iqn_taus else None


def td_targets(rule: Rule, nets: Networks, b: dict) -> torch.Tensor:
    """The n-step target of each sample, per atom ([B, 1] for DQN, [B, K'] for QR-DQN and IQN),
    with no gradient: the target network on s' (at IQN's drawn fractions), Double DQN's online
    forward on s' and Munchausen's target network on s, handed to ``targets``."""
    with torch.no_grad(), nets.precision():
        next_target = nets.target.atoms(b["next_obs"], fractions(rule, nets, b)).float()
        # running: the online weights in eval mode, so s' does not move the running
        # statistics. batch: train mode, so a' is picked on the normalization Q(s) is
        # trained with; s' then also enters the running statistics (replay data, as s is).
        # IQN picks a' on its fixed acting fractions, as the collectors act.
        next_select = nets.argmax_model.atoms(b["next_obs"]) if rule.selects_on_online else None
        target_s = nets.target.atoms(b["obs"], fractions(rule, nets, b)).float() if rule.munchausen else None
        return targets(rule, b, next_target, next_select, target_s)


def batch_loss(rule: Rule, nets: Networks, b: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rule on one batch: its targets (``td_targets``), then Q(s) from the online network
    (at fresh IQN fractions) and the loss, importance-weighted under prioritized replay; also the
    TD errors and Q-values, per sample."""
    with record_function("learner.targets"):
        target = td_targets(rule, nets, b)
    with record_function("learner.forward"):
        taus = fractions(rule, nets, b)
        with nets.precision():
            theta_all = nets.model.atoms(b["obs"], taus).float()
        return loss(rule, theta_all, target, b, taus)
