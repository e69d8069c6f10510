#!/usr/bin/env python
"""Our CartpoleSwingUp (exact, and with the fitted rllab damping) against rllab's own Box2D
model (a diagnostic for the swing-up gap).

    pip install -e .[box2d]
    python research/scripts/rllab_box2d.py                    # transitions, reset quirk, energy (seconds)
    python research/scripts/rllab_box2d.py --fit              # also fit the damping laws (~15 s)
    python research/scripts/rllab_box2d.py --double-pendulum  # also rllab's double pendulum (~30 s)
    python research/scripts/rllab_box2d.py --train s2vgd-a2c --iterations 500 --seeds 0

Uses ``steinrl.envs.rllab_box2d`` (rllab's ``cartpole.xml.mako`` rebuilt with pybox2d) to measure,
for our exact physics (``ours``) and the damped ``CartpoleSwingUpRllab`` (``damped``,
:mod:`steinrl.envs.cartpole_rllab`):

1. one-step agreement: from 2000 swing-up reset states and random forces in ±10 N, the
   median and largest |model − Box2D| of the next ``ẋ`` and ``θ̇``; and the same along
   Box2D's own trajectories (random forces, 40 steps from swing-up reset states), where
   Box2D's damping acts (it does not on the first step after a reset);
2. rllab's reset quirk (its reset moves the cart but leaves the pole's body behind, so
   the first step jumps the pole's angle, unseen by the first observation): the mean and
   largest jump of θ over the first step (against a proper reset of the same state), and
   the share of episodes whose pole is within 120° of upright after it, with either reset;
3. energy: with no force, the cart at rest at 0, the mechanical energy left (mean over
   states, as a share of the initial mean) after 1 s and 5 s (20 and 100 steps), for
   swinging poles (θ ~ U(π ± 2), θ̇ ~ U(±3)), for the swing-up reset's pole (θ ~ U(π ± 1),
   θ̇ ~ U(±3)) and for poles released from amplitudes 0.5 ... 3 rad; for ours, damped,
   Box2D at rllab's 0.05 s step and (swinging poles) Box2D at 0.002 s (25 world steps per
   env step). Box2D's constraint solver damps the swinging pole at the coarse step, our
   exact equations (docs/tasks.md) do not, the damped task does likewise;
4. with ``--fit``: the damping laws ``b θ̇``, ``b |θ̇| θ̇``, ``b θ̇³`` fitted (least squares) to
   the energy left after 1, 2, 3, 5, 10 s of the sets of 3., and the same laws regressed on
   the one-step θ̇ residual along Box2D trajectories (where the cubic law comes from);
5. with ``--double-pendulum``: rllab's double pendulum (``Box2DDoublePendulum``) against
   ours: one-step agreement, energy left in free swinging (links released in phase and in
   anti-phase), mean energy under random bang-bang torques, and how much of the one-step
   residual along Box2D trajectories joint damping laws explain (why there is no
   ``DoublePendulumRllab``);
6. with ``--train ALGO``: steinrl training (paper settings, ``--iterations``, seeds
   ``--seeds``) on the Box2D model with rllab's reset (``quirk``), with a proper reset
   (``box2d``), on our numpy task (``ours``) and on the damped one (``damped``); per
   variant and seed the max-particle return (``rollout/ep_rew_max_particle``) at iterations
   50/100/200/... and its peak. The Box2D model steps in a Python loop, about 2 s per
   paper-scale iteration.

Last line: ``rllab_box2d thetadot_err_median=<rad/s> quirk_angle_jump_mean=<rad>
quirk_near_upright=<share> energy_left_5s_ours=<share> energy_left_5s_box2d=<share>``
(swinging poles, as before) then ``thetadot_err_median_traj_ours=<rad/s>
thetadot_err_median_traj_damped=<rad/s> energy_left_1s_box2d=<share>
energy_left_1s_damped=<share> energy_left_5s_box2d_swingup=<share>
energy_left_5s_damped=<share> energy_err_max_damped=<share>`` (the 1 s / 5 s figures on the
swing-up reset's poles; the largest |damped − Box2D| over all sets at 1 s and 5 s),
``b_cubic=<N m s³>`` with ``--fit``, and ``peak_<variant>=<seed-mean>`` for trained
variants.
"""

from __future__ import annotations

import argparse
import math
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository (research/scripts/../..)

from steinrl.envs.cartpole import DT, SWINGUP_RESET_HIGH, SWINGUP_RESET_LOW, CartPolePhysics  # noqa: E402
from steinrl.envs.cartpole_rllab import RLLAB_JOINT_DAMPING  # noqa: E402

try:
    from steinrl.envs.rllab_box2d import Box2DCartpole  # noqa: E402
except ImportError as exc:
    sys.exit(f"error: {exc}")

from rllab_box2d_double_pendulum import print_double_pendulum  # noqa: E402  (research/scripts/, beside this file)

VARIANT_IDS = {"quirk": "steinrl-ref/RllabBox2DSwingUpQuirk-v0", "box2d": "steinrl-ref/RllabBox2DSwingUp-v0",
               "ours": "CartpoleSwingUp", "damped": "CartpoleSwingUpRllab"}
#: Our two cart-pole models: exact physics and the fitted rllab damping (b in N m s³).
MODELS = {"ours": 0.0, "damped": RLLAB_JOINT_DAMPING}
ENERGY_MARKS_S = (1, 2, 3, 5, 10)  # s, where energy curves are compared in the fit
AMPLITUDES = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0)  # rad from hanging, released (nearly) at rest


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


def one_step_errors(states: np.ndarray, forces: np.ndarray, ref: np.ndarray) -> dict[str, np.ndarray]:
    """|model − Box2D| ``(n, 4)`` after one step from ``states`` ``(n, 4)`` under ``forces``
    ``(n,)`` (N), Box2D's next states ``ref`` ``(n, 4)``, per model of :data:`MODELS`."""
    errors = {}
    for name, damping in MODELS.items():
        s = states.T.copy()
        CartPolePhysics(len(forces), joint_damping=damping).step(s, forces)
        errors[name] = np.abs(s.T - ref)
    return errors


def box2d_trajectory_transitions(episodes: int, steps: int, seed: int = 2) -> tuple[np.ndarray, ...]:
    """Box2D transitions ``(state, force, next state)`` along trajectories under uniform random
    forces in ±10 N from swing-up reset states: shapes ``(episodes·steps, 4)``, ``(…,)``, ``(…, 4)``."""
    rng = np.random.default_rng(seed)
    sim, before, forces, after = Box2DCartpole(), [], [], []
    for start in rng.uniform(SWINGUP_RESET_LOW, SWINGUP_RESET_HIGH, size=(episodes, 4)):
        sim.reset(start)
        for force in rng.uniform(-10.0, 10.0, size=steps):
            before.append(sim.state)
            forces.append(force)
            after.append(sim.step(force))
    return np.array(before), np.array(forces), np.array(after)


def transitions(n: int, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    states = rng.uniform(SWINGUP_RESET_LOW, SWINGUP_RESET_HIGH, size=(n, 4))
    forces = rng.uniform(-10.0, 10.0, size=n)
    sim = Box2DCartpole()
    ref = np.array([(sim.reset(s), sim.step(f))[1] for s, f in zip(states, forces)])
    out = {}
    for name, err in one_step_errors(states, forces, ref).items():
        out |= {f"xdot_err_median_{name}": float(np.median(err[:, 1])), f"xdot_err_max_{name}": float(err[:, 1].max()),
                f"thetadot_err_median_{name}": float(np.median(err[:, 3])),
                f"thetadot_err_max_{name}": float(err[:, 3].max())}
    for name, err in one_step_errors(*box2d_trajectory_transitions(max(n // 40, 1), 40)).items():
        out |= {f"thetadot_err_median_traj_{name}": float(np.median(err[:, 3])),
                f"thetadot_err_max_traj_{name}": float(err[:, 3].max())}
    jump, near_upright, near_upright_proper = [], [], []
    for s in states:
        after = (sim.reset(s, quirk=True), sim.step(0.0))[1]
        proper = (sim.reset(s), sim.step(0.0))[1]
        jump.append(abs(after[2] - proper[2]))
        near_upright.append(math.cos(after[2]) > -0.5)
        near_upright_proper.append(math.cos(proper[2]) > -0.5)
    return out | {"quirk_angle_jump_mean": float(np.mean(jump)), "quirk_angle_jump_max": float(np.max(jump)),
                  "quirk_near_upright": float(np.mean(near_upright)),
                  "near_upright": float(np.mean(near_upright_proper))}


def energy(state: np.ndarray) -> np.ndarray:
    """Mechanical energy (J) of cart-pole states ``(..., 4)``, zero for the pole hanging at rest."""
    p = CartPolePhysics(1)  # its mass, h = m l / 2 and pivot inertia are the task's
    x_dot, theta, theta_dot = state[..., 1], state[..., 2], state[..., 3]
    kinetic = (0.5 * p.total_mass * x_dot**2 - p.half_ml * np.cos(theta) * x_dot * theta_dot
               + 0.5 * p.pivot_inertia * theta_dot**2)
    return kinetic + p.half_ml * p.gravity * (np.cos(theta) + 1.0)


def energy_sets(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Force-free start states ``(m, 4)``, the cart at rest at 0: ``swinging`` (n poles,
    θ ~ U(π ± 2), θ̇ ~ U(±3)), ``swingup`` (n, θ ~ U(π ± 1), θ̇ ~ U(±3)) and ``A=<a>``
    (n / 15 poles at θ = π ± a, θ̇ ~ U(±0.2)) for each amplitude of :data:`AMPLITUDES`."""
    rng = np.random.default_rng(seed)
    sets = {}
    for name, half_width in (("swinging", 2.0), ("swingup", 1.0)):
        states = np.zeros((n, 4))
        states[:, 2] = rng.uniform(np.pi - half_width, np.pi + half_width, n)
        states[:, 3] = rng.uniform(-3.0, 3.0, n)
        sets[name] = states
    m = max(n // 15, 2)
    for a in AMPLITUDES:
        states = np.zeros((m, 4))
        states[:, 2] = np.pi + a * np.where(np.arange(m) % 2, 1.0, -1.0)
        states[:, 3] = rng.uniform(-0.2, 0.2, m)
        sets[f"A={a}"] = states
    return sets


def box2d_energy_curve(states: np.ndarray, steps: int, substeps: int = 1) -> np.ndarray:
    """Mean energy over ``states`` ``(m, 4)`` after 0..steps force-free Box2D env steps, as a
    share of the initial mean, ``(steps + 1,)``."""
    sim, curve = Box2DCartpole(), np.zeros((steps + 1, len(states)))
    for i, state in enumerate(states):
        curve[0, i] = energy(sim.reset(state))
        for t in range(1, steps + 1):
            curve[t, i] = energy(sim.step(0.0, substeps))
    return curve.mean(1) / curve[0].mean()


def physics_energy_curve(physics: CartPolePhysics, states: np.ndarray, steps: int) -> np.ndarray:
    """As :func:`box2d_energy_curve` for our ``physics`` (batch ``m``)."""
    s, curve, force = states.T.copy(), [energy(states).mean()], np.zeros(len(states))
    for _ in range(steps):
        physics.step(s, force)
        curve.append(energy(s.T).mean())
    return np.array(curve) / curve[0]


def energy_left(n: int, seconds: float = 5.0) -> dict[str, dict[str, np.ndarray]]:
    """Energy curves ``(steps + 1,)`` per state set of :func:`energy_sets` and simulator
    (``box2d``, ``ours``, ``damped``; ``box2d_fine`` at 0.002 s for the swinging set)."""
    steps = round(seconds / DT)
    curves = {}
    for name, states in energy_sets(n).items():
        curves[name] = {"box2d": box2d_energy_curve(states, steps)} | {
            model: physics_energy_curve(CartPolePhysics(len(states), joint_damping=b), states, steps)
            for model, b in MODELS.items()}
    curves["swinging"]["box2d_fine"] = box2d_energy_curve(energy_sets(n)["swinging"], steps, substeps=25)
    return curves


class _LawPhysics(CartPolePhysics):
    """Cart-pole physics with the joint damping torque ``b · law(θ̇)`` (to compare laws)."""

    def __init__(self, num_envs: int, joint_damping: float, law) -> None:
        super().__init__(num_envs, joint_damping=joint_damping)
        self.law = law

    def damping_torque(self, theta_dot: np.ndarray, out: np.ndarray) -> np.ndarray:
        np.multiply(self.law(theta_dot), self.joint_damping, out=out)
        return out


DAMPING_LAWS = {"linear": lambda w: w, "quadratic": lambda w: w * np.abs(w), "cubic": lambda w: w**3}
LAW_BOUNDS = {"linear": 0.05, "quadratic": 0.01, "cubic": 0.003}  # N m s^k, upper end of the search


def fit_damping_laws(n: int) -> dict[str, tuple[float, float, float]]:
    """Per law of :data:`DAMPING_LAWS`: fitted ``b``, the loss (sum of squared energy-share
    errors at :data:`ENERGY_MARKS_S` over the sets of :func:`energy_sets`) and the largest
    |model − Box2D| at 1 s and 5 s."""
    from scipy.optimize import minimize_scalar

    steps = round(max(ENERGY_MARKS_S) / DT)
    marks = [round(t / DT) for t in ENERGY_MARKS_S]
    sets = energy_sets(n)
    ref = {name: box2d_energy_curve(states, steps) for name, states in sets.items()}

    def errors(b: float, law) -> np.ndarray:
        return np.array([physics_energy_curve(_LawPhysics(len(s), b, law), s, steps)[marks] - ref[name][marks]
                         for name, s in sets.items()])

    fits = {}
    for name, law in DAMPING_LAWS.items():
        res = minimize_scalar(lambda b, law=law: float((errors(b, law) ** 2).sum()), bounds=(0.0, LAW_BOUNDS[name]),
                              method="bounded", options={"xatol": 1e-8})
        err = np.abs(errors(res.x, law))
        fits[name] = (float(res.x), float(res.fun), float(err[:, [0, 3]].max()))
    return fits


def regress_damping_laws(episodes: int = 100, steps: int = 100) -> dict[str, tuple[float, float, float]]:
    """Per law: the per-step θ̇ change ``c · law(θ̇)`` (rad/s) that best explains Box2D's one-step
    θ̇ minus ours along Box2D trajectories (no force), and the rms residual before / after."""
    rng = np.random.default_rng(3)
    sim, before, after = Box2DCartpole(), [], []
    for start in rng.uniform(SWINGUP_RESET_LOW, SWINGUP_RESET_HIGH, size=(episodes, 4)) * [0, 0, 1, 1]:
        sim.reset(start)
        for _ in range(steps):
            before.append(sim.state)
            after.append(sim.step(0.0))
    before, after = np.array(before), np.array(after)
    ours = before.T.copy()
    CartPolePhysics(len(before)).step(ours, np.zeros(len(before)))
    residual, theta_dot = after[:, 3] - ours[3], before[:, 3]
    out = {}
    for name, law in DAMPING_LAWS.items():
        feature = law(theta_dot)
        c = float(feature @ residual / (feature @ feature))
        out[name] = (c, float(np.sqrt(np.mean(residual**2))), float(np.sqrt(np.mean((residual - c * feature) ** 2))))
    return out


def train_one(args: tuple[str, str, int, int, str]) -> tuple[str, int, np.ndarray]:
    variant, algo, seed, iterations, logdir = args
    import torch

    from steinrl.run.config import load_config
    from steinrl.run.trainer import Trainer

    torch.set_num_threads(1)
    # the papers' whole episodes, as this comparison ran (the swing-ups' files now default to continuing sampling)
    cfg = load_config(algo, VARIANT_IDS[variant], {"seed": seed, "iterations": iterations, "horizon": 500,
                                                   "rollout.sampling": "whole_episodes", "envs_per_particle": 10})
    trainer = Trainer(cfg)
    curve = [trainer.step()["rollout/ep_rew_max_particle"] for _ in range(iterations)]
    trainer.close()
    return variant, seed, np.array(curve)


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--states", type=int, default=2000, help="states for the transition and quirk checks")
    p.add_argument("--fit", action="store_true", help="fit the damping laws to Box2D's energy curves")
    p.add_argument("--double-pendulum", action="store_true", help="also measure rllab's double pendulum")
    p.add_argument("--train", metavar="ALGO", help="also train ALGO on the variants")
    p.add_argument("--variants", default="quirk,box2d,ours,damped",
                   help="comma-separated subset of quirk,box2d,ours,damped")
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--seeds", default="0", help="comma-separated seeds")
    p.add_argument("--jobs", type=int, default=2, help="training runs at a time")
    p.add_argument("--logdir", default="runs/rllab_box2d")
    args = p.parse_args()

    t = transitions(args.states)
    for name in MODELS:
        print(f"one step from {args.states} swing-up reset states, random forces: |{name} - Box2D| "
              f"xdot median {t[f'xdot_err_median_{name}']:.2e} max {t[f'xdot_err_max_{name}']:.2e} m/s, "
              f"thetadot median {t[f'thetadot_err_median_{name}']:.2e} max {t[f'thetadot_err_max_{name}']:.2e} rad/s")
    for name in MODELS:
        print(f"one step along Box2D trajectories (random forces, 40 steps from swing-up resets): |{name} - Box2D| "
              f"thetadot median {t[f'thetadot_err_median_traj_{name}']:.2e} "
              f"max {t[f'thetadot_err_max_traj_{name}']:.2e} rad/s")
    print(f"rllab's reset quirk: first-step angle jump mean {t['quirk_angle_jump_mean']:.3f} max "
          f"{t['quirk_angle_jump_max']:.3f} rad; pole within 120 deg of upright after it in "
          f"{100 * t['quirk_near_upright']:.1f}% of episodes (proper reset: {100 * t['near_upright']:.1f}%)")
    curves = energy_left(min(args.states, 300))
    at = (round(1 / DT), round(5 / DT))
    print("energy left with no force, cart at rest (after 1 s / 5 s):")
    for name, c in curves.items():
        print(f"  {name:9s} " + "; ".join(f"{sim} {c[sim][at[0]]:.2f} / {c[sim][at[1]]:.2f}" for sim in c))
    worst = max(abs(c["damped"][i] - c["box2d"][i]) for c in curves.values() for i in at)
    swing, up = curves["swinging"], curves["swingup"]
    summary = (f"rllab_box2d thetadot_err_median={t['thetadot_err_median_ours']:.2e} "
               f"quirk_angle_jump_mean={t['quirk_angle_jump_mean']:.3f} "
               f"quirk_near_upright={t['quirk_near_upright']:.3f} "
               f"energy_left_5s_ours={swing['ours'][at[1]]:.2f} energy_left_5s_box2d={swing['box2d'][at[1]]:.2f} "
               f"thetadot_err_median_traj_ours={t['thetadot_err_median_traj_ours']:.2e} "
               f"thetadot_err_median_traj_damped={t['thetadot_err_median_traj_damped']:.2e} "
               f"energy_left_1s_box2d={up['box2d'][at[0]]:.2f} energy_left_1s_damped={up['damped'][at[0]]:.2f} "
               f"energy_left_5s_box2d_swingup={up['box2d'][at[1]]:.2f} energy_left_5s_damped={up['damped'][at[1]]:.2f} "
               f"energy_err_max_damped={worst:.3f}")
    if args.fit:
        print(f"damping laws fitted to Box2D's energy left after {ENERGY_MARKS_S} s "
              f"({len(energy_sets(min(args.states, 300)))} state sets):")
        for name, (b, loss, err) in fit_damping_laws(min(args.states, 300)).items():
            print(f"  {name:9s} b={b:.4e} loss={loss:.4f} max |model - Box2D| at 1 s / 5 s {err:.3f}")
            if name == "cubic":
                summary += f" b_cubic={b:.4e}"
        print("the same laws regressed on Box2D's one-step thetadot minus ours along Box2D trajectories (no force):")
        for name, (c, before, after) in regress_damping_laws().items():
            print(f"  {name:9s} {c:+.3e} x law(thetadot) rad/s per step; rms residual {before:.2e} -> {after:.2e}")
    if args.double_pendulum:
        print_double_pendulum(min(args.states, 500))
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
