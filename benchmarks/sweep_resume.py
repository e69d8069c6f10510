#!/usr/bin/env python
"""A sweep interrupted with Ctrl-C and started again continues from its trials' checkpoints.

    python benchmarks/sweep_resume.py                 # 2 algos x 2 seeds x 40 iterations on Cartpole
    python benchmarks/sweep_resume.py --iterations 60 --out /tmp/sweep_resume

Runs the same small spec (configs/sweeps/smoke.yaml with ``--iterations`` iterations and a
checkpoint every 5) three times with ``steinrl sweep``: once straight through; once sent
SIGINT (as Ctrl-C does) as soon as two checkpoints exist, which must exit 130; and once
more with the same command, which must continue (Ray's ``Tuner.restore``) and exit 0. It
then checks, from the interrupted sweep's own per-trial ``result.json``, which trials were
restored from a checkpoint and at which iteration they went on, and that its
``results.csv`` equals the straight sweep's in every column but the timings. The last line
is a summary.
"""

from __future__ import annotations

import argparse
import csv
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COMMAND = [sys.executable, "-c", "from steinrl.run.cli import main; main()", "sweep"]


def sweep(spec: Path, out: Path, interrupt_after_checkpoints: int = 0) -> tuple[int, float, str]:
    """Run ``steinrl sweep spec --out out``; with ``interrupt_after_checkpoints``, send SIGINT once
    that many checkpoints exist. Returns the exit code, the wall time and stderr."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([*COMMAND, str(spec), "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    if interrupt_after_checkpoints:
        while proc.poll() is None and len(list(out.glob("ray/*/*/checkpoint_*"))) < interrupt_after_checkpoints:
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=900)
    return proc.returncode, time.perf_counter() - t0, err


def restored_at(out: Path) -> dict[str, int]:
    """Trial directory -> the iteration it went on from after a restore (from its result.json)."""
    found = {}
    for path in sorted(out.glob("ray/*/*/result.json")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        resumed = [r["training_iteration"] for r in rows if r["iterations_since_restore"] == 1
                   and r["training_iteration"] > 1]
        if resumed:
            found[path.parent.name] = resumed[-1]
    return found


def table(out: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    """results.csv as (algo, seed, iteration) -> the columns that do not measure time."""
    with open(out / "results.csv") as f:
        return {(r["algo"], r["seed"], r["iteration"]): {
            k: v for k, v in r.items() if not k.startswith("time/") and k not in ("wall_s", "trial_id")}
            for r in csv.DictReader(f)}


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=40, help="iterations per trial")
    p.add_argument("--out", help="working directory (default: a temporary one)")
    args = p.parse_args()
    work = Path(args.out or tempfile.mkdtemp(prefix="sweep_resume-"))
    work.mkdir(parents=True, exist_ok=True)
    spec = yaml.safe_load((ROOT / "configs" / "sweeps" / "smoke.yaml").read_text())
    spec.update(iterations=args.iterations, checkpoint_every=5)
    (work / "resume.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))

    straight = sweep(work / "resume.yaml", work / "straight")
    print(f"straight: exit {straight[0]} in {straight[1]:.0f} s", flush=True)
    first = sweep(work / "resume.yaml", work / "interrupted", interrupt_after_checkpoints=2)
    print(f"interrupted: exit {first[0]} in {first[1]:.0f} s; {first[2].strip().splitlines()[-1]}", flush=True)
    again = sweep(work / "resume.yaml", work / "interrupted")
    print(f"again: exit {again[0]} in {again[1]:.0f} s", flush=True)
    resumed = restored_at(work / "interrupted")
    for name, iteration in resumed.items():
        print(f"  {name}: restored from its checkpoint, went on at iteration {iteration}")
    a, b = table(work / "straight"), table(work / "interrupted")
    same = a == b and len(a) == 4 * args.iterations
    ok = straight[0] == 0 and first[0] == 130 and again[0] == 0 and "continuing" in again[2] and resumed and same
    print(f"sweep_resume {'ok' if ok else 'FAILED'}: SIGINT -> exit {first[0]}, same command again -> exit "
          f"{again[0]}, {len(resumed)} trials continued from checkpoints (at iterations "
          f"{', '.join(map(str, resumed.values())) or '-'}), {len(b)} rows "
          f"{'identical to' if same else 'DIFFERENT from'} the uninterrupted sweep's (timings aside); in {work}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
