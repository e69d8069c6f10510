"""The time axis of a batch, indexed by an int or by a 0-dim device tensor.

A rollout step reads row ``t`` of the batch's pre-drawn tensors (policy noise ``(T, M, E,
A)``, reset states ``(T, state_dim, N)``) and writes row ``t`` of its buffers. Eagerly ``t``
is an int (views and one copy). A compiled step takes ``t`` as a 0-dim device tensor, so one
graph serves every step; there ``x[t]`` and ``x[t] = v`` would read ``t`` back to the host,
so these use ``index_select`` / ``index_copy_``, which trace.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor


def row(x: Any, t: Any) -> Any:
    """``x[t]``: row ``t`` of the leading axis (arrays or tensors)."""
    if isinstance(t, Tensor):
        return x.index_select(0, t.view(1)).squeeze(0)
    return x[t]


def write_row(buffer: Any, t: Any, value: Any) -> None:
    """``buffer[t] = value`` (``value`` cast to the buffer's dtype)."""
    if isinstance(t, Tensor):
        buffer.index_copy_(0, t.view(1), value.to(buffer.dtype).unsqueeze(0))
    else:
        buffer[t] = value
