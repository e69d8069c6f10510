#!/usr/bin/env python
"""Fault injection: kill ``train.py`` (RL and bandit runs) and ``steinrl sweep`` at random
points and check that resuming loses nothing.

    python benchmarks/fault_injection.py [--kinds rl,bandit,sweep] [--trials 10] [--sweep-trials 3]
        [--seed 0] [--jobs 2] [--logdir DIR] [--source DIR]

``--source`` runs the ``train.py`` (and ``steinrl``) of another tree, e.g. a snapshot of a
commit (``git archive HEAD | tar -x -C /tmp/snap``) while the working tree is being edited:
the reference run and the trials must all run the same code.

Each trial of a kind of run trains a tiny run in its own run directory — ``rl``: Cartpole,
s2vgd-a2c, 2 particles, 12 iterations; ``bandit``: Wheel, svgd-ts, 3 particles, 120 rounds
refitted every 10 (12 steps); both with a checkpoint every 2 steps and TensorBoard on —,
kills it with SIGKILL, SIGTERM or SIGINT (``--trials`` of each) and resumes it with
``--resume RUN --iterations 12`` (``--rounds 120``). The ``sweep`` kind
(:mod:`fault_injection_sweep`, ``--sweep-trials`` trials) kills ``steinrl sweep`` with
SIGKILL while its trials run and starts the same command again.

Kill points (drawn from ``--seed``): wait until ``metrics.jsonl`` holds a random number
of rows (0..11; 0 = as soon as the run's ``config.yaml`` exists, i.e. the signal handlers
are installed), then a random delay of up to ~1 iteration; a third of the delays are
under 3 ms so that kills also land while the checkpoint written right after the row is
being saved. Every fifth SIGKILL trial instead kills the process at a random time during
start-up (before the run directory or its config exist).

A trial is correct when

* the killed process exits 143 (SIGTERM), 130 (SIGINT) or -9 (SIGKILL); a signal that
  lands after the last iteration finished may also give 0 (the run is complete);
* ``--resume`` exits 0; or, when no checkpoint was ever written, exits 2 with one line
  saying ``has no checkpoint.pt`` (``has no config.yaml`` when killed before the config
  was written) and then the same command as the first one finishes the run (exit 0); or,
  when the run had already finished, exits 2 saying the run ``is done (12 iterations)``;
* no ``*.tmp`` file is left in the run directory;
* the run's ``metrics.jsonl`` rows without ``time/*`` keys equal those of one
  uninterrupted reference run (same seed and config), byte for byte as JSON;
* TensorBoard's headline metric (``rollout/ep_rew_max_particle``, ``bandit/cumulative_regret``;
  read with ``EventAccumulator``) has the steps 0..11, each once, with the reference's values.

A run killed before its first checkpoint whose fresh start is refused (``already holds
a run``) is counted as *stuck* (not correct); the benchmark then deletes the directory
and starts it again so that the remaining checks still run.

One line per trial, then a last line:
``fault_injection trials=<n> exact_resumes=<k> orphans=<tmp files left> duplicate_steps=<duplicated TB steps>
sweep_trials=<n> sweep_exact=<k> seed=<seed> failing=none`` (the sweep's figures with the ``sweep`` kind);
with failures, ``failing=[...]`` names each failing trial, ``|``-separated:
``<kind>/<signal>/<kill point>/seed=<seed>/trial=<index>: <what>``, where ``<what>`` is the first
differing metric (``metric KEY iteration I: resumed X, straight Y``, or the first differing
TensorBoard step) and any other problem (an exit code, a leftover file).
Exit code 0 if every trial is correct, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fault_injection_runs as runs  # benchmarks/, beside this file
from fault_injection_runs import KINDS, STEPS, Trial, fault_trial, reference


# --- main ----------------------------------------------------------------------------------
def run_trials(kinds: list[str], signals: list[signal.Signals], args: argparse.Namespace, base: Path) -> list[Trial]:
    """Every trial of the run kinds (a reference run each first), ``args.jobs`` at a time."""
    refs = {}
    for name in kinds:
        refs[name] = reference(base / f"reference-{name}", KINDS[name])
        print(f"reference {name}: {STEPS} steps, start-up {refs[name].startup_s:.1f} s, "
              f"{refs[name].iteration_s * 1e3:.0f} ms/step; code {runs.SOURCE}; run directories under {base}",
              flush=True)
    trials = [Trial(name, i, sig, args.seed) for name in kinds for sig in signals for i in range(args.trials)]
    lock = threading.Lock()

    def go(trial: Trial) -> Trial:
        try:
            fault_trial(trial, base / f"{trial.kind}-{trial.sig.name.lower()}-{trial.index:02d}", refs[trial.kind])
        except Exception as exc:  # noqa: BLE001 - a crashed trial is a failed trial
            trial.problems.append(f"benchmark error: {type(exc).__name__}: {exc}")
        with lock:
            print(trial.line(), flush=True)
        return trial

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        return list(pool.map(go, trials))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    p.add_argument("--kinds", default="rl,bandit,sweep", help="comma-separated: rl, bandit (train.py runs), sweep")
    p.add_argument("--trials", type=int, default=10,
                   help="trials per kind of run and signal (SIGKILL, SIGTERM, SIGINT)")
    p.add_argument("--sweep-trials", type=int, default=3, help="kill -9 trials of steinrl sweep")
    p.add_argument("--seed", type=int, default=0, help="seed of the random kill points")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="trials run at the same time")
    p.add_argument("--logdir", help="where the run directories go (default: a temporary directory, deleted)")
    p.add_argument("--signals", default="KILL,TERM,INT", help="comma-separated signals to inject")
    p.add_argument("--source", help="the tree whose train.py to run (default: this repository)")
    args = p.parse_args(argv)
    if args.source:
        source = Path(args.source).resolve()
        if not (source / "train.py").is_file():
            p.error(f"--source {args.source} has no train.py")
        runs.set_source(source)
    args.kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not args.kinds or set(args.kinds) - {*KINDS, "sweep"}:
        p.error(f"--kinds takes a comma-separated subset of rl, bandit, sweep; got {','.join(args.kinds)}")
    if args.trials < 1 or args.jobs < 1 or args.sweep_trials < 1:
        p.error("--trials, --sweep-trials and --jobs must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signals = [signal.Signals["SIG" + s.strip().upper().removeprefix("SIG")] for s in args.signals.split(",")]
    tmp = None if args.logdir else tempfile.mkdtemp(prefix="steinrl-fault-")
    base = Path(args.logdir or tmp)
    base.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.monotonic()
        run_kinds = [k for k in args.kinds if k in KINDS]
        done = run_trials(run_kinds, signals, args, base) if run_kinds else []
        sweeps = []
        if "sweep" in args.kinds:
            from fault_injection_sweep import sweep_trials

            sweeps = sweep_trials(args.sweep_trials, args.seed, base / "sweep", runs.SOURCE)
        exact = sum(t.ok for t in done)
        stuck = sum(t.stuck for t in done)
        print(f"{len(done) + len(sweeps)} trials in {time.monotonic() - t0:.0f} s; stuck (no checkpoint, fresh start "
              f"refused): {stuck}; failed: {len(done) - exact + sum(not t.ok for t in sweeps)}", flush=True)
        failing = [t.failure() for t in [*done, *sweeps] if not t.ok]
        print(f"fault_injection trials={len(done)} exact_resumes={exact} orphans={sum(t.orphans for t in done)} "
              f"duplicate_steps={sum(t.duplicates for t in done)} sweep_trials={len(sweeps)} "
              f"sweep_exact={sum(t.ok for t in sweeps)} seed={args.seed} "
              f"failing={'[' + ' | '.join(failing) + ']' if failing else 'none'}", flush=True)
        return 0 if exact == len(done) and all(t.ok for t in sweeps) else 1
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
