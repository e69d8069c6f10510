#!/usr/bin/env python
"""Raw stepping speed of the torch control tasks (``steinrl.envs.torch_tasks``), env steps/s.

Usage::

    python benchmarks/env_torch_throughput.py [--device cpu|cuda] [--dtype float32|float64]
        [--num-envs 160,4096,65536] [--steps 100] [--repeats 3] [--tasks CartpoleSwingUp,...]

Only ``step()`` is timed (actions uniform in [-1, 1], pre-generated on the device; with
autoresets, episodes of 500 steps): ``num_envs * steps / seconds`` of the fastest of
``--repeats`` repeats after one warm-up repeat; on CUDA the device is synchronised before the
clock stops. On cpu the numpy vector env (``steinrl.envs.make_vec``) is timed the same way
for comparison. torch uses its default intra-op threads (``--threads`` to set them).

Last line (machine-readable): ``env_torch_throughput device=<d> steps_per_s=<x>
task=<name> num_envs=<n> dtype=<dtype>``, ``x`` for the first task at the largest batch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import steinrl.envs as envs  # noqa: E402
from steinrl.envs.torch_tasks import TORCH_TASKS, make_torch_vec  # noqa: E402


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def torch_steps_per_s(name: str, num_envs: int, steps: int, repeats: int, device: torch.device,
                      dtype: torch.dtype) -> float:
    """Best-repeat env steps/s of the torch task ``name`` with ``num_envs`` envs."""
    task = make_torch_vec(name, num_envs, device=device, dtype=dtype)
    task.reset(seed=0)
    gen = torch.Generator(device=device).manual_seed(1)
    actions = torch.rand((steps, num_envs), generator=gen, device=device, dtype=dtype).mul_(2).sub_(1)
    best = 0.0
    for repeat in range(repeats + 1):  # the first repeat warms up
        _synchronize(device)
        start = time.perf_counter()
        for t in range(steps):
            task.step(actions[t])
        _synchronize(device)
        if repeat:
            best = max(best, num_envs * steps / (time.perf_counter() - start))
    return best


def numpy_steps_per_s(name: str, num_envs: int, steps: int, repeats: int) -> float:
    """Best-repeat env steps/s of the numpy vector env ``name`` (same protocol)."""
    vec = envs.make_vec(name, num_envs)
    vec.reset(seed=0)
    actions = np.random.default_rng(1).uniform(-1.0, 1.0, (steps, num_envs, 1)).astype(np.float32)
    best = 0.0
    for repeat in range(repeats + 1):
        start = time.perf_counter()
        for t in range(steps):
            vec.step(actions[t])
        if repeat:
            best = max(best, num_envs * steps / (time.perf_counter() - start))
    return best


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--num-envs", default="160,4096,65536", help="comma-separated batch sizes")
    p.add_argument("--steps", type=int, default=100, help="steps per repeat")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tasks", default="CartpoleSwingUp,DoublePendulum,CartpoleSwingUpRllab",
                   help=f"comma-separated subset of {','.join(TORCH_TASKS)}")
    p.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's)")
    args = p.parse_args()

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda given but CUDA is not available")
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    sizes = [int(s) for s in args.num_envs.split(",")]
    tasks = [t.strip() for t in args.tasks.split(",")]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{torch.get_num_threads()} threads"
    print(f"torch {torch.__version__} on {device} ({name}), {args.dtype}, {args.steps} steps, "
          f"best of {args.repeats}")
    summary = None
    for task in tasks:
        for n in sizes:
            sps = torch_steps_per_s(task, n, args.steps, args.repeats, device, dtype)
            line = f"  {task:22s} num_envs={n:7d}: torch {sps:14,.0f} steps/s"
            if device.type == "cpu":
                line += f"   (numpy vector env {numpy_steps_per_s(task, n, args.steps, args.repeats):14,.0f})"
            print(line)
            if summary is None and n == max(sizes):
                summary = (f"env_torch_throughput device={device.type} steps_per_s={sps:.0f} task={task} "
                           f"num_envs={n} dtype={args.dtype}")
    print(summary)


if __name__ == "__main__":
    main()
