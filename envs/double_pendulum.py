"""Double pendulum of rllab's Box2D suite: a hanging two-link arm, torque on the elbow.

Two uniform rods (mass ``m``, length ``L``, inertia ``I`` about their centres); link 1
is pinned at the origin, link 2 at the end of link 1. Angles are absolute, measured
counter-clockwise from hanging straight down, so the elbow is at
``L (sin θ1, −cos θ1)``. A motor at the elbow applies ``+τ`` to link 2 and ``−τ`` to
link 1. With ``Δ = θ1 − θ2``, the Lagrangian gives ``M(q) ω̇ = rhs``::

    M = [[a1,       k cos Δ],     a1 = m L²/4 + I + m L²,   a2 = m L²/4 + I,
         [k cos Δ,  a2     ]]     k  = m L²/2

    rhs = [−τ − k sin Δ ω2² − g1 sin θ1,     g1 = (m L/2 + m L) g
           +τ + k sin Δ ω1² − g2 sin θ2]     g2 = m (L/2) g

solved in closed form (``det = a1 a2 − k² cos² Δ > 0``) and integrated with semi-implicit
Euler at ``dt = 0.01 s``, each action held for 2 integration steps (0.02 s per env step).
Like Box2D, each |ω| is capped at π/2 rad of rotation per step (157 rad/s); this binds
only under sustained full torque and keeps the state finite.

Task (docs/tasks.md, "Task specification"): obs ``[sin θ1, cos θ1, ω1, sin θ2, cos θ2, ω2]``; reset
θ ~ N(0, 0.1²), ω ~ N(0, 0.01²); torque ``τ = clip(50 a, −50, 50)`` N·m; reward
``−‖tip − (0, 2)‖`` with rllab's formula ``tip = (sin θ1 − sin θ2, −cos θ1 − cos θ2)``
(x-sign as in the original); never terminates; truncated after 500 steps.

State layout ``(4, n)``: rows ``[θ1, θ2, ω1, ω2]`` (rad, rad, rad/s, rad/s), i.e.
generalized positions then velocities.
"""

from __future__ import annotations

import numpy as np

from .core import BatchedTask, env_classes, semi_implicit_euler
from .rendering import render_double_pendulum

# --- physical constants (SI units) -------------------------------------------------
GRAVITY = 10.0  # m/s²
LINK_MASS = 0.5  # kg, each link
LINK_LENGTH = 1.0  # m, each link
LINK_WIDTH = 0.1  # m, only enters the Box2D box's moment of inertia
LINK_INERTIA_COM = LINK_MASS * (LINK_LENGTH**2 + LINK_WIDTH**2) / 12.0  # kg m² = 0.5·1.01/12
DT = 0.01  # s per integration step
FRAME_SKIP = 2  # integration steps per env step (action held)
MAX_TORQUE = 50.0  # N m, torque at action ±1
# Box2D caps a body's rotation per integration step (b2_maxRotation) by scaling its
# angular velocity down: |ω| ≤ (π/2) / dt = 157 rad/s. Full-torque bang-bang actions reach
# this within ~100 env steps; without the cap the explicit integrator then diverges
# (ω² Coriolis terms) to inf/NaN.
MAX_ROTATION_PER_STEP = 0.5 * np.pi  # rad (Box2D b2_maxRotation)

# --- task --------------------------------------------------------------------------
TARGET = (0.0, 2.0)  # m, reward is minus the distance of the (rllab-formula) tip to it
RESET_STD = np.array([0.1, 0.1, 0.01, 0.01])  # N(0, σ²) for [θ1, θ2, ω1, ω2]


class DoublePendulumPhysics:
    """Batched double-pendulum dynamics: semi-implicit Euler steps, in place.

    Two identical uniform links (mass, length, inertia about the centre), link 1 pinned
    at the origin, the torque on the elbow; constants in SI units as above. ``num_envs``
    is the number of state columns stepped at once and ``dt`` the integration step (s).
    """

    def __init__(self, num_envs: int, dt: float = DT) -> None:
        n = int(num_envs)
        m, L, inertia, gravity = LINK_MASS, LINK_LENGTH, LINK_INERTIA_COM, GRAVITY
        self.dt = dt  # s
        self.a1 = m * L**2 / 4.0 + inertia + m * L**2  # M11, kg m²
        self.a2 = m * L**2 / 4.0 + inertia  # M22, kg m²
        self.k = m * L**2 / 2.0  # M12 = k cos Δ, kg m²
        self.g1 = (m * L / 2.0 + m * L) * gravity  # N m, gravity torque on θ1 per sin θ1
        self.g2 = m * L / 2.0 * gravity  # N m, gravity torque on θ2 per sin θ2
        self._gravity_col = np.array([[self.g1], [self.g2]])
        self._coriolis_col = np.array([[self.k], [-self.k]])
        self._adj_diag = np.array([[self.a2], [self.a1]])  # adjugate diagonal of M
        self._torque_sign = np.array([[-1.0], [1.0]])  # −τ on link 1, +τ on link 2
        self.max_omega = MAX_ROTATION_PER_STEP / dt  # rad/s, Box2D's rotation cap
        self._delta = np.empty(n)
        self._sin_d = np.empty(n)
        self._k_cos_d = np.empty(n)
        self._dt_over_det = np.empty(n)
        self._torque = np.empty((2, n))
        self._rhs = np.empty((2, n))
        self._dv = np.empty((2, n))
        self._tmp = np.empty((2, n))

    def step(self, state: np.ndarray, torque: np.ndarray, substeps: int = 1) -> None:
        """Advance ``state`` ``(4, n)`` rows ``[θ1, θ2, ω1, ω2]`` by ``substeps · dt``
        under the elbow ``torque`` ``(n,)`` in N m, in place."""
        theta1, theta2, _, _ = state
        q = state[:2]  # (2, n) angles θ1, θ2
        omega = state[2:]  # (2, n) angular velocities ω1, ω2
        generalized_torque = np.multiply(self._torque_sign, torque, out=self._torque)  # [−τ, τ]
        rhs, dv, tmp = self._rhs, self._dv, self._tmp
        for _ in range(substeps):
            delta = np.subtract(theta1, theta2, out=self._delta)  # Δ = θ1 − θ2
            sin_d = np.sin(delta, out=self._sin_d)
            k_cos_d = np.cos(delta, out=self._k_cos_d)
            k_cos_d *= self.k  # M12, kg m²
            # dt / det, det = a1 a2 − (k cos Δ)², kg² m⁴
            dt_over_det = np.multiply(k_cos_d, k_cos_d, out=self._dt_over_det)
            np.subtract(self.a1 * self.a2, dt_over_det, out=dt_over_det)
            np.divide(self.dt, dt_over_det, out=dt_over_det)
            # rhs = [−τ, τ] − [k sin Δ ω2², −k sin Δ ω1²] − [g1 sin θ1, g2 sin θ2], N m
            np.multiply(omega[::-1], omega[::-1], out=rhs)
            rhs *= sin_d
            rhs *= self._coriolis_col
            np.sin(q, out=tmp)
            tmp *= self._gravity_col
            rhs += tmp
            np.subtract(generalized_torque, rhs, out=rhs)
            # dt ω̇ = dt/det · (adj M) rhs,  adj M = [[a2, −k cos Δ], [−k cos Δ, a1]]
            np.multiply(rhs, self._adj_diag, out=dv)
            np.multiply(rhs[::-1], k_cos_d, out=tmp)
            dv -= tmp
            dv *= dt_over_det
            semi_implicit_euler(q, omega, dv, self.dt, -self.max_omega, self.max_omega, scratch=tmp)


class DoublePendulumTask(BatchedTask):
    """Double pendulum swing-up (rllab ``DoublePendulumEnv``): see the module docstring."""

    name = "DoublePendulum"
    state_dim = 4
    obs_dim = 6
    max_action_effort = MAX_TORQUE
    control_dt = DT * FRAME_SKIP

    def __init__(self, num_envs: int) -> None:
        super().__init__(num_envs)
        n = self.num_envs
        self.physics = DoublePendulumPhysics(n)
        self._trig = np.empty((2, n))
        self._dx = np.empty(n)
        self._dy = np.empty(n)

    @classmethod
    def observation_bounds(cls) -> tuple[np.ndarray, np.ndarray]:
        high = np.array([1.0, 1.0, np.inf, 1.0, 1.0, np.inf], dtype=np.float32)
        return -high, high

    def sample_initial_state(self, rng: np.random.Generator, n: int) -> np.ndarray:
        # σ·N(0, 1): what Generator.normal computes, without its array-argument overhead.
        z = rng.standard_normal((n, 4))
        z *= RESET_STD
        return z.T

    def step(
        self, state: np.ndarray, effort: np.ndarray, reward: np.ndarray, terminated: np.ndarray
    ) -> None:
        self.physics.step(state, effort, substeps=FRAME_SKIP)
        q = state[:2]
        # reward = −‖tip − (0, 2)‖, tip = (sin θ1 − sin θ2, −cos θ1 − cos θ2), so
        # tip − target = (sin θ1 − sin θ2, −(cos θ1 + cos θ2 + 2)); the sign of the y
        # component vanishes in the norm.
        sin_q = np.sin(q, out=self._trig)
        dx = np.subtract(sin_q[0], sin_q[1], out=self._dx)  # target x is 0
        cos_q = np.cos(q, out=self._trig)
        dy = np.add(cos_q[0], cos_q[1], out=self._dy)
        dy += TARGET[1]
        np.hypot(dx, dy, out=reward)
        np.negative(reward, out=reward)
        terminated[...] = False

    def observe(self, state: np.ndarray) -> np.ndarray:
        obs = np.empty((state.shape[1], 6), dtype=np.float32)
        cols = obs.T  # rows [sin θ1, cos θ1, ω1, sin θ2, cos θ2, ω2]
        q = state[:2]
        np.sin(q, out=cols[0::3])
        np.cos(q, out=cols[1::3])
        cols[2::3] = state[2:]
        return obs

    def render_frame(self, state: np.ndarray) -> np.ndarray:
        return render_double_pendulum(
            state[0], state[1], link_length=LINK_LENGTH, target=TARGET
        )


DoublePendulumEnv, DoublePendulumVectorEnv = env_classes(DoublePendulumTask, __name__)
