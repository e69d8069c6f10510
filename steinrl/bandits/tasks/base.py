"""Bandit data, exact regret, the task base class, its registry and :func:`make_task`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from steinrl.errors import ConfigError
from steinrl.registry import Option, Registry, options_of

__all__ = ["BANDIT_TASKS", "BanditData", "BanditTask", "TaskSettings", "make_task", "regret"]


@dataclass(frozen=True)
class BanditData:
    """n rounds of a bandit task with k arms and d-dimensional contexts.

    :param contexts: ``(n, d)`` float32, the context x_t of each round.
    :param expected_rewards: ``(n, k)`` float64, E[r | x_t, a] for every arm a.
    :param rewards: ``(n, k)`` float64, one sampled reward r_t(a) for every arm a (an agent
        sees only ``rewards[t, a_t]``).
    """

    contexts: np.ndarray
    expected_rewards: np.ndarray
    rewards: np.ndarray

    def __post_init__(self) -> None:
        n, k = self.expected_rewards.shape
        if self.contexts.ndim != 2 or len(self.contexts) != n or self.rewards.shape != (n, k):
            raise ValueError(f"inconsistent shapes: contexts {self.contexts.shape}, expected_rewards "
                             f"{self.expected_rewards.shape}, rewards {self.rewards.shape}")

    def __len__(self) -> int:
        return len(self.contexts)

    @property
    def num_arms(self) -> int:
        return self.expected_rewards.shape[1]



def regret(expected_rewards: np.ndarray, arms: np.ndarray) -> np.ndarray:
    """Per-round regret E[r | x_t, a*] − E[r | x_t, a_t], ``(n,)`` for ``expected_rewards (n, k)``, ``arms (n,)``.

    Exact (no reward noise): the optimal policy has regret 0; ``.cumsum()`` gives R_T.
    """
    arms = np.asarray(arms)
    pulled = np.take_along_axis(expected_rewards, arms[:, None], axis=1)[:, 0]
    return expected_rewards.max(axis=1) - pulled


@dataclass(frozen=True)
class TaskSettings:
    """A task's ``task`` config section (none: a task without options)."""


class BanditTask:
    """A contextual bandit: ``num_arms`` arms, contexts of size ``context_dim``.

    Subclasses declare ``name`` (their registry name) and ``Settings`` (the ``task`` config
    section, a frozen dataclass of :func:`~steinrl.registry.setting` s, each also a constructor
    keyword and an attribute of the same name; ``options`` is derived from it), and implement
    :meth:`sample`.
    """

    name: ClassVar[str]
    Settings: ClassVar[type] = TaskSettings
    options: ClassVar[tuple[Option, ...]] = ()
    num_arms: int
    context_dim: int
    #: (low, high) bound of every context coordinate (the Gymnasium observation space's).
    context_bounds: ClassVar[tuple[float, float]] = (-np.inf, np.inf)
    #: True: the rounds are one pass over a finite data set (no row twice), so a run draws
    #: all its rounds in one :meth:`sample` call rather than in independent blocks.
    one_pass: bool = False

    @classmethod
    def from_options(cls, **options: Any) -> BanditTask:
        """Build the task from its declared options (what :func:`make_task` calls)."""
        return cls(**options)

    def sample(self, n: int, rng: np.random.Generator) -> BanditData:
        """Draw ``n`` independent rounds; the same ``rng`` state gives the same data."""
        raise NotImplementedError

    @classmethod
    def check_options(cls, values: dict[str, Any]) -> None:
        """Raise :class:`ConfigError` if one of ``values`` (option name -> value) breaks its option's
        declared type, choices or check; names that are not options are ignored."""
        for option in options_of(cls):
            if option.name not in values:
                continue
            value = values[option.name]
            if not _fits_type(value, option.type):
                raise ConfigError(f"bandit task {cls.name!r}: {option.name} must be {_type_names(option.type)}, "
                                  f"got {value!r}")
            allowed = option.allowed_choices()
            if allowed is not None and value not in allowed:
                raise ConfigError(f"bandit task {cls.name!r}: {option.name} must be one of {allowed}, got {value!r}")
            problem = option.check(value) if option.check is not None and value is not None else None
            if problem:
                raise ConfigError(f"bandit task {cls.name!r}: {option.name} {problem}, got {value!r}")

    def __repr__(self) -> str:
        settings = ", ".join(f"{o.name}={getattr(self, o.name)!r}" for o in options_of(type(self)))
        return f"{type(self).__name__}({settings})"


#: Registered bandit tasks: name -> :class:`BanditTask` subclass.
BANDIT_TASKS: Registry[type[BanditTask]] = Registry("bandit task")


def make_task(name: str, **options: Any) -> BanditTask:
    """Build a registered task by name; ``options`` are its declared options.

    An unknown task or option raises :class:`ConfigError` listing the valid ones.
    """
    cls = BANDIT_TASKS.get(name)
    accepted = [o.name for o in options_of(cls)]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(f"bandit task {name!r} does not take {unknown}; its options are {accepted}")
    return cls.from_options(**options)


def _type_names(declared: Any) -> str:
    kinds = declared if isinstance(declared, tuple) else (declared,)
    return " or ".join("null" if kind is None else getattr(kind, "__name__", str(kind)) for kind in kinds)


def _fits_type(value: Any, declared: Any) -> bool:
    """Whether ``value`` fits an :class:`Option` type (``int``, ``float``, ``str``, ``bool``, ``None``, or a tuple)."""
    for kind in declared if isinstance(declared, tuple) else (declared,):
        if kind is None and value is None or kind in (str, bool) and isinstance(value, kind):
            return True
        number = isinstance(value, (int, np.integer) if kind is int else (int, float, np.integer, np.floating))
        if kind in (int, float) and number and not isinstance(value, bool):
            return True
    return False
