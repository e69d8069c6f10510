"""Structured (Householder / Kronecker) networks for SB3's own actor-critic algorithms.

:class:`StructuredActorCriticPolicy` is SB3's :class:`ActorCriticPolicy` whose policy and
value MLPs (the ``mlp_extractor``) are built from steinrl's structured layers with a
single particle (:func:`steinrl.core.layers.make_layer` with ``num_particles=1``); SB3's own
action and value heads, distributions, optimizer and algorithms are unchanged::

    from stable_baselines3 import A2C, PPO
    from steinrl.sb3 import StructuredActorCriticPolicy

    model = A2C(StructuredActorCriticPolicy, "CartPole-v1",
                policy_kwargs=dict(prior="householder", K=1))
    model.learn(20_000)

``prior`` picks the layer family: ``"householder"`` (W = P Λ1 C Λ2 Qᵀ with K
reflections per side), ``"kronecker"`` (W = A Λ1 C Λ2 Bᵀ, unit-triangular A, B) or
``"gaussian"`` (a plain dense W). By default the parameters are fitted by the algorithm's
own loss alone (maximum likelihood in the structured parameterisation). With
``log_prior="gaussian"`` or ``"invgamma"`` and ``prior_weight > 0`` the optimizer also
ascends ``prior_weight * log p(theta)`` of the structured layers' prior groups (the
S²VGD paper's eq. 14), i.e. MAP -- SVGD with one particle.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.type_aliases import Schedule
from stable_baselines3.common.utils import get_device
from torch import Tensor, nn

from steinrl.core.layers import LAYERS, StructuredLinear, make_layer
from steinrl.core.priors import make_prior

__all__ = ["StructuredLinear1", "StructuredMlpExtractor", "StructuredActorCriticPolicy"]


def layer_options(prior: str, K: int, factor_std: float) -> dict[str, Any]:
    """The layer keyword arguments that ``prior``'s family takes."""
    if prior not in LAYERS:
        raise ValueError(f"unknown prior {prior!r}; choices: {', '.join(LAYERS)}")
    if prior == "householder":
        if K < 0:
            raise ValueError(f"K must be >= 0, got {K}")
        return {"K": int(K)}
    if prior == "kronecker":
        return {"factor_std": float(factor_std)}
    return {}


class StructuredLinear1(nn.Module):
    """One structured linear layer of a single particle, on ``(..., in)`` inputs."""

    def __init__(self, prior: str, in_features: int, out_features: int, *, gain: float = 1.0,
                 device: torch.device | str | None = None, **layer_kwargs: Any):
        super().__init__()
        self.layer: StructuredLinear = make_layer(prior, 1, in_features, out_features, gain=gain,
                                                  device=device, **layer_kwargs)
        self.in_features, self.out_features = in_features, out_features

    def forward(self, x: Tensor) -> Tensor:
        # The layer's own forward is a batched matmul over particles; with one particle a
        # plain addmm on the materialised weight is the same product and faster.
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        w = self.layer.weight()[0]  # (in, out)
        y = x2 @ w if self.layer.bias is None else torch.addmm(self.layer.bias[0], x2, w)
        return y.reshape(*lead, self.out_features)

    def weight(self) -> Tensor:
        """The effective dense weight ``(in, out)``."""
        return self.layer.weight()[0]


class StructuredMlpExtractor(nn.Module):
    """SB3's ``MlpExtractor`` (separate policy and value MLPs) with structured layers.

    :param feature_dim: input size (the features extractor's output).
    :param net_arch: ``[sizes]`` (same for both nets) or ``dict(pi=[...], vf=[...])``.
    :param activation_fn: activation class, e.g. ``nn.Tanh``.
    :param prior: layer family (``householder``, ``kronecker``, ``gaussian``).
    :param layer_kwargs: the family's options (``K``, ``factor_std``).
    :param gain: init gain of every layer (C ~ N(0, gain²/in)); SB3 uses √2 here.
    """

    def __init__(self, feature_dim: int, net_arch: list[int] | dict[str, list[int]],
                 activation_fn: type[nn.Module], prior: str = "householder",
                 layer_kwargs: dict[str, Any] | None = None, gain: float = math.sqrt(2),
                 device: torch.device | str = "auto"):
        super().__init__()
        device = get_device(device)
        if isinstance(net_arch, dict):
            pi_dims, vf_dims = net_arch.get("pi", []), net_arch.get("vf", [])
        else:
            pi_dims = vf_dims = net_arch
        kwargs = dict(layer_kwargs or {})

        def mlp(dims: list[int]) -> tuple[nn.Sequential, int]:
            layers: list[nn.Module] = []
            last = feature_dim
            for size in dims:
                layers += [StructuredLinear1(prior, last, int(size), gain=gain, device=device, **kwargs),
                           activation_fn()]
                last = int(size)
            return nn.Sequential(*layers).to(device), last

        self.policy_net, self.latent_dim_pi = mlp(list(pi_dims))
        self.value_net, self.latent_dim_vf = mlp(list(vf_dims))

    def structured_layers(self) -> list[StructuredLinear]:
        return [m.layer for m in self.modules() if isinstance(m, StructuredLinear1)]

    def forward(self, features: Tensor) -> tuple[Tensor, Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: Tensor) -> Tensor:
        return self.policy_net(features)

    def forward_critic(self, features: Tensor) -> Tensor:
        return self.value_net(features)


class StructuredActorCriticPolicy(ActorCriticPolicy):
    """SB3 actor-critic policy (A2C, PPO) with steinrl's structured layers in its MLPs.

    Takes every :class:`ActorCriticPolicy` argument (``net_arch``, ``activation_fn``,
    ``ortho_init`` -- which initialises SB3's heads only --, ``log_std_init``, ...) plus:

    :param prior: layer family: ``"householder"`` (default), ``"kronecker"`` or ``"gaussian"``.
    :param K: Householder reflections per side (``householder``; 0 = VMG).
    :param factor_std: init std of the triangular factors' entries (``kronecker``).
    :param gain: init gain of the structured layers (default √2, SB3's gain for its MLPs).
    :param log_prior: None (default: no prior term), ``"gaussian"`` or ``"invgamma"``:
        add ``prior_weight * grad log p(theta)`` of the structured layers before every
        optimizer step (MAP).
    :param prior_weight: weight of the log prior (the loss is a per-sample mean, so
        1 / samples-per-update is the posterior scaling).
    :param prior_variance: variance of the ``gaussian`` prior.
    :param prior_a: shape a of the ``invgamma`` hyper-prior.
    :param prior_b: scale b of the ``invgamma`` hyper-prior.
    """

    def __init__(
        self,
        observation_space,
        action_space,
        lr_schedule: Schedule,
        *args: Any,
        prior: str = "householder",
        K: int = 1,
        factor_std: float = 0.01,
        gain: float = math.sqrt(2),
        log_prior: str | None = None,
        prior_weight: float = 0.0,
        prior_variance: float = 0.01,
        prior_a: float = 1.0,
        prior_b: float = 0.1,
        **kwargs: Any,
    ):
        self.prior = prior
        self.K = int(K)
        self.factor_std = float(factor_std)
        self.gain = float(gain)
        self.layer_kwargs = layer_options(prior, self.K, self.factor_std)
        self.log_prior = log_prior
        self.prior_weight = float(prior_weight)
        self.prior_variance, self.prior_a, self.prior_b = float(prior_variance), float(prior_a), float(prior_b)
        prior_model = None
        if log_prior is not None:
            if log_prior not in ("gaussian", "invgamma"):
                raise ValueError(f"log_prior must be None, 'gaussian' or 'invgamma', got {log_prior!r}")
            if not (math.isfinite(self.prior_weight) and self.prior_weight >= 0):
                raise ValueError(f"prior_weight must be >= 0, got {prior_weight}")
            prior_model = make_prior(log_prior, **({"variance": self.prior_variance} if log_prior == "gaussian"
                                                   else {"a": self.prior_a, "b": self.prior_b}))
        object.__setattr__(self, "_prior", prior_model)  # a fixed prior: no parameters, not a submodule
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        self.mlp_extractor = StructuredMlpExtractor(
            self.features_dim, net_arch=self.net_arch, activation_fn=self.activation_fn, prior=self.prior,
            layer_kwargs=self.layer_kwargs, gain=self.gain, device=self.device,
        )

    def _build(self, lr_schedule: Schedule) -> None:
        super()._build(lr_schedule)
        if self._prior is not None and self.prior_weight > 0:
            self.optimizer.register_step_pre_hook(self._add_prior_gradient)

    def log_prior_value(self) -> Tensor:
        """log p(theta) of the structured layers (a scalar; 0 without ``log_prior``)."""
        if self._prior is None:
            return torch.zeros((), device=self.device)
        return sum(layer.log_prior(self._prior).sum() for layer in self.mlp_extractor.structured_layers())

    def _add_prior_gradient(self, optimizer, args, kwargs) -> None:
        params = [p for layer in self.mlp_extractor.structured_layers() for p in layer.parameters()]
        with torch.enable_grad():
            grads = torch.autograd.grad(-self.prior_weight * self.log_prior_value(), params, allow_unused=True)
        for p, g in zip(params, grads):
            if g is None:
                continue
            if p.grad is None:
                p.grad = g.detach().clone()
            else:
                p.grad.add_(g)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(prior=self.prior, K=self.K, factor_std=self.factor_std, gain=self.gain,
                    log_prior=self.log_prior, prior_weight=self.prior_weight,
                    prior_variance=self.prior_variance, prior_a=self.prior_a, prior_b=self.prior_b)
        return data
