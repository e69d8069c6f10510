#!/usr/bin/env python
"""Recompute ``pre_restructure_metrics.json`` on this machine with the pre-restructure code.

    git worktree add /tmp/pre-restructure d9b4582
    PYTHONPATH=/tmp/pre-restructure python tests/data/make_pre_restructure_metrics.py

Runs every case of the JSON (keys, cases and order unchanged) through the code of commit
d9b4582 (its ``resolve_config`` and ``Trainer``) and rewrites the recorded values: the
metrics of the 3 iterations and the checksums of the final particles. Needed only where
float32 kernels round differently from the machine that made the file (another CPU family):
the DoublePendulum cases are chaotic and carry a last-bit difference to whole returns.
"""

import json
import sys
import tempfile
from pathlib import Path

import torch

from steinrl.config import resolve_config  # the pre-restructure module
from steinrl.logger import read_metrics
from steinrl.trainer import Trainer

PATH = Path(__file__).with_name("pre_restructure_metrics.json")


def main() -> None:
    data = json.loads(PATH.read_text())
    with tempfile.TemporaryDirectory() as logdir:
        for n, case in enumerate(data["cases"]):
            overrides = {**data["small_overrides"], **case["overrides"], "algo": case["algo"], "seed": data["seed"],
                         "iterations": 3, "progress": False, "logdir": logdir, "run_name": f"case{n}"}
            trainer = Trainer(resolve_config(env=case["env"], overrides=overrides))
            run_dir = trainer.train()
            rows = read_metrics(run_dir)
            for old, new in zip(case["metrics"], rows):
                for key in old:
                    old[key] = new[key]
            params = torch.cat([p.detach().double().flatten() for p in trainer.agent.policy.particle_parameters()])
            case["param_sum"], case["param_abs_sum"] = float(params.sum()), float(params.abs().sum())
            print(n, case["env"], case["algo"], case["param_sum"], file=sys.stderr)
    PATH.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
