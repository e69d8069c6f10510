"""Cart-pole tasks of rllab's Box2D suite, reimplemented with exact rigid-body dynamics.

A cart (mass ``M``) slides on a frictionless track under a horizontal force ``F``; a
uniform rod (mass ``m``, length ``l``) is pinned at one end to the cart. ``θ = 0`` is
upright, ``θ`` grows counter-clockwise, so the pole tip sits at ``(x − l sin θ, l cos θ)``.
With ``h = m l / 2`` and ``I_p = I_com + m l² / 4`` (the rod's inertia about the pivot),
the Lagrangian gives the coupled linear system for ``(ẍ, θ̈)``::

    (M + m) ẍ − h cos θ θ̈ = F − h sin θ θ̇²
    −h cos θ ẍ + I_p θ̈     = h g sin θ

solved in closed form (Cramer's rule, ``det = (M + m) I_p − h² cos² θ > 0``)::

    ẍ = [I_p (F − h sin θ θ̇²) + h cos θ · h g sin θ] / det
    θ̈ = [h cos θ (F − h sin θ θ̇²) + (M + m) · h g sin θ] / det

and integrated with semi-implicit Euler (Box2D's integrator): velocities first, then
positions with the new velocities, ``dt = 0.05 s``. Like Box2D, the velocities are
capped at 2 m and π/2 rad of motion per step (40 m/s, 31.4 rad/s), which only matters
far outside the tasks' normal range and keeps the state finite. An optional joint
damping torque ``−b θ̇³`` on the pole (``joint_damping = b``, default 0: exact physics) adds
``−b θ̇³`` to the right-hand side of the ``θ`` equation; the rllab-compatible tasks of
:mod:`steinrl.envs.cartpole_rllab` use it to reproduce Box2D's numerical damping.

Tasks (specified in docs/tasks.md, section "Task specification"):

- :class:`CartpoleEnv` / :class:`CartpoleVectorEnv` -- balancing. Obs ``[x, ẋ, θ, θ̇]``;
  reset each component ~ U(±[0.12, 0.2, 0.01, 0.2]); done when ``|x| > 2.4`` m or
  ``|θ| > 0.2`` rad; reward ``notdone · (10 − (1 − cos θ) − 1e-5 F²)``.
- :class:`CartpoleSwingUpEnv` / :class:`CartpoleSwingUpVectorEnv` -- swing-up from a
  hanging pole. Obs ``[x, ẋ, θ, θ̇]`` (θ not wrapped); reset x ~ U(±1), ẋ ~ U(±2),
  θ ~ U(π ± 1), θ̇ ~ U(±3); reward ``cos θ``, except ``|x| > 3`` m ends the episode with
  reward −100.

Reward and termination are evaluated on the state *after* the step; ``F`` is the
clipped force. Episodes are truncated after 500 steps.
"""

from __future__ import annotations

import math

import numpy as np

from .core import BatchedTask, env_classes, semi_implicit_euler
from .rendering import render_cartpole

# --- physical constants (SI units) -------------------------------------------------
GRAVITY = 10.0  # m/s²
CART_MASS = 1.0  # kg
POLE_MASS = 0.1  # kg
POLE_LENGTH = 1.0  # m, pivot at one end of the rod
POLE_WIDTH = 0.1  # m, only enters the Box2D box's moment of inertia
POLE_INERTIA_COM = POLE_MASS * (POLE_LENGTH**2 + POLE_WIDTH**2) / 12.0  # kg m² = 0.1·1.01/12
DT = 0.05  # s per env step (one integration step)
MAX_FORCE = 10.0  # N, force at action ±1
# Box2D caps the motion of a body per integration step (b2_maxTranslation,
# b2_maxRotation) by scaling its velocity down; we apply the same caps to ẋ and θ̇.
# They never bind in normal operation (|θ̇| ≤ 31.4 rad/s, |ẋ| ≤ 40 m/s at dt 0.05 s) but
# keep the explicit integrator from diverging to inf/NaN under extreme inputs.
MAX_TRANSLATION_PER_STEP = 2.0  # m (Box2D b2_maxTranslation)
MAX_ROTATION_PER_STEP = 0.5 * math.pi  # rad (Box2D b2_maxRotation)

# --- balancing task ----------------------------------------------------------------
X_THRESHOLD = 2.4  # m, |x| beyond this terminates
THETA_THRESHOLD = 0.2  # rad, |θ| beyond this terminates
ALIVE_REWARD = 10.0  # per step while not done
FORCE_COST = 1e-5  # reward per N² of force
BALANCE_RESET_HIGH = 0.05 * np.array([2.4, 4.0, 0.2, 4.0])  # U(±·) for [x, ẋ, θ, θ̇]

# --- swing-up task -----------------------------------------------------------------
SWINGUP_X_LIMIT = 3.0  # m, |x| beyond this terminates
SWINGUP_OUT_OF_BOUNDS_REWARD = -100.0
SWINGUP_RESET_LOW = np.array([-1.0, -2.0, math.pi - 1.0, -3.0])  # [m, m/s, rad, rad/s]
SWINGUP_RESET_HIGH = np.array([1.0, 2.0, math.pi + 1.0, 3.0])


class CartPolePhysics:
    """Batched cart-pole dynamics: one semi-implicit Euler step, in place, no allocation.

    :param num_envs: batch size ``n`` of the state columns it steps.
    :param dt: integration step, s (0.05, rllab's).
    :param gravity: g, m/s².
    :param cart_mass: M, kg; ``pole_mass``: m, kg (a uniform rod pinned at its end).
    :param pole_length: l, m; ``pole_inertia_com``: the rod's inertia about its centre, kg m².
    :param joint_damping: ``b`` of the joint damping torque ``−b θ̇³`` on the pole, N m s³
        (0: none, the exact equations).
    """

    def __init__(
        self,
        num_envs: int,
        dt: float = DT,
        gravity: float = GRAVITY,
        cart_mass: float = CART_MASS,
        pole_mass: float = POLE_MASS,
        pole_length: float = POLE_LENGTH,
        pole_inertia_com: float = POLE_INERTIA_COM,
        joint_damping: float = 0.0,
    ) -> None:
        n = int(num_envs)
        self.dt = dt  # s
        self.joint_damping = float(joint_damping)  # b, N m s³
        self.total_mass = cart_mass + pole_mass  # M + m, kg
        self.half_ml = pole_mass * pole_length / 2.0  # h = m l/2, kg m
        self.pivot_inertia = pole_inertia_com + pole_mass * pole_length**2 / 4.0  # I_p, kg m²
        self.gravity = gravity
        # Adjugate diagonal [I_p, M + m] as a column, for both numerators at once.
        self._adj_diag = np.array([[self.pivot_inertia], [self.total_mass]])
        # Box2D's per-step motion caps as velocity limits [m/s, rad/s].
        self._max_q_dot = np.array([[MAX_TRANSLATION_PER_STEP / dt], [MAX_ROTATION_PER_STEP / dt]])
        self._min_q_dot = -self._max_q_dot
        self._sin = np.empty(n)
        self._h_cos = np.empty(n)
        self._dt_over_det = np.empty(n)
        self._rhs = np.empty((2, n))  # [F − h sin θ θ̇², h g sin θ]: N, N m
        self._acc = np.empty((2, n))
        self._tmp = np.empty((2, n))
        self._damping = np.empty(n)

    def damping_torque(self, theta_dot: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Joint damping torque magnitude ``b θ̇³`` (N m) for ``theta_dot`` ``(n,)`` in rad/s,
        written into ``out`` ``(n,)``; the step subtracts it from the ``θ`` equation."""
        np.multiply(theta_dot, theta_dot, out=out)
        out *= theta_dot
        out *= self.joint_damping
        return out

    def step(self, state: np.ndarray, force: np.ndarray) -> None:
        """Advance ``state`` ``(4, n)`` rows ``[x, ẋ, θ, θ̇]`` (m, m/s, rad, rad/s) by ``dt``
        under ``force`` ``(n,)`` in N, in place."""
        x, x_dot, theta, theta_dot = state
        q = state[0::2]  # (2, n) generalized positions (x, θ)
        q_dot = state[1::2]  # (2, n) generalized velocities (ẋ, θ̇)
        h, g = self.half_ml, self.gravity

        sin_theta = np.sin(theta, out=self._sin)
        h_cos = np.cos(theta, out=self._h_cos)
        h_cos *= h  # h cos θ, kg m

        # dt / det, det = (M + m) I_p − (h cos θ)², kg² m²
        dt_over_det = np.multiply(h_cos, h_cos, out=self._dt_over_det)
        np.subtract(self.total_mass * self.pivot_inertia, dt_over_det, out=dt_over_det)
        np.divide(self.dt, dt_over_det, out=dt_over_det)

        rhs = self._rhs
        # rhs[0] = F − h sin θ θ̇², N
        np.multiply(theta_dot, theta_dot, out=rhs[0])
        rhs[0] *= sin_theta
        rhs[0] *= -h
        rhs[0] += force
        # rhs[1] = h g sin θ (− b θ̇³ with joint damping), N m
        np.multiply(sin_theta, h * g, out=rhs[1])
        if self.joint_damping:
            rhs[1] -= self.damping_torque(theta_dot, out=self._damping)

        # dt·[ẍ, θ̈] = dt/det · ([I_p, M + m] ⊙ rhs + h cos θ · [rhs[1], rhs[0]])
        dv = np.multiply(rhs, self._adj_diag, out=self._acc)
        tmp = np.multiply(rhs[::-1], h_cos, out=self._tmp)
        dv += tmp
        dv *= dt_over_det
        semi_implicit_euler(q, q_dot, dv, self.dt, self._min_q_dot, self._max_q_dot, scratch=tmp)


class CartpoleTask(BatchedTask):
    """Cart-pole balancing (rllab ``CartpoleEnv``): see the module docstring."""

    name = "Cartpole"
    state_dim = 4
    obs_dim = 4
    max_action_effort = MAX_FORCE
    control_dt = DT
    track_half_width = X_THRESHOLD  # m, for rendering
    #: ``b`` of the joint damping torque ``−b θ̇³``, N m s³ (0: exact physics).
    joint_damping: float = 0.0

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        n = self.num_envs
        self.physics = CartPolePhysics(n, joint_damping=self.joint_damping)
        self._limits = np.array([[X_THRESHOLD], [THETA_THRESHOLD]])
        self._abs_q = np.empty((2, n))
        self._out = np.empty((2, n), dtype=bool)
        self._tmp = np.empty(n)

    #: Reset distribution U(low, high) per state row [x, ẋ, θ, θ̇], shape (4,).
    reset_low, reset_high = -BALANCE_RESET_HIGH, BALANCE_RESET_HIGH

    def sample_initial_state(self, rng: np.random.Generator, n: int) -> np.ndarray:
        # low + (high − low)·U[0, 1) is what Generator.uniform computes, minus its
        # per-call overhead for array-valued bounds (this runs on most vector steps).
        u = rng.random((n, 4))
        u *= self.reset_high - self.reset_low
        u += self.reset_low
        return u.T

    def step(
        self, state: np.ndarray, effort: np.ndarray, reward: np.ndarray, terminated: np.ndarray
    ) -> None:
        self.physics.step(state, effort)
        theta = state[2]
        # terminated = |x| > 2.4 or |θ| > 0.2
        out_of_bounds = np.greater(np.abs(state[0::2], out=self._abs_q), self._limits, out=self._out)
        np.logical_or(out_of_bounds[0], out_of_bounds[1], out=terminated)
        # reward = notdone · (10 − (1 − cos θ) − 1e-5 F²)
        np.multiply(effort, effort, out=reward)
        reward *= -FORCE_COST
        reward += ALIVE_REWARD - 1.0
        reward += np.cos(theta, out=self._tmp)
        np.copyto(reward, 0.0, where=terminated)

    def observe(self, state: np.ndarray) -> np.ndarray:
        obs = np.empty((state.shape[1], 4), dtype=np.float32)
        obs.T[...] = state  # [x, ẋ, θ, θ̇]
        return obs

    def render_frame(self, state: np.ndarray) -> np.ndarray:
        return render_cartpole(
            state[0], state[2], track_half_width=self.track_half_width, pole_length=POLE_LENGTH
        )


class CartpoleSwingUpTask(CartpoleTask):
    """Cart-pole swing-up (rllab ``CartpoleSwingupEnv``): see the module docstring."""

    name = "CartpoleSwingUp"
    track_half_width = SWINGUP_X_LIMIT

    reset_low, reset_high = SWINGUP_RESET_LOW, SWINGUP_RESET_HIGH

    def step(
        self, state: np.ndarray, effort: np.ndarray, reward: np.ndarray, terminated: np.ndarray
    ) -> None:
        self.physics.step(state, effort)
        x, _, theta, _ = state
        # terminated = |x| > 3; reward = cos θ, or −100 on the terminating step
        np.greater(np.abs(x, out=self._tmp), SWINGUP_X_LIMIT, out=terminated)
        np.cos(theta, out=reward)
        np.copyto(reward, SWINGUP_OUT_OF_BOUNDS_REWARD, where=terminated)


CartpoleEnv, CartpoleVectorEnv = env_classes(CartpoleTask, __name__)
CartpoleSwingUpEnv, CartpoleSwingUpVectorEnv = env_classes(CartpoleSwingUpTask, __name__)
