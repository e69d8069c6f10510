"""rllab's Box2D cart-pole (``cartpole.xml.mako``) and double pendulum
(``double_pendulum.xml.mako``), rebuilt with pybox2d: references, not tasks.

This is the simulator the papers' numbers were made on, used only to check our numpy
:mod:`steinrl.envs.cartpole` against it (``tests/test_envs_box2d.py``), to fit the damping of
:mod:`steinrl.envs.cartpole_rllab` (``tests/test_envs_damped.py``) and to study it
(``research/scripts/rllab_box2d.py``). It needs the optional ``Box2D`` package
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
cart's offset until the solver closes it during the first step. Our tasks do not reproduce
this (docs/tasks.md, "Reset and other rules"); the model offers it to measure what it changes.

:class:`Box2DDoublePendulum` is rllab's double pendulum: two 0.5 kg links (rectangles
0.1 × 1 m, density 5) hanging from the origin, link 1 pinned to a static track at the
origin, link 2 to the end of link 1; no contacts (group −1); torque through the elbow
joint's motor as rllab applies it (motor speed ±1e5 rad/s, maximal motor torque |τ|, so the
solver applies ±|τ|: +τ on link 2, −τ on link 1); world steps of 0.01 s with 20 velocity
and 20 position iterations, 2 per env step. States ``[θ1, θ2, ω1, ω2]`` are absolute angles
from hanging down, as in :mod:`steinrl.envs.double_pendulum`; ``reset`` places both links
consistently (no quirk).
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

LINK_WIDTH, LINK_LENGTH, LINK_DENSITY = 0.1, 1.0, 5.0  # m, m, kg/m²
DP_DT, DP_FRAME_SKIP = 0.01, 2  # s per world step, world steps per env step
DP_VELOCITY_ITERATIONS, DP_POSITION_ITERATIONS = 20, 20  # double_pendulum.xml.mako
DP_MAX_TORQUE = 50.0  # N m (ctrllimit)
MOTOR_SPEED = 1e5  # rad/s, rllab's unreachable motor target: the motor always gives its maximal torque


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


class Box2DDoublePendulum:
    """One rllab double-pendulum world. States are ``[θ1, θ2, ω1, ω2]`` (rad, rad/s), absolute
    angles counter-clockwise from hanging down."""

    def __init__(self) -> None:
        world = Box2D.b2World(allow_sleeping=False)
        world.warmStarting, world.continuousPhysics, world.subStepping = True, True, False
        half = LINK_WIDTH / 2
        rod = [(half, 0.0), (half, -LINK_LENGTH), (-half, -LINK_LENGTH), (-half, 0.0)]  # origin at its top
        self.links = []
        for top in ((0.0, 0.0), (0.0, -LINK_LENGTH)):
            link = world.CreateBody(type=Box2D.b2_dynamicBody, position=top)
            link.CreatePolygonFixture(vertices=rod, density=LINK_DENSITY, groupIndex=-1)
            self.links.append(link)
        track = world.CreateBody(type=Box2D.b2_staticBody, position=(0.0, -0.1))
        track.CreatePolygonFixture(box=(100.0, 0.1), groupIndex=-1)
        world.CreateJoint(type=Box2D.b2RevoluteJoint, bodyA=track, bodyB=self.links[0], anchor=(0.0, 0.0))
        self.elbow = world.CreateJoint(type=Box2D.b2RevoluteJoint, bodyA=self.links[0], bodyB=self.links[1],
                                       anchor=(0.0, -LINK_LENGTH))
        self.elbow.motorEnabled = True
        self.world = world

    @property
    def state(self) -> np.ndarray:
        """``[θ1, θ2, ω1, ω2]`` (float64)."""
        l1, l2 = self.links
        return np.array([l1.angle, l2.angle, l1.angularVelocity, l2.angularVelocity])

    def reset(self, state: np.ndarray) -> np.ndarray:
        """Put the world in ``state`` ``(4,)``: each link's top on its joint, its centre moving
        with the joint and the spin."""
        theta1, theta2, omega1, omega2 = (float(v) for v in state)
        top, top_velocity = (0.0, 0.0), (0.0, 0.0)
        r = 0.5 * LINK_LENGTH
        for link, theta, omega in zip(self.links, (theta1, theta2), (omega1, omega2)):
            c, s = math.cos(theta), math.sin(theta)
            link.position, link.angle, link.angularVelocity = top, theta, omega
            link.linearVelocity = (top_velocity[0] + r * omega * c, top_velocity[1] + r * omega * s)
            top = (top[0] + LINK_LENGTH * s, top[1] - LINK_LENGTH * c)
            top_velocity = (top_velocity[0] + LINK_LENGTH * omega * c, top_velocity[1] + LINK_LENGTH * omega * s)
        return self.state

    def step(self, torque: float, substeps: int = 1) -> np.ndarray:
        """One env step (``DP_FRAME_SKIP`` world steps of ``DP_DT``) under the elbow ``torque``
        in N m (clipped to ±50), through the motor as rllab drives it; returns the new state.
        ``substeps > 1`` splits each world step into that many."""
        tau = min(max(float(torque), -DP_MAX_TORQUE), DP_MAX_TORQUE)
        self.elbow.motorSpeed = MOTOR_SPEED if tau > 0 else -MOTOR_SPEED
        self.elbow.maxMotorTorque = abs(tau)
        for _ in range(DP_FRAME_SKIP * substeps):
            self.world.Step(DP_DT / substeps, DP_VELOCITY_ITERATIONS, DP_POSITION_ITERATIONS)
        return self.state
