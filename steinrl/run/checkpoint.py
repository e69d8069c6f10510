"""Checkpoints: written atomically (temp file + rename), read without unpickling objects."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

CHECKPOINT_NAME = "checkpoint.pt"


def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    """Write ``state`` (tensors, numbers, strings, lists, dicts) to ``path`` atomically.

    The file is first written next to its destination and then renamed over it, so a
    crash or Ctrl-C never leaves a half-written checkpoint behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint with ``torch.load(..., weights_only=True)`` (no arbitrary objects)."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return torch.load(path, map_location=map_location, weights_only=True)
