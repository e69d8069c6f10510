#!/usr/bin/env python
"""The whole SVPG iteration on one device: backends, raw torch envs, 10 seeds in one batch, the SVGD step.

    python benchmarks/gpu_throughput.py [--device cuda] [--iterations 10] [--full-svgd]

Runs on any device (cpu, cuda). On CartpoleSwingUp at paper scale (``svgd-a2c``, M = 16
particles, 5000 env steps per particle per iteration, the ``fast`` preset: continuing
sampling, 50 envs per particle) it prints:

1. whole-training env steps/s (rollout + update, after one warm-up iteration) with each
   env backend: ``numpy`` (host envs, the policy on the device) and ``torch`` (envs, rollout
   buffers and update on the device, :mod:`steinrl.rl.rollout` on a device task), eager and
   with ``rollout.compile`` (the warm-up iteration compiles);
2. raw stepping of the torch task on the device at the training's env count (16 × 50) and
   at the 10-seed count, random actions pre-drawn on the device;
3. the 10-seed aggregate: seeds 0..9 as one batch (``steinrl.Trainer(cfg, seeds)``),
   all seeds' env steps per second;
4. one fused SVGD direction (:func:`steinrl.core.stein.svgd_direction`, float32, median
   bandwidth on the device) for M ∈ {16, 256, 1024} × D ∈ {1e4, 1e6}, beside its
   memory-bandwidth bound: the bytes of Θ and the gradients read once (2·M·D·4) ÷ the
   device's bandwidth, measured here as the best of a few large device-to-device copies
   (read + write bytes ÷ time). On cpu the M·D > ``--svgd-cpu-limit`` cases are skipped
   unless ``--full-svgd`` (M = 1024, D = 1e6 is 8 GB of inputs and ~6 TFLOP of matmuls);
5. peak memory: ``torch.cuda.max_memory_allocated`` on cuda, peak RSS of the process on cpu.

6. the rollout step's work: eager kernels per env step (aten ops that are not views, counted
   by a dispatch recorder inside the steps of one batch; all ops beside; the batch's other
   kernels, its draws, preparation and bookkeeping, apart), the kernels Inductor generates for
   the compiled step (``rollout.compile``: one graph per step), and the host syncs of one
   whole iteration (the job's one transfer plus any op that reads a value back);
7. on CUDA only, the iteration as one replayed CUDA graph (``run.cuda_graph: on``) at one seed,
   ``--seeds`` and 100 seeds: env steps/s, host launches per iteration, and whether the static
   state kept its storage (the ``graph_*`` fields of the last line; ``nan`` and 0 elsewhere).

Last line: ``gpu_throughput device=<name> paper_steps_per_s=<x> eager_ops_per_step=<x>
compiled_step_kernels=<n> syncs_per_iteration=<n> seeds10_steps_per_s=<x>
env_steps_per_s=<x> fraction_of_env=<x> svgd_m1024_d1e6_ms=<x> svgd_bound_fraction=<x>
peak_mem_mb=<x>``, where ``paper_steps_per_s`` is the fastest of the three, ``env_steps_per_s`` the
raw torch env at the training's env count, ``fraction_of_env`` their ratio, and the SVGD
figures those of M = 1024, D = 1e6 (``nan`` when skipped).
"""

from __future__ import annotations

import argparse
import math
import resource
import sys
import time
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from env_torch_throughput import torch_steps_per_s  # noqa: E402  (benchmarks/, the same protocol)

from steinrl.core.stein import svgd_direction  # noqa: E402
from steinrl.rl.graph import WARMUP, persistent_tensors  # noqa: E402
from steinrl.run.config import load_config  # noqa: E402
from steinrl.run.trainer import Trainer  # noqa: E402

ALGO, ENV, PRESET = "svgd-a2c", "CartpoleSwingUp", "fast"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def config(device: str, backend: str, iterations: int, compile_: bool = False, graph: str = "off"):
    return load_config(ALGO, ENV, {"iterations": iterations + 1 + WARMUP, "device": device,
                                   "rollout.env_backend": backend, "rollout.compile": compile_,
                                   "run.cuda_graph": graph, "run.progress": False,
                                   "run.threads": torch.get_num_threads()}, preset=PRESET)  # the count set here


def graphed_trainer(device: torch.device, iterations: int, seeds: int | None = None) -> Trainer:
    """A trainer whose iterations are one replayed CUDA graph (``run.cuda_graph: on``)."""
    return Trainer(config(str(device), "torch", iterations, graph="on"), None if seeds is None else list(range(seeds)))


def graphed(device: torch.device, iterations: int, seeds: int | None = None) -> tuple[float, bool, int]:
    """Graphed iterations: env steps/s (all seeds), whether the static state kept its storage over
    the timed iterations, and the host's kernel launches per iteration (the draws, and the replay)."""
    trainer = graphed_trainer(device, iterations, seeds)
    for _ in range(WARMUP + 1):  # warm-up, capture and its first replay
        trainer.step_seeds()
    if trainer.job.graph.failed:
        print(f"  (capture failed: {trainer.job.graph.failed})", flush=True)
    ptrs = {k: v.data_ptr() for k, v in persistent_tensors(trainer.job).items()}
    with CountOps() as launches:
        trainer.step_seeds()
    rate = timed(trainer, iterations, device)
    static = ptrs == {k: v.data_ptr() for k, v in persistent_tensors(trainer.job).items()}
    replays = 1 if device.type == "cuda" and trainer.job.graph.graph is not None else 0
    per_iteration = sum(n for op, n in launches.counts.items() if op not in VIEW_OPS) + replays
    trainer.close()
    return rate, static, per_iteration


def graphed_rows(device: torch.device, args: argparse.Namespace, eager_kernels: int) -> tuple[dict, bool]:
    """The graphed rows (one seed, ``--seeds``, 100): env steps/s by seed count, and whether every
    row's static state kept its storage. CUDA only (a graph needs it; the graph-safe iteration run
    eagerly on the CPU is tests/test_graph_safe.py's), so none on another device."""
    rows, all_static = {}, True
    if device.type != "cuda":
        print("graphed iteration: CUDA only (run.cuda_graph), not measured here", flush=True)
        return rows, False
    for seeds in [None, args.seeds, *([100] if device.type == "cuda" and not args.no_100 else [])]:
        label = "one seed" if seeds is None else f"{seeds} seeds"
        try:
            rate, static, launches = graphed(device, args.iterations, seeds)
        except torch.OutOfMemoryError:
            print(f"graphed, {label}: out of device memory", flush=True)
            continue
        rows[seeds], all_static = rate, all_static and static
        per_1000 = 1000 * 80_000 * (1 if seeds is None else seeds) / rate
        print(f"graphed iteration, {label:9s}: {rate:14,.0f} env steps/s in all ({per_1000:7.1f} s per 1000 "
              f"iterations); host launches per iteration {launches} (eager: {eager_kernels} kernels); "
              f"static storage kept: {static}", flush=True)
    return rows, all_static


def eager_launches(device: torch.device) -> int:
    """Kernels an eager iteration launches (aten ops that are not views), after a warm-up."""
    trainer = Trainer(config(str(device), "torch", 1))
    trainer.step()
    with CountOps() as recorder:
        trainer.step()
    trainer.close()
    return sum(n for op, n in recorder.counts.items() if op not in VIEW_OPS)


#: aten ops that only make a view (no kernel, no memory traffic)
VIEW_OPS = {"view", "_unsafe_view", "select", "slice", "transpose", "t", "permute", "unsqueeze", "squeeze",
            "expand", "unbind", "alias", "as_strided", "reshape", "split", "chunk", "narrow"}
#: aten ops that read a value back to the host
SYNC_OPS = {"_local_scalar_dense", "item", "is_nonzero", "nonzero", "masked_select", "equal"}


class CountOps(TorchDispatchMode):
    """Counts the aten ops dispatched inside the ``with`` block, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


def step_ops(device: torch.device) -> tuple[float, float, float]:
    """Eager ops of the rollout (torch backend), one batch after a warm-up iteration: kernels
    (ops that are not views) per env step inside the steps, all aten ops per env step, and the
    kernels of the batch outside its steps (the per-batch draws and preparation, the bookkeeping)."""
    trainer = Trainer(config(str(device), "torch", 1))
    trainer.step()
    job = trainer.job
    inside, real_step = CountOps(), job.sampler._step

    def counted_step(*args):
        with inside:
            return real_step(*args)

    job.sampler._step = counted_step
    with torch.no_grad(), CountOps() as everything:
        batch = job.agent.collect(job.sampler, 1)
    steps = batch.actions.shape[0]
    trainer.close()

    def kernels(counts: Counter[str]) -> int:
        return sum(n for op, n in counts.items() if op not in VIEW_OPS)

    return (kernels(inside.counts) / steps, sum(inside.counts.values()) / steps,
            kernels(everything.counts) - kernels(inside.counts))


def syncs_per_iteration(device: torch.device) -> int:
    """Host reads in one whole iteration (torch backend): the job's ``to_host`` transfers plus
    every other op that reads a value back."""
    import steinrl.rl.job as job_module

    trainer = Trainer(config(str(device), "torch", 1))
    trainer.step()
    transfers, real = [], job_module.to_host
    job_module.to_host = lambda values: transfers.append(1) or real(values)
    try:
        with CountOps() as recorder:
            trainer.step()
    finally:
        job_module.to_host = real
    trainer.close()
    return len(transfers) + sum(n for op, n in recorder.counts.items() if op in SYNC_OPS)


def compiled_kernels(device: torch.device) -> int:
    """Kernels Inductor generates for the compiled rollout step (``rollout.compile``)."""
    from torch._inductor import metrics

    torch._dynamo.reset()
    metrics.reset()
    trainer = Trainer(config(str(device), "torch", 1, compile_=True))
    trainer.step()
    trainer.close()
    return metrics.generated_kernel_count


def training(device: torch.device, backend: str, iterations: int, compile_: bool = False) -> float:
    """Env steps/s of whole iterations (rollout + update) with one env backend."""
    trainer = Trainer(config(str(device), backend, iterations, compile_))
    trainer.step()  # warm-up
    sync(device)
    start, steps = time.perf_counter(), 0
    for _ in range(iterations):
        steps += round(trainer.step()["time/steps_per_particle"] * trainer.config.particles)
    sync(device)
    trainer.close()
    return steps / (time.perf_counter() - start)


def seed_batch(device: torch.device, seeds: int, iterations: int) -> float:
    """Aggregate env steps/s of ``seeds`` seeds trained as one batch."""
    batch = Trainer(config(str(device), "torch", iterations), list(range(seeds)))
    batch.step_seeds()
    rate = timed(batch, iterations, device)
    batch.close()
    return rate


def timed(trainer: Trainer, iterations: int, device: torch.device) -> float:
    """Env steps/s of ``iterations`` iterations of every seed of ``trainer``, the device synchronised."""
    sync(device)
    start, steps = time.perf_counter(), 0
    for _ in range(iterations):
        rows = trainer.step_seeds()
        steps += sum(round(r["time/steps_per_particle"] * trainer.config.particles) for r in rows)
    sync(device)
    return steps / (time.perf_counter() - start)


def raw_env(device: torch.device, num_envs: int, steps: int = 100, repeats: int = 3) -> float:
    """Best-repeat steps/s of the torch task alone (float32, random actions drawn beforehand)."""
    return torch_steps_per_s(ENV, num_envs, steps, repeats, device, torch.float32)


def copy_bandwidth(device: torch.device, nbytes: int = 1 << 30) -> float:
    """Bytes/s of the best of 5 device-to-device copies (read + write counted)."""
    src = torch.empty(nbytes // 4, device=device)
    src.fill_(1.0)
    dst = torch.empty_like(src)
    best = math.inf
    for _ in range(6):
        sync(device)
        start = time.perf_counter()
        dst.copy_(src)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() * 4 / best


def svgd_ms(device: torch.device, M: int, D: int, repeats: int) -> float:
    """Median milliseconds of one fused SVGD direction on (M, D) float32 particles."""
    gen = torch.Generator(device=device).manual_seed(0)
    theta = torch.randn((M, D), generator=gen, device=device)
    grad = torch.randn((M, D), generator=gen, device=device)
    times = []
    for _ in range(repeats + 1):
        sync(device)
        start = time.perf_counter()
        phi, _ = svgd_direction(theta, grad)
        sync(device)
        times.append(time.perf_counter() - start)
        del phi
    times = sorted(times[1:])
    return 1e3 * times[len(times) // 2]


def peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--iterations", type=int, default=10, help="timed iterations per training measurement")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--svgd-repeats", type=int, default=5)
    p.add_argument("--svgd-cpu-limit", type=float, default=3e8, help="on cpu, skip SVGD cases with M*D above this")
    p.add_argument("--full-svgd", action="store_true", help="run every SVGD case on cpu too")
    p.add_argument("--no-100", action="store_true", help="skip the 100-seed graphed row (run on cuda only)")
    args = p.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            sys.exit("error: --device cuda given but CUDA is not available here")
        name = torch.cuda.get_device_name(device)
    else:
        name = f"cpu-{torch.get_num_threads()}threads"
    print(f"torch {torch.__version__} on {device} ({name}); {ALGO} {ENV}, preset {PRESET}, M = 16, "
          f"5000 steps per particle; {args.iterations} timed iterations after one warm-up", flush=True)

    rates = {}
    for backend in ("numpy", "torch"):
        rates[backend] = training(device, backend, args.iterations)
        print(f"training, env_backend={backend:5s}: {rates[backend]:14,.0f} env steps/s "
              f"({80e6 / rates[backend]:7.1f} s per 1000 iterations)", flush=True)
    rates["torch, compiled"] = training(device, "torch", args.iterations, compile_=True)
    print(f"training, env_backend=torch, rollout.compile: {rates['torch, compiled']:14,.0f} env steps/s "
          f"({80e6 / rates['torch, compiled']:7.1f} s per 1000 iterations)", flush=True)
    paper = max(rates.values())
    kernels, ops, per_batch = step_ops(device)
    syncs = syncs_per_iteration(device)
    compiled = compiled_kernels(device)
    print(f"rollout step, eager: {kernels:.1f} kernels ({ops:.1f} aten ops, views included) per env step, "
          f"{per_batch} more per batch; "
          f"compiled: one graph of {compiled} generated kernels; host syncs per iteration: {syncs}", flush=True)
    env_one = raw_env(device, 16 * 50)
    env_many = raw_env(device, args.seeds * 16 * 50)
    print(f"raw torch env, {16 * 50:6d} envs: {env_one:14,.0f} steps/s", flush=True)
    print(f"raw torch env, {args.seeds * 16 * 50:6d} envs: {env_many:14,.0f} steps/s", flush=True)
    seeds_rate = seed_batch(device, args.seeds, max(2, args.iterations // 3))
    print(f"{args.seeds} seeds in one batch: {seeds_rate:14,.0f} env steps/s in all "
          f"({seeds_rate / paper:.2f}x one seed)", flush=True)
    eager_kernels = eager_launches(device)
    graph_rows, all_static = graphed_rows(device, args, eager_kernels)

    bandwidth = copy_bandwidth(device)
    print(f"device copy bandwidth: {bandwidth / 1e9:.1f} GB/s (read + write)", flush=True)
    big = (math.nan, math.nan)
    for M in (16, 256, 1024):
        for D in (10_000, 1_000_000):
            if device.type == "cpu" and args.svgd_cpu_limit < M * D and not args.full_svgd:
                print(f"svgd M={M:5d} D={D:9,d}: skipped on cpu (M*D > {args.svgd_cpu_limit:.0e}; --full-svgd runs it)")
                continue
            ms = svgd_ms(device, M, D, args.svgd_repeats)
            bound = 1e3 * 2 * M * D * 4 / bandwidth
            print(f"svgd M={M:5d} D={D:9,d}: {ms:10.2f} ms; bandwidth bound {bound:8.2f} ms "
                  f"(fraction {bound / ms:.3f}); matmuls {6 * M * M * D / ms / 1e6:8.1f} GFLOP/s", flush=True)
            if (M, D) == (1024, 1_000_000):
                big = (ms, bound / ms)
    peak = peak_memory_mb(device)
    print(f"peak {'device memory' if device.type == 'cuda' else 'RSS'}: {peak:.0f} MB")
    one = graph_rows.get(None, math.nan)
    print(f"gpu_throughput device={name.replace(' ', '_')} paper_steps_per_s={paper:.0f} "
          f"graph_steps_per_s={one:.0f} graph_1000_its_s={80e6 / one:.1f} "
          f"graph_seeds10_steps_per_s={graph_rows.get(args.seeds, math.nan):.0f} "
          f"graph_seeds100_steps_per_s={graph_rows.get(100, math.nan):.0f} eager_kernels_per_iteration={eager_kernels} "
          f"graph_static={int(all_static and bool(graph_rows))} "
          f"eager_ops_per_step={kernels:.1f} compiled_step_kernels={compiled} syncs_per_iteration={syncs} "
          f"seeds10_steps_per_s={seeds_rate:.0f} env_steps_per_s={env_one:.0f} fraction_of_env={paper / env_one:.3f} "
          f"svgd_m1024_d1e6_ms={big[0]:.2f} svgd_bound_fraction={big[1]:.3f} peak_mem_mb={peak:.0f}")


if __name__ == "__main__":
    main()
