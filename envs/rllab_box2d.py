"""rllab's Box2D cart-pole (``cartpole.xml.mako``), rebuilt with pybox2d: a reference, not a task.

This is the simulator the papers' cart-pole numbers were made on, used only to check our
numpy :mod:`steinrl.envs.cartpole` against it (``tests/test_envs_box2d.py``) and to study it
(``benchmarks/rllab_box2d.py``). It needs the optional ``Box2D`` package
(``pip install -e .[box2d]``); nothing else in steinrl imports it.

The model, as rllab's XML builds it: a 1 kg cart (box 4/√12 × 3/√12 m, density 1) on a
prismatic joint along x; a 0.1 kg pole (rectangle 0.1 × 1 m, density 1) whose body origin
is the pivot, on a revolute joint at the top of the cart; gravity (0, −10); no contacts
(joined bodies do not collide, pole and track share a negative group); one world step of
0.05 s with 8 velocity and 3 position iterations per env step; the force is applied at the
cart's centre. Box2D's ``linearVelocity`` is the velocity of a body's centre of mass, so a
state ``[x, ẋ, θ, θ̇]`` places the pole's centre at ``pivot + 0.5 (−sin θ, cos θ)`` moving at
``ẋ + θ̇ × r``.

``reset(quirk=True)`` reproduces rllab's ``CartpoleSwingupEnv.reset``: it restores the
initial world and then moves the cart and turns the pole, but leaves the pole's body at
the initial pivot position with zero linear velocity, so the joint is torn open by the
cart's offset until the solver closes it during the first step. DESIGN.md says our tasks
must not reproduce this; the model offers it to measure what it changes.
"""

from __future__ import annotations

import math

import numpy as np

try:
    import Box2D
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("steinrl.envs.rllab_box2d needs the Box2D package: pip install -e .[box2d]") from exc

CART_WIDTH = 4.0 / math.sqrt(12.0)  # m
CART_HEIGHT = 3.0 / math.sqrt(12.0)  # m
POLE_WIDTH, POLE_LENGTH = 0.1, 1.0  # m
DT = 0.05  # s
VELOCITY_ITERATIONS, POSITION_ITERATIONS = 8, 3  # rllab's XML defaults
MAX_FORCE = 10.0  # N (ctrllimit)


class Box2DCartpole:
    """One rllab cart-pole world. States are ``[x, ẋ, θ, θ̇]`` (m, m/s, rad, rad/s), θ = 0 upright."""

    def __init__(self) -> None:
        world = Box2D.b2World(allow_sleeping=False)
        world.warmStarting, world.continuousPhysics, world.subStepping = True, True, False
        self.cart = world.CreateBody(type=Box2D.b2_dynamicBody, position=(0.0, CART_HEIGHT / 2))
        self.cart.CreatePolygonFixture(box=(CART_WIDTH / 2, CART_HEIGHT / 2), density=1.0, friction=0.0005)
        self.pole = world.CreateBody(type=Box2D.b2_dynamicBody, position=(0.0, CART_HEIGHT))
        half = POLE_WIDTH / 2
        self.pole.CreatePolygonFixture(
            vertices=[(half, 0.0), (half, POLE_LENGTH), (-half, POLE_LENGTH), (-half, 0.0)],
            density=1.0, friction=0.000002, groupIndex=-1)
        track = world.CreateBody(type=Box2D.b2_staticBody, position=(0.0, CART_HEIGHT / 2))
        track.CreatePolygonFixture(box=(100.0, 0.1), friction=0.000002, groupIndex=-1)
        world.CreateJoint(type=Box2D.b2RevoluteJoint, bodyA=self.cart, bodyB=self.pole, anchor=(0.0, CART_HEIGHT))
        world.CreateJoint(type=Box2D.b2PrismaticJoint, bodyA=track, bodyB=self.cart)
        self.world = world
        self._initial = [(tuple(b.position), b.angle, tuple(b.linearVelocity), b.angularVelocity)
                         for b in (self.cart, self.pole)]

    @property
    def state(self) -> np.ndarray:
        """``[x, ẋ, θ, θ̇]`` (float64), as rllab's observation."""
        return np.array([self.cart.position[0], self.cart.linearVelocity[0], self.pole.angle,
                         self.pole.angularVelocity])

    def reset(self, state: np.ndarray, quirk: bool = False) -> np.ndarray:
        """Put the world in ``state`` ``(4,)``; ``quirk=True`` does it as rllab's reset does."""
        x, x_dot, theta, theta_dot = (float(v) for v in state)
        for body, (pos, angle, vel, ang_vel) in zip((self.cart, self.pole), self._initial):
            body.position, body.angle, body.linearVelocity, body.angularVelocity = pos, angle, vel, ang_vel
        self.cart.position = (x, CART_HEIGHT / 2)
        self.cart.linearVelocity = (x_dot, 0.0)
        self.pole.angle = theta
        self.pole.angularVelocity = theta_dot
        if not quirk:  # the pole's pivot on the cart, its centre moving with the pivot and the spin
            r = 0.5 * POLE_LENGTH
            self.pole.position = (x, CART_HEIGHT)
            self.pole.linearVelocity = (x_dot - r * theta_dot * math.cos(theta), -r * theta_dot * math.sin(theta))
        return self.state

    def step(self, force: float, substeps: int = 1) -> np.ndarray:
        """One env step (``DT``) under ``force`` in N (clipped to ±10); returns the new state.

        rllab takes one world step per env step; ``substeps > 1`` splits it into that many
        world steps of ``DT / substeps`` (to see what the coarse step does).
        """
        f = min(max(float(force), -MAX_FORCE), MAX_FORCE)
        for _ in range(substeps):  # Box2D clears applied forces after every world step
            self.cart.ApplyForce((f, 0.0), self.cart.GetWorldPoint((0.0, 0.0)), True)
            self.world.Step(DT / substeps, VELOCITY_ITERATIONS, POSITION_ITERATIONS)
        return self.state
