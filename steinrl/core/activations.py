"""Hidden-layer activations, registered by name, with everything a network needs of one.

One :class:`Activation` per name (``tanh``, ``relu``, ``elu``, ``identity``) holds the torch
function (out of place, and in place for fresh buffers), the ``nn.Module`` class, a numpy
version (for numpy rollouts) and the init gain of a hidden layer before it: LeCun-style 1.0
for tanh / identity, He-style √2 for the rectifiers (``torch.nn.init.calculate_gain("relu")``;
elu uses the relu gain). Hidden weights are drawn with std ``gain / √fan_in``
(:func:`hidden_init_std`), output layers with their own gain (1 by default).

Every network in the package (particle ensembles, critics, bandit models, the variational
posteriors of :mod:`steinrl.bayes`) reads its activation from :data:`ACTIVATIONS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from steinrl.registry import Registry

__all__ = ["Activation", "ACTIVATIONS", "hidden_init_std"]


def _np_tanh(x: np.ndarray) -> np.ndarray:
    return np.tanh(x, out=x)


def _np_relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0, out=x)


def _np_elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


@dataclass(frozen=True)
class Activation:
    """One hidden activation.

    :param function: out of place, ``Tensor -> Tensor`` (None: identity).
    :param inplace: the same, in place (for fresh buffers, safe for autograd; None: identity).
    :param module: the ``nn.Module`` class (``nn.Tanh``, ...).
    :param numpy: the numpy version, in place where numpy allows (None: identity).
    :param gain: init gain of a hidden layer followed by this activation.
    """

    function: Callable[[Tensor], Tensor] | None
    inplace: Callable[[Tensor], Tensor] | None
    module: Callable[[], nn.Module]
    numpy: Callable[[np.ndarray], np.ndarray] | None
    gain: float

    def __call__(self, x: Tensor) -> Tensor:
        """``function(x)``, or ``x`` itself for the identity."""
        return x if self.function is None else self.function(x)


#: Hidden activations by name.
ACTIVATIONS: Registry[Activation] = Registry("activation")
ACTIVATIONS.register("tanh", Activation(torch.tanh, torch.tanh_, nn.Tanh, _np_tanh, 1.0))
ACTIVATIONS.register("relu", Activation(torch.relu, torch.relu_, nn.ReLU, _np_relu,
                                        torch.nn.init.calculate_gain("relu")))
ACTIVATIONS.register("elu", Activation(F.elu, F.elu_, nn.ELU, _np_elu, torch.nn.init.calculate_gain("relu")))
ACTIVATIONS.register("identity", Activation(None, None, nn.Identity, None, 1.0))


def hidden_init_std(activation: str, fan_in: int, output: bool = False, output_gain: float = 1.0) -> float:
    """Std of a layer's initial weights, ``gain / √fan_in``: the activation's gain for a hidden
    layer, ``output_gain`` for the output layer (``output=True``)."""
    gain = output_gain if output else ACTIVATIONS.get(activation).gain
    return gain / math.sqrt(fan_in)
