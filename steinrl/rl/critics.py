"""Per-particle critics for the a2c / ppo estimators, registered by name.

- ``mlp`` (:class:`ValueEnsemble`): a value MLP per particle, V_i(s) = mu_i + sigma_i f_i(s),
  batched as one :class:`~steinrl.core.ensemble.EnsembleMLP`. ``mu_i, sigma_i`` are the
  mean and std of particle i's latest value targets, so f_i regresses targets of unit
  scale whatever the task's reward scale. Fitted by a few minibatch Adam steps.
- ``linear`` (:class:`LinearBaseline`): rllab's ``LinearFeatureBaseline`` per particle
  (the S²VGD code's actor-critic), one batched least-squares solve.

A critic is plain regression, not part of θ and not moved by SVGD. Interface:
:meth:`Critic.values` on a rollout, :meth:`Critic.fit` on its compacted samples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import torch
from torch import Tensor, nn

from steinrl.core.ensemble import INITS, EnsembleMLP
from steinrl.core.optim import adam, gradient_step
from steinrl.registry import Option, Registry, at_least_one, positive, setting, settings_options, step_size
from steinrl.rl.policy import ObsNormalizer
from steinrl.rl.rollout import Batch
from steinrl.rl.samples import Samples
from steinrl.rl.value_regression import ValueRegression

__all__ = ["CriticSettings", "ValueEnsembleSettings", "LinearBaselineSettings", "Critic", "ValueEnsemble",
           "LinearBaseline", "CRITICS"]



@dataclass(frozen=True)
class CriticSettings:
    """A critic's own options in the ``critic`` config section (none: the base)."""


@dataclass(frozen=True)
class ValueEnsembleSettings(CriticSettings):
    """The ``mlp`` critic's options."""

    hidden: list[int] = setting([32, 32], "Hidden layer sizes of each particle's value MLP.", kind=list[int],
                                check=at_least_one)
    lr: float = setting(3e-3, "Adam step size of the value networks.", check=step_size)
    steps: int = setting(10, "Value-regression steps per iteration (not joint).", check=at_least_one)
    minibatch: int = setting(1024, "Samples per particle in each value-regression step (not joint).",
                             check=at_least_one)
    init: str = setting("glorot", "Weight init of the value MLPs (orthogonal: gain sqrt 2 hidden, 1 output, bias 0, "
                        "PPO's; torch: nn.Linear's default, SB3's with ortho_init false).", choices=INITS)
    joint: bool = setting(
        False, "Fit in the policy's update steps: each particle step (every PPO minibatch) also takes an Adam step on "
        "the value loss of its samples, V unstandardised (SB3's, CleanRL's PPO); false: steps regression steps of its "
        "own after the policy update.")
    vf_coef: float = setting(0.5, "joint: weight of the value loss in the gradient whose norm estimator.max_grad_norm "
                             "clips per particle (SB3's vf_coef; no other effect under Adam).", check=positive)
    clip_range_vf: float | None = setting(
        None, "joint: clip V(s) to within this of its value at the rollout in the value loss (SB3's clip_range_vf, in "
        "the units of the (scaled) returns); null: no value clipping.", kind=(float, None), check=positive)
    eps: float | None = setting(None, "Adam's epsilon for the value networks (null: torch's 1e-8; SB3's PPO uses "
                                "1e-5).", kind=(float, None), check=positive)
    overlap: bool = setting(
        False, "Not joint, on CPU: run the regression steps on a second thread while the policy updates (the same "
        "numbers: each touches only its own parameters); pays where two cores are free to the run. Set aside when an "
        "iteration is one CUDA graph (a capture records its own thread only).")


@dataclass(frozen=True)
class LinearBaselineSettings(CriticSettings):
    """The ``linear`` critic's options."""

    reg: float = setting(1e-5, "Ridge coefficient of the least-squares fit (rllab: 1e-5).", check=positive)


class Critic(nn.Module):
    """Base class: per-particle state values.

    ``fit_target`` says what the estimator should regress it on: ``"lambda_returns"``
    (GAE's λ-returns) or ``"returns"`` (discounted returns-to-go). ``Settings``: its options in
    the ``critic`` config section (a frozen dataclass; ``options`` is derived from it).
    """

    Settings: ClassVar[type] = CriticSettings
    options: ClassVar[tuple[Option, ...]] = ()
    fit_target = "lambda_returns"
    optimizer: torch.optim.Optimizer | None = None  #: its fit's optimizer, if it has one
    joint = False  #: fitted in the policy's particle steps (its value loss alongside J), not by a fit of its own
    #: its own fit runs on a second thread beside the policy's steps (:func:`steinrl.rl.critic_fit.fit_beside`)
    overlap = False
    pending: Future | None = None  #: a fit still running on that thread

    def settle(self) -> None:
        """Wait for a fit still running beside the policy (a step that raised leaves one behind):
        a checkpoint, or the next fit, never reads the critic mid-fit."""
        if self.pending is not None:
            wait([self.pending])
            self.pending = None

    def values(self, batch: Batch) -> Tensor:
        """V of every observation of ``batch``, ``(T + 1, M, E)`` float64 (on the critic's device)."""
        raise NotImplementedError

    def samples_columns(self, n: int) -> bool:
        """Whether a fit on ``n`` samples per particle regresses on random columns (:meth:`draw_columns`)."""
        return False

    def draw_columns(self, n: int, generators: list[torch.Generator]) -> Tensor:
        """A fit's random columns of ``n`` samples per particle, one generator per group of
        particles (seeds in one batch)."""
        raise NotImplementedError

    def fit(self, samples: Samples, columns: Tensor | None = None) -> Tensor:
        """Regress ``samples.targets`` ``(M, n)`` (on ``columns``, where the critic samples them);
        returns each particle's value loss ``(M,)`` (mean squared error, return units)."""
        raise NotImplementedError

    def prepare_fit(self, samples: Samples, columns: Tensor | None = None) -> Callable[[], Tensor]:
        """:meth:`fit` in two parts: what reads state shared with the policy (the observation
        normaliser) is done now; the returned call does the rest and returns the value loss.
        The call touches only the critic's own parameters and optimizer, so it may run on
        another thread while the policy updates (``critic.overlap``)."""
        return partial(self.fit, samples, columns)

    def extra_state(self) -> dict:
        """State beyond ``state_dict`` (e.g. an optimizer's) for checkpoints."""
        return {}

    def load_extra_state(self, state: dict) -> None:
        pass


#: observations per particle in one block of :meth:`ValueEnsemble.values` on CPU (fastest of 128-2048)
_CPU_BLOCK = 512


def _batch_obs(batch: Batch, device: torch.device) -> Tensor:
    T1, M, E, d = batch.obs.shape
    return batch.obs.to(device).permute(1, 0, 2, 3).reshape(M, T1 * E, d)  # M (T+1)E d


def _to_time_major(values: Tensor, batch: Batch) -> Tensor:
    T1, M, E = batch.obs.shape[:3]
    return values.view(M, T1, E).permute(1, 0, 2).double()


class ValueEnsemble(Critic):
    """M value networks evaluated in one batched call, fitted by minibatch Adam steps.

    Two ways to fit (``joint``):

    - on its own (default): after the policy update, :meth:`fit` takes ``steps`` Adam steps
      on random minibatches of ``minibatch`` samples per particle, regressing targets
      standardised per particle (V = mu + sigma f, mu and sigma the latest targets' mean and std);
    - jointly with the policy (SB3's and CleanRL's PPO): every particle step (each PPO
      minibatch of each epoch) also takes one Adam step on :meth:`value_loss` of the same
      samples, V = f (no target standardisation; with reward scaling the returns are of
      unit order anyway), its gradient weighted by ``vf_coef`` and clipped with the policy's
      per particle (``estimator.max_grad_norm``).

    :param num_particles: M.
    :param obs_dim: observation size.
    :param obs_norm: the policy's observation normaliser (shared, not copied).
    :param activation: hidden activation (the policy's).
    :param generator: draws the initial weights.
    :param hidden, lr, steps, minibatch, init, joint, vf_coef, clip_range_vf, eps: the declared options.
    """

    Settings = ValueEnsembleSettings
    options = settings_options(Settings)

    def __init__(self, num_particles: int, obs_dim: int, obs_norm: ObsNormalizer, activation: str = "tanh",
                 generator: torch.Generator | None = None, hidden: Sequence[int] = (32, 32), lr: float = 3e-3,
                 steps: int = 10, minibatch: int = 1024, init: str = "glorot", joint: bool = False,
                 vf_coef: float = 0.5, clip_range_vf: float | None = None, eps: float | None = None,
                 overlap: bool = False):
        super().__init__()
        self.overlap = bool(overlap)
        self.net = EnsembleMLP(num_particles, obs_dim, list(hidden), 1, activation=activation,
                               layer="gaussian", output_gain=1.0, init=init, generator=generator)
        object.__setattr__(self, "obs_norm", obs_norm)  # the policy's: used, not owned (no submodule)
        self.steps, self.minibatch = int(steps), int(minibatch)
        self.joint, self.vf_coef, self.clip_range_vf = bool(joint), float(vf_coef), clip_range_vf
        self.register_buffer("target_mean", torch.zeros(num_particles, 1))
        self.register_buffer("target_std", torch.ones(num_particles, 1))
        self.optimizer = adam(self.net.parameters(), lr=lr, eps=eps)

    def forward(self, obs: Tensor) -> Tensor:
        """Values ``(M, B)`` in return units for raw observations ``(M, B, obs_dim)``."""
        return self.target_mean + self.target_std * self.net(self.obs_norm(obs)).squeeze(-1)

    @torch.no_grad()
    def values(self, batch: Batch) -> Tensor:
        """On CPU in blocks of ``_CPU_BLOCK`` observations per particle: the activations of
        one block stay in cache (16 x 5050 observations at once make 10 MB per hidden layer;
        the block sizes measured: research/results/train_throughput.md). The same numbers to
        float32 rounding."""
        obs = _batch_obs(batch, self.target_mean.device)
        block = _CPU_BLOCK if obs.device.type == "cpu" else obs.shape[1]
        dense = self.net.dense()
        f = torch.cat([self.net(self.obs_norm(obs[:, i:i + block]), dense) for i in range(0, obs.shape[1], block)], 1)
        return _to_time_major(self.target_mean + self.target_std * f.squeeze(-1), batch)

    def value_loss(self, obs: Tensor, targets: Tensor, mask: Tensor, old_values: Tensor | None = None) -> Tensor:
        """Each particle's mean squared error ``(M,)`` of V on its masked samples (differentiable).

        :param obs: ``(M, B, obs_dim)`` raw observations.
        :param targets: ``(M, B)`` value targets (return units).
        :param mask: ``(M, B)`` 1 for real samples.
        :param old_values: ``(M, B)`` V at the rollout; with ``clip_range_vf`` the prediction
            is clipped to within it of them (SB3's value clipping: the clipped prediction's
            error alone, not baselines' maximum of both errors).
        """
        pred = self(obs)
        if self.clip_range_vf is not None and old_values is not None:
            pred = old_values + (pred - old_values).clamp(-self.clip_range_vf, self.clip_range_vf)
        return ((pred - targets).square() * mask).sum(1) / mask.sum(1).clamp_min(1.0)

    def samples_columns(self, n: int) -> bool:
        return self.minibatch < n

    def draw_columns(self, n: int, generators: list[torch.Generator]) -> Tensor:
        """``(steps, M, minibatch)`` columns in ``[0, n)``, each group's from its own generator,
        one draw per step and generator, as the plain loop draws them (on a device, one draw of
        all steps would not give the same numbers)."""
        M, device = self.target_mean.shape[0], self.target_mean.device
        return torch.stack([torch.cat([torch.randint(n, (M // len(generators), self.minibatch), generator=g,
                                                     device=device) for g in generators])
                            for _ in range(self.steps)])

    def fit(self, samples: Samples, columns: Tensor | None = None) -> Tensor:
        """``steps`` Adam steps on ``minibatch`` random columns per particle (``columns``, from
        :meth:`draw_columns`; all samples if there are no more than ``minibatch``); padding is
        masked out of the loss.

        What the plain loop (per step: draw, gather, forward, masked mean squared error,
        autograd backward, Adam) computes, faster: the standardised targets and every step's
        columns gathered once, the mask folded into per-sample weights, and each step's
        forward and backward by :class:`~steinrl.rl.value_regression.ValueRegression` (hand-written, into buffers reused
        across the steps).

        :return: ``(M,)`` each particle's mean squared error over the regression steps, in
            return units (their mean is the value loss, as SB3 logs it).
        """
        return self.prepare_fit(samples, columns)()

    def prepare_fit(self, samples: Samples, columns: Tensor | None = None) -> Callable[[], Tensor]:
        """The normalised inputs, standardised targets and gathered columns now; the Adam steps
        in the returned call (:meth:`Critic.prepare_fit`)."""
        return partial(self._regress, *self._regression_data(samples, columns))

    def _regress(self, x: Tensor, z: Tensor, weight: Tensor, std: Tensor) -> Tensor:
        """The ``steps`` Adam steps on :meth:`_regression_data`'s tensors; the value loss ``(M,)``."""
        regression = ValueRegression(self.net, x.shape[-1])
        total = torch.zeros(x.shape[1], dtype=torch.float32, device=x.device)
        for s in range(self.steps):
            gradient_step(partial(regression.loss_and_gradients, x[s], z[s], weight[s], total), [self.optimizer])
        return total / max(self.steps, 1) * std.square()

    @torch.no_grad()
    def _regression_data(self, samples: Samples, columns: Tensor | None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Sets the target statistics; returns every step's inputs ``(steps, M, obs_dim, n)``
        (feature-major views, normalised), standardised targets ``(steps, M, 1, n)``, weights
        ``(steps, M, 1, n)`` (mask / the step's count of real samples) and the targets' std ``(M,)``.
        Without sampling (``minibatch`` >= the samples), one tensor expanded over the steps."""
        obs, mask = self.obs_norm(samples.obs), samples.mask
        targets = samples.targets.to(torch.float32)
        M, B = targets.shape
        count = mask.sum(1).clamp_min(1.0)
        mean = (targets * mask).sum(1) / count
        std = (((targets - mean[:, None]) * mask).square().sum(1) / count).sqrt().clamp_min(1e-6)
        self.target_mean.copy_(mean[:, None])
        self.target_std.copy_(std[:, None])
        z = (targets - self.target_mean) / self.target_std  # (M, B), unit scale
        S = self.steps
        if not self.samples_columns(B):
            x, zt, mk = obs.mT.contiguous()[None], z[:, None][None], mask[:, None][None]
            return (x.expand(S, *x.shape[1:]), zt.expand(S, *zt.shape[1:]),
                    (mk / count[:, None, None]).expand(S, *mk.shape[1:]), std)
        if columns is None:
            raise ValueError(f"a fit on {B} samples per particle regresses on {self.minibatch} random columns: "
                             "give them (draw_columns)")
        flat = (columns + torch.arange(0, M * B, B, device=obs.device)[:, None]).view(-1)  # columns of (M * B)
        n = self.minibatch
        # the inputs as a transposed view (the matmuls take it as it is: no transposing copy)
        x = obs.reshape(M * B, -1).index_select(0, flat).view(S, M, n, -1).mT
        zt, mk = (t.reshape(-1).index_select(0, flat).view(S, M, 1, n) for t in (z, mask))
        return x, zt, mk / mk.sum(-1, keepdim=True).clamp_min(1.0), std

    def extra_state(self) -> dict:
        return {"optimizer": self.optimizer.state_dict()}

    def load_extra_state(self, state: dict) -> None:
        self.optimizer.load_state_dict(state["optimizer"])


class LinearBaseline(Critic):
    """rllab's ``LinearFeatureBaseline``, one per particle, fitted in one batched solve.

    V_i(s, t) = w_iᵀ f(s, t) with f = [clip(s, ±10), clip(s, ±10)², t/100, (t/100)², (t/100)³, 1]
    (``t`` the step index within the episode), fitted by ridge-regularised least squares
    to discounted returns. Unfitted, it predicts 0 (as rllab's).

    :param num_particles: M.
    :param obs_dim: observation size.
    :param reg: ridge coefficient (multiplied by 10, up to 5 times, if the solve is not finite).
    """

    Settings = LinearBaselineSettings
    options = settings_options(Settings)
    fit_target = "returns"

    def __init__(self, num_particles: int, obs_dim: int, reg: float = 1e-5):
        super().__init__()
        self.reg = reg
        self.register_buffer("coeffs", torch.zeros(num_particles, 2 * obs_dim + 4, dtype=torch.float64))

    @staticmethod
    def features(obs: Tensor, t: Tensor) -> Tensor:
        """Features ``(M, B, 2 obs_dim + 4)`` float64 of obs ``(M, B, obs_dim)`` at episode steps ``t`` ``(M, B)``."""
        o = obs.to(torch.float64).clamp(-10.0, 10.0)
        a = (t.to(torch.float64) / 100.0).unsqueeze(-1)
        return torch.cat([o, o.square(), a, a.square(), a.pow(3), torch.ones_like(a)], dim=-1)

    def forward(self, obs: Tensor, t: Tensor) -> Tensor:
        """Values ``(M, B)`` (float64)."""
        return (self.features(obs, t) @ self.coeffs.unsqueeze(-1)).squeeze(-1)

    @torch.no_grad()
    def values(self, batch: Batch) -> Tensor:
        device = self.coeffs.device
        M = batch.obs.shape[1]
        t = batch.timestep.to(device).permute(1, 0, 2).reshape(M, -1)
        return _to_time_major(self(_batch_obs(batch, device), t), batch)

    def fit(self, samples: Samples, columns: Tensor | None = None) -> Tensor:
        """Least squares of the returns on the features over the masked samples (no columns: all of them).

        :return: ``(M,)`` each particle's mean squared error of its previous coefficients on
            these returns (the value loss).
        """
        f = self.features(samples.obs, samples.timestep)  # M B k
        w = samples.mask.to(torch.float64).unsqueeze(-1)
        y = samples.targets.to(torch.float64).unsqueeze(-1)  # M B 1
        count = w.sum((1, 2)).clamp_min(1.0)
        before = (((f @ self.coeffs.unsqueeze(-1)) - y).square() * w).sum((1, 2)) / count
        gram = (f * w).mT @ f  # M k k
        rhs = (f * w).mT @ y  # M k 1
        eye = torch.eye(f.shape[-1], dtype=torch.float64, device=f.device)
        reg = self.reg
        for _ in range(5):
            # An LU solve of the regularised normal equations (rllab calls lstsq on the same
            # square system): torch's batched lstsq is not bitwise reproducible run to run.
            coeffs, info = torch.linalg.solve_ex(gram + reg * eye, rhs)
            coeffs = coeffs.squeeze(-1)
            if bool((info == 0).all()) and bool(torch.isfinite(coeffs).all()):
                break
            reg *= 10.0
        self.coeffs.copy_(torch.nan_to_num(coeffs))
        return before


#: Critics by name.
CRITICS: Registry[type[Critic]] = Registry("critic")
CRITICS.register("mlp", ValueEnsemble)
CRITICS.register("linear", LinearBaseline)
