"""What every steinrl command line shares: exit codes, the one-line-error parser and the
wrapper that turns a user error into ``error: ...`` and exit 2.

Used by :mod:`steinrl.run.cli` (``train``, ``evaluate``, the ``steinrl`` command) and
:mod:`steinrl.run.sweep` (``sweep``), and by the scripts in ``benchmarks/``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from steinrl.errors import ConfigError

__all__ = ["EXIT_USAGE", "EXIT_DIVERGED", "EXIT_SIGINT", "EXIT_SIGTERM", "run_cli", "Parser",
           "input_path", "output_file", "output_dir"]

EXIT_USAGE = 2
EXIT_DIVERGED = 3
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


def run_cli(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None) -> int:
    """Run ``main``; a user error prints one line ``error: ...`` and returns 2, a second Ctrl-C 130."""
    try:
        return main(argv)
    except ConfigError as exc:
        msg = " ".join(str(exc.args[0] if exc.args else exc).split())
        print(f"error: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("aborted (Ctrl-C twice): the last saved checkpoint is kept", file=sys.stderr)
        return EXIT_SIGINT
    except MemoryError:
        print("error: out of memory: the run's sizes (particles, envs, batch) need more than this machine has",
              file=sys.stderr)
        return EXIT_USAGE


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line and exit 2 (as everything else): a bad argument
    raises :class:`ConfigError`, which :func:`run_cli` prints. No prefix matching: ``--iteration``
    is an unknown flag, not ``--iterations`` (``allow_abbrev=False``)."""

    def __init__(self, *args: Any, allow_abbrev: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{self.prog}: {message}")




# --- paths given on a command line: the right kind, or one line naming the problem ------
def input_path(path: str | Path, what: str, kind: str = "file") -> Path:
    """``path``, an existing ``kind`` ("file" or "directory") to read; else a one-line
    :class:`ConfigError` naming ``what`` (e.g. ``"--data"``), the path and the problem."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{what} {path}: no such {kind}")
    if kind == "file" and p.is_dir():
        raise ConfigError(f"{what} {path} is a directory; give a file")
    if kind == "directory" and not p.is_dir():
        raise ConfigError(f"{what} {path} is a file; give a directory")
    if kind == "file":
        try:
            with open(p, "rb"):
                pass
        except OSError as exc:
            raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    return p


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def output_file(path: str | Path, what: str, suffixes: Sequence[str] | None = None) -> Path:
    """``path`` as a file to write: not a directory, one of ``suffixes`` (if given), its folder
    (or the nearest one that exists) a directory; else a one-line :class:`ConfigError`."""
    out = Path(path)
    if out.is_dir():
        raise ConfigError(f"{what} {path} is a directory; give a file name")
    if suffixes is not None and out.suffix.lower() not in suffixes:
        raise ConfigError(f"{what} {path}: the file name must end in {', '.join(suffixes)}")
    folder = _nearest_existing(out.parent)
    if not folder.is_dir():
        raise ConfigError(f"{what} {path}: {folder} is a file, not a directory")
    return out


def output_dir(path: str | Path, what: str, create: bool = False) -> Path:
    """``path`` as a directory to write into (made, with its parents, if ``create``): not a
    file, nor below one; else a one-line :class:`ConfigError`."""
    out = Path(path)
    existing = _nearest_existing(out)
    if not existing.is_dir():
        raise ConfigError(f"{what} {path}: {existing} is a file, not a directory")
    if create:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create {what} {path}: {exc.strerror}") from None
    return out
