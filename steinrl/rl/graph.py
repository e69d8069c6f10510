"""One RL iteration as one CUDA graph: captured once, replayed every iteration.

What makes an iteration graph-safe is written elsewhere, and runs (and is tested) on every
device: every random number comes through :class:`~steinrl.rl.draws.Draws` (static buffers,
drawn before the replay), everything the iteration reads from the last one keeps its storage
(env state, continuing sampling's carry-over, observation and reward statistics, parameters,
optimizer moments), step sizes are tensors set before the iteration, and nothing in it reads
a value back to the host (its logged values leave in one packed tensor, after the replay).
This module is the part that only CUDA runs: warm-up, capture, replay, and the fall-back to
eager iterations when a capture fails.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from steinrl.rl.draws import Draws

if TYPE_CHECKING:
    from steinrl.rl.settings import RLConfig

__all__ = ["IterationGraph", "capturable", "graph_mode", "graph_blockers", "persistent_tensors"]

#: eager iterations on a side stream before the capture (CUDA's libraries allocate their workspaces)
WARMUP = 2
#: torch.cuda.graph's ``capture_error_mode``: ``global`` (any thread's unsafe CUDA call ends the
#: capture), ``thread_local`` (this thread's only) or ``relaxed``
CAPTURE_ERROR_MODE = "global"


def capturable(optimizer: torch.optim.Optimizer) -> None:
    """Make an Adam (torch's) safe to capture: its step counts on the device, its step size a
    device tensor that :func:`~steinrl.core.particle_optimizer.set_lr` writes in place."""
    for group in optimizer.param_groups:
        device = group["params"][0].device
        group["capturable"] = True
        group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)
    for state in optimizer.state.values():
        if "step" in state:
            state["step"] = state["step"].to(device=device, dtype=torch.float32)


class IterationGraph:
    """Replays ``iterate`` (one iteration, returning its packed host-bound values) as a CUDA graph.

    :param iterate: runs one iteration from the agent's state and :attr:`draws` (graph-safe).
    :param draws: the iteration's random numbers; frozen to static buffers at the capture.
    :param device: the CUDA device.
    :param capture: False: every step but the capture, on any device (the warm-up iterations, then
        static draws and eager iterations: what the tests check on the CPU).
    """

    def __init__(self, iterate: Callable[[int], Tensor], draws: Draws, device: torch.device,
                 capture: bool = True) -> None:
        self.iterate, self.draws, self.device, self.capture = iterate, draws, device, capture
        self.graph: torch.cuda.CUDAGraph | None = None
        self.output: Tensor | None = None
        self.warm = 0
        self.failed: str | None = None  #: why the capture failed (then every iteration runs eagerly)

    def __call__(self, iteration: int) -> Tensor:
        if self.graph is not None:
            self.draws.fill(iteration)
            self.graph.replay()
            return self.output
        if self.failed is not None or self.warm < WARMUP or not self.capture:
            return self._eager(iteration)
        self.draws.freeze()
        self.draws.fill(iteration)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, capture_error_mode=CAPTURE_ERROR_MODE):
                output = self.iterate(iteration)
        except Exception as exc:  # any failure: warn once, and go on eagerly
            self.failed = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            warnings.warn(f"CUDA graph capture failed ({self.failed}); the iterations run eagerly", stacklevel=2)
            return self.iterate(iteration)  # the static draws of this iteration, eagerly
        self.graph, self.output = graph, output
        graph.replay()
        return output

    def _eager(self, iteration: int) -> Tensor:
        """An eager iteration (a warm-up: on a side stream, as capture wants)."""
        if self.failed is not None or not self.capture:
            if not self.capture and self.warm >= WARMUP and not self.draws.static:
                self.draws.freeze()
            if self.draws.static:
                self.draws.fill(iteration)
            else:
                self.warm += 1
            return self.iterate(iteration)
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            output = self.iterate(iteration)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        self.warm += 1
        return output


def graph_blockers(cfg: RLConfig, backend: str, host_reads: Sequence[str] = ()) -> list[str]:
    """Why ``cfg`` cannot run its iterations as a CUDA graph (empty: it can); ``host_reads``: why
    its estimator reads the host within an iteration (:meth:`~steinrl.rl.estimators.Estimator.host_reads`)."""
    reasons = []
    if torch.device(cfg.device).type != "cuda":
        reasons.append(f"device {cfg.device} is not CUDA")
    if backend != "torch":
        reasons.append(f"{cfg.env} has no torch twin on the device (rollout.env_backend {backend})")
    if cfg.rollout.sampling == "whole_episodes":
        reasons.append("whole-episode sampling asks the host when every env has ended (continuing or cut can)")
    if cfg.rollout.compile:
        reasons.append("rollout.compile compiles the rollout step instead")
    if "critic" in cfg and cfg.critic.name != "mlp":
        reasons.append("the linear critic's solve retries on the host")
    if cfg.update.optimizer != "adam":
        reasons.append(f"update.optimizer {cfg.update.optimizer} (capture needs Adam's capturable step)")
    if cfg.update.proximal_weight or cfg.update.lr_halving_every:
        reasons.append("the proximal term and lr halving are not graph-safe yet")
    return reasons + list(host_reads)


def graph_mode(cfg: RLConfig, backend: str, host_reads: Sequence[str] = ()) -> bool:
    """``run.cuda_graph`` resolved: ``off`` never, ``auto`` where :func:`graph_blockers` finds nothing,
    ``on`` there or a :class:`~steinrl.errors.ConfigError` naming the blockers (before anything is written)."""
    from steinrl.errors import ConfigError

    mode = cfg.run.cuda_graph
    if mode == "off":
        return False
    blockers = graph_blockers(cfg, backend, host_reads)
    if mode == "on" and blockers:
        raise ConfigError(f"run.cuda_graph on cannot capture this run: {'; '.join(blockers)} (auto captures where "
                          "it can)")
    return not blockers


def persistent_tensors(job: Any) -> dict[str, Tensor]:
    """Every tensor an RL job's iteration reads from the last one, by name: parameters and
    buffers, optimizer states and step sizes, the estimator's own (the reward scaler's
    statistics), the sampler's carry-over and buffers, the envs' state, the static draws. A
    replayed graph needs each to keep its storage (``data_ptr``) from iteration to iteration."""
    agent, out = job.agent, {}
    for name, module in (("policy", agent.policy), ("prior", agent.prior), ("critic", agent.critic)):
        if module is not None:
            out.update({f"{name}.{k}": v for k, v in module.state_dict(keep_vars=True).items()})
    for name, opt in agent.optimizers().items():
        for i, state in enumerate(opt.state.values()):
            out.update({f"{name}.{i}.{k}": v for k, v in state.items() if isinstance(v, Tensor)})
        for i, group in enumerate(opt.param_groups):
            if isinstance(group["lr"], Tensor):
                out[f"{name}.lr{i}"] = group["lr"]
    out.update(job.estimator.persistent_tensors())
    out.update(job.sampler.persistent_tensors())
    out.update({f"draws.{k}": v for k, v in job.draws.buffers().items()})
    return out
