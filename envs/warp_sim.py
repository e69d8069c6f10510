"""MuJoCo Warp's model and data of many worlds on one device, and how their physics is launched.

The low layer of :mod:`steinrl.envs.warp_mujoco` (the ``gpu-mujoco`` extra): :func:`configure`
imports and initialises Warp once; :class:`WarpSim` holds ``mujoco_warp``'s ``Model`` and ``Data``
of ``n`` worlds and runs their physics:

- Warp launches on torch's current CUDA stream (``wp.stream_from_torch``), so that a torch
  CUDA-graph capture records them in order with the tensor ops around them; inside such a capture
  the capture is registered with Warp (``wp.capture_begin(external=True)``: what Warp allocates
  in it lives as long as the graph);
- outside a torch capture, the physics is recorded once as a Warp graph (after a first eager call
  has compiled the kernels; on a GPU on a stream of its own, as no capture runs on the default
  stream) and replayed: on the CPU a Hopper physics step runs 8x (64 worlds) to 47x (8 worlds)
  faster than launching each kernel from Python, with the same numbers (tests/test_warp_mujoco.py);
  a recording that fails warns once, and the kernels launch one by one from then on;
- the constraint solver's loop: in a graph (Warp's or torch's) a conditional node stops it once
  every world converged; launched eagerly on a GPU it runs its whole iteration budget, the
  converged worlds skipping the rest (the same numbers, and no flag read back to the host); on
  the CPU it reads its flag in host memory.

Kernels compile once per model and machine into Warp's kernel cache (``~/.cache/warp/<version>``,
or ``$WARP_CACHE_PATH``; :func:`configure` moves it).
"""

from __future__ import annotations

import contextlib
import importlib.util
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from steinrl.errors import ConfigError

__all__ = ["CAPACITY_BITS", "INSTALL_HINT", "Capacity", "WarpCapacityError", "WarpSim", "configure",
           "warp_installed"]

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


class WarpSim:
    """``n`` worlds of one MuJoCo model in MuJoCo Warp on ``device`` (module docstring).

    :param mjm: the MuJoCo model (``mujoco.MjModel``).
    :param mjd: a ``mujoco.MjData`` of it: every world starts as a copy.
    :param num_worlds: ``n``.
    :param device: a torch device, ``cpu`` or ``cuda:k`` (with its index).
    :param capacity: contacts and constraint rows per world.
    :param deterministic: MuJoCo Warp's deterministic mode on a GPU (stable contact order,
        canonical constraint rows, order-invariant atomic sums: a run repeats its numbers); the
        CPU runs a kernel's threads in order anyway.
    :param physics_graph: replay the physics as a Warp graph outside torch captures.
    """

    def __init__(self, mjm: Any, mjd: Any, num_worlds: int, device: torch.device, capacity: Capacity,
                 deterministic: bool = True, physics_graph: bool = True) -> None:
        self.wp = wp = configure()
        import mujoco_warp as mjw

        self.mjw, self.device, self.capacity = mjw, device, capacity
        self.warp_device = "cpu" if device.type == "cpu" else f"cuda:{device.index}"
        with wp.ScopedDevice(self.warp_device):
            self.model = mjw.put_model(mjm)
            if deterministic and device.type == "cuda":
                self.model.opt.deterministic = int(mjw.DeterminismType.ALL)
            self.data = mjw.put_data(mjm, mjd, nworld=int(num_worlds), nconmax=capacity.nconmax,
                                     njmax=capacity.njmax)
        check = getattr(wp, "is_conditional_graph_supported", None)  # CUDA graph conditional nodes
        self._conditional = device.type == "cpu" or (check is not None and bool(check()))
        self.physics_graph = bool(physics_graph)  #: replay the physics as a Warp graph
        self._graph: Any = None
        self._warm = False
        self._streams: dict[int, Any] = {}
        self._captures: list[Any] = []  # Warp's records of the torch captures holding its launches
        self._side: Any = None

    def view(self, name: str) -> torch.Tensor:
        """The ``Data`` array ``name`` as a torch tensor sharing its storage (``(n, ...)``)."""
        return self.wp.to_torch(getattr(self.data, name))

    @contextlib.contextmanager
    def launching(self) -> Iterator[tuple[Any, bool]]:
        """Warp launches on this device and on torch's current CUDA stream; yields ``(the Warp
        stream, or None on the CPU; whether torch is capturing a CUDA graph)``."""
        wp = self.wp
        if self.device.type == "cpu":
            with wp.ScopedDevice("cpu"):
                yield None, False
            return
        stream = torch.cuda.current_stream(self.device)
        warp_stream = self._streams.get(stream.cuda_stream)
        if warp_stream is None:
            warp_stream = self._streams[stream.cuda_stream] = wp.stream_from_torch(stream)
        capturing = torch.cuda.is_current_stream_capturing()
        with wp.ScopedDevice(self.warp_device), wp.ScopedStream(warp_stream, sync_enter=False):
            if not capturing:
                yield warp_stream, False
                return
            wp.capture_begin(stream=warp_stream, external=True, force_module_load=False,
                             capture_mode=wp.CaptureMode.GLOBAL)
            try:
                yield warp_stream, True
            finally:
                self._captures.append(wp.capture_end(stream=warp_stream))

    def _launch(self, steps: Callable[[], None], graphed: bool) -> None:
        """``steps()`` launched now; ``graphed``: into a graph, where the solver's loop may stop at
        convergence (module docstring)."""
        self.model.opt.graph_conditional = self.device.type == "cpu" or (graphed and self._conditional)
        steps()

    def run(self, steps: Callable[[], None], name: str = "MuJoCo Warp") -> None:
        """Run ``steps`` (Warp launches on :attr:`model` and :attr:`data`, the same every call):
        eagerly the first time, then as a recorded Warp graph (:attr:`physics_graph`), or into the
        torch CUDA graph being captured."""
        wp = self.wp
        with self.launching() as (stream, torch_capturing):
            if not self.physics_graph or torch_capturing or not self._warm:
                self._launch(steps, graphed=torch_capturing)
                self._warm = True
                return
            if self._graph is None:
                try:
                    self._graph = self._record(steps)
                except Exception as exc:  # eager launches from now on (the same numbers, slower)
                    warnings.warn(f"{name}: recording the physics as a Warp graph failed ({type(exc).__name__}: "
                                  f"{' '.join(str(exc).split())[:200]}); its kernels launch one by one", stacklevel=3)
                    self.physics_graph = False
                    self._launch(steps, graphed=False)
                    return
            wp.capture_launch(self._graph, stream=stream)

    def _record(self, steps: Callable[[], None]) -> Any:
        """The Warp graph of ``steps`` (recorded, not run)."""
        wp = self.wp
        if self.device.type == "cpu":
            with wp.ScopedCapture(device="cpu", force_module_load=False) as capture:
                self._launch(steps, graphed=True)
            return capture.graph
        self._side = side = wp.stream_from_torch(torch.cuda.Stream(self.device))
        with wp.ScopedStream(side, sync_enter=False), \
                wp.ScopedCapture(device=self.warp_device, stream=side, force_module_load=False) as capture:
            self._launch(steps, graphed=True)
        return capture.graph

    def close(self) -> None:
        self._captures.clear()
        self._graph = None
