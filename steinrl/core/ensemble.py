"""An ensemble of M MLP particles evaluated as one batched network.

Particle-major throughout: inputs ``(M, B, in)`` (each particle its own batch) or
``(B, in)`` (one batch shared by all particles), outputs ``(M, B, out)``.

Particles do not change during a rollout, so :meth:`EnsembleMLP.dense` materialises
every layer's effective dense weights once per iteration and :func:`mlp_forward`
evaluates the whole ensemble with one ``torch.baddbmm`` per layer plus an in-place
activation; gradients flow from the dense weights back to the structured parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import torch
from torch import Tensor, nn

from steinrl.core.activations import ACTIVATIONS
from steinrl.core.layers import StructuredLinear, make_layer
from steinrl.core.priors import Prior

__all__ = ["ACTIVATIONS", "INITS", "EnsembleMLP", "forward_prepared", "mlp_forward", "orthogonal_", "prepare_layers"]

Dense = list[tuple[Tensor, Tensor]]
#: a torch tensor or a numpy array (:func:`mlp_forward` takes either)
Array = TypeVar("Array", Tensor, np.ndarray)

#: Weight inits of :class:`EnsembleMLP`.
INITS = ("glorot", "lecun", "orthogonal", "torch")


@torch.no_grad()
def orthogonal_(weight: Tensor, gain: float = 1.0, generator: torch.Generator | None = None) -> Tensor:
    """Fill ``weight (M, in, out)`` in place with M independent random (semi-)orthogonal
    matrices times ``gain``: orthonormal columns if in >= out, else orthonormal rows.

    :func:`torch.nn.init.orthogonal_` per particle (QR of a standard Gaussian matrix, the
    signs fixed by diag(R), so the draw is Haar-distributed), batched over particles.
    """
    M, n_in, n_out = weight.shape
    a = torch.randn(M, max(n_in, n_out), min(n_in, n_out), generator=generator, device=weight.device,
                    dtype=weight.dtype)
    q, r = torch.linalg.qr(a)
    q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    return weight.copy_((q if n_in >= n_out else q.mT) * gain)


def _check_activation(activation: str) -> None:
    ACTIVATIONS.get(activation)  # ConfigError (a ValueError) naming the registered ones


# On CPU, tanh of a large hidden block is computed as 2·sigmoid(2z) − 1, the affine parts
# folded into the matmuls (the 2 into this layer's, the 2s − 1 into the next layer's weights
# and bias): torch's float32 tanh is several times slower than its sigmoid on CPU, with or
# without autograd. Agrees with torch.tanh to ~1e-7 absolute in float32. Small blocks keep
# plain tanh.
_TANH_VIA_SIGMOID_MIN = 8192


def mlp_forward(dense: Sequence[tuple[Array, Array]], x: Array, activation: str = "tanh") -> Array:
    """Evaluate M MLPs given their dense weights (torch tensors, or numpy arrays: the same
    code runs on numpy views of the weights where a rollout step's tiny matmuls cost a
    fraction of torch's per-call overhead).

    :param dense: per layer ``(W (M, in, out), b (M, out))``.
    :param x: ``(M, B, in)`` per-particle inputs, ``(B, in)`` one batch shared by all
        particles (broadcast with ``expand``, no copy), or ``(M, *batch, in)`` with
        extra batch dims (flattened, then restored).
    :param activation: applied after every layer but the last.
    :return: ``(M, B, out)`` (or ``(M, *batch, out)``), contiguous.

    One ``torch.baddbmm`` per layer plus an in-place activation. Internally the
    activations run feature-major, ``(M, features, B)`` (``Wᵀ h`` with ``x`` and ``W``
    passed as transposed views, no copies): CPU batched matmuls are several times
    faster in that orientation for the narrow layers of a policy.
    """
    _check_activation(activation)
    if isinstance(x, np.ndarray):
        return _numpy_forward(dense, x, ACTIVATIONS.get(activation).numpy)
    h, batch_shape = _feature_major(x, dense[0][0].shape[0])
    return _output(run_layers(prepare_layers(dense, activation, h.shape[2], x.device.type), h, activation),
                   batch_shape)


#: A network as :func:`mlp_forward` computes with it, per layer ``(Wᵀ (M, out, in), bias
#: column (M, out, 1), what follows)``: ``None`` (the last layer), ``"act"`` (the activation,
#: in place) or ``"sigmoid"`` (``sigmoid(2z)``; the tanh's ``2s − 1`` folded into the next layer).
Layers = list[tuple[Tensor, Tensor, "str | None"]]


def prepare_layers(dense: Dense, activation: str, batch: int, device_type: str) -> Layers:
    """The weights of ``dense`` as :func:`mlp_forward` uses them on ``batch`` columns per
    particle on a device of ``device_type``: a rollout prepares them once per batch (its
    steps then run :func:`forward_prepared`), a training forward on every call."""
    _check_activation(activation)
    has_act = ACTIVATIONS.get(activation).inplace is not None
    sigmoid_tanh = activation == "tanh" and device_type == "cpu"
    last = len(dense) - 1
    layers: Layers = []
    halved = False  # the previous layer's output is s = sigmoid(2z), i.e. tanh(z) = 2s − 1
    for i, (w, b) in enumerate(dense):
        # Scalars go into the (small) weights, not the (large) activations: a baddbmm alpha
        # or beta would cost an extra pass over the activations in the backward.
        wt = w.mT  # M out in
        if halved:  # W^T (2s − 1) + b = (2W)^T s + (b − W^T 1)
            b = b - w.sum(1)
            wt = wt * 2.0
        hidden = i != last and has_act
        halved = hidden and sigmoid_tanh and w.shape[0] * w.shape[2] * batch >= _TANH_VIA_SIGMOID_MIN
        if halved:
            layers.append((2.0 * wt, (2.0 * b).unsqueeze(2), "sigmoid"))
        else:
            layers.append((wt, b.unsqueeze(2), "act" if hidden else None))
    return layers


def run_layers(layers: Layers, h: Tensor, activation: str) -> Tensor:
    """``h`` ``(M, in, B)`` (feature-major) through :func:`prepare_layers`' ``layers``: ``(M, out, B)``."""
    act = ACTIVATIONS.get(activation).inplace
    for wt, bias, post in layers:
        h = torch.baddbmm(bias, wt, h)  # M out B
        if post == "sigmoid":
            h = h.sigmoid_()  # sigmoid(2z)
        elif post == "act":
            h = act(h)
    return h


def forward_prepared(layers: Layers, x: Tensor, activation: str) -> Tensor:
    """:func:`mlp_forward` of ``x`` ``(M, B, in)`` with weights prepared by :func:`prepare_layers`
    for this ``B``: ``(M, B, out)``."""
    h, batch_shape = _feature_major(x, layers[0][0].shape[0])
    return _output(run_layers(layers, h, activation), batch_shape)


def _feature_major(x: Tensor, M: int) -> tuple[Tensor, torch.Size | None]:
    """``x`` as ``(M, in, B)`` (a transposed view, or a stride-0 expand of a shared batch) and
    the extra batch dims to restore (None: none)."""
    if x.dim() == 2:  # B in, shared by all particles
        return x.mT.expand(M, x.shape[1], x.shape[0]), None  # M in B (stride 0 over M)
    if x.dim() >= 3:
        if x.shape[0] != M:
            raise ValueError(f"leading dim of x must be M={M} (or pass a shared (B, in) batch), got {tuple(x.shape)}")
        batch_shape = x.shape[1:-1] if x.dim() > 3 else None
        return (x.reshape(M, -1, x.shape[-1]) if batch_shape is not None else x).mT, batch_shape  # M in B
    raise ValueError(f"x must be (B, in), (M, B, in) or (M, *batch, in), got {tuple(x.shape)}")


def _output(h: Tensor, batch_shape: torch.Size | None) -> Tensor:
    """``(M, out, B)`` back to ``(M, B, out)`` contiguous (``(M, *batch, out)``)."""
    out = h.mT.contiguous()  # M B out (no copy when out == 1)
    return out if batch_shape is None else out.reshape(out.shape[0], *batch_shape, out.shape[-1])


def _numpy_forward(dense: Sequence[tuple[np.ndarray, np.ndarray]], x: np.ndarray,
                   act: Callable[[np.ndarray], np.ndarray] | None) -> np.ndarray:
    """:func:`mlp_forward` on numpy arrays, ``x`` ``(M, B, in)``: per layer ``h W + b``, then
    the activation in place (batch-major: numpy's small matmuls are fastest that way)."""
    h = x
    last = len(dense) - 1
    for i, (w, b) in enumerate(dense):
        h = h @ w  # M B out
        h += b[:, None, :]
        if i != last and act is not None:
            h = act(h)
    return h


class EnsembleMLP(nn.Module):
    """M particle MLPs ``in_dim -> hidden... -> out_dim`` with structured layers.

    :param num_particles: M.
    :param in_dim: input size.
    :param hidden: hidden layer sizes, e.g. ``(25, 10)``.
    :param out_dim: output size.
    :param activation: ``"tanh"``, ``"relu"``, ``"elu"`` or ``"identity"``.
    :param layer: a registered layer family: ``"gaussian"``, ``"householder"`` or
        ``"kronecker"`` (see :mod:`steinrl.core.layers`).
    :param layer_options: the family's options for every layer, e.g. ``{"K": 1}``.
    :param output_gain: init gain of the output layer (e.g. 0.01 for a policy head);
        hidden layers use 1.0 for tanh/identity and √2 for relu/elu (``orthogonal``: √2
        for every activation, as SB3 and CleanRL).
    :param init: ``"glorot"`` (default; Var W = gain²·2/(in+out), the SVPG code's
        Glorot init), ``"lecun"`` (Var W = gain²/in) or ``"orthogonal"`` (each particle's
        W, or the core C of a factored layer, a random (semi-)orthogonal matrix times the
        gain, bias 0: PPO's usual init, see :func:`orthogonal_`) or ``"torch"`` (torch's
        ``nn.Linear`` default, which SB3 keeps with ``ortho_init=False``: W and b uniform on
        ±1/√in, every layer, ``output_gain`` unused).
    :param generator: draws the initial parameters (layer by layer, in order); None uses
        torch's global generator.
    :param device: where the parameters live.
    :param dtype: their dtype (default: torch's default float).
    """

    def __init__(
        self,
        num_particles: int,
        in_dim: int,
        hidden: Sequence[int],
        out_dim: int,
        *,
        activation: str = "tanh",
        layer: str = "gaussian",
        layer_options: dict | None = None,
        output_gain: float = 1.0,
        init: str = "glorot",
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        _check_activation(activation)
        if init not in INITS:
            raise ValueError(f"unknown init {init!r}; choices: {', '.join(INITS)}")
        self.num_particles = int(num_particles)
        self.in_dim = int(in_dim)
        self.hidden = tuple(int(h) for h in hidden)
        self.out_dim = int(out_dim)
        self.activation = activation
        self.layer_type = layer
        sizes = (self.in_dim, *self.hidden, self.out_dim)
        options = dict(layer_options or {})
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            hidden_gain = math.sqrt(2.0) if init == "orthogonal" else ACTIVATIONS.get(activation).gain
            gain = output_gain if i == len(sizes) - 2 else hidden_gain
            if init == "glorot":  # Var W = gain² · 2 / (in + out) (Glorot & Bengio), as the SVPG code
                gain *= math.sqrt(2.0 * n_in / (n_in + n_out))
            layers.append(make_layer(layer, num_particles, n_in, n_out, bias=True, gain=gain, generator=generator,
                                     device=device, dtype=dtype, **options))
            core = layers[-1].W if hasattr(layers[-1], "W") else layers[-1].C  # or the C of W = L Λ1 C Λ2 Rᵀ
            if init == "orthogonal":
                orthogonal_(core, gain, generator)
            elif init == "torch":  # torch.nn.Linear's reset_parameters: W and b ~ U(±1/√in), no gain
                with torch.no_grad():
                    for t in (core, layers[-1].bias):
                        t.uniform_(-1.0 / math.sqrt(n_in), 1.0 / math.sqrt(n_in), generator=generator)
        self.layers: nn.ModuleList = nn.ModuleList(layers)

    def dense(self) -> Dense:
        """Materialised ``(W (M, in, out), b (M, out))`` per layer (differentiable)."""
        out = []
        for layer in self.layers:
            assert isinstance(layer, StructuredLinear) and layer.bias is not None
            out.append((layer.weight(), layer.bias))
        return out

    def forward(self, x: Tensor, dense: Dense | None = None) -> Tensor:
        """``(M, B, in)`` or shared ``(B, in)`` (or ``(M, *batch, in)``) -> ``(M, B, out)``.

        :param dense: weights from :meth:`dense` to reuse (e.g. for every step of a
            rollout); computed here if None.
        """
        if dense is None:
            dense = self.dense()
        return mlp_forward(dense, x, self.activation)

    def prior_groups(self) -> dict[str, Tensor]:
        """Every layer's prior groups, named ``"<layer index>.<group>"`` -> ``(M, n)``."""
        return {f"{i}.{name}": g for i, layer in enumerate(self.layers) for name, g in layer.param_groups().items()}

    def log_prior(self, prior: Prior) -> Tensor:
        """log p(θ_i) of every particle's weights under ``prior``, ``(M,)``."""
        return prior.log_prob(self.prior_groups())

    @torch.no_grad()
    def particle_module(self, i: int) -> nn.Sequential:
        """Particle i as a standard ``nn.Sequential`` of ``nn.Linear`` + activations.

        Holds detached copies of particle i's effective dense weights (same device
        and dtype as the ensemble).
        """
        if not -self.num_particles <= i < self.num_particles:
            raise IndexError(f"particle index {i} out of range for M={self.num_particles}")
        modules: list[nn.Module] = []
        dense = self.dense()
        for k, (w, b) in enumerate(dense):
            lin = nn.Linear(w.shape[1], w.shape[2], device=w.device, dtype=w.dtype)
            lin.weight.copy_(w[i].T)
            lin.bias.copy_(b[i])
            modules.append(lin)
            if k < len(dense) - 1 and self.activation != "identity":
                modules.append(ACTIVATIONS.get(self.activation).module())
        return nn.Sequential(*modules)

    def extra_repr(self) -> str:
        return (
            f"num_particles={self.num_particles}, in_dim={self.in_dim}, hidden={self.hidden}, "
            f"out_dim={self.out_dim}, activation={self.activation!r}, layer={self.layer_type!r}"
        )
