"""Stein kernels: objects that own their bandwidth rule and hyperparameters, registered by name.

Every kernel is translation-invariant, k(x, y) = f(r) with r = ‖x − y‖²/h, so that

    ∇_x k(x, y) = −(2/h) f'(r) (x − y),

and SVGD's repulsive term for particle i, (1/M) Σ_j ∇_{θ_j} k(θ_j, θ_i), is
(1/M)(2/h) Σ_j R_ij (θ_i − θ_j) with R_ij = −f'(r_ij) ≥ 0. A kernel gives both matrices,
``K`` and ``R`` (:meth:`Kernel.matrices`), and its bandwidth h (:meth:`Kernel.bandwidth`);
:func:`steinrl.core.svgd.svgd_direction` does the rest.

A kernel is named in a config by its name alone (``update.kernel: imq``) or by a mapping of
its name and parameters (``update.kernel: {name: imq, beta: -0.3, bandwidth: s2vgd}``;
``--set 'update.kernel={name: imq, beta: -0.3}'``); a mapping without ``name`` changes the
parameters of the kernel set so far. :func:`make_kernel` builds one from either.
Adding a kernel is one class here, registered with ``@KERNELS.register(name)``, declaring
its parameters as :class:`~steinrl.registry.Option` s (the docs' kernel table is generated
from them, ``docs/config.md``).

Bandwidth rules (the ``bandwidth`` parameter of every kernel):

- ``"svpg"`` (default; the SVPG code's rule): h = median of the full M×M squared-
  distance matrix, diagonal zeros included, / (2·log(M+1)).
- ``"s2vgd"`` (S²VGD paper): h = med²/log M, med = median pairwise distance over i < j.
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
from steinrl.registry import Option, Registry, coerce

__all__ = ["Kernel", "RBFKernel", "IMQKernel", "KERNELS", "BANDWIDTH_RULES", "bandwidth", "check_bandwidth_rule",
           "pairwise_sq_dists", "sq_dists_from_gram", "make_kernel", "kernel_spec"]

BANDWIDTH_RULES = ("svpg", "s2vgd")


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
BANDWIDTH = Option("bandwidth", (str, float), "svpg", "h: svpg (median d² / 2 log(M+1)), s2vgd (med² / log M) or a "
                   "fixed positive number.", check=_bandwidth_check)


class Kernel:
    """A translation-invariant kernel k(x, y) = f(‖x − y‖²/h) with its bandwidth rule.

    Subclasses declare ``options`` (``BANDWIDTH`` first, then their own hyperparameters, each
    an ``__init__`` keyword) and implement :meth:`matrices`.
    """

    name: ClassVar[str] = ""
    #: one line for the docs' kernel table
    doc: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = (BANDWIDTH,)

    def __init__(self, bandwidth: str | float = "svpg") -> None:
        check_bandwidth_rule(bandwidth)
        self.rule = bandwidth

    def bandwidth(self, sq_dists: Tensor) -> Tensor:
        """h from squared distances ``(M, M)`` or ``(G, M, M)`` (one h per group), see :func:`bandwidth`."""
        return bandwidth(sq_dists, self.rule)

    def matrices(self, sq_dists: Tensor, h: Tensor) -> tuple[Tensor, Tensor]:
        """``(K, R)`` from squared distances ``(..., M, M)`` and bandwidths broadcastable to them:
        K_ij = f(r_ij), R_ij = −f'(r_ij), r = d²/h. ``R is K`` when f' = −f (RBF)."""
        raise NotImplementedError

    def __call__(self, theta: Tensor) -> tuple[Tensor, Tensor]:
        """The kernel matrix of particles ``theta (M, D)`` and its bandwidth: ``(K (M, M), h)``."""
        sq = pairwise_sq_dists(theta)
        h = self.bandwidth(sq)
        return self.matrices(sq, h)[0], h

    def spec(self) -> dict[str, Any]:
        """The kernel as a config value: its name and every parameter (``make_kernel(k.spec())`` rebuilds it)."""
        params = {o.name: getattr(self, "rule" if o.name == "bandwidth" else o.name) for o in self.options}
        return {"name": self.name, **params}

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


def kernel_spec(value: str | Mapping[str, Any], current: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A kernel config value normalised to ``{name, every parameter}``, checked.

    :param value: a kernel name, or a mapping of ``name`` and parameters; a mapping without
        ``name`` sets parameters of ``current`` (the kernel configured so far; default rbf).
    :raises ConfigError: naming the registered kernels, or the parameters a kernel takes and
        what values they take.
    """
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, Mapping):
        raise ConfigError(f"a kernel is a name ({', '.join(KERNELS.names())}) or a mapping {{name: ..., <parameter>: "
                          f"...}}, got {value!r}")
    base = dict(current) if current is not None and "name" not in value else {"name": "rbf"}
    name = value.get("name", base["name"])
    cls = KERNELS.get(name)
    if name != base["name"]:
        base = {"name": name}
    declared = {o.name: o for o in cls.options}
    unknown = sorted(set(value) - set(declared) - {"name"})
    if unknown:
        raise ConfigError(f"kernel {name!r} has no parameter {', '.join(map(repr, unknown))}; its parameters: "
                          f"{', '.join(declared)}")
    spec = {"name": name}
    for key, option in declared.items():
        raw = value.get(key, base.get(key, option.default))
        try:
            spec[key] = coerce(option, raw, key, "")
        except ConfigError as exc:
            raise ConfigError(f"kernel {name!r}: {str(exc).replace('config key', 'parameter', 1)}") from None
    return spec


def make_kernel(spec: str | Mapping[str, Any] | Kernel = "rbf") -> Kernel:
    """A kernel from its name, a mapping of name and parameters (:func:`kernel_spec`), or itself."""
    if isinstance(spec, Kernel):
        return spec
    spec = kernel_spec(spec)
    return KERNELS.get(spec.pop("name"))(**spec)


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
