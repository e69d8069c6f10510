"""Batched sampling: M particles x E envs stepped together, one policy call per step.

Layout: the vector env holds ``N = M * E`` envs, particle-major (env ``n`` belongs to
particle ``n // E``). Rollout storage is time-major ``(T, M, E, ...)``.

Three sampling modes (``rollout.sampling``):

- ``whole_episodes`` (the papers' protocol; the SVPG code sampled so with rllab): each
  particle's E envs are its parallel workers. Every env starts a fresh episode at the
  start of the batch and, whenever one ends, starts another only while the particle's
  steps so far (completed episodes plus episodes in progress) are fewer than
  ``steps_per_particle``. Episodes in progress then run to their end, so no episode is cut
  by the batch boundary and each particle gets at least ``steps_per_particle`` steps.
- ``continuing`` (SB3's way): every env takes exactly ``ceil(steps_per_particle / E)``
  steps per batch (reset steps included) and episodes carry on into the next batch; the
  last step of a batch is neither terminated nor truncated (a2c bootstraps from the
  critic's value of the observation after it).
- ``cut``: as ``continuing``, but every batch starts from fresh episodes (the episodes
  running at its end are cut and dropped).

Vector envs use Gymnasium's next-step autoreset: the step after an episode ended only
resets that env; it is stored but marked invalid.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from steinrl.errors import NonFiniteError
from steinrl.registry import Option, at_least_one
from steinrl.rl.heads import space_bounds

#: ``act(obs (M, E, obs_dim) float32 numpy, t) -> actions (M, E, *action_shape)`` numpy
#: arrays. The sampler works in numpy end to end (no per-step tensor conversions);
#: :meth:`steinrl.rl.policy.EnsemblePolicy.actor` builds one from a policy.
ActFn = Callable[[np.ndarray, int], np.ndarray]

SAMPLING_MODES = ("whole_episodes", "continuing", "cut")

#: The ``rollout`` config section.
ROLLOUT_OPTIONS: tuple[Option, ...] = (
    Option("batch_size", int, 5000, "Env steps per particle per iteration (at least; whole episodes are kept).",
           check=at_least_one),
    Option("envs_per_particle", int, 10, "Parallel envs per particle E; all M x E envs step together.",
           check=at_least_one),
    Option("horizon", int, 500, "Maximum episode length (time-limit truncation, not termination).",
           check=at_least_one),
    Option("sampling", str, "whole_episodes",
           "whole_episodes: every episode runs to its end, new ones start while the particle's steps are below "
           "batch_size (the papers'); continuing: every env takes ceil(batch_size / E) steps and episodes carry on "
           "into the next iteration (SB3's; a2c bootstraps at the cut); cut: the same but fresh episodes every "
           "iteration.", choices=SAMPLING_MODES),
    Option("env_backend", str, "auto",
           "numpy: our tasks as numpy vector envs on the host; torch: their torch twins on the training device, the "
           "whole rollout there (steinrl's tasks only); auto: numpy on cpu, torch on other devices where the task has "
           "a torch twin.", choices=("auto", "numpy", "torch")),
    Option("compile", bool, False,
           "torch backend: run the per-step policy forward and sampling through torch.compile (on CUDA in mode "
           "reduce-overhead, which captures it as a CUDA graph). Off by default: on CPU it does not pay "
           "(docs/gpu.md); not measured on a GPU yet."),
    Option("vectorization", str, "auto", "How Gymnasium ids that are not ours are vectorised (sync: one process; "
           "async: a process per env; envpool: EnvPool's C++ batched MuJoCo v5 tasks, the steinrl[envpool] extra; "
           "auto: envpool where it is installed and runs the id, else sync). Our tasks always use their numpy "
           "vector env.", choices=("auto", "sync", "async", "envpool")),
)


@dataclass
class Batch:
    """One iteration's samples, tensors on the rollout's device. ``T`` is the number of vector steps taken."""

    obs: Tensor  # (T + 1, M, E, obs_dim) float32; obs[t + 1] follows step t (final obs if step t ended)
    actions: Tensor  # (T, M, E, *action_shape) in the action space's dtype
    rewards: Tensor  # (T, M, E) float32
    terminated: Tensor  # (T, M, E) bool: a true terminal state (value 0)
    done: Tensor  # (T, M, E) bool: terminated or truncated (the episode ended at this step)
    valid: Tensor  # (T, M, E) bool: a real transition of an active env
    timestep: Tensor  # (T + 1, M, E) int32: obs[t]'s step index within its episode
    episode_stats: Tensor  # (3, M) float64: per particle the sum of its completed episodes' returns,
    #                        the sum of their lengths, and their number
    episode_returns: list[np.ndarray] | None = None  # per particle: each completed episode's return (CPU rollout)
    episode_lengths: list[np.ndarray] | None = None  # per particle: each completed episode's length (CPU rollout)

    @property
    def num_steps(self) -> int:
        """Valid env steps over all particles."""
        return int(self.valid.sum())

    def to(self, device: torch.device) -> "Batch":
        """The batch with its tensors on ``device`` (one transfer each; a no-op where they are)."""
        moved = {f: getattr(self, f).to(device) for f in ("obs", "actions", "rewards", "terminated", "done", "valid",
                                                          "timestep", "episode_stats")}
        return Batch(**moved, episode_returns=self.episode_returns, episode_lengths=self.episode_lengths)


class Sampler:
    """Steps a Gymnasium ``VectorEnv`` of ``M * E`` envs for a policy ensemble (numpy, on the host).

    :param envs: vector env with ``num_envs == M * E`` and next-step autoreset.
    :param num_particles: M.
    :param envs_per_particle: E.
    :param horizon: maximum episode length (bounds how long whole episodes can run).
    """

    def __init__(self, envs: gym.vector.VectorEnv, num_particles: int, envs_per_particle: int,
                 horizon: int):
        if envs.num_envs != num_particles * envs_per_particle:
            raise ValueError(f"vector env has {envs.num_envs} envs, expected M*E = {num_particles * envs_per_particle}")
        mode = envs.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
        if mode != gym.vector.AutoresetMode.NEXT_STEP:
            raise ValueError(f"steinrl needs next-step autoreset vector envs, got {mode}")
        self.envs = envs
        self.M, self.E = num_particles, envs_per_particle
        self.horizon = horizon
        space = envs.single_action_space
        self.bounds = space_bounds(space)
        self.obs_dim = int(np.prod(envs.single_observation_space.shape))
        self.action_shape = tuple(space.shape)
        self.action_dtype = np.float32 if space.dtype == np.float64 else space.dtype
        self._capacity = 0
        #: continuing sampling: where the last batch left every env (obs, episode progress)
        self.carry: dict[str, np.ndarray] | None = None

    #: this sampler's act function takes and returns numpy arrays (see :data:`ActFn`)
    device_resident = False

    def max_steps(self, steps_per_particle: int, mode: str) -> int:
        """Upper bound on the vector steps of one batch.

        Whole episodes: after ``t`` steps each env has completed at least
        ``(t - horizon - 1) / 2`` valid steps (every valid step may be followed by a reset
        step, and one episode of at most ``horizon`` steps may be in progress), so the
        budget is reached by ``2 ceil(budget / E) + horizon + 1`` and the episodes then in
        progress end within ``horizon + 1`` more steps. Otherwise exactly ``ceil(budget / E)``.
        """
        per_env = -(-steps_per_particle // self.E)
        return 2 * per_env + 2 * self.horizon + 2 if mode == "whole_episodes" else per_env

    def _allocate(self, T: int) -> None:
        if T <= self._capacity:
            return
        N = self.M * self.E
        self._obs = np.empty((T + 1, N, self.obs_dim), dtype=np.float32)
        self._act = np.empty((T, N, *self.action_shape), dtype=self.action_dtype)
        self._rew = np.empty((T, N), dtype=np.float32)
        self._term = np.empty((T, N), dtype=bool)
        self._done = np.empty((T, N), dtype=bool)
        self._valid = np.empty((T, N), dtype=bool)
        self._tstep = np.empty((T + 1, N), dtype=np.int32)
        self._capacity = T

    def state_dict(self) -> dict:
        """Continuing sampling's carry-over (each env's observation and episode progress) and
        the envs' own state, so that a restored run continues the same episodes. Empty in
        the other modes (every batch starts from a seeded reset)."""
        if self.carry is None:
            return {}
        state = {"carry": {k: torch.from_numpy(np.array(v)) for k, v in self.carry.items()}}
        if hasattr(self.envs, "get_state"):  # arrays as tensors: loadable with weights_only=True
            state["envs"] = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                             for k, v in self.envs.get_state().items()}
        return state

    def load_state_dict(self, state: dict) -> None:
        if "carry" not in state:
            self.carry = None
        elif "envs" in state and hasattr(self.envs, "set_state"):
            self.envs.set_state({k: v.numpy() if isinstance(v, Tensor) else v for k, v in state["envs"].items()})
            self.carry = {k: v.numpy().copy() for k, v in state["carry"].items()}
        else:  # a Gymnasium env whose state cannot be saved: the restored run starts fresh episodes
            warnings.warn("continuing sampling on Gymnasium envs whose state a checkpoint cannot hold: the restored "
                          "run's envs start fresh episodes (steinrl's own tasks continue exactly)", stacklevel=2)
            self.carry = None

    def _start(self, mode: str, seed: int | None) -> dict[str, np.ndarray]:
        """Where the batch starts: fresh episodes (reset with ``seed``), or, continuing, where the last one ended."""
        if mode == "continuing" and self.carry is not None:
            return self.carry
        N = self.M * self.E
        obs, _ = self.envs.reset(seed=seed)
        return {"obs": np.asarray(obs, dtype=np.float32).reshape(N, -1), "prev_done": np.zeros(N, dtype=bool),
                "ep_ret": np.zeros(N), "ep_len": np.zeros(N, dtype=np.int64), "tstep": np.zeros(N, dtype=np.int32)}

    def collect(self, act: ActFn, steps_per_particle: int, *, mode: str = "whole_episodes",
                seed: int | None = None, store: bool = True) -> Batch:
        """Run one batch and return it (views into preallocated buffers, valid until the next call).

        :param act: the ensemble's action function (see :data:`ActFn`).
        :param steps_per_particle: the batch budget of each particle (see the module docstring).
        :param mode: ``whole_episodes``, ``cut`` or ``continuing`` (see the module docstring).
        :param seed: seed for ``envs.reset`` at the start of the batch (``continuing``: of the first batch).
        :param store: keep observations and actions (training); off for evaluation.
        """
        if mode not in SAMPLING_MODES:
            raise ValueError(f"unknown sampling mode {mode!r}; choices: {', '.join(SAMPLING_MODES)}")
        whole_episodes = mode == "whole_episodes"
        M, E, N = self.M, self.E, self.M * self.E
        T_max = self.max_steps(steps_per_particle, mode)
        self._allocate(T_max)
        start = self._start(mode, seed)
        obs, prev_done = start["obs"], start["prev_done"].copy()
        ep_ret, ep_len, tstep = start["ep_ret"].copy(), start["ep_len"].copy(), start["tstep"].copy()
        active = np.ones(N, dtype=bool)
        completed = np.zeros(M, dtype=np.int64)  # steps in each particle's completed episodes
        owner = np.arange(N) // E  # particle of each env
        ended_env: list[np.ndarray] = []
        ended_ret: list[np.ndarray] = []
        ended_len: list[np.ndarray] = []
        low_high = self.bounds
        t = 0
        for t in range(T_max):
            if store:
                self._obs[t] = obs
                self._tstep[t] = tstep
            a_np = np.asarray(act(obs.reshape(M, E, -1), t)).reshape(N, *self._act.shape[2:])
            if not np.isfinite(a_np).all():
                bad = np.unique(np.flatnonzero(~np.isfinite(a_np).reshape(N, -1).all(1)) // E).tolist()
                raise NonFiniteError(f"non-finite action at rollout step {t} in particle(s) {bad}")
            if store:
                self._act[t] = a_np
            if low_high is not None:  # (np.clip costs several times more than these two)
                a_np = np.minimum(np.maximum(a_np, low_high[0]), low_high[1])
            obs_np, rew, term, trunc, _ = self.envs.step(a_np)
            obs = np.asarray(obs_np, dtype=np.float32).reshape(N, -1)  # converted once per step
            tstep += 1
            tstep[prev_done] = 0  # this step was a reset: the new obs starts an episode
            done = np.logical_or(term, trunc, out=self._done[t])
            valid = np.greater(active, prev_done, out=self._valid[t])  # active and not a reset step
            self._rew[t] = rew
            self._term[t] = term
            ep_ret += rew * valid
            ep_len += valid
            ended = done & valid
            if ended.any():
                idx = np.flatnonzero(ended)
                ended_env.append(idx)
                ended_ret.append(ep_ret[idx])
                ended_len.append(ep_len[idx])
                if whole_episodes:
                    np.add.at(completed, idx // E, ep_len[idx])
                ep_ret[idx] = 0.0
                ep_len[idx] = 0
            if whole_episodes:
                between = ended | (prev_done & active)  # envs that would start a new episode
                if between.any():
                    # a particle's steps so far: completed episodes + episodes in progress
                    collected = completed + ep_len.reshape(M, E).sum(1)
                    active &= ~(between & (collected[owner] >= steps_per_particle))
                    if not active.any():
                        break
            prev_done = done  # a view of self._done[t], never written again this batch
        T = t + 1
        if store:
            self._obs[T] = obs
            self._tstep[T] = tstep
        self.carry = {"obs": obs, "prev_done": prev_done.copy(), "ep_ret": ep_ret, "ep_len": ep_len,
                      "tstep": tstep} if mode == "continuing" else None
        env_idx = np.concatenate(ended_env) if ended_env else np.zeros(0, dtype=np.int64)
        rets = np.concatenate(ended_ret) if ended_ret else np.zeros(0)
        lens = np.concatenate(ended_len) if ended_len else np.zeros(0, dtype=np.int64)
        particle = env_idx // E
        stats = np.stack([np.bincount(particle, rets, minlength=M), np.bincount(particle, lens, minlength=M),
                          np.bincount(particle, minlength=M)]).astype(np.float64)
        return Batch(  # zero-copy views of the buffers
            obs=torch.from_numpy(self._obs[: T + 1]).view(T + 1, M, E, self.obs_dim),
            actions=torch.from_numpy(self._act[:T]).view(T, M, E, *self._act.shape[2:]),
            rewards=torch.from_numpy(self._rew[:T]).view(T, M, E),
            terminated=torch.from_numpy(self._term[:T]).view(T, M, E),
            done=torch.from_numpy(self._done[:T]).view(T, M, E),
            valid=torch.from_numpy(self._valid[:T]).view(T, M, E),
            timestep=torch.from_numpy(self._tstep[: T + 1]).view(T + 1, M, E),
            episode_stats=torch.from_numpy(stats),
            episode_returns=[rets[particle == i] for i in range(M)],
            episode_lengths=[lens[particle == i] for i in range(M)],
        )


@dataclass
class Samples:
    """A batch's valid steps, compacted per particle to ``(M, n, ...)`` (n = the most valid
    steps of any particle; shorter particles are padded and masked out)."""

    obs: Tensor  # (M, n, obs_dim) float32
    actions: Tensor  # (M, n, *action_shape)
    timestep: Tensor  # (M, n) int32: step index within the episode
    mask: Tensor  # (M, n) float32: 1 for real samples, 0 for padding
    advantages: Tensor  # (M, n) float32
    targets: Tensor | None  # (M, n) float64 value targets (None without a critic)


def compact(batch: Batch, advantages: Tensor, targets: Tensor | None, device: torch.device,
            trim: bool = True) -> Samples:
    """Gather every particle's valid steps of ``batch`` into :class:`Samples` on ``device``.

    :param advantages: ``(T, M, E)`` per-step advantages.
    :param targets: ``(T, M, E)`` value targets, or None.
    :param trim: cut the columns to the most valid steps of any particle (one host sync);
        without, all ``T * E`` columns are kept (padding masked).
    """
    T, M = batch.actions.shape[:2]
    valid = batch.valid.permute(1, 0, 2).reshape(M, -1)  # (M, T*E)
    n_max = int(valid.sum(1).max()) if trim else valid.shape[1]
    order = torch.argsort((~valid).to(torch.int8), dim=1, stable=True)[:, :n_max]  # (M, n_max), valid first
    mask = torch.gather(valid, 1, order).to(device, torch.float32)
    order = order.to(device)

    def take(x: Tensor) -> Tensor:  # (T, M, E, ...) -> (M, n_max, ...)
        x = x.to(device).transpose(0, 1).reshape(M, -1, *x.shape[3:])
        idx = order.view(M, n_max, *([1] * (x.dim() - 2))).expand(M, n_max, *x.shape[2:])
        return torch.gather(x, 1, idx)

    return Samples(
        obs=take(batch.obs[:T]),
        actions=take(batch.actions),
        timestep=take(batch.timestep[:T]),
        mask=mask,
        advantages=take(advantages.to(torch.float32)),
        targets=None if targets is None else take(targets),
    )
