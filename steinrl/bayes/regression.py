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

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from steinrl.bayes.base import POSTERIORS, VariationalPosterior, gaussian_log_likelihood, make_posterior
from steinrl.core.couplings import check_repulsion_for
from steinrl.core.ensemble import EnsembleMLP
from steinrl.core.kernels import kernel_spec
from steinrl.core.methods import METHODS
from steinrl.core.optim import gradient_step
from steinrl.core.particle_optimizer import make_particle_optimizer
from steinrl.core.priors import log_gamma_prior, make_prior
from steinrl.core.repulsion import repulsion_spec
from steinrl.errors import ConfigError

__all__ = ["PARTICLE_METHODS", "VARIATIONAL_METHODS", "REGRESSION_METHODS", "Standardizer",
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


def _fit_particles(method: str, x: Tensor, y: Tensor, *, hidden, particles, epochs, batch_size, lr, gen, prior,
                   a, b, optimizer, kernel, activation, noise_scale, update_options) -> tuple[nn.Module, Callable]:
    spec = METHODS.get(method)
    net = EnsembleMLP(particles, x.shape[1], hidden, 1, activation=activation, layer=spec.layer,
                      layer_options=spec.layer_defaults, init="lecun", generator=gen)
    groups = {k: g.shape[1] for k, g in net.prior_groups().items()}
    if prior == "joint":
        weight_prior = make_prior("joint", groups, particles, a=a, b=b)
        with torch.no_grad():  # λ ~ Gamma(shape a, scale b), as Liu & Wang's init_weights
            draw = torch._standard_gamma(torch.full(weight_prior.log_precision.shape, a), generator=gen) * b
            weight_prior.log_precision.copy_(draw.clamp_min(1e-30).log())
    elif prior == "invgamma":
        weight_prior = make_prior("invgamma", a=a, b=b)
    else:
        raise ConfigError(f"unknown prior {prior!r}; choices: joint, invgamma")
    n = x.shape[0]
    with torch.no_grad():  # log γ = −log(mean squared residual of the initial net), per particle
        idx = torch.randperm(n, generator=gen)[:1000]
        mse = (net(x[idx]).squeeze(-1) - y[idx]).square().mean(1, keepdim=True)  # M 1
    # log γ = noise_scale · u with u the particle coordinate: Adam moves u by about lr per step, so
    # log γ moves noise_scale times faster (the density of u is that of log γ up to a constant).
    u_gamma = nn.Parameter(-mse.clamp_min(1e-8).log() / noise_scale)
    params = [*net.parameters(), *weight_prior.hyperparameters(), u_gamma]
    opt_kwargs = {"alpha": 0.9, "eps": 1e-6} if optimizer == "rmsprop" else {}  # Liu & Wang's constants
    given = {"name": kernel} if isinstance(kernel, str) else dict(kernel)  # bandwidth rule s2vgd unless given
    section = dict(update_options or {})
    if spec.coupling == "stein":  # update_options' kernel sets parameters of the kernel so far
        section["kernel"] = kernel_spec(section.pop("kernel", {}), kernel_spec({"bandwidth": "s2vgd", **given}))
        check_repulsion_for({"repulsion": repulsion_spec(section.get("repulsion", "constant"))}, "BNN regression")
    else:
        section = {}
    particles_opt = make_particle_optimizer(spec.coupling, params, section, lr=lr, optimizer=optimizer,
                                            optimizer_kwargs=opt_kwargs)
    shared = particles_opt.coupling.embedding_states  # B: the predictions at each minibatch's first B inputs
    for _ in range(epochs):
        for idx in _batches(n, batch_size, gen):
            embed = (lambda xb=x[idx[:shared]]: net(xb).squeeze(-1)) if shared else None  # (M, B)
            pred = net(x[idx]).squeeze(-1)  # M B
            log_gamma = noise_scale * u_gamma  # M 1
            gamma = log_gamma.exp()
            sq = (pred - y[idx]).square().sum(1, keepdim=True)  # M 1
            log_lik = (n / len(idx)) * (0.5 * len(idx) * (log_gamma - _LOG_2PI) - 0.5 * gamma * sq)
            log_target = (log_lik + log_gamma_prior(log_gamma, a, b)).squeeze(1) + net.log_prior(weight_prior)
            particles_opt.step(log_target, embed=embed)
    model = nn.ModuleDict({"net": net, "prior": weight_prior})
    model.register_parameter("noise_coordinate", u_gamma)
    return model, lambda xs: (net(xs).squeeze(-1), (noise_scale * u_gamma).squeeze(1).exp())


def _fit_variational(method: str, x: Tensor, y: Tensor, *, hidden, epochs, batch_size, lr, gen, a, b, activation,
                     n_predict, seed, posterior_options, noise_scale) -> tuple[nn.Module, Callable]:
    cls = POSTERIORS.get(method)
    options = {**cls.regression_defaults, **(posterior_options or {})}
    post: VariationalPosterior = make_posterior(method, x.shape[1], hidden, 1, activation, generator=gen, **options)
    n = x.shape[0]
    with torch.no_grad():
        mse = (post.predict(x, 1, gen)[0].squeeze(-1) - y).square().mean()
    u_gamma = nn.Parameter(-mse.clamp_min(1e-8).log() / noise_scale)  # log γ = noise_scale · u, as for particles
    opt, opt_noise = post.make_optimizer(lr), torch.optim.Adam([u_gamma], lr=lr)
    # a loss per example (BADAM's mean NLL) takes 1/N of the γ prior
    prior_weight = 1.0 / n if cls.loss_per_example else 1.0
    y2 = y.unsqueeze(1)
    for _ in range(epochs):
        for idx in _batches(n, batch_size, gen):
            log_gamma = noise_scale * u_gamma

            def log_likelihood(pred: Tensor, target: Tensor, log_gamma: Tensor = log_gamma) -> Tensor:
                return gaussian_log_likelihood(pred, target, log_gamma.exp())
            loss = post.elbo_loss(x[idx], y2[idx], log_likelihood, n, generator=gen)
            loss = loss - prior_weight * log_gamma_prior(log_gamma, a, b)
            gradient_step(loss, [opt, opt_noise])
    model = nn.ModuleDict({"posterior": post})
    model.register_parameter("noise_coordinate", u_gamma)

    def sampler(xs: Tensor) -> tuple[Tensor, Tensor]:
        draw_gen = torch.Generator().manual_seed(seed + 1)  # the same draws at every call
        f = post.predict(xs, n_predict, draw_gen).squeeze(-1)  # S n
        return f, (noise_scale * u_gamma).exp().expand(n_predict)
    return model, sampler


def fit_regressor(method: str, X_train: np.ndarray, y_train: np.ndarray, *, hidden: Sequence[int] = (50,),
                  particles: int = 20, epochs: int = 500, batch_size: int = 100, lr: float = 3e-3, seed: int = 0,
                  prior: str = "joint", a: float = 1.0, b: float = 0.1, optimizer: str = "adam",
                  kernel: str | dict = "rbf", activation: str = "relu", n_predict: int = 100,
                  posterior_options: dict | None = None, noise_scale: float = 10.0,
                  update_options: dict | None = None) -> Regressor:
    """Fit a BNN regressor ``X (N, d) -> y (N,)``.

    :param method: a particle method of :data:`PARTICLE_METHODS` (``svgd``, ``s2vgd``, ``vmg``,
        ``kron``, ``independent``: M particles) or a posterior of :data:`VARIATIONAL_METHODS`
        (``bbb``, ``badam``, ``kflow``, ``rdp``: variational, :mod:`steinrl.bayes`).
    :param particles: M (particle methods).
    :param epochs: passes over the training data, minibatches of ``batch_size`` reshuffled
        every epoch (a last smaller batch counts with weight N/B too).
    :param lr: step size of the particles' optimizer, and Adam's for the variational
        posteriors and their γ (BADAM: its own Adam).
    :param seed: seeds every draw (initial weights, λ, minibatches, posterior samples).
    :param prior: ``"joint"`` (learned log λ_g per particle and group) or ``"invgamma"``
        (λ_g marginalised); particle methods only.
    :param a: Gamma shape of the hyper-priors on γ (and λ). :param b: their rate.
    :param optimizer: the particles' optimizer (``rmsprop``, ``adam``, ... of
        :class:`~steinrl.core.ParticleOptimizer`).
    :param kernel: the Stein kernel of a coupled particle method: a name (``rbf``, ``imq``) or
        a mapping of name and parameters (:func:`steinrl.core.kernels.kernel_spec`); its
        bandwidth rule is ``s2vgd`` unless the mapping names one.
    :param noise_scale: the optimised coordinate of the noise precision is u = log γ / noise_scale,
        so the optimizer moves log γ ``noise_scale`` times faster than a weight (default 10: with
        Adam's ~lr-sized steps log γ could otherwise move at most 6 in 2000 steps at lr 3e-3,
        short of yacht's log γ ≈ 7-8; chosen on validation splits carved from training data).
    :param update_options: more options of a Stein method's coupling (the ``update`` config
        section's), e.g. ``{"kernel": {"space": "functions", "states": 32}}`` (the kernel on
        the predictions at each minibatch's first B inputs; a kernel mapping here sets parameters
        of ``kernel``) or ``{"repulsion": {"name": "share", "target": 0.2}}``.
    :param n_predict: posterior draws averaged at prediction (variational methods).
    :param posterior_options: options of :func:`~steinrl.bayes.make_posterior` (over
        the posterior's ``regression_defaults``).
    """
    if method not in REGRESSION_METHODS:
        raise ConfigError(f"unknown regression method {method!r}; choices: {', '.join(REGRESSION_METHODS)}")
    X_train, y_train = np.asarray(X_train, dtype=np.float64), np.asarray(y_train, dtype=np.float64).reshape(-1)
    if X_train.ndim != 2 or len(X_train) != len(y_train) or len(y_train) < 2:
        raise ValueError(f"need X (N, d) and y (N,) with N >= 2, got {X_train.shape} and {y_train.shape}")
    x_scale, y_scale = Standardizer.fit(X_train), Standardizer.fit(y_train)
    x = torch.as_tensor(x_scale.transform(X_train), dtype=torch.float32)
    y = torch.as_tensor(y_scale.transform(y_train), dtype=torch.float32)
    gen = torch.Generator().manual_seed(seed)
    if not noise_scale > 0:
        raise ValueError(f"noise_scale must be > 0, got {noise_scale}")
    common = dict(hidden=tuple(hidden), epochs=epochs, batch_size=batch_size, lr=lr, gen=gen, a=a, b=b,
                  activation=activation, noise_scale=float(noise_scale))
    if method in PARTICLE_METHODS:
        model, sampler = _fit_particles(method, x, y, particles=particles, prior=prior, optimizer=optimizer,
                                        kernel=kernel, update_options=update_options, **common)
    else:
        model, sampler = _fit_variational(method, x, y, n_predict=n_predict, seed=seed,
                                          posterior_options=posterior_options, **common)
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
