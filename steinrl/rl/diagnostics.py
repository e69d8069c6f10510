"""What one SVPG update reports: its diagnostics, on the device until the job reads them with
every other logged value in one host transfer (:func:`to_host`; a replayed graph's values leave
packed, :func:`pack` and :func:`unpack`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

__all__ = ["UpdateStats", "pack", "unpack", "to_host", "episode_scalars", "METRIC_LABELS"]

#: An RL run's logged scalars in words (figure axes; :attr:`PolicyGradientJob.metric_labels`).
METRIC_LABELS = {
    "rollout/ep_rew_max_particle": "best particle's mean return",
    "rollout/ep_rew_mean": "mean episode return",
    "rollout/ep_len_mean": "mean episode length",
    "rollout/episodes": "episodes per iteration",
    "train/value_loss": "value loss",
    "train/explained_variance": "explained variance",
    "train/bandwidth": "kernel bandwidth h",
    "train/kernel_mean": "mean kernel value",
    "train/entropy": "policy entropy",
    "time/fps": "env steps per second",
}


@dataclass
class UpdateStats:
    """One update's diagnostics as tensors: per particle ``(M,)`` or per group ``(G,)`` / 0-dim."""

    surrogate: Tensor  # (M,)
    log_prior: Tensor  # (M,)
    entropy: Tensor  # (M,)
    coupling_stats: dict[str, Tensor]  # the coupling's: bandwidth, kernel_mean, ...: (G,) or 0-dim
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
        rows.update({k: v.detach().reshape(-1).expand(groups) for k, v in self.coupling_stats.items()})
        return rows


def pack(values: dict[str, Tensor]) -> tuple[Tensor, list[tuple[str, tuple[int, ...]]]]:
    """Every value of an iteration in one float64 tensor on its device, and where each lies."""
    flat = torch.cat([v.detach().reshape(-1).double() for v in values.values()])
    return flat, [(name, tuple(v.shape)) for name, v in values.items()]


def unpack(flat: np.ndarray, layout: list[tuple[str, tuple[int, ...]]]) -> dict[str, np.ndarray]:
    """:func:`pack`'s values, on the host, by name."""
    out, i = {}, 0
    for name, shape in layout:
        size = int(np.prod(shape, dtype=np.int64))
        out[name] = flat[i:i + size].reshape(shape)
        i += size
    return out


def to_host(values: dict[str, Tensor]) -> dict[str, np.ndarray]:
    """Every value of an iteration, as float64 numpy arrays of their shapes, in one transfer
    from the device (one host synchronisation, however many values)."""
    flat, layout = pack(values)
    return unpack(flat.cpu().numpy(), layout)


def episode_scalars(episode_stats: np.ndarray) -> dict[str, float]:
    """Rollout scalars from a batch's ``episode_stats`` ``(3, M)`` (on the host, read by
    :func:`to_host`): SB3's ``ep_rew_mean`` / ``ep_len_mean`` and the papers' max over
    particles of each particle's mean return over the episodes it completed in the batch."""
    return_sum, length_sum, count = episode_stats  # (M,) each
    total = count.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        per_particle = return_sum / count  # NaN for a particle without a finished episode
    scalars = {
        "rollout/ep_rew_mean": float(return_sum.sum() / total) if total else float("nan"),
        "rollout/ep_len_mean": float(length_sum.sum() / total) if total else float("nan"),
        "rollout/ep_rew_max_particle": float(np.nanmax(per_particle)) if total else float("nan"),
        "rollout/episodes": float(total),
    }
    for i, value in enumerate(per_particle):
        scalars[f"particles/ep_rew_mean_{i:02d}"] = float(value)
    return scalars
