"""Baselines run through steinrl's stack: other libraries' algorithms as steinrl jobs.

- :class:`SB3PPOJob`: Stable-Baselines3's PPO (``sb3-ppo``: SB3's defaults; ``sb3-ppo-zoo``:
  rl-baselines3-zoo's tuned entry for the task), so ``steinrl train`` / ``steinrl sweep``
  run it on the same machine, tasks, seeds and logging as steinrl's algorithms.

Layer: above ``rl`` and ``envs``, below ``run`` (which registers the job).
"""

from steinrl.baselines.sb3_ppo import SB3PPOJob

__all__ = ["SB3PPOJob"]
