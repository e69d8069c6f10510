"""Run logging: TensorBoard scalars (SB3's key names), a ``metrics.jsonl`` copy, and hparams.

The x-axis of every scalar is the iteration (the papers' figures are per iteration);
``time/total_timesteps`` gives the env steps per particle so far.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from steinrl.run.checkpoint import write_atomic

METRICS_NAME = "metrics.jsonl"


def _after_earlier_event_files(run_dir: Path) -> None:
    """Wait (under a second) until the clock's second is past every event file's already in
    ``run_dir``: an event file is named ``events.out.tfevents.<second>.<host>.<pid>...`` and
    TensorBoard reads a directory's files in name order, so a resume within the second of the kill
    could otherwise sort before the first file (a lower pid) and see its steps go back."""
    seconds = []
    for path in run_dir.glob("events.out.tfevents.*"):
        part = path.name.split(".")[3]
        if part.isdigit():
            seconds.append(int(part))
    if seconds:
        latest = max(seconds)
        while int(time.time()) <= latest:
            time.sleep(0.05)


class RunLogger:
    """Writes one row of scalars per iteration to TensorBoard and ``metrics.jsonl``.

    A row is on disk, in both, when :meth:`log` returns: the checkpoint written after it
    never covers a row that a kill could still lose (TensorBoard's writer otherwise
    queues events for a background thread, and a ``kill -9`` right after the checkpoint
    lost the steps still queued: the resumed curve missed them).

    :param run_dir: the run directory.
    :param start_iteration: first iteration this process logs; rows at or after it that
        a previous (interrupted) process wrote are dropped, so a resumed run's curve is
        the same as an uninterrupted one.
    :param tensorboard: also write TensorBoard event files.
    """

    def __init__(self, run_dir: str | Path, start_iteration: int = 0, tensorboard: bool = True):
        self.run_dir = Path(run_dir)
        self.metrics_path = self.run_dir / METRICS_NAME
        self._truncate(start_iteration)
        self._file = open(self.metrics_path, "a")  # noqa: SIM115 - held open for the run, closed by close()
        self.writer = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            _after_earlier_event_files(self.run_dir)
            self.writer = SummaryWriter(str(self.run_dir), purge_step=start_iteration or None)

    def _truncate(self, start_iteration: int) -> None:
        """Drop the rows a killed process wrote past the checkpoint, and a line cut off by the
        kill; atomically, so a kill now cannot lose the rows before the checkpoint."""
        if not self.metrics_path.exists():
            return
        text = self.metrics_path.read_text(errors="replace")
        keep = "".join(json.dumps(row) + "\n" for row in read_metrics(self.run_dir)
                       if row["iteration"] < start_iteration)
        if keep != text:
            write_atomic(self.metrics_path, keep)

    def log_hparams(self, hparams: dict[str, Any], metrics: dict[str, float]) -> None:
        """Record the resolved config as TensorBoard hparams (in the run's own event file)."""
        if self.writer is None:
            return
        from torch.utils.tensorboard.summary import hparams as hparams_summary

        flat = {(f"{k}.{kk}" if isinstance(v, dict) else k): vv
                for k, v in hparams.items() for kk, vv in (v.items() if isinstance(v, dict) else [(k, v)])}
        clean = {k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in flat.items()}
        for summary in hparams_summary(clean, metrics):
            self.writer.file_writer.add_summary(summary)

    def log(self, iteration: int, scalars: dict[str, float]) -> None:
        """Write one iteration's scalars (NaN/None values are skipped in TensorBoard); both
        files hold the row when this returns."""
        row = {"iteration": iteration, **scalars}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self.writer is not None:
            for key, value in scalars.items():
                if value is not None and value == value:
                    self.writer.add_scalar(key, value, iteration)
            self.writer.flush()  # waits for the writer thread: the events are in the file

    def close(self) -> None:
        self._file.close()
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The rows of a run's ``metrics.jsonl`` (a line cut off by a kill is skipped)."""
    path = Path(run_dir) / METRICS_NAME
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("iteration"), int):
            rows.append(row)
    return rows
