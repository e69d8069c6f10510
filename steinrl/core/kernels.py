"""Stein kernels: objects that own their bandwidth rule, their hyperparameters and their space.

Every kernel is translation-invariant, k(x, y) = f(r) with r = ‖x − y‖²/h, so that

    ∇_x k(x, y) = −(2/h) f'(r) (x − y),

and SVGD's repulsive term for particle i, (1/M) Σ_j ∇_{x_j} k(x_j, x_i), is
(1/M)(2/h) Σ_j R_ij (x_i − x_j) with R_ij = −f'(r_ij) ≥ 0. A kernel gives both matrices,
``K`` and ``R`` (:meth:`Kernel.matrices`), and its bandwidth h (:meth:`Kernel.bandwidth`);
:mod:`steinrl.core.stein` does the rest.

Where a kernel looks at the particles is its *space*:

- weight space (:class:`Kernel`, the papers'): x_i = θ_i, the flattened parameters;
- function space (:class:`FunctionSpaceKernel`, wrapping any of the kernels here): x_i =
  f(θ_i; X), the particle's outputs on B inputs shared by every particle (a policy's action
  distribution on B states), the repulsion pulled back to the weights through the Jacobian.
  The caller hands the particle step an *embedding* (a call returning those outputs,
  differentiable in the parameters); the kernel says how many inputs it wants (``states``).

A kernel is named in a config by its name alone (``update.kernel: imq``) or by a mapping of
its name and parameters (``update.kernel: {name: imq, beta: -0.3, bandwidth: s2vgd}``;
``--set 'update.kernel={name: imq, beta: -0.3}'``); a mapping without ``name`` changes the
parameters of the kernel set so far (``--set 'update.kernel={space: functions}'``).
:func:`make_kernel` builds one from either. Adding a kernel is one class here, registered with
``@KERNELS.register(name)``, declaring its parameters as :class:`~steinrl.registry.Option` s
(the docs' kernel table is generated from them, ``docs/config.md``); it works in both spaces.

Bandwidth rules (the ``bandwidth`` parameter of every kernel):

- ``"svpg"`` (default; the SVPG code's rule): h = median of the full M×M squared-
  distance matrix, diagonal zeros included, / (2·log(M+1)).
- ``"s2vgd"`` (S²VGD paper): h = med²/log M, med = median pairwise distance over i < j.
- ``"svpg_adaptive"`` (the SVPG authors' ``adaptive_kernel`` option): the ``svpg`` h divided by
  the scale a ∈ {0.1, 0.2, …, 2.0} (20 values) whose kernel rows sum closest to 2 in mean
  square, mean_i (Σ_j k(x_i, x_j) − 2)², so that each particle sees itself and about one
  neighbour.
- a positive number: fixed h.

Medians are numpy's (mean of the two middle values for an even count; for odd M the
SVPG code instead averages the entries at n/2 − 1 and n/2 of the M² sorted ones, which
differs slightly — it only ran with M = 16). Guard: with M = 1, or when the rule gives
h ≤ 0 or non-finite (e.g. all particles equal), h = 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

import torch
from torch import Tensor

from steinrl.errors import ConfigError
from steinrl.registry import Option, Registry, named_spec

__all__ = ["Kernel", "RBFKernel", "IMQKernel", "FunctionSpaceKernel", "KERNELS", "BANDWIDTH_RULES", "SPACES",
           "DRIVING_TERMS", "bandwidth", "check_bandwidth_rule", "pairwise_sq_dists", "sq_dists_from_gram",
           "make_kernel", "kernel_spec"]

BANDWIDTH_RULES = ("svpg", "s2vgd", "svpg_adaptive")
#: Where a kernel looks at the particles (its ``space`` parameter).
SPACES = ("weights", "functions")
#: The function-space kernel's driving terms (its ``driving`` parameter).
DRIVING_TERMS = ("weights", "functions")
#: The SVPG code's scan of bandwidth scales (``svpg_adaptive``): numpy's linspace(0.1, 2.0, 20).
ADAPTIVE_SCALES = tuple(0.1 + i * (2.0 - 0.1) / 19 for i in range(20))


def check_bandwidth_rule(rule: str | float) -> None:
    """Raise ``ValueError`` unless ``rule`` is a name of :data:`BANDWIDTH_RULES` or a positive finite number."""
    if isinstance(rule, str):
        if rule not in BANDWIDTH_RULES:
            raise ValueError(f"unknown bandwidth rule {rule!r}; choices: {list(BANDWIDTH_RULES)} or a positive number")
    elif isinstance(rule, bool) or not isinstance(rule, (int, float)) or not (math.isfinite(rule) and rule > 0):
        raise ValueError(f"a fixed bandwidth must be a positive finite number, got {rule!r}")


def _bandwidth_check(value: str | float) -> str | None:
    try:
        check_bandwidth_rule(value)
    except ValueError:
        return f"must be {' or '.join(map(repr, BANDWIDTH_RULES))} or a positive number"
    return None


#: The parameter every kernel takes.
BANDWIDTH = Option("bandwidth", (str, float), "svpg", "h: svpg (median d² / 2 log(M+1)), s2vgd (med² / log M), "
                   "svpg_adaptive (svpg's h rescaled so that each kernel row sums to about 2) or a fixed positive "
                   "number", check=_bandwidth_check)

#: The parameters every kernel takes beyond its own: where it looks (``space``), and in function
#: space how many shared inputs (``states``) and which driving term (``driving``).
SPACE = Option("space", str, "weights", "weights: the kernel on the flattened parameters (the papers'); functions: "
               "on the particles' outputs on `states` shared inputs (a policy's action means and in-kernel log-std, "
               "a categorical's log-probabilities, a regression net's predictions), the repulsion pulled back to "
               "the weights (docs/algorithms.md#the-kernel-in-function-space)", choices=SPACES)
STATES = Option("states", int, 64, "space functions: B, the shared inputs, drawn each update from the batch (RL: "
                "the states of every particle of a seed, at most particles x rollout.batch_size; bandits and "
                "regression: the minibatch)", check=lambda v: None if v >= 2 else "must be >= 2")
DRIVING = Option("driving", str, "weights", "space functions: the driving term, weights (each particle's gradient, "
                 "kernel-averaged in weight space) or functions (pushed forward to the outputs, averaged there, "
                 "pulled back)", choices=DRIVING_TERMS)
#: the function-space parameters, which a weight-space kernel's spec leaves out
FUNCTION_SPACE_OPTIONS = (STATES, DRIVING)


class Kernel:
    """A translation-invariant kernel k(x, y) = f(‖x − y‖²/h) with its bandwidth rule.

    Subclasses declare ``options`` (``BANDWIDTH`` first, then their own hyperparameters, each
    an ``__init__`` keyword) and implement :meth:`matrices`.
    """

    name: ClassVar[str] = ""
    #: one line for the docs' kernel table
    doc: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = (BANDWIDTH,)
    #: f' = −f (the RBF kernel): R = K, and the SVGD direction fuses into one matmul
    exponential: ClassVar[bool] = False
    #: where the kernel looks at the particles (:data:`SPACES`); a weight-space kernel here
    space: ClassVar[str] = "weights"

    def __init__(self, bandwidth: str | float = "svpg") -> None:
        check_bandwidth_rule(bandwidth)
        self.rule = bandwidth

    def bandwidth(self, sq_dists: Tensor) -> Tensor:
        """h from squared distances ``(M, M)`` or ``(G, M, M)`` (one h per group), see :func:`bandwidth`;
        ``svpg_adaptive`` scans the scales with this kernel's own K (no host sync)."""
        if self.rule != "svpg_adaptive":
            return bandwidth(sq_dists, self.rule)
        h = bandwidth(sq_dists, "svpg")  # (G)
        scales = torch.tensor(ADAPTIVE_SCALES, dtype=sq_dists.dtype, device=sq_dists.device)  # S
        candidates = h[..., None] / scales  # (G) S
        K, _ = self.matrices(sq_dists[..., None, :, :], candidates[..., None, None])  # (G) S M M
        miss = (K.sum(-1) - 2.0).square().mean(-1)  # (G) S: mean_i (row sum - 2)²
        return candidates.gather(-1, miss.argmin(-1, keepdim=True)).squeeze(-1)  # the first minimum, as the code

    def matrices(self, sq_dists: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        """``(K, R)`` from squared distances ``(..., M, M)`` and bandwidths broadcastable to them:
        K_ij = f(r_ij), R_ij = −f'(r_ij), r = d²/h (the same tensor twice where :attr:`exponential`)."""
        raise NotImplementedError

    def __call__(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        """The kernel matrix of particles ``theta (M, D)`` and its bandwidth: ``(K (M, M), h)``."""
        sq = pairwise_sq_dists(theta)
        h = self.bandwidth(sq)
        return self.matrices(sq, h)[0], h

    def spec(self) -> dict[str, Any]:
        """The kernel as a config value: its name and every parameter (``make_kernel(k.spec())`` rebuilds it)."""
        params = {o.name: getattr(self, "rule" if o.name == "bandwidth" else o.name) for o in self.options}
        return {"name": self.name, **params, "space": self.space}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.spec().items() if k != "name")
        return f"{type(self).__name__}({params})"


#: Stein kernels by name (the choices of ``update.kernel``).
KERNELS: Registry[type[Kernel]] = Registry("kernel")


@KERNELS.register("rbf")
class RBFKernel(Kernel):
    """k = exp(−‖x − y‖²/h) (SVGD's and the papers' kernel); R = K."""

    name = "rbf"
    doc = "exp(−d²/h): SVGD's, SVPG's and S²VGD's kernel."
    exponential = True

    def matrices(self, sq_dists: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        K = torch.exp(-sq_dists / h)
        return K, K


def _beta_check(value: float) -> str | None:
    return None if -1.0 < value < 0.0 else "must be in (-1, 0)"


@KERNELS.register("imq")
class IMQKernel(Kernel):
    """Inverse multiquadric k = (1 + ‖x − y‖²/h)^β; R = −β K / (1 + r).

    It decays polynomially instead of exponentially: far-apart particles keep some attraction
    to each other's gradients and some repulsion (Gorham & Mackey 2017 use it for Stein
    discrepancies that detect non-convergence). Pyro's ``IMQSteinKernel`` adds a constant α,
    ``(α + r)^β`` with α = 0.5 by default; here α = 1, so k(x, x) = 1 as for the RBF kernel.

    :param beta: the exponent β ∈ (−1, 0) (default −1/2).
    """

    name = "imq"
    doc = "(1 + d²/h)^β: polynomial tails, as Pyro's IMQSteinKernel (its α = 1 here)."
    options = (BANDWIDTH, Option("beta", float, -0.5, "Exponent β in (-1, 0).", check=_beta_check))

    def __init__(self, beta: float = -0.5, bandwidth: str | float = "svpg") -> None:
        super().__init__(bandwidth)
        problem = _beta_check(beta)
        if problem:
            raise ValueError(f"beta {problem}, got {beta}")
        self.beta = float(beta)

    def matrices(self, sq_dists: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        base = 1.0 + sq_dists / h
        K = base.pow(self.beta)
        return K, (-self.beta) * K / base


class FunctionSpaceKernel(Kernel):
    """A kernel on the particles' outputs on ``states`` shared inputs instead of their weights.

    Over-parameterised networks make weight-space distances a poor measure of how particles
    differ (Wang et al., ICLR 2019, "Function space particle optimization"; D'Angelo & Fortuin,
    NeurIPS 2021, "Repulsive deep ensembles are Bayesian"). This kernel is ``base`` (its f and
    bandwidth rule) applied to the embeddings x_i = f(θ_i; X) ``(M, F)`` that the caller hands
    the particle step; :func:`steinrl.core.stein.function_space_direction` pulls the repulsion
    back to the weights.

    :param base: the kernel applied in function space (any registered kernel).
    :param states: B, how many shared inputs the caller should draw (≥ 2).
    :param driving: the driving term, ``"weights"`` (each particle's own weight gradient,
        kernel-averaged) or ``"functions"`` (pushed forward to the outputs, averaged, pulled back).
    """

    space = "functions"

    def __init__(self, base: Kernel | None = None, states: int = 64, driving: str = "weights") -> None:
        base = RBFKernel() if base is None else base
        if base.space != "weights":
            raise ValueError(f"a function-space kernel wraps a weight-space kernel, got {base!r}")
        if isinstance(states, bool) or not isinstance(states, int) or states < 2:
            raise ValueError(f"states must be an integer >= 2, got {states!r}")
        if driving not in DRIVING_TERMS:
            raise ValueError(f"unknown driving term {driving!r}; choices: {', '.join(DRIVING_TERMS)}")
        self.base, self.states, self.driving = base, int(states), driving
        self.rule = base.rule

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.base.name

    @property
    def exponential(self) -> bool:  # type: ignore[override]
        return self.base.exponential

    def bandwidth(self, sq_dists: Tensor) -> Tensor:
        return self.base.bandwidth(sq_dists)

    def matrices(self, sq_dists: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        return self.base.matrices(sq_dists, h)

    def spec(self) -> dict[str, Any]:
        return {**self.base.spec(), "space": self.space, "states": self.states, "driving": self.driving}

    def __repr__(self) -> str:
        return f"FunctionSpaceKernel(base={self.base!r}, states={self.states}, driving={self.driving!r})"


def kernel_spec(value: str | Mapping[str, Any], current: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A kernel config value normalised to ``{name, its parameters, space}`` (and, in function
    space, ``states`` and ``driving``), checked.

    :param value: a kernel name, or a mapping of ``name`` and parameters; a mapping without
        ``name`` sets parameters of ``current`` (the kernel configured so far; default rbf).
    :raises ConfigError: naming the registered kernels, or the parameters a kernel takes and
        what values they take.
    """
    spec = named_spec(value, current, KERNELS, "kernel", extra=(SPACE, *FUNCTION_SPACE_OPTIONS),
                      keep=("space", "states", "driving"))
    if spec["space"] == "weights":
        given = sorted(o.name for o in FUNCTION_SPACE_OPTIONS if isinstance(value, Mapping) and o.name in value)
        if given:
            raise ConfigError(f"kernel {spec['name']!r}: {', '.join(given)} only apply with space: functions")
        for option in FUNCTION_SPACE_OPTIONS:
            del spec[option.name]
    return spec


def make_kernel(spec: str | Mapping[str, Any] | Kernel = "rbf") -> Kernel:
    """A kernel from its name, a mapping of name and parameters (:func:`kernel_spec`), or itself;
    ``space: functions`` wraps it in a :class:`FunctionSpaceKernel`."""
    if isinstance(spec, Kernel):
        return spec
    spec = kernel_spec(spec)
    space, states, driving = spec.pop("space"), spec.pop("states", None), spec.pop("driving", None)
    kernel = KERNELS.get(spec.pop("name"))(**spec)
    return FunctionSpaceKernel(kernel, states, driving) if space == "functions" else kernel


# --- distances and bandwidths ----------------------------------------------------------------
def sq_dists_from_gram(gram: Tensor) -> Tensor:
    """‖c_i‖² + ‖c_j‖² − 2⟨c_i, c_j⟩ from the Gram matrix ``(..., M, M)`` of (centred) rows,
    clamped at 0, with a zero diagonal."""
    sq = gram.diagonal(dim1=-2, dim2=-1)
    d = (sq.unsqueeze(-1) + sq.unsqueeze(-2) - 2.0 * gram).clamp_min(0.0)
    return d.masked_fill(torch.eye(d.shape[-1], dtype=torch.bool, device=d.device), 0.0)


def pairwise_sq_dists(theta: Tensor) -> Tensor:
    """Squared Euclidean distances ``‖θ_i − θ_j‖²`` between particles.

    :param theta: ``(M, D)``.
    :return: ``(M, M)``, ≥ 0, zero diagonal. Computed with one matmul on rows centred
        at the particle mean (distances are translation-invariant; centring avoids
        cancellation when particles are far from the origin).
    """
    c = theta - theta.mean(dim=0, keepdim=True)  # M D
    return sq_dists_from_gram(c @ c.T)


def _median(x: Tensor) -> Tensor:
    # numpy's median along the last dim: mean of the two middle values for an even count
    s = torch.sort(x, dim=-1).values
    n = s.shape[-1]
    if n % 2 == 1:
        return s[..., n // 2]
    return 0.5 * (s[..., n // 2 - 1] + s[..., n // 2])


def bandwidth(sq_dists: Tensor, rule: str | float = "svpg") -> Tensor:
    """Kernel bandwidth h (r = d²/h) from the squared-distance matrix.

    :param sq_dists: ``(M, M)`` from :func:`pairwise_sq_dists`, or ``(G, M, M)`` for G
        independent groups (one h each).
    :param rule: ``"svpg"`` (default): median of all M² entries (zeros on the diagonal
        included) / (2·log(M+1)); ``"s2vgd"``: med²/log M with med the median of the
        distances over i < j; or a positive number: fixed h.
    :return: h, a scalar tensor (``(G,)`` for groups). With M = 1, or if the rule gives
        h ≤ 0 or a non-finite value, h = 1 (for a median rule; a fixed h is used as given).
    """
    check_bandwidth_rule(rule)
    M = sq_dists.shape[-1]
    batch = sq_dists.shape[:-2]
    if not isinstance(rule, str):
        return torch.full(batch, float(rule), dtype=sq_dists.dtype, device=sq_dists.device)
    one = torch.ones(batch, dtype=sq_dists.dtype, device=sq_dists.device)
    if M == 1:
        return one
    if rule == "svpg":
        h = _median(sq_dists.reshape(*batch, M * M)) / (2.0 * math.log(M + 1))
    else:  # "s2vgd"
        rows, cols = torch.triu_indices(M, M, 1, device=sq_dists.device)
        med = _median(sq_dists[..., rows, cols].sqrt())
        h = med.square() / math.log(M)
    ok = torch.isfinite(h) & (h > 0)
    return torch.where(ok, h, one)  # no host sync
