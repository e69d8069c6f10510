"""Device-resident sampling: the torch twins of the control tasks stepped on the training device.

:class:`TorchSampler` has the :class:`~steinrl.rl.rollout.Sampler`'s contract (the same
three modes, the same :class:`~steinrl.rl.rollout.Batch`), but observations, actions,
rewards, flags and the ``(T, M, E, ...)`` buffers never leave the device: the policy acts
on device tensors, the task (``steinrl.envs.torch_tasks``) steps on device tensors, and
the bookkeeping is masked arithmetic, so in the ``continuing`` and ``cut`` modes a batch
makes no host synchronisation at all. ``whole_episodes`` must learn when every env has
stopped; it asks once every ``check_every`` steps (one small transfer each).

Episode statistics are accumulated per particle on the device (``Batch.episode_stats``);
a non-finite action is flagged on the device and reported after the batch.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from steinrl.errors import NonFiniteError
from steinrl.rl.rollout import SAMPLING_MODES, Batch

__all__ = ["TorchSampler", "TorchActFn"]

#: ``act(obs (M, E, obs_dim) tensor, t) -> actions (M, E, action_dim) tensor``, on the device.
TorchActFn = Callable[[Tensor, int], Tensor]


class TorchSampler:
    """Steps a :class:`steinrl.envs.torch_core.TorchVectorTask` of ``M * E`` envs for a policy ensemble.

    :param task: the torch task (``num_envs == M * E``), on the training device.
    :param num_particles: M.
    :param envs_per_particle: E.
    :param horizon: maximum episode length (the task's ``max_episode_steps``).
    :param check_every: ``whole_episodes``: steps between two checks whether every env stopped.
    """

    def __init__(self, task, num_particles: int, envs_per_particle: int, horizon: int,  # noqa: ANN001
                 check_every: int = 64) -> None:
        if task.num_envs != num_particles * envs_per_particle:
            raise ValueError(f"task has {task.num_envs} envs, expected M*E = {num_particles * envs_per_particle}")
        self.task, self.M, self.E, self.horizon = task, num_particles, envs_per_particle, horizon
        self.check_every = check_every
        self.device = task.device
        self.obs_dim = task.obs_dim
        self.action_shape = (1,)  # every steinrl task has one action in [-1, 1]
        self.carry: dict[str, Tensor] | None = None
        self.finite = torch.ones(num_particles, dtype=torch.bool, device=self.device)
        self._capacity = 0

    #: this sampler's act function takes and returns device tensors (see :data:`TorchActFn`)
    device_resident = True

    def max_steps(self, steps_per_particle: int, mode: str) -> int:
        """Upper bound on the vector steps of one batch (see :meth:`Sampler.max_steps`)."""
        per_env = -(-steps_per_particle // self.E)
        return 2 * per_env + 2 * self.horizon + 2 if mode == "whole_episodes" else per_env

    def _allocate(self, T: int) -> None:
        if T <= self._capacity:
            return
        N, dev = self.M * self.E, self.device
        self._obs = torch.empty((T + 1, N, self.obs_dim), device=dev)
        self._act = torch.empty((T, N, *self.action_shape), device=dev)
        self._rew = torch.empty((T, N), device=dev)
        self._term = torch.empty((T, N), dtype=torch.bool, device=dev)
        self._done = torch.empty((T, N), dtype=torch.bool, device=dev)
        self._valid = torch.empty((T, N), dtype=torch.bool, device=dev)
        self._tstep = torch.empty((T + 1, N), dtype=torch.int32, device=dev)
        self._capacity = T

    def _start(self, mode: str, seed: int | None) -> dict[str, Tensor]:
        if mode == "continuing" and self.carry is not None:
            return self.carry
        N, dev = self.M * self.E, self.device
        obs = self.task.reset(seed=seed).float()
        return {"obs": obs, "prev_done": torch.zeros(N, dtype=torch.bool, device=dev),
                "ep_ret": torch.zeros(N, dtype=torch.float64, device=dev),
                "ep_len": torch.zeros(N, dtype=torch.int64, device=dev),
                "tstep": torch.zeros(N, dtype=torch.int32, device=dev)}

    def collect(self, act: TorchActFn, steps_per_particle: int, *, mode: str = "whole_episodes",
                seed: int | None = None, store: bool = True) -> Batch:
        """Run one batch on the device; returns views into the preallocated device buffers."""
        if mode not in SAMPLING_MODES:
            raise ValueError(f"unknown sampling mode {mode!r}; choices: {', '.join(SAMPLING_MODES)}")
        whole_episodes = mode == "whole_episodes"
        M, E, N, dev = self.M, self.E, self.M * self.E, self.device
        T_max = self.max_steps(steps_per_particle, mode)
        self._allocate(T_max)
        start = self._start(mode, seed)
        obs, prev_done = start["obs"], start["prev_done"].clone()
        ep_ret, ep_len, tstep = start["ep_ret"].clone(), start["ep_len"].clone(), start["tstep"].clone()
        active = torch.ones(N, dtype=torch.bool, device=dev)
        completed = torch.zeros(M, dtype=torch.int64, device=dev)  # steps in each particle's finished episodes
        stats = torch.zeros(3, M, dtype=torch.float64, device=dev)  # return sum, length sum, count
        finite = torch.ones(M, dtype=torch.bool, device=dev)
        t = 0
        for t in range(T_max):
            self._obs[t] = obs
            self._tstep[t] = tstep
            actions = act(obs.view(M, E, -1), t).reshape(N, *self.action_shape)
            finite &= torch.isfinite(actions).view(M, -1).all(1)
            self._act[t] = actions
            obs, rew, term, trunc = self.task.step(actions.clamp(-1.0, 1.0))
            obs = obs.float()
            tstep = torch.where(prev_done, 0, tstep + 1)  # after a reset step the obs starts an episode
            done = torch.logical_or(term, trunc, out=self._done[t])
            valid = torch.logical_and(active, ~prev_done, out=self._valid[t])
            self._rew[t] = rew
            self._term[t] = term
            ep_ret += rew * valid
            ep_len += valid
            ended = done & valid
            stats += torch.stack([ep_ret * ended, (ep_len * ended).double(), ended.double()]).view(3, M, E).sum(2)
            if whole_episodes:
                completed += (ep_len * ended).view(M, E).sum(1)
            ep_ret = torch.where(ended, 0.0, ep_ret)
            ep_len = torch.where(ended, 0, ep_len)
            if whole_episodes:
                between = ended | (prev_done & active)  # envs that would start a new episode
                collected = completed + ep_len.view(M, E).sum(1)  # finished + in progress, per particle
                full = (collected >= steps_per_particle).repeat_interleave(E)
                active &= ~(between & full)
                if (t + 1) % self.check_every == 0 and not bool(active.any()):  # the one sync of this mode
                    break
            prev_done = done
        T = t + 1
        self._obs[T] = obs
        self._tstep[T] = tstep
        self.carry = {"obs": obs, "prev_done": prev_done.clone(), "ep_ret": ep_ret, "ep_len": ep_len,
                      "tstep": tstep} if mode == "continuing" else None
        self.finite = finite  # checked by the caller once the batch is done (no sync here)
        return Batch(
            obs=self._obs[: T + 1].view(T + 1, M, E, self.obs_dim),
            actions=self._act[:T].view(T, M, E, *self.action_shape),
            rewards=self._rew[:T].view(T, M, E),
            terminated=self._term[:T].view(T, M, E),
            done=self._done[:T].view(T, M, E),
            valid=self._valid[:T].view(T, M, E),
            timestep=self._tstep[: T + 1].view(T + 1, M, E),
            episode_stats=stats,
        )

    def check_finite(self) -> None:
        """Raise :class:`NonFiniteError` if the last batch had a non-finite action (one sync)."""
        bad = torch.nonzero(~self.finite).flatten().tolist()
        if bad:
            raise NonFiniteError(f"non-finite action in particle(s) {bad}")

    def state_dict(self) -> dict:
        """Continuing sampling's carry-over and the task's state (see :meth:`Sampler.state_dict`)."""
        if self.carry is None:
            return {}
        return {"carry": {k: v.clone() for k, v in self.carry.items()}, "envs": self.task.get_state()}

    def load_state_dict(self, state: dict) -> None:
        if "carry" not in state:
            self.carry = None
            return
        self.task.set_state(state["envs"])
        self.carry = {k: v.to(self.device) for k, v in state["carry"].items()}
