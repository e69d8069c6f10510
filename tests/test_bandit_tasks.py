"""Bandit tasks checked against references built here: the raw Mushroom file, the wheel's geometry,
least squares on the linear tasks, scikit-learn's bundled data sets, Gymnasium's env checker."""

import csv
import importlib.resources
import inspect

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from sklearn.datasets import load_iris, load_wine

from steinrl.bandits import BANDIT_TASKS, BanditData, BanditEnv, make_task, regret
from steinrl.bandits.tasks import Classification, Linear, Mushroom, SparseLinear, Wheel
from steinrl.errors import ConfigError
from steinrl.registry import options_of

SYNTHETIC_AND_MUSHROOM = ["Mushroom", "Wheel", "Linear", "SparseLinear"]


def optimal_arms(data: BanditData) -> np.ndarray:
    """``(n,)`` argmax_a E[r | x_t, a] (the lowest index on ties)."""
    return data.expected_rewards.argmax(axis=1)


def optimal_rewards(data: BanditData) -> np.ndarray:
    """``(n,)`` max_a E[r | x_t, a]: the optimal policy's expected reward."""
    return data.expected_rewards.max(axis=1)


def within_standard_errors(samples: np.ndarray, expected: float, how_many: float = 4.0) -> bool:
    standard_error = samples.std(ddof=1) / np.sqrt(len(samples))
    return abs(samples.mean() - expected) <= how_many * max(standard_error, 1e-12)


# --------------------------------------------------------------------------- data and regret


def test_regret_by_hand():
    expected = np.array([[1.0, 2.0, 3.0], [5.0, 0.0, 0.5]])
    np.testing.assert_array_equal(regret(expected, np.array([0, 1])), [2.0, 5.0])
    np.testing.assert_array_equal(regret(expected, np.array([2, 0])), [0.0, 0.0])


@pytest.mark.parametrize("name", SYNTHETIC_AND_MUSHROOM)
def test_regret_of_optimal_arms_is_zero_and_of_worst_arms_is_the_gap(name):
    data = make_task(name).sample(500, np.random.default_rng(1))
    assert np.all(regret(data.expected_rewards, optimal_arms(data)) == 0.0)
    worst = data.expected_rewards.argmin(axis=1)
    gap = data.expected_rewards.max(axis=1) - data.expected_rewards.min(axis=1)
    np.testing.assert_allclose(regret(data.expected_rewards, worst), gap)
    np.testing.assert_array_equal(optimal_rewards(data),
                                  data.expected_rewards[np.arange(len(data)), optimal_arms(data)])


@pytest.mark.parametrize("name", SYNTHETIC_AND_MUSHROOM)
def test_shapes_dtypes_and_seeding(name):
    task = make_task(name)
    first = task.sample(300, np.random.default_rng(7))
    again = task.sample(300, np.random.default_rng(7))
    other = task.sample(300, np.random.default_rng(8))
    assert first.contexts.shape == (300, task.context_dim) and first.contexts.dtype == np.float32
    assert first.expected_rewards.shape == first.rewards.shape == (300, task.num_arms)
    assert first.expected_rewards.dtype == first.rewards.dtype == np.float64
    for field in ("contexts", "expected_rewards", "rewards"):
        np.testing.assert_array_equal(getattr(first, field), getattr(again, field))
    assert not np.array_equal(first.contexts, other.contexts)
    assert not np.array_equal(first.rewards, other.rewards)


def test_bandit_data_rejects_inconsistent_shapes():
    with pytest.raises(ValueError):
        BanditData(np.zeros((3, 2), np.float32), np.zeros((3, 4)), np.zeros((2, 4)))


# --------------------------------------------------------------------------- options and registry


def test_registry_names_and_option_defaults_match_constructors():
    assert set(BANDIT_TASKS.names()) == {"Mushroom", "Wheel", "Linear", "SparseLinear", "Classification"}
    for name in SYNTHETIC_AND_MUSHROOM:
        cls = BANDIT_TASKS.get(name)
        parameters = inspect.signature(cls.__init__).parameters
        for option in options_of(cls):
            assert parameters[option.name].default == option.default, (name, option.name)
            assert getattr(cls(), option.name) == option.default


def test_make_task_rejects_unknown_names_and_bad_values():
    with pytest.raises(ConfigError, match="delta"):
        make_task("Wheel", radius=0.5)
    with pytest.raises(ConfigError, match="registered"):
        make_task("Wheels")
    with pytest.raises(ConfigError, match="delta"):
        make_task("Wheel", delta=1.0)
    with pytest.raises(ConfigError, match="showdown"):
        make_task("Mushroom", variant="poison")
    with pytest.raises(ConfigError, match="dim must be int"):
        make_task("Linear", dim="10")
    with pytest.raises(ConfigError, match="nonzero"):
        make_task("SparseLinear", dim=4, nonzero=5)
    with pytest.raises(ConfigError, match="path"):
        make_task("Classification")
    with pytest.raises(ConfigError, match="target_column must be int or str"):
        make_task("Classification", path="data.csv", target_column=1.5)


# --------------------------------------------------------------------------- Mushroom


def mushroom_reference() -> dict[bytes, bool]:
    """One-hot rows built here from the raw file (each column's values sorted, as pandas' get_dummies)
    -> whether the mushroom is edible."""
    source = importlib.resources.files("steinrl.bandits") / "data" / "mushroom.csv"
    with source.open("r", newline="") as file:
        rows = list(csv.reader(file))[1:]
    columns = list(zip(*rows))
    encodings = [{value: i for i, value in enumerate(sorted(set(column)))} for column in columns[1:]]
    reference = {}
    for row in rows:
        parts = []
        for value, encoding in zip(row[1:], encodings):
            block = np.zeros(len(encoding), np.float32)
            block[encoding[value]] = 1.0
            parts.append(block)
        reference[np.concatenate(parts).tobytes()] = row[0] == "e"
    assert len(rows) == 8124 and sum(reference.values()) == 4208
    return reference


@pytest.fixture(scope="module")
def mushroom_edible() -> dict[bytes, bool]:
    return mushroom_reference()


def test_mushroom_context_is_one_hot_of_22_features():
    task = Mushroom()
    assert (task.num_arms, task.context_dim) == (2, 117) and len(task.feature_names) == 117
    contexts = task.sample(2000, np.random.default_rng(0)).contexts
    assert set(np.unique(contexts)) == {0.0, 1.0}
    features = [name.split("=")[0] for name in task.feature_names]
    assert len(set(features)) == 22
    for feature in set(features):
        block = [j for j, name in enumerate(features) if name == feature]
        np.testing.assert_array_equal(contexts[:, block].sum(axis=1), 1.0)


@pytest.mark.parametrize("variant, penalty", [("showdown", -35.0), ("s2vgd", -10.0)])
def test_mushroom_rewards_against_the_raw_file(variant, penalty, mushroom_edible):
    data = make_task("Mushroom", variant=variant).sample(20000, np.random.default_rng(3))
    edible = np.array([mushroom_edible[row.tobytes()] for row in data.contexts])
    # class balance under sampling with replacement: 4208 / 8124 edible
    assert within_standard_errors(edible.astype(float), 4208 / 8124)
    no_eat, eat = Mushroom.NO_EAT, Mushroom.EAT
    assert np.all(data.rewards[:, no_eat] == 0.0) and np.all(data.expected_rewards[:, no_eat] == 0.0)
    assert np.all(data.rewards[edible, eat] == 5.0) and np.all(data.expected_rewards[edible, eat] == 5.0)
    poisonous_eat = data.rewards[~edible, eat]
    assert set(np.unique(poisonous_eat)) == {penalty, 5.0}
    poison_mean = 0.5 * penalty + 0.5 * 5.0
    assert np.all(data.expected_rewards[~edible, eat] == poison_mean)
    assert within_standard_errors(poisonous_eat, poison_mean)
    np.testing.assert_array_equal(optimal_arms(data), np.where(edible, eat, no_eat))


# --------------------------------------------------------------------------- Wheel


@pytest.mark.parametrize("delta", [0.5, 0.9])
def test_wheel_geometry_and_optimal_arms(delta):
    data = Wheel(delta).sample(20000, np.random.default_rng(4))
    x1, x2 = data.contexts.astype(np.float64).T
    norm = np.hypot(x1, x2)
    assert norm.max() <= 1.0
    # uniform in the disc: P(‖x‖ ≤ r) = r², E‖x‖² = 1/2, every quadrant 1/4
    assert within_standard_errors((norm <= delta).astype(float), delta**2)
    assert within_standard_errors(norm**2, 0.5)
    assert within_standard_errors(((x1 > 0) & (x2 > 0)).astype(float), 0.25)
    quadrant = np.select([(x1 > 0) & (x2 > 0), (x1 > 0) & (x2 <= 0), (x1 <= 0) & (x2 > 0)], [0, 1, 2], 3)
    np.testing.assert_array_equal(optimal_arms(data), np.where(norm > delta, quadrant, 4))
    np.testing.assert_array_equal(optimal_rewards(data), np.where(norm > delta, 50.0, 1.2))


def test_wheel_expected_rewards_match_sampled_averages():
    data = Wheel(0.7).sample(20000, np.random.default_rng(5))
    noise = data.rewards - data.expected_rewards
    for arm in range(5):
        assert within_standard_errors(noise[:, arm], 0.0)
        assert abs(noise[:, arm].std() - 0.01) < 0.0005
    outer = data.expected_rewards.max(axis=1) == 50.0
    assert within_standard_errors(data.rewards[outer].max(axis=1), 50.0)
    assert within_standard_errors(data.rewards[~outer, 4], 1.2)
    assert within_standard_errors(data.rewards[~outer, :4].ravel(), 1.0)


# --------------------------------------------------------------------------- linear


@pytest.mark.parametrize("task", [Linear(), Linear(dim=5, arms=3, noise_std=0.5, seed=2), SparseLinear()])
def test_linear_rewards_are_linear_with_unit_norm_parameters(task):
    data = task.sample(4000, np.random.default_rng(6))
    contexts = data.contexts.astype(np.float64)
    coefficients, *_ = np.linalg.lstsq(contexts, data.expected_rewards, rcond=None)  # d k
    np.testing.assert_allclose(contexts @ coefficients, data.expected_rewards, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(coefficients, axis=0), 1.0, atol=1e-9)
    assert np.abs(coefficients).max() <= 1.0 + 1e-9
    if isinstance(task, SparseLinear):
        np.testing.assert_array_equal((np.abs(coefficients) > 1e-9).sum(axis=0), 3)
    noise = data.rewards - data.expected_rewards
    stds = np.full(task.num_arms, task.noise_std) if task.noise_std else 0.01 * np.arange(1, task.num_arms + 1)
    np.testing.assert_allclose(noise.std(axis=0), stds, rtol=0.05)
    assert all(within_standard_errors(noise[:, arm], 0.0) for arm in range(task.num_arms))
    assert abs(contexts.mean()) < 0.05 and abs(contexts.std() - 1.0) < 0.05


def test_linear_task_is_fixed_by_its_seed():
    np.testing.assert_array_equal(Linear(seed=3).betas, Linear(seed=3).betas)
    assert not np.array_equal(Linear(seed=3).betas, Linear(seed=4).betas)
    assert Linear().betas.shape == (8, 10) and SparseLinear().betas.shape == (7, 10)


# --------------------------------------------------------------------------- classification


def write_csv(path, header, rows):
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        if header:
            writer.writerow(header)
        writer.writerows(rows)


def test_classification_expected_rewards_are_the_true_class():
    features, labels = load_wine(return_X_y=True)
    task = Classification(features, labels)
    assert (task.num_arms, task.context_dim) == (3, 13)
    data = task.sample(500, np.random.default_rng(0))
    standardised = (features - features.mean(0)) / features.std(0)
    nearest = np.abs(data.contexts[:, None, :] - standardised[None]).sum(-1).argmin(1)  # wine has no duplicate rows
    np.testing.assert_allclose(data.contexts, standardised[nearest], atol=1e-5)
    np.testing.assert_array_equal(data.expected_rewards, np.eye(3)[labels[nearest]])
    np.testing.assert_array_equal(data.rewards, data.expected_rewards)
    assert np.all(regret(data.expected_rewards, labels[nearest]) == 0)


def test_classification_from_csv_equals_from_arrays(tmp_path):
    features, labels = load_iris(return_X_y=True)
    from_arrays = Classification(features, labels).sample(400, np.random.default_rng(2))
    numbers = [[repr(float(v)) for v in row] for row in features]
    plain = tmp_path / "iris.csv"
    write_csv(plain, None, [row + [str(label)] for row, label in zip(numbers, labels)])
    named = tmp_path / "iris_named.csv"
    names = np.array(["setosa", "versicolor", "virginica"])  # sorted like the integer classes
    write_csv(named, ["species", "a", "b", "c", "d"], [[name] + row for name, row in zip(names[labels], numbers)])
    for task in (make_task("Classification", path=str(plain)),
                 make_task("Classification", path=str(named), target_column="species"),
                 Classification.from_csv(named, target_column=0)):
        data = task.sample(400, np.random.default_rng(2))
        np.testing.assert_array_equal(data.contexts, from_arrays.contexts)
        np.testing.assert_array_equal(data.expected_rewards, from_arrays.expected_rewards)


def test_classification_without_replacement_is_one_pass():
    features, labels = load_iris(return_X_y=True)
    task = Classification(features, labels, replace=False)
    data = task.sample(150, np.random.default_rng(0))
    assert len(np.unique(data.contexts, axis=0)) == len(np.unique(features, axis=0))
    with pytest.raises(ConfigError, match="150 rows"):
        task.sample(151, np.random.default_rng(0))


@pytest.mark.parametrize("header, rows, target, message", [
    (["a", "b", "y"], [["1", "red", "0"], ["2", "blue", "1"]], -1, "'b' is not numeric"),
    (["a", "y"], [["1", "0"], ["", "1"]], -1, "'a' is not numeric"),
    (["a", "y"], [["1", "0"], ["2"]], -1, "line 3 has 1 fields"),
    (["a", "y"], [["1", "0"], ["2", "1"]], "label", "no column named 'label'"),
    (["a", "y"], [["1", "0"], ["2", "1"]], 5, "out of range"),
    (["a", "y"], [["1", "0"], ["2", "0"]], -1, "at least two classes"),
    (["a", "y"], [], -1, "no data rows"),
    (None, [], -1, "empty"),
])
def test_classification_bad_csv_raises_config_error(tmp_path, header, rows, target, message):
    path = tmp_path / "bad.csv"
    write_csv(path, header, rows)
    with pytest.raises(ConfigError, match=message):
        make_task("Classification", path=str(path), target_column=target)


def test_classification_missing_file_raises_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        make_task("Classification", path=str(tmp_path / "absent.csv"))


# --------------------------------------------------------------------------- Gymnasium


@pytest.mark.filterwarnings("ignore:.*infinity:UserWarning")  # linear contexts are unbounded
@pytest.mark.parametrize("name", [*SYNTHETIC_AND_MUSHROOM, "Classification"])
def test_bandit_env_passes_check_env(name):
    task = Classification(*load_iris(return_X_y=True)) if name == "Classification" else make_task(name)
    check_env(BanditEnv(task, horizon=20), skip_render_check=True)


def test_bandit_env_rounds_rewards_and_truncation():
    env = BanditEnv(Wheel(0.5), horizon=3)
    context, info = env.reset(seed=11)
    replay_context, _ = env.reset(seed=11)
    np.testing.assert_array_equal(context, replay_context)
    assert env.observation_space.contains(context) and info["optimal_arm"] == info["expected_rewards"].argmax()
    np.testing.assert_array_equal(env.expected_rewards, info["expected_rewards"])
    truncations = []
    for step in range(3):
        expected = env.expected_rewards
        arm = step % 5
        context, reward, terminated, truncated, info = env.step(arm)
        assert not terminated and info["regret"] == expected.max() - expected[arm]
        np.testing.assert_array_equal(info["expected_rewards"], expected)
        assert abs(reward - expected[arm]) < 0.1  # σ = 0.01
        truncations.append(truncated)
    assert truncations == [False, False, True]
    with pytest.raises(ValueError):
        env.step(5)
