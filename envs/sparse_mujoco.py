"""Sparse-reward MuJoCo tasks: exploration tests beside MountainCarContinuous.

``SparseHalfCheetah`` (``steinrl/SparseHalfCheetah-v1``) is Gymnasium's ``HalfCheetah-v5``
(same model, dynamics, reset, control cost and 1000-step time limit) with one change to the
reward and one to the observation:

- **reward** the forward reward replaced by a goal: 1 on every step that ends with the torso's
  x coordinate beyond the goal, ``x > goal_distance`` (5 m by default; the reset puts it within
  ±0.1 m of 0), else 0; minus HalfCheetah's control cost, 0.1 ‖a‖² (``ctrl_cost_weight``). The
  return is the steps spent past the goal less what the actions cost: at most 0 for a policy
  that never gets there, so that standing still pays best until the goal is found (the trap
  of MountainCarContinuous, whose goal pays +100 and whose actions cost);
- **observation** HalfCheetah-v5's 17 values with the torso's x in front (18 values,
  ``exclude_current_positions_from_observation=False``), so that the reward is a function of
  the state.

A policy that acts at random with unit standard deviation (SB3's initial Gaussian policy)
moves the torso a median 1.7 m forward at its farthest in an episode, and past 5 m in 7 of
100 episodes; with standard deviation 0.3 or less, in none of 100. Version 0 had no control
cost (``ctrl_cost_weight=0.0`` gives it back): SB3's default PPO learned to run past the goal
there, so it was no exploration test. The sparse-reward MuJoCo
tasks of VIME (Houthooft et al., 2016) and of Gangwani, Liu & Peng (ICLR 2019), who used them
to test an SVPG kernel, pay in the same way only once the body has moved far enough; this task
follows that idea, with constants of its own (docs/tasks.md#sparse-reward-halfcheetah).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import utils
from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv

__all__ = ["CTRL_COST_WEIGHT", "GOAL_DISTANCE", "SparseHalfCheetahEnv"]

#: The default goal: the torso's x coordinate in metres past which a step pays 1.
GOAL_DISTANCE = 5.0
#: The default control cost weight: HalfCheetah-v5's own.
CTRL_COST_WEIGHT = 0.1


class SparseHalfCheetahEnv(HalfCheetahEnv):
    """HalfCheetah-v5 that pays 1 per step with the torso beyond ``goal_distance``, less its
    control cost (module docstring).

    :param goal_distance: metres; a step pays when its final torso x exceeds it (> 0).
    :param ctrl_cost_weight: subtracted times the squared action norm (default 0.1, HalfCheetah's;
        0: version 0 of the task, no control cost).
    :param exclude_current_positions_from_observation: as HalfCheetah-v5's (default False here:
        the torso's x is observed).
    """

    def __init__(self, goal_distance: float = GOAL_DISTANCE, ctrl_cost_weight: float = CTRL_COST_WEIGHT,
                 exclude_current_positions_from_observation: bool = False, **kwargs: Any) -> None:
        if not (np.isfinite(goal_distance) and goal_distance > 0):
            raise ValueError(f"goal_distance must be a finite number > 0, got {goal_distance!r}")
        if not (np.isfinite(ctrl_cost_weight) and ctrl_cost_weight >= 0):
            raise ValueError(f"ctrl_cost_weight must be a finite number >= 0, got {ctrl_cost_weight!r}")
        super().__init__(ctrl_cost_weight=ctrl_cost_weight,
                         exclude_current_positions_from_observation=exclude_current_positions_from_observation,
                         **kwargs)
        utils.EzPickle.__init__(self, goal_distance, ctrl_cost_weight, exclude_current_positions_from_observation,
                                **kwargs)
        self.goal_distance = float(goal_distance)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        observation, _, terminated, truncated, info = super().step(action)
        x = float(info["x_position"])
        goal = float(x > self.goal_distance)
        ctrl = float(self.control_cost(action))
        info = {"x_position": x, "x_velocity": info["x_velocity"], "reward_goal": goal, "reward_ctrl": -ctrl}
        return observation, goal - ctrl, terminated, truncated, info
