#!/usr/bin/env python
"""Record ``update_reference.json``: three iterations of every estimator's update before the
update was rewritten as one class per estimator over one shared particle step.

Recorded at commit cafe6a3 (the update spread over ``rl/agent.py``, ``core/optim.py`` and
``core/stein.py``) with

    git worktree add /tmp/before cafe6a3 && mkdir /tmp/old && cp -r /tmp/before/steinrl /tmp/old/
    cp -r /tmp/before/envs /tmp/old/steinrl/envs && cp -r /tmp/before/configs /tmp/old/steinrl/configs
    PYTHONPATH=/tmp/old python tests/data/make_update_reference.py

(the copies put ``envs/`` and ``configs/`` where an installed package has them).
``tests/test_update_equivalence.py`` runs the same cases through today's code and compares
every logged metric and a checksum of the particles and critics.
"""

import json
import sys
from pathlib import Path

import torch

import steinrl

PATH = Path(__file__).with_name("update_reference.json")
SMALL = {"particles": 3, "rollout.envs_per_particle": 2, "rollout.batch_size": 64, "iterations": 3, "seed": 3,
         "rollout.sampling": "continuing", "run.progress": False}
RECIPE = {"estimator.minibatches": 4, "estimator.epochs": 2, "estimator.ent_coef": 0.01,
          "estimator.max_grad_norm": 0.5, "estimator.anneal_lr": True, "estimator.scale_rewards": True,
          "estimator.normalize_per_minibatch": True, "critic.joint": True, "critic.clip_range_vf": 0.2,
          "policy.normalize_obs": True, "prior.weight": 0.0}
CASES = [
    {"algo": "svgd-reinforce", "env": "CartpoleSwingUp", "overrides": {}},
    {"algo": "s2vgd-reinforce", "env": "CartpoleSwingUp", "overrides": {"update.proximal_weight": 0.1,
                                                                        "update.lr_halving_every": 1,
                                                                        "update.lr_halving_start": 1}},
    {"algo": "svgd-a2c", "env": "CartpoleSwingUp", "overrides": {"critic.steps": 3}},
    {"algo": "s2vgd-a2c", "env": "CartpoleSwingUp", "overrides": {"critic.steps": 3, "critic.overlap": True}},
    {"algo": "kron-a2c", "env": "Cartpole", "overrides": {"critic.name": "linear"}},
    {"algo": "vmg-a2c", "env": "CartpoleSwingUp", "overrides": {"update.kernel": "imq", "update.bandwidth": "s2vgd",
                                                                "critic.steps": 2}},
    {"algo": "independent-a2c", "env": "CartPole-v1", "overrides": {"critic.steps": 2}},
    {"algo": "svgd-ppo", "env": "CartpoleSwingUp", "overrides": {"estimator.minibatches": 4, "estimator.epochs": 2,
                                                                 "critic.steps": 2}},
    {"algo": "svgd-ppo", "env": "CartpoleSwingUp", "overrides": RECIPE},
    {"algo": "independent-ppo", "env": "CartpoleSwingUp", "overrides": RECIPE},
    {"algo": "s2vgd-ppo", "env": "CartPole-v1", "overrides": {**RECIPE, "policy.normalize_obs": False}},
    {"algo": "svgd-ppo", "env": "Pendulum-v1", "overrides": {"estimator.minibatches": 2, "estimator.max_grad_norm": 0.5,
                                                             "estimator.anneal_lr": True, "critic.steps": 2,
                                                             "critic.overlap": True, "update.bandwidth": 0.5}},
    {"algo": "svgd-ppo", "env": "CartpoleSwingUp", "seeds": [5, 1],
     "overrides": {"estimator.minibatches": 2, "estimator.max_grad_norm": 0.5, "estimator.scale_rewards": True,
                   "critic.joint": True, "estimator.ent_coef": 0.01, "rollout.env_backend": "torch"}},
    {"algo": "s2vgd-a2c", "env": "CartpoleSwingUp", "seeds": [2, 0],
     "overrides": {"critic.steps": 2, "rollout.env_backend": "torch", "rollout.sampling": "cut"}},
]
BANDITS = [
    {"algo": "svgd-ts", "env": "Wheel", "overrides": {"rounds": 120, "particles": 4, "seed": 1,
                                                      "protocol.refit_every": 40, "protocol.refit_steps": 5,
                                                      "protocol.minibatch": 32}},
    {"algo": "independent-ts", "env": "Wheel", "overrides": {"rounds": 120, "particles": 4, "seed": 1,
                                                             "protocol.refit_every": 40, "protocol.refit_steps": 5,
                                                             "protocol.minibatch": 32}},
]
REGRESSION = [{"method": m, "particles": 4, "epochs": 3, "batch_size": 16, "seed": 2, "kernel": k}
              for m, k in (("svgd", "rbf"), ("s2vgd", "imq"), ("independent", "rbf"))]


def checksum(params) -> float:
    return float(sum(p.detach().double().sum() for p in params))


def run_rl(case: dict) -> dict:
    cfg = steinrl.load_config(case["algo"], case["env"], {**SMALL, **case["overrides"]})
    trainer = steinrl.Trainer(cfg, case.get("seeds"))
    rows = [[{k: v for k, v in r.items() if not k.startswith("time/")} for r in trainer.step_seeds()]
            for _ in range(3)]
    agent = trainer.job.agent
    sums = {"policy": checksum(agent.policy.parameters())}
    if agent.critic is not None:
        sums["critic"] = checksum(agent.critic.parameters())
    trainer.close()
    return {"metrics": rows, "checksums": sums}


def run_bandit(case: dict) -> dict:
    cfg = steinrl.load_config(case["algo"], case["env"], {**case["overrides"], "run.progress": False})
    trainer = steinrl.Trainer(cfg)
    rows = []
    while not trainer.done:
        rows.append({k: v for k, v in trainer.step().items() if not k.startswith("time/")})
    trainer.close()
    return {"metrics": rows[-1:]}


def run_regression(case: dict) -> dict:
    from steinrl.bayes.regression import fit_regressor

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(40, 3, generator=gen, dtype=torch.float64).numpy()
    y = (x @ [1.0, -2.0, 0.5] + 0.1 * torch.randn(40, generator=gen, dtype=torch.float64).numpy())
    options = {k: v for k, v in case.items() if k != "method"}
    regressor = fit_regressor(case["method"], x, y, hidden=(8,), **options)
    return {"checksum": checksum(regressor.model.parameters())}


def main() -> None:
    torch.set_num_threads(1)
    out = {"small": SMALL, "cases": [], "bandits": [], "regression": []}
    for case in CASES:
        out["cases"].append({**case, **run_rl(case)})
        print(case["algo"], case["env"], case.get("seeds"), file=sys.stderr)
    for case in BANDITS:
        out["bandits"].append({**case, **run_bandit(case)})
        print(case["algo"], case["env"], file=sys.stderr)
    for case in REGRESSION:
        out["regression"].append({**case, **run_regression(case)})
    PATH.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {PATH}", file=sys.stderr)


if __name__ == "__main__":
    main()
