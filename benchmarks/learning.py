#!/usr/bin/env python
"""Learning benchmark: the papers' settings, several seeds and algorithms — a thin caller of ``steinrl sweep``.

    python benchmarks/learning.py                                  # 3 tasks x 5 algos x 3 seeds
    python benchmarks/learning.py --env CartpoleSwingUp --algo s2vgd-a2c --seeds 3
    python benchmarks/learning.py --env CartpoleSwingUp --algo s2vgd-a2c --tag svpg-net \
        --set "policy.hidden=[100,50,25]"

The flags become a sweep spec (``<out>/learning.yaml``) that runs on Ray Tune like any
``steinrl sweep SPEC.yaml`` (see docs/sweeps.md; ``pip install "steinrl[sweep]"``): ``--jobs``
trials at a time, one CPU each, checkpointed, and the same command started again continues an
interrupted benchmark. Its outputs go to ``runs/benchmarks/learning/<tag>/`` (``--results``):
``results.csv``, ``summary.md`` (per task and algorithm: seeds, seed mean and 95 % CI of the
peak and final ``rollout/ep_rew_max_particle``, the iteration reaching 95 % of the rise to the
peak, seconds per trial) and ``curves.png``. A result set worth keeping goes to the studies'
archives in their compact form: ``python benchmarks/combine_sweeps.py runs/benchmarks/learning/<tag>
--archive --out research/archives/<name>``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steinrl.run.cli import run_cli  # noqa: E402
from steinrl.run.config import parse_set  # noqa: E402
from steinrl.run.sweep import load_spec, run_sweep  # noqa: E402

DEFAULT_ENVS = ["CartpoleSwingUp", "DoublePendulum", "Cartpole"]
DEFAULT_ALGOS = ["s2vgd-a2c", "svgd-a2c", "s2vgd-reinforce", "svgd-reinforce", "independent-a2c"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", action="append", help="task (repeatable; default: the three paper tasks)")
    p.add_argument("--algo", action="append", help="algorithm (repeatable; default: five)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    p.add_argument("--iterations", type=int, help="override the task's iteration count")
    p.add_argument("--set", action="append", default=[], help="config override for every run (key=value)")
    p.add_argument("--tag", default="paper", help="name of this result set (its output directory)")
    p.add_argument("--jobs", type=int, default=2, help="trials at a time")
    p.add_argument("--results", default=str(ROOT / "runs" / "benchmarks" / "learning"), help="where result sets go")
    args = p.parse_args(argv)
    out = Path(args.results) / args.tag
    spec = {"algos": args.algo or DEFAULT_ALGOS, "envs": args.env or DEFAULT_ENVS, "seeds": args.seeds,
            "config": parse_set(args.set), "max_concurrent": args.jobs}
    if args.iterations:
        spec["iterations"] = args.iterations
    out.mkdir(parents=True, exist_ok=True)
    path = out / "learning.yaml"  # the sweep refuses to continue a result set made with other flags
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    command = " ".join(["python benchmarks/learning.py", *(sys.argv[1:] if argv is None else argv)])
    code = run_sweep(load_spec(path), out, command=command)
    print(f"learning tag={args.tag}: exit {code}; table in {out / 'summary.md'}")
    return code


if __name__ == "__main__":
    sys.exit(run_cli(main))
