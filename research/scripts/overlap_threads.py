#!/usr/bin/env python
"""``critic.overlap`` at torch's thread count: seconds per iteration of ``svgd-a2c`` on the
swing-up (fast preset and paper mode) with the critic's regression after the policy update
and beside it, alternated, at ``--threads`` torch threads (default: torch's own, one per core).

    python research/scripts/overlap_threads.py [--threads N] [--window 20] [--rounds 3]

Last line: ``overlap_threads threads=<n> fast_off_s=<s> fast_on_s=<s> paper_off_s=<s>
paper_on_s=<s>``, the medians over the rounds of seconds per 1000 iterations (extrapolated
from ``--window`` iterations after one warm-up).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from steinrl.run.config import load_config
from steinrl.run.trainer import Trainer


def seconds_per_1000(preset: str, overlap: bool, window: int, threads: int) -> float:
    trainer = Trainer(load_config("svgd-a2c", "CartpoleSwingUp", {"iterations": 1000, "critic.overlap": overlap,
                                                                   "run.progress": False, "run.threads": threads},
                                  preset=preset))
    trainer.step()
    t0 = time.perf_counter()
    for _ in range(window):
        trainer.step()
    seconds = time.perf_counter() - t0
    trainer.close()
    return seconds / window * 1000


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--window", type=int, default=20, help="timed iterations per measurement")
    p.add_argument("--rounds", type=int, default=3, help="alternated rounds")
    args = p.parse_args()
    threads = torch.get_num_threads() if args.threads is None else args.threads  # the Trainer sets run.threads
    times: dict[str, list[float]] = {}
    for r in range(args.rounds):
        for mode, preset in (("fast", "fast"), ("paper", "paper")):
            for overlap in (False, True):
                s = seconds_per_1000(preset, overlap, args.window, threads)
                times.setdefault(f"{mode}_{'on' if overlap else 'off'}_s", []).append(s)
                print(f"round {r + 1}: {mode}, overlap {'on ' if overlap else 'off'}: {s:.1f} s per 1000 iterations",
                      flush=True)
    print(f"overlap_threads threads={threads} "
          + " ".join(f"{k}={statistics.median(v):.1f}" for k, v in sorted(times.items())))


if __name__ == "__main__":
    main()
