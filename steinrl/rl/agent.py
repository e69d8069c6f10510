"""The SVPG agent: policy particles x prior x estimator x SVGD step.

One iteration (see :meth:`Agent.collect` and :meth:`Agent.update`):

1. materialise every particle's dense weights once, then step all ``M * E`` envs with
   one ensemble forward per step (noise pre-drawn for the whole batch);
2. estimate advantages per particle (REINFORCE returns-to-go or A2C's GAE);
3. one batched forward + backward gives g_i = grad[J(theta_i) / alpha + w log p(theta_i)]
   for all particles, J being the per-step mean of log pi(a|s) * A;
4. the SVGD step moves the particles along phi (attractive + repulsive terms);
5. (a2c) the baselines are refitted: a few minibatch regression steps of each particle's
   value network (``critic: mlp``) or one batched least-squares solve (``critic: linear``).
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor

from steinrl.run.algos import parse_algo
from steinrl.run.config import Config
from steinrl.rl.critics import LinearBaseline, ValueEnsemble, explained_variance
from steinrl.rl.returns import discounted_returns, gae, standardize
from steinrl.rl.policy import EnsemblePolicy
from steinrl.core.priors import make_prior
from steinrl.rl.rollout import Batch, Sampler
from steinrl.core.svgd import SVGD, flatten


class NonFiniteError(RuntimeError):
    """A gradient or parameter became NaN/inf; the message names iteration and particles."""


def iteration_seed(seed: int, iteration: int) -> int:
    """A 31-bit seed for iteration ``iteration`` of a run seeded ``seed`` (independent streams)."""
    return int(np.random.SeedSequence([seed, iteration]).generate_state(1)[0] & 0x7FFFFFFF)


@dataclass
class UpdateStats:
    """Scalars of one update, logged under ``train/``."""

    surrogate: float
    log_prior: float
    entropy: float
    policy_std: float
    bandwidth: float
    mean_pairwise_distance: float
    kernel_mean: float
    attractive_norm: float
    repulsive_norm: float
    value_loss: float | None
    explained_variance: float | None


def build_policy(cfg: Config, observation_space: gym.Space, action_space: gym.Space) -> EnsemblePolicy:
    """The policy ensemble of ``cfg.algo``'s prior family."""
    update, _ = parse_algo(cfg.algo)
    layer_kwargs = ({"K": cfg.householder_k, "scales": cfg.householder_scales}
                    if update.layer == "householder" else None)
    return EnsemblePolicy(
        cfg.particles, observation_space, action_space, cfg.policy_hidden,
        activation=cfg.activation, layer=update.layer, layer_kwargs=layer_kwargs,
        log_std_init=cfg.log_std_init, output_gain=cfg.output_gain, normalize_obs=cfg.normalize_obs,
    )


class Agent:
    """M policy particles (and, for a2c, M value networks) with their optimizers.

    :param cfg: the resolved run config.
    :param observation_space: single-env observation space.
    :param action_space: single-env action space.
    """

    def __init__(self, cfg: Config, observation_space: gym.Space, action_space: gym.Space):
        self.cfg = cfg
        self.update_rule, self.estimator = parse_algo(cfg.algo)
        self.device = torch.device(cfg.device)
        self.policy = build_policy(cfg, observation_space, action_space).to(self.device)
        self.prior = make_prior(cfg.prior, **(
            {"variance": cfg.prior_variance} if cfg.prior == "gaussian" else {"a": cfg.prior_a, "b": cfg.prior_b}))
        kernel_params = self.policy.particle_parameters()
        self.log_std_opt: torch.optim.Optimizer | None = None
        if not cfg.log_std_in_kernel and not self.policy.discrete:
            kernel_params = list(self.policy.net.parameters())
            self.log_std_opt = torch.optim.Adam([self.policy.log_std], lr=cfg.lr)
        self.svgd = SVGD(kernel_params, lr=cfg.lr, optimizer=cfg.optimizer,
                         kernel=self.update_rule.kernel, bandwidth=cfg.bandwidth, proximal=cfg.proximal_weight)
        self.value: ValueEnsemble | LinearBaseline | None = None
        self.value_opt: torch.optim.Optimizer | None = None
        if self.estimator == "a2c" and cfg.critic == "mlp":
            self.value = ValueEnsemble(cfg.particles, self.policy.obs_dim, cfg.value_hidden,
                                       cfg.activation).to(self.device)
            self.value_opt = torch.optim.Adam(self.value.net.parameters(), lr=cfg.value_lr)
        elif self.estimator == "a2c":
            self.value = LinearBaseline(cfg.particles, self.policy.obs_dim).to(self.device)

    # --- sampling -----------------------------------------------------------------
    def collect(self, sampler: Sampler, iteration: int) -> Batch:
        """Roll out all particles for one batch, seeded by ``(cfg.seed, iteration)``."""
        cfg = self.cfg
        seed = iteration_seed(cfg.seed, iteration)
        gen = torch.Generator(device=self.device).manual_seed(seed)
        T_max = sampler.max_steps(cfg.batch_size, cfg.whole_episodes)
        policy = self.policy
        with torch.no_grad():
            noise = policy.draw_noise((T_max, *policy.noise_shape(sampler.E)), policy.discrete, gen, self.device)
            batch = sampler.collect(policy.actor(noise), cfg.batch_size,
                                    whole_episodes=cfg.whole_episodes, seed=seed)
        policy.obs_norm.update(batch.obs[:-1][torch.as_tensor(batch.valid)].to(self.device))
        return batch

    # --- update -------------------------------------------------------------------
    def advantages(self, batch: Batch) -> tuple[np.ndarray, np.ndarray | None, float | None]:
        """Advantages ``(T, M, E)`` for the policy, and for a2c the value targets ``(T, M, E)``
        and the explained variance of the current value networks (else None, None)."""
        cfg = self.cfg
        targets = explained = None
        if self.estimator == "reinforce":
            adv = discounted_returns(batch.rewards, batch.done, cfg.discount)
        else:
            with torch.no_grad():
                T1, M, E, d = batch.obs.shape
                obs = batch.obs.to(self.device).permute(1, 0, 2, 3).reshape(M, T1 * E, d)
                if isinstance(self.value, LinearBaseline):
                    t = torch.as_tensor(batch.timestep, device=self.device).permute(1, 0, 2).reshape(M, T1 * E)
                    values = self.value(obs, t)
                else:
                    values = self.value(self.policy.obs_norm(obs))
                values = values.view(M, T1, E).permute(1, 0, 2).cpu().numpy().astype(np.float64)
            adv, targets = gae(batch.rewards, values, batch.terminated, batch.done, cfg.discount, cfg.gae_lambda)
            if isinstance(self.value, LinearBaseline):  # rllab fits it to the discounted returns
                targets = discounted_returns(batch.rewards, batch.done, cfg.discount)
            explained = explained_variance(values[:-1], targets, batch.valid)
        if cfg.normalize_advantages:
            adv = standardize(adv, batch.valid, axis=(0, 2))
        return adv, targets, explained

    def update(self, batch: Batch, iteration: int) -> UpdateStats:
        """One SVGD step of the policy particles (and value regression for a2c)."""
        cfg = self.cfg
        M = cfg.particles
        adv, targets, explained = self.advantages(batch)
        # Compact each particle's valid steps into (M, n_max, ...) so the update skips the
        # padding of reset steps and stopped envs.
        valid = torch.as_tensor(batch.valid).permute(1, 0, 2).reshape(M, -1)  # (M, T*E)
        n_valid = valid.sum(1)
        n_max = int(n_valid.max())
        order = torch.argsort((~valid).to(torch.int8), dim=1, stable=True)[:, :n_max]  # (M, n_max)
        mask = torch.gather(valid, 1, order).to(self.device, torch.float32)
        order = order.to(self.device)

        def take(x: Tensor) -> Tensor:  # (T, M, E, ...) -> (M, n_max, ...)
            x = x.to(self.device).transpose(0, 1).reshape(M, -1, *x.shape[3:])
            idx = order.view(M, n_max, *([1] * (x.dim() - 2))).expand(M, n_max, *x.shape[2:])
            return torch.gather(x, 1, idx)

        T = batch.actions.shape[0]
        obs = take(batch.obs[:T])
        actions = take(batch.actions)
        adv_t = take(torch.as_tensor(adv, dtype=torch.float32))
        count = mask.sum(1).clamp_min(1.0)

        # g_i = grad [ J(theta_i) / alpha + w log p(theta_i) ], all particles in one backward.
        dense = self.policy.dense()
        logp, entropy = self.policy.log_prob(obs, actions, dense)
        surrogate = (logp * adv_t * mask).sum(1) / count  # (M,)
        log_prior = self.policy.log_prior(self.prior)  # (M,)
        log_target = surrogate / cfg.temperature + cfg.effective_prior_weight * log_prior
        self.svgd.zero_grad()
        if self.log_std_opt is not None:
            self.log_std_opt.zero_grad()
        (-log_target.sum()).backward()
        self._check_finite([p.grad for p in self.policy.particle_parameters()], "gradient", iteration)
        self._set_lr(iteration)
        info = self.svgd.step()
        if self.log_std_opt is not None:
            self.log_std_opt.step()
        self._check_finite(list(self.policy.particle_parameters()), "parameter", iteration)

        value_loss = None
        if isinstance(self.value, LinearBaseline):
            t = take(torch.as_tensor(batch.timestep[:T]))
            value_loss = self.value.fit(obs, t, take(torch.as_tensor(targets)), mask)
        elif self.value is not None:
            gen = torch.Generator(device=self.device).manual_seed(iteration_seed(cfg.seed, iteration) + 1)
            value_loss = self.value.fit(
                self.value_opt, self.policy.obs_norm(obs), take(torch.as_tensor(targets, dtype=torch.float32)),
                mask, cfg.value_steps, cfg.value_minibatch, gen)

        std = self.policy.log_std.exp().mean() if not self.policy.discrete else torch.tensor(float("nan"))
        return UpdateStats(
            surrogate=float(surrogate.detach().mean()), log_prior=float(log_prior.detach().mean()),
            entropy=float(entropy.detach().mean()),
            policy_std=float(std.detach()), bandwidth=float(info["bandwidth"]),
            mean_pairwise_distance=float(info["mean_pairwise_distance"]), kernel_mean=float(info["kernel_mean"]),
            attractive_norm=float(info.get("attractive_norm", float("nan"))),
            repulsive_norm=float(info.get("repulsive_norm", float("nan"))),
            value_loss=value_loss, explained_variance=explained,
        )

    def _set_lr(self, iteration: int) -> None:
        cfg = self.cfg
        lr = cfg.lr
        if cfg.lr_halving_every > 0 and iteration >= cfg.lr_halving_start:
            lr = cfg.lr * 0.5 ** ((iteration - cfg.lr_halving_start) // cfg.lr_halving_every + 1)
        opts = [self.svgd.optimizer] + ([self.log_std_opt] if self.log_std_opt is not None else [])
        for group in (g for opt in opts for g in opt.param_groups):
            group["lr"] = lr

    @staticmethod
    def _check_finite(tensors: list[Tensor | None], what: str, iteration: int) -> None:
        present = [t for t in tensors if t is not None]
        ok = torch.isfinite(flatten(present)).all(1)
        if not bool(ok.all()):
            bad = torch.nonzero(~ok).flatten().tolist()
            raise NonFiniteError(f"non-finite {what} at iteration {iteration} in particle(s) {bad}")

    # --- state --------------------------------------------------------------------
    def state_dict(self) -> dict:
        state = {"policy": self.policy.state_dict(), "svgd": self.svgd.state_dict()}
        if self.log_std_opt is not None:
            state["log_std_opt"] = self.log_std_opt.state_dict()
        if self.value is not None:
            state["value"] = self.value.state_dict()
        if self.value_opt is not None:
            state["value_opt"] = self.value_opt.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.svgd.load_state_dict(state["svgd"])
        if self.log_std_opt is not None:
            self.log_std_opt.load_state_dict(state["log_std_opt"])
        if self.value is not None:
            self.value.load_state_dict(state["value"])
        if self.value_opt is not None:
            self.value_opt.load_state_dict(state["value_opt"])
