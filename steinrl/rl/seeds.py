"""Many seeds of one RL config as one batch: S seeds x M particles x E envs.

:class:`SeedBatchJob` trains the S seeds together: one ensemble of S·M particles, one
device-resident torch task of S·M·E envs (``steinrl.envs.torch_tasks``), one rollout and
one update per iteration. Nothing couples the seeds: each seed's particles are drawn from
its own generator, its envs reset from their own generator, its action noise and critic
minibatches come from its own streams, and the SVGD kernel couples particles only within
their seed (``SVGD(groups=S)``). So each seed's curve is the one it gives alone (to float
rounding), whichever seeds share its batch; its state is saved in the single-seed format.

Continuing or cut sampling only (whole episodes would make a batch's length depend on the
slowest seed), without observation normalisation (its statistics would mix the seeds) and
without the proximal term.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch import Tensor

from steinrl import envs
from steinrl.errors import ConfigError
from steinrl.rl.agent import SVPGAgent
from steinrl.rl.job import episode_scalars
from steinrl.rl.torch_rollout import TorchSampler

__all__ = ["SeedBatchJob", "split_particles", "join_particles"]


def split_particles(state: Any, index: int, groups: int, sizes: set[int]) -> Any:
    """Group ``index`` of ``groups`` of a (nested) state: every tensor whose leading dim is
    one of ``sizes`` (all groups' particles, or envs) is cut to the group's rows; the rest
    (counters, the shared observation statistics) is copied."""
    if isinstance(state, dict):
        return {k: (v if "obs_norm" in str(k) else split_particles(v, index, groups, sizes)) for k, v in state.items()}
    if isinstance(state, list):
        return [split_particles(v, index, groups, sizes) for v in state]
    if isinstance(state, Tensor) and state.dim() and state.shape[0] in sizes:
        rows = state.shape[0] // groups
        return state[index * rows:(index + 1) * rows].clone()
    return state


def join_particles(states: list[Any], sizes: set[int]) -> Any:
    """The inverse of :func:`split_particles` (``sizes``: one group's particles, or envs)."""
    first = states[0]
    if isinstance(first, dict):
        return {k: (first[k] if "obs_norm" in str(k) else join_particles([s[k] for s in states], sizes)) for k in first}
    if isinstance(first, list):
        return [join_particles([s[i] for s in states], sizes) for i in range(len(first))]
    if isinstance(first, Tensor) and first.dim() and first.shape[0] in sizes:
        return torch.cat(states)
    return first


class SeedBatchJob:
    """S seeds of ``cfg`` trained in one batch; :meth:`step` returns each seed's scalars.

    :param cfg: the config every seed shares (its own ``seed`` is ignored).
    :param seeds: the S seeds.
    """

    def __init__(self, cfg: Any, seeds: list[int]) -> None:
        if len(set(seeds)) != len(seeds) or not seeds:
            raise ConfigError(f"seeds must be distinct, got {seeds}")
        if cfg.rollout.sampling == "whole_episodes":
            raise ConfigError("seeds in one batch need rollout.sampling continuing or cut (whole episodes make a "
                              "batch as long as its slowest seed's); e.g. --preset fast")
        if cfg.policy.normalize_obs or cfg.update.proximal_weight:
            raise ConfigError("seeds in one batch cannot share policy.normalize_obs or update.proximal_weight")
        self.cfg, self.seeds = cfg, list(seeds)
        S, M, E = len(seeds), cfg.particles, cfg.rollout.envs_per_particle
        from steinrl.envs.torch_tasks import make_torch_vec

        task = make_torch_vec(cfg.env, S * M * E, device=cfg.device, max_episode_steps=cfg.rollout.horizon, groups=S)
        self.sampler = TorchSampler(task, S * M, E, cfg.rollout.horizon)
        single = envs.make(cfg.env)
        self.agent = SVPGAgent(cfg, single.observation_space, single.action_space, seeds=self.seeds)
        single.close()

    @property
    def num_steps(self) -> int:
        return self.cfg.iterations

    def step(self, iteration: int) -> list[dict[str, float]]:
        """One iteration of every seed: rollout and update in one batch; the scalars of each seed."""
        t0 = time.perf_counter()
        batch = self.agent.collect(self.sampler, iteration)
        stats = self.agent.update(batch, iteration)
        seconds = time.perf_counter() - t0
        S, M = len(self.seeds), self.cfg.particles
        steps = batch.valid.view(batch.valid.shape[0], S, M, -1).sum((0, 2, 3)).cpu().tolist()
        rows = []
        for s, train in enumerate(stats.per_group(S)):
            scalars = episode_scalars(batch.episode_stats[:, s * M:(s + 1) * M])
            scalars.update({f"train/{k}": v for k, v in train.items()})
            scalars.update({f"train/{k}": v for k, v in self.agent.policy.head.diagnostics().items()})
            scalars.update({"time/fps": steps[s] / seconds, "time/iteration_seconds": seconds,
                            "time/steps_per_particle": steps[s] / M})
            rows.append(scalars)
        return rows

    def state_dicts(self) -> list[dict]:
        """Each seed's state in the single-seed job's format (``{"agent", "sampler"}``)."""
        state = {"agent": self.agent.state_dict(), "sampler": self.sampler.state_dict()}
        S, M, E = len(self.seeds), self.cfg.particles, self.cfg.rollout.envs_per_particle
        envs_state = state["sampler"].pop("envs", None)  # (state_dim, envs) and one rng per seed: below
        per_seed = [split_particles(state, s, S, {S * M, S * M * E}) for s in range(S)]
        if envs_state is not None:
            for s, seed_state in enumerate(per_seed):
                seed_state["sampler"]["envs"] = {
                    "state": envs_state["state"].chunk(S, dim=1)[s].clone(),  # its columns are the envs
                    "steps": envs_state["steps"].chunk(S)[s].clone(),
                    "prev_done": envs_state["prev_done"].chunk(S)[s].clone(), "rng": [envs_state["rng"][s]]}
        return per_seed

    def load_state_dicts(self, states: list[dict]) -> None:
        M, E = self.cfg.particles, self.cfg.rollout.envs_per_particle
        envs_states = [s["sampler"].get("envs") for s in states]
        joined = join_particles([{**s, "sampler": {k: v for k, v in s["sampler"].items() if k != "envs"}}
                                 for s in states], {M, M * E})
        if envs_states[0] is not None:
            joined["sampler"]["envs"] = {
                "state": torch.cat([e["state"] for e in envs_states], dim=1),
                "steps": torch.cat([e["steps"] for e in envs_states]),
                "prev_done": torch.cat([e["prev_done"] for e in envs_states]), "rng": [e["rng"][0] for e in envs_states]}
        self.agent.load_state_dict(joined["agent"])
        self.sampler.load_state_dict(joined["sampler"])

    def close(self) -> None:
        pass
