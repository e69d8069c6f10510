#!/usr/bin/env python
"""Training throughput: steinrl's SVPG vs Stable-Baselines3 A2C vs raw env stepping.

    python benchmarks/train_throughput.py [--iterations 5] [--sb3-steps 20000]

Measures, in one process and one torch thread each:

(a) paper-scale ``s2vgd-a2c`` iterations on CartpoleSwingUp (M = 16 particles, 5000 env
    steps per particle, whole episodes): env steps of all particles per second of
    wall time, rollout *and* update included, after one warm-up iteration;
(b) Stable-Baselines3 ``A2C("MlpPolicy")`` with n_envs = 16 (SB3's DummyVecEnv over our
    single-env CartpoleSwingUp, default hyper-parameters) learning for ``--sb3-steps``
    env steps: env steps per second;
(c) raw stepping of our vectorized CartpoleSwingUp with random actions at the same
    number of envs as (a) (M x E = 160): env steps per second.

(d) where (a)'s time goes, in a separate pass over the same iterations with timers
    around the parts no implementation of the issue's workload can skip: the vector env's
    ``step`` calls, the ensemble's per-step action function, and one policy forward +
    backward over the batch's valid samples (the policy gradient). Their sum bounds the
    reachable ``fraction_of_env`` from above, as if sampler bookkeeping, GAE, critic,
    kernel and optimizer steps all cost nothing.

Last line: ``train_throughput ours=<a> sb3_a2c=<b> ratio_vs_sb3=<a/b> fraction_of_env=<a/c>``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import steinrl.envs as envs  # noqa: E402
from steinrl.run.config import load_config  # noqa: E402
from steinrl.run.trainer import Trainer  # noqa: E402


def ours(iterations: int) -> tuple[float, float]:
    """Steps/s of paper-scale s2vgd-a2c iterations (and the rollout share of the time)."""
    cfg = load_config("s2vgd-a2c", "CartpoleSwingUp", {"iterations": iterations + 1})
    trainer = Trainer(cfg)
    rows = [trainer.step() for _ in range(iterations + 1)]
    trainer.close()
    timed = rows[1:]  # the first iteration warms up
    steps = sum(r["time/steps_per_particle"] * cfg.particles for r in timed)
    seconds = sum(r["time/iteration_seconds"] for r in timed)
    rollout_seconds = sum(r["time/steps_per_particle"] * cfg.particles / r["time/rollout_fps"] for r in timed)
    for i, r in enumerate(timed, 1):
        print(f"  iteration {i}: {r['time/steps_per_particle'] * cfg.particles:.0f} steps in "
              f"{r['time/iteration_seconds'] * 1e3:.0f} ms ({r['time/fps']:,.0f} steps/s; "
              f"rollout {r['time/rollout_fps']:,.0f} steps/s)")
    return steps / seconds, rollout_seconds / seconds


def breakdown(iterations: int) -> tuple[float, dict[str, float]]:
    """Valid env steps per iteration and ms per iteration of (d)'s parts (iterations 1..n)."""
    cfg = load_config("s2vgd-a2c", "CartpoleSwingUp")
    trainer = Trainer(cfg)
    venv, sampler, agent = trainer.job.envs, trainer.job.sampler, trainer.job.agent
    parts = {"env step": 0.0, "action function": 0.0, "policy forward+backward": 0.0, "whole iteration": 0.0}

    def timed(part: str, fn):
        def wrapper(*args):
            t0 = time.perf_counter()
            out = fn(*args)
            parts[part] += time.perf_counter() - t0
            return out
        return wrapper

    venv.step = timed("env step", venv.step)
    actor = agent.policy.actor
    agent.policy.actor = lambda noise: timed("action function", actor(noise))
    steps = 0
    for it in range(iterations + 1):
        if it == 1:
            parts = dict.fromkeys(parts, 0.0)
        t0 = time.perf_counter()
        batch = agent.collect(sampler, it)
        agent.update(batch, it)
        parts["whole iteration"] += time.perf_counter() - t0
        if it == 0:
            continue
        steps += int(batch.valid.sum())
        # The policy gradient alone: one forward + backward over the valid samples.
        M, d = cfg.particles, sampler.obs_dim
        valid = torch.as_tensor(batch.valid).transpose(0, 1).reshape(M, -1)
        n = int(valid.sum(1).max())
        order = torch.argsort((~valid).to(torch.int8), dim=1, stable=True)[:, :n]
        obs = torch.gather(batch.obs[:-1].transpose(0, 1).reshape(M, -1, d), 1, order[..., None].expand(M, n, d))
        act = torch.gather(batch.actions.transpose(0, 1).reshape(M, -1, 1), 1, order[..., None])
        adv = torch.ones(M, n)
        t0 = time.perf_counter()
        logp, _ = agent.policy.log_prob(obs, act, agent.policy.dense())
        (-(logp * adv).mean(1).sum()).backward()
        parts["policy forward+backward"] += time.perf_counter() - t0
        agent.svgd.zero_grad()
    venv.close()
    return steps / iterations, {k: 1e3 * v / iterations for k, v in parts.items()}


def sb3_a2c(steps: int) -> float:
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(envs.resolve_env_id("CartpoleSwingUp"), n_envs=16, seed=0)
    model = A2C("MlpPolicy", venv, seed=0, device="cpu", verbose=0)
    model.learn(2_000)  # warm-up
    t0 = time.perf_counter()
    model.learn(steps, reset_num_timesteps=False)
    seconds = time.perf_counter() - t0
    venv.close()
    return steps / seconds


def raw_env(num_envs: int, steps: int) -> float:
    venv = envs.make_vec("CartpoleSwingUp", num_envs)
    venv.reset(seed=0)
    actions = np.random.default_rng(0).uniform(-1, 1, size=(steps, num_envs, 1)).astype(np.float32)
    for a in actions[:50]:
        venv.step(a)
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        for a in actions:
            venv.step(a)
        best = max(best, steps * num_envs / (time.perf_counter() - t0))
    venv.close()
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=5, help="timed paper-scale iterations")
    p.add_argument("--sb3-steps", type=int, default=20_000, help="env steps of SB3 A2C to time")
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread; CartpoleSwingUp, M=16 x E=10 envs, 5000 steps/particle")
    print("(a) steinrl s2vgd-a2c, paper scale:")
    ours_sps, rollout_share = ours(args.iterations)
    print(f"    {ours_sps:,.0f} env steps/s (rollout {100 * rollout_share:.0f}% of the time)")
    sb3_sps = sb3_a2c(args.sb3_steps)
    print(f"(b) SB3 A2C, n_envs=16: {sb3_sps:,.0f} env steps/s")
    env_sps = raw_env(160, 2000)
    print(f"(c) raw CartpoleSwingUp vector env, 160 envs, random actions: {env_sps:,.0f} env steps/s (best of 3)")
    steps, parts = breakdown(args.iterations)
    print(f"(d) where an iteration's time goes (separate pass, {steps:,.0f} valid steps per iteration):")
    for part, ms in parts.items():
        print(f"    {part}: {ms:.1f} ms")
    floor = parts["env step"] + parts["action function"] + parts["policy forward+backward"]
    print(f"    env step + action function + policy forward+backward = {floor:.1f} ms per iteration: "
          f"fraction_of_env <= {steps / (floor / 1e3) / env_sps:.3f} even if everything else were free; "
          f"0.25 needs <= {steps / (0.25 * env_sps) * 1e3:.1f} ms")
    print(f"train_throughput ours={ours_sps:.0f} sb3_a2c={sb3_sps:.0f} ratio_vs_sb3={ours_sps / sb3_sps:.1f} "
          f"fraction_of_env={ours_sps / env_sps:.3f}")


if __name__ == "__main__":
    main()
