"""SB3's default PPO on a variant of SparseHalfCheetah: is the task sparse enough that a single PPO fails?

    python research/scripts/sparse_halfcheetah_variants.py --seed 0                          # the task: 5 m, cost 0.1
    python research/scripts/sparse_halfcheetah_variants.py --seed 0 --goal 10 --ctrl-cost 0  # a farther goal, no cost

Trains ``stable_baselines3.PPO("MlpPolicy", env)`` with every default (what ``sb3-ppo`` trains
with) on ``steinrl.envs.make("SparseHalfCheetah", goal_distance=GOAL, ctrl_cost_weight=CTRL)`` for ``--steps`` env
steps (10⁶ by default: ~14 minutes on one core), printing every 50,000 steps the mean return
of its last 100 training episodes and its actions' standard deviation (a shrinking one is the
trap of a control cost: standing still pays best until the goal is found). Then 10
deterministic episodes (seeds 0-9); the last line::

    sparse_halfcheetah_variants goal=<m> ctrl_cost=<w> seed=<s> eval_return=… farthest_m=… reached=<k>/10 wall_s=…

``farthest_m``: the mean over the episodes of the torso's farthest x from its reset;
``reached``: episodes with a return of at least 1 (only steps past the goal pay).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence

import numpy as np

from steinrl.errors import ConfigError
from steinrl.run.cli_base import Parser, run_cli


def main(argv: Sequence[str] | None = None) -> int:
    p = Parser(prog="research/scripts/sparse_halfcheetah_variants.py", description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--goal", type=float, default=5.0, help="goal_distance in metres (default 5)")
    p.add_argument("--ctrl-cost", type=float, default=0.1, help="ctrl_cost_weight (default 0.1, HalfCheetah's)")
    p.add_argument("--steps", type=int, default=1_000_000, help="env steps (default 10^6)")
    args = p.parse_args(argv)
    if not (math.isfinite(args.goal) and args.goal > 0):
        raise ConfigError(f"--goal must be a finite number of metres > 0, got {args.goal}")
    if not (math.isfinite(args.ctrl_cost) and args.ctrl_cost >= 0):
        raise ConfigError(f"--ctrl-cost must be a finite number >= 0, got {args.ctrl_cost}")
    if args.steps < 1 or args.seed < 0:
        raise ConfigError(f"--steps must be >= 1 and --seed >= 0, got {args.steps} and {args.seed}")

    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    from steinrl import envs

    torch.set_num_threads(1)
    start = time.time()

    def make():  # the registered task (its time limit) with these constants
        return envs.make("SparseHalfCheetah", goal_distance=args.goal, ctrl_cost_weight=args.ctrl_cost)

    class Progress(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % 50_000 == 0:
                returns = [e["r"] for e in self.model.ep_info_buffer]
                std = float(self.model.policy.log_std.detach().exp().mean())
                print(f"steps {self.num_timesteps} ep_rew_mean {np.mean(returns):.1f} action_std {std:.3f} "
                      f"({time.time() - start:.0f} s)", flush=True)
            return True

    model = PPO("MlpPolicy", make(), seed=args.seed, device="cpu")
    model.learn(args.steps, callback=Progress())
    env = make()
    returns, farthest = [], []
    for episode in range(10):
        obs, info = env.reset(seed=episode)
        x0, far, total, done = info["x_position"], -np.inf, 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(model.predict(obs, deterministic=True)[0])
            total, far, done = total + float(reward), max(far, info["x_position"]), terminated or truncated
        returns.append(total)
        farthest.append(far - x0)
    print(f"sparse_halfcheetah_variants goal={args.goal:g} ctrl_cost={args.ctrl_cost:g} seed={args.seed} "
          f"eval_return={np.mean(returns):.1f} farthest_m={np.mean(farthest):.2f} "
          f"reached={sum(r >= 1 for r in returns)}/10 wall_s={time.time() - start:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
