"""Batched torch control tasks: the base class of the torch twins of the numpy vector envs.

A :class:`TorchVectorTask` holds all its state as tensors on one device (``cpu``, ``cuda``,
...) in one floating dtype (float32 or float64) and steps all envs with a fixed sequence of
tensor operations: no host synchronisation inside :meth:`~TorchVectorTask.step` (no
``.item()``, no Python branching on tensor values, no ``nonzero()``), so a rollout can stay
on the device. Semantics are those of :class:`steinrl.envs.core.TaskVectorEnv`:

- actions ``a ∈ [−1, 1]`` scale linearly to the force / torque and are clipped;
- reward and termination are evaluated on the state after the step; an env is truncated
  when its step counter reaches ``max_episode_steps``;
- next-step autoreset: on the step after an env terminated or was truncated, it is reset
  instead of stepped (it returns the reset observation, reward 0, both flags False, and its
  step counter restarts at 0).

Shapes (``n = num_envs``): state ``(state_dim, n)`` (rows by physical name, as in numpy);
observation ``(n, obs_dim)``; reward ``(n,)`` in the task dtype; terminated / truncated
``(n,)`` bool. Reset states are drawn from a ``torch.Generator`` on the device: the
distribution is the numpy task's, the stream is not numpy's.

Invalid actions are not checked inside ``step`` (that would need a host sync): NaN
propagates into the state of its env; only the shape is checked.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

import torch

from .core import DEFAULT_MAX_EPISODE_STEPS, BatchedTask


def semi_implicit_euler(positions: torch.Tensor, velocities: torch.Tensor, dv: torch.Tensor,
                        caps: tuple[torch.Tensor, torch.Tensor] | float, dt: float) -> None:
    """Box2D's integrator step, in place (the numpy :func:`steinrl.envs.core.semi_implicit_euler`
    per coordinate): velocities first, each ``v += dv`` clamped to ``±cap`` (Box2D's
    per-step motion caps), then positions with the new velocities, ``q += dt · v``.

    :param positions: ``(k, n)`` rows of the state (a view: updated in place).
    :param velocities: ``(k, n)`` their velocity rows (a view: updated in place).
    :param dv: ``(k, n)`` the velocity changes.
    :param caps: one cap for every row, or per row ``(−caps, caps)`` as ``(k, 1)`` tensors.
    """
    low, high = (-caps, caps) if isinstance(caps, float) else caps
    velocities.add_(dv).clamp_(low, high)
    positions.add_(velocities, alpha=dt)


class TorchVectorTask(ABC):
    """``num_envs`` copies of one control task, stepped together on ``device``.

    Subclasses set :attr:`numpy_task` (their numpy twin, where names, sizes, the action
    scale and the physical constants come from) and implement :meth:`sample_initial_state`,
    :meth:`advance` and :meth:`observe`.

    :param num_envs: batch size ``n``.
    :param device: torch device of every tensor.
    :param dtype: ``torch.float32`` or ``torch.float64``, for state, observations and rewards.
    :param max_episode_steps: episode length before truncation (500 in the papers).
    :param groups: G > 1 splits the envs into G consecutive blocks, each drawing its reset
        states from its own generator (seeds trained in one batch keep their own streams).
    """

    #: The numpy task this one mirrors (e.g. :class:`steinrl.envs.cartpole.CartpoleTask`).
    numpy_task: ClassVar[type[BatchedTask]]

    def __init__(
        self,
        num_envs: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
        groups: int = 1,
    ) -> None:
        if int(num_envs) < 1:
            raise ValueError(f"{self.name}: num_envs must be >= 1, got {num_envs}")
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"{self.name}: dtype must be torch.float32 or torch.float64, got {dtype}")
        self.num_envs = n = int(num_envs)
        self.device = torch.device(device)
        self.dtype = dtype
        self.max_episode_steps = int(max_episode_steps)
        if groups < 1 or n % groups:
            raise ValueError(f"{self.name}: groups must divide num_envs={n}, got {groups}")
        self.generators = [torch.Generator(device=self.device) for _ in range(groups)]
        for generator in self.generators:
            generator.seed()
        self.state = torch.zeros((self.state_dim, n), dtype=dtype, device=self.device)
        self.steps = torch.zeros(n, dtype=torch.int64, device=self.device)
        self._prev_done = torch.zeros(n, dtype=torch.bool, device=self.device)
        self._action_shapes = ((n,), (n, 1))

    @property
    def name(self) -> str:
        """Task name of the numpy twin (e.g. ``"CartpoleSwingUp"``)."""
        return self.numpy_task.name

    @property
    def state_dim(self) -> int:
        """Rows of the state tensor."""
        return self.numpy_task.state_dim

    @property
    def obs_dim(self) -> int:
        """Length of one observation vector."""
        return self.numpy_task.obs_dim

    def tensor(self, values: object) -> torch.Tensor:
        """``values`` (array-like) as a tensor of the task's dtype on its device."""
        return torch.as_tensor(values, dtype=self.dtype, device=self.device)

    @property
    def generator(self) -> torch.Generator:
        """The reset generator (of the first group)."""
        return self.generators[0]

    @abstractmethod
    def draw_initial_state(self, n: int, generator: torch.Generator, steps: tuple[int, ...] = ()) -> torch.Tensor:
        """``n`` initial states ``(*steps, state_dim, n)`` drawn with ``generator`` (``steps``:
        leading dims of independent draws, in the generator's order: one draw of ``(S, state_dim,
        n)`` gives S successive draws of ``(state_dim, n)``)."""

    def sample_initial_state(self, n: int, steps: int | None = None) -> torch.Tensor:
        """``n`` initial states ``(state_dim, n)``, each group's block from its own generator;
        with ``steps``, the reset states of that many steps at once, ``(steps, state_dim, n)``
        (on the CPU the same numbers as ``steps`` successive calls, for a uniform draw and any
        normal draw of at least 16 values per group)."""
        lead = () if steps is None else (int(steps),)
        if len(self.generators) == 1:
            return self.draw_initial_state(n, self.generators[0], lead)
        per_group = n // len(self.generators)
        return torch.cat([self.draw_initial_state(per_group, g, lead) for g in self.generators], dim=-1)

    @abstractmethod
    def advance(self, state: torch.Tensor, effort: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Advance ``state`` ``(state_dim, n)`` in place by one env step under ``effort``
        ``(n,)`` (N or N m, clipped); return the reward ``(n,)`` and the termination flags
        ``(n,)`` bool of the new state."""

    @abstractmethod
    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """Observation ``(n, obs_dim)`` of ``state`` ``(state_dim, n)``, a new tensor."""

    def reset(self, seed: int | Sequence[int] | None = None) -> torch.Tensor:
        """Reset every env (``seed`` reseeds the generator, or one seed per group); returns obs ``(n, obs_dim)``."""
        if seed is not None:
            return self.start(self.draw_reset(seed))
        return self.start(self.sample_initial_state(self.num_envs))

    def draw_reset(self, seed: int | Sequence[int]) -> torch.Tensor:
        """:meth:`reset`'s draw alone: reseed (one seed per group) and draw every env's initial
        state ``(state_dim, n)``, changing nothing else."""
        seeds = [seed] if isinstance(seed, int) else list(seed)
        if len(seeds) != len(self.generators):
            raise ValueError(f"{self.name}: {len(self.generators)} group(s) need as many seeds, got {len(seeds)}")
        for generator, s in zip(self.generators, seeds):
            generator.manual_seed(int(s))
        return self.sample_initial_state(self.num_envs)

    def start(self, initial: torch.Tensor) -> torch.Tensor:
        """Start fresh episodes from ``initial`` ``(state_dim, n)`` (state written in place);
        returns the observations ``(n, obs_dim)``."""
        self.state.copy_(initial)
        self.steps.zero_()
        self._prev_done.zero_()
        return self.observe(self.state)

    def get_state(self) -> dict[str, torch.Tensor]:
        """Everything that decides the next steps (state, step counters, pending autoresets,
        the reset generator's state), as tensors a checkpoint can hold."""
        return {"state": self.state.clone(), "steps": self.steps.clone(), "prev_done": self._prev_done.clone(),
                "rng": [g.get_state() for g in self.generators]}

    def device_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors a step reads and writes in place, by name (a replayed CUDA graph needs each to
        keep its storage)."""
        return {"state": self.state, "steps": self.steps, "prev_done": self._prev_done}

    def set_state(self, saved: dict[str, torch.Tensor]) -> None:
        """Continue exactly from :meth:`get_state`."""
        self.state.copy_(saved["state"].to(device=self.device, dtype=self.dtype))
        self.steps.copy_(saved["steps"])
        self._prev_done.copy_(saved["prev_done"])
        for generator, state in zip(self.generators, saved["rng"]):
            generator.set_state(state)

    def step(self, actions: torch.Tensor, reset_states: torch.Tensor | None = None,
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of every env under ``actions`` ``(n,)`` or ``(n, 1)`` in [−1, 1] (any
        floating dtype, on the device), with next-step autoreset.

        :param reset_states: ``(state_dim, n)`` where the envs that autoreset at this step
            start (a row of :meth:`sample_initial_state` ``(n, steps)``, drawn once for many
            steps); None draws them now. Without a generator in it, the step traces whole
            (``torch.compile(fullgraph=True)``).
        :returns: ``(obs (n, obs_dim), reward (n,), terminated (n,) bool, truncated (n,) bool)``.
        :raises ValueError: wrong action shape.
        """
        if tuple(actions.shape) not in self._action_shapes:
            raise ValueError(f"{self.name}: actions must have shape {self._action_shapes[0]} or "
                             f"{self._action_shapes[1]}, got {tuple(actions.shape)}")
        limit = self.numpy_task.max_action_effort
        effort = (actions.reshape(self.num_envs).to(self.dtype) * limit).clamp_(-limit, limit)
        reward, terminated = self.advance(self.state, effort)
        reset = self._prev_done  # next-step autoreset of the envs that ended last step
        fresh = self.sample_initial_state(self.num_envs) if reset_states is None else reset_states
        torch.where(reset, fresh, self.state, out=self.state)  # in place: the state keeps its storage
        self.steps.add_(1).masked_fill_(reset, 0)
        truncated = self.steps >= self.max_episode_steps  # (False where reset: max_episode_steps >= 1)
        reward = reward.masked_fill_(reset, 0.0)
        terminated = terminated.masked_fill_(reset, False)
        torch.logical_or(terminated, truncated, out=self._prev_done)
        return self.observe(self.state), reward, terminated, truncated
