#!/usr/bin/env python
"""Our CartpoleSwingUp against rllab's own Box2D model (a diagnostic for the swing-up gap).

    pip install -e .[box2d]
    python benchmarks/rllab_box2d.py                    # transitions + reset quirk (seconds)
    python benchmarks/rllab_box2d.py --train s2vgd-a2c --iterations 500 --seeds 0

Uses ``steinrl.envs.rllab_box2d`` (rllab's ``cartpole.xml.mako`` rebuilt with pybox2d) to measure:

1. one-step agreement: from 2000 swing-up reset states and random forces in ±10 N, the
   median and largest |ours − Box2D| of the next ``ẋ`` and ``θ̇``;
2. rllab's reset quirk (its reset moves the cart but leaves the pole's body behind, so
   the first step jumps the pole's angle, unseen by the first observation): the mean and
   largest jump of θ over the first step (against a proper reset of the same state), and
   the share of episodes whose pole is within 120° of upright after it, with either reset;
3. energy: with no force, from swinging poles (cart at rest at 0, θ ~ U(π ± 2),
   θ̇ ~ U(±3)), the mechanical energy left after
   1 s and 5 s (20 and 100 steps) as a share of the initial, for our physics, for Box2D at
   rllab's 0.05 s step and for Box2D at 0.002 s (25 world steps per env step). Box2D's
   constraint solver damps the swinging pole at the coarse step, our exact equations
   (as DESIGN.md specifies them) do not;
4. with ``--train ALGO``: steinrl training (paper settings, ``--iterations``, seeds
   ``--seeds``) on the Box2D model with rllab's reset (``quirk``), with a proper reset
   (``box2d``), and on our numpy task (``ours``); per variant and seed the max-particle
   return (``rollout/ep_rew_max_particle``) at iterations 50/100/200/... and its peak.
   The Box2D model steps in a Python loop, about 2 s per paper-scale iteration.

Last line: ``rllab_box2d thetadot_err_median=<rad/s> quirk_angle_jump_mean=<rad>
quirk_near_upright=<share> energy_left_5s_ours=<share> energy_left_5s_box2d=<share>`` plus ``peak_<variant>=<seed-mean>`` for trained variants.
"""

from __future__ import annotations

import argparse
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from steinrl.envs.cartpole import SWINGUP_RESET_HIGH, SWINGUP_RESET_LOW, CartPolePhysics  # noqa: E402

try:
    from steinrl.envs.rllab_box2d import Box2DCartpole  # noqa: E402
except ImportError as exc:
    sys.exit(f"error: {exc}")

VARIANT_IDS = {"quirk": "steinrl-ref/RllabBox2DSwingUpQuirk-v0", "box2d": "steinrl-ref/RllabBox2DSwingUp-v0",
               "ours": "CartpoleSwingUp"}


class RllabBox2DSwingUp(gym.Env):
    """rllab's CartpoleSwingupEnv on the Box2D model: reward cos θ, −100 and done at |x| > 3."""

    def __init__(self, quirk: bool = True):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.quirk = quirk
        self.sim = Box2DCartpole()

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        state = self.np_random.uniform(SWINGUP_RESET_LOW, SWINGUP_RESET_HIGH)
        return self.sim.reset(state, quirk=self.quirk).astype(np.float32), {}

    def step(self, action):
        x, _, theta, _ = state = self.sim.step(10.0 * float(np.asarray(action).reshape(-1)[0]))
        done = abs(x) > 3.0
        return state.astype(np.float32), (-100.0 if done else math.cos(theta)), bool(done), False, {}


for _variant, _quirk in (("quirk", True), ("box2d", False)):
    gym.register(VARIANT_IDS[_variant], entry_point=RllabBox2DSwingUp, kwargs={"quirk": _quirk},
                 max_episode_steps=500)


def transitions(n: int, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    states = rng.uniform(SWINGUP_RESET_LOW, SWINGUP_RESET_HIGH, size=(n, 4))
    forces = rng.uniform(-10.0, 10.0, size=n)
    sim = Box2DCartpole()
    ref = np.array([(sim.reset(s), sim.step(f))[1] for s, f in zip(states, forces)])
    ours = states.T.copy()
    CartPolePhysics(n).step(ours, forces)
    err = np.abs(ours.T - ref)
    jump, near_upright, near_upright_proper = [], [], []
    for s in states:
        after = (sim.reset(s, quirk=True), sim.step(0.0))[1]
        proper = (sim.reset(s), sim.step(0.0))[1]
        jump.append(abs(after[2] - proper[2]))
        near_upright.append(math.cos(after[2]) > -0.5)
        near_upright_proper.append(math.cos(proper[2]) > -0.5)
    return {"xdot_err_median": float(np.median(err[:, 1])), "xdot_err_max": float(err[:, 1].max()),
            "thetadot_err_median": float(np.median(err[:, 3])), "thetadot_err_max": float(err[:, 3].max()),
            "quirk_angle_jump_mean": float(np.mean(jump)), "quirk_angle_jump_max": float(np.max(jump)),
            "quirk_near_upright": float(np.mean(near_upright)), "near_upright": float(np.mean(near_upright_proper))}


def energy(state: np.ndarray) -> np.ndarray:
    """Mechanical energy (J) of cart-pole states ``(..., 4)``, zero for the pole hanging at rest."""
    p = CartPolePhysics(1)  # its mass, h = m l / 2 and pivot inertia are DESIGN.md's
    x_dot, theta, theta_dot = state[..., 1], state[..., 2], state[..., 3]
    kinetic = (0.5 * p.total_mass * x_dot**2 - p.half_ml * np.cos(theta) * x_dot * theta_dot
               + 0.5 * p.pivot_inertia * theta_dot**2)
    return kinetic + p.half_ml * p.gravity * (np.cos(theta) + 1.0)


def energy_left(n: int, seed: int = 1) -> dict[str, tuple[float, float]]:
    """Share of the initial energy left after 20 and 100 force-free steps, per simulator."""
    rng = np.random.default_rng(seed)
    states = np.zeros((n, 4))
    states[:, 2] = rng.uniform(np.pi - 2.0, np.pi + 2.0, n)
    states[:, 3] = rng.uniform(-3.0, 3.0, n)
    marks = (20, 100)
    after = {name: np.zeros((len(marks), n, 4)) for name in ("ours", "box2d", "box2d_fine")}
    ours, physics = states.T.copy(), CartPolePhysics(n)
    for t in range(1, marks[-1] + 1):
        physics.step(ours, np.zeros(n))
        if t in marks:
            after["ours"][marks.index(t)] = ours.T
    sim = Box2DCartpole()
    for name, substeps in (("box2d", 1), ("box2d_fine", 25)):
        for i, state in enumerate(states):
            sim.reset(state)
            for t in range(1, marks[-1] + 1):
                sim.step(0.0, substeps)
                if t in marks:
                    after[name][marks.index(t), i] = sim.state
    e0 = energy(states).mean()
    return {name: tuple(energy(a).mean(1) / e0) for name, a in after.items()}


def train_one(args: tuple[str, str, int, int, str]) -> tuple[str, int, np.ndarray]:
    variant, algo, seed, iterations, logdir = args
    import torch

    from steinrl.run.config import resolve_config
    from steinrl.run.trainer import Trainer

    torch.set_num_threads(1)
    cfg = resolve_config(VARIANT_IDS[variant], overrides=dict(
        algo=algo, seed=seed, iterations=iterations, logdir=logdir, run_name=f"{variant}-seed{seed}",
        progress=False, horizon=500))
    curve: list[float] = []
    Trainer(cfg).train(callback=lambda it, s: curve.append(s["rollout/ep_rew_max_particle"]) is None)
    return variant, seed, np.array(curve)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--states", type=int, default=2000, help="states for the transition and quirk checks")
    p.add_argument("--train", metavar="ALGO", help="also train ALGO on the three variants")
    p.add_argument("--variants", default="quirk,box2d,ours", help="comma-separated subset of quirk,box2d,ours")
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--seeds", default="0", help="comma-separated seeds")
    p.add_argument("--jobs", type=int, default=2, help="training runs at a time")
    p.add_argument("--logdir", default="runs/rllab_box2d")
    args = p.parse_args()

    t = transitions(args.states)
    print(f"one step from {args.states} swing-up reset states, random forces: |ours - Box2D| "
          f"xdot median {t['xdot_err_median']:.2e} max {t['xdot_err_max']:.2e} m/s, "
          f"thetadot median {t['thetadot_err_median']:.2e} max {t['thetadot_err_max']:.2e} rad/s")
    print(f"rllab's reset quirk: first-step angle jump mean {t['quirk_angle_jump_mean']:.3f} max "
          f"{t['quirk_angle_jump_max']:.3f} rad; pole within 120 deg of upright after it in "
          f"{100 * t['quirk_near_upright']:.1f}% of episodes (proper reset: {100 * t['near_upright']:.1f}%)")
    e = energy_left(min(args.states, 300))
    print("energy left with no force, swinging pole, cart at rest (after 1 s / 5 s): "
          f"ours {e['ours'][0]:.2f} / {e['ours'][1]:.2f}; Box2D at rllab's 0.05 s step "
          f"{e['box2d'][0]:.2f} / {e['box2d'][1]:.2f}; Box2D at 0.002 s {e['box2d_fine'][0]:.2f} / {e['box2d_fine'][1]:.2f}")
    summary = (f"rllab_box2d thetadot_err_median={t['thetadot_err_median']:.2e} "
               f"quirk_angle_jump_mean={t['quirk_angle_jump_mean']:.3f} quirk_near_upright={t['quirk_near_upright']:.3f} "
               f"energy_left_5s_ours={e['ours'][1]:.2f} energy_left_5s_box2d={e['box2d'][1]:.2f}")
    if args.train:
        variants = [v.strip() for v in args.variants.split(",")]
        bad = [v for v in variants if v not in VARIANT_IDS]
        if bad:
            sys.exit(f"error: unknown variant(s) {bad}; choose from {sorted(VARIANT_IDS)}")
        jobs = [(v, args.train, int(s), args.iterations, args.logdir) for v in variants for s in args.seeds.split(",")]
        print(f"training {args.train} for {args.iterations} iterations: {len(jobs)} runs, {args.jobs} at a time")
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(train_one, jobs))
        marks = [m for m in (50, 100, 200, 300, 500, 700, 1000) if m <= args.iterations]
        for variant in variants:
            peaks = []
            for v, seed, curve in results:
                if v != variant:
                    continue
                peaks.append(curve.max())
                at = " ".join(f"{m}:{curve[:m].max():.0f}" for m in marks)
                print(f"  {variant:6s} seed {seed}: best so far at {at}; peak {curve.max():.1f} at {curve.argmax()}")
            summary += f" peak_{variant}={np.mean(peaks):.1f}"
    print(summary)


if __name__ == "__main__":
    main()
