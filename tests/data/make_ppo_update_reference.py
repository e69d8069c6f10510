#!/usr/bin/env python
"""Record ``ppo_update_reference.json``: three iterations of PPO recipes before the update's shortcuts.

    git worktree add /tmp/before 54a07eb && mkdir /tmp/old && cp -r /tmp/before/steinrl /tmp/old/
    cp -r /tmp/before/envs /tmp/old/steinrl/envs && cp -r /tmp/before/configs /tmp/old/steinrl/configs
    PYTHONPATH=/tmp/old python tests/data/make_ppo_update_reference.py

(the copies put ``envs/`` and ``configs/`` where an installed package has them). Commit
54a07eb normalised the observations in every minibatch step's forwards, computed the prior
and the PPO diagnostics in every step of every epoch and checked finiteness per tensor;
``tests/test_speed_exact.py::test_ppo_update_shortcuts_change_no_number`` runs these cases
with today's code and compares every logged metric.
"""

import json
from pathlib import Path

import torch

import steinrl

PATH = Path(__file__).with_name("ppo_update_reference.json")
CASES = [  # minibatches and epochs; prior weight 0 (the MuJoCo recipe) and not; clipping; obs normalisation
    # (on the swing-up: the MuJoCo recipes' first updates move the policy far, approx_kl 4-35, and float
    # rounding that differs between CPUs grows there beyond any tolerance)
    {"algo": "independent-ppo", "env": "CartpoleSwingUp", "overrides": {
        "particles": 1, "rollout.batch_size": 256, "estimator.minibatches": 8, "estimator.epochs": 3,
        "policy.normalize_obs": True, "prior.weight": 0.0}},
    {"algo": "svgd-ppo", "env": "CartpoleSwingUp", "overrides": {
        "particles": 3, "rollout.batch_size": 128, "estimator.minibatches": 4, "estimator.epochs": 3,
        "policy.normalize_obs": True, "estimator.scale_rewards": True}},
    {"algo": "s2vgd-ppo", "env": "CartpoleSwingUp", "overrides": {
        "particles": 3, "rollout.batch_size": 200, "estimator.minibatches": 4, "estimator.epochs": 2,
        "estimator.max_grad_norm": 0.5}},
    {"algo": "svgd-a2c", "env": "CartpoleSwingUp", "overrides": {"particles": 3, "rollout.batch_size": 200}},
]


#: The reference's semantics where they have since become an option with another default:
#: the observation statistics take a batch before its update (recorded before
#: ``policy.obs_stats_update`` existed; leave out when recording at such a commit).
#: The swing-up's whole-episode sampling, 10 envs per particle: its default when the reference was
#: recorded (the swing-ups' files have since set the fast preset's continuing sampling).
SEMANTICS = {"policy.obs_stats_update": "before-update", "rollout.sampling": "whole_episodes",
             "rollout.envs_per_particle": 10}


def run(case: dict) -> list[dict]:
    """Three iterations' metrics (timings left out)."""
    torch.set_num_threads(1)
    trainer = steinrl.Trainer(steinrl.load_config(case["algo"], case["env"], {**case["overrides"], **SEMANTICS,
                                                                              "run.progress": False}))
    rows = [{k: v for k, v in trainer.step().items() if not k.startswith("time/")} for _ in range(3)]
    trainer.close()
    return rows


if __name__ == "__main__":
    PATH.write_text(json.dumps({"cases": [{**case, "metrics": run(case)} for case in CASES]}, indent=1) + "\n")
    print(f"wrote {PATH}")
