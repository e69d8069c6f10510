"""What the sampler steps: ``N`` envs as tensors, whatever runs them.

:class:`~steinrl.rl.rollout.Sampler` is written once, against :class:`VectorTask`. Two
adapters provide it:

- :class:`HostTask` wraps any Gymnasium ``VectorEnv`` with next-step autoreset (steinrl's
  numpy tasks, ``gymnasium.make_vec`` of MuJoCo and other ids, EnvPool): it steps with numpy
  arrays, which the sampler writes into numpy views of its CPU tensors (the batch is those
  tensors, no copy).
  Actions are checked on the host (free there): a non-finite one raises
  :class:`NonFiniteAction` naming its envs before the env sees it.
- :class:`DeviceTask` wraps a :class:`steinrl.envs.torch_core.TorchVectorTask` (the torch
  twins of steinrl's tasks) on the training device: everything stays there, and nothing in
  :meth:`DeviceTask.step` synchronises with the host.

Shapes: observations ``(N, obs_dim)`` float32, actions ``(N, *action_shape)``, rewards
``(N,)`` in the env's float dtype (episode returns sum them in float64), terminated / truncated ``(N,)`` bool.
"""

from __future__ import annotations

import warnings
import zlib
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from steinrl.envs.vector_state import get_sync_state, set_sync_state, sync_state_supported
from steinrl.rl.draws import Draws
from steinrl.rl.heads import space_bounds
from steinrl.rl.timeaxis import row

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

    def begin(self, steps: int, draws: Draws | None = None) -> None:
        """A batch of at most ``steps`` steps starts: draw what its steps need at random (a
        device task: every step's reset states, at once, through ``draws`` where given)."""

    def step(self, actions: Any, t: Any) -> tuple[Any, Any, Any, Any]:
        """``(obs, reward, terminated, truncated)`` after ``actions`` (clipped to the action
        bounds) at the batch's step ``t`` (an int, or a 0-dim device tensor): numpy arrays for
        a host task, tensors on the device for a device task."""

    def get_state(self, group: int = 0, groups: int = 1) -> dict[str, Any] | None:
        """What continues the envs of seed group ``group`` (of ``groups``) exactly, as tensors
        and plain data (None: cannot be saved)."""

    def set_state(self, states: list[dict[str, Any]]) -> None:
        """Continue from one :meth:`get_state` per seed group."""

    def persistent_tensors(self) -> dict[str, Tensor]:
        """The envs' tensors a batch reads from the last one, by name (a replayed CUDA graph keeps
        their storage; none on the host)."""


def _tensors(x: Any) -> Any:
    """Numpy arrays (nested in dicts and lists) as tensors."""
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    if isinstance(x, dict):
        return {k: _tensors(v) for k, v in x.items()}
    return [_tensors(v) for v in x] if isinstance(x, list) else x


def _arrays(x: Any) -> Any:
    """The inverse of :func:`_tensors`."""
    if isinstance(x, Tensor):
        return x.cpu().numpy()
    if isinstance(x, dict):
        return {k: _arrays(v) for k, v in x.items()}
    return [_arrays(v) for v in x] if isinstance(x, list) else x


def _restream_seed(state: dict[str, Any]) -> int:
    """A seed for the reset stream of envs restored from another backend or device, whose
    generator state cannot move: a function of the saved physical state (reproducible)."""
    return zlib.crc32(torch.as_tensor(state["state"]).double().cpu().numpy().tobytes())


def _moved(kind: str, saved: str) -> None:
    warnings.warn(f"continuing envs saved on {saved} on {kind}: the episodes in progress continue, the envs' reset "
                  "streams are re-seeded (the run is reproducible, not identical to one that stayed)", stacklevel=3)


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

    def begin(self, steps: int, draws: Draws | None = None) -> None:
        """Nothing to draw: the envs draw their own resets."""

    def step(self, actions: np.ndarray, t: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One step of every env; numpy in, numpy out (the sampler writes them into numpy
        views of its tensors)."""
        a = actions
        if a.dtype.kind == "f":
            if not np.isfinite(a).all():
                raise NonFiniteAction(np.flatnonzero(~np.isfinite(a).reshape(self.num_envs, -1).all(1)).tolist())
            if self._bounds is not None:  # (np.clip costs several times more than these two)
                a = np.minimum(np.maximum(a, self._bounds[0]), self._bounds[1])
        obs, rew, term, trunc, _ = self.envs.step(a)
        return np.asarray(obs, dtype=np.float32).reshape(self.num_envs, self.obs_dim), rew, term, trunc

    def get_state(self, group: int = 0, groups: int = 1) -> dict[str, Any] | None:
        if groups != 1:
            raise ValueError("host envs run one seed group")
        if hasattr(self.envs, "get_state"):  # steinrl's numpy tasks
            state, kind = self.envs.get_state(), "numpy"
        elif sync_state_supported(self.envs):  # Gymnasium's SyncVectorEnv of MuJoCo / classic-control envs
            state, kind = get_sync_state(self.envs), "gymnasium-sync"
        else:
            return None
        return {**_tensors(state), "kind": kind}  # arrays as tensors: loadable with weights_only=True

    def set_state(self, states: list[dict[str, Any]]) -> None:
        """Continue from :meth:`get_state`; a state saved by a :class:`DeviceTask` (the torch
        twin: same physical state) continues its episodes with a re-seeded reset stream."""
        (state,) = states
        state = {k: v for k, v in state.items() if k != "kind"}
        saved = states[0].get("kind", "numpy")
        if saved == "gymnasium-sync":
            set_sync_state(self.envs, _arrays(state))
            return
        if saved != "numpy":
            _moved("numpy envs", saved)
            state["rng"] = np.random.default_rng(_restream_seed(state)).bit_generator.state
            state["state"] = state["state"].double()
        self.envs.set_state({k: v.cpu().numpy() if isinstance(v, Tensor) else v for k, v in state.items()})

    def persistent_tensors(self) -> dict[str, Tensor]:
        return {}

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
        self.action_shape = tuple(getattr(task, "action_shape", (1,)))  # (MuJoCo Warp tasks: (act_dim,))
        self._resets: Tensor | None = None  # (steps, state_dim, N): this batch's reset states

    def reset(self, seed: int | list[int] | None) -> Tensor:
        return self.task.reset(seed=seed).float()

    def begin(self, steps: int, draws: Draws | None = None) -> None:
        """Draw the reset states of the batch's ``steps`` steps in one call per seed group (the
        same stream as one draw per step; through ``draws``, as ``"reset_states"``): the steps
        themselves then draw nothing."""
        def maker(iteration: int) -> Tensor:
            return self.task.sample_initial_state(self.num_envs, steps)

        self._resets = maker(0) if draws is None else draws("reset_states", maker)

    def draw_reset(self, seed: int | list[int]) -> Tensor:
        """A fresh start's initial states ``(state_dim, N)`` from the reseeded generators (nothing else changes)."""
        return self.task.draw_reset(seed)

    def start(self, initial: Tensor) -> Tensor:
        """Every env starts a fresh episode from ``initial`` (in place); the observations ``(N, obs_dim)``."""
        return self.task.start(initial).float()

    def step(self, actions: Tensor, t: Any) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The task's step (it clips the actions to [-1, 1]); an env that autoresets takes its
        state from the batch's draw for step ``t`` (drawn now without :meth:`begin`)."""
        obs, rew, term, trunc = self.task.step(actions, None if self._resets is None else row(self._resets, t))
        return obs.float(), rew, term, trunc

    def get_state(self, group: int = 0, groups: int = 1) -> dict[str, Any] | None:
        """The task's state (``state`` ``(state_dim, N)``: envs are columns; ``steps``,
        ``prev_done`` ``(N,)``; ``rng``: one generator state per group), cut to ``group``."""
        full = self.task.get_state()
        kind = f"torch:{self.device.type}"
        if groups == 1:
            return {**full, "kind": kind}
        return {"state": full["state"].chunk(groups, dim=1)[group].clone(),
                "steps": full["steps"].chunk(groups)[group].clone(),
                "prev_done": full["prev_done"].chunk(groups)[group].clone(), "rng": [full["rng"][group]], "kind": kind}

    def set_state(self, states: list[dict[str, Any]]) -> None:
        """Continue from one :meth:`get_state` per group. Physical state, step counters and
        pending resets move to this device whatever saved them (numpy envs included); a
        generator state saved on another kind of device (or by numpy) cannot, and is replaced
        by a re-seeded stream (one warning). Generator states are read as CPU byte tensors."""
        kind = f"torch:{self.device.type}"
        states = [self._own(s, kind) for s in states]
        self.task.set_state({"state": torch.cat([s["state"] for s in states], dim=1),
                             "steps": torch.cat([torch.as_tensor(s["steps"]).cpu() for s in states]),
                             "prev_done": torch.cat([torch.as_tensor(s["prev_done"]).cpu() for s in states]),
                             "rng": [s["rng"] for s in states]})

    def _own(self, state: dict[str, Any], kind: str) -> dict[str, Any]:
        """One group's saved state as this task takes it: its rng one CPU byte tensor."""
        saved = state.get("kind", kind)
        if saved == kind:
            rng = state["rng"][0] if isinstance(state["rng"], list) else state["rng"]
            return {**state, "rng": torch.as_tensor(rng, device="cpu")}
        _moved(kind, saved)
        generator = torch.Generator(device=self.device).manual_seed(_restream_seed(state))
        return {**state, "rng": generator.get_state()}

    def persistent_tensors(self) -> dict[str, Tensor]:
        return self.task.device_tensors()

    def close(self) -> None:
        pass
