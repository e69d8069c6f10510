"""Thompson sampling with the seeds' variational posteriors (``steinrl.bayes``).

``bbb-ts``, ``badam-ts``, ``kflow-ts`` and ``rdp-ts``: each round one weight set is drawn
from the posterior q and its greedy arm is played (a block of rounds draws its weight
sets in one batched call). Every refit takes ``protocol.refit_steps`` minibatch steps on
the negative ELBO with the minibatch scaled by N / B, the Gaussian likelihood on the
pulled arm only, with q's own optimizer (Adam; BADAM's for ``badam``) at
``protocol.lr / (1 + protocol.lr_decay · t)`` and gradients clipped to
``protocol.max_grad_norm`` (the BADAM paper's bandit setup: 2 x 100 ReLU, lr 0.1 with
inverse decay, clipping at 5).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from steinrl.bandits.agents.base import AGENTS, BanditAgent, History
from steinrl.bandits.settings import BanditConfig, ModelSettings, NoiseSettings
from steinrl.bayes import POSTERIORS, VariationalPosterior, gaussian_log_likelihood, make_posterior
from steinrl.core.ensemble import mlp_forward
from steinrl.core.optim import gradient_step, inverse_time_lr
from steinrl.registry import compose, settings_values

__all__ = ["VariationalThompsonSampling"]

#: the BADAM paper's bandit network: two hidden layers of 100 ReLU units
_MODEL = compose("VariationalModelSettings", ModelSettings, defaults={"hidden": [100, 100]})


class VariationalThompsonSampling(BanditAgent):
    """Thompson sampling from a variational posterior over the reward network's weights."""

    posterior_name: str = ""

    def __init__(self, cfg: BanditConfig, num_arms: int, context_dim: int) -> None:
        super().__init__(cfg, num_arms, context_dim)
        generator = torch.Generator().manual_seed(cfg.seed)
        self.q = make_posterior(self.posterior_name, context_dim, cfg.model.hidden, num_arms, cfg.model.activation,
                                generator=generator, **settings_values(cfg.posterior))
        self.optimizer = self.q.make_optimizer(cfg.protocol.lr)
        self.steps_taken = 0

    @torch.no_grad()
    def act(self, contexts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
        dense = self.q.sample(len(contexts), generator)  # one weight set per round
        x = torch.from_numpy(np.ascontiguousarray(contexts, dtype=np.float32)).unsqueeze(1)  # B 1 d
        return mlp_forward(dense, x, self.q.activation)[:, 0].argmax(1).numpy()

    def refit(self, history: History, step: int) -> dict[str, float]:
        protocol = self.cfg.protocol
        rng = np.random.default_rng([self.cfg.seed, step, 23])
        generator = torch.Generator().manual_seed(int(rng.integers(2**31)))
        contexts, n = torch.from_numpy(history.contexts), len(history)
        onehot = torch.nn.functional.one_hot(torch.from_numpy(history.arms), self.num_arms).float()  # n k
        targets = onehot * torch.from_numpy(history.rewards).float().unsqueeze(1)  # the reward at the pulled arm
        loss = torch.zeros(())
        for _ in range(protocol.refit_steps):
            idx = torch.from_numpy(rng.integers(n, size=protocol.minibatch))
            log_lik = functools.partial(gaussian_log_likelihood,
                                        noise_precision=1.0 / self.cfg.likelihood.noise_variance, mask=onehot[idx])
            loss = self.q.elbo_loss(contexts[idx], targets[idx], log_lik, n_data=n, generator=generator)
            gradient_step(loss, [self.optimizer], lr=inverse_time_lr(protocol.lr, protocol.lr_decay, self.steps_taken),
                          max_grad_norm=protocol.max_grad_norm)
            self.steps_taken += 1
        return {"neg_elbo": float(loss.detach()), "lr": self.optimizer.param_groups[0]["lr"]}

    def state_dict(self) -> dict[str, Any]:
        return {"q": self.q.state_dict(), "optimizer": self.optimizer.state_dict(), "steps_taken": self.steps_taken}

    def load_state_dict(self, state: dict[str, Any], history: History) -> None:
        self.q.load_state_dict(state["q"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps_taken = int(state["steps_taken"])


def _posterior_settings(posterior: type[VariationalPosterior]) -> type:
    """The posterior's settings, with its ``online_defaults`` (the bandit setting's) as defaults."""
    online = posterior.online_defaults
    return compose(posterior.Settings.__name__, posterior.Settings, defaults=online) if online else posterior.Settings


for _name, _posterior in POSTERIORS.items():  # bbb-ts, badam-ts, kflow-ts, rdp-ts
    AGENTS.register(f"{_name}-ts", type(f"{_posterior.__name__}TS", (VariationalThompsonSampling,), {
        "posterior_name": _name, "__module__": __name__,
        "__doc__": f"Thompson sampling from the {_name} posterior (:class:`steinrl.bayes.{_posterior.__name__}`).",
        "sections": {"model": _MODEL, "posterior": _posterior_settings(_posterior), "likelihood": NoiseSettings}}))
