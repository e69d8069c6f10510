"""The base of the MuJoCo Warp tasks: worlds, resets, autoreset, time limit, saved state.

:class:`WarpMujocoTask` holds ``n`` worlds of one Gymnasium MuJoCo task in a
:class:`~steinrl.envs.warp_sim.WarpSim` and gives them the interface of
:class:`~steinrl.envs.torch_core.TorchVectorTask` (what :class:`~steinrl.rl.tasks.DeviceTask`
steps); each task's definition (observation, reward, termination, reset noise) is a subclass in
:mod:`steinrl.envs.warp_mujoco`, which describes the whole backend.

Shapes (``n = num_envs``): observations ``(n, obs_dim)`` float32; actions ``(n, act_dim)``;
rewards ``(n,)`` float32; terminated / truncated ``(n,)`` bool; reset states ``(nq + nv, n)``
(rows ``qpos`` then ``qvel``, envs as columns, the torch twins' layout).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from steinrl.errors import ConfigError

from .warp_sim import CAPACITY_BITS, Capacity, WarpCapacityError, WarpSim

__all__ = ["WarpMujocoTask"]


class WarpMujocoTask:
    """``num_envs`` worlds of one Gymnasium MuJoCo v5 task, stepped together by MuJoCo Warp.

    Subclasses hold one task's definition (:attr:`env_id`, :attr:`frame_skip`, the reset noise,
    :meth:`observe`, :meth:`reward`); this class holds the worlds, the autoreset, the time limit,
    the reset streams and the saved state, with the interface of
    :class:`~steinrl.envs.torch_core.TorchVectorTask` (what :class:`~steinrl.rl.tasks.DeviceTask` needs).

    :param num_envs: worlds ``n``.
    :param device: torch device (``cpu`` runs Warp's CPU device; ``cuda:k`` its GPU ``k``).
    :param max_episode_steps: time limit (Gymnasium's registered 1000 by default).
    :param groups: G > 1 splits the worlds into G consecutive blocks, each drawing its reset
        states from its own generator (seeds trained in one batch keep their own streams).
    :param nconmax: contacts per world (None: the task's :class:`Capacity`).
    :param njmax: constraint rows per world (None: the task's :class:`Capacity`).
    :param deterministic: MuJoCo Warp's deterministic mode (stable contact order, canonical
        constraint rows, order-invariant atomic sums): a run repeats its numbers on a GPU. Off, a
        GPU's atomics may order sums differently from run to run (the CPU runs kernels serially).
    :param physics_graph: replay each step's physics as a Warp graph (None: yes; a captured
        iteration records the kernels into its own graph either way; :class:`WarpSim`).
    :param kernel_cache: where Warp keeps compiled kernels (:func:`~steinrl.envs.warp_sim.configure`).
    """

    #: Gymnasium id of the task.
    env_id: ClassVar[str]
    #: MuJoCo steps per env step (Gymnasium's ``frame_skip``).
    frame_skip: ClassVar[int]
    #: Half-width of the uniform noise added to ``qpos0`` and (``qvel_noise`` uniform) to 0, or the
    #: standard deviation of the normal ``qvel`` noise (Gymnasium's ``reset_noise_scale``).
    reset_noise_scale: ClassVar[float]
    #: ``"uniform"`` or ``"normal"``: the distribution of the reset velocities.
    qvel_noise: ClassVar[str] = "uniform"
    #: Buffer sizes per world.
    capacity: ClassVar[Capacity] = Capacity()
    #: Observation length.
    obs_dim: ClassVar[int]

    dtype = torch.float32  #: of observations, rewards and the physics (MuJoCo Warp's float32)

    def __init__(self, num_envs: int, device: torch.device | str = "cpu", max_episode_steps: int = 1000,
                 groups: int = 1, nconmax: int | None = None, njmax: int | None = None,
                 deterministic: bool = True, physics_graph: bool | None = None,
                 kernel_cache: str | None = None) -> None:
        from .warp_sim import configure

        configure(kernel_cache)
        if int(num_envs) < 1:
            raise ConfigError(f"{self.env_id}: num_envs must be >= 1, got {num_envs}")
        if groups < 1 or int(num_envs) % groups:
            raise ConfigError(f"{self.env_id}: groups must divide num_envs={num_envs}, got {groups}")
        if int(max_episode_steps) < 1:
            raise ConfigError(f"{self.env_id}: max_episode_steps must be >= 1, got {max_episode_steps}")
        self.num_envs = n = int(num_envs)
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ConfigError(f"{self.env_id}: MuJoCo Warp runs on cpu or cuda, not {self.device}")
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.max_episode_steps = int(max_episode_steps)
        self.nconmax = int(nconmax if nconmax is not None else self.capacity.nconmax)
        self.njmax = int(njmax if njmax is not None else self.capacity.njmax)
        init_qpos, ctrlrange = self._build(deterministic, True if physics_graph is None else bool(physics_graph))
        view = self.sim.view  # torch views of the Warp arrays (the same storage: what Warp writes, torch reads)
        self.qpos, self.qvel, self.ctrl = view("qpos"), view("qvel"), view("ctrl")  # (n, nq), (n, nv), (n, nu)
        self.qacc_warmstart, self.time = view("qacc_warmstart"), view("time")  # (n, nv), (n,)
        self.overflow = view("overflow")  # (n,) int32 bit mask, sticky until reset_overflow()
        self._overflow_host = self.data.overflow.numpy() if self.device.type == "cpu" else None  # (a view)
        self.state = self.qpos  #: the positions ``(n, nq)``: a view of the Warp ``Data`` (which keeps its storage)
        self.init_qpos = torch.as_tensor(init_qpos, dtype=torch.float64, device=self.device)  # (nq,)
        self.action_low = torch.as_tensor(ctrlrange[:, 0], device=self.device)  # (nu,)
        self.action_high = torch.as_tensor(ctrlrange[:, 1], device=self.device)
        self.action_shape = (self.nu,)
        self.state_dim = self.nq + self.nv  #: rows of a reset state (qpos, qvel)
        self.generators = [torch.Generator(device=self.device) for _ in range(groups)]
        for generator in self.generators:
            generator.seed()
        self.steps = torch.zeros(n, dtype=torch.int64, device=self.device)
        self._prev_done = torch.zeros(n, dtype=torch.bool, device=self.device)
        self._extra_init()

    def _build(self, deterministic: bool, physics_graph: bool) -> tuple[np.ndarray, np.ndarray]:
        """The worlds (:attr:`sim`) of the model Gymnasium's env builds from its own XML file, with
        facts checked against that env; returns its ``init_qpos`` ``(nq,)`` and the actuators'
        ``ctrlrange`` ``(nu, 2)``."""
        from .registration import make

        gym_env = make(self.env_id)
        try:
            mjm, mjd = gym_env.unwrapped.model, gym_env.unwrapped.data
            if gym_env.unwrapped.frame_skip != self.frame_skip or gym_env.observation_space.shape != (self.obs_dim,):
                raise RuntimeError(f"{self.env_id}: Gymnasium's frame_skip {gym_env.unwrapped.frame_skip} and "
                                   f"observation {gym_env.observation_space.shape} are not this definition's")
            if mjm.na:
                raise RuntimeError(f"{self.env_id}: actuator activations (na = {mjm.na}) are not saved")
            self.single_observation_space = gym_env.observation_space
            self.single_action_space = gym_env.action_space
            self.nq, self.nv, self.nu, self.nbody = mjm.nq, mjm.nv, mjm.nu, mjm.nbody
            self.dt = float(mjm.opt.timestep) * self.frame_skip  # s per env step (Gymnasium's dt)
            #: the worlds in MuJoCo Warp, and how their physics launches
            self.sim = WarpSim(mjm, mjd, self.num_envs, self.device, Capacity(self.nconmax, self.njmax),
                               deterministic, physics_graph)
            self.model, self.data = self.sim.model, self.sim.data  # mujoco_warp's Model and Data
            return np.array(gym_env.unwrapped.init_qpos), np.array(mjm.actuator_ctrlrange, dtype=np.float32)
        finally:
            gym_env.close()

    # --- the task's definition (subclasses) ------------------------------------------------
    def _extra_init(self) -> None:
        """Per-task buffers (after the Warp data exists)."""

    def before_step(self) -> Any:
        """What :meth:`reward` needs from the state before the step (e.g. the torso's x), a new tensor."""
        return self.qpos[:, 0].clone()

    def after_physics(self) -> None:
        """Anything Gymnasium computes after ``mj_step`` besides it (Ant: ``mj_rnePostConstraint``)."""

    def observe(self, fresh: torch.Tensor | None = None) -> torch.Tensor:
        """Observations ``(n, obs_dim)`` of the current worlds; ``fresh`` ``(n,)`` bool marks the
        worlds just reset, whose derived quantities Gymnasium's reset leaves at 0."""
        raise NotImplementedError

    def reward(self, action: torch.Tensor, before: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``(reward (n,), terminated (n,) bool)`` of the step just taken under ``action`` ``(n, nu)``
        (clipped), from the state after it and :meth:`before_step`'s value."""
        raise NotImplementedError

    @property
    def name(self) -> str:
        return self.env_id

    # --- physics -------------------------------------------------------------------------------
    def _substeps(self) -> None:
        for _ in range(self.frame_skip):
            self.sim.mjw.step(self.model, self.data)
        self.after_physics()

    def physics(self) -> None:
        """``frame_skip`` MuJoCo Warp steps of every world, then :meth:`after_physics`
        (:meth:`WarpSim.run <steinrl.envs.warp_sim.WarpSim.run>`: a Warp graph, or into torch's)."""
        self.sim.run(self._substeps, self.env_id)

    # --- resets --------------------------------------------------------------------------------
    @property
    def generator(self) -> torch.Generator:
        """The reset generator (of the first group)."""
        return self.generators[0]

    def draw_initial_state(self, n: int, generator: torch.Generator, steps: tuple[int, ...] = ()) -> torch.Tensor:
        """``n`` reset states ``(*steps, nq + nv, n)`` from ``generator``: one uniform draw in float64
        (``steps`` leading dims: successive draws), ``qpos0 + U(−s, s)`` and ``U(−s, s)`` or
        ``s · N(0, 1)`` velocities (the normal through its inverse CDF, tails cut at 8 σ by the
        float64 uniform), then float32 (what the physics holds)."""
        s = self.reset_noise_scale
        u = torch.rand((*steps, self.state_dim, n), generator=generator, dtype=torch.float64, device=self.device)
        qpos = u[..., :self.nq, :].mul(2 * s).sub_(s).add_(self.init_qpos[:, None])
        if self.qvel_noise == "normal":
            tiny = 2.0 ** -53
            qvel = torch.erfinv(u[..., self.nq:, :].clamp(tiny, 1 - tiny).mul(2).sub_(1)).mul_(math.sqrt(2) * s)
        else:
            qvel = u[..., self.nq:, :].mul(2 * s).sub_(s)
        return torch.cat([qpos, qvel], dim=-2).to(torch.float32)

    def sample_initial_state(self, n: int, steps: int | None = None) -> torch.Tensor:
        """``n`` reset states ``(nq + nv, n)``, each group's block from its own generator; with
        ``steps``, those of that many steps at once ``(steps, nq + nv, n)`` (the same numbers as
        ``steps`` successive calls: one uniform draw)."""
        lead = () if steps is None else (int(steps),)
        if len(self.generators) == 1:
            return self.draw_initial_state(n, self.generators[0], lead)
        per_group = n // len(self.generators)
        return torch.cat([self.draw_initial_state(per_group, g, lead) for g in self.generators], dim=-1)

    def draw_reset(self, seed: int | Sequence[int]) -> torch.Tensor:
        """Reseed (one seed per group) and draw every world's reset state ``(nq + nv, n)``, changing nothing else."""
        seeds = [seed] if isinstance(seed, int) else list(seed)
        if len(seeds) != len(self.generators):
            raise ValueError(f"{self.name}: {len(self.generators)} group(s) need as many seeds, got {len(seeds)}")
        for generator, s in zip(self.generators, seeds):
            generator.manual_seed(int(s))
        return self.sample_initial_state(self.num_envs)

    def reset(self, seed: int | Sequence[int] | None = None) -> torch.Tensor:
        """Reset every world (``seed`` reseeds the generators, one per group); observations ``(n, obs_dim)``."""
        return self.start(self.draw_reset(seed) if seed is not None else self.sample_initial_state(self.num_envs))

    def start(self, initial: torch.Tensor) -> torch.Tensor:
        """Start fresh episodes from ``initial`` ``(nq + nv, n)`` in every world; observations ``(n, obs_dim)``."""
        everyone = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._write_reset(everyone, initial)
        self.steps.zero_()
        self._prev_done.zero_()
        self.reset_overflow()
        return self.observe(everyone)

    def _write_reset(self, reset: torch.Tensor, initial: torch.Tensor) -> None:
        """Worlds ``reset`` ``(n,)`` start at ``initial`` ``(nq + nv, n)``, as MuJoCo's
        ``mj_resetData`` and Gymnasium's ``set_state`` leave them: the drawn ``qpos`` / ``qvel``, time 0,
        no warm start (in place: the Warp arrays keep their storage)."""
        mask = reset[:, None]
        torch.where(mask, initial[:self.nq].T, self.qpos, out=self.qpos)
        torch.where(mask, initial[self.nq:].T, self.qvel, out=self.qvel)
        self.qacc_warmstart.masked_fill_(mask, 0.0)
        self.time.masked_fill_(reset, 0.0)

    # --- stepping --------------------------------------------------------------------------------
    def step(self, actions: torch.Tensor, reset_states: torch.Tensor | None = None,
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """One env step of every world under ``actions`` ``(n, nu)`` (clipped to the ``ctrlrange``),
        with next-step autoreset.

        :param reset_states: ``(nq + nv, n)`` where the worlds that autoreset at this step start
            (a row of :meth:`sample_initial_state` ``(n, steps)``); None draws them now.
        :returns: ``(obs (n, obs_dim), reward (n,), terminated (n,) bool, truncated (n,) bool)``.
        :raises ValueError: wrong action shape.
        :raises WarpCapacityError: on the CPU, a world overflowed its contact or constraint buffers.
        """
        if tuple(actions.shape) != (self.num_envs, self.nu):
            raise ValueError(f"{self.name}: actions must have shape {(self.num_envs, self.nu)}, got "
                             f"{tuple(actions.shape)}")
        action = torch.maximum(torch.minimum(actions.to(self.dtype), self.action_high), self.action_low)
        self.ctrl.copy_(action)
        before = self.before_step()
        self.physics()
        if self._overflow_host is not None:  # the CPU: host memory, read for free
            self.check_overflow(self._overflow_host)
        reward, terminated = self.reward(action, before)
        reset = self._prev_done  # next-step autoreset of the worlds that ended last step
        fresh = self.sample_initial_state(self.num_envs) if reset_states is None else reset_states
        self._write_reset(reset, fresh)
        self.steps.add_(1).masked_fill_(reset, 0)
        truncated = self.steps >= self.max_episode_steps  # (False where reset: max_episode_steps >= 1)
        reward = reward.masked_fill_(reset, 0.0)
        terminated = terminated.masked_fill_(reset, False)
        torch.logical_or(terminated, truncated, out=self._prev_done)
        return self.observe(reset), reward, terminated, truncated

    # --- capacity ----------------------------------------------------------------------------------
    def overflowed(self) -> torch.Tensor:
        """``(n,)`` bool on the device: worlds whose buffers overflowed since the last reset (no sync)."""
        return (self.overflow & CAPACITY_BITS) != 0

    def check_overflow(self, flags: Any = None) -> None:
        """Raise :class:`WarpCapacityError` if a world overflowed its buffers (``flags``: the
        ``(n,)`` overflow masks already on the host; None reads them, a host sync on a GPU)."""
        flags = np.asarray(self.overflow.cpu().numpy() if flags is None else flags)
        bad = np.flatnonzero(flags & CAPACITY_BITS)
        if bad.size:
            import mujoco_warp as mjw

            kinds = sorted({t.name for w in bad for t in mjw.OverflowType if t.value & CAPACITY_BITS
                            and t.value & int(flags[w]) and t.name})
            raise WarpCapacityError(
                f"{self.env_id}: MuJoCo Warp ran out of contact / constraint capacity ({', '.join(kinds)}) in "
                f"world(s) {bad[:8].tolist()}{' ...' if bad.size > 8 else ''}: contacts or constraint rows were "
                f"dropped; raise nconmax (now {self.nconmax} per world) or njmax (now {self.njmax} per world)")

    def reset_overflow(self) -> None:
        """Clear the overflow flags (every world starts a fresh episode)."""
        self.overflow.zero_()

    # --- saving ----------------------------------------------------------------------------------
    def _extra_state(self) -> torch.Tensor | None:
        """Per-task buffers that decide the next steps, ``(k, n)`` (None: none)."""
        return None

    def _set_extra_state(self, rows: torch.Tensor) -> None:
        """Restore :meth:`_extra_state` from ``rows`` ``(k, n)``."""

    def get_state(self) -> dict[str, Any]:
        """Everything that decides the next steps: ``state`` ``(nq + 2 nv + 1 [+ k], n)``, rows ``qpos``,
        ``qvel``, ``qacc_warmstart`` (the solver's warm start), ``time``, then the task's own
        (Ant: the torso's x, y before the step), envs as columns; the step counters, the pending
        autoresets and the reset generators' states."""
        rows = [self.qpos.T, self.qvel.T, self.qacc_warmstart.T, self.time[None]]
        extra = self._extra_state()
        if extra is not None:
            rows.append(extra)
        return {"state": torch.cat(rows).clone(), "steps": self.steps.clone(), "prev_done": self._prev_done.clone(),
                "rng": [g.get_state() for g in self.generators]}

    def set_state(self, saved: dict[str, Any]) -> None:
        """Continue exactly from :meth:`get_state` (in place: the Warp arrays keep their storage)."""
        state = torch.as_tensor(saved["state"]).to(device=self.device, dtype=torch.float32)
        nq, nv = self.nq, self.nv
        if state.shape[1] != self.num_envs or state.shape[0] < 2 * nv + nq + 1:
            raise ValueError(f"{self.name}: a saved state of shape {tuple(state.shape)} is not this task's "
                             f"({2 * nv + nq + 1}+ rows, {self.num_envs} worlds)")
        self.qpos.copy_(state[:nq].T)
        self.qvel.copy_(state[nq:nq + nv].T)
        self.qacc_warmstart.copy_(state[nq + nv:nq + 2 * nv].T)
        self.time.copy_(state[nq + 2 * nv])
        if state.shape[0] > nq + 2 * nv + 1:
            self._set_extra_state(state[nq + 2 * nv + 1:])
        self.steps.copy_(torch.as_tensor(saved["steps"]))
        self._prev_done.copy_(torch.as_tensor(saved["prev_done"]))
        for generator, rng in zip(self.generators, saved["rng"]):
            generator.set_state(torch.as_tensor(rng, device="cpu"))
        self.reset_overflow()

    def device_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors a step reads and writes in place, the torch views of the Warp arrays among them,
        by name (a replayed graph needs each to keep its storage)."""
        return {"state": self.state, "steps": self.steps, "prev_done": self._prev_done, "qpos": self.qpos,
                "qvel": self.qvel, "ctrl": self.ctrl, "qacc_warmstart": self.qacc_warmstart, "time": self.time,
                "overflow": self.overflow}

    def close(self) -> None:
        self.sim.close()


