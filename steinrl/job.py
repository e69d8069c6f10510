"""The Job contract: what a kind of run (RL, bandits, ...) gives the run stack.

``steinrl.run`` (the Trainer, the run loop, the CLI, sweeps, plots, ``evaluate``) knows
jobs only through this protocol: it never tests a job's name or its metric's name.
A job class declares its algorithms and config sections, its headline metric and the
direction in which that metric is better, what its curves are drawn against, how a
policy is loaded from one of its checkpoints; an instance is built from a resolved config
and a list of seeds (one or several, trained as one batch) and is stepped one iteration
at a time.

Shapes: a job of S seeds returns, per :meth:`Job.step`, S scalar dicts (seed order).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from steinrl.registry import Option

__all__ = ["Job", "HeadlineMode", "headline_summary"]

#: ``max``: a larger headline value is better (returns); ``min``: smaller is better (regret).
HeadlineMode = Literal["max", "min"]


@runtime_checkable
class Job(Protocol):
    """A kind of run, stepped by :class:`steinrl.Trainer`.

    Class-level facts (read without building the job):
    """

    #: The scalar summarising a run; its final and best values end a CLI run.
    headline_metric: ClassVar[str]
    #: Whether the headline metric is better larger (``max``) or smaller (``min``).
    headline_mode: ClassVar[HeadlineMode]
    #: The scalar curves are drawn against; None: the iteration index.
    x_metric: ClassVar[str | None]
    #: Its scalars in words, for figure axes (``{"rollout/ep_rew_mean": "mean episode return"}``).
    metric_labels: ClassVar[dict[str, str]]
    #: Top-level config options of this kind of run (besides the Trainer's own).
    options: ClassVar[tuple[Option, ...]]

    @staticmethod
    def algorithm_names() -> list[str]: ...

    @staticmethod
    def parse(name: str) -> tuple[str | None, str] | None:
        """``(method, estimator)`` of an algorithm name of this job, or None."""

    @classmethod
    def sections(cls, method: Any, estimator: str, chosen: dict[str, str]) -> dict[str, tuple[Option, ...]]: ...

    @classmethod
    def summary(cls, rows: list[dict[str, float]]) -> str:
        """One line summarising a run's metric rows (final and best headline value)."""

    @staticmethod
    def progress_fields(scalars: dict[str, float]) -> dict[str, str]: ...

    @staticmethod
    def check_env(name: str) -> None: ...

    @staticmethod
    def check_config(values: Mapping[str, Mapping[str, Any]]) -> None:
        """Raise a one-line ConfigError where keys that bound each other do not fit: ``values``
        are a config's validated values by section (``""``: the top level), before it is built."""

    @classmethod
    def load_policy(cls, cfg: Any, job_state: dict[str, Any], device: str) -> Any:
        """The acting policy held by ``job_state`` (a checkpoint's ``job`` entry), or None if
        this kind of run has no policy to act with (its evaluation is its logged metrics)."""

    @staticmethod
    def batch_config(cfg: Any, seeds: list[int]) -> Any:
        """The config every seed of a batch of several records (what the batch needs pinned),
        or a ConfigError if this kind of run cannot batch seeds."""

    @staticmethod
    def batch_note(cfg: Any, seeds: list[int]) -> str | None:
        """One line for a user about to train ``seeds`` as one batch (``cfg``: the config before
        :meth:`batch_config`): where a seed's run in the batch is not the run of that seed alone,
        whose run it is; None: nothing to say."""

    # --- an instance: built from a config and its seeds ---------------------------------
    def __init__(self, cfg: Any, seeds: list[int] | None = None) -> None: ...

    @property
    def num_steps(self) -> int:
        """Iterations of the whole run."""

    def done(self, iteration: int) -> bool:
        """The run's stopping rule after ``iteration`` iterations (e.g. iterations, env steps, seconds)."""

    def step(self, iteration: int, hooks: Any = None) -> list[dict[str, float]] | None:
        """One iteration of every seed: one scalar dict per seed (None: a hook vetoed it)."""

    def state_dict(self, seed_index: int = 0) -> dict[str, Any]:
        """Seed ``seed_index``'s state, in the format of a single-seed job."""

    def load_state_dict(self, states: list[dict[str, Any]]) -> None:
        """Continue from one state per seed (:meth:`state_dict`)."""

    def close(self) -> None: ...


def headline_summary(rows: list[dict[str, float]], key: str, mode: HeadlineMode = "max",
                     steps_key: str = "time/total_env_steps") -> str:
    """``final X, best Y (key); N env steps`` from a run's metric rows (NaN rows skipped)."""
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float)) and r[key] == r[key]]
    steps = next((r[steps_key] for r in reversed(rows) if steps_key in r), None)
    done = "" if steps is None else f"; {steps:,.0f} env steps"
    if not values:
        return f"no completed episodes{done}"
    best = max(values) if mode == "max" else min(values)
    return f"final {values[-1]:.1f}, best {best:.1f} ({key}){done}"
