"""Policy heads: the action distribution on top of the ensemble MLP's outputs.

A head turns the network outputs ``out (..., out_dim)`` of every particle into actions.
It is picked from the action space (:func:`head_for`), and it is the only place that
knows whether actions are continuous or discrete: rollout, evaluation and the SB3 policy
all act through :meth:`PolicyHead.sample` / :meth:`PolicyHead.ensemble_action`.

- :class:`GaussianHead` (``Box``): a Gaussian with a state-independent log-std per
  particle, ``log_std (M, A)``, optionally floored at ``log_std_min``; ``out`` is the mean.
- :class:`CategoricalHead` (``Discrete``): ``out`` are the logits; sampling is
  Gumbel-max, so pre-drawn noise makes it exact and cheap.

:meth:`PolicyHead.sample` only adds, multiplies and takes ``argmax(-1)``, so it works on
torch tensors and on numpy arrays alike (the CPU rollout acts in numpy).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from steinrl.errors import ConfigError
from steinrl.registry import Option, Registry, setting, settings_options

__all__ = ["HeadSettings", "GaussianHeadSettings", "PolicyHead", "GaussianHead", "CategoricalHead", "HEADS",
           "head_for"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

Array = Any  # a torch Tensor or a numpy array


@dataclass(frozen=True)
class HeadSettings:
    """A head's own options in the ``policy`` config section (none: the base)."""


@dataclass(frozen=True)
class GaussianHeadSettings(HeadSettings):
    """The Gaussian head's options (Box actions)."""

    log_std_init: float = setting(0.0, "Initial log standard deviation of the Gaussian policy (Box actions).")
    log_std_in_kernel: bool = setting(
        False, "Box actions: move the log-std with the weights by SVGD (the SVPG code); by default each particle's "
        "log-std follows its own policy gradient (a separate Adam), since the repulsive term drives in-kernel "
        "log-stds apart without bound.")
    log_std_min: float | None = setting(
        None, "Box actions: a floor on the log standard deviation, log_std.clamp(min=log_std_min) wherever the policy "
        "uses it (sampling, log-probabilities, entropy, the function-space kernel, evaluation); a log-std below it "
        "gets no gradient (a plain clamp) and acts at the floor; must be <= log_std_init; null: no floor.",
        kind=(float, None))


class PolicyHead(nn.Module):
    """Base class of action distributions over ``(M, B, out_dim)`` network outputs.

    ``Settings``: the head's own options in the ``policy`` config section (a frozen dataclass of
    :func:`~steinrl.registry.setting` s, each an ``__init__`` keyword; ``options`` is derived).

    :param num_particles: M.
    :param action_space: the single-env action space (see :meth:`supports`).
    """

    Settings: ClassVar[type] = HeadSettings
    options: ClassVar[tuple[Option, ...]] = ()

    def __init__(self, num_particles: int, action_space: gym.Space) -> None:
        super().__init__()
        self.num_particles = int(num_particles)

    @staticmethod
    def supports(action_space: gym.Space) -> bool:
        raise NotImplementedError

    out_dim: int  #: outputs the network must produce

    def draw_noise(self, shape: tuple[int, ...], generator: torch.Generator | None,
                   device: torch.device | str) -> Tensor:
        """Noise for a batch of ``shape`` (e.g. ``(T, M, E)``): ``(*shape, out_dim)``."""
        raise NotImplementedError

    def scale(self) -> Tensor | None:
        """Per-particle noise scale ``(M, 1, out_dim)`` that :meth:`sample` takes (None: unused)."""
        return None

    def sample(self, out: Array, noise: Array | None, scale: Array | None) -> Array:
        """Actions from outputs ``out (..., out_dim)``; ``noise=None`` gives the deterministic action."""
        raise NotImplementedError

    def scaled_noise(self, noise: Tensor, scale: Tensor | None) -> Tensor:
        """``noise`` ``(T, M, E, out_dim)`` with :meth:`scale` applied, once for a whole batch
        (the rollout adds it to the output layer's bias: the noise is additive for every head)."""
        return noise

    def log_prob(self, out: Tensor, actions: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """log π(a|s) ``(M, B)`` and the mean entropy per particle ``(M,)``, for ``out (M, B, out_dim)``;
        ``mask`` ``(M, B)`` (1: a real sample) restricts the entropy's mean to the real samples."""
        raise NotImplementedError

    def ensemble_action(self, out: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        """One action per state from all particles' outputs ``out (M, B, out_dim)`` (the ``mean`` acting mode)."""
        raise NotImplementedError

    def function(self, out: Tensor) -> Tensor:
        """Each particle's action distribution on shared states, as the function-space kernel sees
        it: ``(M, F)`` from outputs ``out (M, B, out_dim)`` (differentiable)."""
        raise NotImplementedError

    def kernel_parameters(self) -> list[nn.Parameter]:
        """Head parameters moved by SVGD with the network weights."""
        return []

    def own_parameters(self) -> list[nn.Parameter]:
        """Head parameters following their own per-particle gradient (their own optimizer)."""
        return []

    def diagnostics(self, groups: int = 1) -> dict[str, Tensor]:
        """Scalars to log under ``train/``, each ``(groups,)`` (one per group of particles, a seed)."""
        return {}


class GaussianHead(PolicyHead):
    """Gaussian policy ``N(out, exp(log_std)²)`` with a state-independent log-std per particle.

    ``log_std_min`` (None: no floor) floors the log-std wherever the head uses it: the noise
    scale of sampling (rollout, evaluation, the SB3 export), ``log_prob``, the entropy, the
    function-space embedding and the logged ``policy_std`` all see
    ``log_std.clamp(min=log_std_min)`` (:meth:`effective_log_std`). It is a plain clamp: a
    parameter entry below the floor gets no gradient (the clamp's derivative is 0 there), so it
    stays where it is, the std it gives is exactly the floor, and it can rise again only by
    what else moves it (the weight-space kernel's repulsion with ``log_std_in_kernel``); at
    the floor itself the gradient passes. The parameter is stored unclamped (checkpoints keep
    it), so a run resumed without the floor acts with its raw value.
    """

    Settings = GaussianHeadSettings
    options = settings_options(Settings)

    def __init__(self, num_particles: int, action_space: gym.Space, log_std_init: float = 0.0,
                 log_std_in_kernel: bool = False, log_std_min: float | None = None) -> None:
        super().__init__(num_particles, action_space)
        if log_std_min is not None:
            if isinstance(log_std_min, bool) or not isinstance(log_std_min, (int, float)) \
                    or not math.isfinite(log_std_min):
                raise ConfigError(f"policy.log_std_min must be a finite number or null, got {log_std_min!r}")
            if log_std_min > log_std_init:
                raise ConfigError(f"policy.log_std_min ({log_std_min:g}) is above policy.log_std_init "
                                  f"({log_std_init:g}): the log-std would start below its floor, where the clamp "
                                  "passes no gradient, and never leave it")
        self.log_std_min = None if log_std_min is None else float(log_std_min)
        self.out_dim = int(action_space.shape[0])
        self.log_std_in_kernel = bool(log_std_in_kernel)
        self.log_std = nn.Parameter(torch.full((num_particles, self.out_dim), float(log_std_init)))
        bounds = space_bounds(action_space)  # where actions are clipped: what the function-space kernel sees
        low, high = (torch.full((self.out_dim,), -1.0), torch.full((self.out_dim,), 1.0)) if bounds is None else \
            (torch.as_tensor(bounds[0]), torch.as_tensor(bounds[1]))
        self.register_buffer("_centre", (high + low) / 2, persistent=False)
        self.register_buffer("_half", (high - low).clamp_min(1e-6) / 2, persistent=False)
        self._bounded = bounds is not None

    @staticmethod
    def supports(action_space: gym.Space) -> bool:
        return isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1

    def draw_noise(self, shape: tuple[int, ...], generator: torch.Generator | None,
                   device: torch.device | str) -> Tensor:
        return torch.randn((*shape, self.out_dim), generator=generator, device=device)

    def effective_log_std(self) -> Tensor:
        """The log-std the policy acts with, ``(M, A)``: ``log_std`` floored at ``log_std_min``."""
        return self.log_std if self.log_std_min is None else self.log_std.clamp(min=self.log_std_min)

    def scale(self) -> Tensor:
        return self.effective_log_std().exp().unsqueeze(1)  # M 1 A

    def sample(self, out: Array, noise: Array | None, scale: Array | None) -> Array:
        if noise is None:
            return out
        return out + scale * noise

    def scaled_noise(self, noise: Tensor, scale: Tensor | None) -> Tensor:
        return noise * scale  # (T, M, E, A) * (M, 1, A)

    def log_prob(self, out: Tensor, actions: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        effective = self.effective_log_std()  # M A
        log_std = effective.unsqueeze(1)  # M 1 A
        z = (actions - out) * torch.exp(-log_std)
        logp = (-0.5 * z.square() - log_std - _LOG_SQRT_2PI).sum(-1)  # M B
        entropy = (0.5 + _LOG_SQRT_2PI + effective).sum(-1)  # M: state-independent, no mask needed
        return logp, entropy

    def ensemble_action(self, out: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        if not deterministic:
            out = out + self.scale() * torch.randn(out.shape, generator=generator, device=out.device)
        return out.mean(0)

    def kernel_parameters(self) -> list[nn.Parameter]:
        return [self.log_std] if self.log_std_in_kernel else []

    def function(self, out: Tensor) -> Tensor:
        """The means on the states, squashed into the action bounds by tanh (bounded spaces: the
        clipped actions do not change once a mean leaves the bounds, so the kernel does not push
        means out there), and the (floored) log-std where the kernel moves it (``log_std_in_kernel``)."""
        means = (torch.tanh((out - self._centre) / self._half) if self._bounded else out).flatten(1)
        return torch.cat([means, self.effective_log_std()], 1) if self.log_std_in_kernel else means

    def own_parameters(self) -> list[nn.Parameter]:
        return [] if self.log_std_in_kernel else [self.log_std]

    def diagnostics(self, groups: int = 1) -> dict[str, Tensor]:
        return {"policy_std": self.effective_log_std().detach().exp().view(groups, -1).mean(1)}  # each seed's own


class CategoricalHead(PolicyHead):
    """Categorical policy over ``Discrete(n)`` actions; ``out`` are the logits."""

    def __init__(self, num_particles: int, action_space: gym.Space) -> None:
        super().__init__(num_particles, action_space)
        self.out_dim = int(action_space.n)

    @staticmethod
    def supports(action_space: gym.Space) -> bool:
        return isinstance(action_space, gym.spaces.Discrete)

    def draw_noise(self, shape: tuple[int, ...], generator: torch.Generator | None,
                   device: torch.device | str) -> Tensor:
        u = torch.rand((*shape, self.out_dim), generator=generator, device=device).clamp_(1e-10, 1.0 - 1e-7)
        return -torch.log(-torch.log(u))  # Gumbel(0, 1)

    def sample(self, out: Array, noise: Array | None, scale: Array | None) -> Array:
        return (out if noise is None else out + noise).argmax(-1)  # Gumbel-max

    def log_prob(self, out: Tensor, actions: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        logp_all = torch.log_softmax(out, -1)
        logp = logp_all.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)  # M B
        per_state = -(logp_all.exp() * logp_all).sum(-1)  # M B
        if mask is None:
            return logp, per_state.mean(-1)
        return logp, (per_state * mask).sum(-1) / mask.sum(-1).clamp_min(1.0)  # M

    def function(self, out: Tensor) -> Tensor:
        """The log-probabilities of every action on the states (logits are defined up to a shift)."""
        return torch.log_softmax(out, -1).flatten(1)

    def ensemble_action(self, out: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        probs = torch.softmax(out, -1).mean(0)  # B A: the particles' mean action probabilities
        if deterministic:
            return probs.argmax(-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


#: Policy heads by name; :func:`head_for` picks the one that supports an action space.
HEADS: Registry[type[PolicyHead]] = Registry("policy head")
HEADS.register("gaussian", GaussianHead)
HEADS.register("categorical", CategoricalHead)


def head_for(action_space: gym.Space) -> type[PolicyHead]:
    """The registered head class that supports ``action_space``."""
    for _, cls in HEADS.items():
        if cls.supports(action_space):
            return cls
    raise ValueError(f"no registered policy head supports the action space {action_space} "
                     f"(heads: {', '.join(HEADS.names())}: 1-D Box and Discrete)")


def space_bounds(action_space: gym.Space) -> tuple[np.ndarray, np.ndarray] | None:
    """Finite (low, high) of a Box action space, for clipping sampled actions; else None."""
    if isinstance(action_space, gym.spaces.Box):
        low, high = action_space.low.astype(np.float32), action_space.high.astype(np.float32)
        if np.all(np.isfinite(low)) and np.all(np.isfinite(high)):
            return low, high
    return None
