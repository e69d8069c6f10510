"""Per-particle baselines for the a2c estimator: value networks or linear-feature baselines.

Each particle i has its own value MLP V_i(s) = mu_i + sigma_i * f_i(s), batched as one
:class:`~steinrl.core.ensemble.EnsembleMLP`. ``mu_i, sigma_i`` are the mean and standard
deviation of particle i's latest value targets, so ``f_i`` regresses targets of unit
scale whatever the task's reward scale (Cartpole returns reach ~1000, swing-up ~100).
The critic is plain regression (Adam), not part of theta and not moved by SVGD.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from steinrl.core.ensemble import EnsembleMLP
from steinrl.rl.returns import masked_mean_var


class ValueEnsemble(nn.Module):
    """M value networks evaluated in one batched call.

    :param num_particles: M.
    :param obs_dim: observation size.
    :param hidden: hidden layer sizes.
    :param activation: hidden activation.
    """

    def __init__(self, num_particles: int, obs_dim: int, hidden: Sequence[int], activation: str = "tanh"):
        super().__init__()
        self.net = EnsembleMLP(num_particles, obs_dim, list(hidden), 1, activation=activation,
                               layer="gaussian", output_gain=1.0)
        self.register_buffer("target_mean", torch.zeros(num_particles, 1))
        self.register_buffer("target_std", torch.ones(num_particles, 1))

    def forward(self, obs: Tensor) -> Tensor:
        """Values ``(M, B)`` in return units for normalised observations ``(M, B, obs_dim)``."""
        return self.target_mean + self.target_std * self.net(obs).squeeze(-1)

    def fit(self, optimizer: torch.optim.Optimizer, obs: Tensor, targets: Tensor, mask: Tensor, steps: int,
            minibatch: int, generator: torch.Generator | None = None) -> float:
        """Regress ``targets`` ``(M, B)`` on ``obs`` ``(M, B, obs_dim)`` over ``mask``-ed entries.

        Each step uses ``minibatch`` random valid-or-padding columns per particle (all
        columns if ``minibatch >= B``); padding is masked out of the loss.

        :return: the mean squared error of the regression steps in return units, averaged
            over steps and particles (the value loss, as SB3 logs it).
        """
        M, B = targets.shape
        count = mask.sum(1).clamp_min(1.0)
        with torch.no_grad():
            mean = (targets * mask).sum(1) / count
            std = (((targets - mean[:, None]) * mask).square().sum(1) / count).sqrt().clamp_min(1e-6)
            self.target_mean.copy_(mean[:, None])
            self.target_std.copy_(std[:, None])
            z = (targets - self.target_mean) / self.target_std  # (M, B), unit scale
        total = torch.zeros(M, dtype=targets.dtype, device=targets.device)
        for _ in range(steps):
            if minibatch < B:
                idx = torch.randint(B, (M, minibatch), generator=generator, device=obs.device)
                o = torch.gather(obs, 1, idx[..., None].expand(M, minibatch, obs.shape[-1]))
                zt, mk = torch.gather(z, 1, idx), torch.gather(mask, 1, idx)
            else:
                o, zt, mk = obs, z, mask
            pred = self.net(o).squeeze(-1)
            loss = ((pred - zt).square() * mk).sum(1) / mk.sum(1).clamp_min(1.0)
            optimizer.zero_grad()
            loss.sum().backward()
            optimizer.step()
            total += loss.detach()
        return float((total / max(steps, 1) * std.square()).mean())


class LinearBaseline(nn.Module):
    """rllab's ``LinearFeatureBaseline``, one per particle, fitted in one batched solve.

    V_i(s, t) = w_iᵀ f(s, t) with f = [clip(s, ±10), clip(s, ±10)², t/100, (t/100)², (t/100)³, 1]
    (``t`` the step index within the episode), fitted by ridge-regularised least squares
    to discounted returns. Unfitted, it predicts 0 (as rllab's).

    :param num_particles: M.
    :param obs_dim: observation size.
    :param reg: ridge coefficient (multiplied by 10, up to 5 times, if the solve is not finite).
    """

    def __init__(self, num_particles: int, obs_dim: int, reg: float = 1e-5):
        super().__init__()
        self.reg = reg
        self.register_buffer("coeffs", torch.zeros(num_particles, 2 * obs_dim + 4, dtype=torch.float64))

    @staticmethod
    def features(obs: Tensor, t: Tensor) -> Tensor:
        """Features ``(M, B, 2 obs_dim + 4)`` float64 of obs ``(M, B, obs_dim)`` at episode steps ``t`` ``(M, B)``."""
        o = obs.to(torch.float64).clamp(-10.0, 10.0)
        a = (t.to(torch.float64) / 100.0).unsqueeze(-1)
        return torch.cat([o, o.square(), a, a.square(), a.pow(3), torch.ones_like(a)], dim=-1)

    def forward(self, obs: Tensor, t: Tensor) -> Tensor:
        """Values ``(M, B)`` (float64)."""
        return (self.features(obs, t) @ self.coeffs.unsqueeze(-1)).squeeze(-1)

    def fit(self, obs: Tensor, t: Tensor, returns: Tensor, mask: Tensor) -> float:
        """Least squares of ``returns`` ``(M, B)`` on the features over ``mask``-ed entries.

        :return: the mean squared error of the previous coefficients on these returns
            (the value loss), averaged over particles.
        """
        f = self.features(obs, t)  # M B k
        w = mask.to(torch.float64).unsqueeze(-1)
        y = returns.to(torch.float64).unsqueeze(-1)  # M B 1
        count = w.sum((1, 2)).clamp_min(1.0)
        before = float(((((f @ self.coeffs.unsqueeze(-1)) - y).square() * w).sum((1, 2)) / count).mean())
        gram = (f * w).mT @ f  # M k k
        rhs = (f * w).mT @ y  # M k 1
        eye = torch.eye(f.shape[-1], dtype=torch.float64, device=f.device)
        reg = self.reg
        for _ in range(5):
            # An LU solve of the regularised normal equations (rllab calls lstsq on the same
            # square system): torch's batched lstsq is not bitwise reproducible run to run.
            coeffs, info = torch.linalg.solve_ex(gram + reg * eye, rhs)
            coeffs = coeffs.squeeze(-1)
            if bool((info == 0).all()) and bool(torch.isfinite(coeffs).all()):
                break
            reg *= 10.0
        self.coeffs.copy_(torch.nan_to_num(coeffs))
        return before


def explained_variance(values: np.ndarray, targets: np.ndarray, valid: np.ndarray) -> float:
    """1 - Var[targets - values] / Var[targets] over ``valid`` entries, per particle, averaged.

    :param values: ``(T, M, E)`` value predictions made before fitting (as SB3 reports it).
    :param targets: ``(T, M, E)`` value targets.
    :param valid: ``(T, M, E)`` bool mask.
    """
    vt = masked_mean_var(targets, valid, axis=(0, 2))[1].reshape(-1)
    ok = vt > 0
    if not ok.any():
        return float("nan")
    resid = masked_mean_var(targets - values, valid, axis=(0, 2))[1].reshape(-1)
    return float(np.mean(1.0 - resid[ok] / vt[ok]))
