"""Benchmark: fused SVGD update and batched ensemble forward vs Python loops over particles.

    python benchmarks/svgd_step.py [--threads 1] [--quick]          # sections 1-2: a few minutes
    python benchmarks/svgd_step.py --roofline [--quick]               # and section 3: ~10 more minutes on 2 CPU cores
    python benchmarks/svgd_step.py --roofline-only [--device cuda --roofline-size 1024x1000000]

Section 3, the roofline (M up to 1024 on the CPU, bf16 included), took about 11 minutes on a
2-core machine, so it runs only with ``--roofline`` or ``--roofline-only``.

1. One SVGD direction (:func:`steinrl.core.stein.svgd_direction`: distances, median bandwidth,
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
3. Roofline of one SVGD direction (rbf, svpg) at M × D = 64 × 1e5, 256 × 1e5, 1024 × 2.5e4
   (D / 5 with --quick; other sizes with --roofline-size, on any --device), for the default options,
   ``attractive_norm=False``, and that plus ``precision="bf16"``. The device's peaks are
   measured in the script: FLOP/s as the faster of a 2048³ and a 256 × 40960 × 256 matmul,
   in float32 and in bfloat16 (on a CPU, what oneDNN reaches there), memory bandwidth as a
   copy of 64 Mi float32 (bytes read + written / time). The bounds count the three M×M×D
   products (2M²D FLOPs each: particle Gram in float32; gradients' Gram, when on, and kernel
   product in the chosen precision) and the compulsory traffic (θ and G read once, φ
   written once: 12MD bytes); ``roofline fraction = max(FLOP-bound, bandwidth-bound time) /
   measured``. Peaks and times of this section are the fastest timed block (not the
   median), which other jobs on a shared machine inflate least, and on one CPU thread they
   are this process's CPU time (the same as wall time on an idle machine).

Times are medians (torch.utils.benchmark for the fused paths, repeated wall-clock
runs for the slow loops) after a warm-up. The last line is ``svgd_step speedup_vs_loop=<x
at M=16, D=1e4> ensemble_speedup=<x> svgd_roofline_fraction=<default options, last size>
svgd_roofline_fraction_bf16=<bf16, no attractive norm, last size>`` (nan for sections skipped:
the roofline's without ``--roofline``).
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
from steinrl.core.stein import ATTRACTIVE_NORM_MAX_DIM, svgd_direction  # noqa: E402


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


def timer_best(stmt: str, globals_: dict, min_run_time: float, clock=time.perf_counter) -> float:
    """The fastest of the timed blocks (a peak, or a time on a machine that other jobs share)."""
    t = benchmark.Timer(stmt=stmt, globals=globals_, timer=clock)
    t.timeit(2)  # warm-up
    return min(t.blocked_autorange(min_run_time=min_run_time).times)


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
            t_rows = wallclock_median(lambda th=theta, g=grad, r=rows: naive_svgd_rows(th, g, r), repeats)
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


def roofline_clock(device: torch.device):
    """Section 3's clock: this process's CPU time on one CPU thread (wall time on an idle
    machine, less what other jobs take from the core on a shared one); on a GPU, wall time
    read after the device has finished its queued kernels (a custom clock replaces the
    synchronising one of ``torch.utils.benchmark.Timer``); else wall time."""
    if device.type == "cuda":
        def cuda_clock() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()
        return cuda_clock
    return time.process_time if device.type == "cpu" and torch.get_num_threads() == 1 else time.perf_counter


def measure_peaks(quick: bool, device: torch.device) -> dict[str, float]:
    """The device's float32 and bfloat16 matmul FLOP/s (the faster of a square n³ product and a
    Gram-shaped 256 × 20n × 256 one) and copy bandwidth (bytes/s)."""
    n = 1024 if quick else 2048
    gen = torch.Generator(device).manual_seed(0)
    square = torch.randn(n, n, generator=gen, device=device)
    wide = torch.randn(256, 20 * n, generator=gen, device=device)
    run, clock = (0.3 if quick else 1.0), roofline_clock(device)
    peaks = {}
    for dtype in (torch.float32, torch.bfloat16):
        a, w = square.to(dtype), wide.to(dtype)
        peaks[str(dtype).removeprefix("torch.")] = max(2 * n**3 / timer_best("a @ a", {"a": a}, run, clock),
                                                       2 * 256**2 * w.shape[1] / timer_best("w @ w.T", {"w": w}, run,
                                                                                            clock))
    src = torch.randn(1 << 26, generator=gen, device=device)
    dst = torch.empty_like(src)
    peaks["bandwidth"] = 2 * src.numel() * 4 / timer_best("dst.copy_(src)", {"dst": dst, "src": src}, run, clock)
    return peaks


def roofline_bound(M: int, D: int, peaks: dict[str, float], norm: bool, precision: str) -> float:
    """Seconds one SVGD direction takes at best: max(FLOP-bound, bandwidth-bound time)."""
    product = 2.0 * M * M * D
    reduced = peaks["bfloat16" if precision == "bf16" else "float32"]
    t_flops = product / peaks["float32"] + product * (1 + norm) / reduced
    t_bytes = 12.0 * M * D / peaks["bandwidth"]
    return max(t_flops, t_bytes)


def bench_roofline(quick: bool, device: torch.device, sizes: list[tuple[int, int]]) -> tuple[float, float]:
    """Section 3; returns the fractions of the default options and of bf16 without the norm at the last size."""
    peaks = measure_peaks(quick, device)
    print(f"== SVGD direction against this machine's roofline (rbf, svpg, float32 inputs, {device}) ==")
    print(f"measured peaks: float32 matmul {peaks['float32'] / 1e9:.1f} GFLOP/s, bfloat16 matmul "
          f"{peaks['bfloat16'] / 1e9:.1f} GFLOP/s, copy {peaks['bandwidth'] / 1e9:.1f} GB/s")
    print(f"{'M':>5} {'D':>8} {'options':<28} {'measured':>12} {'roofline':>12}  fraction")
    configs = (("default", None, "full"), ("attractive_norm off", False, "full"),
               ("norm off, bf16", False, "bf16"))
    fractions = {}
    gen = torch.Generator(device).manual_seed(0)
    for M, D in sizes:
        theta = 0.1 * torch.randn(M, D, generator=gen, device=device)
        grad = torch.randn(M, D, generator=gen, device=device)
        for label, norm, precision in configs:
            t = timer_best("svgd_direction(theta, grad, attractive_norm=norm, precision=precision)",
                           {"svgd_direction": svgd_direction, "theta": theta, "grad": grad, "norm": norm,
                            "precision": precision}, 0.3 if quick else 1.0, roofline_clock(device))
            computes_norm = norm or (norm is None and D <= ATTRACTIVE_NORM_MAX_DIM)
            bound = roofline_bound(M, D, peaks, computes_norm, precision)
            fractions[label] = bound / t
            print(f"{M:>5} {D:>8} {label:<28} {fmt(t):>12} {fmt(bound):>12}  {bound / t:8.2f}", flush=True)
        del theta, grad
    return fractions["default"], fractions["norm off, bf16"]


def size(text: str) -> tuple[int, int]:
    try:
        M, D = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MxD such as 1024x1000000, got {text!r}") from None
    if M < 2 or D < 1:
        raise argparse.ArgumentTypeError(f"need M >= 2 and D >= 1, got {text!r}")
    return M, D


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    for flag, text in (("--quick", "shorter timing runs"),
                       ("--roofline", "also section 3, the roofline (about 10 minutes more on 2 CPU cores)"),
                       ("--roofline-only", "only section 3 (the roofline)")):
        parser.add_argument(flag, action="store_true", help=text)
    parser.add_argument("--device", default="cpu", help="device of section 3 (sections 1-2 run on cpu)")
    parser.add_argument("--roofline-size", type=size, action="append", metavar="MxD",
                        help="section 3's sizes (repeatable; default 64x1e5, 256x1e5, 1024x2.5e4; D / 5 with --quick)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {device}")
    D = 20_000 if args.quick else 100_000
    sizes = args.roofline_size or [(64, D), (256, D), (1024, D // 4)]
    s = e = float("nan")
    if not args.roofline_only:
        s = bench_svgd(args.quick)
        e = bench_ensemble(args.quick)
    r = r_bf16 = float("nan")
    if args.roofline or args.roofline_only:
        r, r_bf16 = bench_roofline(args.quick, device, sizes)
    print(f"svgd_step speedup_vs_loop={s:.1f} ensemble_speedup={e:.1f} svgd_roofline_fraction={r:.2f} "
          f"svgd_roofline_fraction_bf16={r_bf16:.2f}")


if __name__ == "__main__":
    main()
