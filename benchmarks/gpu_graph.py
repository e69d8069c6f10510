#!/usr/bin/env python
"""The graphed iteration on a GPU: it computes what the eager one does, resumes exactly, and its time.

    python benchmarks/gpu_graph.py --device cuda [--iterations 1000] [--seeds 10] [--check-iterations 8]

On the fast swing-up (``svgd-a2c``, CartpoleSwingUp, ``--preset fast``: M = 16, 50 envs per
particle, 5000 env steps per particle per iteration, continuing sampling) it runs:

1. the first ``--check-iterations`` iterations graphed (``run.cuda_graph on``) and eager (``off``),
   seed 0, on the same device: the largest relative difference of any logged value (float
   rounding where both compute the same numbers; the capture happens after 2 warm-up iterations);
2. a graphed run stopped and resumed: ``--check-iterations`` iterations straight, against half of
   them, a checkpoint, a new graphed trainer (and a new eager one) restored from it and the rest:
   the largest difference (0: exact);
3. ``--iterations`` graphed iterations of one seed: the wall-clock seconds (a trainer's loop, no
   files), and the final and best ``rollout/ep_rew_max_particle``;
4. ``--seeds`` seeds as one batch, ``--iterations`` graphed iterations: the wall-clock seconds,
   env steps/s, and every seed's best ``rollout/ep_rew_max_particle`` with their mean and the
   half width of its Student-t 95 % interval (the 10-seed study on the CPU: 394.6 ± 84.0).

Last line: ``gpu_graph device=<name> equal_max_rel=<x> resume_max_diff=<x> its1000_s=<x>
seeds10_its1000_s=<x> seeds10_steps_per_s=<x> seeds10_peak=<mean>±<half width> capture=<ok|failed>``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from steinrl.errors import NonFiniteError  # noqa: E402
from steinrl.run.config import load_config  # noqa: E402
from steinrl.run.trainer import Trainer  # noqa: E402

ALGO, ENV, PRESET, METRIC = "svgd-a2c", "CartpoleSwingUp", "fast", "rollout/ep_rew_max_particle"
#: Student-t 97.5 % quantiles by degrees of freedom
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 19: 2.093}


def trainer(device: str, graph: str, iterations: int, seeds: list[int] | None = None, algo: str = ALGO,
            overrides: dict | None = None) -> Trainer:
    """The fast swing-up's trainer (``algo``, ``overrides`` on top) with ``run.cuda_graph`` ``graph``."""
    cfg = load_config(algo, ENV, {**(overrides or {}), "device": device, "iterations": iterations,
                                  "run.cuda_graph": graph, "run.progress": False}, preset=PRESET)
    return Trainer(cfg, seeds)


def scalars(row: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in row.items() if not k.startswith("time/")}


def capture_state(t: Trainer) -> str:
    """``ok``, ``no graph`` (eager by config) or why the trainer's capture failed."""
    graph = t.job.graph
    return "no graph" if graph is None else graph.failed or "ok"


def max_rel(a: list[dict[str, float]], b: list[dict[str, float]]) -> float:
    worst = 0.0
    for x, y in zip(a, b):
        for k, v in x.items():
            w = y[k]
            if math.isnan(v) and math.isnan(w):
                continue
            worst = max(worst, abs(v - w) / max(abs(v), abs(w), 1e-12))
    return worst


def sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--iterations", type=int, default=1000)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--check-iterations", type=int, default=8)
    args = p.parse_args()
    device, n = args.device, args.check_iterations
    name = torch.cuda.get_device_name() if torch.device(device).type == "cuda" else "cpu"
    print(f"torch {torch.__version__} on {device} ({name}); {ALGO} {ENV} --preset {PRESET}", flush=True)

    on = "on" if name != "cpu" else "off"  # (on the CPU the script runs eagerly: a check of the script)
    graphed = trainer(device, on, args.iterations)
    g_rows = [scalars(graphed.step()) for _ in range(n)]
    states = [capture_state(graphed)]
    eager = trainer(device, "off", args.iterations)
    e_rows = [scalars(eager.step()) for _ in range(n)]
    equal = max_rel(g_rows, e_rows)
    print(f"1. graphed vs eager, {n} iterations: largest relative difference {equal:.2e} "
          f"(capture: {states[0]})", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        half = n // 2
        first = trainer(device, on, args.iterations)
        for _ in range(half):
            first.step()
        first.save(Path(tmp) / "c.pt")
        diffs = []
        for graph in (on, "off"):
            again = trainer(device, graph, args.iterations).restore(Path(tmp) / "c.pt")
            diffs.append(max_rel(g_rows[half:], [scalars(again.step()) for _ in range(n - half)]))
        resume = max(diffs)
    print(f"2. graphed run resumed from iteration {half}: into a graphed trainer {diffs[0]:.2e}, into an eager "
          f"one {diffs[1]:.2e} (largest relative difference to the straight run)", flush=True)

    one = trainer(device, on, args.iterations)
    sync(device)
    start = time.perf_counter()
    rows = []
    while not one.done:
        rows.append(one.step()[METRIC])
    sync(device)
    its_s = time.perf_counter() - start
    states.append(capture_state(one))
    print(f"3. one seed, {len(rows)} graphed iterations: {its_s:.1f} s; final {rows[-1]:.1f}, best "
          f"{max(rows):.1f} (capture: {states[-1]})", flush=True)

    batch = trainer(device, on, args.iterations, list(range(args.seeds)))
    sync(device)
    start, steps = time.perf_counter(), 0
    best = [-math.inf] * args.seeds
    stopped = ""
    try:
        while not batch.done:
            for s, row in enumerate(batch.step_seeds()):
                best[s] = max(best[s], row[METRIC])
                steps += round(row["time/steps_per_particle"] * batch.config.particles)
    except NonFiniteError as exc:  # the batch stops as a run does; its figures so far are reported
        stopped = f" (stopped: {exc})"
    sync(device)
    seeds_s = time.perf_counter() - start
    states.append(capture_state(batch))
    mean = statistics.fmean(best)
    half_width = T975.get(args.seeds - 1, 1.96) * statistics.stdev(best) / math.sqrt(args.seeds) if args.seeds > 1 \
        else math.nan
    print(f"4. {args.seeds} seeds, {batch.iteration} graphed iterations: {seeds_s:.1f} s, {steps / seeds_s:,.0f} "
          f"env steps/s; best per seed {', '.join(f'{b:.1f}' for b in best)}; peak {mean:.1f} ± {half_width:.1f} "
          f"(the CPU's 10 seeds: 394.6 ± 84.0; capture: {states[-1]}){stopped}", flush=True)
    print(f"gpu_graph device={name.replace(' ', '_')} equal_max_rel={equal:.2e} resume_max_diff={resume:.2e} "
          f"its1000_s={its_s:.1f} seeds{args.seeds}_its1000_s={seeds_s:.1f} seeds{args.seeds}_steps_per_s="
          f"{steps / seeds_s:.0f} seeds{args.seeds}_peak={mean:.1f}±{half_width:.1f} "
          f"capture={'ok' if set(states) == {'ok'} else 'none' if set(states) == {'no graph'} else 'failed'}"
          f"{f' seeds_stopped_at={batch.iteration + 1}' if stopped else ''}")


if __name__ == "__main__":
    main()
