"""Physics of the control tasks against an independent reference.

The reference equations of motion are derived here with sympy from the Lagrangian
L = T − V of the rigid bodies (kinetic energy from the centre-of-mass velocities and
the rotations, potential m g y, generalized forces from the virtual power of the
control), solved as a mass-matrix system M(q) q̈ = Q + ∂L/∂q − (∂²L/∂q̇∂q) q̇ and
integrated with ``scipy.integrate.solve_ivp`` (DOP853, rtol = atol = 1e-11). Nothing
here calls the envs' closed-form accelerations.

Tolerances. The envs integrate with semi-implicit Euler, a first-order method: the
global error is ≈ C·dt. The tests therefore check (1) first-order convergence of the
envs' integrator to the reference as dt shrinks (the error must fall ≈ 4× per 4×
smaller dt; a wrong mass, inertia, sign or gravity gives an error that does *not*
vanish), (2) an absolute bound at the finest dt, and (3) that the same bound is far
smaller than the difference a wrong inertia or a flipped force sign makes, so the
bound is tight enough to catch them.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from scipy.integrate import solve_ivp

sp = pytest.importorskip("sympy")

import steinrl.envs  # noqa: E402,F401  (registers the ids)
from steinrl.envs.cartpole import (  # noqa: E402
    BALANCE_RESET_HIGH,
    SWINGUP_RESET_HIGH,
    SWINGUP_RESET_LOW,
    CartpoleEnv,
    CartPolePhysics,
    CartpoleSwingUpEnv,
    CartpoleSwingUpVectorEnv,
    CartpoleVectorEnv,
)
from steinrl.envs.double_pendulum import (  # noqa: E402
    DoublePendulumEnv,
    DoublePendulumPhysics,
    DoublePendulumVectorEnv,
)

# Physical parameters as stated in docs/tasks.md, "Task specification" (written out again on purpose).
G = 10.0
CART_M, POLE_M, POLE_L, POLE_I = 1.0, 0.1, 1.0, 0.1 * (1 + 0.01) / 12
LINK_M, LINK_L, LINK_I = 0.5, 1.0, 0.5 * 1.01 / 12


# ----------------------------------------------------------------------------------
# Independent reference: Euler–Lagrange equations derived symbolically.
# ----------------------------------------------------------------------------------
class LagrangianSystem:
    """Rigid bodies in the plane with generalized coordinates ``q``.

    :param bodies: ``(mass, I_com, (x_com(q), y_com(q)), angle(q))`` per body.
    :param power: virtual power of the control ``u`` (e.g. ``F ẋ``), so Q = ∂P/∂q̇.
    """

    def __init__(self, q, qd, u, bodies, power, gravity=G):
        T = 0
        V = 0
        for mass, inertia, (px, py), angle in bodies:
            vx = sum(sp.diff(px, a) * b for a, b in zip(q, qd))
            vy = sum(sp.diff(py, a) * b for a, b in zip(q, qd))
            w = sum(sp.diff(angle, a) * b for a, b in zip(q, qd))
            T += sp.Rational(1, 2) * mass * (vx**2 + vy**2) + sp.Rational(1, 2) * inertia * w**2
            V += mass * gravity * py
        L = T - V
        mass_matrix = sp.Matrix([[sp.diff(L, a, b) for b in qd] for a in qd])
        mixed = sp.Matrix([[sp.diff(L, a, b) for b in q] for a in qd])
        forcing = (
            sp.Matrix([sp.diff(power, b) for b in qd])
            + sp.Matrix([sp.diff(L, a) for a in q])
            - mixed * sp.Matrix(qd)
        )
        args = (list(q), list(qd), u)
        self.dim = len(q)
        self._mass = sp.lambdify(args, mass_matrix, "numpy")
        self._forcing = sp.lambdify(args, forcing, "numpy")
        self._energy = sp.lambdify(args, T + V, "numpy")

    def energy(self, q, qd) -> float:
        return float(self._energy(list(q), list(qd), 0.0))

    def solve(self, q0, qd0, u: float, times: np.ndarray) -> np.ndarray:
        """Reference trajectory at ``times``, shape ``(len(times), 2 * dim)`` rows [q, q̇]."""
        d = self.dim

        def rhs(_t, y):
            q, v = list(y[:d]), list(y[d:])
            mass = np.array(self._mass(q, v, u), dtype=float)
            forcing = np.array(self._forcing(q, v, u), dtype=float).ravel()
            return np.concatenate([y[d:], np.linalg.solve(mass, forcing)])

        sol = solve_ivp(
            rhs, (0.0, times[-1]), np.concatenate([q0, qd0]), method="DOP853",
            rtol=1e-11, atol=1e-11, t_eval=times,
        )
        assert sol.success
        return sol.y.T


@cache
def cartpole_reference(pole_inertia: float = POLE_I, force_sign: float = 1.0) -> LagrangianSystem:
    """Cart (x) + rod pinned at its end, θ = 0 up, tip at x − l sin θ; force F on the cart."""
    x, th, xd, thd, F = sp.symbols("x theta xdot thetadot F")
    bodies = [
        (CART_M, 0.0, (x, sp.Integer(0)), sp.Integer(0)),
        (POLE_M, pole_inertia, (x - POLE_L / 2 * sp.sin(th), POLE_L / 2 * sp.cos(th)), th),
    ]
    return LagrangianSystem([x, th], [xd, thd], F, bodies, force_sign * F * xd)


@cache
def double_pendulum_reference(link_inertia: float = LINK_I, torque_sign: float = 1.0) -> LagrangianSystem:
    """Two rods, absolute angles from hanging down (ccw); +τ on link 2, −τ on link 1."""
    t1, t2, w1, w2, tau = sp.symbols("theta1 theta2 omega1 omega2 tau")
    elbow = (LINK_L * sp.sin(t1), -LINK_L * sp.cos(t1))
    bodies = [
        (LINK_M, link_inertia, (LINK_L / 2 * sp.sin(t1), -LINK_L / 2 * sp.cos(t1)), t1),
        (LINK_M, link_inertia, (elbow[0] + LINK_L / 2 * sp.sin(t2), elbow[1] - LINK_L / 2 * sp.cos(t2)), t2),
    ]
    # Power of an elbow motor: τ times the relative rate ω2 − ω1.
    return LagrangianSystem([t1, t2], [w1, w2], tau, bodies, torque_sign * tau * (w2 - w1))


# ----------------------------------------------------------------------------------
# Helpers running the envs' integrators.
# ----------------------------------------------------------------------------------
def cartpole_trajectory(state0, force: float, dt: float, num_steps: int) -> np.ndarray:
    """``CartPolePhysics`` at ``dt``; rows [x, θ, ẋ, θ̇] (the reference's [q, q̇] order)."""
    physics = CartPolePhysics(1, dt=dt)
    s = np.asarray(state0, dtype=float).reshape(4, 1).copy()
    out = [s[:, 0].copy()]
    for _ in range(num_steps):
        physics.step(s, np.array([force]))
        out.append(s[:, 0].copy())
    return np.array(out)[:, [0, 2, 1, 3]]


def double_pendulum_trajectory(state0, torque: float, dt: float, num_steps: int) -> np.ndarray:
    """``DoublePendulumPhysics`` at ``dt``; rows [θ1, θ2, ω1, ω2]."""
    physics = DoublePendulumPhysics(1, dt=dt)
    s = np.asarray(state0, dtype=float).reshape(4, 1).copy()
    out = [s[:, 0].copy()]
    for _ in range(num_steps):
        physics.step(s, np.array([torque]))
        out.append(s[:, 0].copy())
    return np.array(out)


def max_abs_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max())


# ----------------------------------------------------------------------------------
# Convergence to the reference (zero and nonzero control).
# ----------------------------------------------------------------------------------
CARTPOLE_START = [0.1, 0.3, 0.15, -0.4]  # x, ẋ, θ, θ̇ (a falling pole, moving cart)
CARTPOLE_HORIZON = 0.5  # s = 10 env steps
# Max |error| over the 0.5 s trajectory of all four coordinates at dt/16: measured
# 0.007 (F = 0) and 0.009 (F = 3 N); first order, so it is ≈ 1/16 of the env-dt error.
CARTPOLE_TOL_FINE = 0.015


@pytest.mark.parametrize("force", [0.0, 3.0])
def test_cartpole_converges_to_lagrangian_reference(force):
    times = np.linspace(0.0, CARTPOLE_HORIZON, 11)
    q0 = [CARTPOLE_START[0], CARTPOLE_START[2]]
    qd0 = [CARTPOLE_START[1], CARTPOLE_START[3]]
    reference = cartpole_reference().solve(q0, qd0, force, times)
    errors = {}
    for k in (1, 4, 16):
        traj = cartpole_trajectory(CARTPOLE_START, force, 0.05 / k, 10 * k)[::k]
        errors[k] = max_abs_error(traj, reference)
    # First order: each 4x smaller dt cuts the error ~4x (a model error would not shrink).
    assert 3.0 < errors[1] / errors[4] < 5.5, errors
    assert 3.5 < errors[4] / errors[16] < 4.5, errors
    assert errors[16] < CARTPOLE_TOL_FINE, errors
    # The tolerance is tight enough to see a wrong pole inertia (I_com = 0) or a flipped
    # force (or gravity-only) model: they deviate from the true reference by much more.
    wrong_inertia = cartpole_reference(pole_inertia=0.0).solve(q0, qd0, force, times)
    assert max_abs_error(wrong_inertia, reference) > 20 * CARTPOLE_TOL_FINE
    if force:
        flipped = cartpole_reference(force_sign=-1.0).solve(q0, qd0, force, times)
        assert max_abs_error(flipped, reference) > 100 * CARTPOLE_TOL_FINE


@pytest.mark.parametrize("action", [0.0, 0.3])
def test_cartpole_env_step_matches_reference(action):
    """The env itself (dt 0.05, force = 10·action) over 10 steps: a first-order error
    below 0.2 (max over m, m/s, rad, rad/s; measured 0.13), whereas the reference with
    I_com = 0 lies 0.8 (F = 0) to 2.3 (F = 3 N) away and a flipped force sign 7.3 away."""
    env = CartpoleEnv()
    env.reset(seed=0)
    env.state = CARTPOLE_START
    traj = [env.state.copy()]
    for _ in range(10):
        env.step(np.array([action], dtype=np.float32))
        traj.append(env.state.copy())
    traj = np.array(traj)[:, [0, 2, 1, 3]]
    times = np.linspace(0.0, 0.5, 11)
    q0, qd0 = [CARTPOLE_START[0], CARTPOLE_START[2]], [CARTPOLE_START[1], CARTPOLE_START[3]]
    force = 10.0 * np.float32(action)
    assert max_abs_error(traj, cartpole_reference().solve(q0, qd0, force, times)) < 0.2
    if action:
        flipped = cartpole_reference(force_sign=-1.0).solve(q0, qd0, force, times)
        assert max_abs_error(traj, flipped) > 1.0


DP_START = [0.5, -0.3, 1.0, -2.0]  # θ1, θ2, ω1, ω2
# Max |error| over 0.5 s at dt = 0.01/16: measured 0.010 (τ = 0) and 0.020 (τ = 2 N m)
# (ω2 swings through ±8 rad/s); I_com = 0 deviates by > 5, a flipped torque by 10.
DP_TOL_FINE = 0.03


@pytest.mark.parametrize("torque", [0.0, 2.0])
def test_double_pendulum_converges_to_lagrangian_reference(torque):
    horizon = 0.5  # s = 25 env steps = 50 integration steps
    times = np.linspace(0.0, horizon, 51)
    reference = double_pendulum_reference().solve(DP_START[:2], DP_START[2:], torque, times)
    errors = {}
    for k in (1, 4, 16):
        traj = double_pendulum_trajectory(DP_START, torque, 0.01 / k, 50 * k)[::k]
        errors[k] = max_abs_error(traj, reference)
    assert 3.0 < errors[1] / errors[4] < 5.5, errors
    assert 3.5 < errors[4] / errors[16] < 4.5, errors
    assert errors[16] < DP_TOL_FINE, errors
    wrong_inertia = double_pendulum_reference(link_inertia=0.0).solve(
        DP_START[:2], DP_START[2:], torque, times
    )
    assert max_abs_error(wrong_inertia, reference) > 20 * DP_TOL_FINE
    if torque:
        flipped = double_pendulum_reference(torque_sign=-1.0).solve(DP_START[:2], DP_START[2:], torque, times)
        assert max_abs_error(flipped, reference) > 100 * DP_TOL_FINE


@pytest.mark.parametrize("action", [0.0, 0.04])
def test_double_pendulum_env_step_matches_reference(action):
    """The env (dt 0.01, 2 integration steps per action, τ = 50·action) over 25 steps:
    first-order error below 0.35 (measured 0.16 at τ = 0, 0.29 at τ = 2 N m), while
    I_com = 0 or a flipped torque deviate by > 5."""
    env = DoublePendulumEnv()
    env.reset(seed=0)
    env.state = DP_START
    traj = [env.state.copy()]
    for _ in range(25):
        env.step(np.array([action], dtype=np.float32))
        traj.append(env.state.copy())
    times = np.linspace(0.0, 0.5, 26)  # 0.02 s per env step: frame skip 2 at dt 0.01
    torque = 50.0 * float(np.float32(action))
    reference = double_pendulum_reference().solve(DP_START[:2], DP_START[2:], torque, times)
    error = max_abs_error(np.array(traj), reference)
    assert error < 0.35
    if action:
        flipped = double_pendulum_reference(torque_sign=-1.0).solve(DP_START[:2], DP_START[2:], torque, times)
        assert max_abs_error(np.array(traj), flipped) > 1.0


def test_constant_force_direction():
    """+action pushes the cart to +x and (tip at x − l sin θ) tips the pole to +θ; a
    positive elbow torque spins link 2 counter-clockwise and link 1 clockwise."""
    env = CartpoleEnv()
    env.reset(seed=0)
    env.state = [0.0, 0.0, 0.0, 0.0]
    env.step(np.array([1.0], dtype=np.float32))
    x, x_dot, theta, theta_dot = env.state
    assert x > 0 and x_dot > 0 and theta > 0 and theta_dot > 0
    dp = DoublePendulumEnv()
    dp.reset(seed=0)
    dp.state = [0.0, 0.0, 0.0, 0.0]
    dp.step(np.array([1.0], dtype=np.float32))
    _, _, omega1, omega2 = dp.state
    assert omega2 > 0 > omega1


# ----------------------------------------------------------------------------------
# Energy with zero control over a whole episode (500 steps).
# ----------------------------------------------------------------------------------
def _cartpole_energies(physics: CartPolePhysics, state0, num_steps: int, every: int = 1) -> np.ndarray:
    reference, s, out = cartpole_reference(), np.array(state0, dtype=float).reshape(4, 1), []
    for i in range(num_steps):
        physics.step(s, np.zeros(1))
        if (i + 1) % every == 0:
            x, x_dot, theta, theta_dot = s[:, 0]
            out.append(reference.energy([x, theta], [x_dot, theta_dot]))
    return np.array(out)


def test_cartpole_energy_bounded_over_500_steps():
    """Swing-up env, pole hanging 0.8 rad off the bottom, zero force, 500 steps (25 s;
    horizontal momentum is conserved so the cart stays near x = 0 and nothing
    terminates). Semi-implicit Euler's velocity form is not exactly symplectic for a
    configuration-dependent mass matrix, so energy is conserved only to O(dt): with a
    swing energy of 0.15 J the error stays below 0.05 J (measured 0.034 J) and the mean
    of the last 100 steps is within 0.03 J of the first 100 (measured 0.018 J). Halving
    dt halves the error (so it is the integrator, not the model)."""
    env = CartpoleSwingUpVectorEnv(num_envs=1)
    env.reset(seed=0)
    start = [0.0, 0.0, math.pi + 0.8, 0.0]
    env.state = np.array(start)[:, None]
    reference = cartpole_reference()
    energy = []
    for _ in range(500):
        _, _, terminated, truncated, _ = env.step(np.zeros((1, 1), dtype=np.float32))
        assert not terminated[0]
        x, x_dot, theta, theta_dot = env.state[:, 0]
        energy.append(reference.energy([x, theta], [x_dot, theta_dot]))
    assert truncated[0]
    energy = np.array(energy)
    e0 = reference.energy([0.0, math.pi + 0.8], [0.0, 0.0])
    assert np.abs(energy - e0).max() < 0.05
    assert abs(energy[-100:].mean() - energy[:100].mean()) < 0.03
    half_dt = _cartpole_energies(CartPolePhysics(1, dt=0.025), start, 1000, every=2)
    assert 1.6 < np.abs(energy - e0).max() / np.abs(half_dt - e0).max() < 2.4


def _double_pendulum_energies(state0, dt: float, num_steps: int, every: int) -> np.ndarray:
    reference, physics = double_pendulum_reference(), DoublePendulumPhysics(1, dt=dt)
    s, out = np.array(state0, dtype=float).reshape(4, 1), []
    for i in range(num_steps):
        physics.step(s, np.zeros(1))
        if (i + 1) % every == 0:
            out.append(reference.energy(s[:2, 0], s[2:, 0]))
    return np.array(out)


def test_double_pendulum_energy_bounded_over_500_steps():
    """Zero torque, 500 env steps (1000 integration steps, 10 s), from rest.

    Regular motion, θ = (0.2, 0.1) (swing energy 0.16 J): error < 0.01 J (measured
    0.0034 J). Chaotic motion, θ = (0.5, −0.3) (1.03 J): the O(dt) error of semi-implicit
    Euler reaches 0.32 J (bound 0.4 J), and 4x smaller steps cut it > 2x (measured 2.5x),
    which shows it is integration error, not a model error."""
    reference = double_pendulum_reference()
    for (t1, t2), bound in [((0.2, 0.1), 0.01), ((0.5, -0.3), 0.4)]:
        env = DoublePendulumVectorEnv(num_envs=1)
        env.reset(seed=0)
        env.state = np.array([[t1], [t2], [0.0], [0.0]])
        e0 = reference.energy([t1, t2], [0.0, 0.0])
        energy = []
        for _ in range(500):
            env.step(np.zeros((1, 1), dtype=np.float32))
            energy.append(reference.energy(env.state[:2, 0], env.state[2:, 0]))
        error = np.abs(np.array(energy) - e0).max()
        assert error < bound
        if t1 == 0.5:
            fine = _double_pendulum_energies([t1, t2, 0.0, 0.0], 0.0025, 4000, every=8)
            assert np.abs(fine - e0).max() < error / 2


# ----------------------------------------------------------------------------------
# Reset distributions (20000 envs).
# ----------------------------------------------------------------------------------
NUM_RESETS = 20000


def _check_uniform(samples: np.ndarray, low: float, high: float) -> None:
    """Support inside [low, high] and within 0.1 % of the range of both ends (fails with
    probability e^-10 per end for a correct sampler); mean and variance within 5 standard
    errors (var of U: w²/12, var of the sample variance ≈ w⁴/180 / n)."""
    n, width = len(samples), high - low
    assert samples.min() >= low and samples.max() <= high
    assert samples.min() < low + 1e-3 * width and samples.max() > high - 1e-3 * width
    assert abs(samples.mean() - (low + high) / 2) < 5 * width / math.sqrt(12 * n)
    assert abs(samples.var() - width**2 / 12) < 5 * width**2 / math.sqrt(180 * n)


def _check_normal(samples: np.ndarray, std: float) -> None:
    """Mean and variance within 5 standard errors (σ/√n, √2 σ²/√n); all within ±6σ (a
    6σ excursion among 20000 draws has probability 4e-5) and some beyond ±3σ."""
    n = len(samples)
    assert abs(samples.mean()) < 5 * std / math.sqrt(n)
    assert abs(samples.var() - std**2) < 5 * math.sqrt(2) * std**2 / math.sqrt(n)
    assert np.abs(samples).max() < 6 * std
    assert samples.max() > 3 * std and samples.min() < -3 * std


def test_cartpole_reset_distribution():
    env = CartpoleVectorEnv(num_envs=NUM_RESETS)
    obs, _ = env.reset(seed=1)
    np.testing.assert_array_equal(obs, env.state.T.astype(np.float32))
    for row, high in zip(env.state, BALANCE_RESET_HIGH):
        _check_uniform(row, -high, high)


def test_cartpole_swingup_reset_distribution():
    env = CartpoleSwingUpVectorEnv(num_envs=NUM_RESETS)
    env.reset(seed=2)
    for row, low, high in zip(env.state, SWINGUP_RESET_LOW, SWINGUP_RESET_HIGH):
        _check_uniform(row, low, high)
    np.testing.assert_allclose([SWINGUP_RESET_LOW[2], SWINGUP_RESET_HIGH[2]], [math.pi - 1, math.pi + 1])


def test_double_pendulum_reset_distribution():
    env = DoublePendulumVectorEnv(num_envs=NUM_RESETS)
    obs, _ = env.reset(seed=3)
    theta1, theta2, omega1, omega2 = env.state
    for row, std in [(theta1, 0.1), (theta2, 0.1), (omega1, 0.01), (omega2, 0.01)]:
        _check_normal(row, std)
    assert abs(np.corrcoef(theta1, theta2)[0, 1]) < 5 / math.sqrt(NUM_RESETS)
    expected = np.stack([np.sin(theta1), np.cos(theta1), omega1, np.sin(theta2), np.cos(theta2), omega2], 1)
    np.testing.assert_allclose(obs, expected, rtol=1e-6, atol=1e-7)


def test_autoreset_draws_from_reset_distribution():
    """States re-drawn by next-step autoreset follow the same distribution."""
    env = CartpoleSwingUpVectorEnv(num_envs=NUM_RESETS, max_episode_steps=1)
    env.reset(seed=4)
    env.step(np.zeros((NUM_RESETS, 1), dtype=np.float32))  # all truncated
    obs, reward, terminated, truncated, _ = env.step(np.zeros((NUM_RESETS, 1), dtype=np.float32))
    assert not terminated.any() and not truncated.any() and not reward.any()
    for row, low, high in zip(env.state, SWINGUP_RESET_LOW, SWINGUP_RESET_HIGH):
        _check_uniform(row, low, high)


# ----------------------------------------------------------------------------------
# Reward and termination rules on constructed states.
# ----------------------------------------------------------------------------------
def _step_from(env, state, action: float):
    env.reset(seed=0)
    env.state = state
    return env.step(np.array([action], dtype=np.float32))


@pytest.mark.parametrize(
    "state, done",
    [
        ([0.0, 0.0, 0.0, 0.0], False),
        ([2.3, 0.0, 0.0, 0.0], False),
        ([2.45, 0.0, 0.0, 0.0], True),  # cart right of the track
        ([-2.45, 0.0, 0.0, 0.0], True),  # cart left of the track
        ([0.0, 0.0, -0.19, 0.0], False),  # (the +5 N push tilts the pole towards +θ)
        ([0.0, 0.0, 0.22, 0.0], True),  # pole beyond +0.2 rad
        ([0.0, 0.0, -0.22, 0.0], True),  # pole beyond −0.2 rad
    ],
)
def test_cartpole_reward_and_termination(state, done):
    env = CartpoleEnv()
    _, reward, terminated, truncated, _ = _step_from(env, state, 0.5)
    assert terminated is done and truncated is False
    x, _, theta, _ = env.state
    assert bool(abs(x) > 2.4 or abs(theta) > 0.2) is done  # rule on the post-step state
    expected = 0.0 if done else 10.0 - (1.0 - math.cos(theta)) - 1e-5 * 5.0**2  # F = 5 N
    assert reward == pytest.approx(expected, abs=1e-12)


def test_cartpole_force_is_clipped_in_reward():
    env = CartpoleEnv()
    _, reward, *_ = _step_from(env, [0.0, 0.0, 0.0, 0.0], 3.0)  # a = 3 -> F = 10 N
    theta = env.state[2]
    assert reward == pytest.approx(10.0 - (1.0 - math.cos(theta)) - 1e-5 * 100.0, abs=1e-12)
    reference = CartpoleEnv()
    _step_from(reference, [0.0, 0.0, 0.0, 0.0], 1.0)
    np.testing.assert_array_equal(env.state, reference.state)  # same as a = 1


@pytest.mark.parametrize(
    "state, done",
    [
        ([0.0, 0.0, 0.0, 0.0], False),
        ([0.0, 0.0, math.pi, 0.0], False),
        ([2.95, 0.0, math.pi, 0.0], False),
        ([3.05, 0.0, math.pi, 0.0], True),
        ([-3.05, 0.0, 1.0, 0.0], True),
    ],
)
def test_swingup_reward_and_termination(state, done):
    env = CartpoleSwingUpEnv()
    _, reward, terminated, truncated, _ = _step_from(env, state, 0.0)
    assert terminated is done and truncated is False
    theta = env.state[2]
    assert reward == (-100.0 if done else pytest.approx(math.cos(theta), abs=1e-12))
    if state[2] == 0.0 and not done:
        assert reward == pytest.approx(1.0, abs=1e-9)  # upright (equilibrium)
    if state[2] == math.pi and not done:
        assert reward == pytest.approx(-1.0, abs=1e-9)  # hanging (equilibrium)


@pytest.mark.parametrize(
    "theta1, theta2, expected",
    [
        (0.0, 0.0, -4.0),  # hanging: tip (0, −2), target (0, 2)
        (math.pi, math.pi, 0.0),  # upright: tip at the target
        (0.0, math.pi, -2.0),  # elbow at (0, −1), link 2 up: tip (0, 0)
        (math.pi, 0.0, -2.0),  # elbow at (0, 1), link 2 down: tip (0, 0)
    ],
)
def test_double_pendulum_reward_at_equilibria(theta1, theta2, expected):
    """Hand-computed rewards at (rest) equilibria, where the step leaves the state put."""
    env = DoublePendulumEnv()
    _, reward, terminated, truncated, _ = _step_from(env, [theta1, theta2, 0.0, 0.0], 0.0)
    assert reward == pytest.approx(expected, abs=1e-9)
    assert terminated is False and truncated is False


@pytest.mark.parametrize("theta1, theta2", [(math.pi / 2, math.pi / 2), (0.3, -1.2), (2.0, 2.5)])
def test_double_pendulum_reward_formula(theta1, theta2):
    """Reward −‖(sin θ1 − sin θ2, −cos θ1 − cos θ2) − (0, 2)‖ on the post-step state
    (rllab's tip formula, x-sign as written): with both links horizontal to the right it
    is ≈ −2, not the −2√2 of the geometric tip (2, 0)."""
    env = DoublePendulumEnv()
    _, reward, *_ = _step_from(env, [theta1, theta2, 0.0, 0.0], 0.0)
    t1, t2 = env.state[:2]
    expected = -math.hypot(math.sin(t1) - math.sin(t2), -math.cos(t1) - math.cos(t2) - 2.0)
    assert reward == pytest.approx(expected, abs=1e-12)
    if theta1 == theta2 == math.pi / 2:
        assert reward == pytest.approx(-2.0, abs=0.02)


@pytest.mark.parametrize("env_cls", [CartpoleVectorEnv, CartpoleSwingUpVectorEnv, DoublePendulumVectorEnv])
def test_truncation_at_500_steps(env_cls):
    """Truncated exactly at step 500 with terminated False (states pinned at rest
    equilibria so nothing terminates), then autoreset on step 501."""
    env = env_cls(num_envs=2)
    env.reset(seed=0)
    rest = {CartpoleVectorEnv: [0.0, 0.0, 0.0, 0.0], CartpoleSwingUpVectorEnv: [0.0, 0.0, math.pi, 0.0]}
    zero = np.zeros((2, 1), dtype=np.float32)
    for t in range(1, 501):
        if env_cls in rest:
            env.state = np.array(rest[env_cls])[:, None].repeat(2, 1)
        _, _, terminated, truncated, _ = env.step(zero)
        assert not terminated.any()
        assert truncated.all() == (t == 500) and truncated.any() == (t == 500)
    _, reward, terminated, truncated, _ = env.step(zero)
    assert not (terminated.any() or truncated.any() or reward.any())


def test_single_env_truncation_at_500_steps():
    env = DoublePendulumEnv()
    env.reset(seed=0)
    for t in range(1, 501):
        _, _, terminated, truncated, _ = env.step(np.zeros(1, dtype=np.float32))
        assert terminated is False and truncated is (t == 500)


def test_extreme_actions_keep_state_finite():
    """Bang-bang full torque for 2000 steps: Box2D's per-step rotation cap keeps the
    explicit integrator finite (|ω| ≤ π/2 / dt)."""
    rng = np.random.default_rng(0)
    for env_cls in (DoublePendulumVectorEnv, CartpoleSwingUpVectorEnv):
        env = env_cls(num_envs=64, max_episode_steps=2000)
        env.reset(seed=0)
        for _ in range(2000):
            obs, reward, *_ = env.step(rng.choice([-1.0, 1.0], size=(64, 1)).astype(np.float32))
        assert np.isfinite(env.state).all() and np.isfinite(obs).all() and np.isfinite(reward).all()
    assert np.abs(DoublePendulumVectorEnv(1).task.physics.max_omega - math.pi / 2 / 0.01) < 1e-9
