"""Stable-Baselines3 interop.

- :class:`EnsembleSB3Policy`: a trained ensemble as an SB3 policy (``evaluate_policy``, ``predict``).
- :class:`SVPG`: SVPG behind SB3's algorithm API (``learn``, callbacks, ``save``/``load``).
- :class:`StructuredActorCriticPolicy`: SB3's A2C / PPO with steinrl's structured
  (Householder / Kronecker) layers.

Imports Stable-Baselines3 (a steinrl dependency).
"""

from steinrl.sb3.policy import EnsembleSB3Policy
from steinrl.sb3.structured import StructuredActorCriticPolicy, StructuredMlpExtractor
from steinrl.sb3.svpg import SVPG

__all__ = ["EnsembleSB3Policy", "SVPG", "StructuredActorCriticPolicy", "StructuredMlpExtractor"]
