"""Repulsion controllers: the weight λ of SVGD's repulsive term, set by a rule instead of fixed.

    φ_i = (1/M) Σ_j K_ij g_j  +  λ_i (1/M) Σ_j ∇_{x_j} k(x_j, x_i)
              (driving)              (repulsive)

SVGD itself is λ = 1, where the balance of the two terms follows from the temperature α, the
kernel's space and the network: in weight space the repulsion of a large policy is a small
fraction of the driving term and changes little, in function space it can swamp PPO's clipped
step. A controller sets λ each particle step (or each iteration) from what it sees; it is the
``repulsion`` parameter of the ``stein`` update (``update.repulsion``), on either kernel space:

- ``constant`` (``weight``): λ fixed (1: SVGD).
- ``share`` (``target`` ρ, ``per``): λ so that the repulsive term's norm is ρ times the driving
  term's, per particle or per seed (group), measured in weight space, where the optimizer steps
  (a function-space repulsion after its pull-back). Stateless: reached at every step exactly.
- ``spread`` (``target``, ``lr``): SAC's automatic entropy tuning (Haarnoja et al. 2018) turned
  to the particles' spread: log λ follows log target − log spread by steps of ``lr`` (one per
  particle step), where the spread is the particles' mean pairwise squared distance of their
  outputs per shared input (a policy's action means and in-kernel log-std on B states). It needs
  those outputs: the caller hands the particle step its embedding, as for a function-space kernel.
- ``bandit`` (``arms``, ``window``, ``lookback``, ``warmup``): DvD's coefficient bandit
  (Parker-Holder et al., NeurIPS 2020, "Effective Diversity in Population Based RL"): a
  Thompson-sampling Beta–Bernoulli bandit per seed picks λ from ``arms`` at each iteration; an
  iteration's feedback is 1 when its score (the best particle's mean return) beats the maximum of
  the ``lookback`` scores before it (½ on a tie, none without a score), the posterior counts the
  last ``window`` feedbacks, and the first ``warmup`` iterations pick uniformly.

Every controller works on ``(G, M)`` norms (G seeds trained in one batch, each with its own
state), is checkpointed per seed (:meth:`Repulsion.state_dict`) and reports its state for the
logs (:meth:`Repulsion.info`). Adding one is one class here, registered with
``@REPULSIONS.register(name)``, declaring its parameters as :class:`~steinrl.registry.Option` s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from steinrl.core.stein import Forces
from steinrl.registry import Option, Registry, at_least_one, named_spec, positive

__all__ = ["Repulsion", "ConstantRepulsion", "TargetShare", "TargetSpread", "BanditRepulsion", "REPULSIONS",
           "repulsion_spec", "make_repulsion", "output_spread"]

#: Repulsion controllers by name (the choices of ``update.repulsion``).
REPULSIONS: Registry[type[Repulsion]] = Registry("repulsion controller")


def output_spread(outputs: Tensor, groups: int, states: int) -> Tensor:
    """The particles' mean pairwise squared distance per shared input ``(G,)``: from outputs
    ``(G·M, F)`` on ``states`` (B) shared inputs, the mean over pairs i ≠ j of ‖f_i − f_j‖² / B."""
    M, B = outputs.shape[0] // groups, states
    f = outputs.detach().reshape(groups, M, -1)
    c = f - f.mean(1, keepdim=True)
    # Σ_{i,j} ‖c_i − c_j‖² = 2 M Σ_i ‖c_i‖² (centred rows): no M×M matrix needed
    return 2.0 * M * c.square().sum((1, 2)) / max(M * (M - 1), 1) / B


class Repulsion:
    """Base class: λ from the step's forces (:meth:`__call__`), and the hooks a training loop calls.

    Subclasses declare ``options`` (each an ``__init__`` keyword) and implement :meth:`__call__`.
    """

    name: ClassVar[str] = ""
    doc: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    #: the controller reads the particles' outputs on shared inputs (``Forces.spread``)
    needs_embedding: ClassVar[bool] = False

    def __call__(self, forces: Forces) -> Tensor:
        """λ ``(G, M)`` (per particle) or ``(G, 1)`` (per seed) for this particle step."""
        raise NotImplementedError

    def start(self, iteration: int, seeds: Sequence[int]) -> None:
        """A training iteration ``iteration`` (counted from 0) begins, for the run seeds ``seeds`` (one per group)."""

    def observe(self, scores: Sequence[float]) -> None:
        """The iteration's score per seed (the best particle's mean return; NaN: none this iteration)."""

    def info(self) -> dict[str, Tensor]:
        """The controller's state for the logs, each ``(G,)``."""
        return {}

    def state_dict(self, group: int = 0, groups: int = 1) -> dict[str, Tensor]:
        """Seed ``group``'s state (tensors, loadable with ``torch.load(weights_only=True)``)."""
        return {}

    def load_state_dict(self, states: Sequence[Mapping[str, Tensor]]) -> None:
        """Continue from one :meth:`state_dict` per seed."""

    def spec(self) -> dict[str, Any]:
        """The controller as a config value (``make_repulsion(c.spec())`` rebuilds it)."""
        return {"name": self.name, **{o.name: getattr(self, o.name) for o in self.options}}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.spec().items() if k != "name")
        return f"{type(self).__name__}({params})"


@REPULSIONS.register("constant")
class ConstantRepulsion(Repulsion):
    """λ fixed; 1 is SVGD's direction."""

    name = "constant"
    doc = "λ fixed (1: SVGD's direction)."
    options = (Option("weight", float, 1.0, "λ, the repulsive term's weight (1: SVGD; 0: no repulsion)",
                      check=lambda v: None if v >= 0 else "must be >= 0"),)

    def __init__(self, weight: float = 1.0) -> None:
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"weight must be >= 0, got {weight!r}")
        self.weight = float(weight)

    def __call__(self, forces: Forces) -> Tensor:
        norm = forces.repulsive_norm
        return torch.full((norm.shape[0], 1), self.weight, dtype=norm.dtype, device=norm.device)


@REPULSIONS.register("share")
class TargetShare(Repulsion):
    """λ = ρ ‖driving‖ / ‖repulsion‖, per particle or per seed (0 where there is no repulsion)."""

    name = "share"
    doc = "λ makes the repulsion ρ times the driving term's norm (weight space), per particle or seed."
    options = (Option("target", float, 0.1, "ρ, the repulsive term's norm as a share of the driving term's",
                      check=positive),
               Option("per", str, "particle", "particle: each particle's own share; seed: the Frobenius norms of "
                      "each seed's terms", choices=("particle", "seed")))

    def __init__(self, target: float = 0.1, per: str = "particle") -> None:
        if not (math.isfinite(target) and target > 0):
            raise ValueError(f"target must be > 0, got {target!r}")
        if per not in ("particle", "seed"):
            raise ValueError(f"per must be particle or seed, got {per!r}")
        self.target, self.per = float(target), per

    def __call__(self, forces: Forces) -> Tensor:
        att, rep = forces.attractive_norm, forces.repulsive_norm  # (G, M)
        if self.per == "seed":
            att, rep = att.square().sum(-1, keepdim=True).sqrt(), rep.square().sum(-1, keepdim=True).sqrt()
        return torch.where(rep > 0, self.target * att / rep.clamp_min(torch.finfo(rep.dtype).tiny), 0.0)


@REPULSIONS.register("spread")
class TargetSpread(Repulsion):
    """log λ ← clamp(log λ + lr (log target − log spread)), one step per particle step, per seed."""

    name = "spread"
    doc = "λ learned so that the particles' spread on shared states tracks a target (SAC's α rule)."
    options = (Option("target", float, 0.01, "the spread to track: mean pairwise squared distance of the particles' "
                      "outputs per shared input", check=positive),
               Option("lr", float, 0.05, "step of log λ per particle step, times log(target / spread)",
                      check=positive),
               Option("initial", float, 1.0, "λ at the start", check=positive),
               Option("states", int, 64, "B shared inputs the spread is measured on (a function-space kernel's own "
                      "states take precedence)", check=lambda v: None if v >= 2 else "must be >= 2"))
    needs_embedding = True
    #: λ stays within [1e-3, 1e3] of its start
    LIMIT = 1e3

    def __init__(self, target: float = 0.01, lr: float = 0.05, initial: float = 1.0, states: int = 64) -> None:
        for key, value in (("target", target), ("lr", lr), ("initial", initial)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{key} must be > 0, got {value!r}")
        self.target, self.lr, self.initial, self.states = float(target), float(lr), float(initial), int(states)
        self.log_weight: Tensor | None = None  # (G,), built at the first step

    def __call__(self, forces: Forces) -> Tensor:
        if forces.spread is None:
            raise ValueError("the spread controller needs the particles' outputs on shared inputs (an embedding)")
        spread = forces.spread
        if self.log_weight is None:
            self.log_weight = torch.full(spread.shape, math.log(self.initial), dtype=spread.dtype,
                                         device=spread.device)
        step = self.lr * (math.log(self.target) - spread.clamp_min(torch.finfo(spread.dtype).tiny).log())
        bound = math.log(self.LIMIT)
        self.log_weight.add_(step).clamp_(math.log(self.initial) - bound, math.log(self.initial) + bound)
        return self.log_weight.exp()[:, None]

    def info(self) -> dict[str, Tensor]:
        return {} if self.log_weight is None else {"repulsion_log_weight": self.log_weight.clone()}

    def state_dict(self, group: int = 0, groups: int = 1) -> dict[str, Tensor]:
        return {} if self.log_weight is None else {"log_weight": self.log_weight[group].detach().clone()}

    def load_state_dict(self, states: Sequence[Mapping[str, Tensor]]) -> None:
        if states and "log_weight" in states[0]:
            self.log_weight = torch.stack([torch.as_tensor(s["log_weight"]) for s in states])


def _arms_check(arms: list[float]) -> str | None:
    if len(arms) < 2:
        return "must list at least 2 weights"
    return None if all(math.isfinite(a) and a >= 0 for a in arms) else "must be weights >= 0"


@REPULSIONS.register("bandit")
class BanditRepulsion(Repulsion):
    """DvD's Thompson-sampling bandit over λ ∈ ``arms``, one per seed, an arm per iteration."""

    name = "bandit"
    doc = "DvD's Beta–Bernoulli Thompson sampling over λ ∈ arms, rewarded when the best return improves."
    options = (Option("arms", list[float], [0.0, 1.0], "the weights λ to choose from (DvD: 0 and its λ)",
                      check=_arms_check),
               Option("window", int, 50, "feedbacks the Beta posteriors count (the most recent)", check=at_least_one),
               Option("lookback", int, 5, "an iteration improves when its score beats the maximum of this many "
                      "before it", check=at_least_one),
               Option("warmup", int, 5, "first iterations that pick an arm uniformly at random",
                      check=lambda v: None if v >= 0 else "must be >= 0"))

    def __init__(self, arms: Sequence[float] = (0.0, 1.0), window: int = 50, lookback: int = 5,
                 warmup: int = 5) -> None:
        problem = _arms_check(list(arms))
        if problem or window < 1 or lookback < 1 or warmup < 0:
            raise ValueError(f"bandit: arms {problem or 'ok'}, window and lookback >= 1, warmup >= 0; got {arms!r}, "
                             f"{window!r}, {lookback!r}, {warmup!r}")
        self.arms, self.window, self.lookback, self.warmup = [float(a) for a in arms], window, lookback, warmup
        self.chosen: list[list[int]] = []  # per seed: the arm of every iteration so far
        self.scores: list[list[float]] = []  # per seed: the score of every iteration so far
        self.weight: Tensor | None = None  # (G, 1), the current iteration's λ (written in place)

    def feedback(self, scores: Sequence[float]) -> list[float | None]:
        """Each iteration's feedback from its score and the ``lookback`` before it (None: no feedback)."""
        out: list[float | None] = []
        for t, score in enumerate(scores):
            before = [s for s in scores[max(0, t - self.lookback):t] if not math.isnan(s)]
            if math.isnan(score) or t < self.lookback or not before:
                out.append(None)
            else:
                out.append(1.0 if score > max(before) else 0.5 if score == max(before) else 0.0)
        return out

    def posterior(self, chosen: Sequence[int], scores: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """Beta(a, b) of every arm from the last ``window`` feedbacks: a = 1 + wins, b = 1 + losses."""
        pairs = [(arm, f) for arm, f in zip(chosen, self.feedback(scores)) if f is not None][-self.window:]
        wins, losses = np.ones(len(self.arms)), np.ones(len(self.arms))
        for arm, f in pairs:
            wins[arm] += f
            losses[arm] += 1.0 - f
        return wins, losses

    def start(self, iteration: int, seeds: Sequence[int]) -> None:
        G = len(seeds)
        if not self.chosen:
            self.chosen, self.scores = [[] for _ in range(G)], [[] for _ in range(G)]
        picks = []
        for g, seed in enumerate(seeds):  # a draw seeded by (seed, iteration): a resume draws the same
            rng = np.random.default_rng(np.random.SeedSequence([seed, iteration, 0x5EED]))
            if len(self.chosen[g]) < self.warmup:
                arm = int(rng.integers(len(self.arms)))
            else:
                a, b = self.posterior(self.chosen[g], self.scores[g])
                arm = int(np.argmax(rng.beta(a, b)))
            picks.append(arm)
            self.chosen[g].append(arm)
        values = torch.tensor([[self.arms[a]] for a in picks], dtype=torch.float64)
        if self.weight is None:
            self.weight = values
        else:
            self.weight.copy_(values)  # in place: a replayed graph reads it

    def observe(self, scores: Sequence[float]) -> None:
        for g, score in enumerate(scores):
            if len(self.scores[g]) < len(self.chosen[g]):
                self.scores[g].append(float(score))

    def __call__(self, forces: Forces) -> Tensor:
        G = forces.repulsive_norm.shape[0]
        if self.weight is None:  # outside a training loop (no iteration started): the first arm... none chosen
            raise RuntimeError("the bandit controller picks λ once per iteration: call start() first")
        if self.weight.device != forces.repulsive_norm.device or self.weight.dtype != forces.repulsive_norm.dtype:
            self.weight = self.weight.to(forces.repulsive_norm)
        return self.weight[:G]

    def info(self) -> dict[str, Tensor]:
        return {} if self.weight is None else {"repulsion_arm_weight": self.weight[:, 0].clone()}

    def state_dict(self, group: int = 0, groups: int = 1) -> dict[str, Tensor]:
        if not self.chosen:
            return {}
        return {"chosen": torch.tensor(self.chosen[group], dtype=torch.int64),
                "scores": torch.tensor(self.scores[group], dtype=torch.float64)}

    def load_state_dict(self, states: Sequence[Mapping[str, Tensor]]) -> None:
        if states and "chosen" in states[0]:
            self.chosen = [[int(a) for a in s["chosen"].tolist()] for s in states]
            self.scores = [[float(x) for x in s["scores"].tolist()] for s in states]


def repulsion_spec(value: str | Mapping[str, Any], current: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A controller config value normalised to ``{name, every parameter}``, checked (a name, or a
    mapping of ``name`` and parameters; without ``name``: parameters of ``current``)."""
    return named_spec(value, current, REPULSIONS, "repulsion controller")


def make_repulsion(spec: str | Mapping[str, Any] | Repulsion | None = None) -> Repulsion | None:
    """A controller from its name, spec mapping or itself; None for SVGD's own λ = 1 (``constant``
    at weight 1), so that the direction keeps its fused product and its exact numbers."""
    if spec is None or isinstance(spec, Repulsion):
        return spec
    spec = repulsion_spec(spec)
    if spec == {"name": "constant", "weight": 1.0}:
        return None
    return REPULSIONS.get(spec.pop("name"))(**spec)
