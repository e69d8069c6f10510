"""Kills at the exact instants that once made a resumed run differ from a straight one
(``benchmarks/fault_injection.py`` finds them by chance; here each is made to happen).

* SIGKILL right after a checkpoint is written, while the TensorBoard events of the
  iterations it covers are still queued in the writer's background thread: they were lost,
  and the resumed run's curve missed those steps. A row (metrics.jsonl and TensorBoard) is
  now on disk before the checkpoint that covers it.
* SIGKILL while a resumed run drops the rows past its checkpoint from ``metrics.jsonl``:
  the rewrite is atomic, so the rows before the checkpoint survive.
* A kill after the run had finished: the benchmark counted the refused resume (``is done``)
  as a failure.
"""

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

from steinrl.run.cli import run_cli, train_main
from steinrl.run.logger import read_metrics

TINY = ["--env", "Cartpole", "--algo", "s2vgd-a2c", "--particles", "2", "--set", "envs_per_particle=2",
        "--set", "batch_size=32", "--set", "horizon=30", "--set", "critic.steps=2", "--no-progress",
        "--set", "run.checkpoint_every=2", "--set", "run.tensorboard=true", "--run-name", "r"]
TAG = "rollout/ep_rew_max_particle"

#: A train.py whose TensorBoard writer thread never runs on its own (events reach the file only
#: when flushed: the slowest the thread can be) and that SIGKILLs itself right after the
#: checkpoint of iteration argv[1] is on disk.
KILLED_AFTER_CHECKPOINT = '''
import os, signal, sys
import tensorboard.summary.writer.event_file_writer as efw
import steinrl.run.trainer as trainer_module
from steinrl.run.cli import run_cli, train_main

write, flush = efw._AsyncWriter.write, efw._AsyncWriter.flush

def held_write(self, data):
    self.__dict__.setdefault("held", []).append(data)

def held_flush(self):
    for data in self.__dict__.pop("held", []):
        write(self, data)
    flush(self)

efw._AsyncWriter.write, efw._AsyncWriter.flush = held_write, held_flush
save = trainer_module.save_checkpoint

def save_then_die(state, path):
    save(state, path)
    if state["iteration"] == int(sys.argv[1]):
        os.kill(os.getpid(), signal.SIGKILL)

trainer_module.save_checkpoint = save_then_die
sys.exit(run_cli(train_main, sys.argv[2:]))
'''


def scalars(run: Path) -> list[tuple[int, float]]:
    return scalars_of(run, TAG)


def scalars_of(run: Path, tag: str) -> list[tuple[int, float]]:
    """Every ``tag`` value in the run's event files, by step. Each file is read on its own: a resume
    within the same second as the kill writes a file whose name (time, host, pid) can sort before
    the first one, and one accumulator over the directory would then see the steps go back and
    drop them as orphans."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    found = []
    for events in sorted(run.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(events), size_guidance={"scalars": 0})
        acc.Reload()
        found += [(e.step, e.value) for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []
    return sorted(found)


def without_times(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if not k.startswith("time/")} for row in rows]


def straight_run(root: Path, iterations: int) -> Path:
    assert run_cli(train_main, [*TINY, "--iterations", str(iterations), "--logdir", str(root)]) == 0
    return root / "Cartpole" / "s2vgd-a2c" / "r"


def test_a_kill_right_after_a_checkpoint_keeps_the_tensorboard_steps_it_covers(tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(KILLED_AFTER_CHECKPOINT)
    killed = subprocess.run([sys.executable, str(script), "2", *TINY, "--iterations", "4", "--logdir",
                             str(tmp_path / "killed")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert killed.returncode == -9, killed.stderr
    run = tmp_path / "killed" / "Cartpole" / "s2vgd-a2c" / "r"
    assert [step for step, _ in scalars(run)] == [0, 1]  # on disk before the checkpoint that covers them
    assert run_cli(train_main, ["--resume", str(run), "--iterations", "4", "--no-progress"]) == 0
    straight = straight_run(tmp_path / "straight", 4)
    assert without_times(read_metrics(run)) == without_times(read_metrics(straight))
    assert scalars(run) == scalars(straight) and [step for step, _ in scalars(run)] == [0, 1, 2, 3]


def test_a_kill_while_a_resume_drops_rows_past_the_checkpoint_keeps_the_rows_before_it(tmp_path, monkeypatch):
    import os

    run = straight_run(tmp_path, 2)  # a checkpoint at iteration 2, and its rows 0 and 1
    rows = (run / "metrics.jsonl").read_text()
    with open(run / "metrics.jsonl", "a") as f:  # a killed process had logged past the checkpoint
        f.write(json.dumps({"iteration": 2, TAG: 1e9}) + "\n" + '{"iteration": 3, "rollout/ep_')

    replace = os.replace

    def killed_before_metrics_replace(src, dst, *args, **kwargs):
        if Path(dst).name == "metrics.jsonl":  # the kill lands once the shortened copy is written
            raise KeyboardInterrupt
        replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", killed_before_metrics_replace)
    assert run_cli(train_main, ["--resume", str(run), "--iterations", "4", "--no-progress"]) == 130
    assert (run / "metrics.jsonl").read_text().startswith(rows)  # rows 0 and 1 are whole
    assert not list(run.glob("*.tmp"))
    monkeypatch.undo()
    assert run_cli(train_main, ["--resume", str(run), "--iterations", "4", "--no-progress"]) == 0
    assert [row["iteration"] for row in read_metrics(run)] == [0, 1, 2, 3]
    assert max(row[TAG] for row in read_metrics(run)) < 1e9


def test_fault_injection_counts_a_kill_after_the_run_finished_as_a_complete_run(tmp_path):
    """A signal that lands after the run's last checkpoint (a SIGKILL during teardown, a
    SIGTERM after the handlers are gone) leaves a finished run; its resume is refused with
    ``is done (12 iterations)``. benchmarks/fault_injection.py once expected other words
    there and counted the trial as failed, without naming it."""
    import signal

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import fault_injection_runs as runs
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    kind = runs.KINDS["rl"]
    assert run_cli(train_main, runs.train_command(tmp_path, kind)[2:]) == 0  # the run, finished
    trial = runs.Trial("rl", 0, signal.SIGKILL, 0, plan="kill@rows=11+50.0ms")
    runs.resume(trial, tmp_path, kind, had_checkpoint=True, late=False)
    assert trial.ok and "resume=2(already complete)" in trial.notes, trial.line()


def test_a_resumed_runs_event_file_sorts_after_the_first(tmp_path):
    """TensorBoard reads a run directory's event files in name order (``...tfevents.<second>.<host>.
    <pid>...``): a resume within the second of the kill, in a process with a lower pid, would sort
    first and its steps would look like a restart. The logger starts its file in a later second."""
    from steinrl.run.logger import RunLogger

    first = RunLogger(tmp_path)
    first.log(0, {"rollout/ep_rew_mean": 1.0})
    first.close()
    resumed = RunLogger(tmp_path, start_iteration=1)
    resumed.log(1, {"rollout/ep_rew_mean": 2.0})
    resumed.close()
    files = sorted(tmp_path.glob("events.out.tfevents.*"))
    assert len(files) == 2 and int(files[0].name.split(".")[3]) < int(files[1].name.split(".")[3])
    assert [step for step, _ in scalars_of(tmp_path, "rollout/ep_rew_mean")] == [0, 1]
