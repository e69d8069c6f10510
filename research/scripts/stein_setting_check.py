#!/usr/bin/env python
"""A task's own check of the shipped Stein setting (research/results/repulsion_study.md): train one
algorithm on one task with its file's config and a given coupling, for seeds 0-2, and print each run's
peak of the best particle's return and its mean particle return over the last 10 iterations.

    python research/scripts/stein_setting_check.py TASK [ALGO] [SETTINGS]

``SETTINGS``: comma-separated, of ``K1`` (the repulsion study's pick: the function-space kernel, B = 64
states, the weight-space driving term, repulsion held at 5 % of the driving term) and ``weights`` (the
RBF kernel on the weights at lambda = 1, SVPG's); default both. ALGO default ``svgd-a2c``.
One line per run: ``TASK ALGO SETTING seed=S peak_max_particle=... final_mean=... mean_last10=... its=... s=...``.
"""

from __future__ import annotations

import math
import sys
import time

import numpy as np

from steinrl.run.config import load_config
from steinrl.run.trainer import Trainer

SETTINGS = {
    "K1": {"update.kernel": {"space": "functions", "states": 64, "driving": "weights"},
           "update.repulsion": {"name": "share", "target": 0.05}},
    "weights": {"update.kernel": {"space": "weights"}, "update.repulsion": {"name": "constant", "weight": 1.0}},
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    task, algo = argv[0], argv[1] if len(argv) > 1 else "svgd-a2c"
    names = argv[2].split(",") if len(argv) > 2 else list(SETTINGS)
    unknown = [n for n in names if n not in SETTINGS]
    if unknown:
        print(f"error: unknown setting {unknown[0]!r}; valid: {', '.join(SETTINGS)}", file=sys.stderr)
        return 2
    for seed in (0, 1, 2):
        for name in names:
            t0 = time.time()
            cfg = load_config(algo, task, {**SETTINGS[name], "seed": seed, "run.progress": False,
                                           "run.tensorboard": False})
            trainer, peak, means = Trainer(cfg), -math.inf, []
            while not trainer.done:
                metrics = trainer.step()
                best = metrics.get("rollout/ep_rew_max_particle", math.nan)
                peak = max(peak, best) if best == best else peak
                means.append(metrics.get("rollout/ep_rew_mean", math.nan))
            trainer.close()
            print(f"{task} {algo} {name} seed={seed} peak_max_particle={peak:.1f} final_mean={means[-1]:.1f} "
                  f"mean_last10={np.nanmean(means[-10:]):.1f} its={len(means)} s={time.time() - t0:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
