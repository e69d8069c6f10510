"""Bayesian neural-network regression on (X, y) arrays: Stein particles or a variational posterior.

``fit_regressor(method, X, y, ...) -> Regressor``; ``Regressor.predict(X) -> (mean, variance)``,
``Regressor.rmse(X, y)`` and ``Regressor.test_log_likelihood(X, y)`` on the original scale.

Model (Liu & Wang 2016's SVGD BNN; docs/bayes.md#bnn-regression), on inputs and targets standardised
with the training mean / std (``np.std``, ddof 0; a constant column keeps std 1):
y | x ~ N(f(x; W), 1/γ) with a learned noise precision γ ~ Gamma(a, rate b), a = 1, b = 0.1.

- Particle methods (every method of :data:`steinrl.core.METHODS`: ``svgd``, ``s2vgd``, ``vmg``,
  ``kron``, ``independent``): an :class:`~steinrl.core.EnsembleMLP` of M particles moved by the
  method's update (its layer family and layer defaults, the Stein kernel ``kernel``);
  ``prior="joint"`` learns per particle one precision λ_g ~ Gamma(a, rate b) per weight group
  (``make_prior("joint", ...)``);
  ``prior="invgamma"`` marginalises λ_g in closed form. log γ (M, 1) and log λ (M, G) sit in
  the SVGD particle vector with the weights. log target per particle, minibatch of B of N:
  (N/B) Σ_batch log N(y | f, 1/γ) + log p(log γ) + log p(W, log λ).
- Variational methods (every posterior of :data:`steinrl.bayes.POSTERIORS`: ``bbb``, ``badam``,
  ``kflow``, ``rdp``): the posterior's minibatch ELBO with the same likelihood; γ is one point
  estimate (MAP under the same Gamma prior) trained by Adam beside the posterior's own optimizer.
  The posterior's ``regression_defaults`` override its option defaults, and a posterior whose
  loss is per example (``loss_per_example``, BADAM) gets the γ prior divided by N.

Choices after Liu & Wang's UCI code (``python/bayesian_nn.py``; S²VGD's ``Regression/BayesianNN.py``
copies it): batch 100; RBF kernel with the median heuristic — the ``s2vgd`` rule h = med²/log M
equals theirs (h = median of all squared distances / log(M+1)) up to the diagonal zeros and
M vs M + 1; log γ starts at −log(mean squared residual of the initial network) per particle
(on ≤ 1000 training points, as theirs); λ starts at a draw from Gamma(shape a, *scale* b) (theirs:
``np.random.gamma(a0, b0)``, mean 0.1, although the model's Gamma has rate b); predictions
average the particles. Their step, "AdaGrad with momentum", is RMSprop with decay 0.9, ε = 1e-6
outside the root, lr 1e-3 (``optimizer="rmsprop", lr=1e-3`` here; theirs seeds the average with the
first g² instead of 0.1 g²); it underfits on validation splits carved from training data, so
the default is Adam, lr 3e-3 (research/results/uci.md#uci-the-default-optimizer). Adam moves every
coordinate by about lr per step, which caps the travel of log γ (yacht needs log γ ≈ 7-8
from ≈ 0): the optimised coordinate is log γ / ``noise_scale`` (default 10).
Left open by the papers and chosen here: the number of epochs (the
caller's; theirs runs 2000 minibatch steps), reshuffling every epoch (theirs cycles through one
permutation), He-normal initial weights (theirs N(0, 1/(fan_in + 1))), ReLU, and no held-out
"development" tenth: their code retrains on 90 % of the training split and re-fits γ on the rest
after training; here all training data fit the model and γ is only learned.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from steinrl.bayes.base import POSTERIORS, VariationalPosterior, gaussian_log_likelihood, make_posterior
from steinrl.core.couplings import Coupling, SteinSettings, check_repulsion_for, coupling_from, make_coupling
from steinrl.core.ensemble import EnsembleMLP
from steinrl.core.kernels import kernel_spec
from steinrl.core.methods import METHODS
from steinrl.core.optim import gradient_step
from steinrl.core.particle_optimizer import ParticleOptimizer
from steinrl.core.priors import log_gamma_prior, make_prior
from steinrl.errors import ConfigError
from steinrl.registry import setting, settings_options

__all__ = ["PARTICLE_METHODS", "VARIATIONAL_METHODS", "REGRESSION_METHODS", "RegressionSettings", "Standardizer",
           "Regressor", "fit_regressor", "load_uci", "split_indices"]

#: The registered particle methods and variational posteriors (every one fits a regressor).
PARTICLE_METHODS = tuple(METHODS.names())
VARIATIONAL_METHODS = tuple(POSTERIORS.names())
REGRESSION_METHODS = PARTICLE_METHODS + VARIATIONAL_METHODS
_LOG_2PI = math.log(2.0 * math.pi)


@dataclass(frozen=True)
class Standardizer:
    """Per-column ``(x - mean) / std`` from training data; a zero std counts as 1."""

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, data: np.ndarray) -> Standardizer:
        std = data.std(axis=0)
        return cls(data.mean(axis=0), np.where(std > 0, std, 1.0))

    def transform(self, data: np.ndarray) -> np.ndarray:
        return (data - self.mean) / self.std

    def inverse(self, data: np.ndarray) -> np.ndarray:
        return data * self.std + self.mean


class Regressor:
    """A fitted regressor. ``sampler(x (n, d) tensor) -> (f (S, n), γ (S,))`` gives S weight
    draws' predictions and noise precisions on the standardised scale (S = M particles, or
    ``n_predict`` posterior draws)."""

    def __init__(self, method: str, model: nn.Module, sampler: Callable[[Tensor], tuple[Tensor, Tensor]],
                 x_scale: Standardizer, y_scale: Standardizer) -> None:
        self.method, self.model, self.sampler = method, model, sampler
        self.x_scale, self.y_scale = x_scale, y_scale

    @torch.no_grad()
    def predict_samples(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(f (S, n), noise variance (S,))`` of every draw, on the original scale."""
        x = torch.as_tensor(self.x_scale.transform(np.asarray(X, dtype=np.float64)), dtype=torch.float32)
        f, gamma = self.sampler(x)
        s = float(self.y_scale.std)
        return self.y_scale.inverse(f.double().numpy()), s * s / gamma.double().numpy()

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean ``(n,)`` (the average over draws) and variance ``(n,)`` (spread of
        the draws plus their mean noise variance), original scale."""
        f, noise = self.predict_samples(X)
        return f.mean(0), f.var(0) + noise.mean()

    def rmse(self, X: np.ndarray, y: np.ndarray) -> float:
        """Root mean squared error of the predictive mean, original scale."""
        return float(np.sqrt(np.mean((self.predict(X)[0] - np.asarray(y, dtype=np.float64)) ** 2)))

    def test_log_likelihood(self, X: np.ndarray, y: np.ndarray) -> float:
        """Mean over points of log (1/S) Σ_s N(y | f_s(x), σ_s²), original scale (the
        mixture of the draws, as Liu & Wang's ``evaluation``)."""
        f, noise = self.predict_samples(X)
        y = np.asarray(y, dtype=np.float64)
        log_n = -0.5 * (_LOG_2PI + np.log(noise)[:, None] + (y - f) ** 2 / noise[:, None])  # S n
        peak = log_n.max(0)
        return float(np.mean(peak + np.log(np.exp(log_n - peak).mean(0))))

    def noise_precision(self) -> np.ndarray:
        """Learned γ of every draw on the standardised scale, ``(S,)``."""
        return self.sampler(torch.zeros(1, len(self.x_scale.mean)))[1].detach().double().numpy()


def _batches(n: int, batch_size: int, gen: torch.Generator):
    order = torch.randperm(n, generator=gen)
    return torch.split(order, batch_size)


@dataclass(frozen=True)
class RegressionSettings:
    """:func:`fit_regressor`'s options, typed (its keyword arguments)."""

    hidden: Sequence[int] = setting((50,), "Hidden layer sizes of the network.")
    particles: int = setting(20, "M, the particles of a particle method.")
    epochs: int = setting(500, "Passes over the training data, minibatches of batch_size reshuffled every epoch (a "
                          "last smaller batch counts with weight N/B too).")
    batch_size: int = setting(100, "Rounds per minibatch.")
    lr: float = setting(3e-3, "Step size of the particles' optimizer, and Adam's for the variational posteriors and "
                        "their γ (BADAM: its own Adam).")
    seed: int = setting(0, "Seeds every draw (initial weights, λ, minibatches, posterior samples).")
    prior: str = setting("joint", "joint (a learned log λ_g per particle and group) or invgamma (λ_g marginalised); "
                         "particle methods only.", choices=("joint", "invgamma"))
    a: float = setting(1.0, "Gamma shape of the hyper-priors on γ (and λ).")
    b: float = setting(0.1, "Their rate.")
    optimizer: str = setting("adam", "The particles' optimizer (rmsprop, adam, ... of ParticleOptimizer).")
    kernel: str | dict[str, Any] = setting(
        "rbf", "The Stein kernel of a coupled particle method: a name (rbf, imq) or a mapping of name and parameters "
        "(kernel_spec); its bandwidth rule is s2vgd unless the mapping names one.", kind=(str, dict))
    activation: str = setting("relu", "Hidden activation.")
    n_predict: int = setting(100, "Posterior draws averaged at prediction (variational methods).")
    posterior_options: dict[str, Any] | None = setting(
        None, "Options of make_posterior (over the posterior's regression_defaults).", kind=(dict, None))
    noise_scale: float = setting(
        10.0, "The optimised coordinate of the noise precision is u = log γ / noise_scale, so the optimizer moves log "
        "γ noise_scale times faster than a weight (default 10: with Adam's ~lr-sized steps log γ could otherwise move "
        "at most 6 in 2000 steps at lr 3e-3, short of yacht's log γ ≈ 7-8; chosen on validation splits carved from "
        "training data).")
    update_options: dict[str, Any] | None = setting(
        None, "More options of a Stein method's coupling (the update config section's), e.g. {kernel: {space: "
        "functions, states: 32}} (the kernel on the predictions at each minibatch's first B inputs; a kernel mapping "
        "here sets parameters of kernel) or {repulsion: {name: share, target: 0.2}}.", kind=(dict, None))


def _coupling(method: str, s: RegressionSettings) -> Coupling:
    """The coupling of ``method``: a Stein method's kernel (``s.kernel``, bandwidth rule s2vgd unless it
    names one; ``s.update_options``' kernel sets parameters of it) and the other coupling options."""
    spec = METHODS.get(method)
    if spec.coupling != "stein":
        return make_coupling(spec.coupling)
    given = {"name": s.kernel} if isinstance(s.kernel, str) else dict(s.kernel)
    kernel = kernel_spec({"bandwidth": "s2vgd", **given})
    extra = dict(s.update_options or {})
    if "kernel" in extra:
        kernel = kernel_spec(extra.pop("kernel"), kernel)
    try:
        settings = SteinSettings(kernel=kernel, **extra)
    except TypeError:
        raise ConfigError(f"update_options {sorted(extra)}: the Stein coupling takes "
                          f"{', '.join(o.name for o in settings_options(SteinSettings))}") from None
    check_repulsion_for(settings, "BNN regression")
    return coupling_from(spec.coupling, settings)


def _fit_particles(method: str, x: Tensor, y: Tensor, s: RegressionSettings,
                   gen: torch.Generator) -> tuple[nn.Module, Callable]:
    spec = METHODS.get(method)
    hidden, particles, a, b, noise_scale = s.hidden, s.particles, s.a, s.b, s.noise_scale
    net = EnsembleMLP(particles, x.shape[1], hidden, 1, activation=s.activation, layer=spec.layer,
                      layer_options=spec.layer_defaults, init="lecun", generator=gen)
    groups = {k: g.shape[1] for k, g in net.prior_groups().items()}
    if s.prior == "joint":
        weight_prior = make_prior("joint", groups, particles, a=a, b=b)
        with torch.no_grad():  # λ ~ Gamma(shape a, scale b), as Liu & Wang's init_weights
            draw = torch._standard_gamma(torch.full(weight_prior.log_precision.shape, a), generator=gen) * b
            weight_prior.log_precision.copy_(draw.clamp_min(1e-30).log())
    elif s.prior == "invgamma":
        weight_prior = make_prior("invgamma", a=a, b=b)
    else:
        raise ConfigError(f"unknown prior {s.prior!r}; choices: joint, invgamma")
    n = x.shape[0]
    with torch.no_grad():  # log γ = −log(mean squared residual of the initial net), per particle
        idx = torch.randperm(n, generator=gen)[:1000]
        mse = (net(x[idx]).squeeze(-1) - y[idx]).square().mean(1, keepdim=True)  # M 1
    # log γ = noise_scale · u with u the particle coordinate: Adam moves u by about lr per step, so
    # log γ moves noise_scale times faster (the density of u is that of log γ up to a constant).
    u_gamma = nn.Parameter(-mse.clamp_min(1e-8).log() / noise_scale)
    params = [*net.parameters(), *weight_prior.hyperparameters(), u_gamma]
    opt_kwargs = {"alpha": 0.9, "eps": 1e-6} if s.optimizer == "rmsprop" else {}  # Liu & Wang's constants
    particle_optimizer = ParticleOptimizer(params, _coupling(method, s), lr=s.lr, optimizer=s.optimizer,
                                           optimizer_kwargs=opt_kwargs)
    # B: the predictions at each minibatch's first B inputs
    embedding_states = particle_optimizer.coupling.embedding_states
    for _ in range(s.epochs):
        for idx in _batches(n, s.batch_size, gen):
            embed = (lambda xb=x[idx[:embedding_states]]: net(xb).squeeze(-1)) if embedding_states else None  # (M, B)
            pred = net(x[idx]).squeeze(-1)  # M B
            log_gamma = noise_scale * u_gamma  # M 1
            gamma = log_gamma.exp()
            sq = (pred - y[idx]).square().sum(1, keepdim=True)  # M 1
            log_lik = (n / len(idx)) * (0.5 * len(idx) * (log_gamma - _LOG_2PI) - 0.5 * gamma * sq)
            log_target = (log_lik + log_gamma_prior(log_gamma, a, b)).squeeze(1) + net.log_prior(weight_prior)
            particle_optimizer.step(log_target, embed=embed)
    model = nn.ModuleDict({"net": net, "prior": weight_prior})
    model.register_parameter("noise_coordinate", u_gamma)
    return model, lambda xs: (net(xs).squeeze(-1), (noise_scale * u_gamma).squeeze(1).exp())


def _fit_variational(method: str, x: Tensor, y: Tensor, s: RegressionSettings,
                     gen: torch.Generator) -> tuple[nn.Module, Callable]:
    cls = POSTERIORS.get(method)
    a, b, lr, noise_scale, n_predict = s.a, s.b, s.lr, s.noise_scale, s.n_predict
    options = {**cls.regression_defaults, **(s.posterior_options or {})}
    post: VariationalPosterior = make_posterior(method, x.shape[1], s.hidden, 1, s.activation, generator=gen,
                                                **options)
    n = x.shape[0]
    with torch.no_grad():
        mse = (post.predict(x, 1, gen)[0].squeeze(-1) - y).square().mean()
    u_gamma = nn.Parameter(-mse.clamp_min(1e-8).log() / noise_scale)  # log γ = noise_scale · u, as for particles
    opt, opt_noise = post.make_optimizer(lr), torch.optim.Adam([u_gamma], lr=lr)
    # a loss per example (BADAM's mean NLL) takes 1/N of the γ prior
    prior_weight = 1.0 / n if cls.loss_per_example else 1.0
    y2 = y.unsqueeze(1)
    for _ in range(s.epochs):
        for idx in _batches(n, s.batch_size, gen):
            log_gamma = noise_scale * u_gamma

            def log_likelihood(pred: Tensor, target: Tensor, log_gamma: Tensor = log_gamma) -> Tensor:
                return gaussian_log_likelihood(pred, target, log_gamma.exp())
            loss = post.elbo_loss(x[idx], y2[idx], log_likelihood, n, generator=gen)
            loss = loss - prior_weight * log_gamma_prior(log_gamma, a, b)
            gradient_step(loss, [opt, opt_noise])
    model = nn.ModuleDict({"posterior": post})
    model.register_parameter("noise_coordinate", u_gamma)

    def sampler(xs: Tensor) -> tuple[Tensor, Tensor]:
        draw_gen = torch.Generator().manual_seed(s.seed + 1)  # the same draws at every call
        f = post.predict(xs, n_predict, draw_gen).squeeze(-1)  # S n
        return f, (noise_scale * u_gamma).exp().expand(n_predict)
    return model, sampler


def fit_regressor(method: str, X_train: np.ndarray, y_train: np.ndarray, settings: RegressionSettings | None = None,
                  **options: Any) -> Regressor:
    """Fit a BNN regressor ``X (N, d) -> y (N,)``.

    :param method: a particle method of :data:`PARTICLE_METHODS` (``svgd``, ``s2vgd``, ``vmg``,
        ``kron``, ``independent``: M particles) or a posterior of :data:`VARIATIONAL_METHODS`
        (``bbb``, ``badam``, ``kflow``, ``rdp``: variational, :mod:`steinrl.bayes`).
    :param settings: the options, typed (:class:`RegressionSettings`: ``hidden``, ``particles``,
        ``epochs``, ``lr``, ``kernel``, ``update_options``, ...; default: its defaults).
    :param options: any of them as keywords, over ``settings`` (``fit_regressor("svgd", X, y, epochs=50)``).
    """
    if method not in REGRESSION_METHODS:
        raise ConfigError(f"unknown regression method {method!r}; choices: {', '.join(REGRESSION_METHODS)}")
    s = dataclasses.replace(settings or RegressionSettings(), **options)
    X_train, y_train = np.asarray(X_train, dtype=np.float64), np.asarray(y_train, dtype=np.float64).reshape(-1)
    if X_train.ndim != 2 or len(X_train) != len(y_train) or len(y_train) < 2:
        raise ValueError(f"need X (N, d) and y (N,) with N >= 2, got {X_train.shape} and {y_train.shape}")
    x_scale, y_scale = Standardizer.fit(X_train), Standardizer.fit(y_train)
    x = torch.as_tensor(x_scale.transform(X_train), dtype=torch.float32)
    y = torch.as_tensor(y_scale.transform(y_train), dtype=torch.float32)
    gen = torch.Generator().manual_seed(s.seed)
    if not s.noise_scale > 0:
        raise ValueError(f"noise_scale must be > 0, got {s.noise_scale}")
    s = dataclasses.replace(s, hidden=tuple(s.hidden), noise_scale=float(s.noise_scale))
    fit = _fit_particles if method in PARTICLE_METHODS else _fit_variational
    model, sampler = fit(method, x, y, s, gen)
    return Regressor(method, model, sampler, x_scale, y_scale)


def load_uci(directory: str | Path) -> tuple[np.ndarray, np.ndarray, int]:
    """Read a UCI set in the protocol's format: ``(X (n, d), y (n,), n_splits)``.

    ``data.txt`` (whitespace-separated rows), ``index_features.txt`` / ``index_target.txt``
    (0-based column indices), ``n_splits.txt``. A missing or malformed file raises
    :class:`ConfigError` naming it.
    """
    root = Path(directory)
    files = {name: root / f"{name}.txt" for name in ("data", "index_features", "index_target", "n_splits")}
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        raise ConfigError(f"UCI directory {root} lacks {', '.join(missing)}")
    try:
        data = np.loadtxt(files["data"], ndmin=2)
        features = np.loadtxt(files["index_features"], dtype=int, ndmin=1)
        target = np.loadtxt(files["index_target"], dtype=int, ndmin=1)
        n_splits = int(files["n_splits"].read_text().split()[0])
    except (ValueError, IndexError) as exc:
        raise ConfigError(f"malformed UCI directory {root}: {exc}") from None
    cols = data.shape[1]
    if target.size != 1 or not all(0 <= i < cols for i in [*features, *target]) or n_splits < 1 or len(data) < 2:
        raise ConfigError(f"malformed UCI directory {root}: column indices must be in [0, {cols}), one target, "
                          f"n_splits >= 1 and at least 2 rows")
    return data[:, features], data[:, int(target[0])], n_splits


def split_indices(n: int, split: int, train_fraction: float = 0.9) -> tuple[np.ndarray, np.ndarray]:
    """The protocol's random train/test split number ``split`` (seed = split index): ``(train, test)``."""
    perm = np.random.default_rng(split).permutation(n)
    n_train = int(round(train_fraction * n))
    return perm[:n_train], perm[n_train:]
