#!/usr/bin/env python
"""What the best checkpoint's held-out evaluation costs, in iterations of the same run.

    python benchmarks/best_checkpoint_cost.py [--env CartpoleSwingUp] [--algo s2vgd-a2c] [--iterations 100]
        [--every 10] [--episodes 5]

Steps a Trainer with the task's defaults and, every ``--every`` iterations, times
:func:`steinrl.run.best.heldout_score` (``--episodes`` per particle), interleaved with the
iterations so that both see the same machine load. Last line:
``best_checkpoint_cost env=... iteration_s=... evaluation_s=... evaluation_iterations=... overhead_at_25=...%``
(``overhead_at_25``: the share added with the default ``run.best_every: 25``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import steinrl  # noqa: E402
from steinrl.run.best import heldout_score  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="CartpoleSwingUp")
    p.add_argument("--algo", default="s2vgd-a2c")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--every", type=int, default=10, help="iterations between timed evaluations")
    p.add_argument("--episodes", type=int, default=5, help="held-out episodes per particle")
    args = p.parse_args(argv)
    if min(args.iterations, args.every, args.episodes) < 1 or args.every > args.iterations:
        p.error("--iterations, --every and --episodes must be >= 1, --every at most --iterations")
    cfg = steinrl.load_config(algo=args.algo, env=args.env, overrides={"iterations": args.iterations})
    trainer = steinrl.Trainer(cfg)
    step_s, eval_s = [], []
    while not trainer.done:
        t0 = time.perf_counter()
        trainer.step()
        step_s.append(time.perf_counter() - t0)
        if trainer.iteration % args.every == 0:
            t0 = time.perf_counter()
            heldout_score(trainer, 0, args.episodes)
            eval_s.append(time.perf_counter() - t0)
    trainer.close()
    it, ev = sum(step_s) / len(step_s), sum(eval_s) / len(eval_s)
    print(f"{args.env} {cfg.algo} M={cfg.particles}: {len(step_s)} iterations, {len(eval_s)} held-out evaluations "
          f"of {args.episodes} episodes per particle")
    print(f"best_checkpoint_cost env={args.env} iteration_s={it:.3f} evaluation_s={ev:.3f} "
          f"evaluation_iterations={ev / it:.2f} overhead_at_25={100 * ev / it / 25:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
