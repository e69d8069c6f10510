"""Groups of particles in one batch: G seeds x M particles trained as one ensemble of G·M.

A seed batch keeps every seed's state in the single-seed format, so one seed's checkpoint
resumes alone. What has a particle axis is declared, never guessed from a tensor's size:

- every parameter and buffer of an ensemble module has a leading particle axis, except the
  entries a module names in its class attribute ``shared_state`` (e.g. the observation
  statistics ``("mean", "var", "count")``), which all groups share;
- an optimizer's per-parameter state has a particle axis where the entry has its
  parameter's shape (Adam's moments); anything else (the step count) is shared.

Group ``g`` holds rows ``g·M .. (g+1)·M - 1`` of every particle-axis tensor.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["shared_names", "module_group", "module_join", "optimizer_group", "optimizer_join", "rows"]


def rows(x: Tensor, index: int, groups: int) -> Tensor:
    """Group ``index``'s rows of a particle-axis tensor ``(G·M, ...)`` (a copy)."""
    size = x.shape[0] // groups
    return x[index * size:(index + 1) * size].clone()


def shared_names(module: nn.Module) -> set[str]:
    """The ``state_dict`` keys of ``module`` that have no particle axis (declared by ``shared_state``)."""
    names = set()
    for prefix, sub in module.named_modules():
        for name in getattr(sub, "shared_state", ()):
            names.add(f"{prefix}.{name}" if prefix else name)
    return names


def module_group(module: nn.Module, index: int, groups: int) -> dict[str, Tensor]:
    """Group ``index`` of ``module.state_dict()``: particle-axis entries cut to its rows."""
    state = module.state_dict()
    if groups == 1:
        return state
    shared = shared_names(module)
    return {k: v.clone() if k in shared else rows(v, index, groups) for k, v in state.items()}


def module_join(module: nn.Module, states: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """The inverse of :func:`module_group`: one ``state_dict`` for ``module`` from each group's."""
    if len(states) == 1:
        return states[0]
    shared = shared_names(module)
    return {k: states[0][k] if k in shared else torch.cat([s[k] for s in states]) for k in states[0]}


def _params(optimizer: torch.optim.Optimizer) -> list[Tensor]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _plain_group(group: dict[str, Any]) -> dict[str, Any]:
    """A param group as an eager optimizer takes it: a step size as a number, not capturable
    (a CUDA graph's optimizer is made capturable again when it loads the state)."""
    group = {**group, "lr": float(group["lr"]) if isinstance(group["lr"], Tensor) else group["lr"]}
    return {**group, "capturable": False} if "capturable" in group else group


def optimizer_group(optimizer: torch.optim.Optimizer, index: int, groups: int) -> dict[str, Any]:
    """Group ``index`` of ``optimizer.state_dict()`` (every parameter has a particle axis), its
    param groups as an eager optimizer takes them."""
    state = optimizer.state_dict()
    state = {**state, "param_groups": [_plain_group(g) for g in state["param_groups"]]}
    if groups == 1:
        return state
    params = _params(optimizer)
    per_param = {i: {k: rows(v, index, groups) if isinstance(v, Tensor) and v.shape == params[i].shape and v.dim()
                     else v for k, v in entry.items()} for i, entry in state["state"].items()}
    return {"state": per_param, "param_groups": state["param_groups"]}


def optimizer_join(optimizer: torch.optim.Optimizer, states: list[dict[str, Any]]) -> dict[str, Any]:
    """The inverse of :func:`optimizer_group`."""
    if len(states) == 1:
        return states[0]
    params = _params(optimizer)
    size = params[0].shape[0] // len(states) if params else 0
    joined = {}
    for i, entry in states[0]["state"].items():
        shape = (size, *params[i].shape[1:])
        joined[i] = {k: torch.cat([s["state"][i][k] for s in states]) if isinstance(v, Tensor) and v.dim()
                     and tuple(v.shape) == shape else v for k, v in entry.items()}
    return {"state": joined, "param_groups": states[0]["param_groups"]}
