"""The side-by-side table of ``steinrl compare`` (``comparison.md``): per task, algorithm,
particle count M, grid point and policy, the seeds' evaluation returns with their 95 %
interval, beside the better of SB3's two PPOs, the forward distance, the runs that reached the
task's goal, env steps and seconds; the Stein rows first, then their ``independent`` twins,
then SB3's (the kernel ablation's order)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from steinrl.errors import ConfigError
from steinrl.run.algos import parse_algo
from steinrl.run.sweep_report import mean_ci

__all__ = ["summary_table", "reward_threshold", "better_sb3", "missing_ablation", "SB3_PPOS", "MOVED_METRES"]

#: SB3's two PPOs: its defaults and rl-zoo3's tuned values (the "better SB3 PPO" column).
SB3_PPOS = ("sb3-ppo", "sb3-ppo-zoo")
#: A run "moved" when its mean forward distance over the evaluation episodes is at least this (metres).
MOVED_METRES = 1.0


def _kind(algo: str) -> tuple[int, str]:
    """``(rank, estimator)``: a task's rows in the order Stein methods (0), ``independent`` (1),
    ``sb3-ppo`` (2), ``sb3-ppo-zoo`` (3), anything else (4)."""
    if algo in SB3_PPOS:
        return 2 + SB3_PPOS.index(algo), "ppo"
    try:
        parsed = parse_algo(algo)
    except ConfigError:
        return 4, ""
    if parsed.method is None:
        return 4, parsed.estimator
    return (1 if parsed.method == "independent" else 0), parsed.estimator


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _ci(values: list[float]) -> str:
    """``mean ± half width`` (Student t, 95 %); ``–`` where no value is finite or some is not."""
    if not values or not all(math.isfinite(v) for v in values):
        return "–"
    mean, half = mean_ci(values)
    return f"{mean:.1f}" + ("" if math.isnan(half) else f" ± {half:.1f}")


def better_sb3(groups: dict[tuple, list[dict[str, Any]]], env: str) -> str:
    """The "better SB3 PPO" cell of a task: the higher seed mean of its ``sb3-ppo`` and
    ``sb3-ppo-zoo`` rows, with the one it is; where one of the two has no run on the task, the
    other's, saying which is missing; ``–`` where neither has."""
    means = {}
    for (e, algo, _, params, _), group in groups.items():
        if e == env and algo in SB3_PPOS:
            label = " ".join(part for part in (algo, params) if part)
            means[label] = float(np.mean([r["eval_mean"] for r in group]))
    if not means:
        return "–"
    label = max(means, key=means.get)
    ran = {label.split()[0] for label in means}
    missing = [a for a in SB3_PPOS if a not in ran]
    return f"{means[label]:.1f} ({label}" + (f"; no {missing[0]} run" if missing else "") + ")"


def missing_ablation(groups: dict[tuple, list[dict[str, Any]]]) -> list[str]:
    """One line per Stein row (env, algo, M) whose ``independent-<estimator>`` with the same M
    has no run on that task."""
    have = {(env, algo, m) for env, algo, m, _, _ in groups}
    lines = []
    for env, algo, m in dict.fromkeys((env, algo, m) for env, algo, m, _, _ in groups):
        rank, estimator = _kind(algo)
        if rank == 0 and (env, f"independent-{estimator}", m) not in have:
            lines.append(f"{env}: no independent-{estimator} run with M = {m} beside {algo}")
    return lines


def reward_threshold(env: str) -> float | None:
    """The return at which Gymnasium counts ``env`` as solved (its registered spec's
    ``reward_threshold``: e.g. 90 on MountainCarContinuous-v0, 1 on SparseHalfCheetah: the goal
    reached); ``None`` where the task has none or is not registered here."""
    import gymnasium as gym

    from steinrl.envs import UnknownEnvError, resolve_env_id

    try:
        return gym.spec(resolve_env_id(env)).reward_threshold
    except (UnknownEnvError, gym.error.Error):
        return None


def _reached(returns: list[float], env: str) -> str:
    """``k/n ≥ T``: the runs whose evaluation return reaches the task's :func:`reward_threshold`
    ``T``; ``–`` without one."""
    threshold = reward_threshold(env)
    if threshold is None:
        return "–"
    return f"{sum(r >= threshold for r in returns)}/{len(returns)} ≥ {threshold:g}"


def summary_table(rows: list[dict[str, Any]], moved: float = MOVED_METRES) -> str:
    """Markdown: per env, algo, particle count M, grid point and policy, the seeds (and how many
    of them are sweep trials that have not reached their stopping rule yet), the mean evaluation
    return (95 % CI), the better SB3 PPO of the task (:func:`better_sb3`), the mean episode length,
    the mean forward distance (95 % CI) and the seeds whose run moved at least ``moved`` metres
    (``–`` for a task without an x position), the seeds whose return reaches the task's
    Gymnasium ``reward_threshold`` (:func:`reward_threshold`; the goal of the exploration tasks),
    total env steps and wall-clock seconds (means over the seeds). A task's rows: Stein methods,
    ``independent``, ``sb3-ppo``, ``sb3-ppo-zoo``; a note under the table names each missing
    ``independent`` twin (:func:`missing_ablation`)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        key = (row["env"], row["algo"], row.get("particles", ""), row["params"], row["policy"])
        groups.setdefault(key, []).append(row)
    envs = list(dict.fromkeys(key[0] for key in groups))
    order = sorted(groups, key=lambda k: (envs.index(k[0]), _kind(k[1])[0]))  # stable: first seen within a kind
    lines = [f"| env | algo | M | params | policy | seeds | eval return (95 % CI) | better SB3 PPO | episode length "
             f"| forward m (95 % CI) | moved ≥ {moved:g} m | reward threshold | env steps | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key in order:
        env, algo, m, params, policy = key
        group = groups[key]
        returns = _ci([r["eval_mean"] for r in group])
        lengths = [_number(r.get("ep_len_mean")) for r in group]
        length = f"{np.mean(lengths):.0f}" if all(math.isfinite(v) for v in lengths) else "–"
        forward = [_number(r.get("forward_mean")) for r in group]
        known = all(math.isfinite(v) for v in forward)
        moving = f"{sum(v >= moved for v in forward)}/{len(group)}" if known else "–"
        steps = sum(r["total_env_steps"] for r in group) / len(group)
        wall = sum(r["wall_s"] for r in group) / len(group)
        unfinished = sum(r.get("finished") is False for r in group)  # a sweep trial still running
        seeds = f"{len(group)}" + (f" ({unfinished} unfinished)" if unfinished else "")
        lines.append(f"| {env} | {algo} | {m} | {params} | {policy} | {seeds} | {returns} | {better_sb3(groups, env)} "
                     f"| {length} | {_ci(forward)} | {moving} | {_reached([r['eval_mean'] for r in group], env)} "
                     f"| {steps:.0f} | {wall:.1f} |")
    notes = missing_ablation(groups)
    if notes:
        lines += ["", "Not in the ablation yet (a Stein row without its `independent` twin):", "",
                  *(f"- {note}" for note in notes)]
    return "\n".join(lines)
