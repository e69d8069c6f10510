#!/usr/bin/env python
"""Record ``round3_reference.json``: the first iterations of the pre-round-3 run stack.

    git worktree add /tmp/pre-round3 1b48bb0 && mkdir /tmp/old && cp -r /tmp/pre-round3/steinrl /tmp/old/
    cp -r /tmp/pre-round3/envs /tmp/old/steinrl/envs && cp -r /tmp/pre-round3/configs /tmp/old/steinrl/configs
    PYTHONPATH=/tmp/old python tests/data/make_round3_reference.py

(the copies put ``envs/`` and ``configs/`` where an installed package has them, so that
nothing is imported from the current checkout).

Commit 1b48bb0 had two samplers (numpy on the host, torch on the device), a numpy copy of
the policy forward, and a second run stack for seed batches (``SeedBatchJob``). Each case
below runs there for 3 iterations; ``tests/test_one_stack_equivalence.py`` runs the same
cases through today's single sampler, forward and Trainer and compares the metrics.
"""

import json
import sys
from pathlib import Path

import steinrl
from steinrl.rl.seeds import SeedBatchJob  # the pre-round-3 seed-batch stack

PATH = Path(__file__).with_name("round3_reference.json")
SMALL = {"particles": 3, "rollout.envs_per_particle": 2, "rollout.batch_size": 40, "critic.steps": 2,
         "iterations": 3, "seed": 4}
CASES = [
    {"algo": "svgd-a2c", "env": "CartpoleSwingUp", "overrides": {"rollout.sampling": "whole_episodes"}},
    {"algo": "s2vgd-reinforce", "env": "CartpoleSwingUp", "overrides": {"rollout.sampling": "continuing"}},
    {"algo": "svgd-ppo", "env": "DoublePendulum", "overrides": {"rollout.sampling": "cut"}},
    {"algo": "svgd-a2c", "env": "CartPole-v1", "overrides": {"rollout.sampling": "continuing"}},
    {"algo": "independent-ppo", "env": "InvertedPendulum-v5",
     "overrides": {"rollout.sampling": "continuing", "policy.normalize_obs": True, "rollout.vectorization": "sync"}},
    {"algo": "svgd-a2c", "env": "CartpoleSwingUp",
     "overrides": {"rollout.sampling": "continuing", "rollout.env_backend": "torch"}},
    {"algo": "kron-a2c", "env": "Cartpole",
     "overrides": {"rollout.sampling": "whole_episodes", "rollout.env_backend": "torch"}},
    {"algo": "svgd-a2c", "env": "CartpoleSwingUp", "seeds": [5, 0],
     "overrides": {"rollout.sampling": "continuing", "rollout.env_backend": "torch"}},
    {"algo": "s2vgd-reinforce", "env": "DoublePendulum", "seeds": [1, 2, 3],
     "overrides": {"rollout.sampling": "cut", "rollout.env_backend": "torch"}},
]
KEYS = ("rollout/ep_rew_mean", "rollout/ep_rew_max_particle", "rollout/ep_len_mean", "rollout/episodes",
        "train/surrogate", "train/log_prior", "train/entropy", "train/value_loss", "train/bandwidth",
        "train/kernel_mean", "time/steps_per_particle")


def small(case: dict) -> dict:
    overrides = {**SMALL, **case["overrides"]}
    if not case["algo"].endswith(("a2c", "ppo")):
        overrides.pop("critic.steps")
    return overrides


def run(case: dict) -> list:
    cfg = steinrl.load_config(case["algo"], case["env"], small(case))
    if "seeds" in case:
        job = SeedBatchJob(cfg, case["seeds"])
        rows = [job.step(i) for i in range(3)]
    else:
        trainer = steinrl.Trainer(cfg)
        rows = [[trainer.step()] for _ in range(3)]
    return [[{k: r[k] for k in KEYS if k in r} for r in seeds] for seeds in rows]


def main() -> None:
    for case in CASES:
        case["metrics"] = run(case)
        print(case["algo"], case["env"], case.get("seeds"), file=sys.stderr)
    PATH.write_text(json.dumps({"small": SMALL, "cases": CASES}, indent=1) + "\n")


if __name__ == "__main__":
    main()
