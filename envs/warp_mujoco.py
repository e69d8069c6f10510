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

Modules: this one holds the tasks and how a run chooses them; :mod:`steinrl.envs.warp_task` the
worlds' resets, steps and saved state; :mod:`steinrl.envs.warp_sim` MuJoCo Warp itself (its
model and data, the launches on torch's stream and inside CUDA graphs, :func:`configure`).
Kernels are compiled once per model and machine (seconds to a minute on the CPU) into Warp's
kernel cache (``~/.cache/warp/<version>``, or ``$WARP_CACHE_PATH``).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Protocol

import torch

from steinrl.errors import ConfigError

from .warp_sim import INSTALL_HINT, Capacity, WarpCapacityError, configure, warp_installed
from .warp_task import WarpMujocoTask

__all__ = ["INSTALL_HINT", "WARP_TASKS", "Capacity", "WarpCapacityError", "WarpMujocoTask", "configure",
           "make_warp_vec", "warp_backend", "warp_installed", "warp_task_id"]


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
        self.xpos = self.sim.view("xpos")  # (n, nbody, 3)
        self.cfrc_ext = self.sim.view("cfrc_ext")  # (n, nbody, 6): torque, force
        self.xy = torch.zeros((self.num_envs, 2), dtype=self.dtype, device=self.device)  # the torso's x, y

    def before_step(self) -> Any:
        return self.xy.clone()

    def after_physics(self) -> None:
        self.sim.mjw.rne_postconstraint(self.model, self.data)

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
        self.site_xpos = self.sim.view("site_xpos")  # (n, nsite, 3)
        self.qfrc_constraint = self.sim.view("qfrc_constraint")  # (n, nv)

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


class RolloutBackend(Protocol):
    """What :func:`warp_backend` reads of a run's ``rollout`` section (:class:`steinrl.rl.rollout.RolloutSettings`)."""

    vectorization: str
    env_backend: str
    compile: bool


def warp_backend(env: str, device: str, rollout: RolloutBackend) -> bool:
    """Whether a run on ``env`` and ``device`` steps its envs on MuJoCo Warp: ``rollout.vectorization``
    ``warp`` (any device; a ConfigError where it cannot), or ``auto`` on a CUDA device for a task of
    :data:`WARP_TASKS` where the extra is installed and ``rollout.env_backend`` is not ``numpy``."""
    mode = rollout.vectorization
    if mode not in ("warp", "auto"):
        return False
    env_id = warp_task_id(env)
    if mode == "auto":
        return (env_id is not None and torch.device(device).type == "cuda" and rollout.env_backend != "numpy"
                and warp_installed())
    if env_id is None:
        raise ConfigError(f"rollout.vectorization warp runs {', '.join(WARP_TASKS)}; got {env!r}: use "
                          "vectorization auto, sync or envpool")
    if rollout.env_backend == "numpy":
        raise ConfigError("rollout.vectorization warp steps the envs on the device as torch tensors: "
                          "rollout.env_backend must be auto or torch, not numpy")
    if rollout.compile:
        raise ConfigError("rollout.compile cannot trace MuJoCo Warp's kernels into a torch.compile graph: set it "
                          "false (run.cuda_graph captures the whole iteration, physics included, on CUDA)")
    if not warp_installed():
        raise ConfigError(f"rollout.vectorization warp: MuJoCo Warp is not installed ({INSTALL_HINT}); use "
                          "vectorization auto, sync or envpool")
    return True
