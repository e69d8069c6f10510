"""Checkpoints: written atomically (temp file + rename), read without unpickling objects.

Loading uses ``torch.load(weights_only=True)``: tensors and plain data only; a crafted
file cannot run code. A missing, empty, truncated or foreign file raises
:class:`CheckpointError` with a one-line message.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch

from steinrl.errors import ConfigError

__all__ = ["CHECKPOINT_NAME", "CheckpointError", "save_checkpoint", "load_checkpoint", "remove_stale_temp_files",
           "write_atomic"]

CHECKPOINT_NAME = "checkpoint.pt"
_TMP_SUFFIX = ".tmp"
#: The run directory's files written by :func:`write_atomic` (their temporary files are
#: ``<name>.<random>.tmp``, cleared by :func:`remove_stale_temp_files`).
ATOMIC_NAMES = (CHECKPOINT_NAME, "best.pt", "best.json", "metrics.jsonl", "config.yaml")


class CheckpointError(ConfigError):
    """A checkpoint that cannot be read or does not fit; the message names the file."""


def write_atomic(path: str | Path, content: bytes | str | Callable[[IO[bytes]], None]) -> None:
    """Replace ``path`` by ``content`` (bytes, text as UTF-8, or a function writing to a binary file) atomically.

    The file is first written next to its destination, flushed and fsynced, then renamed over
    it (and the directory fsynced), so a crash, a kill or Ctrl-C leaves either the old file or
    the new one, never a part (a kill -9 can leave the temporary file, which
    :func:`remove_stale_temp_files` clears on the next start).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=_TMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            if callable(content):
                content(f)
            else:
                f.write(content.encode() if isinstance(content, str) else content)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    try:  # the rename itself durable (not needed against a kill, only against a power cut)
        directory = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(directory)
    except OSError:
        pass
    finally:
        os.close(directory)


def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    """Write ``state`` (tensors, numbers, strings, lists, dicts) to ``path`` atomically
    (:func:`write_atomic`): never a half-written checkpoint."""
    write_atomic(path, lambda f: torch.save(state, f))


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint (a file, or a run directory holding ``checkpoint.pt``) safely."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}")
    if path.stat().st_size == 0:
        raise CheckpointError(f"checkpoint {path} is empty (0 bytes)")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure to parse is the file's fault
        first = " ".join(str(exc).split())[:200]
        raise CheckpointError(f"cannot read checkpoint {path}: not a valid steinrl checkpoint "
                              f"(truncated, corrupt or unsafe: {type(exc).__name__}: {first})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} holds a {type(state).__name__}, not a steinrl checkpoint")
    return state


def remove_stale_temp_files(directory: str | Path) -> list[Path]:
    """Delete the temporary files (``checkpoint.pt.*.tmp``, ``metrics.jsonl.*.tmp``, ... of
    :data:`ATOMIC_NAMES`) a killed process left in ``directory``; returns them."""
    stale = sorted(p for name in ATOMIC_NAMES for p in Path(directory).glob(f"{name}.*{_TMP_SUFFIX}"))
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
