"""The UCI Mushroom bandit (Showdown; Blundell et al. 2015), read from the package data."""

from __future__ import annotations

import csv
import functools
import importlib.resources
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from steinrl.bandits.tasks.base import BANDIT_TASKS, BanditData, BanditTask, TaskSettings
from steinrl.registry import setting, settings_options

__all__ = ["Mushroom"]


@functools.lru_cache(maxsize=1)
def _mushroom_table() -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """The UCI Mushroom file as ``(one_hot (8124, 117) float32, edible (8124,) bool, feature names)``.

    Each of the 22 categorical columns becomes one indicator per value seen in the file, the
    values in sorted order (as Showdown's ``pd.get_dummies``): veil-type's single value and
    stalk-root's missing marker ``?`` are kept as their own indicators.
    """
    source = importlib.resources.files("steinrl.bandits") / "data" / "mushroom.csv"
    with source.open("r", newline="") as file:
        header, *rows = list(csv.reader(file))
    table = np.array(rows, dtype=str)  # 8124 23
    blocks, names = [], []
    for column, feature in enumerate(header[1:], start=1):
        values, codes = np.unique(table[:, column], return_inverse=True)
        blocks.append(np.eye(len(values), dtype=np.float32)[codes])
        names += [f"{feature}={value}" for value in values]
    one_hot, edible = np.concatenate(blocks, axis=1), table[:, 0] == "e"
    one_hot.setflags(write=False)
    edible.setflags(write=False)
    return one_hot, edible, tuple(names)


@dataclass(frozen=True)
class MushroomSettings(TaskSettings):
    """The ``task`` section of the mushroom bandit."""

    variant: str = setting(
        "showdown", "Penalty for eating a poisonous mushroom (w.p. 1/2): showdown -35, s2vgd -10.",
        choices=("showdown", "s2vgd"))


@BANDIT_TASKS.register("Mushroom")
class Mushroom(BanditTask):
    """Mushroom: eat or leave a mushroom described by 22 categorical features (UCI, 8124 rows).

    Context: the one-hot encoding of the 22 features, 117 indicators (:attr:`feature_names`),
    exactly one 1 per feature. Arms, in Showdown's order: 0 = don't eat (reward 0), 1 = eat
    (:attr:`NO_EAT`, :attr:`EAT`). Eating an edible mushroom gives +5; eating a poisonous one
    gives +5 or the ``variant``'s penalty with probability 1/2 each. Rows are drawn uniformly
    with replacement, so edible : poisonous ≈ 4208 : 3916.
    """

    name = "Mushroom"
    NO_EAT: ClassVar[int] = 0
    EAT: ClassVar[int] = 1
    context_bounds = (0.0, 1.0)
    REWARD_EDIBLE: ClassVar[float] = 5.0
    REWARD_UNHARMED: ClassVar[float] = 5.0
    PROB_HARMED: ClassVar[float] = 0.5
    #: Reward for eating a poisonous mushroom and being harmed, per variant.
    #: the penalty of each ``variant`` (its choices)
    PENALTIES: ClassVar[dict[str, float]] = {"showdown": -35.0, "s2vgd": -10.0}
    Settings = MushroomSettings
    options = settings_options(Settings)

    def __init__(self, variant: str = "showdown") -> None:
        self.variant = variant
        self.check_options(vars(self))
        self.penalty = self.PENALTIES[variant]
        one_hot, _, self.feature_names = _mushroom_table()
        self.num_arms, self.context_dim = 2, one_hot.shape[1]

    def sample(self, n: int, rng: np.random.Generator) -> BanditData:
        one_hot, edible_rows, _ = _mushroom_table()
        rows = rng.integers(0, len(one_hot), size=n)
        harmed = rng.random(n) < self.PROB_HARMED
        edible = edible_rows[rows]
        poison_reward = np.where(harmed, self.penalty, self.REWARD_UNHARMED)
        poison_mean = self.PROB_HARMED * self.penalty + (1 - self.PROB_HARMED) * self.REWARD_UNHARMED
        eat_reward = np.where(edible, self.REWARD_EDIBLE, poison_reward)
        eat_mean = np.where(edible, self.REWARD_EDIBLE, poison_mean)
        no_eat = np.zeros(n)
        return BanditData(contexts=one_hot[rows], expected_rewards=np.stack([no_eat, eat_mean], axis=1),
                          rewards=np.stack([no_eat, eat_reward], axis=1))
