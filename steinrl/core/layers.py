"""Particle-batched linear layers with structured (matrix-variate Gaussian) weights.

Every layer holds the parameters of all M particles, particle-major (leading dim M),
and computes ``y = x @ W + b`` with W of shape ``(in, out)`` per particle:

- :class:`DenseLinear` (``"gaussian"``, plain SVGD): W is itself the parameter.
- :class:`HouseholderLinear` (``"householder"``, S²VGD paper eq. 10–13):
  W = P Λ1 C Λ2 Qᵀ, P = H_K…H_1 and Q likewise from K Householder vectors each,
  H(v) = I − 2vvᵀ/‖v‖². With C ~ N(0, I), vec(W) ~ N(0, V ⊗ U) with
  U = PΛ1²Pᵀ, V = QΛ2²Qᵀ (Lemma 1, Proposition 3). K = 0 gives P = Q = I.
- :class:`KroneckerLinear` (``"kronecker"``, K-Linear of the Kronecker-flow paper,
  section 3.1): W = A Λ1 C Λ2 Bᵀ with A, B unit-lower-triangular, so that
  vec(W) ~ N(0, (BΛ2²Bᵀ) ⊗ (AΛ1²Aᵀ)) when C ~ N(0, I).

:meth:`StructuredLinear.weight` materialises the dense W of all particles in one
batched computation (differentiable w.r.t. the structured parameters); the rollout
uses these dense weights with plain batched matmuls. The parameter groups scored by
the prior (:meth:`StructuredLinear.param_groups`) follow eq. 14 of the S²VGD paper.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor, nn

from steinrl.errors import ConfigError
from steinrl.registry import Option, Registry, non_negative, options_of, setting, settings_options

if TYPE_CHECKING:
    from steinrl.core.priors import Prior

__all__ = [
    "LayerSettings",
    "FactoredSettings",
    "HouseholderSettings",
    "KroneckerSettings",
    "StructuredLinear",
    "DenseLinear",
    "HouseholderLinear",
    "KroneckerLinear",
    "FactoredLinear",
    "LAYERS",
    "make_layer",
]


def _factory(kwargs: dict) -> dict:
    """The ``generator`` / ``device`` / ``dtype`` of a layer's keyword arguments, for its draws."""
    return {k: kwargs.get(k) for k in ("generator", "device", "dtype")}


def _randn(
    *shape: int,
    std: float,
    generator: torch.Generator | None,
    device: torch.device | str | None,
    dtype: torch.dtype | None,
) -> Tensor:
    return torch.randn(*shape, generator=generator, device=device, dtype=dtype) * std


@dataclass(frozen=True)
class LayerSettings:
    """The ``layer`` config section of a family without options of its own (``gaussian``)."""


@dataclass(frozen=True)
class FactoredSettings(LayerSettings):
    """What the matrix-variate families share (:class:`FactoredLinear`)."""

    scales: bool = setting(True, "Learn the diagonal scales Λ1, Λ2 (false fixes them at 1: W = L C Rᵀ).")
    scales_centre: float = setting(0.0, "Centre of the prior on Λ1, Λ2: it scores Λ − centre (0: the paper's "
                                   "zero-mean prior; 1: centred on the initial Λ = 1).")


@dataclass(frozen=True)
class _Reflections:
    K: int = setting(1, "Householder reflections per side (0: P = Q = I, the VMG prior).", check=non_negative)


@dataclass(frozen=True)
class HouseholderSettings(FactoredSettings, _Reflections):
    """The ``householder`` family's ``layer`` section (``K`` first)."""


@dataclass(frozen=True)
class _Factors:
    factor_std: float = setting(0.01, "Init std of the strictly-lower entries of the factors A, B.",
                                check=non_negative)


@dataclass(frozen=True)
class KroneckerSettings(FactoredSettings, _Factors):
    """The ``kronecker`` family's ``layer`` section (``factor_std`` first)."""


class StructuredLinear(nn.Module):
    """Base class: M particles of a linear layer ``in_features -> out_features``.

    Subclasses implement :meth:`weight` and :meth:`param_groups`, and declare ``Settings``
    (their ``layer`` config section: a frozen dataclass of :func:`~steinrl.registry.setting` s,
    each an ``__init__`` keyword; ``options`` is derived from it).

    :param num_particles: M.
    :param in_features: ℓ1.
    :param out_features: ℓ2.
    :param bias: whether to learn a bias ``(M, out)`` (initialised to 0).
    :param gain: init gain of the weights (subclasses scale their draws by it).
    :param generator: draws the initial parameters (None: torch's global generator).
    :param device: where the parameters live.
    :param dtype: their dtype.
    """

    Settings: ClassVar[type] = LayerSettings
    options: ClassVar[tuple[Option, ...]] = ()
    num_particles: int
    in_features: int
    out_features: int
    bias: nn.Parameter | None

    def __init__(
        self,
        num_particles: int,
        in_features: int,
        out_features: int,
        *,
        bias: bool = True,
        gain: float = 1.0,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        if num_particles < 1 or in_features < 1 or out_features < 1:
            raise ValueError(
                "num_particles, in_features and out_features must be >= 1, got "
                f"{num_particles}, {in_features}, {out_features}"
            )
        self.num_particles = int(num_particles)
        self.in_features = int(in_features)
        self.out_features = int(out_features)
        self.gain = float(gain)
        if bias:
            self.bias = nn.Parameter(torch.zeros(num_particles, out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)

    def weight(self) -> Tensor:
        """Effective dense weights of all particles, ``(M, in, out)`` (forward is ``x @ W + b``)."""
        raise NotImplementedError

    def param_groups(self) -> dict[str, Tensor]:
        """Prior groups, name -> ``(M, n_group)`` (views/reshapes of the parameters)."""
        raise NotImplementedError

    def _bias_group(self, groups: dict[str, Tensor]) -> dict[str, Tensor]:
        if self.bias is not None:
            groups["bias"] = self.bias
        return groups

    def log_prior(self, prior: Prior) -> Tensor:
        """``prior.log_prob`` of this layer's groups, shape ``(M,)``."""
        return prior.log_prob(self.param_groups())

    def forward(self, x: Tensor) -> Tensor:
        """``(M, B, in) -> (M, B, out)``: one ``torch.baddbmm`` with :meth:`weight`."""
        w = self.weight()  # M in out
        if self.bias is None:
            return torch.bmm(x, w)
        return torch.baddbmm(self.bias.unsqueeze(1), x, w)  # M B out

    def extra_repr(self) -> str:
        return (
            f"num_particles={self.num_particles}, in_features={self.in_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class DenseLinear(StructuredLinear):
    """Plain particle layer (``"gaussian"``): W ``(M, in, out)`` is the parameter.

    Init: W ~ N(0, gain²/in), bias 0. Prior groups: ``{"weight", "bias"}``.
    """

    def __init__(self, num_particles: int, in_features: int, out_features: int, **kwargs) -> None:
        super().__init__(num_particles, in_features, out_features, **kwargs)
        std = self.gain / math.sqrt(in_features)
        self.W = nn.Parameter(_randn(num_particles, in_features, out_features, std=std, **_factory(kwargs)))

    def weight(self) -> Tensor:
        return self.W

    def param_groups(self) -> dict[str, Tensor]:
        return self._bias_group({"weight": self.W.reshape(self.num_particles, -1)})


class FactoredLinear(StructuredLinear):
    """Base of the matrix-variate layers W = L Λ1 C Λ2 Rᵀ (Householder and Kronecker).

    Holds what both share: the core ``C (M, in, out)`` ~ N(0, gain²/in) and the diagonal
    scales ``lambda_in (M, in)``, ``lambda_out (M, out)`` initialised to 1 — parameters,
    or fixed buffers with ``scales=False`` (then Λ1 = Λ2 = I) — and
    :meth:`scaled_core` = Λ1 C Λ2. Subclasses add the left / right factors.

    The prior sees the scales as the groups Λ − ``scales_centre``: with 0 (the S²VGD paper,
    eq. 14) a zero-mean prior pulls Λ towards 0; with 1 the same prior is centred on Λ = 1,
    the initial value (W's scale is then not shrunk by the prior).
    """

    Settings = FactoredSettings
    options = settings_options(Settings)

    def __init__(self, num_particles: int, in_features: int, out_features: int, *, scales: bool = True,
                 scales_centre: float = 0.0, **kwargs) -> None:
        super().__init__(num_particles, in_features, out_features, **kwargs)
        M, l1, l2 = num_particles, in_features, out_features
        self.scales, self.scales_centre = bool(scales), float(scales_centre)
        self.C = nn.Parameter(_randn(M, l1, l2, std=self.gain / math.sqrt(l1), **_factory(kwargs)))
        for name, size in (("lambda_in", l1), ("lambda_out", l2)):
            ones = torch.ones(M, size, device=kwargs.get("device"), dtype=kwargs.get("dtype"))
            if self.scales:
                setattr(self, name, nn.Parameter(ones))
            else:
                self.register_buffer(name, ones)

    def scaled_core(self) -> Tensor:
        """Λ1 C Λ2, ``(M, in, out)``."""
        return self.lambda_in.unsqueeze(2) * self.C * self.lambda_out.unsqueeze(1)

    def _core_groups(self) -> dict[str, Tensor]:
        groups = {"C": self.C.reshape(self.num_particles, -1)}
        if self.scales:
            groups["lambda_in"] = self.lambda_in - self.scales_centre
            groups["lambda_out"] = self.lambda_out - self.scales_centre
        return groups


class HouseholderLinear(FactoredLinear):
    """S²VGD layer (``"householder"``): W = P Λ1 C Λ2 Qᵀ.

    Parameters (per layer, all particle-major): ``C (M, in, out)``,
    ``lambda_in (M, in)``, ``lambda_out (M, out)``, Householder vectors
    ``v_in (M, K, in)`` and ``v_out (M, K, out)``, ``bias (M, out)``.
    P = H(v_in[K-1])…H(v_in[0]), Q = H(v_out[K-1])…H(v_out[0]), with
    H(v) = I − 2vvᵀ/‖v‖². K = 0: P = Q = I and no vector parameters (the VMG prior).
    Parameter count per particle: (K+1)(in+out) + in·out (+ out for the bias).

    The reflections are applied to the rows/columns of Λ1CΛ2 (H(v)X = X − 2v̂(v̂ᵀX)),
    which costs O(K·in·out) per particle instead of building P and Q.

    Init: Λ = 1, v ~ N(0, I), C ~ N(0, gain²/in), bias 0, so W = P C Qᵀ has the same
    distribution as C (a well-scaled dense init).

    ``scales=False`` fixes Λ1 = Λ2 = I (buffers, not parameters: W = P C Qᵀ, as the
    S²VGD code's RL experiments build it); then (K+1) becomes K in the count above.

    Prior groups: ``{"C", "v_in", "v_out", "lambda_in", "lambda_out", "bias"}`` (the
    vector groups only when K > 0, the lambda groups only with ``scales``).
    """

    Settings = HouseholderSettings
    options = settings_options(Settings)

    def __init__(self, num_particles: int, in_features: int, out_features: int, *, K: int = 1, **kwargs) -> None:
        if K < 0 or int(K) != K:
            raise ValueError(f"K must be a non-negative integer, got {K}")
        super().__init__(num_particles, in_features, out_features, **kwargs)
        self.K = int(K)
        rnd = dict(std=1.0, **_factory(kwargs))
        if self.K > 0:
            self.v_in = nn.Parameter(_randn(num_particles, self.K, in_features, **rnd))
            self.v_out = nn.Parameter(_randn(num_particles, self.K, out_features, **rnd))
        else:
            self.register_parameter("v_in", None)
            self.register_parameter("v_out", None)

    @staticmethod
    def _unit(v: Tensor) -> Tensor:
        # v̂ = v/‖v‖; a zero vector (never produced by the init) gives H = I instead of NaN.
        norm = torch.linalg.vector_norm(v, dim=-1, keepdim=True)
        return v / norm.clamp_min(torch.finfo(v.dtype).tiny)

    def weight(self) -> Tensor:
        x = self.scaled_core()  # M in out
        if self.K == 0:
            return x
        u_in = self._unit(self.v_in)  # M K in
        u_out = self._unit(self.v_out)  # M K out
        # P X = H_K (… (H_1 X)): apply H_1 first. H(u)X = X − 2u(uᵀX).
        for k in range(self.K):
            u = u_in[:, k]  # M in
            proj = torch.bmm(u.unsqueeze(1), x)  # M 1 out  (uᵀX)
            x = torch.baddbmm(x, u.unsqueeze(2), proj, alpha=-2.0)  # M in out
        # X Qᵀ = X H_1 H_2 … H_K (each H symmetric): apply H_1 first. X H(u) = X − 2(Xu)uᵀ.
        for k in range(self.K):
            u = u_out[:, k]  # M out
            proj = torch.bmm(x, u.unsqueeze(2))  # M in 1  (Xu)
            x = torch.baddbmm(x, proj, u.unsqueeze(1), alpha=-2.0)  # M in out
        return x  # M in out

    def param_groups(self) -> dict[str, Tensor]:
        groups = self._core_groups()
        if self.K > 0:
            M = self.num_particles
            groups = {"C": groups.pop("C"), "v_in": self.v_in.reshape(M, -1), "v_out": self.v_out.reshape(M, -1),
                      **groups}
        return self._bias_group(groups)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", K={self.K}, scales={self.scales}"


class KroneckerLinear(FactoredLinear):
    """K-Linear layer (``"kronecker"``): W = A Λ1 C Λ2 Bᵀ, A and B unit-lower-triangular.

    Parameters: ``C (M, in, out)``, ``lambda_in (M, in)``, ``lambda_out (M, out)``,
    ``A (M, in, in)``, ``B (M, out, out)``, ``bias (M, out)``. A and B are stored as
    full squares but used as ``tril(A, -1) + I``: the diagonal and upper entries are
    inert (zero gradient; initialised to 0 in every particle, so they add nothing to
    the SVGD kernel distances either) and are not part of the prior.

    Init: Λ = 1, strictly-lower entries of A, B ~ N(0, factor_std²) (default 0.01),
    C ~ N(0, gain²/in), bias 0.

    Prior groups: ``{"C", "A", "B", "lambda_in", "lambda_out", "bias"}`` with "A", "B"
    the strictly-lower entries only, ``(M, in(in-1)/2)`` and ``(M, out(out-1)/2)``.
    """

    Settings = KroneckerSettings
    options = settings_options(Settings)

    def __init__(self, num_particles: int, in_features: int, out_features: int, *, factor_std: float = 0.01,
                 **kwargs) -> None:
        super().__init__(num_particles, in_features, out_features, **kwargs)
        M, l1, l2 = num_particles, in_features, out_features
        rnd = dict(std=factor_std, **_factory(kwargs))
        self.A = nn.Parameter(torch.tril(_randn(M, l1, l1, **rnd), -1))
        self.B = nn.Parameter(torch.tril(_randn(M, l2, l2, **rnd), -1))

    @staticmethod
    def _unit_lower(a: Tensor) -> Tensor:
        # tril(a, -1) + I, batched                              # M n n
        n = a.shape[-1]
        return torch.tril(a, -1) + torch.eye(n, device=a.device, dtype=a.dtype)

    def weight(self) -> Tensor:
        x = self.scaled_core()  # M in out
        a = self._unit_lower(self.A)  # M in in
        b = self._unit_lower(self.B)  # M out out
        return torch.bmm(torch.bmm(a, x), b.transpose(1, 2))  # M in out

    @staticmethod
    def _strictly_lower(a: Tensor) -> Tensor:
        n = a.shape[-1]
        rows, cols = torch.tril_indices(n, n, -1, device=a.device)
        return a[:, rows, cols]  # M n(n-1)/2

    def param_groups(self) -> dict[str, Tensor]:
        groups = self._core_groups()
        groups = {"C": groups.pop("C"), "A": self._strictly_lower(self.A), "B": self._strictly_lower(self.B),
                  **groups}
        return self._bias_group(groups)


#: Layer families by prior name; each class declares its own settings (``Settings``, ``options``).
LAYERS: Registry[type[StructuredLinear]] = Registry("layer")
LAYERS.register("gaussian", DenseLinear)
LAYERS.register("householder", HouseholderLinear)
LAYERS.register("kronecker", KroneckerLinear)


def make_layer(name: str, num_particles: int, in_features: int, out_features: int, **kwargs) -> StructuredLinear:
    """Build a structured layer by name.

    :param kwargs: the constructor arguments every layer takes (``bias``, ``gain``,
        ``generator``, ``device``, ``dtype``; see :class:`StructuredLinear`) and the family's
        declared options (``"householder"``: ``K``, ``scales``; ``"kronecker"``:
        ``factor_std``). An unknown name or option raises
        :class:`~steinrl.errors.ConfigError` naming the registered names / the options.
    """
    cls = LAYERS.get(name)
    accepted = [o.name for o in options_of(cls)]
    unknown = sorted(set(kwargs) - set(accepted) - {"bias", "gain", "generator", "device", "dtype"})
    if unknown:
        raise ConfigError(f"layer {name!r} does not take {unknown}; its options are {accepted}")
    return cls(num_particles, in_features, out_features, **kwargs)
