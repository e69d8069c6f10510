"""Common interface of the variational Bayesian baselines, and their registry.

A posterior ``q`` over the weights of an MLP ``in_dim -> hidden... -> out_dim`` (layers
``y = act(x W + b)``, ``W`` of shape ``(in, out)``, no activation after the last layer).
Shapes are sample-major: :meth:`VariationalPosterior.sample` returns, per layer,
``(W (n, in, out), b (n, out))`` -- the layout of an ensemble of n Stein particles -- so

    mlp_forward(posterior.sample(n), x, posterior.activation)    # (n, B, out)

is the same batched forward the particles use (Thompson sampling: ``sample(1)`` per
round; regression: average the n predictions).

Training minimises the negative ELBO on a minibatch of B of the ``n_data`` examples
(BBB notes, "Minibatching"; RDP paper eq. 1; Kronecker-flow paper eq. 1):

    elbo_loss = -(n_data / B) Σ_batch E_q[log p(y | x, w)] + KL(q || p),

the expectation a Monte Carlo average over ``n_samples`` draws of w.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from steinrl.core.activations import ACTIVATIONS, hidden_init_std
from steinrl.core.ensemble import mlp_forward
from steinrl.errors import ConfigError
from steinrl.registry import Option, Registry, options_of

__all__ = [
    "Dense",
    "LogLikelihood",
    "PosteriorSettings",
    "VariationalPosterior",
    "DiagonalGaussian",
    "POSTERIORS",
    "make_posterior",
    "gaussian_log_likelihood",
    "kl_diagonal_gaussians",
]

#: Per layer ``(W (n, in, out), b (n, out))``.
Dense = list[tuple[Tensor, Tensor]]
#: ``log_likelihood(pred (n, B, out), y (B, out)) -> (n, B)``.
LogLikelihood = Callable[[Tensor, Tensor], Tensor]

def softplus_inverse(value: float) -> float:
    """ρ with softplus(ρ) = value (value > 0)."""
    return value + math.log(-math.expm1(-value))


def kl_diagonal_gaussians(mean: Tensor, std: Tensor, prior_std: float, prior_mean: Tensor | float = 0.0) -> Tensor:
    """KL(N(mean, diag std²) || N(prior_mean, prior_std² I)), summed over all entries (closed form)."""
    ratio = std / prior_std
    return 0.5 * (ratio.square() + ((mean - prior_mean) / prior_std).square() - 1.0).sum() - ratio.log().sum()


def gaussian_log_likelihood(pred: Tensor, y: Tensor, noise_precision: Tensor | float = 1.0,
                            mask: Tensor | None = None) -> Tensor:
    """log N(y | pred, 1/τ) summed over outputs: ``pred (n, B, out)``, ``y (B, out)`` -> ``(n, B)``.

    :param noise_precision: τ, a float or a (learned) tensor broadcastable to ``(out,)``.
    :param mask: ``(B, out)`` 0/1 weights, e.g. the one-hot of the pulled arm in a bandit
        (the squared error on that arm only); None counts every output.
    """
    tau = torch.as_tensor(noise_precision, dtype=pred.dtype, device=pred.device)
    log_density = 0.5 * (tau.log() - math.log(2.0 * math.pi)) - 0.5 * tau * (y - pred).square()  # n B out
    if mask is not None:
        log_density = log_density * mask
    return log_density.sum(-1)


class DiagonalGaussian(nn.Module):
    """q(θ) = N(μ, diag σ²) over a tensor of independent entries, σ = softplus(ρ).

    :param mean: initial μ (any shape S); becomes the parameter ``mean``.
    :param init_std: initial σ of every entry; ``rho`` is a parameter of shape S.
    """

    def __init__(self, mean: Tensor, init_std: float) -> None:
        super().__init__()
        self.mean = nn.Parameter(mean)
        self.rho = nn.Parameter(torch.full_like(mean, softplus_inverse(init_std)))

    @property
    def std(self) -> Tensor:
        return F.softplus(self.rho)

    def noise(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """ε ~ N(0, I) of shape ``(n, *S)``."""
        return torch.randn((n, *self.mean.shape), generator=generator, device=self.mean.device,
                           dtype=self.mean.dtype)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Tensor:
        """θ = μ + σ ⊙ ε, ``(n, *S)``, differentiable in μ and ρ."""
        return self.mean + self.std * self.noise(n, generator)

    def kl(self, prior_std: float) -> Tensor:
        """KL(q || N(0, prior_std² I)) in closed form (scalar)."""
        return kl_diagonal_gaussians(self.mean, self.std, prior_std)


@dataclass(frozen=True)
class PosteriorSettings:
    """A posterior's hyperparameters (the bandits' ``posterior`` config section; none: the base)."""


class VariationalPosterior(nn.Module):
    """Base class: q over the weights of an MLP ``in_dim -> hidden... -> out_dim``.

    Subclasses implement :meth:`sample` and :meth:`kl`, declare their hyperparameters in
    ``Settings`` (a frozen dataclass of :func:`~steinrl.registry.setting` s, each an
    ``__init__`` keyword; ``options`` is derived from it) and are registered in :data:`POSTERIORS`.

    :param in_dim: input size.
    :param hidden: hidden layer sizes, e.g. ``(50,)`` or ``(100, 100)``.
    :param out_dim: output size.
    :param activation: ``"tanh"``, ``"relu"``, ``"elu"`` or ``"identity"`` (as in
        :func:`steinrl.core.ensemble.mlp_forward`), after every layer but the last.
    """

    Settings: ClassVar[type] = PosteriorSettings
    options: ClassVar[tuple[Option, ...]] = ()
    #: option defaults for Thompson sampling in a bandit (online), where they differ from ``options``'
    online_defaults: ClassVar[dict[str, Any]] = {}
    #: option defaults for regression on standardised data, where they differ from ``options``'
    regression_defaults: ClassVar[dict[str, Any]] = {}
    #: True if :meth:`elbo_loss` is a loss per example (BADAM's mean NLL) rather than the
    #: negative ELBO of the whole data set: a term added to it (a hyper-prior) is divided by N
    loss_per_example: ClassVar[bool] = False

    def __init__(self, in_dim: int, hidden: Sequence[int], out_dim: int, activation: str = "relu") -> None:
        super().__init__()
        ACTIVATIONS.get(activation)  # ConfigError (a ValueError) naming the registered ones
        self.in_dim = int(in_dim)
        self.hidden = tuple(int(h) for h in hidden)
        self.out_dim = int(out_dim)
        self.activation = activation
        sizes = (self.in_dim, *self.hidden, self.out_dim)
        #: ``(fan_in, fan_out)`` of every layer, input to output.
        self.layer_shapes: tuple[tuple[int, int], ...] = tuple(zip(sizes[:-1], sizes[1:]))

    def init_std(self, layer: int) -> float:
        """Std of the initial weights (means) of a layer: gain / √fan_in (LeCun / He; the
        activation's gain, 1 for the output layer)."""
        return hidden_init_std(self.activation, self.layer_shapes[layer][0], output=layer == len(self.layer_shapes) - 1)

    def initial_weight_means(self, generator: torch.Generator | None = None) -> list[Tensor]:
        """Initial weight mean of every layer, ``(in, out)`` ~ N(0, init_std(i)²), input to
        output: one ``randn`` per layer from ``generator`` (None: torch's global one)."""
        return [torch.randn(fan_in, fan_out, generator=generator) * self.init_std(i)
                for i, (fan_in, fan_out) in enumerate(self.layer_shapes)]

    def initial_bias_posteriors(self, init_sigma: float) -> nn.ModuleList:
        """A :class:`DiagonalGaussian` over every layer's bias ``(out,)``: mean 0, std ``init_sigma``."""
        return nn.ModuleList(DiagonalGaussian(torch.zeros(fan_out), init_sigma) for _, fan_out in self.layer_shapes)

    def sample(self, n: int, generator: torch.Generator | None = None) -> Dense:
        """n weight sets drawn from q: per layer ``(W (n, in, out), b (n, out))``."""
        raise NotImplementedError

    def kl(self) -> Tensor:
        """KL(q || p), a scalar."""
        raise NotImplementedError

    def predict(self, x: Tensor, n_samples: int = 1, generator: torch.Generator | None = None) -> Tensor:
        """Predictions of n weight draws: ``x (B, in)`` -> ``(n, B, out)``."""
        return mlp_forward(self.sample(n_samples, generator), x, self.activation)

    def predictions_and_kl(self, x: Tensor, n_samples: int,
                           generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
        """The two ELBO terms' inputs: ``(pred (n, B, out), KL)``. Subclasses may share samples."""
        return self.predict(x, n_samples, generator), self.kl()

    def elbo_loss(self, x: Tensor, y: Tensor, log_likelihood: LogLikelihood, n_data: int, n_samples: int = 1,
                  generator: torch.Generator | None = None) -> Tensor:
        """Negative ELBO of a minibatch, ``-(n_data / B) Σ_batch E_q[log p(y | x, w)] + KL``.

        :param x: ``(B, in)``.
        :param y: ``(B, out)`` (whatever ``log_likelihood`` expects).
        :param log_likelihood: ``(pred (n, B, out), y) -> (n, B)``, e.g.
            ``functools.partial(gaussian_log_likelihood, noise_precision=tau, mask=arm_onehot)``.
        :param n_data: size of the whole data set (the minibatch weight n_data / B).
        :param n_samples: Monte Carlo draws of w for the expectation.
        """
        pred, kl = self.predictions_and_kl(x, n_samples, generator)
        log_lik = log_likelihood(pred, y)
        if log_lik.shape != pred.shape[:2]:
            raise ValueError(f"log_likelihood must return (n, B) = {tuple(pred.shape[:2])}, got {tuple(log_lik.shape)}")
        return -(n_data / x.shape[-2]) * log_lik.sum(1).mean(0) + kl

    def make_optimizer(self, lr: float = 1e-3) -> torch.optim.Optimizer:
        """The optimizer that trains this posterior on :meth:`elbo_loss` (Adam by default)."""
        return torch.optim.Adam(self.parameters(), lr=lr)


#: Variational posteriors by name: ``bbb``, ``badam``, ``kflow``, ``rdp``.
POSTERIORS: Registry[type[VariationalPosterior]] = Registry("posterior")


def make_posterior(name: str, in_dim: int, hidden: Sequence[int], out_dim: int, activation: str = "relu", *,
                   generator: torch.Generator | None = None, **options: Any) -> VariationalPosterior:
    """Build a registered posterior; ``options`` are its declared :class:`Option` s (defaults fill the rest).

    :param generator: draws the initial parameters; None uses torch's global generator.
    :raises ConfigError: unknown name or option, a value outside its choices or range.
    """
    cls = POSTERIORS.get(name)
    declared = {option.name: option for option in options_of(cls)}
    unknown = sorted(set(options) - set(declared))
    if unknown:
        raise ConfigError(f"posterior {name!r} has no option(s) {unknown}; options: {', '.join(declared)}")
    values = {key: options.get(key, option.default) for key, option in declared.items()}
    for key, option in declared.items():
        choices = option.allowed_choices()
        if choices is not None and values[key] not in choices:
            raise ConfigError(f"posterior {name!r} option {key}={values[key]!r}: choose from {choices}")
        error = option.check(values[key]) if option.check is not None else None
        if error:
            raise ConfigError(f"posterior {name!r} option {key}={values[key]!r}: {error}")
    return cls(in_dim, hidden, out_dim, activation, generator=generator, **values)
