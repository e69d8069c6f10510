"""Neural bandit agents: Stein Thompson sampling and the neural greedy baselines.

:class:`ParticleRegressor` fits f_θ(x) ∈ R^k to the rounds so far (squared error on the
pulled arm only), M particles at once, with Showdown's refit protocol: every
``protocol.refit_every`` rounds, ``protocol.refit_steps`` minibatch steps of
``protocol.minibatch`` rounds drawn with replacement from all data, the learning rate
decaying as ``lr / (1 + lr_decay · t)`` over all steps t of the run, each particle's step
clipped to ``protocol.max_grad_norm``.

- ``<method>-ts`` (:class:`SteinThompsonSampling`): the particles are moved by the
  method's coupling (SVGD, or independent) towards the posterior
  p(θ | D) ∝ Π_t N(r_t; f_θ(x_t)_{a_t}, σ²) p(θ): the minibatch log-likelihood is scaled
  by N / B. Each round one particle is drawn uniformly and its greedy arm is played.
- ``greedy`` / ``egreedy``: one network fitted to Showdown's cost (the minibatch mean of
  the squared error) and played greedily (with probability ε, a uniform arm instead).
- ``uniform``: a uniformly random arm every round.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from steinrl.bandits.agents.base import AGENTS, BanditAgent, History
from steinrl.bandits.settings import BanditConfig, EpsilonSettings, LikelihoodSettings, ModelSettings
from steinrl.core.activations import ACTIVATIONS
from steinrl.core.couplings import coupling_from, make_coupling
from steinrl.core.ensemble import EnsembleMLP, mlp_forward
from steinrl.core.methods import METHODS
from steinrl.core.optim import inverse_time_lr
from steinrl.core.particle_optimizer import ParticleOptimizer
from steinrl.core.priors import log_gamma_prior, make_prior
from steinrl.registry import Option, settings_options, settings_values

__all__ = ["ParticleRegressor", "SteinThompsonSampling", "Greedy", "EpsilonGreedy", "Uniform", "MODEL_OPTIONS",
           "LIKELIHOOD_OPTIONS"]

#: The ``model`` and ``likelihood`` sections' options (:mod:`steinrl.bandits.settings`).
MODEL_OPTIONS: tuple[Option, ...] = settings_options(ModelSettings)
LIKELIHOOD_OPTIONS: tuple[Option, ...] = settings_options(LikelihoodSettings)


class ParticleRegressor:
    """M reward networks f_θi: R^d -> R^k fitted to the history with the refit protocol.

    :param cfg: the resolved config (sections ``protocol``, ``model`` and, for a particle
        method, ``layer``, ``prior``, ``likelihood``, ``update``).
    :param num_arms: k.
    :param context_dim: d.
    :param particles: M.
    :param method: a particle method (``s2vgd``, ...): posterior fitting; None: one network
        fitted to Showdown's cost, no prior.
    """

    def __init__(self, cfg: BanditConfig, num_arms: int, context_dim: int, particles: int,
                 method: str | None) -> None:
        self.cfg, self.method = cfg, method
        generator = torch.Generator().manual_seed(cfg.seed)
        spec = METHODS.get(method) if method else None
        self.net = EnsembleMLP(particles, context_dim, cfg.model.hidden, num_arms, activation=cfg.model.activation,
                               layer=spec.layer if spec else "gaussian",
                               layer_options=settings_values(cfg.layer) if spec else {}, generator=generator)
        params = list(self.net.parameters())
        self.prior = self.log_noise_precision = None
        if spec is not None:
            groups = {name: g.shape[1] for name, g in self.net.prior_groups().items()}
            self.prior = make_prior(cfg.prior.name, groups, particles, settings=cfg.prior)
            params += self.prior.hyperparameters()
            if cfg.likelihood.learn_noise:
                start = -math.log(cfg.likelihood.noise_variance)
                self.log_noise_precision = torch.nn.Parameter(torch.full((particles, num_arms), start))
                params.append(self.log_noise_precision)
        protocol = cfg.protocol
        coupling = coupling_from(spec.coupling, cfg.update) if spec else make_coupling("independent")
        self.particle_optimizer = ParticleOptimizer(params, coupling, lr=protocol.lr, optimizer=protocol.optimizer,
                                                    max_direction_norm=protocol.max_grad_norm)
        #: B, the embedding's shared inputs (a function-space kernel's, a spread controller's): the first
        #: B contexts of every refit minibatch (B <= protocol.minibatch: checked with the config)
        self.embedding_states = self.particle_optimizer.coupling.embedding_states
        self.steps_taken = 0  #: optimizer steps so far (the learning-rate schedule's t)

    @torch.no_grad()
    def predict(self, contexts: np.ndarray) -> np.ndarray:
        """Expected rewards ``(M, B, k)`` of contexts ``(B, d)``."""
        return self.net(torch.from_numpy(np.ascontiguousarray(contexts, dtype=np.float32))).numpy()

    @torch.no_grad()
    def features(self, contexts: np.ndarray) -> np.ndarray:
        """The last hidden layer of particle 0, ``(B, hidden[-1])`` float64 (NeuralLinear's features)."""
        hidden = [(w[:1], b[:1]) for w, b in self.net.dense()[:-1]]  # all but the output layer
        x = torch.from_numpy(np.ascontiguousarray(contexts, dtype=np.float32))
        pre = mlp_forward(hidden, x, self.net.activation)  # the last hidden layer before its activation
        return ACTIVATIONS.get(self.net.activation)(pre[0]).double().numpy()

    def _log_target(self, x: torch.Tensor, arms: torch.Tensor, rewards: torch.Tensor, n_data: int) -> torch.Tensor:
        """log target per particle ``(M,)`` on a minibatch; also stores the mean squared error."""
        pred = self.net(x)  # M B k
        pulled = pred.gather(2, arms.view(1, -1, 1).expand(pred.shape[0], -1, 1)).squeeze(2)  # M B
        sq = (rewards.view(1, -1) - pulled).square()  # M B
        self.last_mse = float(sq.detach().mean())
        B = x.shape[0]
        if self.prior is None:  # Showdown's cost: the minibatch mean of the squared error
            return -sq.sum(1) / B
        lik = self.cfg.likelihood
        if self.log_noise_precision is None:
            log_lik = -0.5 * sq.sum(1) / lik.noise_variance
            noise_prior = 0.0
        else:
            u = self.log_noise_precision[:, arms]  # M B: log γ of each round's arm
            log_lik = (0.5 * u - 0.5 * u.exp() * sq).sum(1)
            noise_prior = log_gamma_prior(self.log_noise_precision, lik.noise_a, lik.noise_b).sum(1)  # γ ~ Gamma(a, b)
        weight = self.cfg.prior.weight
        return (n_data / B) * log_lik + weight * self.net.log_prior(self.prior) + noise_prior

    def fit(self, history: History, step: int) -> dict[str, float]:
        """``protocol.refit_steps`` particle steps on minibatches of ``history``."""
        protocol = self.cfg.protocol
        rng = np.random.default_rng([self.cfg.seed, step, 17])
        contexts = torch.from_numpy(history.contexts)
        arms = torch.from_numpy(history.arms)
        rewards = torch.from_numpy(history.rewards).float()
        n = len(history)
        stats: dict[str, torch.Tensor] = {}
        for _ in range(protocol.refit_steps):
            idx = torch.from_numpy(rng.integers(n, size=protocol.minibatch))
            lr = inverse_time_lr(protocol.lr, protocol.lr_decay, self.steps_taken)
            self.particle_optimizer.set_lr(lr)
            shared = contexts[idx[:self.embedding_states]]  # the embedding's inputs: the first B contexts

            def embed(shared: torch.Tensor = shared) -> torch.Tensor:  # the reward net's predictions (M, B k)
                return self.net(shared).flatten(1)

            stats = self.particle_optimizer.step(self._log_target(contexts[idx], arms[idx], rewards[idx], n),
                                                 embed=embed if self.embedding_states else None).coupling_stats
            self.steps_taken += 1
        scalars = {"mse": self.last_mse, "lr": lr}
        scalars.update({k: float(v) for k, v in stats.items()})
        if self.log_noise_precision is not None:
            scalars["noise_sd"] = float((-0.5 * self.log_noise_precision.detach()).exp().mean())
        return scalars

    def state_dict(self) -> dict[str, Any]:
        state = {"net": self.net.state_dict(), "particle_optimizer": self.particle_optimizer.state_dict(),
                 "steps_taken": self.steps_taken}
        if self.prior is not None:
            state["prior"] = self.prior.state_dict()
        if self.log_noise_precision is not None:
            state["log_noise_precision"] = self.log_noise_precision.detach().clone()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        if self.prior is not None:
            self.prior.load_state_dict(state["prior"])
        if self.log_noise_precision is not None:
            with torch.no_grad():
                self.log_noise_precision.copy_(state["log_noise_precision"])
        self.particle_optimizer.load_state_dict(state["particle_optimizer"])
        self.steps_taken = int(state["steps_taken"])


class _NeuralAgent(BanditAgent):
    """An agent whose model is a :class:`ParticleRegressor` refitted after every block."""

    model: ParticleRegressor

    def refit(self, history: History, step: int) -> dict[str, float]:
        return self.model.fit(history, step)

    def state_dict(self) -> dict[str, Any]:
        return {"model": self.model.state_dict()}

    def load_state_dict(self, state: dict[str, Any], history: History) -> None:
        self.model.load_state_dict(state["model"])


@AGENTS.register("ts")
class SteinThompsonSampling(_NeuralAgent):
    """Thompson sampling with M particles: each round, a uniformly drawn particle's greedy arm."""

    sections = {"model": ModelSettings, "likelihood": LikelihoodSettings}  # + layer, prior, update (the method's)

    def __init__(self, cfg: BanditConfig, num_arms: int, context_dim: int) -> None:
        super().__init__(cfg, num_arms, context_dim)
        self.model = ParticleRegressor(cfg, num_arms, context_dim, cfg.particles, cfg.algo.rpartition("-")[0])

    def act(self, contexts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        preds = self.model.predict(contexts)  # M B k
        which = rng.integers(preds.shape[0], size=len(contexts))
        return preds[which, np.arange(len(contexts))].argmax(1)


@AGENTS.register("greedy")
class Greedy(_NeuralAgent):
    """One network, always its best arm (ε = 0)."""

    sections = {"model": ModelSettings}

    def __init__(self, cfg: BanditConfig, num_arms: int, context_dim: int) -> None:
        super().__init__(cfg, num_arms, context_dim)
        self.model = ParticleRegressor(cfg, num_arms, context_dim, 1, None)

    def act(self, contexts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.model.predict(contexts)[0].argmax(1)


@AGENTS.register("egreedy")
class EpsilonGreedy(Greedy):
    """One network; with probability ε a uniformly random arm, else its best arm."""

    sections = {"model": ModelSettings, "agent": EpsilonSettings}

    def act(self, contexts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        arms = super().act(contexts, rng)
        explore = rng.random(len(contexts)) < self.cfg.agent.epsilon
        return np.where(explore, rng.integers(self.num_arms, size=len(contexts)), arms)


@AGENTS.register("uniform")
class Uniform(BanditAgent):
    """A uniformly random arm every round (the normaliser of Showdown's regret tables)."""

    def act(self, contexts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(self.num_arms, size=len(contexts))
