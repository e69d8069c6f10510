"""Gymnasium's MuJoCo v5 tasks on MuJoCo Warp: torch vector envs on the training device (optional extra).

``pip install "steinrl[gpu-mujoco]"`` installs `MuJoCo Warp <https://github.com/google-deepmind/mujoco_warp>`_
(``mujoco-warp``, ``warp-lang``), which steps thousands of MuJoCo worlds in parallel on a GPU (and,
slowly, on Warp's CPU device, which the tests use). :class:`WarpMujocoTask` runs one of
:data:`WARP_TASKS` as a device task of the same kind as the torch twins of steinrl's classic tasks
(:mod:`steinrl.envs.torch_core`): every world's state lives in the Warp ``Data`` arrays, which torch
reads and writes as views (``wp.to_torch``: no copy), and one :meth:`~WarpMujocoTask.step` is
``frame_skip`` Warp physics steps plus a fixed sequence of tensor operations, with no host
synchronisation in it on a GPU.

Each task's definition is Gymnasium's v5 env of the same id, written here as facts from its source
(``gymnasium/envs/mujoco/<task>_v5.py``, Gymnasium 1.x; each class names its file), on the model
Gymnasium builds from its own XML file (the Gymnasium env is made once to take its ``MjModel``):

- the observation, the reward terms, the health checks (termination) and ``frame_skip``;
- the reset: ``qpos0`` plus uniform noise, ``qvel`` uniform or normal noise, per task;
- Gymnasium's ``TimeLimit`` truncation at ``max_episode_steps`` (1000 for every task here):
  an episode that terminates on its last step is terminated *and* truncated;
- next-step autoreset, as the torch twins do: on the step after an episode ended, the world is
  reset instead (its observation a fresh episode's first, reward 0, both flags False).

What a world reads after a step is what Gymnasium reads after ``mj_step`` (``frame_skip`` times)
and ``mj_rnePostConstraint``: positions and velocities of the new state, and the derived
quantities (body and site positions, constraint and contact forces) of the last force evaluation,
which MuJoCo leaves in ``mjData``. Actions are clipped to the actuators' ``ctrlrange`` (Gymnasium's
action space) before they are used, reward included, as the host backends do.

Physics runs in float32 (MuJoCo Warp's precision; Gymnasium's MuJoCo runs in float64), so a
world's trajectory agrees with Gymnasium's from the same state to float32 rounding for a few
steps and then drifts, as chaotic contact dynamics do (tests/test_warp_mujoco.py states the
tolerances). Contacts and constraint rows live in buffers of fixed size (``nconmax`` contacts and
``njmax`` rows per world); a step that needs more sets Warp's overflow flags, which
:meth:`~WarpMujocoTask.check_overflow` turns into a :class:`WarpCapacityError` naming the worlds
and the sizes to raise (on the CPU after every step; on a GPU once per iteration, with the other
values the job reads, so that no step synchronises).

Shapes (``n = num_envs``): observations ``(n, obs_dim)`` float32; actions ``(n, act_dim)``;
rewards ``(n,)`` float32; terminated / truncated ``(n,)`` bool; reset states ``(nq + nv, n)``
(rows ``qpos`` then ``qvel``, envs as columns, the torch twins' layout).

Kernels are compiled once per model and machine (seconds to a minute on the CPU) into Warp's
kernel cache (``~/.cache/warp/<version>``, or ``$WARP_CACHE_PATH``; :func:`configure` moves it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from steinrl.errors import ConfigError

__all__ = ["INSTALL_HINT", "WARP_TASKS", "WarpCapacityError", "WarpMujocoTask", "configure", "make_warp_vec",
           "warp_backend", "warp_installed", "warp_task_id"]

#: How to install the backend (named by every error that needs it).
INSTALL_HINT = 'pip install "steinrl[gpu-mujoco]"'

#: Warp's overflow bits that mean a buffer was too small (contacts or constraint rows were dropped):
#: NEFC, NJMAX_NNZ, BROADPHASE, NARROWPHASE, CCD, HFIELD, NVMAX, EPA_HORIZON
#: (mujoco_warp's ``OverflowType``; its ITERATIONS / LS_ITERATIONS bits, a solver that used its
#: whole iteration budget, are no lost data: MuJoCo's C solver stops there too, silently).
CAPACITY_BITS = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5) | (1 << 7) | (1 << 8)


class WarpCapacityError(RuntimeError):
    """A step needed more contacts or constraint rows than the Warp ``Data`` holds."""


def warp_installed() -> bool:
    """True where ``mujoco_warp`` and ``warp`` can be imported (checked without importing them)."""
    return all(importlib.util.find_spec(name) is not None for name in ("mujoco_warp", "warp"))


_CONFIGURED = False


def configure(kernel_cache: str | None = None) -> Any:
    """Import and initialise Warp once, quietly (warnings and errors only); returns the module.

    :param kernel_cache: a folder for the compiled kernels (None: Warp's own, ``~/.cache/warp``
        or ``$WARP_CACHE_PATH``).
    :raises ConfigError: the extra is not installed (the message names the install command).
    """
    global _CONFIGURED
    if not warp_installed():
        raise ConfigError(f"MuJoCo Warp is not installed ({INSTALL_HINT}); use rollout.vectorization auto, sync "
                          "or envpool")
    import warp as wp

    if not _CONFIGURED:
        wp.config.log_level = wp.LOG_WARNING  # no banner, no line per module loaded
        if kernel_cache is not None:
            wp.config.kernel_cache_dir = str(kernel_cache)
        wp.init()
        _CONFIGURED = True
    elif kernel_cache is not None:
        from warp._src.build import init_kernel_cache

        init_kernel_cache(str(kernel_cache))
    return wp


@dataclass(frozen=True)
class Capacity:
    """Fixed buffer sizes of a world: ``nconmax`` contacts and ``njmax`` constraint rows
    (MuJoCo Warp's defaults for these models; Gymnasium's env under random actions at most 6
    contacts and 27 rows, Walker2d, in 5 episodes of up to 1000 steps)."""

    nconmax: int = 48
    njmax: int = 64


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
    :param physics_graph: replay each step's physics as a Warp graph (:meth:`physics`; None: yes;
        a captured iteration records the kernels into its own graph either way).
    :param kernel_cache: where Warp keeps compiled kernels (:func:`configure`).
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
        wp = configure(kernel_cache)
        import mujoco_warp as mjw

        from .registration import make

        if int(num_envs) < 1:
            raise ConfigError(f"{self.env_id}: num_envs must be >= 1, got {num_envs}")
        if groups < 1 or int(num_envs) % groups:
            raise ConfigError(f"{self.env_id}: groups must divide num_envs={num_envs}, got {groups}")
        if int(max_episode_steps) < 1:
            raise ConfigError(f"{self.env_id}: max_episode_steps must be >= 1, got {max_episode_steps}")
        self._wp, self._mjw = wp, mjw
        self.num_envs = n = int(num_envs)
        self.device = torch.device(device)
        if self.device.type not in ("cpu", "cuda"):
            raise ConfigError(f"{self.env_id}: MuJoCo Warp runs on cpu or cuda, not {self.device}")
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.max_episode_steps = int(max_episode_steps)
        self.nconmax = int(nconmax if nconmax is not None else self.capacity.nconmax)
        self.njmax = int(njmax if njmax is not None else self.capacity.njmax)

        gym_env = make(self.env_id)  # Gymnasium's env: its model from its own XML, its qpos0
        try:
            mjm, mjd = gym_env.unwrapped.model, gym_env.unwrapped.data
            if gym_env.unwrapped.frame_skip != self.frame_skip:  # (a fact checked, not an option)
                raise RuntimeError(f"{self.env_id}: Gymnasium's frame_skip is {gym_env.unwrapped.frame_skip}, "
                                   f"this definition's {self.frame_skip}")
            self.single_observation_space = gym_env.observation_space
            self.single_action_space = gym_env.action_space
            self.nq, self.nv, self.nu, self.nbody = mjm.nq, mjm.nv, mjm.nu, mjm.nbody
            if mjm.na:
                raise RuntimeError(f"{self.env_id}: actuator activations (na = {mjm.na}) are not saved")
            self.dt = float(mjm.opt.timestep) * self.frame_skip  # s per env step (Gymnasium's dt)
            init_qpos = np.array(gym_env.unwrapped.init_qpos)
            ctrlrange = np.array(mjm.actuator_ctrlrange, dtype=np.float32)  # (nu, 2)
            with wp.ScopedDevice(self._warp_device):
                self.model = mjw.put_model(mjm)
                if deterministic and self.device.type == "cuda":  # (the CPU runs a kernel's threads in order)
                    self.model.opt.deterministic = int(mjw.DeterminismType.ALL)
                self.data = mjw.put_data(mjm, mjd, nworld=n, nconmax=self.nconmax, njmax=self.njmax)
        finally:
            gym_env.close()
        if self.single_observation_space.shape != (self.obs_dim,):
            raise RuntimeError(f"{self.env_id}: Gymnasium observes {self.single_observation_space.shape}, this "
                               f"definition ({self.obs_dim},)")
        d, view = self.data, wp.to_torch
        # torch views of the Warp arrays (the same storage: what Warp writes, torch reads, and back)
        self.qpos, self.qvel, self.ctrl = view(d.qpos), view(d.qvel), view(d.ctrl)  # (n, nq), (n, nv), (n, nu)
        self.qacc_warmstart, self.time = view(d.qacc_warmstart), view(d.time)  # (n, nv), (n,)
        self.overflow = view(d.overflow)  # (n,) int32 bit mask, sticky until reset_overflow()
        self._overflow_host = d.overflow.numpy() if self.device.type == "cpu" else None  # (a view on the CPU)
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
        self._streams: dict[int, Any] = {}
        self._captures: list[Any] = []  # Warp's records of the torch captures that hold its launches
        self._conditional = self.device.type == "cpu" or self._conditional_supported()
        #: replay the physics as a Warp graph (see :meth:`physics`)
        self.physics_graph = True if physics_graph is None else bool(physics_graph)
        self._graph: Any = None  # the Warp graph of the physics
        self._physics_warm = False
        self._extra_init()

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

    # --- devices and streams -----------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.env_id

    @property
    def _warp_device(self) -> str:
        return "cpu" if self.device.type == "cpu" else f"cuda:{self.device.index}"

    def _conditional_supported(self) -> bool:
        """Whether a CUDA graph can stop the solver's loop at convergence (a conditional node)."""
        check = getattr(self._wp, "is_conditional_graph_supported", None)
        return bool(check()) if check is not None else False

    @contextlib.contextmanager
    def _launching(self) -> Iterator[tuple[Any, bool]]:
        """Warp launches on this device, on torch's current CUDA stream (so that a torch capture
        records them in order with the tensor ops around them); yields ``(warp stream or None on
        the CPU, whether torch is capturing a CUDA graph)``. Inside a torch capture, the capture is
        registered with Warp (``capture_begin(external=True)``: what Warp allocates in it lives
        as long as the graph)."""
        wp = self._wp
        if self.device.type == "cpu":
            with wp.ScopedDevice("cpu"):
                yield None, False
            return
        stream = torch.cuda.current_stream(self.device)
        warp_stream = self._streams.get(stream.cuda_stream)
        if warp_stream is None:
            warp_stream = self._streams[stream.cuda_stream] = wp.stream_from_torch(stream)
        capturing = torch.cuda.is_current_stream_capturing()
        with wp.ScopedDevice(self._warp_device), wp.ScopedStream(warp_stream, sync_enter=False):
            if not capturing:
                yield warp_stream, False
                return
            wp.capture_begin(stream=warp_stream, external=True, force_module_load=False,
                             capture_mode=wp.CaptureMode.GLOBAL)
            try:
                yield warp_stream, True
            finally:
                self._captures.append(wp.capture_end(stream=warp_stream))

    def _substeps(self, graphed: bool) -> None:
        """``frame_skip`` MuJoCo Warp steps and :meth:`after_physics`, launched now. ``graphed``:
        into a graph (Warp's or torch's), where the constraint solver's loop stops once every world
        converged (a conditional node on a GPU; on the CPU, in host memory); launched eagerly on a
        GPU it runs its whole iteration budget instead, so that no step reads a flag back (the
        worlds that converged skip the remaining iterations: the same numbers)."""
        self.model.opt.graph_conditional = self.device.type == "cpu" or (graphed and self._conditional)
        for _ in range(self.frame_skip):
            self._mjw.step(self.model, self.data)
        self.after_physics()

    def physics(self) -> None:
        """``frame_skip`` MuJoCo Warp steps of every world (and :meth:`after_physics`).

        With :attr:`physics_graph` (the default), the launches are recorded once into a Warp
        graph (after a first eager call has compiled the kernels; on a GPU on a stream of its own,
        as a capture cannot run on the default stream) and replayed on the current stream: on the
        CPU ten to forty times faster than launching each kernel from Python, with the same numbers
        (tests/test_warp_mujoco.py). Inside a torch CUDA-graph capture the kernels are launched
        into torch's graph instead. A recording that fails is reported once (a warning) and the
        steps launch eagerly from then on."""
        wp = self._wp
        with self._launching() as (stream, torch_capturing):
            if not self.physics_graph or torch_capturing or not self._physics_warm:
                self._substeps(graphed=torch_capturing)
                self._physics_warm = True
                return
            if self._graph is None:
                try:
                    self._graph = self._record()
                except Exception as exc:  # eager launches from now on (the same numbers, slower)
                    import warnings

                    warnings.warn(f"{self.env_id}: recording the physics as a Warp graph failed ({type(exc).__name__}: "
                                  f"{' '.join(str(exc).split())[:200]}); its kernels launch one by one", stacklevel=2)
                    self.physics_graph = False
                    self._substeps(graphed=False)
                    return
            wp.capture_launch(self._graph, stream=stream)

    def _record(self) -> Any:
        """The Warp graph of :meth:`_substeps` (recorded, not run)."""
        wp = self._wp
        if self.device.type == "cpu":
            with wp.ScopedCapture(device="cpu", force_module_load=False) as capture:
                self._substeps(graphed=True)
            return capture.graph
        side = wp.stream_from_torch(torch.cuda.Stream(self.device))  # (kept alive by the graph's life below)
        with wp.ScopedStream(side, sync_enter=False), \
                wp.ScopedCapture(device=self._warp_device, stream=side, force_module_load=False) as capture:
            self._substeps(graphed=True)
        self._capture_stream = side
        return capture.graph

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
        """The torch views of the Warp arrays a step reads and writes, by name (a replayed graph
        needs each to keep its storage)."""
        return {"qpos": self.qpos, "qvel": self.qvel, "ctrl": self.ctrl, "qacc_warmstart": self.qacc_warmstart,
                "time": self.time, "overflow": self.overflow}

    def close(self) -> None:
        self._captures.clear()
        self._graph = None


# --- the tasks ----------------------------------------------------------------------------------------


def _sum_sq(x: torch.Tensor) -> torch.Tensor:
    return (x * x).sum(-1)


class _Planar(WarpMujocoTask):
    """Hopper and Walker2d (Gymnasium's ``hopper_v5.py``, ``walker2d_v5.py``): observation
    ``qpos[1:]`` and ``clip(qvel, −10, 10)``; reward ``(x' − x) / dt + 1[healthy] − 0.001 ‖a‖²``;
    terminated when not healthy (strict bounds on the height z = ``qpos[1]`` and the angle
    ``qpos[2]``); reset ``qpos0 + U(±0.005)``, ``qvel U(±0.005)``; frame_skip 4."""

    frame_skip = 4
    reset_noise_scale = 5e-3
    ctrl_cost_weight = 1e-3
    healthy_reward = 1.0
    healthy_z: ClassVar[tuple[float, float]]
    healthy_angle: ClassVar[tuple[float, float]]

    def observe(self, fresh: torch.Tensor | None = None) -> torch.Tensor:
        return torch.cat([self.qpos[:, 1:], self.qvel.clamp(-10.0, 10.0)], dim=1)

    def healthy(self) -> torch.Tensor:
        z, angle = self.qpos[:, 1], self.qpos[:, 2]
        return (z > self.healthy_z[0]) & (z < self.healthy_z[1]) & (angle > self.healthy_angle[0]) \
            & (angle < self.healthy_angle[1])

    def reward(self, action: torch.Tensor, before: Any) -> tuple[torch.Tensor, torch.Tensor]:
        healthy = self.healthy()
        forward = (self.qpos[:, 0] - before) / self.dt
        reward = forward + healthy.to(self.dtype) * self.healthy_reward - self.ctrl_cost_weight * _sum_sq(action)
        return reward, ~healthy


class WarpHopper(_Planar):
    """``Hopper-v5`` (``gymnasium/envs/mujoco/hopper_v5.py``): healthy while z > 0.7, −0.2 < angle
    < 0.2 and every value of ``(qpos, qvel)[2:]`` lies in (−100, 100). Observation 11."""

    env_id = "Hopper-v5"
    obs_dim = 11
    healthy_z = (0.7, math.inf)
    healthy_angle = (-0.2, 0.2)
    healthy_state = (-100.0, 100.0)

    def healthy(self) -> torch.Tensor:
        state = torch.cat([self.qpos[:, 2:], self.qvel], dim=1)  # state_vector()[2:]
        in_range = ((state > self.healthy_state[0]) & (state < self.healthy_state[1])).all(1)
        return super().healthy() & in_range


class WarpWalker2d(_Planar):
    """``Walker2d-v5`` (``gymnasium/envs/mujoco/walker2d_v5.py``): healthy while 0.8 < z < 2 and
    −1 < angle < 1. Observation 17."""

    env_id = "Walker2d-v5"
    obs_dim = 17
    healthy_z = (0.8, 2.0)
    healthy_angle = (-1.0, 1.0)


class WarpHalfCheetah(WarpMujocoTask):
    """``HalfCheetah-v5`` (``gymnasium/envs/mujoco/half_cheetah_v5.py``): observation ``qpos[1:]``,
    ``qvel`` (17); reward ``(x' − x) / dt − 0.1 ‖a‖²``; never terminates; reset ``qpos0 + U(±0.1)``,
    ``qvel 0.1 · N(0, 1)``; frame_skip 5."""

    env_id = "HalfCheetah-v5"
    obs_dim = 17
    frame_skip = 5
    reset_noise_scale = 0.1
    qvel_noise = "normal"
    ctrl_cost_weight = 0.1

    def observe(self, fresh: torch.Tensor | None = None) -> torch.Tensor:
        return torch.cat([self.qpos[:, 1:], self.qvel], dim=1)

    def reward(self, action: torch.Tensor, before: Any) -> tuple[torch.Tensor, torch.Tensor]:
        forward = (self.qpos[:, 0] - before) / self.dt
        reward = forward - self.ctrl_cost_weight * _sum_sq(action)
        return reward, torch.zeros_like(reward, dtype=torch.bool)


class WarpSparseHalfCheetah(WarpHalfCheetah):
    """``SparseHalfCheetah`` (``steinrl/SparseHalfCheetah-v1``, :mod:`steinrl.envs.sparse_mujoco`):
    HalfCheetah-v5 observing the torso's x too (18 values) and paid ``1[x' > 5] − 0.1 ‖a‖²``."""

    env_id = "steinrl/SparseHalfCheetah-v1"
    obs_dim = 18

    def _extra_init(self) -> None:
        from .sparse_mujoco import CTRL_COST_WEIGHT, GOAL_DISTANCE  # (imports MuJoCo: not at module import)

        self.ctrl_cost_weight, self.goal_distance = CTRL_COST_WEIGHT, GOAL_DISTANCE

    def before_step(self) -> Any:
        return None

    def observe(self, fresh: torch.Tensor | None = None) -> torch.Tensor:
        return torch.cat([self.qpos, self.qvel], dim=1)

    def reward(self, action: torch.Tensor, before: Any) -> tuple[torch.Tensor, torch.Tensor]:
        goal = (self.qpos[:, 0] > self.goal_distance).to(self.dtype)
        reward = goal - self.ctrl_cost_weight * _sum_sq(action)
        return reward, torch.zeros_like(reward, dtype=torch.bool)


class WarpSwimmer(WarpMujocoTask):
    """``Swimmer-v5`` (``gymnasium/envs/mujoco/swimmer_v5.py``): observation ``qpos[2:]``, ``qvel``
    (8); reward ``(x' − x) / dt − 1e-4 ‖a‖²`` (x = ``qpos[0]``); never terminates; reset
    ``qpos0 + U(±0.1)``, ``qvel U(±0.1)``; frame_skip 4."""

    env_id = "Swimmer-v5"
    obs_dim = 8
    frame_skip = 4
    reset_noise_scale = 0.1
    ctrl_cost_weight = 1e-4

    def observe(self, fresh: torch.Tensor | None = None) -> torch.Tensor:
        return torch.cat([self.qpos[:, 2:], self.qvel], dim=1)

    def reward(self, action: torch.Tensor, before: Any) -> tuple[torch.Tensor, torch.Tensor]:
        forward = (self.qpos[:, 0] - before) / self.dt
        reward = forward - self.ctrl_cost_weight * _sum_sq(action)
        return reward, torch.zeros_like(reward, dtype=torch.bool)


class WarpAnt(WarpMujocoTask):
    """``Ant-v5`` (``gymnasium/envs/mujoco/ant_v5.py``): observation ``qpos[2:]``, ``qvel`` and the
    external contact forces ``clip(cfrc_ext[1:], −1, 1)`` (13 bodies × 6: 105); reward
    ``(x' − x) / dt + 1[healthy] − 0.5 ‖a‖² − 5e-4 ‖clip(cfrc_ext, −1, 1)‖²``, x the torso body's
    ``xpos`` (MuJoCo's of the last force evaluation, as Gymnasium reads it); healthy while the
    state is finite and 0.2 ≤ z = ``qpos[2]`` ≤ 1 (inclusive bounds); reset ``qpos0 + U(±0.1)``,
    ``qvel 0.1 · N(0, 1)``; frame_skip 5. After a reset the torso's ``xpos`` is ``qpos[0:2]`` (a
    free joint places its body at its position) and ``cfrc_ext`` is 0 (``mj_forward`` does not
    compute it)."""

    env_id = "Ant-v5"
    obs_dim = 105
    frame_skip = 5
    reset_noise_scale = 0.1
    qvel_noise = "normal"
    ctrl_cost_weight = 0.5
    contact_cost_weight = 5e-4
    healthy_reward = 1.0
    healthy_z = (0.2, 1.0)
    main_body = 1  # the torso

    def _extra_init(self) -> None:
        self.xpos = self._wp.to_torch(self.data.xpos)  # (n, nbody, 3)
        self.cfrc_ext = self._wp.to_torch(self.data.cfrc_ext)  # (n, nbody, 6): torque, force
        self.xy = torch.zeros((self.num_envs, 2), dtype=self.dtype, device=self.device)  # the torso's x, y

    def before_step(self) -> Any:
        return self.xy.clone()

    def after_physics(self) -> None:
        self._mjw.rne_postconstraint(self.model, self.data)

    def contact_forces(self) -> torch.Tensor:
        return self.cfrc_ext.clamp(-1.0, 1.0)  # (n, nbody, 6)

    def observe(self, fresh: torch.Tensor | None = None) -> torch.Tensor:
        forces = self.contact_forces()[:, 1:].flatten(1)
        if fresh is not None:
            forces = forces.masked_fill(fresh[:, None], 0.0)
            # where the next step's forward velocity starts: the last evaluation's torso, or the reset's qpos
            torch.where(fresh[:, None], self.qpos[:, :2], self.xpos[:, self.main_body, :2], out=self.xy)
        return torch.cat([self.qpos[:, 2:], self.qvel, forces], dim=1)

    def reward(self, action: torch.Tensor, before: Any) -> tuple[torch.Tensor, torch.Tensor]:
        state_finite = torch.isfinite(self.qpos).all(1) & torch.isfinite(self.qvel).all(1)
        z = self.qpos[:, 2]
        healthy = state_finite & (z >= self.healthy_z[0]) & (z <= self.healthy_z[1])
        forward = (self.xpos[:, self.main_body, 0] - before[:, 0]) / self.dt
        contact = self.contact_cost_weight * _sum_sq(self.contact_forces().flatten(1))
        reward = forward + healthy.to(self.dtype) * self.healthy_reward - self.ctrl_cost_weight * _sum_sq(action) \
            - contact
        return reward, ~healthy

    def _extra_state(self) -> torch.Tensor | None:
        return self.xy.T

    def _set_extra_state(self, rows: torch.Tensor) -> None:
        self.xy.copy_(rows.T)

    def device_tensors(self) -> dict[str, torch.Tensor]:
        return {**super().device_tensors(), "xpos": self.xpos, "cfrc_ext": self.cfrc_ext, "xy": self.xy}


class WarpInvertedDoublePendulum(WarpMujocoTask):
    """``InvertedDoublePendulum-v5`` (``gymnasium/envs/mujoco/inverted_double_pendulum_v5.py``):
    observation ``qpos[:1]``, ``sin qpos[1:]``, ``cos qpos[1:]``, ``clip(qvel, −10, 10)``,
    ``clip(qfrc_constraint, −10, 10)[:1]`` (9); with ``(x, _, y)`` the tip site's position,
    terminated when y ≤ 1, reward ``10 · 1[not terminated] − 0.01 x² − (y − 2)² − 0.001 v1² −
    0.005 v2²`` (``v1, v2 = qvel[1:3]``); reset ``qpos0 + U(±0.1)``, ``qvel 0.1 · N(0, 1)``;
    frame_skip 5. At a reset the constraint force is 0: the slider's limit (range ±1, margin
    0.01) is inactive within the reset noise and the model has no contacts (``contype 0``)."""

    env_id = "InvertedDoublePendulum-v5"
    obs_dim = 9
    frame_skip = 5
    reset_noise_scale = 0.1
    qvel_noise = "normal"
    healthy_reward = 10.0

    def _extra_init(self) -> None:
        self.site_xpos = self._wp.to_torch(self.data.site_xpos)  # (n, nsite, 3)
        self.qfrc_constraint = self._wp.to_torch(self.data.qfrc_constraint)  # (n, nv)

    def before_step(self) -> Any:
        return None

    def observe(self, fresh: torch.Tensor | None = None) -> torch.Tensor:
        constraint = self.qfrc_constraint[:, :1].clamp(-10.0, 10.0)
        if fresh is not None:
            constraint = constraint.masked_fill(fresh[:, None], 0.0)
        q = self.qpos[:, 1:]
        return torch.cat([self.qpos[:, :1], torch.sin(q), torch.cos(q), self.qvel.clamp(-10.0, 10.0), constraint],
                         dim=1)

    def reward(self, action: torch.Tensor, before: Any) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.site_xpos[:, 0, 0], self.site_xpos[:, 0, 2]
        terminated = y <= 1
        v1, v2 = self.qvel[:, 1], self.qvel[:, 2]
        reward = (~terminated).to(self.dtype) * self.healthy_reward - (0.01 * x * x + (y - 2) ** 2) \
            - (1e-3 * v1 * v1 + 5e-3 * v2 * v2)
        return reward, terminated

    def device_tensors(self) -> dict[str, torch.Tensor]:
        return {**super().device_tensors(), "site_xpos": self.site_xpos, "qfrc_constraint": self.qfrc_constraint}


#: Gymnasium id -> the MuJoCo Warp task.
WARP_TASKS: dict[str, type[WarpMujocoTask]] = {
    cls.env_id: cls for cls in (WarpHalfCheetah, WarpHopper, WarpWalker2d, WarpAnt, WarpSwimmer,
                                WarpInvertedDoublePendulum, WarpSparseHalfCheetah)
}


def warp_task_id(name: str) -> str | None:
    """The :data:`WARP_TASKS` id of ``name`` (a Gymnasium id or steinrl's short name), or None."""
    from .registration import resolve_env_id

    try:
        env_id = resolve_env_id(name)
    except ConfigError:
        return None
    return env_id if env_id in WARP_TASKS else None


def make_warp_vec(name: str, num_envs: int, **options: Any) -> WarpMujocoTask:
    """The MuJoCo Warp task ``name`` (one of :data:`WARP_TASKS`, or ``SparseHalfCheetah``) with ``num_envs`` worlds.

    :param options: :class:`WarpMujocoTask`'s keyword arguments (``device``, ``max_episode_steps``,
        ``groups``, ``nconmax``, ``njmax``, ``deterministic``, ``physics_graph``, ``kernel_cache``).
    :raises ConfigError: a task MuJoCo Warp does not run here, or the extra is not installed.
    """
    env_id = warp_task_id(name)
    if env_id is None:
        raise ConfigError(f"vectorization warp runs {', '.join(WARP_TASKS)}; got {name!r}: use vectorization auto, "
                          "sync or envpool")
    options.pop("dtype", None)  # (float32: MuJoCo Warp's)
    return WARP_TASKS[env_id](num_envs, **options)


def warp_backend(cfg: Any) -> bool:
    """Whether a run of ``cfg`` steps its envs on MuJoCo Warp: ``rollout.vectorization`` ``warp``
    (any device; a ConfigError where it cannot), or ``auto`` on a CUDA device for a task of
    :data:`WARP_TASKS` where the extra is installed and ``rollout.env_backend`` is not ``numpy``."""
    rollout = cfg.rollout
    mode = rollout.vectorization
    if mode not in ("warp", "auto"):
        return False
    env_id = warp_task_id(cfg.env)
    if mode == "auto":
        return (env_id is not None and torch.device(cfg.device).type == "cuda" and rollout.env_backend != "numpy"
                and warp_installed())
    if env_id is None:
        raise ConfigError(f"rollout.vectorization warp runs {', '.join(WARP_TASKS)}; got {cfg.env!r}: use "
                          "vectorization auto, sync or envpool")
    if rollout.env_backend == "numpy":
        raise ConfigError("rollout.vectorization warp steps the envs on the device as torch tensors: "
                          "rollout.env_backend must be auto or torch, not numpy")
    if not warp_installed():
        raise ConfigError(f"rollout.vectorization warp: MuJoCo Warp is not installed ({INSTALL_HINT}); use "
                          "vectorization auto, sync or envpool")
    return True
