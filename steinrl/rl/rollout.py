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

One sampler for every backend: it steps a :class:`~steinrl.rl.tasks.VectorTask` (Gymnasium
vector envs on the host through zero-copy tensors, or the torch twins of steinrl's tasks on
the training device). Its loop only acts, steps and writes the buffers; validity, the
stopping rule and the episode statistics are computed over ``(T, N)`` afterwards
(:mod:`steinrl.rl.episodes`), so the per-step work is the same few operations on every
device and a device batch synchronises with the host only to learn, every ``check_every``
steps, whether whole episodes have all ended.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from steinrl.core.groups import rows
from steinrl.errors import NonFiniteError
from steinrl.registry import Option, at_least_one, setting, settings_options
from steinrl.rl.draws import Draws
from steinrl.rl.episodes import Start, WholeEpisodeRule, bookkeeping, previous_done
from steinrl.rl.tasks import NonFiniteAction, VectorTask
from steinrl.rl.timeaxis import write_row

#: ``act(obs (M, E, obs_dim) float32, t) -> actions (M, E, *action_shape)``, arrays of the
#: task's kind: numpy for a host task, tensors on the device for a device task;
#: :meth:`steinrl.rl.policy.EnsemblePolicy.actor` builds one from a policy.
ActFn = Callable[[Any, int], Any]

SAMPLING_MODES = ("whole_episodes", "continuing", "cut")

@dataclass(frozen=True)
class RolloutSettings:
    """The ``rollout`` config section: how a batch is collected."""

    batch_size: int = setting(5000, "Env steps per particle per iteration (at least; whole episodes are kept).",
                              check=at_least_one)
    envs_per_particle: int = setting(10, "Parallel envs per particle E; all M x E envs step together.",
                                     check=at_least_one)
    horizon: int = setting(500, "Maximum episode length (time-limit truncation, not termination): 500 on steinrl's "
                           "tasks (the papers'), a Gymnasium id's own registered limit otherwise (Hopper-v5: 1000).",
                           check=at_least_one)
    sampling: str = setting(
        "whole_episodes", "whole_episodes: every episode runs to its end, new ones start while the particle's steps "
        "are below batch_size (the papers'); continuing: every env takes ceil(batch_size / E) steps and episodes "
        "carry on into the next iteration (SB3's; a2c bootstraps at the cut); cut: the same but fresh episodes every "
        "iteration.", choices=SAMPLING_MODES)
    env_backend: str = setting(
        "auto", "numpy: our tasks as numpy vector envs on the host; torch: their torch twins on the training device, "
        "the whole rollout there (steinrl's tasks, and the MuJoCo tasks with vectorization warp); auto: numpy on "
        "cpu, torch on other devices where the task has a torch twin (vectorization warp: torch on any device).",
        choices=("auto", "numpy", "torch"))
    compile: bool = setting(
        False, "torch backend: run each rollout step (policy forward, sampling, env step, autoreset, buffer writes) "
        "as one torch.compile(fullgraph=True) graph (on CUDA in mode reduce-overhead: a CUDA graph). Off by default: "
        "it does not pay on CPU, nor yet on a GPU (an H200: torch skips the CUDA graph because the step writes its "
        "buffers in place; docs/gpu.md).")
    vectorization: str = setting(
        "auto", "How Gymnasium ids that are not ours are vectorised (sync: one process; async: a process per env; "
        "envpool: EnvPool's C++ batched MuJoCo v5 tasks, the steinrl[envpool] extra; warp: MuJoCo Warp, the MuJoCo "
        "tasks as torch tensors on the training device, the steinrl[gpu-mujoco] extra (docs/gpu.md); auto: warp on "
        "a CUDA device where it is installed and runs the task, else envpool where it is installed and runs the id, "
        "else sync). Our tasks always use their numpy vector env.",
        choices=("auto", "sync", "async", "envpool", "warp"))


#: The options of :class:`RolloutSettings`.
ROLLOUT_OPTIONS: tuple[Option, ...] = settings_options(RolloutSettings)


def compile_mode(device: torch.device | str) -> str | None:
    """The ``torch.compile`` mode of the rollout step on ``device``: ``"reduce-overhead"`` on
    CUDA (a CUDA graph: one launch per step), torch's default (None) elsewhere."""
    return "reduce-overhead" if torch.device(device).type == "cuda" else None


@dataclass
class Batch:
    """One iteration's samples, tensors on the task's device. ``T`` is the number of vector steps taken."""

    obs: Tensor  # (T + 1, M, E, obs_dim) float32; obs[t + 1] follows step t (final obs if step t ended)
    actions: Tensor  # (T, M, E, *action_shape) in the action space's dtype
    rewards: Tensor  # (T, M, E) float32
    terminated: Tensor  # (T, M, E) bool: a true terminal state (value 0)
    done: Tensor  # (T, M, E) bool: terminated or truncated (the episode ended at this step)
    valid: Tensor  # (T, M, E) bool: a real transition of an active env
    timestep: Tensor  # (T + 1, M, E) int32: obs[t]'s step index within its episode
    episode_stats: Tensor  # (3, M) float64: per particle the sum of its completed episodes' returns,
    #                        the sum of their lengths, and their number
    episode_return: Tensor  # (T, M, E) float64: at the step that ended an episode, its return (0 elsewhere)
    episode_length: Tensor  # (T, M, E) int64: at that step, its length (0 elsewhere)
    ended: Tensor  # (T, M, E) bool: a valid step that ended an episode

    @property
    def num_steps(self) -> int:
        """Valid env steps over all particles (a host sync on a device)."""
        return int(self.valid.sum())

    def episodes(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per particle, the return and the length of each episode it completed, in the order
        they ended (numpy, on the host)."""
        ended = self.ended.transpose(0, 1).reshape(self.ended.shape[1], -1).cpu().numpy()  # (M, T*E)
        ret = self.episode_return.transpose(0, 1).reshape(ended.shape).cpu().numpy()
        length = self.episode_length.transpose(0, 1).reshape(ended.shape).cpu().numpy()
        return [r[e] for r, e in zip(ret, ended)], [n[e] for n, e in zip(length, ended)]

    def to(self, device: torch.device) -> Batch:
        """The batch with its tensors on ``device`` (one transfer each; a no-op where they are)."""
        return Batch(**{f: getattr(self, f).to(device) for f in self.__dataclass_fields__})


class Sampler:
    """Steps a :class:`~steinrl.rl.tasks.VectorTask` of ``M * E`` envs for a policy ensemble.

    :param task: ``num_envs == M * E`` envs with next-step autoreset.
    :param num_particles: M.
    :param envs_per_particle: E.
    :param horizon: maximum episode length (bounds how long whole episodes can run).
    :param check_every: whole episodes: steps between two checks whether every env has
        stopped, from the first step at which a particle can have reached its budget (default
        16 on the CPU, 64 on other devices, where a check synchronises); the steps taken past
        the last stop are dropped.
    :param compile: a device task: run each step (policy forward, sampling, env step,
        autoreset, buffer writes) as one ``torch.compile(fullgraph=True)`` graph, in
        :func:`compile_mode` (on CUDA a CUDA graph); ignored for a host task.
    """

    def __init__(self, task: VectorTask, num_particles: int, envs_per_particle: int, horizon: int,
                 check_every: int | None = None, compile: bool = False) -> None:
        if task.num_envs != num_particles * envs_per_particle:
            raise ValueError(f"vector env has {task.num_envs} envs, expected M*E = {num_particles * envs_per_particle}")
        self.task = task
        self.M, self.E = num_particles, envs_per_particle
        self.horizon = horizon
        self.device = task.device
        self.check_every = check_every or (16 if self.device.type == "cpu" else 64)
        self.obs_dim, self.action_shape = task.obs_dim, tuple(task.action_shape)
        self._capacity = 0
        self._finite: Tensor | None = None  # (M,) whether the last batch's actions were finite (device tasks)
        #: continuing sampling: where the last batch left every env (the sampler's own tensors,
        #: written in place by every batch)
        self.carry: Start | None = None
        self._compile = bool(compile) and not task.host
        self._compiled: Callable[[ActFn, Tensor, Tensor], Tensor] | None = None
        self._time_index: Tensor | None = None

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
        if self._capacity >= T:
            return
        N, dev = self.M * self.E, self.device
        self._obs = torch.empty((T + 1, N, self.obs_dim), device=dev)
        self._act = torch.empty((T, N, *self.action_shape), dtype=self.task.action_dtype, device=dev)
        self._rew = torch.empty((T, N), dtype=torch.float64, device=dev)
        self._term = torch.empty((T, N), dtype=torch.bool, device=dev)
        self._trunc = torch.empty((T, N), dtype=torch.bool, device=dev)
        self._capacity = T
        buffers = (self._obs, self._act, self._rew, self._term, self._trunc)
        self._writers = tuple(b.numpy() for b in buffers) if self.task.host else buffers

    def persistent_tensors(self) -> dict[str, Tensor]:
        """What a batch reads from the last one or writes in place, by name: continuing sampling's
        carry-over, the buffers and the task's tensors (a replayed CUDA graph keeps their storage)."""
        out = {} if self.carry is None else {f"carry.{k}": v for k, v in vars(self.carry).items()}
        if self._capacity:
            out.update({f"buffer.{k}": v for k, v in zip(("obs", "act", "rew", "term", "trunc"), (
                self._obs, self._act, self._rew, self._term, self._trunc))})
        return {**out, **{f"envs.{k}": v for k, v in self.task.persistent_tensors().items()}}

    def state_dict(self, group: int = 0, groups: int = 1) -> dict:
        """Continuing sampling's carry-over (each env's observation and episode progress) and
        the envs' own state, of seed group ``group`` of ``groups``, so that a restored run
        continues the same episodes. Empty in the other modes (every batch starts from a
        seeded reset)."""
        if self.carry is None:
            return {}
        state = {"carry": {k: rows(v, group, groups) for k, v in vars(self.carry).items()}}  # env axis first
        envs = self.task.get_state(group, groups)
        if envs is not None:
            state["envs"] = envs
        return state

    def load_state_dict(self, states: list[dict] | dict) -> None:
        """Continue from one :meth:`state_dict` per seed group (a single dict: one group)."""
        states = [states] if isinstance(states, dict) else list(states)
        if "carry" not in states[0]:
            self.carry = None
        elif "envs" in states[0]:
            self.task.set_state([s["envs"] for s in states])
            self.carry = Start(**{k: torch.cat([s["carry"][k] for s in states]).to(self.device)
                                  for k in states[0]["carry"]})
        else:  # a Gymnasium env whose state cannot be saved: the restored run starts fresh episodes
            warnings.warn("continuing sampling on Gymnasium envs whose state a checkpoint cannot hold: the restored "
                          "run's envs start fresh episodes (steinrl's own tasks continue exactly)", stacklevel=2)
            self.carry = None

    def _step(self, act: ActFn, t: Any, obs: Any) -> Any:
        """One vector step at time index ``t``: act on ``obs`` ``(N, obs_dim)``, step the task,
        write the buffers' row ``t``; returns the next observations.

        It writes through the buffers' views of the task's kind: numpy views of the CPU tensors
        for a host task (its arrays never become tensors step by step), the tensors themselves on
        a device; arrays and tensors index alike. ``t`` is an int, or under ``torch.compile`` a
        0-dim device tensor (one graph serves every step): nothing in here draws random numbers
        (the policy's noise and the task's reset states are drawn once per batch) or reads a
        value back to the host, so on a device task the whole step traces as one graph.
        """
        M, E, N = self.M, self.E, self.M * self.E
        obs_w, act_w, rew_w, term_w, trunc_w = self._writers
        write_row(obs_w, t, obs)
        actions = act(obs.reshape(M, E, -1), t).reshape(N, *self.action_shape)
        write_row(act_w, t, actions)
        obs, rew, term, trunc = self.task.step(actions, t)
        for buffer, value in ((rew_w, rew), (term_w, term), (trunc_w, trunc)):
            write_row(buffer, t, value)
        return obs

    def _compiled_step(self) -> Callable[[ActFn, Tensor, Tensor], Tensor]:
        """:meth:`_step` through ``torch.compile(fullgraph=True)`` in :func:`compile_mode` (built once)."""
        if self._compiled is None:
            self._compiled = torch.compile(self._step, fullgraph=True, dynamic=False,
                                           mode=compile_mode(self.device))
        return self._compiled

    def _times(self, T: int) -> Tensor:
        """The time indices ``0 .. T-1`` as 0-dim device tensors (``arange(T)[t]``: views, made once)."""
        if self._time_index is None or len(self._time_index) < T:
            self._time_index = torch.arange(T, device=self.device)
        return self._time_index

    def _start(self, mode: str, seed: int | list[int] | None, draws: Draws | None) -> Start:
        """Where the batch starts: fresh episodes (reset with ``seed``; a device task's initial
        states through ``draws``, as ``"initial_states"``, seeded by ``draws.reset_seed``), or,
        continuing, where the last one ended."""
        if mode == "continuing" and self.carry is not None:
            return self.carry
        if draws is None or self.task.host:
            return Start.fresh(self.task.reset(seed))
        task = self.task
        initial = draws("initial_states", lambda iteration: task.draw_reset(draws.reset_seed(iteration)))
        return Start.fresh(task.start(initial))

    def _carry_over(self, end: Start) -> None:
        """Continuing sampling: ``end`` becomes the next batch's start, written into the carry's
        own tensors where there is one (they keep their storage from batch to batch)."""
        if self.carry is None:
            self.carry = Start(**{k: v.clone() for k, v in vars(end).items()})
            return
        for name, value in vars(end).items():
            getattr(self.carry, name).copy_(value)

    @property
    def action_finite(self) -> Tensor | None:
        """``(M,)`` whether each particle's actions in the last batch were finite, for a device
        task (no sync: the caller checks it with the iteration's other values); None for a
        task that checks actions itself (it raised already)."""
        return self._finite

    def collect(self, act: ActFn, steps_per_particle: int, *, mode: str = "whole_episodes",
                seed: int | list[int] | None = None, draws: Draws | None = None) -> Batch:
        """Run one batch and return it (views into preallocated buffers, valid until the next call).

        :param act: the ensemble's action function (see :data:`ActFn`).
        :param steps_per_particle: the batch budget of each particle (see the module docstring).
        :param mode: ``whole_episodes``, ``cut`` or ``continuing`` (see the module docstring).
        :param seed: seed of the reset at the start of the batch (``continuing``: of the first
            batch); a list: one per seed group of a device task.
        :param draws: a device task's random numbers (reset states) come through it (static
            draws: the batch draws nothing itself, and continuing sampling's carry-over keeps its
            storage: a graph-safe batch).
        """
        if mode not in SAMPLING_MODES:
            raise ValueError(f"unknown sampling mode {mode!r}; choices: {', '.join(SAMPLING_MODES)}")
        M, E = self.M, self.E
        T_max = self.max_steps(steps_per_particle, mode)
        self._allocate(T_max)
        start = self._start(mode, seed, draws)
        rule = WholeEpisodeRule(M, E, steps_per_particle, self.device) if mode == "whole_episodes" else None
        # no particle reaches its budget before each of its envs has stepped budget / E times
        first_check = -(-steps_per_particle // E)
        obs, t0, T = start.obs.numpy() if self.task.host else start.obs, 0, T_max
        self.task.begin(T_max, draws)  # a device task draws the batch's reset states here, once
        step, times = (self._compiled_step(), self._times(T_max)) if self._compile else (self._step, range(T_max))
        for t in range(T_max):
            try:
                obs = step(act, times[t], obs)
            except NonFiniteAction as exc:
                bad = sorted({n // E for n in exc.envs})
                raise NonFiniteError(f"non-finite action at rollout step {t} in particle(s) {bad}") from None
            if rule is not None and t + 1 >= first_check and ((t + 1 - first_check) % self.check_every == 0
                                                              or t + 1 == T_max):
                done = self._term[t0:t + 1] | self._trunc[t0:t + 1]
                first = start.prev_done if t0 == 0 else self._term[t0 - 1] | self._trunc[t0 - 1]
                if bool(rule.advance(done, previous_done(done, first), t0)):  # the one sync of this mode
                    T = int(rule.stop.max()) + 1  # the steps after the last env stopped are dropped
                    break
                t0 = t + 1
        # (a compiled step's output may be a CUDA graph's own buffer, rewritten by its next replay: the
        # observations the batch keeps, and carries into the next one, are a copy)
        obs = torch.as_tensor(obs).clone() if self._compile else torch.as_tensor(obs)
        # a device task does not look at actions: flag them here (no sync now; see action_finite)
        self._finite = None if self.task.checks_actions else torch.isfinite(self._act[:T].view(T, M, -1)).all(2).all(0)
        if t + 1 == T:  # (else obs[T] was written by the loop)
            self._obs[T] = obs
        books = bookkeeping(self._rew[:T], self._term[:T], self._trunc[:T], start,
                            None if rule is None else rule.stop, M)
        if mode == "continuing":
            books.end.obs = obs
            self._carry_over(books.end)
        else:
            self.carry = None

        def view(x: Tensor) -> Tensor:
            return x.view(x.shape[0], M, E, *x.shape[2:])

        return Batch(obs=view(self._obs[: T + 1]), actions=view(self._act[:T]), rewards=view(self._rew[:T].float()),
                     terminated=view(self._term[:T]), done=view(books.done), valid=view(books.valid),
                     timestep=view(books.timestep), episode_stats=books.stats,
                     episode_return=view(books.episode_return), episode_length=view(books.episode_length),
                     ended=view(books.ended))
