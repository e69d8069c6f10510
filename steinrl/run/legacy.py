"""What earlier versions of steinrl wrote, in today's terms: keys that moved, checkpoints' layouts.

A key a user writes in its old place gets one error line naming the new one
(:data:`MOVED_KEYS`, :func:`check_moved`); a run directory's saved config is migrated
silently (:func:`migrate_run_config`), and so is a checkpoint's job state
(:func:`migrate_job_state`), so old runs resume and evaluate. The one place that knows the
old layouts: the parts themselves read only today's.
"""

from __future__ import annotations

from typing import Any

from steinrl.errors import ConfigError

__all__ = ["MOVED_KEYS", "check_moved", "migrate_job_state", "migrate_run_config", "migrate_overrides"]

#: Keys that have moved, with what to write instead (a saved run config is migrated: :func:`migrate_run_config`).
MOVED_KEYS = {
    ("update", "bandwidth"): "update.bandwidth is now a parameter of the kernel: update.kernel: {bandwidth: ...} "
                             "(e.g. --set 'update.kernel={bandwidth: s2vgd}')",
    ("update", "kernel_space"): "update.kernel_space is now the kernel's space: update.kernel: {space: functions} "
                                "(e.g. --set 'update.kernel={space: functions}')",
    ("update", "function_states"): "update.function_states is now the kernel's states: update.kernel: {space: "
                                   "functions, states: 64}",
    ("update", "function_driving"): "update.function_driving is now the kernel's driving term: update.kernel: "
                                    "{space: functions, driving: weights}",
}
#: the update's function-space keys of steinrl 0.2, by the kernel parameter each became
_FUNCTION_SPACE_KEYS = {"kernel_space": "space", "function_states": "states", "function_driving": "driving"}


def check_moved(path: tuple[str, ...], where: str) -> None:
    """Raise :class:`ConfigError` naming the new place of a moved key (dotted, or bare)."""
    moved = MOVED_KEYS.get(path) or next((m for p, m in MOVED_KEYS.items() if path == p[-1:]), None)
    if moved:
        raise ConfigError(f"{moved} (in {where})")


def migrate_run_config(data: dict[str, Any]) -> dict[str, Any]:
    """A run config saved by an earlier version in today's keys (:data:`MOVED_KEYS`): the
    update's ``bandwidth`` joins its kernel (an update without a kernel only logged it), and its
    ``kernel_space``, ``function_states`` and ``function_driving`` become the kernel's ``space``,
    ``states`` and ``driving`` (kept only for a function-space kernel)."""
    update = data.get("update")
    if not isinstance(update, dict):
        return data
    update = dict(update)
    if "bandwidth" in update:
        rule = update.pop("bandwidth")
        if isinstance(update.get("kernel"), str):
            update["kernel"] = {"name": update["kernel"], "bandwidth": rule}
    moved = {new: update.pop(old) for old, new in _FUNCTION_SPACE_KEYS.items() if old in update}
    if moved and "kernel" in update:
        kernel = update["kernel"]
        kernel = {"name": kernel} if isinstance(kernel, str) else dict(kernel)
        if moved.get("space") == "functions":
            kernel.update(moved)
        update["kernel"] = kernel
    return {**data, "update": update}


def migrate_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """Flat dotted overrides (a sweep spec's trial) in today's keys: ``update.kernel_space``,
    ``update.function_states`` and ``update.function_driving`` (steinrl 0.2's, as the kernel
    study's specs were written) become parameters of ``update.kernel``, kept only for a
    function-space kernel (0.2 ignored them otherwise)."""
    moved = {new: overrides[f"update.{old}"] for old, new in _FUNCTION_SPACE_KEYS.items()
             if f"update.{old}" in overrides}
    if not moved:
        return overrides
    out = {k: v for k, v in overrides.items() if k.removeprefix("update.") not in _FUNCTION_SPACE_KEYS}
    if moved.get("space") == "functions":
        kernel = out.get("update.kernel", {})
        out["update.kernel"] = {**({"name": kernel} if isinstance(kernel, str) else kernel), **moved}
    return out


def migrate_job_state(job: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's job state in today's layout. steinrl 0.2 saved the particle optimizer's torch
    state under ``svgd``: an RL agent's with ``prev_theta`` inside and the own parameters' Adam
    beside it under ``own_opt``; a bandit's model (``agent.model``) its optimizer's alone. Today
    both keep it under ``particle_optimizer`` (``optimizer``, ``own_optimizer``, ``prev_theta``)."""
    agent = job.get("agent")
    if not isinstance(agent, dict):
        return job
    if "svgd" in agent:  # an RL agent's
        agent = dict(agent)
        old = dict(agent.pop("svgd"))
        part = {"optimizer": {k: v for k, v in old.items() if k != "prev_theta"}}
        if "prev_theta" in old:
            part["prev_theta"] = old["prev_theta"]
        if "own_opt" in agent:
            part["own_optimizer"] = agent.pop("own_opt")
        agent["particle_optimizer"] = part
    model = agent.get("model")
    if isinstance(model, dict) and "svgd" in model:  # a bandit's model
        model = {k: v for k, v in model.items() if k != "svgd"}
        agent = {**agent, "model": {**model, "particle_optimizer": {"optimizer": agent["model"]["svgd"]}}}
    return {**job, "agent": agent}
