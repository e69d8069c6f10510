"""What the sampler steps: ``N`` envs as tensors, whatever runs them.

:class:`~steinrl.rl.rollout.Sampler` is written once, against :class:`VectorTask`. Two
adapters provide it:

- :class:`HostTask` wraps any Gymnasium ``VectorEnv`` with next-step autoreset (steinrl's
  numpy tasks, ``gymnasium.make_vec`` of MuJoCo and other ids, EnvPool): numpy arrays
  become CPU tensors without a copy (``torch.from_numpy``), actions go back the same way.
  Actions are checked on the host (free there): a non-finite one raises
  :class:`NonFiniteAction` naming its envs before the env sees it.
- :class:`DeviceTask` wraps a :class:`steinrl.envs.torch_core.TorchVectorTask` (the torch
  twins of steinrl's tasks) on the training device: everything stays there, and nothing in
  :meth:`DeviceTask.step` synchronises with the host.

Shapes: observations ``(N, obs_dim)`` float32, actions ``(N, *action_shape)``, rewards
``(N,)`` in the env's float dtype (episode returns sum them in float64), terminated / truncated ``(N,)`` bool.
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from steinrl.rl.heads import space_bounds

__all__ = ["VectorTask", "HostTask", "DeviceTask", "NonFiniteAction"]


class NonFiniteAction(Exception):
    """A NaN or inf action; ``envs`` are the flat indices of the envs that got one."""

    def __init__(self, envs: list[int]) -> None:
        super().__init__(f"non-finite action in env(s) {envs}")
        self.envs = envs


class VectorTask(Protocol):
    """``num_envs`` envs with next-step autoreset, stepped with tensors on :attr:`device`."""

    num_envs: int
    device: torch.device
    obs_dim: int
    action_shape: tuple[int, ...]
    action_dtype: torch.dtype
    #: actions are checked for finiteness before a step (else the sampler checks after the batch)
    checks_actions: bool
    #: steps through host arrays, where a host sync costs nothing (else: keep the batch free of syncs)
    host: bool

    def reset(self, seed: int | list[int] | None) -> Tensor:
        """Fresh episodes in every env; observations ``(N, obs_dim)`` float32."""

    def step(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(obs, reward, terminated, truncated)`` after ``actions`` (clipped to the action bounds)."""

    def get_state(self, group: int = 0, groups: int = 1) -> dict[str, Any] | None:
        """What continues the envs of seed group ``group`` (of ``groups``) exactly, as tensors
        and plain data (None: cannot be saved)."""

    def set_state(self, states: list[dict[str, Any]]) -> None:
        """Continue from one :meth:`get_state` per seed group."""


class HostTask:
    """A Gymnasium ``VectorEnv`` seen as a :class:`VectorTask` of CPU tensors (zero-copy).

    :param envs: a vector env with next-step autoreset.
    """

    device = torch.device("cpu")
    checks_actions = True
    host = True  #: steps through host arrays (a host sync costs nothing)

    def __init__(self, envs: gym.vector.VectorEnv) -> None:
        mode = envs.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
        if mode != gym.vector.AutoresetMode.NEXT_STEP:
            raise ValueError(f"steinrl needs next-step autoreset vector envs, got {mode}")
        self.envs = envs
        self.num_envs = envs.num_envs
        space = envs.single_action_space
        self.obs_dim = int(np.prod(envs.single_observation_space.shape))
        self.action_shape = tuple(space.shape)
        np_dtype = np.float32 if space.dtype == np.float64 else space.dtype
        self.action_dtype = torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype
        self._bounds = space_bounds(space)

    def _obs(self, obs: Any) -> Tensor:
        return torch.from_numpy(np.asarray(obs, dtype=np.float32).reshape(self.num_envs, self.obs_dim))

    def reset(self, seed: int | list[int] | None) -> Tensor:
        obs, _ = self.envs.reset(seed=seed)
        return self._obs(obs)

    def step(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        a = actions.numpy()
        if a.dtype.kind == "f":
            if not np.isfinite(a).all():
                raise NonFiniteAction(np.flatnonzero(~np.isfinite(a).reshape(self.num_envs, -1).all(1)).tolist())
            if self._bounds is not None:  # (np.clip costs several times more than these two)
                a = np.minimum(np.maximum(a, self._bounds[0]), self._bounds[1])
        obs, rew, term, trunc, _ = self.envs.step(a)
        return (self._obs(obs), torch.from_numpy(np.asarray(rew)),
                torch.from_numpy(np.asarray(term, dtype=bool)), torch.from_numpy(np.asarray(trunc, dtype=bool)))

    def get_state(self, group: int = 0, groups: int = 1) -> dict[str, Any] | None:
        if groups != 1:
            raise ValueError("host envs run one seed group")
        if not hasattr(self.envs, "get_state"):
            return None  # arrays as tensors: loadable with weights_only=True
        return {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in self.envs.get_state().items()}

    def set_state(self, states: list[dict[str, Any]]) -> None:
        (state,) = states
        self.envs.set_state({k: v.numpy() if isinstance(v, Tensor) else v for k, v in state.items()})

    def close(self) -> None:
        self.envs.close()


class DeviceTask:
    """A :class:`~steinrl.envs.torch_core.TorchVectorTask` as a :class:`VectorTask` (on its device).

    :param task: the torch task; every steinrl task has one action in ``[-1, 1]``.
    """

    checks_actions = False
    host = False
    action_shape = (1,)
    action_dtype = torch.float32

    def __init__(self, task: Any) -> None:
        self.task = task
        self.num_envs, self.device, self.obs_dim = task.num_envs, task.device, task.obs_dim

    def reset(self, seed: int | list[int] | None) -> Tensor:
        return self.task.reset(seed=seed).float()

    def step(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        obs, rew, term, trunc = self.task.step(actions.clamp(-1.0, 1.0))
        return obs.float(), rew, term, trunc

    def get_state(self, group: int = 0, groups: int = 1) -> dict[str, Any] | None:
        """The task's state (``state`` ``(state_dim, N)``: envs are columns; ``steps``,
        ``prev_done`` ``(N,)``; ``rng``: one generator state per group), cut to ``group``."""
        full = self.task.get_state()
        if groups == 1:
            return full
        return {"state": full["state"].chunk(groups, dim=1)[group].clone(),
                "steps": full["steps"].chunk(groups)[group].clone(),
                "prev_done": full["prev_done"].chunk(groups)[group].clone(), "rng": [full["rng"][group]]}

    def set_state(self, states: list[dict[str, Any]]) -> None:
        if len(states) == 1:
            self.task.set_state(states[0])
            return
        self.task.set_state({"state": torch.cat([s["state"] for s in states], dim=1),
                             "steps": torch.cat([s["steps"] for s in states]),
                             "prev_done": torch.cat([s["prev_done"] for s in states]),
                             "rng": [s["rng"][0] for s in states]})

    def close(self) -> None:
        pass
