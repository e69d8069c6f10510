"""The fast paths compute what the plain computations do (issue 28: faster, not less).

- the doubling scan of ``returns._reverse_scan`` (and GAE, returns-to-go, running returns
  built on it) against a step-by-step loop in plain Python floats;
- ``ValueEnsemble.fit`` (every step's columns drawn and gathered at once, the mask folded
  into weights, forward and backward written out) against the plain loop it replaced:
  per step draw, gather, forward, masked mean squared error, autograd, Adam;
- ``ValueEnsemble.values`` (in blocks of observations on CPU) against one forward of all.
"""

from __future__ import annotations

import copy
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from conftest import recorded

import steinrl
from steinrl.core.optim import gradient_step
from steinrl.rl import critics
from steinrl.rl.critics import ValueEnsemble
from steinrl.rl.estimators import returns as R
from steinrl.rl.policy import ObsNormalizer
from steinrl.rl.samples import Samples
from steinrl.rl.value_regression import ValueRegression

#: float tolerances: .ci/run reruns this module under the forced CPU kernel sets
pytestmark = pytest.mark.numerics


def loop_scan(x: np.ndarray, cont: np.ndarray) -> np.ndarray:
    """out[t] = x[t] + cont[t] out[t + 1], element by element in Python floats."""
    out = np.zeros_like(x)
    flat_x, flat_c, flat_o = x.reshape(len(x), -1), cont.reshape(len(x), -1), out.reshape(len(x), -1)
    for j in range(flat_x.shape[1]):
        running = 0.0
        for t in range(len(x) - 1, -1, -1):
            running = float(flat_x[t, j]) + float(flat_c[t, j]) * running
            flat_o[t, j] = running
    return out


@pytest.mark.parametrize("T", [1, 2, 3, 5, 8, 33, 100, 257])
def test_doubling_scan_equals_the_loop(T):
    g = np.random.default_rng(T)
    x = g.normal(size=(T, 3, 4)) * 10.0
    cont = 0.99 * 0.97 * (g.random((T, 3, 4)) > 0.05)  # episode ends (cont = 0) here and there
    got = R._reverse_scan(torch.as_tensor(x), torch.as_tensor(cont)).numpy()
    want = loop_scan(x, cont)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert got.shape == (T, 3, 4)


def test_scan_restarts_exactly_at_episode_ends():
    # rewards 1 everywhere, gamma 0.5, an episode ending at t = 2: G = [1.75, 1.5, 1, 1.5, 1]
    r = torch.ones(5)
    done = torch.tensor([False, False, True, False, False])
    np.testing.assert_array_equal(R.discounted_returns(r, done, 0.5).numpy(), [1.75, 1.5, 1.0, 1.5, 1.0])


def test_gae_and_running_returns_equal_their_loops():
    g = np.random.default_rng(0)
    T, gamma, lam = 150, 0.99, 0.95
    r, v = g.normal(size=(T, 2, 3)), g.normal(size=(T + 1, 2, 3))
    term, trunc = g.random((T, 2, 3)) < 0.02, g.random((T, 2, 3)) < 0.02
    done = term | trunc
    adv, ret = R.gae(*map(torch.as_tensor, (r, v, term, done)), gamma, lam)
    delta = r + gamma * v[1:] * ~term - v[:T]
    want = loop_scan(delta, gamma * lam * ~done)
    np.testing.assert_allclose(adv.numpy(), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ret.numpy(), want + v[:T], rtol=1e-12, atol=1e-12)
    valid = g.random((T, 2, 3)) < 0.9
    got = R.running_returns(*map(torch.as_tensor, (r, valid, done)), gamma, torch.full((2, 3), 3.0)).numpy()
    running, want = np.full((2, 3), 3.0), np.zeros((T, 2, 3))
    for t in range(T):  # R_t = gamma R_{t-1} + r_t at valid steps, then 0 after a valid episode end
        running = np.where(valid[t], gamma * running + r[t], running)
        want[t] = running
        running = np.where(valid[t] & done[t], 0.0, running)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# --- the critic's regression -----------------------------------------------------------------------------

def plain_fit(self: ValueEnsemble, samples: Samples, seed: int | list[int]) -> torch.Tensor:
    """ValueEnsemble.fit before issue 28: one draw, gather and autograd step per regression step."""
    obs, mask = self.obs_norm(samples.obs), samples.mask
    targets = samples.targets.to(torch.float32)
    seeds = [seed] if isinstance(seed, int) else list(seed)
    generators = [torch.Generator().manual_seed(s) for s in seeds]
    M, B = targets.shape
    count = mask.sum(1).clamp_min(1.0)
    with torch.no_grad():
        mean = (targets * mask).sum(1) / count
        std = (((targets - mean[:, None]) * mask).square().sum(1) / count).sqrt().clamp_min(1e-6)
        self.target_mean.copy_(mean[:, None])
        self.target_std.copy_(std[:, None])
        z = (targets - self.target_mean) / self.target_std
    total = torch.zeros(M)
    for _ in range(self.steps):
        if self.minibatch < B:
            idx = torch.cat([torch.randint(B, (M // len(generators), self.minibatch), generator=g)
                             for g in generators])
            flat = (idx + torch.arange(0, M * B, B)[:, None]).view(-1)
            o = obs.reshape(M * B, -1).index_select(0, flat).view(M, self.minibatch, -1)
            zt, mk = z.reshape(-1)[flat].view(M, -1), mask.reshape(-1)[flat].view(M, -1)
        else:
            o, zt, mk = obs, z, mask
        pred = self.net(o).squeeze(-1)
        loss = ((pred - zt).square() * mk).sum(1) / mk.sum(1).clamp_min(1.0)
        gradient_step(loss.sum(), [self.optimizer])
        total += loss.detach()
    return total / max(self.steps, 1) * std.square()


def _samples(M: int, B: int, d: int, seed: int = 0) -> Samples:
    g = torch.Generator().manual_seed(seed)
    obs = torch.randn(M, B, d, generator=g) * 2.0
    valid = torch.arange(B)[None] < torch.randint(B // 2, B + 1, (M, 1), generator=g)  # padded particles
    targets = (obs.sum(-1).sin() * 30.0 + 50.0 + torch.randn(M, B, generator=g)).double()
    return Samples(obs=obs, actions=torch.zeros(M, B, 1), timestep=torch.zeros(M, B, dtype=torch.int32),
                   mask=valid.float(), advantages=torch.zeros(M, B), targets=targets * valid)


def _pair(M: int, d: int, normalize: bool, **options) -> tuple[ValueEnsemble, ValueEnsemble]:
    norm = ObsNormalizer(d, normalize)
    norm.observe(torch.randn(500, d, generator=torch.Generator().manual_seed(9)) * 3.0 + 1.0)
    a = ValueEnsemble(M, d, norm, generator=torch.Generator().manual_seed(1), **options)
    b = copy.deepcopy(a)
    object.__setattr__(b, "obs_norm", norm)
    b.optimizer = type(a.optimizer)(b.net.parameters(), **a.optimizer.defaults)
    return a, b


@pytest.mark.parametrize("activation, hidden, minibatch, seeds, normalize", [
    ("tanh", [32, 32], 256, 3, False),  # the default critic (the swing-up's)
    ("tanh", [8], 5000, [4, 5], True),  # all samples every step (no draw), two seed groups
    ("relu", [16, 8], 100, [6, 7], True),
    ("elu", [12, 12], 300, 8, False),
    ("identity", [6], 64, 9, True),
])
def test_critic_fit_equals_the_plain_loop(activation, hidden, minibatch, seeds, normalize):
    M, B, d = 4, 700, 3
    samples = _samples(M, B, d)
    fast, plain = _pair(M, d, normalize, activation=activation, hidden=hidden, minibatch=minibatch, steps=4)
    for it in range(2):  # the second fit starts from a warm Adam state
        seed = seeds if isinstance(seeds, list) else seeds + it
        gens = [torch.Generator().manual_seed(s) for s in ([seed] if isinstance(seed, int) else seed)]
        got = fast.fit(samples, fast.draw_columns(B, gens) if fast.samples_columns(B) else None)
        want = plain_fit(plain, samples, seed)
        torch.testing.assert_close(got, want, rtol=2e-5, atol=1e-6)
        for (name, p), q in zip(fast.state_dict().items(), plain.state_dict().values()):
            torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=name)
        assert fast.optimizer.state_dict()["state"].keys() == plain.optimizer.state_dict()["state"].keys()
    # and not trivially: the fit moved the networks
    assert not torch.equal(fast.net.layers[0].W, _pair(M, d, normalize, activation=activation, hidden=hidden)[0]
                           .net.layers[0].W)


@pytest.mark.parametrize("activation", ["tanh", "relu", "elu", "identity"])
def test_regression_step_gradients_equal_autograd(activation):
    # Adam hides a gradient's scale (its first step moves by lr whatever the scale): the
    # gradients themselves, against autograd of the same weighted squared error
    M, n, d = 3, 2000, 5  # 3 * 32 * 2000 activations: the tanh forward's sigmoid form in both
    critic, _ = _pair(M, d, False, activation=activation, hidden=[32, 7])
    g = torch.Generator().manual_seed(3)
    x, z = torch.randn(M, n, d, generator=g), torch.randn(M, 1, n, generator=g)
    weight = torch.rand(M, 1, n, generator=g) / n
    total = torch.zeros(M)
    ValueRegression(critic.net, n).loss_and_gradients(x.mT.contiguous(), z, weight, total)
    got = [p.grad for p in critic.net.parameters()]
    critic.net.zero_grad()
    loss = ((critic.net(x).mT - z).square() * weight).sum((1, 2))
    loss.sum().backward()
    torch.testing.assert_close(total, loss.detach(), rtol=1e-5, atol=1e-7)
    for (name, p), grad in zip(critic.net.named_parameters(), got):
        torch.testing.assert_close(grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_critic_values_in_blocks_equal_one_forward():
    M, T1, E, d = 3, 40, 30, 4  # 1200 observations per particle: blocks of 512, 512, 176
    assert T1 * E > 2 * critics._CPU_BLOCK
    critic, _ = _pair(M, d, True, hidden=[16, 16])
    critic.fit(_samples(M, 300, d), 0)  # target mean / std not 0 / 1
    obs = torch.randn(T1, M, E, d, generator=torch.Generator().manual_seed(2))
    got = critic.values(SimpleNamespace(obs=obs))
    with torch.no_grad():
        want = critic(obs.permute(1, 0, 2, 3).reshape(M, T1 * E, d)).view(M, T1, E).permute(1, 0, 2).double()
    assert got.shape == (T1, M, E) and got.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_ppo_update_shortcuts_change_no_number():
    """The PPO update's shortcuts (observations normalised once per update, the prior and the
    PPO diagnostics only where used or logged, the foreach gradient scaling, the finiteness
    sums) give every logged metric of 3 iterations of ``tests/data/ppo_update_reference.json``,
    recorded with the code before them (``tests/data/make_ppo_update_reference.py``)."""
    from data.make_ppo_update_reference import PATH, run

    for case in json.loads(PATH.read_text())["cases"]:
        for old, new in zip(case["metrics"], run(case)):
            old = recorded(old, case["algo"])
            assert set(old) == set(new), case["algo"]
            for key, value in old.items():
                assert_same_metric(new[key], value, (case["algo"], key))


def assert_same_metric(new: float, old: float, where: tuple) -> None:
    """Equal up to the float rounding of another CPU (one recorded CPU against another): on the
    machine that recorded the reference the metrics are equal to the last bit; with other vector
    kernels (``ATEN_CPU_CAPABILITY=default`` against AVX-512) they move by up to 5e-5 relative, by
    1.3e-5 where a metric is a difference of near-equal numbers (explained variance), and a clip
    fraction by one sample of a minibatch: compared at rel 5e-4 (10x), a clip fraction at 0.02."""
    if isinstance(old, float) and math.isnan(old):
        assert math.isnan(new), where
    elif where[-1].endswith("clip_fraction"):
        assert new == pytest.approx(old, abs=0.02), where
    else:
        assert new == pytest.approx(old, rel=5e-4, abs=1e-4), where


def test_critic_overlap_changes_no_number():
    """``critic.overlap``: the critic's regression on a second thread, beside the policy's
    update, gives every logged metric of the reference recorded before the option existed,
    and the same critic and policy weights as the regression after the update."""
    from data.make_ppo_update_reference import PATH, SEMANTICS

    case = next(c for c in json.loads(PATH.read_text())["cases"] if c["algo"] == "svgd-a2c")
    trainers = {}
    for overlap in (False, True):
        cfg = steinrl.load_config(case["algo"], case["env"], {**case["overrides"], **SEMANTICS, "run.progress": False,
                                                              "critic.overlap": overlap, "run.threads": 2})
        trainers[overlap] = trainer = steinrl.Trainer(cfg)
        rows = [trainer.step() for _ in range(3)]
        for old, new in zip(case["metrics"], rows):
            for key, value in old.items():
                assert_same_metric(new[key], value, (overlap, key))
    before, after = (trainers[o].job.agent for o in (False, True))
    for name, tensor in before.critic.state_dict().items():
        assert torch.equal(tensor, after.critic.state_dict()[name]), name
    for name, tensor in before.policy.state_dict().items():
        assert torch.equal(tensor, after.policy.state_dict()[name]), name
    for trainer in trainers.values():
        trainer.close()
