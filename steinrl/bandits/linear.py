"""Exact Bayesian linear regression per arm with a Normal-Inverse-Gamma prior.

The model of Showdown's LinFullPost (Riquelme, Tucker & Snoek 2018), for every arm a
independently, with features z (the context, plus a trailing 1 when ``intercept``)::

    σ_a² ~ Inv-Gamma(a0, b0),    β_a | σ_a² ~ N(0, σ_a²/λ · I),    r | z, a ~ N(zᵀβ_a, σ_a²)

Given the n_a rows Z_a, y_a where arm a was pulled, the posterior is again Normal-Inverse-Gamma::

    Λ_a = Z_aᵀZ_a + λI (precision),   Σ_a = Λ_a⁻¹,   μ_a = Σ_a Z_aᵀy_a,
    a_a = a0 + n_a/2,                 b_a = b0 + (y_aᵀy_a − μ_aᵀΛ_aμ_a)/2,

and β_a | data is a multivariate Student-t with 2a_a degrees of freedom, mean μ_a and
covariance b_a/(a_a − 1) · Σ_a. Only the sufficient statistics ZᵀZ, Zᵀy, yᵀy and n are kept
per arm, so adding an observation costs O(D²); the Cholesky factor of the arms whose data
changed is recomputed (O(D³) each) when the posterior is next read or sampled.

The feature dimension is generic: the same class is NeuralLinear's head on a network's
last-layer features (Showdown uses no intercept there, ``intercept=False``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from steinrl.errors import ConfigError
from steinrl.registry import compose, positive, setting, settings_options

__all__ = ["NIGLinearRegression", "NIGSettings"]


@dataclass(frozen=True)
class NIGSettings:
    """The Normal-Inverse-Gamma prior (the ``agent`` section of ``linfullpost`` and ``neurallinear``)."""

    a0: float = setting(6.0, "Shape of the Inv-Gamma prior on each arm's noise variance.", check=positive)
    b0: float = setting(6.0, "Scale of the Inv-Gamma prior on each arm's noise variance.", check=positive)
    lambda_prior: float = setting(0.25, "Prior precision λ of the weights: β | σ² ~ N(0, σ²/λ I).", check=positive)


@dataclass(frozen=True)
class _Intercept:
    intercept: bool = setting(True, "Append a constant 1 to the features (a learned per-arm offset).")


class NIGLinearRegression:
    """Per-arm Bayesian linear regression, Normal-Inverse-Gamma prior, exact updates (float64).

    D = ``num_features`` + 1 with ``intercept`` (a constant 1 appended as the *last* feature,
    as Showdown's ``ContextualDataset(intercept=True)``; its weight has the same N(0, σ²/λ)
    prior as the others), else D = ``num_features``. Weights are arm-major, ``(k, D)``.

    :param num_arms: k.
    :param num_features: F, the size of the feature vectors passed in.
    :param a0: shape of the Inv-Gamma prior on each arm's noise variance σ² (Showdown: 6).
    :param b0: scale of that prior (Showdown: 6).
    :param lambda_prior: λ, prior precision of β relative to σ² (Showdown: 0.25).
    :param intercept: append a constant 1 to the features (Showdown's LinFullPost: yes).
    """

    Settings = compose("NIGRegressionSettings", NIGSettings, _Intercept)
    options = settings_options(Settings)

    def __init__(self, num_arms: int, num_features: int, *, a0: float = 6.0, b0: float = 6.0,
                 lambda_prior: float = 0.25, intercept: bool = True) -> None:
        for name, value in (("a0", a0), ("b0", b0), ("lambda_prior", lambda_prior)):
            if not value > 0:
                raise ConfigError(f"{name} must be > 0, got {value}")
        self.num_arms, self.num_features, self.intercept = num_arms, num_features, intercept
        self.dim = num_features + int(intercept)
        self.a0, self.b0, self.lambda_prior = float(a0), float(b0), float(lambda_prior)
        self.reset()

    # ------------------------------------------------------------------ data

    def reset(self) -> None:
        """Forget all data: every arm back at the prior."""
        k, dim = self.num_arms, self.dim
        self.gram = np.zeros((k, dim, dim))  # ZᵀZ per arm
        self.moment = np.zeros((k, dim))  # Zᵀy per arm
        self.sum_squares = np.zeros(k)  # yᵀy per arm
        self.counts = np.zeros(k, dtype=np.int64)  # n per arm
        self._stale = np.ones(k, dtype=bool)
        self._chol_inv = np.zeros((k, dim, dim))  # L⁻¹ with Λ = L Lᵀ
        self._mean = np.zeros((k, dim))
        self._b = np.zeros(k)

    def design(self, features: np.ndarray) -> np.ndarray:
        """``(n, D)`` float64 regression inputs from ``features (n, F)``: the 1 appended if ``intercept``."""
        features = np.asarray(features, dtype=np.float64)
        if features.ndim != 2 or features.shape[1] != self.num_features:
            raise ValueError(f"features must be (n, {self.num_features}), got {features.shape}")
        if not self.intercept:
            return features
        return np.concatenate([features, np.ones((len(features), 1))], axis=1)

    def observe(self, features: np.ndarray, arms: np.ndarray, rewards: np.ndarray) -> None:
        """Add n observations: ``features (n, F)``, pulled ``arms (n,)`` int, ``rewards (n,)``.

        Any mix of arms; adding data in chunks gives the same posterior as adding it at once.
        """
        design = self.design(features)  # n D
        arms = np.asarray(arms).reshape(-1)
        rewards = np.asarray(rewards, dtype=np.float64).reshape(-1)
        n = len(design)
        if arms.shape != (n,) or rewards.shape != (n,):
            raise ValueError(f"need one arm and one reward per row: {n} rows, {arms.shape} arms, "
                             f"{rewards.shape} rewards")
        if n and (arms.min() < 0 or arms.max() >= self.num_arms):
            raise ValueError(f"arms must be in 0..{self.num_arms - 1}, got {arms.min()}..{arms.max()}")
        arm_mask = np.eye(self.num_arms)[arms]  # n k
        per_arm_design = (arm_mask[:, :, None] * design[:, None, :]).reshape(n, -1)  # n (k D)
        self.gram += (per_arm_design.T @ design).reshape(self.num_arms, self.dim, self.dim)
        self.moment += arm_mask.T @ (design * rewards[:, None])
        self.sum_squares += arm_mask.T @ rewards**2
        added = np.bincount(arms, minlength=self.num_arms)
        self.counts += added
        self._stale |= added > 0

    _STATISTICS = ("gram", "moment", "sum_squares", "counts")

    def statistics(self) -> dict[str, np.ndarray]:
        """The sufficient statistics (copies): ``gram`` (k, D, D), ``moment`` (k, D),
        ``sum_squares`` (k,), ``counts`` (k,)."""
        return {name: getattr(self, name).copy() for name in self._STATISTICS}

    def load_statistics(self, statistics: dict[str, np.ndarray]) -> None:
        """Restore what :meth:`statistics` returned (the posterior is then exactly the saved one)."""
        for name in self._STATISTICS:
            value = np.asarray(statistics[name], dtype=getattr(self, name).dtype)
            if value.shape != getattr(self, name).shape:
                raise ValueError(f"{name} has shape {value.shape}, expected {getattr(self, name).shape}")
            setattr(self, name, value.copy())
        self._stale[:] = True

    def fit(self, features: np.ndarray, arms: np.ndarray, rewards: np.ndarray) -> None:
        """Posterior from exactly this data (NeuralLinear after its features change): reset, then observe."""
        self.reset()
        self.observe(features, arms, rewards)

    # ------------------------------------------------------------------ posterior

    def _refresh(self) -> None:
        """Recompute L⁻¹, μ and b for the arms whose data changed (batched Cholesky)."""
        stale = np.flatnonzero(self._stale)
        if not len(stale):
            return
        eye = np.eye(self.dim)
        precision = self.gram[stale] + self.lambda_prior * eye  # s D D
        chol = np.linalg.cholesky(precision)  # s D D, lower
        chol_inv = np.linalg.solve(chol, np.broadcast_to(eye, chol.shape))  # L⁻¹
        whitened = np.einsum("sij,sj->si", chol_inv, self.moment[stale])  # L⁻¹Zᵀy
        self._chol_inv[stale] = chol_inv
        self._mean[stale] = np.einsum("sji,sj->si", chol_inv, whitened)  # μ = L⁻ᵀL⁻¹Zᵀy
        # μᵀΛμ = ‖L⁻¹Zᵀy‖²
        self._b[stale] = self.b0 + 0.5 * (self.sum_squares[stale] - np.einsum("si,si->s", whitened, whitened))
        self._stale[stale] = False

    @property
    def mean(self) -> np.ndarray:
        """``(k, D)`` posterior mean μ of the weights."""
        self._refresh()
        return self._mean.copy()

    @property
    def precision(self) -> np.ndarray:
        """``(k, D, D)`` Λ = ZᵀZ + λI (the weights' covariance is σ²Λ⁻¹ given σ²)."""
        return self.gram + self.lambda_prior * np.eye(self.dim)

    @property
    def a(self) -> np.ndarray:
        """``(k,)`` posterior Inv-Gamma shape a0 + n/2."""
        return self.a0 + 0.5 * self.counts

    @property
    def b(self) -> np.ndarray:
        """``(k,)`` posterior Inv-Gamma scale b0 + (yᵀy − μᵀΛμ)/2."""
        self._refresh()
        return self._b.copy()

    def sample(self, rng: np.random.Generator, num_samples: int | None = None) -> np.ndarray:
        """Draw weights from the posterior of every arm: σ² ~ Inv-Gamma(a, b), then β ~ N(μ, σ²Σ).

        :returns: ``(k, D)``, or ``(num_samples, k, D)`` independent draws.
        """
        self._refresh()
        shape = (1 if num_samples is None else num_samples, self.num_arms)
        noise_variance = self._b / rng.gamma(self.a, size=shape)  # S k
        white = rng.standard_normal((*shape, self.dim))  # S k D
        correlated = np.einsum("kji,skj->ski", self._chol_inv, white)  # L⁻ᵀz ~ N(0, Σ)
        weights = self._mean + np.sqrt(noise_variance)[..., None] * correlated
        return weights[0] if num_samples is None else weights

    def sample_rewards(self, features: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """``(n, k)`` expected rewards zᵀβ_a under one posterior draw of every arm's β (Thompson sampling:
        play the argmax)."""
        return self.design(features) @ self.sample(rng).T
