"""Side-by-side evaluation of trained runs, steinrl's and SB3's, by SB3's ``evaluate_policy``.

Every policy is scored the same way: ``evaluate_policy(policy, env, n_eval_episodes=10,
deterministic=True)`` on a one-env ``DummyVecEnv`` of the run's task (SB3's ``make_vec_env``:
each env in a ``Monitor``, so the returns are the raw episode returns), seeded with the same
``seed`` for every run, episodes capped at the run's own horizon.

- An SB3 run (``sb3-ppo``, ``sb3-ppo-zoo``) acts through its policy with the run's saved
  VecNormalize observation statistics (:class:`steinrl.baselines.sb3_ppo.NormalizedPolicy`).
- A steinrl RL run acts through :class:`EnsemblePredictor` (SB3's ``predict`` on the ensemble,
  as :class:`~steinrl.sb3.policy.EnsembleSB3Policy` acts), as two rows:
  ``best-train``: the particle with the best training return (its mean return over the
  episodes it finished in the last iteration that has any); and the ensemble acting as one
  policy in ``ensemble`` mode: ``select`` (default; each particle plays ``heldout_episodes``
  episodes on another seed stream, ``heldout_seed``, and the best one is scored; the
  steps it took are reported), ``sample`` (each episode's particle drawn at random) or
  ``mean`` (the particles' mean action: for a unimodal population only).

Every row also records the mean episode length of its evaluation episodes and, where the task
reports the torso's x position (Gymnasium's MuJoCo locomotion tasks: ``info["x_position"]``),
the mean forward distance: the x displacement from an episode's reset to its last step
(:class:`ForwardDistance`). Hopper-v5 pays 1 per step for staying healthy, so a return near
1000 may be a policy that stands for 1000 steps; its forward distance tells (about 0 m).

Every row records the run's total env steps and the wall-clock seconds of its training
iterations (the sum of ``time/iteration_seconds``: rollouts and updates, not logging or
checkpoints), read from its logged metrics (``metrics.jsonl``, or a Ray trial's
``result.json``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from steinrl import envs
from steinrl.errors import ConfigError
from steinrl.rl.evaluation import ACT_MODES, EnsembleActor
from steinrl.rl.policy import EnsemblePolicy
from steinrl.run.best import BEST_NAME, read_best
from steinrl.run.checkpoint import CHECKPOINT_NAME
from steinrl.run.config import Config
from steinrl.run.load import load_run
from steinrl.run.logger import read_metrics

__all__ = [
    "ENSEMBLE_MODES",
    "EnsemblePredictor",
    "ForwardDistance",
    "RunRecord",
    "best_training_particle",
    "episode_returns",
    "episode_stats",
    "evaluate_record",
    "find_runs",
    "select_particle",
    "total_env_steps",
    "wall_seconds",
]

ENSEMBLE_MODES = ("select", "sample", "mean")


@dataclass
class RunRecord:
    """A trained run on disk: a ``steinrl train`` run directory or a sweep's Ray trial directory."""

    path: Path  #: the run / trial directory
    checkpoint: Path  #: its (latest) checkpoint
    rows: list[dict[str, Any]]  #: its metrics, one row per iteration, in order (resumed rows once)


class EnsemblePredictor:
    """An ensemble acting as one policy through SB3's ``predict`` (what ``evaluate_policy`` calls),
    on a VecEnv's observations ``(n_envs, obs_dim)``: the actions of :class:`EnsembleActor`
    (deterministic: a particle's mean action / arg-max), reshaped to ``(n_envs, *action_shape)``
    and clipped to a Box action space, as SB3's ``BasePolicy.predict`` does.

    :param ensemble: the trained policy particles.
    :param action_space: the task's action space.
    :param act_mode: ``particle``, ``sample`` or ``mean`` (:data:`~steinrl.rl.evaluation.ACT_MODES`).
    :param particle: the particle of ``particle`` mode; ``seed``: the particle draws and action noise.
    """

    def __init__(self, ensemble: EnsemblePolicy, action_space: gym.Space, act_mode: str = "particle",
                 particle: int = 0, seed: int | None = None) -> None:
        self.ensemble, self.action_space, self.seed = ensemble, action_space, seed
        self.actor = EnsembleActor(ensemble, mode=act_mode, particle=particle, seed=seed)

    @property
    def num_particles(self) -> int:
        return self.ensemble.num_particles

    def set_act_mode(self, act_mode: str | None = None, particle: int | None = None, seed: int | None = None) -> None:
        """Change how the ensemble acts; restarts the random stream (from ``seed`` if given, else the last seed)."""
        old = self.actor
        mode = old.mode if act_mode is None else act_mode
        if mode not in ACT_MODES:
            raise ValueError(f"unknown act_mode {mode!r}; choices: {', '.join(ACT_MODES)}")
        self.seed = self.seed if seed is None else int(seed)
        self.actor = EnsembleActor(self.ensemble, mode=mode, particle=old.particle if particle is None else particle,
                                   seed=self.seed)

    def predict(self, observation: np.ndarray, state: Any = None, episode_start: np.ndarray | None = None,
                deterministic: bool = False) -> tuple[np.ndarray, Any]:
        """Actions ``(n_envs, *action_shape)`` for observations ``(n_envs, obs_dim)``; in ``sample``
        mode the envs whose episode starts (``episode_start`` (n_envs,) bool) draw new particles."""
        actor = self.actor
        if actor.mode == "sample" and episode_start is not None:
            starting = np.asarray(episode_start, dtype=bool).reshape(-1)
            if starting.any() or actor.assigned is None or len(actor.assigned) != len(starting):
                actor.reset(starting=starting)
        obs = torch.as_tensor(np.array(observation), device=actor.generator.device).float()
        actor.deterministic = deterministic
        actions = actor.act(obs.reshape(obs.shape[0], -1)).cpu().numpy().reshape((-1, *self.action_space.shape))
        if isinstance(self.action_space, gym.spaces.Box):
            actions = np.clip(actions, self.action_space.low, self.action_space.high)
        return actions, state


def _trial_rows(trial: Path) -> list[dict[str, Any]]:
    """A Ray trial's reported results (``result.json``), the last report of each iteration."""
    rows: dict[int, dict[str, Any]] = {}
    path = trial / "result.json"
    for line in path.read_text(errors="replace").splitlines() if path.is_file() else []:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("training_iteration"), int):
            rows[row["training_iteration"]] = {"iteration": row["training_iteration"] - 1, **row}
    return [rows[k] for k in sorted(rows)]


def _best_record(run: Path) -> RunRecord:
    """A run directory's ``best.pt`` (:mod:`steinrl.run.best`), its rows up to the iteration it holds."""
    best = read_best(run) or {}
    rows = read_metrics(run)
    iteration = best.get("iteration")
    return RunRecord(run, run / BEST_NAME, rows[:iteration] if isinstance(iteration, int) else rows)


def find_runs(paths: list[str | Path], checkpoint: str = "last") -> list[RunRecord]:
    """The runs under ``paths``: run directories (``checkpoint.pt`` + ``metrics.jsonl``), their
    checkpoint files, Ray trial directories (``params.json`` + ``checkpoint_*/``; the latest
    checkpoint), or folders holding any of these (a logdir, a sweep's output), searched in order.
    ``checkpoint="best"`` takes a run directory's ``best.pt`` where it has one (the policy of its
    best held-out evaluation; a Ray trial keeps none); a ``best.pt`` given as a path is taken as it is."""
    found: list[RunRecord] = []

    def visit(path: Path) -> None:
        if path.is_file() and path.name == BEST_NAME and (path.parent / CHECKPOINT_NAME).is_file():
            found.append(_best_record(path.parent))
            return
        if path.is_file() and path.name == CHECKPOINT_NAME:
            path = path.parent
        if not path.is_dir():
            return
        if (path / CHECKPOINT_NAME).is_file() and checkpoint == "best" and (path / BEST_NAME).is_file():
            found.append(_best_record(path))
        elif (path / CHECKPOINT_NAME).is_file():
            found.append(RunRecord(path, path / CHECKPOINT_NAME, read_metrics(path)))
        elif (path / "params.json").is_file():
            checkpoints = sorted(path.glob(f"checkpoint_*/{CHECKPOINT_NAME}"))
            if checkpoints:
                found.append(RunRecord(path, checkpoints[-1], _trial_rows(path)))
        else:
            for sub in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
                visit(sub)

    for p in paths:
        if not Path(p).exists():
            raise ConfigError(f"no run, checkpoint or folder at {p}")
        visit(Path(p))
    return found


def total_env_steps(rows: list[dict[str, Any]], particles: int) -> float:
    """Env steps of the whole run: ``time/total_env_steps`` of the last row (every run that logs
    it), else the sum over iterations of ``time/steps_per_particle`` times the particles (runs
    from before steinrl's RL jobs logged the total)."""
    if rows and isinstance(rows[-1].get("time/total_env_steps"), (int, float)):
        return float(rows[-1]["time/total_env_steps"])
    per = [r["time/steps_per_particle"] for r in rows if isinstance(r.get("time/steps_per_particle"), (int, float))]
    return float(sum(per) * particles) if per else math.nan


def wall_seconds(rows: list[dict[str, Any]]) -> float:
    """Seconds of the run's training iterations: ``time/total_seconds`` of the last row where the
    run logs it (a sweep trial with ``run.report_every`` > 1 reports one iteration in several),
    else the sum of ``time/iteration_seconds``."""
    if rows and isinstance(rows[-1].get("time/total_seconds"), (int, float)):
        return float(rows[-1]["time/total_seconds"])
    return float(sum(r["time/iteration_seconds"] for r in rows
                     if isinstance(r.get("time/iteration_seconds"), (int, float))))


def finished(rows: list[dict[str, Any]]) -> bool | None:
    """Whether the run reached its stopping rule: a sweep trial's last report says (``done``);
    None where the rows do not (a ``steinrl train`` run directory)."""
    done = rows[-1].get("done") if rows else None
    return bool(done) if isinstance(done, bool) else None


def best_training_particle(rows: list[dict[str, Any]], particles: int) -> int:
    """The particle with the best training return: the arg-max of ``particles/ep_rew_mean_XX``
    (each particle's mean return over the episodes it finished in that iteration) in the last
    iteration where some particle finished one; particle 0 if none ever did."""
    for row in reversed(rows):
        values = np.array([row.get(f"particles/ep_rew_mean_{i:02d}", math.nan) for i in range(particles)], float)
        if np.isfinite(values).any():
            return int(np.nanargmax(np.where(np.isfinite(values), values, -np.inf)))
    return 0


class ForwardDistance(gym.Wrapper):
    """Adds ``info["forward_distance"]`` to every step: the env's ``info["x_position"]`` (the
    torso's x in Gymnasium's MuJoCo locomotion tasks) minus its value at the episode's reset.
    A task whose reset info has no ``x_position`` gets no key (its distance is NaN)."""

    _x0: float | None = None

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        x = info.get("x_position")
        self._x0 = float(x) if isinstance(x, (int, float, np.number)) else None
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        x = info.get("x_position")
        if self._x0 is not None and isinstance(x, (int, float, np.number)):
            info = {**info, "forward_distance": float(x) - self._x0}
        return obs, reward, terminated, truncated, info


def episode_stats(policy: Any, make_env: Callable[[], Any], episodes: int, seed: int,
                  deterministic: bool = True) -> tuple[list[float], list[int], list[float]]:
    """``(returns, lengths, forward distances)`` of ``episodes`` episodes of ``policy`` by SB3's
    ``evaluate_policy`` on a one-env DummyVecEnv of ``make_env`` (wrapped in
    :class:`ForwardDistance`, then a Monitor) whose first reset is seeded ``seed``; a distance is
    NaN where the task reports no x position."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    forward: list[float] = []

    def on_step(local: dict[str, Any], _: dict[str, Any]) -> None:
        # evaluate_policy counts an episode (Monitor-wrapped) when done and info holds "episode"
        if local["done"] and "episode" in local["info"]:
            forward.append(float(local["info"].get("forward_distance", math.nan)))

    venv = make_vec_env(lambda: ForwardDistance(make_env()), n_envs=1, seed=seed)
    try:
        returns, lengths = evaluate_policy(policy, venv, n_eval_episodes=episodes, deterministic=deterministic,
                                           return_episode_rewards=True, warn=False, callback=on_step)
    finally:
        venv.close()
    return [float(r) for r in returns], [int(n) for n in lengths], forward


def episode_returns(policy: Any, make_env: Callable[[], Any], episodes: int, seed: int,
                    deterministic: bool = True) -> tuple[list[float], list[int]]:
    """``(returns, lengths)`` of :func:`episode_stats`."""
    returns, lengths, _ = episode_stats(policy, make_env, episodes, seed, deterministic)
    return returns, lengths


def select_particle(policy: Any, make_env: Callable[[], Any], episodes: int, seed: int,
                    deterministic: bool = True) -> tuple[int, list[float], int]:
    """``(best particle, each particle's mean return, env steps taken)``: every particle of an
    :class:`EnsemblePredictor` (or an :class:`~steinrl.sb3.policy.EnsembleSB3Policy`) plays
    ``episodes`` episodes seeded ``seed``."""
    scores, steps = [], 0
    for i in range(policy.num_particles):
        policy.set_act_mode("particle", particle=i, seed=seed)
        returns, lengths = episode_returns(policy, make_env, episodes, seed, deterministic)
        scores.append(float(np.mean(returns)))
        steps += sum(lengths)
    return int(np.argmax(scores)), scores, steps


def make_env_of(cfg: Config) -> Callable[[], Any]:
    """The task of a run as it was trained: its env with its episode cap (RL: ``rollout.horizon``;
    SB3: ``sb3.horizon``, null = the task's own limit)."""
    horizon = cfg.rollout.horizon if "rollout" in cfg else cfg.sb3.horizon
    kwargs = {} if horizon is None else {"max_episode_steps": horizon}
    return lambda: envs.make(cfg.env, **kwargs)


def _row(record: RunRecord, cfg: Config, who: str, stats: tuple[list[float], list[int], list[float]],
         **extra: Any) -> dict[str, Any]:
    returns, lengths, forward = stats
    particles = cfg.particles if "rollout" in cfg else 1
    known = [d for d in forward if math.isfinite(d)]
    where = record.path / BEST_NAME if record.checkpoint.name == BEST_NAME else record.path
    return {"run": str(where), "algo": cfg.algo, "env": cfg.env, "seed": cfg.seed, "particles": particles,
            "policy": who, "eval_mean": float(np.mean(returns)), "eval_std": float(np.std(returns)),
            "episodes": len(returns), "ep_len_mean": float(np.mean(lengths)),
            "forward_mean": float(np.mean(known)) if known and len(known) == len(forward) else math.nan,
            "total_env_steps": total_env_steps(record.rows, particles), "wall_s": wall_seconds(record.rows),
            "iterations": len(record.rows), "finished": finished(record.rows), **extra}


def evaluate_record(record: RunRecord, episodes: int = 10, seed: int = 0, ensemble: str = "select",
                    heldout_episodes: int = 3, heldout_seed: int | None = None, deterministic: bool = True,
                    device: str = "cpu") -> list[dict[str, Any]]:
    """The evaluation rows of one run (see the module docstring): one for an SB3 run, two for a
    steinrl RL run (``best-train`` and ``ensemble-<mode>``), none for a run without a policy."""
    if ensemble not in ENSEMBLE_MODES:
        raise ConfigError(f"ensemble mode must be one of {', '.join(ENSEMBLE_MODES)}, got {ensemble!r}")
    cfg, policy, _ = load_run(record.checkpoint, device=device)
    if policy is None:
        return []
    make_env = make_env_of(cfg)
    if "rollout" not in cfg:  # an SB3 run
        return [_row(record, cfg, "sb3", episode_stats(policy, make_env, episodes, seed, deterministic))]
    single = make_env()
    action_space = single.action_space
    single.close()
    actor = EnsemblePredictor(policy, action_space, act_mode="particle", seed=seed)
    best = best_training_particle(record.rows, cfg.particles)
    actor.set_act_mode("particle", particle=best, seed=seed)
    rows = [_row(record, cfg, "best-train", episode_stats(actor, make_env, episodes, seed, deterministic),
                 particle=best)]
    extra: dict[str, Any] = {}
    if ensemble == "select":
        held = seed + 1000 if heldout_seed is None else heldout_seed
        chosen, _, steps = select_particle(actor, make_env, heldout_episodes, held, deterministic)
        actor.set_act_mode("particle", particle=chosen, seed=seed)
        extra = {"particle": chosen, "selection_env_steps": steps}
    else:
        actor.set_act_mode(ensemble, seed=seed)
    stats = episode_stats(actor, make_env, episodes, seed, deterministic)
    return rows + [_row(record, cfg, f"ensemble-{ensemble}", stats, **extra)]
