"""Variational Bayesian baselines over the same MLP shapes as steinrl.core's particles.

Each posterior ``q`` (:class:`VariationalPosterior`) samples weight sets laid out like an
ensemble of particles (``sample(n)`` -> per layer ``(W (n, in, out), b (n, out))``, for
:func:`steinrl.core.ensemble.mlp_forward`), gives ``kl()`` and a minibatch ``elbo_loss``:

- ``bbb``: Bayes by Backprop (:mod:`steinrl.bayes.bbb`),
- ``badam``: BADAM, the posterior read from Adam's second moments (:mod:`steinrl.bayes.badam`),
- ``kflow``: K-Linear Kronecker flow (:mod:`steinrl.bayes.kflow`),
- ``rdp``: radial–directional posteriors (:mod:`steinrl.bayes.rdp`).

Build one with ``make_posterior(name, in_dim, hidden, out_dim, activation, **options)``.

BNN regression on arrays (Stein particles or these posteriors): :func:`fit_regressor`
(:mod:`steinrl.bayes.regression`).
"""

from steinrl.bayes.badam import BADAM, BadamPosterior
from steinrl.bayes.base import (
    POSTERIORS,
    Dense,
    DiagonalGaussian,
    LogLikelihood,
    VariationalPosterior,
    gaussian_log_likelihood,
    kl_diagonal_gaussians,
    make_posterior,
)
from steinrl.bayes.bbb import BayesByBackprop
from steinrl.bayes.kflow import KroneckerFlowPosterior
from steinrl.bayes.rdp import RadialDirectionalPosterior
from steinrl.bayes.regression import REGRESSION_METHODS, RegressionSettings, Regressor, fit_regressor, load_uci

__all__ = [
    "POSTERIORS",
    "Dense",
    "DiagonalGaussian",
    "LogLikelihood",
    "VariationalPosterior",
    "gaussian_log_likelihood",
    "kl_diagonal_gaussians",
    "make_posterior",
    "BADAM",
    "BadamPosterior",
    "BayesByBackprop",
    "KroneckerFlowPosterior",
    "RadialDirectionalPosterior",
    "REGRESSION_METHODS",
    "RegressionSettings",
    "Regressor",
    "fit_regressor",
    "load_uci",
]
