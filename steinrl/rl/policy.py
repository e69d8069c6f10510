"""Policy particles: an :class:`~steinrl.core.ensemble.EnsembleMLP` plus a policy head.

The head (:mod:`steinrl.rl.heads`, picked from the action space) is the action
distribution; this module only evaluates the network. Shapes are particle-major:
observations ``(M, B, obs_dim)`` (or a shared ``(B, obs_dim)``), outputs ``(M, B, out_dim)``.

One action path: :meth:`EnsemblePolicy.sample` and :meth:`EnsemblePolicy.actor` (the
rollout's act function) both run :func:`~steinrl.core.ensemble.mlp_forward` and end in
``head.sample``;
:class:`steinrl.rl.evaluation.EnsembleActor` builds its acting modes on top of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from steinrl.core.ensemble import ACTIVATIONS, INITS, Dense, EnsembleMLP, forward_prepared, mlp_forward, prepare_layers
from steinrl.core.priors import Prior
from steinrl.registry import Option, at_least_one, setting, settings_options
from steinrl.rl.heads import head_for
from steinrl.rl.timeaxis import row

__all__ = ["EnsemblePolicy", "ObsNormalizer", "PolicySettings", "POLICY_OPTIONS"]


@dataclass(frozen=True)
class PolicySettings:
    """The ``policy`` config section's own options (every head's options join them: the section is
    composed with the heads' settings, :mod:`steinrl.rl.heads`)."""

    hidden: list[int] = setting([25, 10], "Hidden layer sizes of the policy MLP.", kind=list[int], check=at_least_one)
    activation: str = setting("tanh", "Hidden activation of policy and value MLPs.",
                              choices=tuple(a for a in ACTIVATIONS if a != "identity"))
    output_gain: float = setting(1.0, "Init gain of the policy's output layer (1: Glorot, as the SVPG code).")
    init: str = setting(
        "glorot", "Weight init of the policy MLP: glorot (the SVPG code's), lecun, orthogonal (gain sqrt 2 hidden, "
        "output_gain output, bias 0: PPO's, with output_gain 0.01), or torch (nn.Linear's default, U(+-1/sqrt(in)) "
        "for W and b: SB3 with ortho_init false).", choices=INITS)
    normalize_obs: bool = setting(False, "Normalise observations by a running mean / std (useful for MuJoCo).")
    obs_stats_update: str = setting(
        "after-update", "With normalize_obs, when a batch's observations enter the running statistics: after-update "
        "(SB3's VecNormalize: the update sees the observations as the rollout normalised them, so PPO's old "
        "log-probabilities are the sampling policy's) or before-update (the update normalises with statistics that "
        "include its own batch; the first batch, acted on unnormalised observations, can then lie tens of std from "
        "the policy and overflow PPO's ratio).", choices=("after-update", "before-update"))


#: The options of :class:`PolicySettings`.
POLICY_OPTIONS: tuple[Option, ...] = settings_options(PolicySettings)


class ObsNormalizer(nn.Module):
    """Running mean / variance of observations (parallel-algorithm update, as in SB3's VecNormalize).

    Kept as buffers so it travels with the policy's ``state_dict``. Disabled instances
    are the identity.
    """

    #: no particle axis: every particle (and every seed of a batch) shares the statistics
    shared_state = ("mean", "var", "count")

    def __init__(self, obs_dim: int, enabled: bool, clip: float = 10.0, eps: float = 1e-8):
        super().__init__()
        self.enabled = enabled
        self.clip = clip
        self.eps = eps
        self.register_buffer("mean", torch.zeros(obs_dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(obs_dim, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    @torch.no_grad()
    def observe(self, x: Tensor, weight: Tensor | None = None) -> None:
        """Fold a batch ``(B, obs_dim)`` of raw observations into the statistics (``weight``
        ``(B,)`` 0/1 selects the rows to count, without a host sync)."""
        if not self.enabled or x.numel() == 0:
            return
        x = x.to(torch.float64)
        w = torch.ones(x.shape[0], dtype=torch.float64, device=x.device) if weight is None else weight.double()
        b_count = w.sum().clamp_min(1e-12)
        b_mean = (x * w[:, None]).sum(0) / b_count
        b_var = ((x - b_mean).square() * w[:, None]).sum(0) / b_count
        delta = b_mean - self.mean
        total = self.count + b_count
        self.mean += delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + delta.square() * self.count * b_count / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    @contextmanager
    def bypassed(self) -> Iterator[None]:
        """Inside, :meth:`forward` is the identity: for inputs normalised once beforehand (an
        update's minibatches of one batch, whose statistics do not change during the update)."""
        enabled, self.enabled = self.enabled, False
        try:
            yield
        finally:
            self.enabled = enabled

    def forward(self, x: Tensor) -> Tensor:
        if not self.enabled:
            return x
        mean = self.mean.to(x.dtype)
        std = (self.var + self.eps).sqrt().to(x.dtype)
        return ((x - mean) / std).clamp_(-self.clip, self.clip)

    def numpy_stats(self) -> tuple[np.ndarray, np.ndarray, float] | None:
        """``(mean, std, clip)`` as float32 numpy arrays for the rollout's act function on the
        CPU (None if disabled)."""
        if not self.enabled:
            return None
        std = np.sqrt(self.var.cpu().numpy() + self.eps).astype(np.float32)
        return self.mean.cpu().numpy().astype(np.float32), std, self.clip


class EnsemblePolicy(nn.Module):
    """M stochastic policies evaluated in one batched call.

    :param num_particles: M.
    :param observation_space: a flat ``Box`` observation space.
    :param action_space: any space a registered head supports (1-D ``Box``, ``Discrete``).
    :param hidden: hidden layer sizes, e.g. ``(25, 10)``.
    :param activation: hidden activation.
    :param layer: structured layer family (``gaussian``, ``householder``, ``kronecker``).
    :param layer_options: the family's options (e.g. ``{"K": 1}`` for householder).
    :param output_gain: init gain of the output layer.
    :param init: weight init (``glorot``, ``lecun``, ``orthogonal``; see :class:`~steinrl.core.ensemble.EnsembleMLP`).
    :param normalize_obs: running observation normalisation.
    :param head_options: the head's options (e.g. ``log_std_init`` of the Gaussian head);
        options of other heads are ignored.
    :param generator: draws the initial weights.
    """

    def __init__(
        self,
        num_particles: int,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden: Sequence[int] = (25, 10),
        *,
        activation: str = "tanh",
        layer: str = "gaussian",
        layer_options: dict | None = None,
        output_gain: float = 0.01,
        init: str = "glorot",
        normalize_obs: bool = False,
        head_options: dict | None = None,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
    ):
        super().__init__()
        if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
            raise ValueError(f"steinrl policies need a flat Box observation space, got {observation_space}")
        head_cls = head_for(action_space)
        own = {o.name for o in head_cls.options}
        self.num_particles = num_particles
        self.obs_dim = int(observation_space.shape[0])
        self.obs_norm = ObsNormalizer(self.obs_dim, normalize_obs)
        self.head = head_cls(num_particles, action_space,
                             **{k: v for k, v in (head_options or {}).items() if k in own})
        self.net = EnsembleMLP(
            num_particles, self.obs_dim, list(hidden), self.head.out_dim, activation=activation, layer=layer,
            layer_options=layer_options, output_gain=output_gain, init=init, generator=generator, device=device,
        )
        if device is not None:
            self.to(device)

    # --- parameters theta ---------------------------------------------------------
    def kernel_parameters(self) -> list[nn.Parameter]:
        """The per-particle parameters SVGD moves: the network's, then the head's in-kernel ones."""
        return list(self.net.parameters()) + self.head.kernel_parameters()

    def particle_parameters(self) -> list[nn.Parameter]:
        """All per-particle parameters (leading dim M): kernel ones, then the head's own."""
        return self.kernel_parameters() + self.head.own_parameters()

    def log_prior(self, prior: Prior) -> Tensor:
        """log p(theta_i) of each particle's network weights, ``(M,)``.

        The papers' prior (S²VGD eq. 14) is on the weight factors and biases only; head
        parameters such as the log-std have a flat prior (a zero-mean prior on the
        log-std would pull every policy back towards std 1).
        """
        return self.net.log_prior(prior)

    def dense(self) -> Dense:
        """Materialised dense weights of every layer (see :meth:`EnsembleMLP.dense`)."""
        return self.net.dense()

    # --- the action path ----------------------------------------------------------
    def outputs(self, obs: Tensor, dense: Dense | None = None) -> Tensor:
        """Head inputs (means or logits) ``(M, B, out_dim)`` from raw obs ``(M, B, obs_dim)``
        or shared ``(B, obs_dim)``."""
        return mlp_forward(self.net.dense() if dense is None else dense, self.obs_norm(obs), self.net.activation)

    def sample(self, obs: Tensor, noise: Tensor | None, dense: Dense | None = None) -> Tensor:
        """Actions for obs ``(M, B, obs_dim)``: ``(M, B, ...)`` as the head makes them.

        ``noise`` (from ``head.draw_noise``) makes sampling reparameterised and cheap;
        ``None`` gives the deterministic action (mean, or arg-max of the logits).
        """
        return self.head.sample(self.outputs(obs, dense), noise, self.head.scale())

    def log_prob(self, obs: Tensor, actions: Tensor, dense: Dense | None = None,
                 mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """log π(a|s) ``(M, B)`` and the mean entropy per particle ``(M,)`` (over the real samples,
        ``mask`` ``(M, B)`` 1, where a head's entropy depends on the state; else every column)."""
        return self.head.log_prob(self.outputs(obs, dense), actions, mask)

    def embedding(self, states: Tensor) -> Tensor:
        """Every particle's action distribution on shared ``states`` ``(M, B, obs_dim)``, as a
        function-space kernel (or a spread controller) sees it: ``(M, F)``
        (:meth:`~steinrl.rl.heads.Head.function`), differentiable in the parameters."""
        return self.head.function(self.outputs(states, self.dense()))

    def actor(self, noise: Tensor | None, dense: Dense | None = None, host: bool = False) -> Callable[[Any, Any], Any]:
        """The rollout's act function ``act(obs (M, E, obs_dim), t) -> actions (M, E, ...)``:
        one ensemble forward per step, no host sync; numpy arrays in and out for a host task
        (``host``, the policy on the CPU), else tensors (moved to the policy's device and back).

        ``noise`` ``(T, M, E, out_dim)`` (from ``head.draw_noise``) is consumed one step ``t``
        at a time; ``None`` gives deterministic actions. On the CPU the same
        :func:`~steinrl.core.ensemble.mlp_forward` and ``head.sample`` run on numpy views of
        the weights, noise and observations (no copies): a step's tiny matmuls cost a third of
        torch's per-call overhead there. Elsewhere ``t`` may be a 0-dim device tensor (a
        compiled rollout step indexes the noise with it).
        """
        dense = self.dense() if dense is None else dense
        if not host or dense[0][0].device.type != "cpu":
            device = dense[0][0].device
            if host:  # numpy envs, the policy on a device: one transfer each way per step
                return lambda obs, t: self.sample(torch.from_numpy(obs).to(device),
                                                  None if noise is None else noise[t], dense).cpu().numpy()
            if noise is None:
                return lambda obs, t: self.sample(obs.to(device), None, dense).to(obs.device)
            # what does not change in a batch is computed once: the weights as the forward uses
            # them on the noise's E columns per particle, and the noise (times the head's scale;
            # additive for every head) added to the output layer's bias, a column per step
            *hidden, (wt, bias, post) = prepare_layers(dense, self.net.activation, noise.shape[2], device.type)
            noisy_bias = self.head.scaled_noise(noise, self.head.scale()).transpose(-1, -2) + bias  # (T, M, A, E)
            activation, norm, head = self.net.activation, self.obs_norm, self.head
            return lambda obs, t: head.sample(
                forward_prepared([*hidden, (wt, row(noisy_bias, t), post)], norm(obs.to(device)), activation),
                None, None).to(obs.device)
        layers = [(W.detach().numpy(), b.detach().numpy()) for W, b in dense]
        norm = self.obs_norm.numpy_stats()
        noise_np = None if noise is None else noise.detach().numpy()
        scale = self.head.scale()
        scale_np = None if scale is None else scale.detach().numpy()  # (M, 1, out_dim)
        activation, head_sample = self.net.activation, self.head.sample

        def act(obs: np.ndarray, t: int) -> np.ndarray:
            x = obs
            if norm is not None:
                x = np.clip((x - norm[0]) / norm[1], -norm[2], norm[2])
            out = mlp_forward(layers, x, activation)
            return np.asarray(head_sample(out, None if noise_np is None else noise_np[t], scale_np))

        return act
