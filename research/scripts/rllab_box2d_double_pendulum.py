"""rllab's Box2D double pendulum against our DoublePendulum: item 5 of ``rllab_box2d.py``
(``python research/scripts/rllab_box2d.py --double-pendulum`` runs it).

One-step agreement from random states and torques, energy left in free swinging (links
released in phase and in anti-phase), mean energy under random bang-bang torques, and how
much of the one-step residual along Box2D trajectories joint damping laws explain (why
there is no ``DoublePendulumRllab``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository (research/scripts/../..)

from steinrl.envs.double_pendulum import DT as DP_DT  # noqa: E402
from steinrl.envs.double_pendulum import FRAME_SKIP as DP_FRAME_SKIP  # noqa: E402
from steinrl.envs.double_pendulum import MAX_TORQUE, RESET_STD, DoublePendulumPhysics  # noqa: E402
from steinrl.envs.rllab_box2d import Box2DDoublePendulum  # noqa: E402

__all__ = ["double_pendulum", "double_pendulum_energy", "print_double_pendulum"]


def double_pendulum_energy(state: np.ndarray) -> np.ndarray:
    """Mechanical energy (J) of double-pendulum states ``(..., 4)`` ``[θ1, θ2, ω1, ω2]``, zero
    hanging at rest (DoublePendulumPhysics' mass-matrix and gravity constants)."""
    p = DoublePendulumPhysics(1)
    theta1, theta2, omega1, omega2 = np.moveaxis(state, -1, 0)
    kinetic = (0.5 * p.a1 * omega1**2 + 0.5 * p.a2 * omega2**2
               + p.k * np.cos(theta1 - theta2) * omega1 * omega2)
    return kinetic + p.g1 * (1.0 - np.cos(theta1)) + p.g2 * (1.0 - np.cos(theta2))


def double_pendulum(n: int, seed: int = 4) -> dict[str, float | tuple[float, ...]]:
    """rllab's Box2D double pendulum against ours (item 5 of the module docstring)."""
    rng = np.random.default_rng(seed)
    sim, out = Box2DDoublePendulum(), {}
    states = np.c_[rng.normal(0.0, 1.0, (n, 2)), rng.normal(0.0, 2.0, (n, 2))]
    torques = rng.uniform(-MAX_TORQUE, MAX_TORQUE, n)
    ref = np.array([(sim.reset(s), sim.step(t))[1] for s, t in zip(states, torques)])
    ours = states.T.copy()
    DoublePendulumPhysics(n).step(ours, torques, substeps=DP_FRAME_SKIP)
    err = np.abs(ours.T - ref)
    out |= {"omega_err_median": float(np.median(err[:, 2:])), "omega_err_max": float(err[:, 2:].max())}

    env_dt, steps = DP_DT * DP_FRAME_SKIP, 250  # 5 s
    marks = (round(1 / env_dt), steps)
    for mode, sign in (("in_phase", 1.0), ("anti_phase", -1.0)):
        for a in (0.3, 1.0):
            start = np.array([a, sign * a, 0.0, 0.0])
            s, e0 = start[:, None].copy(), double_pendulum_energy(start)
            physics, box2d, mine = DoublePendulumPhysics(1), [], []
            sim.reset(start)
            for t in range(1, steps + 1):
                b = sim.step(0.0)
                physics.step(s, np.zeros(1), substeps=DP_FRAME_SKIP)
                if t in marks:
                    box2d.append(double_pendulum_energy(b) / e0)
                    mine.append(double_pendulum_energy(s[:, 0]) / e0)
            out[f"free_{mode}_{a}"] = (*box2d, *mine)

    starts = rng.normal(size=(max(n // 25, 2), 4)) * RESET_STD
    actions = rng.choice([-1.0, 1.0], size=(len(starts), steps))
    for name, sub in (("box2d", 1), ("box2d_fine", 10)):
        e = np.zeros((steps, len(starts)))
        for i, start in enumerate(starts):
            sim.reset(start)
            for t in range(steps):
                e[t, i] = double_pendulum_energy(sim.step(MAX_TORQUE * actions[i, t], sub))
        out[f"driven_{name}"] = (e[marks[0] - 1].mean(), e[-1].mean())
    for name, dt in (("ours", DP_DT), ("ours_fine", DP_DT / 10)):
        s, e = starts.T.copy(), np.zeros((steps, len(starts)))
        physics = DoublePendulumPhysics(len(starts), dt=dt)
        for t in range(steps):
            physics.step(s, MAX_TORQUE * actions[:, t], substeps=round(env_dt / dt))
            e[t] = double_pendulum_energy(s.T)
        out[f"driven_{name}"] = (e[marks[0] - 1].mean(), e[-1].mean())

    before, forces, after = [], [], []  # one-step residual along Box2D trajectories, random torques
    for start in starts:
        sim.reset(start)
        for tau in rng.uniform(-MAX_TORQUE, MAX_TORQUE, 150):
            before.append(sim.state)
            forces.append(tau)
            after.append(sim.step(tau))
    before, forces, after = np.array(before), np.array(forces), np.array(after)
    physics = DoublePendulumPhysics(len(forces))
    mine = before.T.copy()
    physics.step(mine, forces, substeps=DP_FRAME_SKIP)
    residual = (after[:, 2:] - mine[2:].T).reshape(-1)
    omega1, omega2 = before[:, 2], before[:, 3]
    delta = before[:, 0] - before[:, 1]
    k_cos = physics.k * np.cos(delta)
    det = physics.a1 * physics.a2 - k_cos**2

    def velocity_change(q1: np.ndarray, q2: np.ndarray) -> np.ndarray:  # env_dt · M⁻¹ Q, flattened like residual
        return (env_dt * np.c_[physics.a2 * q1 - k_cos * q2, physics.a1 * q2 - k_cos * q1] / det[:, None]).reshape(-1)

    relative = omega2 - omega1
    laws = {"linear": (omega1, relative), "cubic": (omega1**3, relative**3)}
    rms = float(np.sqrt(np.mean(residual**2)))
    for name, (shoulder, elbow) in laws.items():  # Q = [−b1 s + b2 e, −b2 e]
        features = np.c_[velocity_change(-shoulder, np.zeros_like(shoulder)), velocity_change(elbow, -elbow)]
        coef = np.linalg.lstsq(features, residual, rcond=None)[0]
        out[f"regression_{name}"] = (rms, float(np.sqrt(np.mean((residual - features @ coef) ** 2))))
    return out


def print_double_pendulum(n: int) -> None:
    d = double_pendulum(n)
    print(f"double pendulum, one step from {n} states (|ω| ~ 2 rad/s), random torques: |ours - Box2D| "
          f"omega median {d['omega_err_median']:.2e} max {d['omega_err_max']:.2e} rad/s")
    for key in (k for k in d if k.startswith("free_")):
        b1, b5, o1, o5 = d[key]
        print(f"  free swing {key[5:]} rad, energy left after 1 s / 5 s: "
              f"Box2D {b1:.2f} / {b5:.2f}; ours {o1:.2f} / {o5:.2f}")
    print("  random bang-bang ±50 N m from the reset, mean energy (J) after 1 s / 5 s: " + "; ".join(
        f"{k[7:]} {d[k][0]:.0f} / {d[k][1]:.0f}" for k in d if k.startswith("driven_"))
          + f"  (ours_fine: dt {DP_DT / 10} s, box2d_fine: 10 world steps per step)")
    for name in ("linear", "cubic"):
        before, after = d[f"regression_{name}"]
        print(f"  one-step ω residual along Box2D trajectories (random torques), rms {before:.3f} rad/s; "
              f"with fitted {name} joint damping at both joints {after:.3f}")
