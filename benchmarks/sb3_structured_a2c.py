"""SB3's A2C with a structured (Householder / Kronecker) actor-critic on CartPole-v1.

Trains ``A2C(StructuredActorCriticPolicy, "CartPole-v1", policy_kwargs=dict(prior=...))``
within a wall-clock budget, then scores the final policy (deterministic actions) on
fresh episodes with SB3's ``evaluate_policy``. Target: mean return >= 400 in under a
minute on one CPU core. Hyper-parameters follow rl-zoo's A2C CartPole-v1 entry
(8 envs, ent_coef 0, RMSprop, n_steps 5) unless overridden.

    python benchmarks/sb3_structured_a2c.py                       # householder, K=1
    python benchmarks/sb3_structured_a2c.py --prior kronecker
    python benchmarks/sb3_structured_a2c.py --prior gaussian      # plain dense layers

The last line is ``sb3_structured_a2c mean_return=<x> seconds=<s> prior=<p>``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from stable_baselines3 import A2C
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from steinrl.sb3 import StructuredActorCriticPolicy


class Budget(BaseCallback):
    """Stops training after ``seconds`` of wall-clock time; prints progress every ``every`` s."""

    def __init__(self, seconds: float, every: float = 5.0):
        super().__init__()
        self.seconds, self.every = seconds, every
        self.start = self.last = 0.0

    def _on_training_start(self) -> None:
        self.start = self.last = time.perf_counter()

    def _on_step(self) -> bool:
        now = time.perf_counter()
        if now - self.last >= self.every:
            self.last = now
            rets = [ep["r"] for ep in self.model.ep_info_buffer]
            print(f"  t={now - self.start:5.1f}s steps={self.num_timesteps:7d} "
                  f"ep_rew_mean(last 100)={np.mean(rets) if rets else float('nan'):6.1f}", flush=True)
        return now - self.start < self.seconds


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--prior", default="householder", choices=["householder", "kronecker", "gaussian"])
    p.add_argument("--K", type=int, default=1, help="Householder reflections per side")
    p.add_argument("--timesteps", type=int, default=200_000, help="A2C total_timesteps (upper bound)")
    p.add_argument("--budget", type=float, default=50.0, help="wall-clock training budget, seconds")
    p.add_argument("--n-envs", type=int, default=8)
    p.add_argument("--n-steps", type=int, default=5)
    p.add_argument("--lr", type=float, default=7e-4)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--net-arch", type=int, nargs="+", default=[64, 64])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    policy_kwargs = dict(prior=args.prior, K=args.K, net_arch=args.net_arch)
    env = make_vec_env("CartPole-v1", n_envs=args.n_envs, seed=args.seed)
    model = A2C(StructuredActorCriticPolicy, env, n_steps=args.n_steps, learning_rate=args.lr,
                ent_coef=args.ent_coef, policy_kwargs=policy_kwargs, seed=args.seed, device="cpu")
    print(f"A2C + StructuredActorCriticPolicy(prior={args.prior}, K={args.K}, net_arch={args.net_arch}) "
          f"on CartPole-v1: n_envs={args.n_envs} n_steps={args.n_steps} lr={args.lr} ent_coef={args.ent_coef} "
          f"seed={args.seed}, budget {args.budget:.0f}s / {args.timesteps} steps")
    t0 = time.perf_counter()
    model.learn(args.timesteps, callback=Budget(args.budget))
    seconds = time.perf_counter() - t0
    eval_env = make_vec_env("CartPole-v1", n_envs=1, seed=10_000 + args.seed)
    returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=args.eval_episodes, deterministic=True,
                                 return_episode_rewards=True)
    mean = float(np.mean(returns))
    print(f"trained {model.num_timesteps} steps in {seconds:.1f}s ({model.num_timesteps / seconds:.0f} steps/s); "
          f"final policy over {args.eval_episodes} episodes: mean {mean:.1f} +/- {np.std(returns):.1f}, "
          f"min {np.min(returns):.0f}, max {np.max(returns):.0f}")
    print(f"sb3_structured_a2c mean_return={mean:.1f} seconds={seconds:.1f} prior={args.prior}")


if __name__ == "__main__":
    main()
