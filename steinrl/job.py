"""The Job contract: what a kind of run (RL, bandits, ...) gives the run stack.

``steinrl.run`` (the Trainer, the run loop, the CLI, sweeps, plots, ``evaluate``) knows
jobs only through this protocol: it never tests a job's name or its metric's name.
A job class declares its algorithms and config sections, its headline metric and the
direction in which that metric is better, what its curves are drawn against, how a
policy is loaded from one of its checkpoints; an instance is built from a resolved config
and a list of seeds (one or several, trained as one batch) and is stepped one iteration
at a time.

Shapes: a job of S seeds returns, per :meth:`Job.step`, S scalar dicts (seed order).

What a job reads of its config: :class:`RunConfig` (the top-level values every run has and the
``run`` section, :class:`RunSettings`), extended by each job with its own typed sections
(:class:`steinrl.rl.settings.RLConfig`, ...); :class:`steinrl.run.config.Config` is the
resolved config that has them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from steinrl.registry import Option, at_least_one, non_negative, setting

__all__ = ["Job", "Chosen", "HeadlineMode", "RunConfig", "RunSettings", "headline_summary"]

#: ``max``: a larger headline value is better (returns); ``min``: smaller is better (regret).
HeadlineMode = Literal["max", "min"]


@dataclass(frozen=True)
class RunSettings:
    """The ``run`` config section: what the run stack does around any job (directories,
    checkpoints, the best checkpoint's held-out evaluations, logging, threads) and whether an
    RL job may replay its iterations as a CUDA graph; bookkeeping, not the algorithm."""

    logdir: str = setting("runs", "Root directory; a run lives in <logdir>/<env>/<algo>/<run_name>.")
    run_name: str | None = setting(None, "Name of the run directory (null: seed<seed>-<timestamp>).",
                                   kind=(str, None))
    checkpoint_every: int = setting(50, "A checkpoint every this many iterations, and at the end.",
                                    check=at_least_one)
    best_every: int = setting(25, "A held-out evaluation every this many iterations keeps the best policy in best.pt "
                              "(0: none). It costs about one iteration each (docs/usage.md#the-best-checkpoint).",
                              check=non_negative)
    best_episodes: int = setting(5, "Held-out episodes per particle of each best_every evaluation.",
                                 check=lambda v: None if v >= 1 else "must be >= 1")
    progress: bool = setting(True, "A progress bar where stderr is a terminal (false, or no terminal: a line every "
                             "log_every iterations).")
    log_every: int = setting(10, "Without a progress bar, a line every this many iterations.", check=at_least_one)
    tensorboard: bool = setting(True, "Write TensorBoard event files.")
    report_every: int = setting(
        1, "steinrl sweep: iterations per Ray Tune result (the last one's metrics, the latest returns; a result costs "
        "Ray time: many short iterations report every 100 or so, docs/sweeps.md).", check=at_least_one)
    cuda_graph: str = setting(
        "auto", "RL on CUDA: replay each iteration as one CUDA graph (auto: where the run allows it, docs/gpu.md; on: "
        "or an error naming why not; off: eager).", choices=("auto", "on", "off"))
    threads: int = setting(
        1, "Torch intra-op CPU threads, set for the process by every Trainer (the CLI, the Python API, SB3's SVPG, "
        "sweep trials alike; 0: leave torch's own or the caller's setting). 1 never oversubscribes a busy machine; "
        "what 1 and 2 threads measured: docs/benchmarks.md#torch-threads.", check=non_negative)


@dataclass(frozen=True)
class Chosen:
    """The part names a config picks before its sections are built (:meth:`Job.sections`): its
    task, and its prior and critic where it names them (None: the section's default)."""

    env: str | None = None
    prior: str | None = None
    critic: str | None = None


class RunConfig(Protocol):
    """A resolved config as every job reads it (:class:`steinrl.run.config.Config`): the top-level
    values every run has, the ``run`` section and :meth:`replace`. Each job's own protocol adds
    its top-level keys and typed sections (attributes, frozen)."""

    algo: str
    env: str
    seed: int
    device: str
    particles: int
    run: RunSettings

    def replace(self, overrides: Mapping[str, Any], where: str = "Config.replace") -> RunConfig:
        """A new config with ``overrides`` (nested, dotted or bare keys) applied and validated."""

    def to_dict(self) -> dict[str, Any]:
        """A nested plain dict (YAML, JSON)."""

    def __contains__(self, key: object) -> bool:
        """Whether the config has this top-level key or section (``"critic" in cfg``)."""


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
    def sections(cls, method: str | None, estimator: str, chosen: Chosen) -> dict[str, type]:
        """The config sections of ``<method>-<estimator>`` (``chosen``: the parts named inside the
        config): section -> its settings class (a frozen dataclass of :func:`~steinrl.registry.setting` s;
        the section's options are derived from it)."""

    @classmethod
    def summary(cls, rows: list[dict[str, float]]) -> str:
        """One line summarising a run's metric rows (final and best headline value)."""

    @staticmethod
    def progress_fields(scalars: dict[str, float]) -> dict[str, str]: ...

    @staticmethod
    def check_env(name: str) -> None: ...

    @staticmethod
    def check_config(cfg: RunConfig) -> None:
        """Raise a one-line ConfigError where keys of the resolved config ``cfg`` (the job's own
        :class:`RunConfig`) that bound each other do not fit, before anything is built."""

    @classmethod
    def load_policy(cls, cfg: RunConfig, job_state: dict[str, Any], device: str) -> Any:
        """The acting policy held by ``job_state`` (a checkpoint's ``job`` entry), or None if
        this kind of run has no policy to act with (its evaluation is its logged metrics)."""

    @staticmethod
    def batch_config(cfg: RunConfig, seeds: list[int]) -> RunConfig:
        """The config every seed of a batch of several records (what the batch needs pinned),
        or a ConfigError if this kind of run cannot batch seeds."""

    @staticmethod
    def batch_note(cfg: RunConfig, seeds: list[int]) -> str | None:
        """One line for a user about to train ``seeds`` as one batch (``cfg``: the config before
        :meth:`batch_config`): where a seed's run in the batch is not the run of that seed alone,
        whose run it is; None: nothing to say."""

    # --- an instance: built from a config and its seeds ---------------------------------
    def __init__(self, cfg: RunConfig, seeds: list[int] | None = None) -> None: ...

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
