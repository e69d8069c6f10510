#!/usr/bin/env python
"""MuJoCo training throughput: steinrl's svgd-ppo (M particles x E envs) vs SB3's PPO vs raw env stepping.

    python benchmarks/mujoco_throughput.py [--env HalfCheetah-v5] [--particles 16] [--envs-per-particle 4]
        [--iterations 3] [--sb3-steps 4096] [--algo svgd-ppo] [--async] [--raw-only] [--threads 1] [--device cpu]

Measured in one process with one torch thread (``--threads``); the backends of (a), and (b) with (c), are
timed in alternating rounds, so that each side sees the same load on a shared machine:

(a) raw: the vector env alone at the run's N = M x E envs, uniform random actions, for each
    backend here: Gymnasium's ``SyncVectorEnv`` (``--async``: its ``AsyncVectorEnv`` too) and,
    where installed, EnvPool (one thread per core, ``steinrl.envs.envpool``).
    ``raw_env_steps_per_s`` is the fastest (``--raw-only``: stop after (a));
(b) ours: ``--algo`` trained by :class:`steinrl.Trainer` with ``--preset mujoco-ppo`` (SB3's PPO
    defaults given to every particle: 2048 env steps per particle per iteration, 10 epochs of
    64-sample minibatches, [64, 64] tanh networks, observation and reward normalisation), M
    particles x E envs, ``rollout.vectorization`` auto (EnvPool where installed). Env steps of
    all particles per second of wall time, rollout and update included, over ``--iterations``
    rounds of one iteration, after one warm-up iteration; ``--device cuda`` puts its policy, critic and
    update on the GPU (the MuJoCo envs stay on the host);
(c) SB3: ``PPO("MlpPolicy", make_vec_env(env, n_envs=1))`` with SB3's defaults (n_steps 2048,
    n_epochs 10, batch_size 64; rl-zoo3's MuJoCo entries also use n_envs 1) on Gymnasium's own
    env: ``--sb3-steps`` env steps of ``learn`` a round (whole 2048-step rollouts and their
    updates), after one warm-up rollout.

The machine's load average is printed before and after: the engineers share its two cores,
so figures taken under load are low on every side (the ratios less so). Last line:
``mujoco_throughput env=<id> ours_steps_per_s=<b> sb3_ppo_steps_per_s=<c> raw_env_steps_per_s=<a>
ratio_vs_sb3=<b/c> fraction_of_env=<b/a>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from steinrl import envs  # noqa: E402
from steinrl.envs.envpool import envpool_installed, envpool_supports  # noqa: E402
from steinrl.run.config import load_config  # noqa: E402
from steinrl.run.trainer import Trainer  # noqa: E402


def raw_rates(env: str, num_envs: int, modes: list[str], vector_steps: int, rounds: int = 5) -> dict[str, float]:
    """Random-action env steps per second of ``num_envs`` envs vectorised by each of ``modes``:
    the best of ``rounds`` rounds, each timing every mode in turn (so all see the same load)."""
    venvs = {mode: envs.make_vec(env, num_envs, vectorization_mode=mode) for mode in modes}
    first = next(iter(venvs.values()))
    low, high = first.single_action_space.low, first.single_action_space.high
    actions = np.random.default_rng(0).uniform(low, high, (vector_steps, *first.action_space.shape)).astype(np.float32)
    for venv in venvs.values():
        venv.reset(seed=0)
        for a in actions[:20]:  # warm-up
            venv.step(a)
    best = dict.fromkeys(modes, 0.0)
    for _ in range(rounds):
        for mode, venv in venvs.items():
            t0 = time.perf_counter()
            for a in actions:
                venv.step(a)
            best[mode] = max(best[mode], vector_steps * num_envs / (time.perf_counter() - t0))
    for venv in venvs.values():
        venv.close()
    return best


def sb3_model(env: str) -> object:
    """SB3's PPO with its defaults on one Gymnasium env, after one warm-up rollout and update."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    model = PPO("MlpPolicy", make_vec_env(env, n_envs=1, seed=0), seed=0, device="cpu", verbose=0)
    model.learn(model.n_steps)
    return model


def training_rates(args: argparse.Namespace) -> tuple[dict[str, float | str], float]:
    """Ours (env steps of all particles per second, rollout and update; its rollout alone and
    the update's share) and SB3's PPO, timed in alternation: each round one iteration of
    ours, then ``--sb3-steps`` env steps of SB3's ``learn``, so that both see the same load."""
    cfg = load_config(args.algo, args.env, {"particles": args.particles, "envs_per_particle": args.envs_per_particle,
                                            "batch_size": 2048, "iterations": args.iterations + 1,
                                            "run.progress": False, "run.tensorboard": False, "device": args.device,
                                            "run.threads": args.threads},
                      preset="mujoco-ppo")
    trainer = Trainer(cfg)
    backend = type(getattr(trainer.job, "envs", None)).__name__
    trainer.step()  # warm-up
    model = sb3_model(args.env)
    steps = seconds = rollout_seconds = sb3_steps = sb3_seconds = 0.0
    for _ in range(args.iterations):
        t0 = time.perf_counter()
        scalars = trainer.step()
        t1 = time.perf_counter()
        n = scalars["time/steps_per_particle"] * args.particles  # valid env steps of all particles
        steps, seconds = steps + n, seconds + t1 - t0
        rollout_seconds += n / scalars["time/rollout_fps"]
        before = model.num_timesteps
        t0 = time.perf_counter()
        model.learn(args.sb3_steps, reset_num_timesteps=False)  # whole rollouts of n_steps
        sb3_seconds += time.perf_counter() - t0
        sb3_steps += model.num_timesteps - before
    trainer.close()
    model.get_env().close()
    ours = {"steps_per_s": steps / seconds, "rollout_steps_per_s": steps / rollout_seconds,
            "update_share": 1.0 - rollout_seconds / seconds, "seconds_per_iteration": seconds / args.iterations,
            "backend": backend}
    return ours, sb3_steps / sb3_seconds


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument("--algo", default="svgd-ppo")
    p.add_argument("--particles", type=int, default=16, help="M")
    p.add_argument("--envs-per-particle", type=int, default=4, help="E (N = M x E envs)")
    p.add_argument("--iterations", type=int, default=3, help="rounds: timed iterations of ours (after one warm-up)")
    p.add_argument("--sb3-steps", type=int, default=4096, help="env steps of SB3's PPO per round")
    p.add_argument("--raw-steps", type=int, default=500, help="vector steps of each raw env timing")
    p.add_argument("--async", dest="with_async", action="store_true",
                   help="time Gymnasium's AsyncVectorEnv (a process per env) in (a) too")
    p.add_argument("--raw-only", action="store_true", help="(a) only: no training, no summary line")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads, for ours and SB3 alike")
    p.add_argument("--device", default="cpu", help="ours on this torch device (SB3's PPO stays on the CPU, "
                   "where SB3 recommends an MlpPolicy's PPO)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    num_envs = args.particles * args.envs_per_particle
    load = os.getloadavg()[0]
    print(f"{args.env}: M = {args.particles} particles x E = {args.envs_per_particle} envs = {num_envs} envs; "
          f"load average {load:.1f} on {os.cpu_count()} cores; ours on {args.device}")

    modes = ["sync"] + (["async"] if args.with_async else []) + (
        ["envpool"] if envpool_installed() and envpool_supports(args.env) else [])
    raw = raw_rates(args.env, num_envs, modes, args.raw_steps)
    for mode, rate in raw.items():
        print(f"(a) raw {mode:8s} {num_envs} envs, random actions: {rate:,.0f} env steps/s")
    fastest = max(raw, key=raw.get)
    if args.raw_only:
        return

    mine, sb3 = training_rates(args)
    print(f"(b) ours {args.algo} (--preset mujoco-ppo, {mine['backend']}): {mine['steps_per_s']:,.0f} env steps/s "
          f"({mine['seconds_per_iteration']:.1f} s per iteration; rollout alone {mine['rollout_steps_per_s']:,.0f}/s, "
          f"update {100 * mine['update_share']:.0f}% of the time)")
    print(f"(c) SB3 PPO (defaults, n_envs 1): {sb3:,.0f} env steps/s")
    print(f"load average now {os.getloadavg()[0]:.1f}")
    ours_rate = mine["steps_per_s"]
    print(f"mujoco_throughput env={args.env} ours_steps_per_s={ours_rate:.0f} sb3_ppo_steps_per_s={sb3:.0f} "
          f"raw_env_steps_per_s={raw[fastest]:.0f} ratio_vs_sb3={ours_rate / sb3:.2f} "
          f"fraction_of_env={ours_rate / raw[fastest]:.3f}")


if __name__ == "__main__":
    main()
