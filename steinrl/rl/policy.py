"""Policy particles: an :class:`~steinrl.core.ensemble.EnsembleMLP` plus an action distribution.

Box actions get a Gaussian with a state-independent log-std per particle (by default
outside the kernel, see ``Config.log_std_in_kernel``); Discrete actions get a
categorical over the MLP's logits. Shapes are particle-major: ``(M, B, ...)``.
"""

from __future__ import annotations

import math
from typing import Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from steinrl.core.ensemble import EnsembleMLP, mlp_forward

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _np_elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


#: numpy activations for :meth:`EnsemblePolicy.actor` (in place where numpy allows).
_NUMPY_ACTIVATIONS = {
    "tanh": lambda x: np.tanh(x, out=x),
    "relu": lambda x: np.maximum(x, 0, out=x),
    "elu": _np_elu,
    "identity": None,
}


class ObsNormalizer(nn.Module):
    """Running mean / variance of observations (parallel-algorithm update, as in SB3's VecNormalize).

    Kept as buffers so it travels with the policy's ``state_dict``. Disabled instances
    are the identity.
    """

    def __init__(self, obs_dim: int, enabled: bool, clip: float = 10.0, eps: float = 1e-8):
        super().__init__()
        self.enabled = enabled
        self.clip = clip
        self.eps = eps
        self.register_buffer("mean", torch.zeros(obs_dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(obs_dim, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        """Fold a batch ``(B, obs_dim)`` of raw observations into the statistics."""
        if not self.enabled or x.numel() == 0:
            return
        x = x.to(torch.float64)
        b_mean, b_var, b_count = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta = b_mean - self.mean
        total = self.count + b_count
        self.mean += delta * b_count / total
        m2 = self.var * self.count + b_var * b_count + delta.square() * self.count * b_count / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: Tensor) -> Tensor:
        if not self.enabled:
            return x
        mean = self.mean.to(x.dtype)
        std = (self.var + self.eps).sqrt().to(x.dtype)
        return ((x - mean) / std).clamp_(-self.clip, self.clip)


class EnsemblePolicy(nn.Module):
    """M stochastic policies evaluated in one batched call.

    :param num_particles: M.
    :param observation_space: a flat ``Box`` observation space.
    :param action_space: ``Box`` (Gaussian policy) or ``Discrete`` (categorical policy).
    :param hidden: hidden layer sizes, e.g. ``(25, 10)``.
    :param layer: structured layer family (``gaussian``, ``householder``, ``kronecker``).
    :param layer_kwargs: extra layer arguments (e.g. ``{"K": 1}`` for householder).
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
        layer_kwargs: dict | None = None,
        log_std_init: float = 0.0,
        output_gain: float = 0.01,
        normalize_obs: bool = False,
    ):
        super().__init__()
        if not isinstance(observation_space, gym.spaces.Box) or len(observation_space.shape) != 1:
            raise ValueError(f"steinrl policies need a flat Box observation space, got {observation_space}")
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if not self.discrete and not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
            raise ValueError(f"steinrl policies support Box (1-D) and Discrete action spaces, got {action_space}")
        self.num_particles = num_particles
        self.obs_dim = int(observation_space.shape[0])
        self.action_dim = int(action_space.n) if self.discrete else int(action_space.shape[0])
        self.obs_norm = ObsNormalizer(self.obs_dim, normalize_obs)
        self.net = EnsembleMLP(
            num_particles, self.obs_dim, list(hidden), self.action_dim,
            activation=activation, layer=layer, layer_kwargs=layer_kwargs, output_gain=output_gain,
        )
        if not self.discrete:
            self.log_std = nn.Parameter(torch.full((num_particles, self.action_dim), float(log_std_init)))

    # --- parameters theta ---------------------------------------------------------
    def particle_parameters(self) -> list[nn.Parameter]:
        """All per-particle parameters (leading dim M), in a fixed order: the network's, then the log-std."""
        return list(self.net.parameters()) + ([] if self.discrete else [self.log_std])

    def log_prior(self, prior) -> Tensor:
        """log p(theta_i) of each particle's network weights, ``(M,)``.

        The papers' prior (S²VGD eq. 14) is on the weight factors and biases only; the
        log-std has a flat prior. A zero-mean prior on it would pull every policy back
        towards std 1 and stop it from ever acting precisely.
        """
        return self.net.log_prior(prior)

    def dense(self) -> list[tuple[Tensor, Tensor]]:
        """Materialised dense weights of every layer (see :meth:`EnsembleMLP.dense`)."""
        return self.net.dense()

    # --- distribution -------------------------------------------------------------
    def head(self, obs: Tensor, dense: list | None = None) -> Tensor:
        """Action means (Box) or logits (Discrete), ``(M, B, action_dim)``, from raw obs ``(M, B, obs_dim)``."""
        if self.obs_norm.enabled:
            obs = self.obs_norm(obs)
        if dense is None:
            dense = self.net.dense()
        return mlp_forward(dense, obs, self.net.activation)

    def noise_shape(self, *batch: int) -> tuple[int, ...]:
        """Shape of the pre-drawn noise :meth:`sample` consumes for a batch ``(M, *batch)``."""
        return (self.num_particles, *batch, self.action_dim)

    @staticmethod
    def draw_noise(shape: tuple[int, ...], discrete: bool, generator: torch.Generator | None, device) -> Tensor:
        """Standard normal noise (Box) or Gumbel noise (Discrete) of ``shape``."""
        if not discrete:
            return torch.randn(shape, generator=generator, device=device)
        u = torch.rand(shape, generator=generator, device=device).clamp_(1e-10, 1.0 - 1e-7)
        return -torch.log(-torch.log(u))

    def sample(self, obs: Tensor, noise: Tensor | None, dense: list | None = None) -> Tensor:
        """Actions for obs ``(M, B, obs_dim)``: ``(M, B, action_dim)`` (Box) or ``(M, B)`` int64 (Discrete).

        ``noise`` (from :meth:`draw_noise`) makes sampling reparameterised and cheap;
        ``noise=None`` gives the deterministic action (mean, or argmax of logits).
        """
        out = self.head(obs, dense)
        if self.discrete:
            return (out if noise is None else out + noise).argmax(-1)
        if noise is None:
            return out
        return torch.addcmul(out, self.log_std.exp().unsqueeze(1), noise)

    def actor(self, noise: Tensor | None, dense: list | None = None):
        """A numpy act function ``act(obs (M, E, obs_dim), t) -> actions`` for :class:`~steinrl.rl.rollout.Sampler`.

        ``noise`` ``(T, M, E, action_dim)`` (from :meth:`draw_noise`) is consumed one step
        ``t`` at a time; ``None`` gives deterministic actions. On CPU the forward pass runs
        in numpy on the materialised dense weights (a rollout step is a few tiny matmuls,
        where numpy's per-call cost is a fraction of torch's); on other devices it calls
        :meth:`sample` on the device. Both give the same actions (up to float rounding).
        """
        dense = self.dense() if dense is None else dense
        device = dense[0][0].device
        if device.type != "cpu":
            def act_torch(obs: np.ndarray, t: int) -> np.ndarray:
                o = torch.as_tensor(obs, device=device)
                return self.sample(o, None if noise is None else noise[t], dense).cpu().numpy()
            return act_torch
        layers = [(W.detach().numpy(), b.detach().numpy()[:, None, :]) for W, b in dense]
        act_fn = _NUMPY_ACTIVATIONS[self.net.activation]
        norm = None
        if self.obs_norm.enabled:
            norm = (self.obs_norm.mean.numpy().astype(np.float32),
                    np.sqrt(self.obs_norm.var.numpy() + self.obs_norm.eps).astype(np.float32), self.obs_norm.clip)
        noise_np = None if noise is None else noise.detach().numpy()
        std = None if self.discrete else self.log_std.detach().exp().numpy()[:, None, :]  # (M, 1, A)
        last = len(layers) - 1

        def act(obs: np.ndarray, t: int) -> np.ndarray:
            x = obs
            if norm is not None:
                x = np.clip((x - norm[0]) / norm[1], -norm[2], norm[2])
            for i, (W, b) in enumerate(layers):
                x = np.matmul(x, W)
                x += b
                if i != last and act_fn is not None:
                    x = act_fn(x)
            if self.discrete:
                return (x if noise_np is None else x + noise_np[t]).argmax(-1)
            if noise_np is not None:
                x += std * noise_np[t]
            return x

        return act

    def log_prob(self, obs: Tensor, actions: Tensor, dense: list | None = None) -> tuple[Tensor, Tensor]:
        """log pi(a|s) ``(M, B)`` and the mean entropy per particle ``(M,)``."""
        out = self.head(obs, dense)
        if self.discrete:
            logp_all = torch.log_softmax(out, -1)
            logp = logp_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
            entropy = -(logp_all.exp() * logp_all).sum(-1).mean(-1)
            return logp, entropy
        log_std = self.log_std.unsqueeze(1)  # (M, 1, A)
        z = (actions - out) * torch.exp(-log_std)
        logp = (-0.5 * z.square() - log_std - _LOG_SQRT_2PI).sum(-1)
        entropy = (0.5 + _LOG_SQRT_2PI + self.log_std).sum(-1)
        return logp, entropy


def space_bounds(action_space: gym.Space) -> tuple[np.ndarray, np.ndarray] | None:
    """Finite (low, high) of a Box action space, for clipping sampled actions; else None."""
    if isinstance(action_space, gym.spaces.Box):
        low, high = action_space.low.astype(np.float32), action_space.high.astype(np.float32)
        if np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
            return low, high
    return None
