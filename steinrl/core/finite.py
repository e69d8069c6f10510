"""Which particles stayed finite: per-particle finiteness flags gathered without a host sync.

The particle optimizer adds its quantities (objective, gradients, parameters) as it computes
them; a job reads every flag with its other values in one host transfer and calls
:meth:`FiniteFlags.raise_if_any`.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from steinrl.errors import NonFiniteError

__all__ = ["FiniteFlags"]


class FiniteFlags:
    """Which particles stayed finite in each quantity of one iteration: ``(M,)`` bool per
    quantity, in the order first seen, gathered on the device without a host sync; the job
    reads them with the iteration's other values (one transfer) and :meth:`raise_if_any`."""

    def __init__(self) -> None:
        self.flags: dict[str, Tensor] = {}

    def clear(self) -> None:
        """Forget every flag (a new iteration)."""
        self.flags.clear()

    def add(self, what: str, values: Tensor | list[Tensor | None]) -> None:
        """AND the finiteness of ``values`` (each ``(M, ...)``, floating) into quantity ``what``.

        Per particle, the sum of every value times 0 is 0 when all are finite and NaN as soon as
        one is inf or NaN (exact: no sum of zeros overflows): a few ops for the whole list,
        where a per-tensor ``isfinite(...).all()`` costs six each (a PPO update adds the
        gradients and parameters of every minibatch step)."""
        present = [values] if isinstance(values, Tensor) else [t for t in values if t is not None]
        if not present:
            return
        zeros = torch._foreach_mul([t.detach() for t in present], 0.0)
        sums = [z.reshape(z.shape[0], -1).sum(1) for z in zeros]
        ok = (sums[0] if len(sums) == 1 else torch.stack(sums).sum(0)) == 0  # (False for NaN)
        self.flags[what] = ok if what not in self.flags else self.flags[what] & ok

    @staticmethod
    def raise_if_any(host: dict[str, np.ndarray], iteration: int) -> None:
        """Raise :class:`NonFiniteError` for the first quantity (in the order computed) of
        ``host`` (:attr:`flags` on the host) that is not finite, naming its particles and
        ``iteration`` (as every message counts them: from 1)."""
        for what, ok in host.items():
            if not ok.all():
                bad = np.flatnonzero(~ok.astype(bool)).tolist()
                raise NonFiniteError(f"non-finite {what} at iteration {iteration} in particle(s) {bad}")
