#!/usr/bin/env python
"""Diagnoses of the graphed iteration on a GPU: is the device itself run-to-run deterministic,
where graphed and eager numbers part, and why a capture fails.

    python benchmarks/gpu_debug.py --device cuda [--deterministic] [--mode global|thread_local|relaxed]
        [--algo svgd-a2c] [--set key=value ...] [--quick]

On the fast swing-up (``--algo``, default ``svgd-a2c``; CartpoleSwingUp, ``--preset fast``, ``--set``
overrides; ``--quick``: parts 1-2 only):

1. two eager trainers, same seed, ``--check-iterations`` iterations: per iteration the largest
   relative difference of any logged value and the first key that differs (a GPU's atomics and
   split reductions can differ run to run: this is the floor any graphed-vs-eager check sits on);
2. a graphed trainer against an eager one, the same per-iteration report;
3. fresh graphed trainers of 1, 10, 1 and 10 seeds, one after the other in this process: whether
   each capture held (and the reason it failed), with the torch capture error mode ``--mode``;
4. an eager 10-seed iteration under ``torch.cuda.set_sync_debug_mode("error")``: the first
   synchronising call inside an iteration, with its stack (none: the iteration is sync-free).

``--deterministic`` sets ``torch.use_deterministic_algorithms(True)`` (set
``CUBLAS_WORKSPACE_CONFIG=:4096:8`` in the environment too).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import traceback
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gpu_graph import capture_state, scalars, trainer  # noqa: E402  (this folder's graphed-iteration check)

from steinrl.rl import graph as graph_module  # noqa: E402
from steinrl.run.trainer import Trainer  # noqa: E402


def rows(t: Trainer, n: int) -> list[dict[str, float]]:
    return [scalars(t.step()) for _ in range(n)]


def compare(name: str, a: list[dict[str, float]], b: list[dict[str, float]]) -> None:
    parts = []
    for i, (x, y) in enumerate(zip(a, b)):
        worst, key = 0.0, "-"
        for k, v in x.items():
            w = y[k]
            if math.isnan(v) and math.isnan(w):
                continue
            rel = abs(v - w) / max(abs(v), abs(w), 1e-12)
            if rel > worst:
                worst, key = rel, k
        parts.append(f"it{i + 1} {worst:.1e} {key}")
    print(f"{name}: " + "; ".join(parts), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--check-iterations", type=int, default=6)
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--mode", default="global", choices=["global", "thread_local", "relaxed"])
    p.add_argument("--algo", default="svgd-a2c")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a config override (YAML value)")
    p.add_argument("--quick", action="store_true", help="parts 1-2 only")
    args = p.parse_args()
    algo = args.algo
    overrides = {k: yaml.safe_load(v) for k, v in (item.split("=", 1) for item in args.set)}

    def make(device: str, graph: str, seeds: list[int] | None = None) -> Trainer:
        return trainer(device, graph, 1000, seeds, algo=algo, overrides=overrides)

    if args.deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
    graph_module.CAPTURE_ERROR_MODE = args.mode
    device, n = args.device, args.check_iterations
    on = "on" if torch.device(device).type == "cuda" else "off"
    print(f"torch {torch.__version__} on {device}; {algo} {overrides or ''} deterministic={args.deterministic} "
          f"mode={args.mode}", flush=True)

    compare("1. eager vs eager", rows(make(device, "off"), n), rows(make(device, "off"), n))
    g = make(device, on)
    g_rows = rows(g, n)
    compare(f"2. graphed vs eager (capture: {capture_state(g)})", g_rows,
            rows(make(device, "off"), n))
    del g
    if args.quick:
        return

    for seeds in (1, 10, 1, 10):
        t = make(device, on, list(range(seeds)))
        start = time.perf_counter()
        for _ in range(4):
            t.step_seeds()
        print(f"3. {seeds} seed(s): 4 iterations {time.perf_counter() - start:.2f} s; capture {capture_state(t)}",
              flush=True)
        del t

    t = make(device, "off", list(range(10)))
    t.step_seeds()
    if torch.device(device).type == "cuda":
        torch.cuda.set_sync_debug_mode("error")
    try:
        t.step_seeds()
        print("4. no synchronising call inside an eager 10-seed iteration", flush=True)
    except Exception as exc:  # the first synchronising call, with where it came from
        stack = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in traceback.extract_tb(exc.__traceback__)]
        print(f"4. {type(exc).__name__}: {' '.join(str(exc).split())[:200]} | at {' <- '.join(reversed(stack[-6:]))}",
              flush=True)
    finally:
        if torch.device(device).type == "cuda":
            torch.cuda.set_sync_debug_mode(0)


if __name__ == "__main__":
    main()
