"""Benchmark: fused SVGD update and batched ensemble forward vs Python loops over particles.

    python benchmarks/svgd_step.py [--threads 1] [--quick]

1. One SVGD direction (:func:`steinrl.core.svgd.svgd_direction`: distances, median bandwidth,
   kernel, attractive + repulsive terms) vs a naive Python double loop over particle
   pairs (same maths, one pair at a time) for M ∈ {16, 64, 256}, D ∈ {1e3, 1e4, 1e5},
   float32 on CPU. Where the full loop would take too long, it is timed on the first k
   rows of particles and extrapolated linearly to M rows (labelled "est. from k rows").
2. One forward of an ensemble of 16 policies (obs 4 -> 25 -> 10 -> 1, tanh, 160 inputs
   per particle) through EnsembleMLP with gaussian layers and pre-materialised dense
   weights (as in a rollout) vs a Python loop over 16 nn.Sequential modules, both under
   torch.no_grad. Without autograd, EnsembleMLP evaluates large tanh blocks as
   2·sigmoid(2z) − 1 (torch.tanh is several times slower on CPU); the time with plain
   torch.tanh_ is printed too.

Times are medians (torch.utils.benchmark for the fused paths, repeated wall-clock
runs for the slow loops) after a warm-up. The last line is
``svgd_step speedup_vs_loop=<x at M=16, D=1e4> ensemble_speedup=<x>``.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import torch
from torch.utils import benchmark

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import steinrl.core.ensemble as ensemble_mod  # noqa: E402
from steinrl.core.ensemble import EnsembleMLP  # noqa: E402
from steinrl.core.svgd import svgd_direction  # noqa: E402


def naive_svgd_rows(theta: torch.Tensor, grad: torch.Tensor, rows: int) -> torch.Tensor:
    """The SVGD direction for the first ``rows`` particles, one particle pair at a time.

    Computes all M² pairwise squared distances in a loop (needed for the median
    bandwidth) only when rows == M; for a row subset it computes the distance rows it
    needs and takes h from them (timing, not maths, is the point of a subset run).
    """
    M, D = theta.shape
    sq = torch.zeros(rows, M, dtype=theta.dtype)
    for i in range(rows):
        for j in range(M):
            diff = theta[i] - theta[j]
            sq[i, j] = diff @ diff
    flat = sq.flatten().sort().values
    n = flat.numel()
    med = flat[n // 2] if n % 2 else 0.5 * (flat[n // 2 - 1] + flat[n // 2])
    h = float(med) / (2.0 * math.log(M + 1))
    phi = torch.zeros(rows, D, dtype=theta.dtype)
    for i in range(rows):
        acc = torch.zeros(D, dtype=theta.dtype)
        for j in range(M):
            diff = theta[i] - theta[j]
            k = math.exp(-float(sq[i, j]) / h)
            acc += k * grad[j] + (2.0 / h) * k * diff
        phi[i] = acc / M
    return phi


def wallclock_median(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def timer_median(stmt: str, globals_: dict, min_run_time: float) -> float:
    t = benchmark.Timer(stmt=stmt, globals=globals_)
    t.timeit(3)  # warm-up
    return t.blocked_autorange(min_run_time=min_run_time).median


def fmt(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:8.2f} s "
    if seconds >= 1e-3:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds * 1e6:8.1f} us"


def bench_svgd(quick: bool) -> float:
    budget = 0.3 if quick else 1.0  # seconds allowed for one naive run before subsetting
    print("== SVGD direction: fused svgd_direction vs naive Python double loop (float32, CPU) ==")
    print(f"{'M':>5} {'D':>8} {'fused':>12} {'naive loop':>12}  {'speedup':>9}  note")
    speedup_ref = float("nan")
    gen = torch.Generator().manual_seed(0)
    for M in (16, 64, 256):
        for D in (1_000, 10_000, 100_000):
            theta = 0.1 * torch.randn(M, D, generator=gen)
            grad = torch.randn(M, D, generator=gen)
            t_fused = timer_median(
                "svgd_direction(theta, grad)",
                {"svgd_direction": svgd_direction, "theta": theta, "grad": grad},
                min_run_time=0.2 if quick else 0.5,
            )
            # probe one row to decide how many rows the naive loop can afford
            t0 = time.perf_counter()
            naive_svgd_rows(theta, grad, 1)
            per_row = time.perf_counter() - t0
            rows = M if per_row * M <= budget else max(1, min(M, int(budget / per_row)))
            repeats = 3 if per_row * rows < 0.5 else 1
            t_rows = wallclock_median(lambda: naive_svgd_rows(theta, grad, rows), repeats)
            t_naive = t_rows * M / rows
            note = "" if rows == M else f"(est. from {rows} rows)"
            speedup = t_naive / t_fused
            if M == 16 and D == 10_000:
                speedup_ref = speedup
            print(f"{M:>5} {D:>8} {fmt(t_fused):>12} {fmt(t_naive):>12}  {speedup:8.1f}x  {note}", flush=True)
    return speedup_ref


def bench_ensemble(quick: bool) -> float:
    M, obs, hidden, act, B = 16, 4, (25, 10), 1, 160
    print(f"== Ensemble forward: {M} policies {obs}->{hidden[0]}->{hidden[1]}->{act} tanh, {B} inputs each ==")
    torch.manual_seed(0)
    net = EnsembleMLP(M, obs, hidden, act, activation="tanh", layer="gaussian")
    policies = []
    for i in range(M):
        policies.append(net.particle_module(i))
    x = torch.randn(M, B, obs)
    with torch.no_grad():
        dense = net.dense()
        y = net(x, dense)
        for i in range(M):
            torch.testing.assert_close(y[i], policies[i](x[i]), rtol=1e-5, atol=1e-6)

    def loop():
        return [policies[i](x[i]) for i in range(M)]

    run = 0.3 if quick else 1.0
    with torch.no_grad():
        t_batched = timer_median("net(x, dense)", {"net": net, "x": x, "dense": dense}, run)
        t_loop = timer_median("loop()", {"loop": loop}, run)
        x_shared = x[0]
        t_shared = timer_median("net(x, dense)", {"net": net, "x": x_shared, "dense": dense}, run)
        # the same batched forward with plain torch.tanh_ (no sigmoid form), for transparency
        saved = ensemble_mod._TANH_VIA_SIGMOID_MIN
        ensemble_mod._TANH_VIA_SIGMOID_MIN = float("inf")
        try:
            t_plain = timer_median("net(x, dense)", {"net": net, "x": x, "dense": dense}, run)
        finally:
            ensemble_mod._TANH_VIA_SIGMOID_MIN = saved
    speedup = t_loop / t_batched
    print(f"batched EnsembleMLP (per-particle inputs, dense reused): {fmt(t_batched)}")
    print(f"batched EnsembleMLP (one shared (B, in) batch):          {fmt(t_shared)}")
    print(f"batched, plain torch.tanh_ instead of 2*sigmoid(2z)-1:   {fmt(t_plain)}  ({t_loop / t_plain:.1f}x vs loop)")
    print(f"loop over {M} nn.Sequential:                              {fmt(t_loop)}")
    print(f"speedup: {speedup:.1f}x")
    return speedup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    parser.add_argument("--quick", action="store_true", help="shorter timing runs")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), cpu")
    s = bench_svgd(args.quick)
    e = bench_ensemble(args.quick)
    print(f"svgd_step speedup_vs_loop={s:.1f} ensemble_speedup={e:.1f}")


if __name__ == "__main__":
    main()
