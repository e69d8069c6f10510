"""Episodic-reward MuJoCo tasks: Hopper-v5 and Walker2d-v5 with the whole return paid at the end.

``EpisodicHopper`` (``steinrl/EpisodicHopper-v0``) and ``EpisodicWalker2d``
(``steinrl/EpisodicWalker2d-v0``) are Gymnasium's own ``Hopper-v5`` and ``Walker2d-v5`` (same
model, dynamics, reset, observation, health check that ends the episode, and 1000-step time
limit) with one change: every step pays 0 except an episode's last, which pays the sum of the
dense rewards Gymnasium's env gave over the episode. The return of a whole episode is
unchanged; only when it arrives changes: an exploration task for credit assignment.

Definition and source. This is the "episodic" MuJoCo setting of Gangwani, Liu & Peng,
"Learning Self-Imitating Diverse Policies" (ICLR 2019, arXiv:1805.10309), taken from their
released code (github.com/tgangwani/SelfImitationDiverse, ``imitation/common/env_wrappers.py``,
``EpisodicEnvWrapper``; ``main.py``'s ``--episodic`` flag, "provide reward only at the last
timestep"): a wrapper adds up the env's reward on every step and pays the sum, then 0 again,
when the episode is ``done``; every other step pays 0. They wrap ``gym.make(env_id)``, whose
``done`` comes from the health check or from Gym's time limit (1000 steps for Hopper and
Walker2d), so the episode's end pays whichever way it ends. Oh et al.'s self-imitation learning
(ICML 2018) also trains PPO on a delayed-reward MuJoCo; their released code
(github.com/junhyukoh/self-imitation-learning) holds no such wrapper, and a delay of k steps
(paid every k steps) is another task. Where the two differ we follow Gangwani et al. (the
SVPG-based prior work): the end of the episode only.

How the time limit pays. Gymnasium's ``TimeLimit`` truncates outside the env, so the payment is
:class:`EpisodicReward`, a wrapper that :func:`gymnasium.make` applies *outside* the time
limit (the registered spec's ``additional_wrappers``), as Gangwani et al.'s wrapper sits
outside Gym's. It pays on the step that returns ``terminated`` or ``truncated``: on a fall
(Gymnasium's health check, kept) and at the time limit, the registered 1000 steps or any
``max_episode_steps`` given to ``gymnasium.make`` / :func:`steinrl.envs.make` (the env need not
know its horizon). Without a time limit (``max_episode_steps=-1``) only a fall pays. The
reward depends on the episode so far, not on the observation alone (as in the sources).

``info`` keeps Gymnasium's keys (``x_position``, ``reward_forward``, ...) and adds
``dense_reward``, the step's dense reward, so that a per-step report can use the usual reward;
an episode's return is the same in both.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
from gymnasium.envs.registration import WrapperSpec

__all__ = ["EPISODIC_TASKS", "EpisodicReward", "episodic_wrapper_spec"]

#: short name -> (the Gymnasium env it pays at the end of, its entry point)
EPISODIC_TASKS: dict[str, tuple[str, str]] = {
    "EpisodicHopper": ("Hopper-v5", "gymnasium.envs.mujoco.hopper_v5:HopperEnv"),
    "EpisodicWalker2d": ("Walker2d-v5", "gymnasium.envs.mujoco.walker2d_v5:Walker2dEnv"),
}


class EpisodicReward(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Pays an episode's summed reward on its last step (``terminated`` or ``truncated``), 0 on
    the others (module docstring). Wrap an env that carries its time limit (``gymnasium.make``'s
    ``TimeLimit``): a truncation inside ``env`` pays, one applied outside this wrapper does not.

    ``info["dense_reward"]`` is the wrapped env's reward of the step; ``reset`` clears the sum.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self._episode_sum = 0.0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._episode_sum = 0.0
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        dense = float(reward)
        self._episode_sum += dense
        info = {**info, "dense_reward": dense}
        if terminated or truncated:
            paid, self._episode_sum = self._episode_sum, 0.0
            return observation, paid, terminated, truncated, info
        return observation, 0.0, terminated, truncated, info


def episodic_wrapper_spec() -> WrapperSpec:
    """:class:`EpisodicReward` as a registered spec's ``additional_wrappers`` entry (applied by
    ``gymnasium.make`` after its ``TimeLimit``)."""
    return WrapperSpec(name="EpisodicReward", entry_point="steinrl.envs.episodic_mujoco:EpisodicReward", kwargs={})
