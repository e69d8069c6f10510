"""The command-line run loop: a :class:`~steinrl.run.trainer.Trainer` stepped until done,
with small callbacks for the run directory's files, progress and signals.

    with RunDirectory.create(path, cfg, command) as run_dir:     # locked while in use
        status = fit(trainer, [MetricsCallback(...), CheckpointCallback(...), ProgressCallback(...)])

:func:`fit` stops after the current iteration on SIGINT (Ctrl-C) or SIGTERM (``kill``,
schedulers, Ray); the checkpoint callback then saves, and the caller exits 130 / 143.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock, Timeout

from steinrl.errors import ConfigError
from steinrl.run.checkpoint import CHECKPOINT_NAME, remove_stale_temp_files
from steinrl.run.config import Config, save_config
from steinrl.run.logger import RunLogger
from steinrl.run.trainer import Trainer

__all__ = ["Callback", "MetricsCallback", "CheckpointCallback", "ProgressCallback", "GracefulStop", "fit",
           "RunDirectory", "CONFIG_NAME", "planned_iterations"]

CONFIG_NAME = "config.yaml"


class RunDirectoryInUse(ConfigError):
    """Another process holds the run directory's lock."""


class Callback:
    """Hooks of :func:`fit`; every method is optional. A callback serves one seed of the
    trainer, :attr:`seed_index` (its position in ``trainer.seeds``), and sees that seed's scalars."""

    seed_index = 0

    def on_start(self, trainer: Trainer) -> None:
        pass

    def on_iteration(self, trainer: Trainer, scalars: dict[str, float]) -> None:
        """After iteration ``trainer.iteration - 1`` finished."""

    def on_end(self, trainer: Trainer, status: str) -> None:
        """``status``: ``done``, ``interrupted`` (a signal; the run can resume) or ``failed``."""


class MetricsCallback(Callback):
    """One row per iteration in ``metrics.jsonl`` and TensorBoard (resumed runs continue the steps)."""

    def __init__(self, run_dir: Path, tensorboard: bool, seed_index: int = 0) -> None:
        self.run_dir, self.tensorboard, self.seed_index = run_dir, tensorboard, seed_index
        self.logger: RunLogger | None = None

    def on_start(self, trainer: Trainer) -> None:
        self.logger = RunLogger(self.run_dir, trainer.iteration, self.tensorboard)
        if trainer.iteration == 0:
            self.logger.log_hparams(trainer.seed_configs[self.seed_index].to_dict(),
                                    {trainer.job.headline_metric: float("nan")})

    def on_iteration(self, trainer: Trainer, scalars: dict[str, float]) -> None:
        self.logger.log(trainer.iteration - 1, scalars)

    def on_end(self, trainer: Trainer, status: str) -> None:
        if self.logger is not None:
            self.logger.close()


class CheckpointCallback(Callback):
    """Saves every ``every`` iterations and when the run ends or is interrupted (never after a failure)."""

    def __init__(self, path: Path, every: int, seed_index: int = 0) -> None:
        self.path, self.every, self.seed_index = path, every, seed_index
        self.saved_iteration: int | None = None

    def on_start(self, trainer: Trainer) -> None:
        if self.path.is_file():  # a resumed run: its checkpoint is the last good one so far
            self.saved_iteration = trainer.iteration

    def _save(self, trainer: Trainer) -> None:
        trainer.save(self.path, self.seed_index)
        self.saved_iteration = trainer.iteration

    def on_iteration(self, trainer: Trainer, scalars: dict[str, float]) -> None:
        if trainer.iteration % self.every == 0:
            self._save(trainer)

    def on_end(self, trainer: Trainer, status: str) -> None:
        if status != "failed" and self.saved_iteration != trainer.iteration:
            self._save(trainer)


class ProgressCallback(Callback):
    """A tqdm bar where ``stream`` (default stderr) is a terminal; else (``bar=False``, a pipe,
    a file, a batch job) one log line every ``log_every`` iterations and at the last.

    Fields: ``ret`` the mean episode return of the iteration, ``best`` the papers' metric
    (the best particle's mean return), ``sps`` env steps per second; in a batch of seeds, those
    of the callback's ``seed_index`` (the first seed), named first by ``seed=<seed>``. Iterations are counted
    from 1 (``iteration 30`` is the 30th, ``metrics.jsonl``'s row 29). The total is the job's
    ``num_steps``; where that is an estimate (``total_steps``) it grows to the iterations the
    run takes, and a finished run's bar ends at its own count (26/26, not 26/25).
    """

    def __init__(self, bar: bool, log_every: int, desc: str, stream: Any = None, seed: int | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.seed = seed  #: a batch's: the seed whose figures are shown (the fields begin seed=<seed>)
        isatty = getattr(self.stream, "isatty", None)
        self.bar_enabled = bool(bar and isatty is not None and isatty())
        self.log_every, self.desc = log_every, desc
        self.bar: Any = None
        self.start = 0.0

    def on_start(self, trainer: Trainer) -> None:
        self.start = time.perf_counter()
        if self.bar_enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=max(trainer.job.num_steps, trainer.iteration), initial=trainer.iteration, unit="it",
                            desc=self.desc, dynamic_ncols=True, file=self.stream)

    def on_iteration(self, trainer: Trainer, scalars: dict[str, float]) -> None:
        fields = trainer.job.progress_fields(scalars)
        if self.seed is not None:
            fields = {"seed": str(self.seed), **fields}
        total = planned_iterations(trainer)
        if self.bar is not None:
            first = self.bar.n == self.bar.initial  # show the first iteration's figures at once
            self.bar.total = total
            self.bar.update(1)
            self.bar.set_postfix(fields, refresh=first)
        elif trainer.iteration % self.log_every == 0 or trainer.done:
            text = " ".join(f"{k}={v}" for k, v in fields.items())
            elapsed = time.perf_counter() - self.start
            print(f"[{self.desc}] iteration {trainer.iteration}/{total} {text} ({elapsed:.0f} s)", file=self.stream,
                  flush=True)

    def on_end(self, trainer: Trainer, status: str) -> None:
        if self.bar is not None:
            self.bar.close()


def planned_iterations(trainer: Trainer) -> int:
    """The run's iterations as far as known now: the job's ``num_steps`` (an estimate with
    ``total_steps``), at least one more than done while the run goes on, exactly those done
    once it is done."""
    if trainer.done:
        return trainer.iteration
    return max(trainer.job.num_steps, trainer.iteration + 1)


class GracefulStop:
    """SIGINT / SIGTERM ask :func:`fit` to stop after the current iteration; a second
    SIGINT raises ``KeyboardInterrupt`` at once. Only installed in the main thread."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        if self.signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = signum
        name = signal.Signals(signum).name
        print(f"\n{name}: finishing this iteration, saving a checkpoint and stopping"
              + (" (Ctrl-C again aborts at once)" if signum == signal.SIGINT else ""), file=sys.stderr, flush=True)

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: Any) -> bool:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        return False


def fit(trainer: Trainer, callbacks: list[Callback], stop: GracefulStop | None = None) -> str:
    """Step ``trainer`` until done or stopped; returns ``done``, ``interrupted`` or ``failed``.

    Each callback sees the scalars of its own seed (``callback.seed_index``). An exception
    in a step ends the run as ``failed`` (callbacks see it; nothing is saved) and propagates.
    """
    for cb in callbacks:
        cb.on_start(trainer)
    status = "failed"
    try:
        while not trainer.done and not (stop is not None and stop.signal is not None):
            scalars = trainer.step_seeds()
            for cb in callbacks:
                cb.on_iteration(trainer, scalars[cb.seed_index])
        status = "done" if trainer.done else "interrupted"
    finally:
        for cb in callbacks:
            cb.on_end(trainer, status)
    return status


class RunDirectory:
    """A run's directory, locked (``filelock``) while a process uses it.

    :param path: ``<logdir>/<env>/<algo>/<run_name>``.
    """

    LOCK_NAME = ".lock"
    PID_NAME = ".pid"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock: FileLock | None = None

    @property
    def checkpoint(self) -> Path:
        return self.path / CHECKPOINT_NAME

    def acquire(self, what_next: str = "wait for it or choose another --run-name") -> RunDirectory:
        """Create and lock the directory; a locked one raises :class:`ConfigError` naming its PID
        and ``what_next`` (a resume has no --run-name to choose)."""
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except FileExistsError:
            raise ConfigError(f"cannot create run directory {self.path}: a file is in the way") from None
        except OSError as exc:
            raise ConfigError(f"cannot create run directory {self.path}: {exc.strerror}") from None
        if not os.access(self.path, os.W_OK):
            raise ConfigError(f"run directory {self.path} is not writable")
        lock = FileLock(str(self.path / self.LOCK_NAME))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            pid = (self.path / self.PID_NAME).read_text().strip() if (self.path / self.PID_NAME).is_file() else "?"
            raise RunDirectoryInUse(f"run directory {self.path} is in use by another process (PID {pid}); "
                                    f"{what_next}") from None
        self._lock = lock
        (self.path / self.PID_NAME).write_text(f"{os.getpid()}\n")
        remove_stale_temp_files(self.path)
        return self

    def clear_aborted_start(self) -> None:
        """Remove what a start killed before its first checkpoint left (config, metrics,
        TensorBoard events, a best checkpoint), so the new start logs from step 0 without duplicates."""
        if self.checkpoint.exists():
            raise ConfigError(f"{self.path} holds a checkpoint: resume it instead")
        for pattern in (CONFIG_NAME, "metrics.jsonl", "events.out.tfevents.*", "best.pt", "best.json"):
            for leftover in self.path.glob(pattern):
                leftover.unlink()

    def release(self) -> None:
        if self._lock is not None:
            (self.path / self.PID_NAME).unlink(missing_ok=True)
            self._lock.release()
            self._lock = None

    def __enter__(self) -> RunDirectory:
        return self if self._lock is not None else self.acquire()

    def __exit__(self, *exc: Any) -> bool:
        self.release()
        return False

    def write_config(self, cfg: Config, meta: dict[str, Any]) -> None:
        """Write ``config.yaml`` (the resolved config and ``_meta``). A resumed run keeps the
        first start's ``_meta`` (command, start time, config sources) and appends its own
        ``meta`` to ``_meta.resumed_with``."""
        path = self.path / CONFIG_NAME
        if path.is_file():
            try:
                old = yaml.safe_load(path.read_text()).get("_meta", {})
            except (yaml.YAMLError, AttributeError):
                old = {}
            if old:
                resumed = [r for r in old.get("resumed_with", []) if isinstance(r, dict)]
                meta = {**old, "resumed_with": [*resumed, meta]}
        save_config(cfg, path, meta)
