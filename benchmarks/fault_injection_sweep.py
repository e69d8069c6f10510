#!/usr/bin/env python
"""The sweep driver under ``kill -9``: ``benchmarks/fault_injection.py --kinds sweep``.

    python benchmarks/fault_injection_sweep.py [--trials 3] [--seed 0] [--out DIR] [--source DIR]

The spec is configs/sweeps/smoke.yaml (2 algorithms x 2 seeds on Cartpole, tiny batches)
with 24 iterations and a checkpoint every 2. One uninterrupted sweep is the reference.
Each trial starts ``steinrl sweep SPEC --out DIR``, waits until its trials have written a
random number of checkpoints between them (1 .. 40 of 48) plus a random delay of up to
0.2 s, kills the driver with SIGKILL, waits up to 60 s for the Ray processes it started
to go (those still running then are counted as orphans and killed), and runs the same
command again.

A trial is correct when the second command exits 0 and its ``results.csv`` has every
(algo, env, seed, iteration) of the reference once (no duplicate, no missing row) with
the reference's values in every column but the timings (``wall_s``, ``time/*``) and the
Ray trial id. One line per trial, then
``fault_injection_sweep trials=<n> exact=<k> duplicate_rows=<d> missing_rows=<m> orphan_processes=<p>``.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from fault_injection_runs import Verdict  # benchmarks/, beside this file

ROOT = Path(__file__).resolve().parent.parent
STEPS, TRIALS, EVERY = 24, 4, 2  # iterations per sweep trial, sweep trials (2 algos x 2 seeds), checkpoint every
TIMEOUT = 900.0


@dataclass
class SweepTrial(Verdict):
    index: int
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    duplicates: int = 0
    missing: int = 0
    orphans: int = 0

    def label(self) -> str:
        return f"sweep  SIGKILL {self.index:02d}"


def write_spec(path: Path) -> Path:
    spec = yaml.safe_load((ROOT / "configs" / "sweeps" / "smoke.yaml").read_text())
    spec.update(iterations=STEPS, checkpoint_every=EVERY, num_cpus=2)
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def command(spec: Path, out: Path) -> list[str]:
    return [sys.executable, "-c", "from steinrl.run.cli import main; main()", "sweep", str(spec), "--out", str(out)]


def child_env(source: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(source), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=path)


def checkpoints(out: Path) -> int:
    """Checkpoints the sweep's trials have written so far: per trial, its newest checkpoint's
    index + 1 (Ray numbers them checkpoint_000000, checkpoint_000001, ...)."""
    newest: dict[Path, int] = {}
    for path in out.glob("ray/*/*/checkpoint_*"):
        index = path.name.removeprefix("checkpoint_")
        if index.isdigit():
            newest[path.parent] = max(newest.get(path.parent, -1), int(index))
    return sum(i + 1 for i in newest.values())


def session_processes(sid: int) -> list[int]:
    """Live processes of session ``sid`` (the killed driver's session: Ray's processes it started)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # fields after the name: state, ppid, pgrp, session
            pids.append(int(stat.parent.name))
    return pids


def table(out: Path) -> tuple[dict[tuple, dict[str, str]], collections.Counter]:
    """results.csv as (algo, env, seed, iteration) -> the columns that do not measure time, and
    how often each key occurs."""
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    keys = [(r["algo"], r["env"], r["seed"], r["iteration"]) for r in rows]
    values = {k: {c: v for c, v in r.items() if not c.startswith("time/") and c not in ("wall_s", "trial_id")}
              for k, r in zip(keys, rows)}
    return values, collections.Counter(keys)


def kill_once(trial: SweepTrial, spec: Path, out: Path, source: Path, rng: random.Random) -> None:
    """Start the sweep, SIGKILL its driver mid-trial, wait for its Ray processes to go."""
    target, delay = rng.randint(1, STEPS // EVERY * TRIALS - 8), rng.uniform(0.0, 0.2)
    trial.notes.append(f"kill@checkpoints={target}+{delay * 1e3:.0f}ms")
    with open(out.parent / f"{out.name}.log", "ab") as log:
        proc = subprocess.Popen(command(spec, out), stdout=log, stderr=subprocess.STDOUT, cwd=source,
                                env=child_env(source), start_new_session=True)
    t0 = time.monotonic()
    while proc.poll() is None and checkpoints(out) < target and time.monotonic() - t0 < TIMEOUT:
        time.sleep(0.02)
    time.sleep(delay)
    if proc.poll() is not None:
        trial.problems.append(f"the sweep ended (exit {proc.returncode}) before the kill point")
        return
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    trial.notes.append(f"killed_at={checkpoints(out)}")
    deadline = time.monotonic() + 60
    while session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = session_processes(proc.pid)
    if left:  # Ray's agents outliving the driver they serve: counted and killed, not a failure of the sweep
        trial.orphans = len(left)
        names = sorted({_name(pid) for pid in left})
        trial.notes.append(f"orphans={len(left)}({','.join(names)}; killed)")
        os.killpg(proc.pid, signal.SIGKILL)


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace").split("/")[-1]
    except OSError:
        return "?"


def check(trial: SweepTrial, out: Path, ref: dict[tuple, dict[str, str]]) -> None:
    """The finished sweep's results.csv against the uninterrupted reference."""
    try:
        values, counts = table(out)
    except (OSError, KeyError) as exc:
        trial.problems.append(f"no readable results.csv: {exc}")
        return
    trial.duplicates = sum(n - 1 for n in counts.values())
    trial.missing = len(set(ref) - set(values))
    differ = [k for k in ref if k in values and values[k] != ref[k]]
    if trial.duplicates or trial.missing or differ or set(values) - set(ref):
        trial.problems.append(f"results.csv: {trial.duplicates} duplicate rows, {trial.missing} missing, "
                              f"{len(differ)} differing from the reference, {len(set(values) - set(ref))} extra")
    else:
        trial.notes.append(f"results=exact({len(values)} rows)")


def restored(out: Path) -> int:
    """Trials that went on from a checkpoint in the second command (their result.json says so)."""
    count = 0
    for path in out.glob("ray/*/*/result.json"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        count += any(r.get("iterations_since_restore") == 1 and r.get("training_iteration", 0) > 1 for r in rows)
    return count


def sweep_trials(n: int, seed: int, base: Path, source: Path = ROOT) -> list[SweepTrial]:
    """``n`` kill -9 trials of ``steinrl sweep`` under ``base`` (a reference sweep first)."""
    base.mkdir(parents=True, exist_ok=True)
    spec = write_spec(base / "spec.yaml")
    t0 = time.monotonic()
    proc = subprocess.run(command(spec, base / "reference"), capture_output=True, text=True, cwd=source,
                          env=child_env(source), timeout=TIMEOUT)
    if proc.returncode != 0:
        raise SystemExit(f"the reference sweep failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    ref, _ = table(base / "reference")
    print(f"reference sweep: {len(ref)} rows in {time.monotonic() - t0:.0f} s; sweeps under {base}", flush=True)
    done = []
    for i in range(n):
        trial, out = SweepTrial(i), base / f"kill-{i:02d}"
        kill_once(trial, spec, out, source, random.Random(f"{seed}/sweep/{i}"))
        if trial.ok:
            again = subprocess.run(command(spec, out), capture_output=True, text=True, cwd=source,
                                   env=child_env(source), timeout=TIMEOUT)
            with open(out.parent / f"{out.name}.log", "a") as log:
                log.write(f"\n$ the same command again\n{again.stdout}{again.stderr}[exit {again.returncode}]\n")
            trial.notes.append(f"again={again.returncode}" + (" (continued)" if "continuing" in again.stderr else ""))
            if again.returncode != 0:
                trial.problems.append(f"the same command again exited {again.returncode}: "
                                      f"{again.stderr.strip().splitlines()[-1:]}")
            if "Traceback" in again.stderr:
                trace = [line for line in again.stderr.splitlines() if line.strip()][-1:]
                trial.problems.append(f"the same command again printed a traceback ({trace[0][:200] if trace else ''})")
            trial.notes.append(f"restored_trials={restored(out)}")
            check(trial, out, ref)
        print(trial.line(), flush=True)
        done.append(trial)
    return done


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=3, help="kill -9 trials")
    p.add_argument("--seed", type=int, default=0, help="seed of the random kill points")
    p.add_argument("--out", help="working directory (default: a temporary one, deleted)")
    p.add_argument("--source", help="the tree whose steinrl runs (default: this repository)")
    args = p.parse_args(argv)
    if args.trials < 1:
        p.error("--trials must be >= 1")
    source = Path(args.source).resolve() if args.source else ROOT
    if not (source / "steinrl").is_dir():
        p.error(f"--source {args.source} has no steinrl package")
    tmp = None if args.out else tempfile.mkdtemp(prefix="steinrl-fault-sweep-")
    try:
        done = sweep_trials(args.trials, args.seed, Path(args.out or tmp), source)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"fault_injection_sweep trials={len(done)} exact={sum(t.ok for t in done)} "
          f"duplicate_rows={sum(t.duplicates for t in done)} missing_rows={sum(t.missing for t in done)} "
          f"orphan_processes={sum(t.orphans for t in done)}", flush=True)
    return 0 if all(t.ok for t in done) else 1


if __name__ == "__main__":
    sys.exit(main())
