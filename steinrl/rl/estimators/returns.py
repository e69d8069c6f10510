"""Advantage estimators for J(theta): REINFORCE returns-to-go and GAE(lambda).

Pure numpy functions over time-major arrays ``(T, ...)`` (any trailing batch shape,
e.g. ``(T, M, E)``), written like SB3's ``compute_returns_and_advantage``:

- ``done[t]``: the episode ended at step t (terminated or truncated), so nothing flows
  back from step t + 1 into step t;
- ``terminated[t]``: a true terminal state; a truncated step (time limit) or a step cut
  at the batch boundary bootstraps from the value of the observation after it.
"""

from __future__ import annotations

import numpy as np


def discounted_returns(rewards: np.ndarray, done: np.ndarray, gamma: float) -> np.ndarray:
    """Returns-to-go ``G_t = r_t + gamma * G_{t+1}`` within each episode, ``(T, ...)``.

    Episodes cut at the end of the batch (or at a time limit) get no bootstrap: this is
    REINFORCE without a critic, as in the SVPG code.
    """
    out = np.empty(rewards.shape, dtype=np.float64)
    cont = np.where(done, 0.0, gamma)  # what flows back from step t + 1
    running = np.zeros(rewards.shape[1:], dtype=np.float64)
    for t in range(rewards.shape[0] - 1, -1, -1):
        running = out[t] = rewards[t] + cont[t] * running
    return out


def gae(
    rewards: np.ndarray,
    values: np.ndarray,
    terminated: np.ndarray,
    done: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """GAE(lambda) advantages and lambda-returns, both ``(T, ...)``.

    :param rewards: ``(T, ...)`` rewards r_t.
    :param values: ``(T + 1, ...)`` V(s_t); ``values[t + 1]`` is the value of the observation
        that followed step t (the final observation when step t ended an episode).
    :param terminated: ``(T, ...)`` bool, s_{t+1} is terminal (its value counts as 0).
    :param done: ``(T, ...)`` bool, the episode ended at step t.
    """
    T = rewards.shape[0]
    delta = rewards + gamma * values[1:] * ~terminated - values[:T]  # TD errors, all at once
    cont = np.where(done, 0.0, gamma * lam)
    adv = np.empty(rewards.shape, dtype=np.float64)
    running = np.zeros(rewards.shape[1:], dtype=np.float64)
    for t in range(T - 1, -1, -1):  # only the recursion is sequential
        running = adv[t] = delta[t] + cont[t] * running
    return adv, adv + values[:T]


def masked_mean_var(x: np.ndarray, mask: np.ndarray, axis: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (biased) variance of the ``mask``-ed entries of ``x`` along ``axis`` (kept as size-1 dims)."""
    n = np.maximum(mask.sum(axis=axis, keepdims=True), 1)
    mean = (x * mask).sum(axis=axis, keepdims=True) / n
    var = (np.square(x - mean) * mask).sum(axis=axis, keepdims=True) / n
    return mean, var


def standardize(x: np.ndarray, mask: np.ndarray, axis: tuple[int, ...], eps: float = 1e-8) -> np.ndarray:
    """(x - mean) / std over the ``mask``-ed entries along ``axis``; masked-out entries become 0."""
    mean, var = masked_mean_var(x, mask, axis)
    return np.where(mask, (x - mean) / (np.sqrt(var) + eps), 0.0)


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
