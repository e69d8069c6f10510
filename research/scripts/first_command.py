"""The README's first command over several seeds: what a new user should expect it to print.

    python research/scripts/first_command.py              # s2vgd-a2c on CartpoleSwingUp, seeds 0-9, 2 at a time
    python research/scripts/first_command.py --algo svgd-a2c --seeds 0,1,2 --jobs 1

Runs ``python train.py --algo ALGO --env ENV --seed S --no-progress`` once per seed (``--jobs``
at a time, each at the config's ``run.threads``, 1 by default; ``--set`` passes config keys on,
e.g. ``critic.overlap=false`` to hold each run to one thread when two share two cores: it
changes no number), into a temporary log directory, and reads each run's end line
``done: ... final F, best B (rollout/ep_rew_max_particle) ...``. Prints a line per seed, then::

    first_command algo=<A> env=<E> seeds=<n> final_median=… final_min=… final_max=… best_median=…
        best_min=… best_max=… best_at_least_<T>=<k>/<n> seconds_median=… seconds_max=…

(one line; ``T``: ``--threshold``, default SVPG's 405 on the swing-up). ``seconds``: each
run's wall time, start to exit, with ``--jobs`` runs sharing the machine.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository (research/scripts/../..)
sys.path.insert(0, str(ROOT))

from steinrl.errors import ConfigError  # noqa: E402
from steinrl.run.cli_base import Parser, run_cli  # noqa: E402

END = re.compile(r"^done: .*; final (?P<final>-?[\d.]+), best (?P<best>-?[\d.]+) \(")


def run_seed(algo: str, env: str, seed: int, sets: list[str], logdir: str) -> dict:
    """One run of the first command with ``--seed seed``; its final and best returns and wall seconds."""
    cmd = [sys.executable, str(ROOT / "train.py"), "--algo", algo, "--env", env, "--seed", str(seed),
           "--no-progress", "--logdir", logdir, "--run-name", f"seed{seed}", *(a for s in sets for a in ("--set", s))]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    line = next((ln for ln in proc.stderr.splitlines() if END.match(ln)), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"seed {seed}: exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    m = END.match(line)
    return {"seed": seed, "final": float(m["final"]), "best": float(m["best"]), "seconds": seconds, "line": line}


def main(argv: list[str] | None = None) -> int:
    p = Parser(prog="research/scripts/first_command.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--algo", default="s2vgd-a2c")
    p.add_argument("--env", default="CartpoleSwingUp")
    p.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9", help="comma-separated seeds (default 0-9)")
    p.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    p.add_argument("--threshold", type=float, default=405.0, help="count the seeds whose best reaches this")
    p.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE",
                   help="config key passed to every run (repeatable)")
    args = p.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        raise ConfigError(f"--seeds takes integers separated by commas, got {args.seeds!r}") from None
    if args.jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {args.jobs}")
    with tempfile.TemporaryDirectory(prefix="first_command_") as logdir, ThreadPoolExecutor(args.jobs) as pool:
        rows = []
        for row in pool.map(lambda s: run_seed(args.algo, args.env, s, args.sets, logdir), seeds):
            print(f"seed {row['seed']}: {row['line']} ({row['seconds']:.0f} s wall)", flush=True)
            rows.append(row)
    finals, bests, secs = ([r[k] for r in rows] for k in ("final", "best", "seconds"))
    reached = sum(b >= args.threshold for b in bests)
    print(f"first_command algo={args.algo} env={args.env} seeds={len(rows)} "
          f"final_median={statistics.median(finals):.1f} final_min={min(finals):.1f} final_max={max(finals):.1f} "
          f"best_median={statistics.median(bests):.1f} "
          f"best_min={min(bests):.1f} best_max={max(bests):.1f} best_at_least_{args.threshold:g}={reached}/{len(rows)} "
          f"seconds_median={statistics.median(secs):.0f} seconds_max={max(secs):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
