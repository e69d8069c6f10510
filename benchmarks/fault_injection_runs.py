"""The train.py runs of ``benchmarks/fault_injection.py``: the kinds of run (RL, bandit),
a reference run, and one trial: start, kill at a random point, resume, compare with the
reference (the criteria are in fault_injection.py's docstring)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT  # the tree whose train.py runs (set_source: fault_injection.py --source)
RUN_NAME, STEPS = "r", 12
COMMON_ARGS = ["--set", "run.checkpoint_every=2", "--set", "run.tensorboard=true", "--no-progress"]
EXPECTED_CODE = {signal.SIGKILL: -signal.SIGKILL, signal.SIGTERM: 143, signal.SIGINT: 130}
TIMEOUT = 300.0


@dataclass(frozen=True)
class Kind:
    """A kind of run to kill: its task, algorithm, tiny settings, headline metric and length flag."""

    name: str
    env: str
    algo: str
    args: tuple[str, ...]
    tag: str  #: the TensorBoard scalar compared with the reference
    length: tuple[str, str]  #: the flag that sets the run's total, and its value (STEPS steps)


KINDS = {
    "rl": Kind("rl", "Cartpole", "s2vgd-a2c", ("--particles", "2", "--set", "envs_per_particle=2", "--set",
                                               "batch_size=32", "--set", "horizon=30", "--set", "critic.steps=2"),
               "rollout/ep_rew_max_particle", ("--iterations", str(STEPS))),
    "bandit": Kind("bandit", "Wheel", "svgd-ts", ("--particles", "3", "--set", "protocol.refit_every=10", "--set",
                                                  "protocol.refit_steps=5", "--set", "protocol.minibatch=32"),
                   "bandit/cumulative_regret", ("--rounds", str(10 * STEPS))),
}


def set_source(path: Path) -> None:
    """Run the train.py (and steinrl) of the tree at ``path``."""
    global SOURCE
    SOURCE = path


# --- helpers -----------------------------------------------------------------------------
def run_path(root: Path, kind: Kind) -> Path:
    return root / kind.env / kind.algo / RUN_NAME


def train_command(root: Path, kind: Kind) -> list[str]:
    return [sys.executable, str(SOURCE / "train.py"), "--env", kind.env, "--algo", kind.algo, *kind.args,
            *COMMON_ARGS, *kind.length, "--logdir", str(root), "--run-name", RUN_NAME]


def resume_command(run: Path, kind: Kind) -> list[str]:
    return [sys.executable, str(SOURCE / "train.py"), "--resume", str(run), *kind.length, "--no-progress"]


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


def tb_scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    import logging

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # "Purging expired events" after a resume is expected

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    if tag not in acc.Tags().get("scalars", []):
        return []
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def tmp_files(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("*.tmp")) if run_dir.is_dir() else []


# --- the reference -----------------------------------------------------------------------
@dataclass
class Reference:
    kind: Kind
    rows: list[str]
    scalars: list[tuple[int, float]]
    startup_s: float  # from the start of the process to its config.yaml
    iteration_s: float  # mean wall time of one iteration (rows apart)


def reference(root: Path, kind: Kind) -> Reference:
    run_dir = run_path(root, kind)
    root.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    proc = start(train_command(root, kind), root / "output.log")
    startup = first_row = last_row = None
    while proc.poll() is None and time.monotonic() - t0 < TIMEOUT:
        if startup is None and (run_dir / "config.yaml").exists():
            startup = time.monotonic() - t0
        rows = count_rows(run_dir)
        if first_row is None and rows >= 1:
            first_row = time.monotonic()
        if last_row is None and rows >= STEPS:
            last_row = time.monotonic()
        time.sleep(0.001)
    code = proc.wait(timeout=TIMEOUT)
    if code != 0:
        raise SystemExit(f"the {kind.name} reference run failed (exit {code}); see {root / 'output.log'}")
    rows = metric_rows(run_dir)
    if len(rows) != STEPS:
        raise SystemExit(f"the {kind.name} reference run has {len(rows)} rows, expected {STEPS}")
    iteration = (last_row - first_row) / (STEPS - 1) if first_row is not None and last_row is not None else 0.03
    return Reference(kind, rows, tb_scalars(run_dir, kind.tag), startup or 3.0, max(iteration, 0.005))


# --- one trial -----------------------------------------------------------------------------
class Verdict:
    """What a fault-injection trial reports: ``ok`` (no ``problems``) and one ``line`` (its
    ``label()``, its ``notes``, OK or the problems)."""

    notes: list[str]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    def label(self) -> str:
        raise NotImplementedError

    def line(self) -> str:
        status = "OK" if self.ok else "FAIL: " + "; ".join(self.problems)
        return f"trial {self.label()} {' '.join(self.notes)} -> {status}"

    def failure(self) -> str:
        """This trial in the summary line's list of failures: its label and first problem."""
        return f"{' '.join(self.label().split())}: {self.problems[0] if self.problems else 'ok'}"


@dataclass
class Trial(Verdict):
    kind: str
    index: int
    sig: signal.Signals
    seed: int
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    orphans: int = 0
    duplicates: int = 0
    stuck: bool = False
    plan: str = ""  #: the kill point (kill_plan's description)
    first_difference: str = ""  #: the first metric that differs from the reference (compare)

    def label(self) -> str:
        return f"{self.kind:6s} {self.sig.name:7s} {self.index:02d}"

    def failure(self) -> str:
        """One failing trial for the summary line: kind, signal, kill point, seed of the kill points,
        trial index, and the first differing metric (else the first problem)."""
        others = [p for p in self.problems if not p.startswith(("metrics differ", "TensorBoard "))]
        what = "; ".join([self.first_difference] * bool(self.first_difference) + others[:2]) or "ok"
        return f"{self.kind}/{self.sig.name}/{self.plan or '?'}/seed={self.seed}/trial={self.index:02d}: {what}"


def kill_plan(trial: Trial, ref: Reference) -> tuple[str, int | None, float]:
    """(description, rows to wait for or None for a start-up kill, delay in seconds)."""
    rng = random.Random(f"{trial.seed}/{trial.sig.name}/{trial.index}" + ("" if trial.kind == "rl" else trial.kind))
    if trial.sig == signal.SIGKILL and trial.index % 5 == 4:
        delay = rng.uniform(0.0, ref.startup_s)
        return f"kill@startup+{delay * 1e3:.0f}ms", None, delay
    rows = rng.randint(0, STEPS - 1)
    delay = rng.uniform(0.0, 0.003) if rng.random() < 1 / 3 else rng.uniform(0.0, 1.2 * ref.iteration_s)
    return f"kill@rows={rows}+{delay * 1e3:.1f}ms", rows, delay


def kill(trial: Trial, root: Path, ref: Reference) -> tuple[int | None, bool]:
    """Start the run, wait for the kill point, send the signal and check the exit: the exit code
    (None: the trial cannot go on) and whether the signal landed after the run had finished."""
    run_dir, log = run_path(root, ref.kind), root / "output.log"
    plan, rows, delay = kill_plan(trial, ref)
    trial.plan = plan
    trial.notes.append(plan)
    t0 = time.monotonic()
    proc = start(train_command(root, ref.kind), log)
    reached = rows is None
    while rows is not None and proc.poll() is None and time.monotonic() - t0 < TIMEOUT:
        if (run_dir / "config.yaml").exists() and count_rows(run_dir) >= rows:
            reached = True
            break
        time.sleep(0.001)
    if not reached and proc.poll() is None:
        proc.kill()
        proc.wait()
        trial.problems.append("the run never reached the kill point")
        return None, False
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
        return None, False
    finished = count_rows(run_dir) == STEPS
    trial.notes.append(f"rc={code}" + (" (exited before the signal)" if missed else ""))
    expected, late = EXPECTED_CODE[trial.sig], False
    if missed or code == 0:
        if code != 0 or not finished:
            trial.problems.append(f"exit code {code} without a kill and {count_rows(run_dir)} rows")
    elif code == -trial.sig and trial.sig != signal.SIGKILL and finished and (run_dir / "checkpoint.pt").is_file():
        # the signal landed after the run loop had finished and restored the default handler (process
        # teardown): the run is complete; the resume must say so
        trial.notes.append("(signal after the run finished)")
        late = True
    elif code != expected:
        trial.problems.append(f"{trial.sig.name} gave exit code {code}, expected {expected}")
    if trial.sig != signal.SIGKILL and code == expected:  # a graceful stop saves a checkpoint
        if "Traceback" in log.read_text(errors="replace"):
            trial.problems.append(f"{trial.sig.name} printed a traceback")
        if not (run_dir / "checkpoint.pt").is_file():
            trial.problems.append(f"{trial.sig.name} left no checkpoint")
    trial.notes.append(f"tmp_after_kill={len(tmp_files(run_dir))}")
    return code, late


def start_again(trial: Trial, root: Path, kind: Kind, log: Path) -> None:
    """A run killed before its first checkpoint: the same command as the first must finish it."""
    rc, err = run(train_command(root, kind), log)
    if rc == 0:
        trial.notes.append("fresh=0")
    elif rc == 2 and "already holds a run" in err:
        trial.stuck = True
        trial.problems.append("stuck: --resume says 'has no checkpoint.pt' and the same command again says "
                              "'already holds a run'")
        trial.notes.append("fresh=2(already holds a run; directory deleted and started again)")
        shutil.rmtree(run_path(root, kind))
        rc, err = run(train_command(root, kind), log)
        if rc != 0:
            trial.problems.append(f"a fresh start in a clean directory exited {rc}")
    else:
        trial.problems.append(f"the fresh start exited {rc}: {err.strip().splitlines()[-1:]}")


def resume(trial: Trial, root: Path, kind: Kind, had_checkpoint: bool, late: bool) -> None:
    """``--resume`` the killed run (or, with no checkpoint, start it again)."""
    run_dir, log = run_path(root, kind), root / "output.log"
    finished = count_rows(run_dir) == STEPS
    rc, err = run(resume_command(run_dir, kind), log)
    last = err.strip().splitlines()[-1] if err.strip() else ""
    no_config = "has no config.yaml" in last and not (run_dir / "config.yaml").exists()
    if rc == 0:
        trial.notes.append("resume=0")
    elif rc == 2 and not had_checkpoint and ("has no checkpoint.pt" in last or no_config):
        if len(err.strip().splitlines()) != 1:
            trial.problems.append(f"resume without a checkpoint printed {len(err.strip().splitlines())} lines")
        trial.notes.append("resume=2(no checkpoint)")
        start_again(trial, root, kind, log)
    elif rc == 2 and finished and f"is done ({STEPS} iterations)" in last:
        trial.notes.append("resume=2(already complete)")
    else:
        trial.problems.append(f"resume exited {rc}: {last}")
    if "Traceback" in err:
        trial.problems.append("resume printed a traceback")
    if late and "resume=2(already complete)" not in trial.notes:
        trial.problems.append(f"{trial.sig.name} stopped the run before it had finished")


def first_metric_difference(rows: list[str], reference_rows: list[str]) -> str:
    """The first metric in which the resumed run's rows (canonical JSON, :func:`metric_rows`)
    differ from the reference's: ``metric KEY iteration I: resumed X, straight Y``; "" if none."""
    for i in range(max(len(rows), len(reference_rows))):
        if i >= len(rows) or i >= len(reference_rows):
            return f"row {i}: {'missing in the resumed run' if i >= len(rows) else 'extra in the resumed run'}"
        if rows[i] == reference_rows[i]:
            continue
        mine, theirs = json.loads(rows[i]), json.loads(reference_rows[i])
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key, "<absent>") != theirs.get(key, "<absent>"):
                return (f"metric {key} iteration {theirs.get('iteration', i)}: resumed {mine.get(key, '<absent>')!r}, "
                        f"straight {theirs.get(key, '<absent>')!r}")
    return ""


def first_event_difference(scalars: list[tuple[int, float]], reference: list[tuple[int, float]], tag: str) -> str:
    """The first TensorBoard step of ``tag`` that is missing, repeated or differs from the reference; "" if none."""
    mine: dict[int, list[float]] = {}
    for step, value in scalars:
        mine.setdefault(step, []).append(value)
    for step, value in reference:
        got = mine.get(step, [])
        if got != [value]:
            return f"TensorBoard {tag} step {step}: resumed {got or 'missing'}, straight {value!r}"
    extra = sorted(set(mine) - {s for s, _ in reference})
    return f"TensorBoard {tag} steps {extra} not in the straight run" if extra else ""


def compare(trial: Trial, run_dir: Path, ref: Reference) -> None:
    """The finished run against the uninterrupted reference: no temporary file, the same
    metrics rows, each TensorBoard step once with the reference's value."""
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
        trial.first_difference = first_metric_difference(rows_now, ref.rows)
    scalars = tb_scalars(run_dir, ref.kind.tag)
    steps = [s for s, _ in scalars]
    trial.duplicates = len(steps) - len(set(steps))
    if scalars == ref.scalars:
        trial.notes.append("tb=exact")
    else:
        missing = sorted(set(range(STEPS)) - set(steps))
        values = dict(scalars)
        wrong = [s for s, v in ref.scalars if s in values and values[s] != v]
        trial.problems.append(f"TensorBoard {ref.kind.tag}: {len(steps)} events, duplicated steps {trial.duplicates}, "
                              f"missing {missing}, values differing at {wrong}")
        trial.first_difference = trial.first_difference or first_event_difference(scalars, ref.scalars, ref.kind.tag)


def fault_trial(trial: Trial, root: Path, ref: Reference) -> Trial:
    root.mkdir(parents=True, exist_ok=True)
    code, late = kill(trial, root, ref)
    if code is None:
        return trial
    if code != 0:
        resume(trial, root, ref.kind, (run_path(root, ref.kind) / "checkpoint.pt").is_file(), late)
    compare(trial, run_path(root, ref.kind), ref)
    return trial
