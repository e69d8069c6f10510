#!/usr/bin/env python
"""Fault injection: kill ``train.py`` at random points and check that resuming loses nothing.

    python benchmarks/fault_injection.py [--trials 10] [--seed 0] [--jobs 2] [--logdir DIR] [--source DIR]

``--source`` runs the ``train.py`` (and ``steinrl``) of another tree, e.g. a snapshot of a
commit (``git archive HEAD | tar -x -C /tmp/snap``) while the working tree is being edited:
the reference run and the trials must all run the same code.

Each trial trains a tiny Cartpole run (2 particles, 12 iterations, a checkpoint every 2
iterations, TensorBoard on) in its own run directory, kills it with SIGKILL, SIGTERM or
SIGINT (``--trials`` of each) and resumes it with ``--resume RUN --iterations 12``.

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
  when the run had already finished, exits 2 with ``already has 12 iterations``;
* no ``*.tmp`` file is left in the run directory;
* the run's ``metrics.jsonl`` rows without ``time/*`` keys equal those of one
  uninterrupted reference run (same seed and config), byte for byte as JSON;
* TensorBoard's ``rollout/ep_rew_max_particle`` (read with ``EventAccumulator``) has the
  steps 0..11, each once, with the reference's values.

A run killed before its first checkpoint whose fresh start is refused (``already holds
a run``) is counted as *stuck* (not correct); the benchmark then deletes the directory
and starts it again so that the remaining checks still run.

One line per trial, then a last line:
``fault_injection trials=<n> exact_resumes=<k> orphans=<tmp files left> duplicate_steps=<duplicated TB steps>``.
Exit code 0 if every trial is correct, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT  # the tree whose train.py runs (--source)
ENV, ALGO, ITERATIONS, RUN_NAME = "Cartpole", "s2vgd-a2c", 12, "r"
TAG = "rollout/ep_rew_max_particle"
TRAIN_ARGS = ["--env", ENV, "--particles", "2", "--set", "envs_per_particle=2", "--set", "batch_size=30",
              "--set", "horizon=30", "--set", "critic.steps=2", "--set", "run.checkpoint_every=2",
              "--set", "run.tensorboard=true", "--iterations", str(ITERATIONS), "--no-progress"]
EXPECTED_CODE = {signal.SIGKILL: -signal.SIGKILL, signal.SIGTERM: 143, signal.SIGINT: 130}
TIMEOUT = 300.0


# --- helpers -----------------------------------------------------------------------------
def run_path(root: Path) -> Path:
    return root / ENV / ALGO / RUN_NAME


def train_command(root: Path) -> list[str]:
    return [sys.executable, str(SOURCE / "train.py"), *TRAIN_ARGS, "--logdir", str(root), "--run-name", RUN_NAME]


def resume_command(run: Path) -> list[str]:
    return [sys.executable, str(SOURCE / "train.py"), "--resume", str(run), "--iterations", str(ITERATIONS),
            "--no-progress"]


def child_env() -> dict[str, str]:
    """The children import steinrl from :data:`SOURCE` (not an installed copy)."""
    path = os.pathsep.join(p for p in (str(SOURCE), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=path)


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    """Start ``cmd`` in its own session (a Ctrl-C of the benchmark does not reach it), output to ``log``."""
    with open(log, "ab") as f:
        return subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=SOURCE, env=child_env(),
                                start_new_session=True)


def run(cmd: list[str], log: Path) -> tuple[int, str]:
    """Run ``cmd`` to the end; its exit code and its output (also appended to ``log``)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=SOURCE, env=child_env(), timeout=TIMEOUT,
                          start_new_session=True)
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}[exit {proc.returncode}]\n")
    return proc.returncode, proc.stderr


def count_rows(run_dir: Path) -> int:
    try:
        return (run_dir / "metrics.jsonl").read_bytes().count(b"\n")
    except OSError:
        return 0


def metric_rows(run_dir: Path) -> list[str]:
    """The run's rows without ``time/*`` keys, as canonical JSON (NaN compares equal to NaN)."""
    rows = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows.append(json.dumps({k: v for k, v in row.items() if not k.startswith("time/")}, sort_keys=True))
    return rows


def tb_scalars(run_dir: Path) -> list[tuple[int, float]]:
    import logging

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # "Purging expired events" after a resume is expected

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    if TAG not in acc.Tags().get("scalars", []):
        return []
    return [(e.step, e.value) for e in acc.Scalars(TAG)]


def tmp_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("*.tmp")) if run_dir.is_dir() else []


# --- the reference -----------------------------------------------------------------------
@dataclass
class Reference:
    rows: list[str]
    scalars: list[tuple[int, float]]
    startup_s: float  # from the start of the process to its config.yaml
    iteration_s: float  # mean wall time of one iteration (rows apart)


def reference(root: Path) -> Reference:
    run_dir = run_path(root)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    proc = start(train_command(root), root / "output.log")
    startup = first_row = last_row = None
    while proc.poll() is None and time.monotonic() - t0 < TIMEOUT:
        if startup is None and (run_dir / "config.yaml").exists():
            startup = time.monotonic() - t0
        rows = count_rows(run_dir)
        if first_row is None and rows >= 1:
            first_row = time.monotonic()
        if last_row is None and rows >= ITERATIONS:
            last_row = time.monotonic()
        time.sleep(0.001)
    code = proc.wait(timeout=TIMEOUT)
    if code != 0:
        raise SystemExit(f"the reference run failed (exit {code}); see {root / 'output.log'}")
    rows = metric_rows(run_dir)
    if len(rows) != ITERATIONS:
        raise SystemExit(f"the reference run has {len(rows)} rows, expected {ITERATIONS}")
    iteration = (last_row - first_row) / (ITERATIONS - 1) if first_row is not None and last_row is not None \
        else 0.03
    return Reference(rows, tb_scalars(run_dir), startup or 3.0, max(iteration, 0.005))


# --- one trial -----------------------------------------------------------------------------
@dataclass
class Trial:
    index: int
    sig: signal.Signals
    seed: int
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    orphans: int = 0
    duplicates: int = 0
    stuck: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        status = "OK" if self.ok else "FAIL: " + "; ".join(self.problems)
        return f"trial {self.sig.name:7s} {self.index:02d} {' '.join(self.notes)} -> {status}"


def kill_plan(trial: Trial, ref: Reference) -> tuple[str, int | None, float]:
    """(description, rows to wait for or None for a start-up kill, delay in seconds)."""
    rng = random.Random(f"{trial.seed}/{trial.sig.name}/{trial.index}")
    if trial.sig == signal.SIGKILL and trial.index % 5 == 4:
        delay = rng.uniform(0.0, ref.startup_s)
        return f"kill@startup+{delay * 1e3:.0f}ms", None, delay
    rows = rng.randint(0, ITERATIONS - 1)
    delay = rng.uniform(0.0, 0.003) if rng.random() < 1 / 3 else rng.uniform(0.0, 1.2 * ref.iteration_s)
    return f"kill@rows={rows}+{delay * 1e3:.1f}ms", rows, delay


def fault_trial(trial: Trial, root: Path, ref: Reference) -> Trial:
    run_dir = run_path(root)
    root.mkdir(parents=True, exist_ok=True)
    log = root / "output.log"
    plan, rows, delay = kill_plan(trial, ref)
    trial.notes.append(plan)

    # 1. start, wait for the kill point, send the signal
    t0 = time.monotonic()
    proc = start(train_command(root), log)
    reached = rows is None
    while proc.poll() is None and time.monotonic() - t0 < TIMEOUT:
        if rows is not None and (run_dir / "config.yaml").exists() and count_rows(run_dir) >= rows:
            reached = True
            break
        if rows is None:
            break
        time.sleep(0.001)
    if not reached and proc.poll() is None:
        proc.kill()
        proc.wait()
        trial.problems.append("the run never reached the kill point")
        return trial
    time.sleep(delay)
    missed = proc.poll() is not None
    if not missed:
        proc.send_signal(trial.sig)
    try:
        code = proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        trial.problems.append(f"did not stop within {TIMEOUT:.0f} s of {trial.sig.name}")
        return trial
    finished = count_rows(run_dir) == ITERATIONS
    trial.notes.append(f"rc={code}" + (" (exited before the signal)" if missed else ""))
    expected = EXPECTED_CODE[trial.sig]
    late = False
    if missed or code == 0:
        if code != 0 or not finished:
            trial.problems.append(f"exit code {code} without a kill and {count_rows(run_dir)} rows")
    elif code == -trial.sig and trial.sig != signal.SIGKILL and finished and (run_dir / "checkpoint.pt").is_file():
        # the signal landed after the run loop had finished and restored the default handler (process
        # teardown): the run is complete; the resume below must say so
        trial.notes.append("(signal after the run finished)")
        late = True
    elif code != expected:
        trial.problems.append(f"{trial.sig.name} gave exit code {code}, expected {expected}")
    if trial.sig != signal.SIGKILL and code == expected:  # a graceful stop saves a checkpoint
        out = log.read_text(errors="replace")
        if "Traceback" in out:
            trial.problems.append(f"{trial.sig.name} printed a traceback")
        if not (run_dir / "checkpoint.pt").is_file():
            trial.problems.append(f"{trial.sig.name} left no checkpoint")
    left = tmp_files(run_dir)
    trial.notes.append(f"tmp_after_kill={len(left)}")
    had_checkpoint = (run_dir / "checkpoint.pt").is_file()

    # 2. resume (or, with no checkpoint, start again)
    if code != 0:
        rc, err = run(resume_command(run_dir), log)
        last = err.strip().splitlines()[-1] if err.strip() else ""
        if rc == 0:
            trial.notes.append("resume=0")
        elif rc == 2 and not had_checkpoint and (
                "has no checkpoint.pt" in last or ("has no config.yaml" in last
                                                   and not (run_dir / "config.yaml").exists())):
            one_line = len(err.strip().splitlines()) == 1
            if not one_line:
                trial.problems.append(f"resume without a checkpoint printed {len(err.strip().splitlines())} lines")
            trial.notes.append("resume=2(no checkpoint)")
            rc, err = run(train_command(root), log)
            if rc == 0:
                trial.notes.append("fresh=0")
            elif rc == 2 and "already holds a run" in err:
                trial.stuck = True
                trial.problems.append("stuck: --resume says 'has no checkpoint.pt' and the same command again says "
                                      "'already holds a run'")
                trial.notes.append("fresh=2(already holds a run; directory deleted and started again)")
                shutil.rmtree(run_dir)
                rc, err = run(train_command(root), log)
                if rc != 0:
                    trial.problems.append(f"a fresh start in a clean directory exited {rc}")
            else:
                trial.problems.append(f"the fresh start exited {rc}: {err.strip().splitlines()[-1:]}")
        elif rc == 2 and finished and f"already has {ITERATIONS} iterations" in last:
            trial.notes.append("resume=2(already complete)")
        else:
            trial.problems.append(f"resume exited {rc}: {last}")
        if "Traceback" in err:
            trial.problems.append("resume printed a traceback")
        if late and "resume=2(already complete)" not in trial.notes:
            trial.problems.append(f"{trial.sig.name} gave exit code {code} before the run had finished")

    # 3. the finished run against the reference
    trial.orphans = len(tmp_files(run_dir))
    if trial.orphans:
        trial.problems.append(f"{trial.orphans} *.tmp file(s) left: {[p.name for p in tmp_files(run_dir)]}")
    try:
        rows_now = metric_rows(run_dir)
    except (OSError, json.JSONDecodeError) as exc:
        rows_now = []
        trial.problems.append(f"cannot read metrics.jsonl: {exc}")
    if rows_now == ref.rows:
        trial.notes.append("metrics=exact")
    else:
        diff = next((i for i, (a, b) in enumerate(zip(rows_now, ref.rows)) if a != b),
                    min(len(rows_now), len(ref.rows)))
        trial.problems.append(f"metrics differ ({len(rows_now)} rows, first difference at row {diff})")
    scalars = tb_scalars(run_dir)
    steps = [s for s, _ in scalars]
    trial.duplicates = len(steps) - len(set(steps))
    if scalars == ref.scalars:
        trial.notes.append("tb=exact")
    else:
        missing = sorted(set(range(ITERATIONS)) - set(steps))
        values = dict(scalars)
        wrong = [s for s, v in ref.scalars if s in values and values[s] != v]
        trial.problems.append(f"TensorBoard {TAG}: {len(steps)} events, duplicated steps {trial.duplicates}, "
                              f"missing {missing}, values differing at {wrong}")
    return trial


# --- main ----------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=10, help="trials per signal (SIGKILL, SIGTERM, SIGINT)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random kill points")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="trials run at the same time")
    p.add_argument("--logdir", help="where the run directories go (default: a temporary directory, deleted)")
    p.add_argument("--signals", default="KILL,TERM,INT", help="comma-separated signals to inject")
    p.add_argument("--source", help="the tree whose train.py to run (default: this repository)")
    args = p.parse_args(argv)
    global SOURCE
    if args.source:
        SOURCE = Path(args.source).resolve()
        if not (SOURCE / "train.py").is_file():
            p.error(f"--source {args.source} has no train.py")
    if args.trials < 1 or args.jobs < 1:
        p.error("--trials and --jobs must be >= 1")
    signals = [signal.Signals["SIG" + s.strip().upper().removeprefix("SIG")] for s in args.signals.split(",")]

    tmp = None
    if args.logdir:
        base = Path(args.logdir)
        base.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.mkdtemp(prefix="steinrl-fault-")
        base = Path(tmp)
    try:
        t0 = time.monotonic()
        ref = reference(base / "reference")
        print(f"reference: {ITERATIONS} iterations, start-up {ref.startup_s:.1f} s, "
              f"{ref.iteration_s * 1e3:.0f} ms/iteration; code {SOURCE}; run directories under {base}", flush=True)
        trials = [Trial(i, sig, args.seed) for sig in signals for i in range(args.trials)]
        lock = threading.Lock()

        def go(trial: Trial) -> Trial:
            try:
                fault_trial(trial, base / f"{trial.sig.name.lower()}-{trial.index:02d}", ref)
            except Exception as exc:  # noqa: BLE001 - a crashed trial is a failed trial
                trial.problems.append(f"benchmark error: {type(exc).__name__}: {exc}")
            with lock:
                print(trial.line(), flush=True)
            return trial

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            done = list(pool.map(go, trials))
        exact = sum(t.ok for t in done)
        orphans = sum(t.orphans for t in done)
        duplicates = sum(t.duplicates for t in done)
        stuck = sum(t.stuck for t in done)
        print(f"{len(done)} trials in {time.monotonic() - t0:.0f} s; stuck (no checkpoint, fresh start refused): "
              f"{stuck}; failed: {len(done) - exact}", flush=True)
        print(f"fault_injection trials={len(done)} exact_resumes={exact} orphans={orphans} "
              f"duplicate_steps={duplicates}", flush=True)
        return 0 if exact == len(done) else 1
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
