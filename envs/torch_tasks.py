"""Torch twins of the control tasks, batched on any device (for device-resident rollouts).

Each class mirrors one numpy task (same dynamics, reward, termination, truncation, reset
distribution, observation and next-step autoreset; see :mod:`steinrl.envs.torch_core`) and
takes every physical constant from it: the derived ones (``M + m``, ``m l / 2``, the pivot
inertia, the double pendulum's mass-matrix and gravity coefficients, the joint damping)
from an instance of the numpy physics class, the task's thresholds, rewards and reset
ranges from the numpy modules. The arithmetic follows the numpy code operation by
operation, so in float64 the two agree to rounding (~1e-15 per step).

    from steinrl.envs.torch_tasks import make_torch_vec
    task = make_torch_vec("CartpoleSwingUp", 4096, device="cuda", dtype=torch.float32)
    obs = task.reset(seed=0)                                  # (4096, 4) on cuda
    obs, reward, terminated, truncated = task.step(actions)   # actions (4096,) or (4096, 1)

Tasks: :class:`TorchCartpole`, :class:`TorchCartpoleSwingUp`, :class:`TorchDoublePendulum`
and the damped :class:`TorchCartpoleRllab`, :class:`TorchCartpoleSwingUpRllab`.
"""

from __future__ import annotations

from typing import Any

import torch

from .cartpole import (
    ALIVE_REWARD,
    FORCE_COST,
    MAX_ROTATION_PER_STEP,
    MAX_TRANSLATION_PER_STEP,
    SWINGUP_OUT_OF_BOUNDS_REWARD,
    SWINGUP_X_LIMIT,
    THETA_THRESHOLD,
    X_THRESHOLD,
    CartPolePhysics,
    CartpoleSwingUpTask,
    CartpoleTask,
)
from .cartpole_rllab import CartpoleRllabTask, CartpoleSwingUpRllabTask
from .double_pendulum import FRAME_SKIP, RESET_STD, TARGET, DoublePendulumPhysics, DoublePendulumTask
from .registration import SHORT_NAMES
from .torch_core import TorchVectorTask, semi_implicit_euler


class TorchCartpole(TorchVectorTask):
    """Cart-pole balancing (twin of :class:`~steinrl.envs.cartpole.CartpoleTask`).

    State rows ``[x, ẋ, θ, θ̇]`` (m, m/s, rad, rad/s); obs the same four; force in N.
    """

    numpy_task = CartpoleTask

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        p = CartPolePhysics(1, joint_damping=self.numpy_task.joint_damping)
        self.dt = p.dt  # s
        self.total_mass = p.total_mass  # M + m, kg
        self.half_ml = p.half_ml  # h = m l / 2, kg m
        self.pivot_inertia = p.pivot_inertia  # I_p, kg m²
        self.gravity = p.gravity  # m/s²
        self.joint_damping = p.joint_damping  # b of −b θ̇³, N m s³
        self.max_x_dot = MAX_TRANSLATION_PER_STEP / p.dt  # m/s, Box2D's motion caps
        self.max_theta_dot = MAX_ROTATION_PER_STEP / p.dt  # rad/s
        caps = self.tensor([self.max_x_dot, self.max_theta_dot])[:, None]  # (2, 1): [ẋ, θ̇] rows
        self.velocity_caps = (-caps, caps)
        self.inertia_diagonal = self.tensor([self.pivot_inertia, self.total_mass])[:, None]  # (2, 1): [I_p, M + m]
        self.mass_inertia = self.tensor(self.total_mass * self.pivot_inertia)  # (M + m) I_p, 0-dim
        self.reset_low = self.tensor(self.numpy_task.reset_low)[:, None]  # (4, 1)
        self.reset_range = self.tensor(self.numpy_task.reset_high - self.numpy_task.reset_low)[:, None]

    def draw_initial_state(self, n: int, generator: torch.Generator, steps: tuple[int, ...] = ()) -> torch.Tensor:
        u = torch.rand((*steps, 4, n), generator=generator, dtype=self.dtype, device=self.device)
        return u.mul_(self.reset_range).add_(self.reset_low)  # U(low, high) per row

    def physics_step(self, state: torch.Tensor, force: torch.Tensor) -> None:
        """Semi-implicit Euler step of ``state`` ``(4, n)`` in place under ``force`` ``(n,)``
        N (the numpy :meth:`CartPolePhysics.step`, operation for operation)."""
        x, x_dot, theta, theta_dot = state
        h = self.half_ml
        sin_theta = torch.sin(theta)
        h_cos = torch.cos(theta).mul_(h)  # h cos θ, kg m
        dt_over_det = torch.div(self.dt, torch.addcmul(self.mass_inertia, h_cos, h_cos, value=-1))  # dt / det
        rhs0 = torch.addcmul(force, theta_dot * theta_dot, sin_theta, value=-h)  # F − h sin θ θ̇², N
        rhs1 = sin_theta * (h * self.gravity)  # h g sin θ, N m
        if self.joint_damping:
            rhs1 -= (theta_dot * theta_dot).mul_(theta_dot).mul_(self.joint_damping)  # − b θ̇³
        # dt·[ẍ, θ̈] = dt/det · ([I_p, M + m] ⊙ rhs + h cos θ · [rhs1, rhs0]), rows [ẋ, θ̇]
        rhs = torch.stack((rhs0, rhs1))  # (2, n)
        dv = torch.addcmul(rhs * self.inertia_diagonal, rhs.flip(0), h_cos).mul_(dt_over_det)
        semi_implicit_euler(state[0::2], state[1::2], dv, self.velocity_caps, self.dt)  # rows [x, θ], [ẋ, θ̇]

    def advance(self, state: torch.Tensor, effort: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.physics_step(state, effort)
        x, _, theta, _ = state
        terminated = (x.abs() > X_THRESHOLD) | (theta.abs() > THETA_THRESHOLD)
        # reward = notdone · (10 − (1 − cos θ) − 1e-5 F²)
        reward = (effort * effort).mul_(-FORCE_COST).add_(ALIVE_REWARD - 1.0).add_(torch.cos(theta))
        return reward.masked_fill_(terminated, 0.0), terminated

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        return state.T.contiguous()  # [x, ẋ, θ, θ̇]


class TorchCartpoleSwingUp(TorchCartpole):
    """Cart-pole swing-up (twin of :class:`~steinrl.envs.cartpole.CartpoleSwingUpTask`)."""

    numpy_task = CartpoleSwingUpTask

    def advance(self, state: torch.Tensor, effort: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.physics_step(state, effort)
        x, _, theta, _ = state
        terminated = x.abs() > SWINGUP_X_LIMIT  # reward cos θ, or −100 on the terminating step
        return torch.cos(theta).masked_fill_(terminated, SWINGUP_OUT_OF_BOUNDS_REWARD), terminated


class TorchCartpoleRllab(TorchCartpole):
    """Damped cart-pole balancing (twin of :class:`~steinrl.envs.cartpole_rllab.CartpoleRllabTask`)."""

    numpy_task = CartpoleRllabTask


class TorchCartpoleSwingUpRllab(TorchCartpoleSwingUp):
    """Damped swing-up (twin of :class:`~steinrl.envs.cartpole_rllab.CartpoleSwingUpRllabTask`)."""

    numpy_task = CartpoleSwingUpRllabTask


class TorchDoublePendulum(TorchVectorTask):
    """Double pendulum (twin of :class:`~steinrl.envs.double_pendulum.DoublePendulumTask`).

    State rows ``[θ1, θ2, ω1, ω2]`` (rad, rad/s); obs ``[sin θ1, cos θ1, ω1, sin θ2, cos θ2,
    ω2]``; elbow torque in N m, held for ``FRAME_SKIP`` integration steps.
    """

    numpy_task = DoublePendulumTask

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        p = DoublePendulumPhysics(1)
        self.dt = p.dt  # s per integration step
        self.a1, self.a2, self.k = p.a1, p.a2, p.k  # mass-matrix coefficients, kg m²
        self.g1, self.g2 = p.g1, p.g2  # gravity torques per sin θ, N m
        self.max_omega = p.max_omega  # rad/s, Box2D's rotation cap
        self.reset_std = self.tensor(RESET_STD)[:, None]  # (4, 1)

    def draw_initial_state(self, n: int, generator: torch.Generator, steps: tuple[int, ...] = ()) -> torch.Tensor:
        z = torch.randn((*steps, 4, n), generator=generator, dtype=self.dtype, device=self.device)
        return z.mul_(self.reset_std)  # N(0, σ²) per row

    def physics_step(self, state: torch.Tensor, torque: torch.Tensor) -> None:
        """``FRAME_SKIP`` semi-implicit Euler steps of ``state`` ``(4, n)`` in place under the
        elbow ``torque`` ``(n,)`` N m (the numpy :meth:`DoublePendulumPhysics.step`)."""
        theta1, theta2, omega1, omega2 = state
        for _ in range(FRAME_SKIP):
            delta = theta1 - theta2
            sin_d = torch.sin(delta)
            k_cos_d = torch.cos(delta).mul_(self.k)  # M12, kg m²
            dt_over_det = torch.div(self.dt, (self.a1 * self.a2) - k_cos_d * k_cos_d)
            # rhs = [−τ, τ] − [k sin Δ ω2², −k sin Δ ω1²] − [g1 sin θ1, g2 sin θ2], N m
            rhs1 = torch.neg(torque).sub_((omega2 * omega2).mul_(sin_d).mul_(self.k)
                                          .add_(torch.sin(theta1).mul_(self.g1)))
            rhs2 = torque - (omega1 * omega1).mul_(sin_d).mul_(-self.k).add_(torch.sin(theta2).mul_(self.g2))
            # dt ω̇ = dt/det · (adj M) rhs,  adj M = [[a2, −k cos Δ], [−k cos Δ, a1]]
            dv1 = (rhs1 * self.a2).sub_(rhs2 * k_cos_d).mul_(dt_over_det)
            dv2 = (rhs2 * self.a1).sub_(rhs1 * k_cos_d).mul_(dt_over_det)
            semi_implicit_euler(state[:2], state[2:], torch.stack((dv1, dv2)), self.max_omega, self.dt)

    def advance(self, state: torch.Tensor, effort: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.physics_step(state, effort)
        theta1, theta2 = state[0], state[1]
        # reward = −‖tip − (0, 2)‖ with rllab's tip = (sin θ1 − sin θ2, −cos θ1 − cos θ2)
        dx = torch.sin(theta1) - torch.sin(theta2)
        dy = (torch.cos(theta1) + torch.cos(theta2)).add_(TARGET[1])
        reward = torch.hypot(dx, dy).neg_()
        return reward, torch.zeros_like(reward, dtype=torch.bool)  # never terminates

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        q = state[:2]
        return torch.stack([torch.sin(q[0]), torch.cos(q[0]), state[2], torch.sin(q[1]), torch.cos(q[1]), state[3]], 1)


#: Short task name -> torch task class.
TORCH_TASKS: dict[str, type[TorchVectorTask]] = {
    cls.numpy_task.name: cls
    for cls in (TorchCartpole, TorchCartpoleSwingUp, TorchDoublePendulum, TorchCartpoleRllab,
                TorchCartpoleSwingUpRllab)
}


def make_torch_vec(name: str, num_envs: int, **options: Any) -> TorchVectorTask:
    """Torch twin of task ``name`` (short name like ``"CartpoleSwingUp"`` or its id
    ``"steinrl/CartpoleSwingUp-v0"``) with ``num_envs`` envs.

    :param options: the task's keyword arguments (:class:`TorchVectorTask`): ``device``,
        ``dtype`` (float32 by default), ``max_episode_steps``, ``groups``.
    :raises ValueError: a name without a torch twin (the message lists the valid names).
    """
    short = next((s for s, env_id in SHORT_NAMES.items() if name in (s, env_id)), name)
    if short not in TORCH_TASKS:
        raise ValueError(f"No torch task {name!r}; valid names: {', '.join(TORCH_TASKS)} "
                         f"(or their ids {', '.join(SHORT_NAMES[s] for s in TORCH_TASKS)})")
    return TORCH_TASKS[short](num_envs, **options)
