"""Any classification data set as a bandit (Showdown's Statlog, Adult, Covertype, Census are this)."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass

import numpy as np

from steinrl.bandits.tasks.base import BANDIT_TASKS, BanditData, BanditTask, TaskSettings
from steinrl.errors import ConfigError
from steinrl.registry import setting, settings_options

__all__ = ["Classification"]


def _parses_as_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _read_rows(path: str) -> tuple[list[int], list[list[str]]]:
    """The non-blank rows of a CSV file and their line numbers; a missing, wrong-kind,
    unreadable, non-text or empty file raises :class:`ConfigError`."""
    if not os.path.exists(path):
        raise ConfigError(f"cannot read classification data {path!r}: no such file (task.path takes a CSV file)")
    if os.path.isdir(path):
        raise ConfigError(f"classification data {path!r} is a directory; task.path takes a CSV file")
    try:
        with open(path, newline="", encoding="utf-8") as file:
            reader = csv.reader(file)
            numbered = [(reader.line_num, row) for row in reader if any(field.strip() for field in row)]
    except UnicodeDecodeError as error:
        raise ConfigError(f"classification data {path!r} is not UTF-8 text ({error.reason} at byte {error.start}); "
                          "task.path takes a CSV file") from None
    except (OSError, csv.Error) as error:
        raise ConfigError(f"cannot read classification data {path!r}: {error}") from None
    if not numbered:
        raise ConfigError(f"classification data {path!r} is empty")
    return [line for line, _ in numbered], [row for _, row in numbered]


def _read_classification_csv(path: str, target_column: int | str) -> tuple[np.ndarray, np.ndarray]:
    """``(features (N, d) float64, labels (N,))`` from a CSV file; bad files raise :class:`ConfigError`
    naming the file, and for a bad value its line and column.

    The first row is a header when one of its feature fields is not a number, or when its
    class is not a number while all the other classes are.
    """
    lines, rows = _read_rows(path)
    width = len(rows[0])
    ragged = next((i for i, row in enumerate(rows) if len(row) != width), None)
    if ragged is not None:
        raise ConfigError(f"{path}: line {lines[ragged]} has {len(rows[ragged])} fields, line {lines[0]} has {width}")
    if width < 2:
        raise ConfigError(f"{path}: needs at least one feature column and a class column")
    table = np.char.strip(np.array(rows, dtype=str))
    if isinstance(target_column, str):
        names = [str(name) for name in table[0]]
        if target_column not in names:
            raise ConfigError(f"{path}: no column named {target_column!r}; the first row is {names}")
        target, header = names.index(target_column), True
    else:
        if not -width <= target_column < width:
            raise ConfigError(f"{path}: target_column {target_column} is out of range for {width} columns")
        target = target_column % width
        feature_fields = np.delete(table[0], target)
        other_classes_numeric = all(_parses_as_float(value) for value in table[1:, target])
        header = (not all(_parses_as_float(value) for value in feature_fields)
                  or (other_classes_numeric and len(table) > 1 and not _parses_as_float(table[0, target])))
    names = [str(name) for name in table[0]] if header else [f"column {j}" for j in range(width)]
    body, body_lines = (table[1:], lines[1:]) if header else (table, lines)
    if len(body) == 0:
        raise ConfigError(f"{path}: no data rows")
    features = np.empty((len(body), width - 1))
    for slot, column in enumerate(j for j in range(width) if j != target):
        try:
            features[:, slot] = body[:, column].astype(np.float64)
        except ValueError:
            row = next(i for i, value in enumerate(body[:, column]) if not _parses_as_float(value))
            raise ConfigError(f"{path}: line {body_lines[row]}, feature column {names[column]!r} is not numeric "
                              f"({str(body[row, column])!r}); encode categories and fill missing values first"
                              ) from None
        bad = np.flatnonzero(~np.isfinite(features[:, slot]))
        if len(bad):
            raise ConfigError(f"{path}: line {body_lines[bad[0]]}, feature column {names[column]!r} holds "
                              f"{str(body[bad[0], column])!r}, not a finite number ({len(bad)} such rows); "
                              "fill missing values first")
    labels = body[:, target]
    missing = next((i for i, value in enumerate(labels) if value == "" or value.lower() in ("nan", "na", "?")), None)
    if missing is not None:
        raise ConfigError(f"{path}: line {body_lines[missing]}, class column {names[target]!r} holds "
                          f"{str(labels[missing])!r}, a missing class")
    return features, labels


@dataclass(frozen=True)
class ClassificationSettings(TaskSettings):
    """The ``task`` section of a classification data set as a bandit."""

    path: str | None = setting(
        None, "CSV file: numeric feature columns and a class column, header optional.",
        kind=(str, None))
    target_column: int | str = setting(
        -1, "Class column: an index (negative: from the end) or a header name.",
        kind=(int, str))
    replace: bool = setting(True, "Draw rows with replacement (false: one shuffled pass, as Showdown).")


@BANDIT_TASKS.register("Classification")
class Classification(BanditTask):
    """A classification data set as a bandit: arm = predicted class, reward 1 if right, else 0.

    Reward is deterministic, so ``expected_rewards == rewards`` = the one-hot of the true class.
    Features are standardised over the whole data set (a constant column is only centred).
    Arms follow the sorted class values (numeric order when all classes are numbers).

    :param features: ``(N, d)`` numeric features.
    :param labels: ``(N,)`` class of each row (any values; at least two distinct).
        Build from a CSV file with :meth:`from_csv` (what ``make_task("Classification", path=...)`` does).
    :param replace: draw rows with replacement; ``False`` draws a random permutation (at most
        one pass over the data, Showdown's shuffle-and-take).
    """

    name = "Classification"
    Settings = ClassificationSettings
    options = settings_options(Settings)

    def __init__(self, features: np.ndarray, labels: np.ndarray, *, replace: bool = True) -> None:
        features = np.asarray(features, dtype=np.float64)
        labels = np.asarray(labels)
        if features.ndim != 2 or labels.shape != (len(features),):
            raise ConfigError(f"classification needs features (N, d) and labels (N,), got {features.shape} and "
                              f"{labels.shape}")
        if labels.dtype.kind in "US" and all(_parses_as_float(value) for value in labels):
            labels = labels.astype(np.float64)
        self.classes, self.labels = np.unique(labels, return_inverse=True)
        if len(self.classes) < 2:
            raise ConfigError(f"classification needs at least two classes, got {list(self.classes)}")
        scale = features.std(axis=0)
        scale[scale == 0] = 1.0
        self.standardised_features = ((features - features.mean(axis=0)) / scale).astype(np.float32)  # N d
        self.path, self.target_column, self.replace = None, -1, replace
        self.one_pass = not replace
        self.num_arms, self.context_dim = len(self.classes), features.shape[1]

    @classmethod
    def from_csv(cls, path: str, target_column: int | str = -1, replace: bool = True) -> Classification:
        """Read a CSV file: one row per example, numeric features, the class in ``target_column``.

        The first row is taken as a header when one of its feature fields is not a number, or when
        its class is not a number while all other classes are. A missing or unreadable file, ragged
        rows, or a non-numeric / missing feature value raise :class:`ConfigError`.
        """
        task = cls(*_read_classification_csv(str(path), target_column), replace=replace)
        task.path, task.target_column = str(path), target_column
        return task

    @classmethod
    def from_options(cls, path: str | None = None, target_column: int | str = -1,
                     replace: bool = True) -> Classification:
        cls.check_options({"path": path, "target_column": target_column, "replace": replace})
        if path is None:
            raise ConfigError("bandit task Classification needs task.path: a CSV file of features and classes")
        return cls.from_csv(path, target_column=target_column, replace=replace)

    def sample(self, n: int, rng: np.random.Generator) -> BanditData:
        num_rows = len(self.standardised_features)
        if self.replace:
            rows = rng.integers(0, num_rows, size=n)
        elif n <= num_rows:
            rows = rng.permutation(num_rows)[:n]
        else:
            raise ConfigError(f"classification without replacement has only {num_rows} rows, asked for {n}")
        expected_rewards = np.eye(self.num_arms)[self.labels[rows]]
        return BanditData(contexts=self.standardised_features[rows], expected_rewards=expected_rewards,
                          rewards=expected_rewards.copy())
