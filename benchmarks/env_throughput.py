"""Env-steps per second of the steinrl control tasks vs Gymnasium's own CartPoleVectorEnv.

Usage::

    python benchmarks/env_throughput.py [--num-envs 160] [--steps 2000] [--repeats 7]

Only ``step()`` is timed: actions are pre-generated (uniform in [-1, 1]; Gymnasium's
CartPole gets random 0/1), each env is warmed up, and every measurement is repeated with
the repeats of the different envs interleaved. The reported number is the *best* repeat
(``num_envs * steps / seconds`` of the fastest one): on a shared machine the fastest
repeat is the one least disturbed by other processes, so it is the most reproducible
estimate of the code's own speed; the median is printed too. The last line is
machine-readable (best-repeat numbers)::

    env_throughput cartpole_ratio=<ours Cartpole / gymnasium CartPole> cartpole=<steps/s> \
swingup=<steps/s> double_pendulum=<steps/s> gym_cartpole=<steps/s>
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv as GymCartPoleVectorEnv  # noqa: E402

from steinrl.envs.cartpole import CartpoleSwingUpVectorEnv, CartpoleVectorEnv  # noqa: E402
from steinrl.envs.double_pendulum import DoublePendulumVectorEnv  # noqa: E402


def _stepper(env, actions: np.ndarray) -> Callable[[], float]:
    """Returns a function that runs all ``actions`` through ``env.step`` and returns the
    elapsed seconds."""
    step = env.step

    def run() -> float:
        start = time.perf_counter()
        for a in actions:
            step(a)
        return time.perf_counter() - start

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=160, help="parallel envs per vector env")
    parser.add_argument("--steps", type=int, default=1000, help="step() calls per repeat")
    parser.add_argument("--repeats", type=int, default=15, help="timed repeats (the best is reported)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    n, steps = args.num_envs, args.steps
    rng = np.random.default_rng(args.seed)

    continuous = rng.uniform(-1.0, 1.0, size=(steps, n, 1)).astype(np.float32)
    discrete = rng.integers(0, 2, size=(steps, n))
    envs = {
        "cartpole": (CartpoleVectorEnv(num_envs=n), continuous),
        "swingup": (CartpoleSwingUpVectorEnv(num_envs=n), continuous),
        "double_pendulum": (DoublePendulumVectorEnv(num_envs=n), continuous),
        "gym_cartpole": (GymCartPoleVectorEnv(num_envs=n), discrete),
    }
    runners = {}
    for name, (env, actions) in envs.items():
        env.reset(seed=args.seed)
        runners[name] = _stepper(env, actions)
        runners[name]()  # warm-up

    rates: dict[str, list[float]] = {name: [] for name in envs}
    for _ in range(args.repeats):
        for name, run in runners.items():
            rates[name].append(n * steps / run())
    median = {name: statistics.median(r) for name, r in rates.items()}
    best = {name: max(r) for name, r in rates.items()}

    print(f"num_envs={n} steps/repeat={steps} repeats={args.repeats} (env-steps/s; best, median)")
    for name in envs:
        print(
            f"  {name:16s} best {best[name]:12,.0f}   median {median[name]:12,.0f}   "
            f"({1e6 * n / best[name]:.1f} us per step() call at best)"
        )
    print(f"  median-based cartpole ratio: {median['cartpole'] / median['gym_cartpole']:.3f}")
    ratio = best["cartpole"] / best["gym_cartpole"]
    print(
        f"env_throughput cartpole_ratio={ratio:.3f} cartpole={best['cartpole']:.0f} "
        f"swingup={best['swingup']:.0f} double_pendulum={best['double_pendulum']:.0f} "
        f"gym_cartpole={best['gym_cartpole']:.0f}"
    )


if __name__ == "__main__":
    main()
