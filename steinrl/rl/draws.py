"""An iteration's random numbers, by name: drawn where they are used, or all at once beforehand.

Every random number of an RL iteration comes from a per-seed stream: a generator seeded by the
run's seed, the iteration and the stream's name (:data:`STREAMS`: the rollout's noise, a critic's
regression columns, PPO's minibatch shuffles, the embedding's shared states), or the task's own
reset generators. The iteration owns one :class:`Draws` and passes it to what draws (the rollout,
the estimator's update); each draw is named and comes with a *maker*, a function of the iteration
that draws it (:meth:`Draws.__call__`; :meth:`Draws.per_seed` builds the usual one: one draw per
seed from that seed's stream). Two modes:

- lazy (default): the maker runs where the number is needed, as plain code would draw it;
- static (:meth:`Draws.freeze`, for a replayed CUDA graph): every maker seen so far runs in
  :meth:`Draws.fill` before the iteration, into a buffer of its own that keeps its storage,
  and the iteration reads the buffers. The makers draw from the same streams in the same
  order, so a static iteration's numbers are a lazy one's; the iteration itself draws nothing
  (torch's CUDA graphs would otherwise freeze a draw into the graph).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

__all__ = ["Draws", "Maker", "STREAMS", "iteration_seed"]

#: ``iteration -> tensor``: draws one named random quantity of an iteration
Maker = Callable[[int], Tensor]

#: Each seed's random streams within an iteration, by name: the offset added to the iteration's seed
STREAMS = {"rollout": 0, "critic": 1, "minibatches": 2, "embedding": 3}


def iteration_seed(seed: int, iteration: int) -> int:
    """A 31-bit seed for iteration ``iteration`` of a run seeded ``seed`` (independent streams)."""
    return int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0] & 0x7FFFFFFF)


class Draws:
    """The named random quantities of the current iteration (see the module docstring).

    :param seeds: the run's seeds (G seeds trained as one batch: G streams of each kind).
    :param device: where the generators draw.
    """

    def __init__(self, seeds: list[int], device: torch.device | str = "cpu") -> None:
        self.seeds, self.device = list(seeds), torch.device(device)
        self.iteration = 0  #: the iteration the lazy makers draw for
        self.static = False  #: read the buffers that :meth:`fill` drew, instead of drawing
        self._makers: dict[str, Maker] = {}
        self._specs: dict[str, tuple] = {}  # each quantity's shape, dtype and device
        self._buffers: dict[str, Tensor] = {}

    # --- the streams ---------------------------------------------------------------------
    def generators(self, stream: str, iteration: int) -> list[torch.Generator]:
        """One generator per seed for the stream ``stream`` (:data:`STREAMS`) of ``iteration``."""
        offset = STREAMS[stream]
        return [torch.Generator(device=self.device).manual_seed(iteration_seed(s, iteration) + offset)
                for s in self.seeds]

    def reset_seed(self, iteration: int) -> int | list[int]:
        """The rollout's reset seed of ``iteration``: one per seed (a single int for one seed)."""
        seeds = [iteration_seed(s, iteration) for s in self.seeds]
        return seeds[0] if len(seeds) == 1 else seeds

    def per_seed(self, name: str, stream: str, draw: Callable[[torch.Generator], Tensor], dim: int = 0) -> Tensor:
        """The iteration's ``name``: ``draw(generator)`` for each seed's ``stream``, concatenated
        along ``dim`` (the particle axis of the seeds' blocks)."""
        return self(name, lambda iteration: torch.cat([draw(g) for g in self.generators(stream, iteration)], dim))

    # --- lazy or static ------------------------------------------------------------------
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
