"""What one SVPG update reports: its diagnostics, on the device until the job reads them with
every other logged value in one host transfer (:func:`steinrl.rl.job.to_host`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

__all__ = ["UpdateStats"]


@dataclass
class UpdateStats:
    """One update's diagnostics as tensors: per particle ``(M,)`` or per group ``(G,)`` / 0-dim."""

    surrogate: Tensor  # (M,)
    log_prior: Tensor  # (M,)
    entropy: Tensor  # (M,)
    direction: dict[str, Tensor]  # the particle update's: bandwidth, kernel_mean, ...: (G,) or 0-dim
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
        rows.update({k: v.detach().reshape(-1).expand(groups) for k, v in self.direction.items()})
        return rows
