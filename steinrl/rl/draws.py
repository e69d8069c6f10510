"""An iteration's random numbers, by name: drawn where they are used, or all at once beforehand.

Every random number of an RL iteration (the policy's noise, the envs' reset states, a critic's
regression columns, PPO's minibatch shuffles, the function-space kernel's shared states) comes
from a per-seed stream (a generator seeded by the run's seed and the iteration, or the task's
own reset generators) through :meth:`Draws.__call__`, with a *maker*: a function of the
iteration that draws it. Two modes:

- lazy (default): the maker runs where the number is needed, as plain code would draw it;
- static (:meth:`Draws.freeze`, for a replayed CUDA graph): every maker seen so far runs in
  :meth:`Draws.fill` before the iteration, into a buffer of its own that keeps its storage,
  and the iteration reads the buffers. The makers draw from the same streams in the same
  order, so a static iteration's numbers are a lazy one's; the iteration itself draws nothing
  (torch's CUDA graphs would otherwise freeze a draw into the graph).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["Draws", "Maker"]

#: ``iteration -> tensor``: draws one named random quantity of an iteration
Maker = Callable[[int], Tensor]


class Draws:
    """The named random quantities of the current iteration (see the module docstring)."""

    def __init__(self, seed_of: Callable[[int], int | list[int]] | None = None) -> None:
        self.iteration = 0  #: the iteration the lazy makers draw for
        #: the reset seed(s) of an iteration (one per seed group), for makers that reseed a stream
        self.seed_of = seed_of
        self.static = False  #: read the buffers that :meth:`fill` drew, instead of drawing
        self._makers: dict[str, Maker] = {}
        self._specs: dict[str, tuple] = {}  # each quantity's shape, dtype and device
        self._buffers: dict[str, Tensor] = {}

    def begin(self, iteration: int) -> None:
        """A new lazy iteration: its quantities are the ones :meth:`freeze` will know (static: nothing
        to do, :meth:`fill` drew them)."""
        if not self.static:
            self.iteration = iteration
            self._makers, self._specs = {}, {}

    def __call__(self, name: str, maker: Maker) -> Tensor:
        """The iteration's ``name``: drawn now by ``maker`` (lazy), or the buffer :meth:`fill` drew (static)."""
        if self.static:
            try:
                return self._buffers[name]
            except KeyError:
                raise RuntimeError(f"the static iteration asked for {name!r}, which no earlier iteration drew; "
                                   f"known: {', '.join(self._buffers) or 'none'}") from None
        value = maker(self.iteration)
        self._makers[name], self._specs[name] = maker, (value.shape, value.dtype, value.device)
        return value

    def freeze(self) -> None:
        """From now on, every quantity of the last lazy iteration is drawn by :meth:`fill` into a
        buffer of its own (allocated here, drawing nothing) and the iteration reads the buffers."""
        self._buffers = {name: torch.empty(shape, dtype=dtype, device=device)
                         for name, (shape, dtype, device) in self._specs.items()}
        self.static = True

    def thaw(self) -> None:
        """Back to drawing where the numbers are needed."""
        self.static = False
        self._buffers = {}

    def fill(self, iteration: int) -> None:
        """Static mode: draw every quantity of ``iteration`` into its buffer (in place)."""
        self.iteration = iteration
        for name, maker in self._makers.items():
            self._buffers[name].copy_(maker(iteration))

    def buffers(self) -> dict[str, Tensor]:
        """The static buffers by name (empty in lazy mode)."""
        return dict(self._buffers)
