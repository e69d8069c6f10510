"""A trained steinrl ensemble as a Stable-Baselines3 policy.

:class:`EnsembleSB3Policy` is a :class:`~stable_baselines3.common.policies.BasePolicy`
around an :class:`~steinrl.rl.policy.EnsemblePolicy`. It acts through
:class:`steinrl.rl.evaluation.EnsembleActor`, so its acting modes are exactly those of
``evaluate.py``:

- ``act_mode="sample"``: a particle drawn per episode (Thompson-style). ``predict``'s
  ``episode_start`` redraws the particle of every env that starts an episode
  (``evaluate_policy`` and :class:`~stable_baselines3.common.callbacks.EvalCallback`
  pass it); without ``episode_start`` the particles stay as drawn
  (call :meth:`EnsembleSB3Policy.reset_particles` yourself).
- ``act_mode="particle"``: one fixed particle ``particle=i``.
- ``act_mode="mean"``: the particles' mean action (Box) or mean action probabilities
  (Discrete).

``deterministic=True`` gives the mean action / arg-max of the chosen particle(s),
``False`` a sampled action. Box actions are raw Gaussian outputs, clipped to the action
space bounds by SB3's ``predict`` (as for any non-squashed SB3 policy; the steinrl
sampler clips the same way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.policies import BasePolicy
from stable_baselines3.common.preprocessing import preprocess_obs
from torch import Tensor

from steinrl.errors import ConfigError
from steinrl.rl.evaluation import ACT_MODES, EnsembleActor
from steinrl.rl.policy import EnsemblePolicy
from steinrl.run.config import Config, resolve_saved

__all__ = ["EnsembleSB3Policy", "config_from_dict", "space_to_dict", "space_from_dict"]

FORMAT = "steinrl.sb3.EnsembleSB3Policy"
FORMAT_VERSION = 1


def space_to_dict(space: gym.Space) -> dict[str, Any]:
    """A Box or Discrete space as plain data (tensors, numbers, strings)."""
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "low": torch.as_tensor(space.low), "high": torch.as_tensor(space.high),
                "dtype": str(space.dtype)}
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    raise ValueError(f"cannot save a policy for the space {space} (Box and Discrete only)")


def space_from_dict(data: dict[str, Any]) -> gym.Space:
    """The inverse of :func:`space_to_dict`."""
    if data.get("type") == "Box":
        return gym.spaces.Box(data["low"].numpy(), data["high"].numpy(), dtype=np.dtype(data["dtype"]))
    if data.get("type") == "Discrete":
        return gym.spaces.Discrete(data["n"], start=data["start"])
    raise ValueError(f"unknown space record {data!r}")


def config_from_dict(config: Config | dict[str, Any], where: str = "EnsembleSB3Policy") -> Config:
    """A validated :class:`~steinrl.run.config.Config` from a Config or its ``to_dict()``."""
    if isinstance(config, Config):
        return config
    return resolve_saved(config, where)


class EnsembleSB3Policy(BasePolicy):
    """An ensemble of M policy particles acting as one SB3 policy.

    :param observation_space: a flat ``Box`` observation space.
    :param action_space: a 1-D ``Box`` or a ``Discrete`` action space.
    :param config: the steinrl run config (a :class:`~steinrl.run.config.Config` or its
        ``to_dict()``); fixes the ensemble's architecture (``particles``, ``algo``'s
        layer family, ``policy_hidden``, ...).
    :param act_mode: ``"sample"``, ``"particle"`` or ``"mean"`` (see module docstring).
    :param particle: the particle used in ``"particle"`` mode.
    :param seed: seeds the per-episode particle draws and the action noise
        (None: a random seed).
    :param ensemble: an existing :class:`~steinrl.rl.policy.EnsemblePolicy` to wrap
        (shared, not copied); by default a freshly initialised one is built from ``config``.
    :param normalize_images: SB3's option (unused: steinrl policies take flat Box observations).
    """

    def __init__(
        self,
        observation_space: gym.spaces.Space,
        action_space: gym.spaces.Space,
        config: Config | dict[str, Any],
        act_mode: str = "sample",
        particle: int = 0,
        seed: int | None = None,
        ensemble: EnsemblePolicy | None = None,
        normalize_images: bool = False,
    ):
        super().__init__(observation_space, action_space, normalize_images=normalize_images, squash_output=False)
        if act_mode not in ACT_MODES:
            raise ValueError(f"unknown act_mode {act_mode!r}; choices: {', '.join(ACT_MODES)}")
        self.config = config_from_dict(config)
        if ensemble is None:
            from steinrl.rl.agent import build_policy

            ensemble = build_policy(self.config, observation_space, action_space)
        elif ensemble.num_particles != self.config.particles:
            raise ValueError(f"ensemble has {ensemble.num_particles} particles, config says {self.config.particles}")
        self.ensemble = ensemble
        self.act_mode = act_mode
        self.particle = int(particle)
        self.seed = None if seed is None else int(seed)
        if not 0 <= self.particle < self.num_particles:
            raise ValueError(f"particle must be in [0, {self.num_particles}), got {particle}")
        self._actor: EnsembleActor | None = None

    # --- construction -------------------------------------------------------------
    @classmethod
    def from_run(
        cls,
        run_dir_or_checkpoint: str | Path,
        act_mode: str = "sample",
        particle: int = 0,
        seed: int | None = None,
        device: str = "cpu",
    ) -> EnsembleSB3Policy:
        """The ensemble of a ``train.py`` run (a run directory or its ``checkpoint.pt``).

        Loaded with :func:`steinrl.rl.evaluation.load_run`; the spaces are those of the run's env.
        """
        import steinrl.envs as envs
        from steinrl.run.load import load_run

        cfg, ensemble, _ = load_run(run_dir_or_checkpoint, device=device)
        if not isinstance(ensemble, EnsemblePolicy):
            raise ConfigError(f"{run_dir_or_checkpoint} is a {cfg.algo} run: it has no particle ensemble "
                              "(steinrl.run.load.load_run returns its policy)")
        env = envs.make(cfg.env)
        observation_space, action_space = env.observation_space, env.action_space
        env.close()
        return cls(observation_space, action_space, cfg, act_mode=act_mode, particle=particle, seed=seed,
                   ensemble=ensemble).to(device)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(config=self.config.to_dict(), act_mode=self.act_mode, particle=self.particle, seed=self.seed)
        return data

    # --- save / load (plain data only: loading never unpickles objects) --------------------
    def save(self, path: str | Path) -> None:
        """Write the policy as tensors and plain data (SB3's own ``save`` pickles the spaces;
        this format is read back with ``torch.load(weights_only=True)``)."""
        torch.save({
            "format": FORMAT, "format_version": FORMAT_VERSION,
            "observation_space": space_to_dict(self.observation_space),
            "action_space": space_to_dict(self.action_space),
            "config": self.config.to_dict(), "act_mode": self.act_mode, "particle": self.particle, "seed": self.seed,
            "state_dict": self.state_dict(),
        }, path)

    @classmethod
    def load(cls, path: str | Path, device: torch.device | str = "auto") -> EnsembleSB3Policy:  # type: ignore[override]
        """Read a policy written by :meth:`save` without executing anything in the file."""
        from stable_baselines3.common.utils import get_device

        from steinrl.run.checkpoint import CheckpointError, load_checkpoint

        device = get_device(device)
        state = load_checkpoint(path, map_location=device)
        if state.get("format") != FORMAT or state.get("format_version") != FORMAT_VERSION:
            raise CheckpointError(f"{path} is not an EnsembleSB3Policy saved by steinrl's EnsembleSB3Policy.save")
        policy = cls(space_from_dict(state["observation_space"]), space_from_dict(state["action_space"]),
                     state["config"], act_mode=state["act_mode"], particle=state["particle"], seed=state["seed"])
        policy.load_state_dict(state["state_dict"])
        return policy.to(device)

    # --- acting -------------------------------------------------------------------
    @property
    def num_particles(self) -> int:
        return self.ensemble.num_particles

    def set_act_mode(self, act_mode: str | None = None, particle: int | None = None,
                     seed: int | None = None) -> None:
        """Change how the ensemble acts; resets the random stream (to ``seed`` if given)."""
        if act_mode is not None:
            if act_mode not in ACT_MODES:
                raise ValueError(f"unknown act_mode {act_mode!r}; choices: {', '.join(ACT_MODES)}")
            self.act_mode = act_mode
        if particle is not None:
            if not 0 <= particle < self.num_particles:
                raise ValueError(f"particle must be in [0, {self.num_particles}), got {particle}")
            self.particle = int(particle)
        if seed is not None:
            self.seed = int(seed)
        self._actor = None

    def _get_actor(self) -> EnsembleActor:
        device = self.device
        if self._actor is None or self._actor.generator.device != device:
            self._actor = EnsembleActor(self.ensemble, mode=self.act_mode, particle=self.particle,
                                        deterministic=True, seed=self.seed)
        return self._actor

    def reset_particles(self, episode_start: np.ndarray | None = None, n_envs: int | None = None) -> None:
        """``sample`` mode: draw new particles for the envs whose episode starts
        (``episode_start`` (n_envs,) bool), or for all ``n_envs`` envs."""
        actor = self._get_actor()
        if episode_start is None:
            actor.reset(batch_size=n_envs or 1)
        else:
            actor.reset(starting=np.asarray(episode_start, dtype=bool).reshape(-1))

    def predict(
        self,
        observation: np.ndarray | dict[str, np.ndarray],
        state: tuple[np.ndarray, ...] | None = None,
        episode_start: np.ndarray | None = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, tuple[np.ndarray, ...] | None]:
        """SB3's ``predict``; in ``sample`` mode ``episode_start`` redraws the particles of
        the envs that start an episode."""
        if self.act_mode == "sample" and episode_start is not None:
            starting = np.asarray(episode_start, dtype=bool).reshape(-1)
            actor = self._get_actor()
            if starting.any() or actor.assigned is None or len(actor.assigned) != len(starting):
                actor.reset(starting=starting)
        return super().predict(observation, state, episode_start, deterministic)

    def _predict(self, observation: Tensor, deterministic: bool = False) -> Tensor:
        obs = preprocess_obs(observation, self.observation_space, normalize_images=self.normalize_images)
        obs = obs.float().reshape(obs.shape[0], -1)
        actor = self._get_actor()
        actor.deterministic = deterministic
        return actor.act(obs)

    def forward(self, observation: Tensor, deterministic: bool = False) -> Tensor:
        return self._predict(observation, deterministic)
