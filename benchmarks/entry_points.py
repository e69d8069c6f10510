#!/usr/bin/env python
"""The same config through the Python API and the command line: the same speed (the Trainer sets
``run.threads`` for every entry point).

    python benchmarks/entry_points.py [--iterations 30] [--rounds 3]

The README's Python snippet's config (``svgd-a2c`` on Cartpole, 8 particles, 1000 env steps per
particle per iteration), ``--iterations`` iterations, each way in a fresh process, alternated
for ``--rounds`` rounds:

- ``api``: ``steinrl.Trainer(cfg)`` stepped until done (the README's snippet; run.threads
  at its default, 1);
- ``cli``: ``python train.py --algo svgd-a2c --env Cartpole --particles 8 --set
  rollout.batch_size=1000 --no-progress`` (its end line's training seconds);
- ``api_torch_threads``: the API with ``run.threads=0``, which leaves torch's own thread count
  (one per core): how the API ran before the Trainer set the threads.

Each figure is the training seconds (the loop alone: imports and env construction aside).
Last line: ``entry_points iterations=<n> api_s=<median> cli_s=<median> api_torch_threads_s=<median>
api_over_cli=<ratio> threads=<torch threads in the api run>``.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

API = """
import time, torch, steinrl
cfg = steinrl.load_config(algo="svgd-a2c", env="Cartpole", overrides={{"particles": 8, "rollout.batch_size": 1000,
                          "iterations": {iterations}, "run.threads": {threads}}})
trainer = steinrl.Trainer(cfg)
t0 = time.perf_counter()
while not trainer.done:
    trainer.step()
print(f"seconds={{time.perf_counter() - t0:.3f}} threads={{torch.get_num_threads()}}")
"""


def api(iterations: int, threads: int) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", API.format(iterations=iterations, threads=threads)], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"seconds=([\d.]+) threads=(\d+)", out)
    return float(m[1]), int(m[2])


def cli(iterations: int) -> float:
    with tempfile.TemporaryDirectory() as logdir:
        err = subprocess.run([sys.executable, str(ROOT / "train.py"), "--algo", "svgd-a2c", "--env", "Cartpole",
                              "--particles", "8", "--set", "rollout.batch_size=1000", "--iterations", str(iterations),
                              "--no-progress", "--logdir", logdir], cwd=ROOT, capture_output=True, text=True,
                             check=True).stderr
    return float(re.search(r"^done: .* in ([\d.]+) s;", err, re.M)[1])


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=30, help="iterations per run (default 30)")
    p.add_argument("--rounds", type=int, default=3, help="alternated rounds (default 3)")
    args = p.parse_args()
    times: dict[str, list[float]] = {"api": [], "cli": [], "api_torch_threads": []}
    threads = 0
    for r in range(args.rounds):
        seconds, threads = api(args.iterations, 1)
        times["api"].append(seconds)
        times["cli"].append(cli(args.iterations))
        times["api_torch_threads"].append(api(args.iterations, 0)[0])
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"entry_points iterations={args.iterations} api_s={med['api']:.1f} cli_s={med['cli']:.1f} "
          f"api_torch_threads_s={med['api_torch_threads']:.1f} api_over_cli={med['api'] / med['cli']:.2f} "
          f"threads={threads}")


if __name__ == "__main__":
    main()
