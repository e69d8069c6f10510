"""What one SVPG iteration reports: its diagnostics and the finiteness of its quantities.

Both stay on the device during the iteration; the job reads them with every other logged
value in one host transfer (:func:`steinrl.rl.job.to_host`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from steinrl.errors import NonFiniteError

__all__ = ["FiniteFlags", "UpdateStats"]


class FiniteFlags:
    """Which particles stayed finite in each quantity of one iteration: ``(M,)`` bool per
    quantity, in the order first seen, gathered on the device without a host sync; the job
    reads them with the iteration's other values (one transfer) and :meth:`raise_if_any`."""

    def __init__(self) -> None:
        self.flags: dict[str, Tensor] = {}

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


@dataclass
class UpdateStats:
    """One update's diagnostics as tensors: per particle ``(M,)`` or per group ``(G,)`` / 0-dim."""

    surrogate: Tensor  # (M,)
    log_prior: Tensor  # (M,)
    entropy: Tensor  # (M,)
    svgd: dict[str, Tensor]  # bandwidth, kernel_mean, ...: (G,) or 0-dim
    value_loss: Tensor | None  # (M,)
    explained_variance: Tensor | None  # (M,), NaN where the targets are constant
    extra: dict[str, Tensor] = field(default_factory=dict)  # (M,) each: clip_fraction, approx_kl, grad_norm

    def group_means(self, groups: int = 1) -> dict[str, Tensor]:
        """The scalars logged under ``train/``, each ``(groups,)`` (one per seed), on the device."""
        columns = {"surrogate": self.surrogate, "log_prior": self.log_prior, "entropy": self.entropy}
        if self.value_loss is not None:
            columns["value_loss"] = self.value_loss
        columns.update(self.extra)
        rows = {k: v.detach().view(groups, -1).mean(1) for k, v in columns.items()}
        if self.explained_variance is not None:
            rows["explained_variance"] = self.explained_variance.view(groups, -1).nanmean(1)
        rows.update({k: v.detach().reshape(-1).expand(groups) for k, v in self.svgd.items()})
        return rows
