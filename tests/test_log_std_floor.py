"""policy.log_std_min (GaussianHead): the floor on the action log-std in sampling (the head, the
rollout's numpy and tensor actors, evaluation), log_prob, entropy, the function-space embedding,
the diagnostics and the gradient, each against an independent reference (hand formulas in
float64, torch.distributions.Normal); bad values are one-line errors."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from steinrl.errors import ConfigError
from steinrl.rl.heads import GaussianHead
from steinrl.rl.policy import EnsemblePolicy

FLOOR = -1.0
#: per particle (M = 3) and action dimension (A = 2): below, at and above the floor
LOG_STD = [[-3.0, -1.0], [-0.5, -2.0], [0.2, -1.0 - 1e-3]]
SPACE = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)  # unbounded: no clipping in the way


def _head(floor=FLOOR, log_std=LOG_STD, **kwargs) -> GaussianHead:
    head = GaussianHead(3, SPACE, log_std_min=floor, **kwargs)
    with torch.no_grad():
        head.log_std.copy_(torch.tensor(log_std))
    return head


def _expected_std(floor=FLOOR) -> np.ndarray:
    """The std each entry acts with, by hand: exp(max(log_std, floor)), (M, A) float64."""
    raw = np.array(LOG_STD, dtype=np.float64)
    return np.exp(raw if floor is None else np.maximum(raw, floor))


def _sample_std_bound(n: int) -> float:
    """5 standard errors of a sample std relative to the true one (normal data: se = 1/sqrt(2(n-1)))."""
    return 5.0 / math.sqrt(2 * (n - 1))


def test_sampling_draws_with_the_floored_std():
    """20 000 draws per particle and dimension from head.sample: the empirical std of (action -
    mean) is exp(max(log_std, floor)) within 5 standard errors (2.5 %); without the floor the
    entries below it draw with their own (smaller) std, which that bound tells apart."""
    n = 20_000
    gen = torch.Generator().manual_seed(0)
    out = torch.randn(3, 1, 2, generator=gen).expand(3, n, 2)  # one mean per particle
    for floor in (FLOOR, None):
        head = _head(floor)
        noise = head.draw_noise((3, n), torch.Generator().manual_seed(1), "cpu")
        actions = head.sample(out, noise, head.scale())
        std = (actions - out).std(1).detach().double().numpy()  # (M, A)
        np.testing.assert_allclose(std, _expected_std(floor), rtol=_sample_std_bound(n))
    assert not np.allclose(_expected_std(FLOOR), _expected_std(None), rtol=_sample_std_bound(n))


@pytest.mark.parametrize("host", [True, False], ids=["numpy-actor", "tensor-actor"])
def test_the_rollout_actors_act_with_the_floored_std(host):
    """The rollout's act function (numpy views on the CPU, and the prepared-bias tensor path)
    adds noise times the floored std: actions minus the deterministic actions, over 4000 steps
    of 4 envs per particle, have the hand std within 5 standard errors."""
    obs_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    policy = EnsemblePolicy(3, obs_space, SPACE, hidden=(8,), head_options={"log_std_min": FLOOR},
                            generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        policy.head.log_std.copy_(torch.tensor(LOG_STD))
    T, E = 4000, 4
    noise = policy.head.draw_noise((T, 3, E), torch.Generator().manual_seed(2), "cpu")
    obs = torch.rand(3, E, 3, generator=torch.Generator().manual_seed(3)) * 2 - 1
    x = obs.numpy() if host else obs
    with torch.no_grad():  # as the rollout acts
        noisy, still = policy.actor(noise, host=host), policy.actor(None, host=host)
        deviations = [np.asarray(noisy(x, t)) - np.asarray(still(x, t)) for t in range(T)]
    std = np.concatenate(deviations, 1).astype(np.float64).std(1, ddof=1)  # (M, A) over T * E
    np.testing.assert_allclose(std, _expected_std(), rtol=_sample_std_bound(T * E))


def test_log_prob_and_entropy_use_the_floored_std():
    """log π(a|s) against the Gaussian density by hand in float64 with std exp(max(log_std,
    floor)), and against torch.distributions.Normal; the entropy against Normal's."""
    head = _head()
    gen = torch.Generator().manual_seed(4)
    out, actions = torch.randn(3, 5, 2, generator=gen), torch.randn(3, 5, 2, generator=gen)
    with torch.no_grad():
        logp, entropy = head.log_prob(out, actions)
    std = _expected_std()[:, None, :]  # M 1 A
    z = (actions.double().numpy() - out.double().numpy()) / std
    by_hand = (-0.5 * z**2 - np.log(std) - 0.5 * np.log(2 * np.pi)).sum(-1)
    np.testing.assert_allclose(logp.double().numpy(), by_hand, rtol=1e-6, atol=1e-6)
    normal = torch.distributions.Normal(out.double(), torch.from_numpy(std))
    np.testing.assert_allclose(logp.double().numpy(), normal.log_prob(actions.double()).sum(-1).numpy(),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(entropy.double().numpy(), normal.entropy()[:, 0].sum(-1).numpy(), rtol=1e-6)
    by_hand_entropy = (0.5 + 0.5 * np.log(2 * np.pi) + np.log(_expected_std())).sum(-1)
    np.testing.assert_allclose(entropy.double().numpy(), by_hand_entropy, rtol=1e-6)


def test_the_gradient_stops_below_the_floor_and_passes_at_and_above_it():
    """d(Σ log π + entropy)/d log_std: 0 for the entries below the floor, and the unfloored
    head's gradient for the others (the floor itself included: torch's clamp passes it there)."""
    gen = torch.Generator().manual_seed(5)
    out, actions = torch.randn(3, 7, 2, generator=gen), torch.randn(3, 7, 2, generator=gen)
    grads = []
    for floor in (FLOOR, None):
        head = _head(floor)
        logp, entropy = head.log_prob(out, actions)
        (logp.sum() + entropy.sum()).backward()
        grads.append(head.log_std.grad.clone())
    below = torch.tensor(LOG_STD) < FLOOR
    assert below.sum() == 3
    assert torch.all(grads[0][below] == 0) and torch.all(grads[1][below] != 0)
    torch.testing.assert_close(grads[0][~below], grads[1][~below])


def test_the_embedding_diagnostics_and_the_ensemble_action_see_the_floor():
    """function() with the log-std in the kernel carries the floored log-std; policy_std is
    the mean floored std per seed group; sampled ensemble actions scatter with the floored
    std / M around the mean action (the particles' noise is independent)."""
    head = _head(log_std_in_kernel=True)
    out = torch.zeros(3, 4, 2)
    emb = head.function(out).detach()
    np.testing.assert_allclose(emb[:, -2:].double().numpy(), np.log(_expected_std()), rtol=1e-6)
    np.testing.assert_allclose(head.diagnostics(1)["policy_std"].double().numpy(),
                               [_expected_std().mean()], rtol=1e-6)
    n = 40_000
    with torch.no_grad():
        acts = head.ensemble_action(torch.zeros(3, n, 2), False, torch.Generator().manual_seed(6))
    expected = np.sqrt((_expected_std() ** 2).sum(0)) / 3  # std of the mean of 3 independent draws
    np.testing.assert_allclose(acts.std(0).double().numpy(), expected, rtol=_sample_std_bound(n))


def test_no_floor_is_the_raw_parameter():
    head = _head(None)
    assert head.log_std_min is None and head.effective_log_std() is head.log_std


def test_the_config_option_reaches_the_head_and_bad_values_are_one_line_errors():
    from steinrl.rl.agent import SVPGAgent
    from steinrl.run.config import load_config

    cfg = load_config("independent-ppo", "Pendulum-v1", {"policy.log_std_min": -1.5})
    assert cfg.policy.log_std_min == -1.5 and load_config("independent-ppo", "Pendulum-v1").policy.log_std_min is None
    env = gym.make("Pendulum-v1")
    agent = SVPGAgent(cfg, env.observation_space, env.action_space, seeds=[0])
    assert agent.policy.head.log_std_min == -1.5
    for bad in ("nan", "inf", float("-inf")):
        with pytest.raises(ConfigError, match="log_std_min.*must be a finite number") as info:
            load_config("independent-ppo", "Pendulum-v1", {"policy.log_std_min": bad})
        assert "\n" not in str(info.value)
    for bad in (float("nan"), "-1", True):
        with pytest.raises(ConfigError, match="log_std_min must be a finite number or null") as info:
            GaussianHead(3, SPACE, log_std_min=bad)
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match=r"log_std_min \(0.5\) is above policy.log_std_init \(0\)"):
        GaussianHead(3, SPACE, log_std_min=0.5)
    GaussianHead(3, SPACE, log_std_init=-0.5, log_std_min=-0.5)  # at the floor: allowed


#: A floored svgd-ppo run that starts at its floor, so the clamp acts from the first update.
FLOORED = {"policy.log_std_init": -0.3, "policy.log_std_min": -0.3, "estimator.minibatches": 2,
           "estimator.epochs": 4, "iterations": 6}


def test_the_graph_safe_iteration_and_a_resume_give_the_eager_numbers_with_the_floor(tmp_path):
    """With the floor, the static (graph-safe) iteration on the CPU gives the eager run's numbers
    (tests/test_graph_safe.py's check), a run saved and resumed halfway gives the straight run's,
    and the std the particles act with never drops below the floor."""
    from conftest import stepped_with_a_restore
    from test_graph_safe import BASE, WARMUP, rows, trainer

    import steinrl

    def below_the_floor(t):  # particle 0's log-std put below the floor: the clamp acts all along
        with torch.no_grad():
            t.job.agent.policy.head.log_std[0] = -1.0
        return t

    eager_trainer = below_the_floor(trainer("svgd-ppo", FLOORED, None, False))
    eager = rows(eager_trainer, WARMUP + 3)
    static_trainer = below_the_floor(trainer("svgd-ppo", FLOORED, None, True))
    static = rows(static_trainer, WARMUP + 3)
    assert static_trainer.job.agent.draws.static
    assert static == pytest.approx(eager, rel=1e-6, abs=1e-9, nan_ok=True)
    head = eager_trainer.job.agent.policy.head
    assert head.log_std_min == -0.3 and torch.all(head.effective_log_std() >= -0.3)
    assert torch.all(head.log_std[0] == -1.0)  # no gradient below the floor: it stayed where it was
    assert torch.all(head.log_std[1:] != -0.3)  # the others moved (from the floor, where the gradient passes)
    assert all(v >= math.exp(-0.3) * (1 - 1e-6) for k, v in eager.items() if k.endswith("train/policy_std"))

    cfg = steinrl.load_config("svgd-ppo", "CartpoleSwingUp", {**BASE, **FLOORED})
    expected, resumed = stepped_with_a_restore(cfg, tmp_path / "c.pt")
    def flat(steps):
        return {f"{i}/{k}": v for i, r in enumerate(steps) for k, v in r.items() if not k.startswith("time/")}

    assert flat(resumed) == pytest.approx(flat(expected), rel=1e-6, abs=1e-9, nan_ok=True)
    assert all(v >= math.exp(-0.3) * (1 - 1e-6) for k, v in flat(expected).items() if k.endswith("policy_std"))
