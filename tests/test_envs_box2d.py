"""Our numpy cart-pole against rllab's own Box2D model (``steinrl.envs.rllab_box2d``, pybox2d).

Box2D is a second, independent simulator of the same bodies: a constraint solver on
maximal coordinates, where our physics solves the reduced Lagrangian equations. From the
same state and force the two must agree to about Box2D's constraint-solver lag (~1e-3 rad/s,
docs/tasks.md), and a wrong mass in ours must show up far above that.
Skipped when the optional ``Box2D`` package is missing (``pip install -e .[box2d]``).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("Box2D")

from steinrl.envs.cartpole import SWINGUP_RESET_HIGH, SWINGUP_RESET_LOW, CartPolePhysics  # noqa: E402
from steinrl.envs.rllab_box2d import Box2DCartpole  # noqa: E402


def _states_and_forces(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Swing-up reset states, a third of them turned to near-upright, and forces in ±10 N."""
    rng = np.random.default_rng(seed)
    states = rng.uniform(SWINGUP_RESET_LOW, SWINGUP_RESET_HIGH, size=(n, 4))
    states[: n // 3, 2] -= np.pi  # near upright: θ ~ U(±1)
    return states, rng.uniform(-10.0, 10.0, size=n)


def _errors(steps: int, pole_mass: float = 0.1) -> np.ndarray:
    """|ours − Box2D| ``(n, 4)`` after ``steps`` env steps under a constant force."""
    states, forces = _states_and_forces()
    box2d = Box2DCartpole()
    ours = states.T.copy()  # (4, n)
    physics = CartPolePhysics(len(forces), pole_mass=pole_mass, pole_inertia_com=pole_mass * 1.01 / 12)
    ref = []
    for state, force in zip(states, forces):
        box2d.reset(state)
        for _ in range(steps):
            next_state = box2d.step(force)
        ref.append(next_state)
    for _ in range(steps):
        physics.step(ours, forces)
    return np.abs(ours.T - np.array(ref))


def test_one_step_matches_rllab_box2d_and_a_wrong_mass_does_not():
    err = _errors(1)
    median, worst = np.median(err, 0), err.max(0)
    assert median[3] < 1e-2 and worst[3] < 0.05  # θ̇, rad/s
    assert median[1] < 1e-2 and worst[1] < 0.05  # ẋ, m/s
    assert worst[0] < 5e-3 and worst[2] < 5e-3  # x, θ
    wrong = np.median(_errors(1, pole_mass=0.2), 0)  # the bounds are tight enough to see it
    assert wrong[3] > 5 * median[3] and wrong[1] > 5 * median[1]


def test_five_steps_match_rllab_box2d():
    median = np.median(_errors(5), 0)
    assert median[3] < 0.05 and median[2] < 0.01 and median[1] < 0.01


def test_rllab_reset_quirk_is_not_our_reset():
    """rllab's reset leaves the pole's body where it was: the first step then jumps the angle."""
    states, _ = _states_and_forces()
    jumps = {}
    for quirk in (False, True):
        box2d = Box2DCartpole()
        after = np.array([(box2d.reset(s, quirk=quirk), box2d.step(0.0))[1] for s in states])
        physics, ours = CartPolePhysics(len(states)), states.T.copy()
        physics.step(ours, np.zeros(len(states)))
        jumps[quirk] = np.abs(after[:, 2] - ours[2])
    assert np.median(jumps[False]) < 1e-3
    assert np.median(jumps[True]) > 0.1
