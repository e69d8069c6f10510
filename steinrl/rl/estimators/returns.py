"""Returns, GAE(λ), standardisation: pure torch functions over time-major tensors ``(T, ...)``.

Any trailing batch shape works (e.g. ``(T, M, E)``) on any device, so the CPU rollout's
batches and the device-resident rollout's share them. Written like SB3's
``compute_returns_and_advantage``:

- ``done[t]``: the episode ended at step t (terminated or truncated), so nothing flows
  back from step t + 1 into step t;
- ``terminated[t]``: a true terminal state; a truncated step (time limit) or a step cut
  at the batch boundary bootstraps from the value of the observation after it.

Sums run in float64; the recursions over t are scans of ⌈log2 T⌉ whole-tensor rounds.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["discounted_returns", "running_returns", "gae", "masked_mean_var", "standardize", "explained_variance"]


def _reverse_scan(x: Tensor, cont: Tensor) -> Tensor:
    """``out[t] = x[t] + cont[t] * out[t + 1]`` (``out[T] = 0``), float64, ``(T, ...)``.

    One path on every device: a doubling scan over t, ⌈log2 T⌉ rounds of whole-tensor ops
    (no per-step loop, no host sync). After round r, ``out[t]`` holds the recursion's sum
    over the next 2^r steps, ``out[t] = Σ_{j=t}^{t+2^r−1} (Π_{i=t}^{j−1} cont[i]) x[j]``, and
    ``a[t] = Π_{i=t}^{t+2^r−1} cont[i]`` (kept only where a later round reads it), so that
    round r + 1 adds ``a[t] · out[t + 2^r]``. The same sums as the sequential loop in another
    order: equal to float64 rounding (~1e-15 relative; tests/test_speed_exact.py). Its cost
    on CPU against numpy's and torch's step-by-step loops: research/results/train_throughput.md
    ("GAE and the returns").
    """
    T = x.shape[0]
    out, a = x.clone(), cont.clone()
    k = 1
    while k < T:
        out[:T - k] = torch.addcmul(out[:T - k], a[:T - k], out[k:])  # reads the old out[k:] first
        if 2 * k < T:
            a[:T - 2 * k] = a[:T - 2 * k] * a[k:T - k]
        k *= 2
    return out


def discounted_returns(rewards: Tensor, done: Tensor, gamma: float) -> Tensor:
    """Returns-to-go ``G_t = r_t + gamma * G_{t+1}`` within each episode, ``(T, ...)`` float64.

    Episodes cut at the end of the batch (or at a time limit) get no bootstrap: this is
    REINFORCE without a critic, as in the SVPG code.
    """
    return _reverse_scan(rewards.double(), (~done).double() * gamma)  # cont: what flows back from t + 1


def running_returns(rewards: Tensor, valid: Tensor, done: Tensor, gamma: float,
                    initial: Tensor | None = None) -> Tensor:
    """The running discounted return of every env, forward in time, ``(T, ...)`` float64:
    ``R_t = gamma * R_{t-1} + r_t`` at valid steps (unchanged at invalid ones), restarting
    from 0 after a valid step that ended an episode. What reward scaling divides by the
    running std of (SB3's ``VecNormalize.returns``).

    :param rewards: ``(T, ...)`` rewards r_t.
    :param valid: ``(T, ...)`` bool, a real transition.
    :param done: ``(T, ...)`` bool, the episode ended at step t.
    :param initial: ``(...)`` the return carried into the batch (``R_{-1}``, already 0
        where an episode ended before it); None: 0.
    :return: ``R_t`` before the restart at t (the return that includes r_t).
    """
    valid64 = valid.double()
    ended = (valid & done).double()
    x = rewards.double() * valid64
    a = torch.where(valid, torch.full_like(x, gamma), 1.0)  # R_t = a_t K_{t-1} R_{t-1} + x_t, K = 1 - ended
    cont = a * torch.cat([torch.ones_like(ended[:1]), 1.0 - ended[:-1]])
    if initial is not None:
        x = torch.cat([x[:1] + cont[:1] * initial.double(), x[1:]])
    return _reverse_scan(x.flip(0), cont.flip(0)).flip(0)


def gae(rewards: Tensor, values: Tensor, terminated: Tensor, done: Tensor, gamma: float,
        lam: float) -> tuple[Tensor, Tensor]:
    """GAE(lambda) advantages and lambda-returns, both ``(T, ...)`` float64.

    :param rewards: ``(T, ...)`` rewards r_t.
    :param values: ``(T + 1, ...)`` V(s_t); ``values[t + 1]`` is the value of the observation
        that followed step t (the final observation when step t ended an episode).
    :param terminated: ``(T, ...)`` bool, s_{t+1} is terminal (its value counts as 0).
    :param done: ``(T, ...)`` bool, the episode ended at step t.
    """
    T = rewards.shape[0]
    values = values.double()
    delta = rewards.double() + gamma * values[1:] * ~terminated - values[:T]  # TD errors, all at once
    adv = _reverse_scan(delta, (~done).double() * (gamma * lam))  # the recursion: a scan over t
    return adv, adv + values[:T]


def masked_mean_var(x: Tensor, mask: Tensor, dim: tuple[int, ...]) -> tuple[Tensor, Tensor]:
    """Mean and (biased) variance of the ``mask``-ed entries of ``x`` along ``dim`` (kept as size-1 dims)."""
    n = mask.sum(dim=dim, keepdim=True).clamp_min(1)
    mean = (x * mask).sum(dim=dim, keepdim=True) / n
    var = ((x - mean).square() * mask).sum(dim=dim, keepdim=True) / n
    return mean, var


def standardize(x: Tensor, mask: Tensor, dim: tuple[int, ...], eps: float = 1e-8) -> Tensor:
    """(x - mean) / std over the ``mask``-ed entries along ``dim``; masked-out entries become 0."""
    mean, var = masked_mean_var(x, mask, dim)
    return torch.where(mask, (x - mean) / (var.sqrt() + eps), 0.0)


def explained_variance(values: Tensor, targets: Tensor, valid: Tensor) -> Tensor:
    """1 - Var[targets - values] / Var[targets] over ``valid`` entries, per particle ``(M,)``;
    NaN for a particle whose targets do not vary (average with ``nanmean``; no host sync).

    :param values: ``(T, M, E)`` value predictions made before fitting (as SB3 reports it).
    :param targets: ``(T, M, E)`` value targets.
    :param valid: ``(T, M, E)`` bool mask.
    """
    vt = masked_mean_var(targets, valid, dim=(0, 2))[1].reshape(-1)
    resid = masked_mean_var(targets - values, valid, dim=(0, 2))[1].reshape(-1)
    return torch.where(vt > 0, 1.0 - resid / torch.where(vt > 0, vt, 1.0), float("nan"))
