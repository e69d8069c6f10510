"""What every steinrl command line shares: exit codes, the one-line-error parser and the
wrapper that turns a user error into ``error: ...`` and exit 2.

Used by :mod:`steinrl.run.cli` (``train``, ``evaluate``, the ``steinrl`` command) and
:mod:`steinrl.run.sweep` (``sweep``), and by the scripts in ``benchmarks/``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from steinrl.errors import ConfigError

__all__ = ["EXIT_USAGE", "EXIT_DIVERGED", "EXIT_SIGINT", "EXIT_SIGTERM", "run_cli", "Parser", "_Parser"]

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
    raises :class:`ConfigError`, which :func:`run_cli` prints."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ConfigError(f"{self.prog}: {message}")


_Parser = Parser  # the name cli.py has always used
