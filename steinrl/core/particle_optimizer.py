"""The particle step: M particles moved from their objectives ``(M,)``.

:class:`ParticleOptimizer` turns per-particle objectives J(θ_i) into one move of all particles
(policy particles, bandit models, regression networks alike), in this order (the only place it
happens; the models that are not particles take :func:`steinrl.core.optim.gradient_step`):

1. every gradient is zeroed;
2. the gradients of Σ_i J_i (and of an auxiliary loss, e.g. a joint critic's value loss);
3. ``max_grad_norm``: each particle's gradient of J (and of the auxiliary loss) is scaled down
   to that Euclidean norm, in J's own units (``torch.nn.utils.clip_grad_norm_`` per particle);
4. divided by the temperature α;
5. plus w ∇log p(θ_i), the prior's gradient times ``prior_weight``: together
   g_i = clip(∇J_i) / α + w ∇log p(θ_i);
6. φ = the coupling's direction from Θ and G (:mod:`steinrl.core.couplings`: SVGD under a
   Stein kernel, or φ = g), per group of particles (seeds in one batch); minus the S²VGD
   code's proximal term (times ``proximal_weight``); each φ_i scaled down to ``max_direction_norm``;
7. the torch optimizer (Adam, RMSprop, ...) steps with −φ as the gradient, so plain SGD gives
   θ ← θ + lr φ; the particles' own parameters (following their own gradient, e.g. a policy's
   log-std outside the kernel) and the auxiliary optimizer step beside it.

Without ``max_grad_norm`` steps 2-5 are one backward pass of −Σ_i [J_i / α + w log p(θ_i)]
(the same gradient: clipping is then the identity). With M = 1, or the ``independent`` coupling,
φ = g: MAP / plain gradient ascent.

Finiteness (``finite``, a :class:`~steinrl.core.finite.FiniteFlags`): the log target (or the
objective, with clipping), the gradients and the parameters, per particle, without a host sync.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from steinrl.core.couplings import Coupling, Embed, coupling_from, make_coupling
from steinrl.core.finite import FiniteFlags
from steinrl.core.optim import TFRMSprop, adam
from steinrl.core.stein import flatten, proximal_gradient, unflatten_into
from steinrl.registry import Option, non_negative, setting, settings_options, step_size

__all__ = ["ParticleOptimizer", "StepResult", "OPTIMIZERS", "OptimizerSettings", "OPTIMIZER_OPTIONS",
           "make_particle_optimizer", "clip_grad_norms", "halved_lr", "set_lr"]

OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "adam": adam,  # torch's Adam, fused where available
    "rmsprop": torch.optim.RMSprop,
    "rmsprop_tf": TFRMSprop,
    "sgd": torch.optim.SGD,
}

@dataclass(frozen=True)
class OptimizerSettings:
    """What every method's ``update`` config section holds: the particle optimizer's settings (a
    coupling's own, :class:`~steinrl.core.couplings.CouplingSettings`, join them)."""

    optimizer: str = setting("adam", "Optimizer applied to -phi (adam: the SVPG code; rmsprop: the S²VGD paper).",
                             choices=lambda: list(OPTIMIZERS))
    lr: float = setting(5e-3, "Step size epsilon of the particle step.", check=step_size)
    proximal_weight: float = setting(0.0, "Weight of the S²VGD code's proximal term (0.1 there; 0 = off).",
                                     check=non_negative)
    lr_halving_every: int = setting(0, "If > 0, halve lr every this many iterations after lr_halving_start.",
                                    check=non_negative)
    lr_halving_start: int = setting(200, "First iteration at which lr halving may apply.", check=non_negative)
    optimizer_eps: float | None = setting(
        None, "Epsilon of the optimizer's denominator, also of the own parameters' Adam (null: the optimizer's "
        "default: adam and rmsprop 1e-8, rmsprop_tf 1e-10; sgd has none; SB3's PPO uses 1e-5).", kind=(float, None),
        check=lambda v: None if v is None or v > 0 else "must be > 0 (or null)")


#: The options of :class:`OptimizerSettings`.
OPTIMIZER_OPTIONS: tuple[Option, ...] = settings_options(OptimizerSettings)


@dataclass
class StepResult:
    """What one :meth:`ParticleOptimizer.step` reports (detached tensors)."""

    coupling_stats: dict[str, Tensor]  # the coupling's diagnostics: bandwidth, kernel_mean, ...: 0-dim or (G,)
    log_prior: Tensor | None  # (M,) log p(θ_i) before the step (None: not asked for, weight 0)
    grad_norm: Tensor | None  # (M,) each particle's norm of ∇J before clipping (with max_grad_norm)


def clip_grad_norms(params: Sequence[Tensor], max_norm: float) -> Tensor:
    """Scale each particle's gradient (over all of ``params``, each ``(M, ...)``) down to
    Euclidean norm at most ``max_norm``, as ``torch.nn.utils.clip_grad_norm_`` does for one
    model (factor ``max_norm / (norm + 1e-6)``, capped at 1). Returns the norms before ``(M,)``."""
    grads = [p.grad for p in params if p.grad is not None]
    norms = torch.stack([g.reshape(g.shape[0], -1).square().sum(1) for g in grads]).sum(0).sqrt()
    factor = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    torch._foreach_mul_(grads, [factor.view(-1, *[1] * (g.dim() - 1)) for g in grads])
    return norms


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Every param group's step size; a tensor step size (a capturable optimizer's, which a
    CUDA graph reads at each replay) is written in place."""
    for group in optimizer.param_groups:
        if isinstance(group["lr"], Tensor):
            group["lr"].fill_(lr)
        else:
            group["lr"] = lr


def halved_lr(lr: float, iteration: int, every: int, start: int) -> float:
    """The S²VGD code's schedule: ``lr`` halved every ``every`` iterations from ``start`` on
    (``every`` = 0: constant)."""
    if every > 0 and iteration >= start:
        return lr * 0.5 ** ((iteration - start) // every + 1)
    return lr


def _positive_or_none(value: float | None, name: str) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be > 0 or None, got {value!r}")
    return value


class ParticleOptimizer:
    """M particles (parameters with a leading particle dim) moved by one :meth:`step` per call.

    :param params: the parameters the step moves along φ (a policy's network, a prior's learned
        hyperparameters), each ``(M, ...)``.
    :param coupling: how the particles are coupled (:class:`~steinrl.core.couplings.Coupling`, e.g.
        ``SteinCoupling(kernel)``) or its registered name.
    :param lr: step size (> 0).
    :param optimizer: the torch optimizer's name: ``"adam"`` (default, as the SVPG code), ``"rmsprop"``
        (the S²VGD paper), ``"rmsprop_tf"`` or ``"sgd"``; ``optimizer_kwargs``: its extra arguments.
    :param temperature: the temperature α of the target exp(J / α) p(θ)^w.
    :param prior_weight: w; ``log_prior`` returns log p(θ_i) ``(M,)`` (differentiable).
    :param max_grad_norm: clip each particle's gradient of J to this norm (step 3); None: no clipping.
    :param max_direction_norm: scale each φ_i down to this norm (step 6); None: no clipping.
    :param proximal_weight: weight of the S²VGD code's proximal term (0: off; not with groups).
    :param groups: G > 1 splits the M particles into G consecutive groups (seeds trained in one
        batch) that the coupling couples only within themselves; the coupling stats are then ``(G,)``.
    :param own: parameters ``(M, ...)`` that follow their own gradient (of J / α, clipped with
        the rest), with their own Adam (lr, ``optimizer_eps``).
    :param finite: flags the step's quantities per particle (optional).

    A function-space kernel (or a spread controller) needs the particles' outputs on
    ``coupling.embedding_states`` shared inputs: :meth:`step` then takes ``embed``, a call returning
    them ``(M, F)``, differentiable in ``params`` (e.g. a policy's action means on B states
    drawn from the batch).
    """

    def __init__(self, params: Iterable[nn.Parameter], coupling: Coupling | str = "stein", *, lr: float,
                 optimizer: str = "adam", optimizer_kwargs: dict | None = None, optimizer_eps: float | None = None,
                 temperature: float = 1.0, prior_weight: float = 0.0, log_prior: Callable[[], Tensor] | None = None,
                 max_grad_norm: float | None = None, max_direction_norm: float | None = None,
                 proximal_weight: float = 0.0,
                 groups: int = 1, own: Sequence[nn.Parameter] = (), finite: FiniteFlags | None = None) -> None:
        self.params = list(params)
        if not self.params:
            raise ValueError("a particle optimizer needs parameters")
        if any(p.dim() == 0 for p in self.params):
            raise ValueError("every parameter needs a leading particle dim M")
        Ms = {p.shape[0] for p in self.params}
        if len(Ms) != 1:
            raise ValueError(f"parameters disagree on the particle dim M: {sorted(Ms)}")
        self.num_particles = Ms.pop()
        if groups < 1 or self.num_particles % groups:
            raise ValueError(f"groups must divide the {self.num_particles} particles, got {groups}")
        if groups > 1 and proximal_weight:
            raise ValueError("the proximal term is not available with groups > 1")
        if not (isinstance(lr, (int, float)) and lr > 0):
            raise ValueError(f"lr must be > 0, got {lr!r}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"unknown optimizer {optimizer!r}; choices: {list(OPTIMIZERS)}")
        if not (math.isfinite(proximal_weight) and proximal_weight >= 0):
            raise ValueError(f"proximal_weight must be >= 0, got {proximal_weight!r}")
        if not (math.isfinite(temperature) and temperature > 0):
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        if prior_weight and log_prior is None:
            raise ValueError("a prior weight needs log_prior")
        self.coupling = make_coupling(coupling) if isinstance(coupling, str) else coupling
        self.groups, self.proximal_weight = int(groups), float(proximal_weight)
        self.temperature, self.prior_weight, self.log_prior = float(temperature), float(prior_weight), log_prior
        self.max_grad_norm = _positive_or_none(max_grad_norm, "max_grad_norm")
        self.max_direction_norm = _positive_or_none(max_direction_norm, "max_direction_norm")
        self.prev_theta: Tensor | None = None  # (M, D) before the last step (proximal term)
        kwargs = dict(optimizer_kwargs or {})
        if optimizer_eps is not None and optimizer != "sgd":
            kwargs["eps"] = optimizer_eps
        #: the torch optimizer stepped with −φ (``optimizer``'s)
        self.torch_optimizer: torch.optim.Optimizer = OPTIMIZERS[optimizer](self.params, lr=lr, **kwargs)
        self.own = list(own)
        self.own_optimizer = adam(self.own, lr=lr, eps=optimizer_eps) if self.own else None
        self.finite = finite

    # --- the step ------------------------------------------------------------------------
    def step(self, objective: Tensor, *, embed: Embed | None = None, aux_loss: Tensor | None = None,
             aux_params: Sequence[Tensor] = (), aux_optimizer: torch.optim.Optimizer | None = None,
             logged: bool = True) -> StepResult:
        """One move of every particle from ``objective`` J ``(M,)`` (differentiable), steps 1-7.

        :param embed: the particles' outputs on the coupling's shared inputs ``(M, F)``, where
            the coupling asks for them (:attr:`Coupling.embedding_states`; a function-space
            kernel, a spread controller).
        :param aux_loss: a scalar loss whose gradient reaches ``aux_params`` (e.g. a joint
            critic's weighted value loss), clipped with J's per particle; ``aux_optimizer``
            steps them.
        :param logged: compute log p(θ) for the log even where its weight is 0.
        """
        optimizers = [self.torch_optimizer, self.own_optimizer, aux_optimizer]
        for opt in optimizers:
            if opt is not None:
                opt.zero_grad()
        moving = self.params + self.own
        log_prior = self.log_prior() if self.log_prior is not None and (logged or self.prior_weight) else None
        grad_norm = self._gradients(objective, log_prior, aux_loss, list(aux_params))
        self._flag("gradient", [p.grad for p in moving])
        coupling_stats = self._move(embed)
        for opt in optimizers[1:]:
            if opt is not None:
                opt.step()
        self._flag("parameter", moving)
        return StepResult(coupling_stats, None if log_prior is None else log_prior.detach(), grad_norm)

    def _gradients(self, objective: Tensor, log_prior: Tensor | None, aux_loss: Tensor | None,
                   aux_params: list[Tensor]) -> Tensor | None:
        """Steps 2-5 into ``p.grad``; the norms before clipping ``(M,)`` (None without clipping)."""
        temperature, w = self.temperature, self.prior_weight
        if self.max_grad_norm is None:  # one backward: clipping is the identity
            log_target = objective / temperature
            log_target = log_target + w * log_prior if w else log_target  # (w = 0 would add exact zeros)
            self._flag("log target (surrogate / temperature + prior)", log_target)
            loss = -log_target.sum()
            (loss if aux_loss is None else loss + aux_loss).backward()
            return None
        self._flag("objective", objective)
        loss = -objective.sum()
        (loss if aux_loss is None else loss + aux_loss).backward()
        moving = self.params + self.own
        norms = clip_grad_norms(moving + (aux_params if aux_loss is not None else []), self.max_grad_norm)
        with torch.no_grad():
            torch._foreach_div_([p.grad for p in moving if p.grad is not None], temperature)
        if w:
            (-(w * log_prior).sum()).backward()
        return norms

    @torch.no_grad()
    def _move(self, embed: Embed | None) -> dict[str, Tensor]:
        """Step 6 and step 7: −φ into ``p.grad``, then the torch optimizer; the coupling's stats."""
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.params]
        g = flatten(grads).neg_()  # M D, ∇ log target
        theta = flatten([p.detach() for p in self.params])  # M D
        G = self.groups  # groups as (G, M/G, D); one group as (M, D)
        grouped = (lambda x: x.view(G, -1, x.shape[1])) if G > 1 else (lambda x: x)
        phi, stats = self.coupling.direction(grouped(theta), grouped(g), embed, self.params)
        phi = phi.reshape(theta.shape)
        if self.proximal_weight > 0:
            if self.prev_theta is not None:
                phi = phi.sub_(proximal_gradient(theta, self.prev_theta), alpha=self.proximal_weight)
                self.prev_theta.copy_(theta)  # in place: it keeps its storage
            else:
                self.prev_theta = theta
        if self.max_direction_norm is not None:
            norm = torch.linalg.vector_norm(phi, dim=1, keepdim=True)  # M 1
            phi = phi.mul_((self.max_direction_norm / norm.clamp_min(1e-30)).clamp_(max=1.0))
        for p, d in zip(self.params, unflatten_into(phi, self.params)):
            if p.grad is None:
                p.grad = torch.neg(d)
            else:
                torch.neg(d, out=p.grad)
        self.torch_optimizer.step()
        return stats

    def _flag(self, what: str, values: Tensor | list[Tensor | None]) -> None:
        if self.finite is not None:
            self.finite.add(what, values)

    # --- schedule and state -----------------------------------------------------------------
    def set_lr(self, lr: float) -> None:
        """The step size of the particles' and the own parameters' optimizers."""
        for opt in (self.torch_optimizer, self.own_optimizer):
            if opt is not None:
                set_lr(opt, lr)

    @property
    def lr(self) -> float:
        return float(self.torch_optimizer.param_groups[0]["lr"])

    def state_dict(self) -> dict[str, Any]:
        """The optimizers' states (and the previous particles, with the proximal term), loadable with
        ``torch.load(weights_only=True)``."""
        state: dict[str, Any] = {"optimizer": self.torch_optimizer.state_dict()}
        if self.own_optimizer is not None:
            state["own_optimizer"] = self.own_optimizer.state_dict()
        if self.prev_theta is not None:
            state["prev_theta"] = self.prev_theta
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.torch_optimizer.load_state_dict(state["optimizer"])
        if self.own_optimizer is not None:
            self.own_optimizer.load_state_dict(state["own_optimizer"])
        self.prev_theta = state.get("prev_theta")


def make_particle_optimizer(coupling: str, params: Iterable[nn.Parameter], update: OptimizerSettings,
                            **kwargs: Any) -> ParticleOptimizer:
    """The particle optimizer of an ``update`` config section: its optimizer, step size, eps and
    proximal weight, and the registered coupling ``coupling`` with its settings read from the same
    section (:func:`~steinrl.core.couplings.coupling_from`; the lr schedule is the caller's), plus
    :class:`ParticleOptimizer`'s other keywords (``temperature``, ``groups``, ...)."""
    return ParticleOptimizer(params, coupling_from(coupling, update), lr=update.lr, optimizer=update.optimizer,
                             optimizer_eps=update.optimizer_eps, proximal_weight=update.proximal_weight, **kwargs)
