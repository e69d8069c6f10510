"""The bandit job a :class:`steinrl.Trainer` steps: one block of rounds per step.

The run's rounds are drawn once from the task (seeded), so the same seed gives every
agent the same contexts and rewards. A step plays the rounds up to the next refit —
each arm pulled ``protocol.initial_pulls`` times first, round-robin, as Showdown does —
then refits the agent on all rounds so far. Decisions between refits are one batched
call (or one call per round for agents whose posterior changes every round).

Scalars: ``bandit/cumulative_regret`` (exact: E[r | x, a*] − E[r | x, a] summed),
``bandit/cumulative_reward``, ``bandit/optimal_reward`` (the sampled rewards of the optimal
arms, Showdown's normaliser), ``bandit/normalized_reward``, ``bandit/action_entropy`` (of
the block's arm frequencies, nats), and the agent's ``train/...`` diagnostics.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np
import torch

from steinrl.bandits.agents import AGENTS, LIKELIHOOD_OPTIONS, BanditAgent, History
from steinrl.bandits.settings import BanditConfig, BanditPriorChoice, BanditPriorWeight, ProtocolSettings
from steinrl.bandits.tasks import BANDIT_TASKS, BanditData, BanditTask, TaskSettings, regret
from steinrl.core.couplings import COUPLINGS, check_embedding_states, check_repulsion_for
from steinrl.core.layers import LAYERS
from steinrl.core.methods import METHODS
from steinrl.core.priors import PRIORS
from steinrl.errors import ConfigError
from steinrl.job import Chosen
from steinrl.registry import Option, at_least_one, compose, options_of, settings_options, settings_values

__all__ = ["BanditJob", "PROTOCOL_OPTIONS"]

#: The ``protocol`` section's options (:class:`~steinrl.bandits.settings.ProtocolSettings`).
PROTOCOL_OPTIONS: tuple[Option, ...] = settings_options(ProtocolSettings)


def _entropy(arms: np.ndarray, k: int) -> float:
    p = np.bincount(arms, minlength=k) / max(len(arms), 1)
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


#: Rounds are drawn in blocks of this many, each from its own seeded stream, so the first n
#: rounds of a run do not depend on how many it has (a resume with more rounds continues the
#: same contexts and rewards).
STREAM_BLOCK = 1000


def draw_stream(task: BanditTask, rounds: int, seed: int) -> BanditData:
    """The ``rounds`` rounds of a run with ``seed``: whole blocks of :data:`STREAM_BLOCK`
    rounds (block b from ``default_rng([seed, 0xBA, b])``), cut to ``rounds``. A task that
    draws its rounds as one pass over its data (``one_pass``: classification without
    replacement) draws all ``rounds`` at once from ``default_rng([seed, 0xBA])`` (one
    permutation: its first n rounds do not depend on ``rounds`` either)."""
    if task.one_pass:
        return task.sample(rounds, np.random.default_rng([seed, 0xBA]))
    blocks = [task.sample(STREAM_BLOCK, np.random.default_rng([seed, 0xBA, b]))
              for b in range(math.ceil(rounds / STREAM_BLOCK))]
    return type(blocks[0])(**{f.name: np.concatenate([getattr(b, f.name) for b in blocks])[:rounds]
                              for f in dataclasses.fields(blocks[0])})


class BanditJob:
    """A contextual bandit played for ``rounds`` rounds by one agent.

    :param cfg: the resolved config of a bandit algorithm (``<method>-ts`` or a baseline).
    """

    headline_metric = "bandit/cumulative_regret"
    headline_mode = "min"  #: smaller regret is better
    x_metric = "bandit/rounds"  #: curves are drawn against the rounds played
    #: its scalars in words, for figure axes
    metric_labels = {"bandit/cumulative_regret": "cumulative regret", "bandit/cumulative_reward": "cumulative reward",
                     "bandit/normalized_reward": "reward / optimal reward"}
    options: tuple[Option, ...] = (
        Option("rounds", int, 2000, "Rounds to play (Showdown: 2000 contexts).", check=at_least_one),
        Option("particles", int, 20, "Number of particles M (Stein Thompson sampling).", check=at_least_one),
    )

    # --- the algorithms and their config ----------------------------------------------
    @staticmethod
    def algorithm_names() -> list[str]:
        return [f"{m}-ts" for m in METHODS] + [a for a in AGENTS if a != "ts"]

    @staticmethod
    def parse(name: str) -> tuple[str | None, str] | None:
        """``(method, agent)`` of an algorithm name, or None if it is not a bandit algorithm."""
        method, _, agent = name.rpartition("-")
        if agent == "ts" and method in METHODS:
            return method, "ts"
        return (None, name) if name in AGENTS and name != "ts" else None

    @staticmethod
    def check_env(name: str) -> None:
        BANDIT_TASKS.get(name)

    @staticmethod
    def check_config(cfg: BanditConfig) -> None:
        """The embedding's B shared inputs (a function-space kernel's, a spread controller's) are the
        first contexts of each refit minibatch: B <= ``protocol.minibatch``; no bandit controller (it
        scores training iterations, which Thompson sampling has not)."""
        if "update" not in cfg:  # a baseline: no particle method
            return
        held = cfg.protocol.minibatch
        check_embedding_states(cfg.update, held, f"a refit minibatch holds (protocol.minibatch {held})")
        check_repulsion_for(cfg.update, "Thompson sampling")

    @classmethod
    def load_policy(cls, cfg: BanditConfig, job_state: dict[str, Any], device: str) -> None:
        """None: a bandit run has no policy to act with; it is scored by the rounds it played
        (its logged metrics)."""
        return None

    @staticmethod
    def sections(method: str | None, agent: str, chosen: Chosen) -> dict[str, type]:
        """The typed sections of ``<method>-ts`` or a baseline: the task's, the protocol, the agent's
        own and, for a particle method, its layer, prior and coupling (the protocol sets the optimizer
        and its step size)."""
        task = BANDIT_TASKS.get(chosen.env).Settings if chosen.env in BANDIT_TASKS else TaskSettings
        sections: dict[str, type] = {"task": task, "protocol": ProtocolSettings}
        sections.update(AGENTS.get(agent).sections)
        if method is not None:
            m = METHODS.get(method)
            layer = LAYERS.get(m.layer).Settings
            sections["layer"] = compose(layer.__name__, layer, defaults=m.layer_defaults) if m.layer_defaults \
                else layer
            prior = PRIORS.get(chosen.prior or BanditPriorChoice().name).Settings
            # the S²VGD paper's bandit prior N(0, 1)
            variance = {"variance": 1.0} if "variance" in {o.name for o in settings_options(prior)} else {}
            sections["prior"] = compose("BanditPriorSection", BanditPriorChoice, prior, BanditPriorWeight,
                                        defaults=variance)
            sections["update"] = COUPLINGS.get(m.coupling).Settings
        return sections

    @classmethod
    def doc_sections(cls) -> list[tuple[str, str, tuple[Option, ...]]]:
        rows = [("", "bandits", cls.options), ("protocol", "", PROTOCOL_OPTIONS)]
        rows += [("task", name, options_of(task)) for name, task in BANDIT_TASKS.items()]
        rows += [(section, f"{name} agent", settings_options(settings)) for name, agent in AGENTS.items()
                 for section, settings in agent.sections.items() if section not in ("likelihood",)]
        rows += [("likelihood", "Stein ts agents (svgd-ts, s2vgd-ts, ...)", LIKELIHOOD_OPTIONS)]
        rows += [("likelihood", f"{name} agent", settings_options(agent.sections["likelihood"]))
                 for name, agent in AGENTS.items() if "likelihood" in agent.sections
                 and settings_options(agent.sections["likelihood"]) != LIKELIHOOD_OPTIONS]
        rows += [("layer, prior, update", "Stein ts agents",
                  "`layer` and `prior`: the keys of the RL job's sections above (the `<method>` of `<method>-ts` "
                  "picks the layer; here `prior.weight` is 1, a gaussian prior's `variance` 1); `update`: the "
                  "coupling's keys of the RL job's `update` section (`kernel`, `repulsion`, `attractive_norm`, "
                  "`kernel_precision`: the protocol sets the optimizer and its step size).")]
        return rows

    @staticmethod
    def progress_fields(scalars: dict[str, float]) -> dict[str, str]:
        return {"regret": f"{scalars['bandit/cumulative_regret']:.0f}",
                "reward": f"{scalars['bandit/cumulative_reward']:.0f}", "rounds": f"{scalars['bandit/rounds']:.0f}"}

    @staticmethod
    def summary(rows: list[dict[str, float]]) -> str:
        if not rows:
            return "no rounds played"
        last = rows[-1]
        return (f"cumulative reward {last['bandit/cumulative_reward']:.1f} of the optimal "
                f"{last['bandit/optimal_reward']:.1f} (normalised {last['bandit/normalized_reward']:.3f}), "
                f"regret {last['bandit/cumulative_regret']:.1f} after {last['bandit/rounds']:.0f} rounds")

    # --- running ------------------------------------------------------------------------
    @staticmethod
    def batch_config(cfg: BanditConfig, seeds: list[int]) -> BanditConfig:
        raise ConfigError(f"a bandit run plays one seed; run seeds {seeds} as a sweep")

    @staticmethod
    def batch_note(cfg: BanditConfig, seeds: list[int]) -> None:
        """Nothing to say: a bandit run plays one seed (:meth:`batch_config` refuses several)."""
        return None

    def __init__(self, cfg: BanditConfig, seeds: list[int] | None = None) -> None:
        if seeds is not None and list(seeds) != [cfg.seed]:
            raise ConfigError(f"a bandit run plays one seed ({cfg.seed}); run several seeds as a sweep, not {seeds}")
        self.cfg = cfg
        task = BANDIT_TASKS.get(cfg.env).from_options(**settings_values(cfg.task))
        self.stream = draw_stream(task, cfg.rounds, cfg.seed)
        self.num_arms, self.context_dim = self.stream.num_arms, self.stream.contexts.shape[1]
        method, agent = self.parse(cfg.algo)
        self.agent: BanditAgent = AGENTS.get(agent)(cfg, self.num_arms, self.context_dim)
        self.arms = np.zeros(cfg.rounds, dtype=np.int64)
        self.observed = np.zeros(cfg.rounds, dtype=np.float64)
        self.totals = {"reward": 0.0, "regret": 0.0, "optimal": 0.0}
        self.played = 0

    @property
    def num_steps(self) -> int:
        return math.ceil(self.cfg.rounds / self.cfg.protocol.refit_every)

    def done(self, iteration: int) -> bool:
        """All rounds played after ``iteration`` refit blocks."""
        return iteration >= self.num_steps

    def history(self) -> History:
        n = self.played
        return History(self.stream.contexts[:n], self.arms[:n], self.observed[:n])

    def _play(self, t0: int, t1: int, rng: np.random.Generator) -> np.ndarray:
        """Arms of rounds ``t0 .. t1 - 1``; the agent observes each as it goes (or the block)."""
        k, contexts = self.num_arms, self.stream.contexts
        forced = k * self.cfg.protocol.initial_pulls
        rounds = np.arange(t0, t1)
        if not self.agent.per_round:
            arms = self.agent.act(contexts[t0:t1], rng)
            arms = np.where(rounds < forced, rounds % k, arms)
            self.agent.observe(contexts[t0:t1], arms, self.stream.rewards[rounds, arms])
            return arms
        arms = np.empty(t1 - t0, dtype=np.int64)
        for i, t in enumerate(rounds):
            arms[i] = t % k if t < forced else self.agent.act(contexts[t:t + 1], rng)[0]
            self.agent.observe(contexts[t:t + 1], arms[i:i + 1], self.stream.rewards[t:t + 1, arms[i]])
        return arms

    def step(self, iteration: int, hooks: Any = None) -> list[dict[str, float]]:
        """Play the rounds of block ``iteration`` and refit the agent on all rounds so far (one seed's scalars)."""
        start = time.perf_counter()
        t0, t1 = self.played, min(self.played + self.cfg.protocol.refit_every, self.cfg.rounds)
        rng = np.random.default_rng([self.cfg.seed, iteration])
        arms = self._play(t0, t1, rng)
        rounds = np.arange(t0, t1)
        self.arms[t0:t1], self.observed[t0:t1] = arms, self.stream.rewards[rounds, arms]
        self.played = t1
        expected = self.stream.expected_rewards[t0:t1]
        self.totals["reward"] += float(self.observed[t0:t1].sum())
        self.totals["regret"] += float(regret(expected, arms).sum())
        self.totals["optimal"] += float(self.stream.rewards[rounds, expected.argmax(1)].sum())
        diagnostics = self.agent.refit(self.history(), iteration)
        scalars = {
            "bandit/cumulative_regret": self.totals["regret"], "bandit/cumulative_reward": self.totals["reward"],
            "bandit/optimal_reward": self.totals["optimal"],
            "bandit/normalized_reward": self.totals["reward"] / self.totals["optimal"] if self.totals["optimal"]
            else float("nan"),
            "bandit/action_entropy": _entropy(arms, self.num_arms), "bandit/rounds": float(t1),
            "time/iteration_seconds": time.perf_counter() - start,
        }
        scalars.update({f"train/{k}": v for k, v in diagnostics.items()})
        return [scalars]

    def state_dict(self, seed_index: int = 0) -> dict[str, Any]:
        return {"played": self.played, "arms": torch.from_numpy(self.arms[:self.played].copy()),
                "totals": dict(self.totals), "agent": self.agent.state_dict()}

    def load_state_dict(self, states: list[dict[str, Any]] | dict[str, Any]) -> None:
        (state,) = [states] if isinstance(states, dict) else states
        n = int(state["played"])
        self.arms[:n] = state["arms"].numpy()
        self.observed[:n] = self.stream.rewards[np.arange(n), self.arms[:n]]
        self.played, self.totals = n, {k: float(v) for k, v in state["totals"].items()}
        self.agent.load_state_dict(state["agent"], self.history())

    def close(self) -> None:
        pass
