"""Stein kernels (steinrl.core.kernels): kernel matrices by hand, the SVGD repulsive term
against torch.autograd of the kernel written out here, kernels as objects with their own
parameters, and the ``update.kernel`` option."""

import math

import numpy as np
import pytest
import torch

from steinrl.core.couplings import SteinCoupling, make_coupling
from steinrl.core.kernels import KERNELS, IMQKernel, RBFKernel, kernel_spec, make_kernel
from steinrl.core.particle_optimizer import ParticleOptimizer
from steinrl.core.stein import svgd_direction
from steinrl.errors import ConfigError
from steinrl.run.config import load_config

F64 = torch.float64


def kernel(name, rule):
    return make_kernel({"name": name, "bandwidth": rule})


def hand_kernel(name, x, y, h):
    """k(x_j, y) for rows x_j, written out: rbf exp(−d²/h), imq (1 + d²/h)^(−1/2)."""
    d2 = (x - y).square().sum(-1)
    return torch.exp(-d2 / h) if name == "rbf" else (1.0 + d2 / h) ** -0.5


def autograd_svgd(name, theta, grad, h):
    """φ_i = (1/M) Σ_j [k(θ_j, θ_i) g_j + ∇_{θ_j} k(θ_j, θ_i)], the gradient by torch.autograd,
    one particle i at a time. Returns (attractive, repulsive), each (M, D)."""
    M = theta.shape[0]
    attractive, repulsive = torch.zeros_like(theta), torch.zeros_like(theta)
    for i in range(M):
        x = theta.clone().requires_grad_(True)
        k = hand_kernel(name, x, theta[i], h)  # (M,): k(θ_j, θ_i)
        (dk,) = torch.autograd.grad(k.sum(), x)  # row j: ∇_{θ_j} k(θ_j, θ_i)
        attractive[i] = (k.detach()[:, None] * grad).sum(0) / M
        repulsive[i] = dk.sum(0) / M
    return attractive, repulsive


def particles(M=7, D=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 0.5 * torch.randn(M, D, generator=g, dtype=F64), torch.randn(M, D, generator=g, dtype=F64)


@pytest.mark.parametrize("name", ["rbf", "imq"])
def test_kernel_matrix_by_hand(name):
    theta, _ = particles(6, 3, seed=1)
    K, h = kernel(name, 0.8)(theta)
    x = theta.numpy()
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    ref = np.exp(-d2 / 0.8) if name == "rbf" else 1.0 / np.sqrt(1.0 + d2 / 0.8)
    np.testing.assert_allclose(K.numpy(), ref, rtol=1e-12)
    assert h.item() == 0.8 and np.all(np.diag(K.numpy()) == 1.0)


@pytest.mark.parametrize("name", ["rbf", "imq"])
@pytest.mark.parametrize("rule", [0.6, "svpg", "s2vgd"])
def test_svgd_direction_equals_autograd_of_the_kernel(name, rule):
    theta, grad = particles(seed=2)
    _, info = svgd_direction(theta, grad, kernel=kernel(name, rule))
    h = float(info["bandwidth"])
    if rule == "svpg":  # the bandwidth itself by hand: median of all M² squared distances / 2 log(M+1)
        d2 = (theta[:, None] - theta[None]).square().sum(-1).numpy()
        assert h == pytest.approx(np.median(d2) / (2 * math.log(8)), rel=1e-12)
    attractive, repulsive = autograd_svgd(name, theta, grad, h)
    phi, info = svgd_direction(theta, grad, kernel=kernel(name, rule))
    torch.testing.assert_close(phi, attractive + repulsive, rtol=1e-10, atol=1e-12)
    # the repulsive term alone (g = 0), and a sizeable share of φ
    only_repulsive, _ = svgd_direction(theta, torch.zeros_like(grad), kernel=kernel(name, rule))
    torch.testing.assert_close(only_repulsive, repulsive, rtol=1e-10, atol=1e-12)
    assert repulsive.norm() > 0.1 * attractive.norm()
    # diagnostics
    off = ~torch.eye(7, dtype=torch.bool)
    K = torch.stack([hand_kernel(name, theta, theta[i], h) for i in range(7)])
    assert float(info["kernel_mean"]) == pytest.approx(float(K[off].mean()), rel=1e-10)
    assert float(info["attractive_norm"]) == pytest.approx(float(attractive.norm()), rel=1e-9)
    assert float(info["repulsive_norm"]) == pytest.approx(float(repulsive.norm()), rel=1e-9)


def test_imq_groups_are_separate_runs():
    """(G, M, D): each group's φ is that of the group alone."""
    theta, grad = particles(12, 3, seed=3)
    phi, info = svgd_direction(theta.view(3, 4, 3), grad.view(3, 4, 3), kernel=IMQKernel())
    for g in range(3):
        alone, info1 = svgd_direction(theta[4 * g:4 * g + 4], grad[4 * g:4 * g + 4], kernel=IMQKernel())
        torch.testing.assert_close(phi[g], alone, rtol=1e-12, atol=1e-14)
        assert float(info["repulsive_norm"][g]) == pytest.approx(float(info1["repulsive_norm"]), rel=1e-12)


def test_imq_has_heavier_tails_than_rbf():
    """Far apart (d²/h = 25): rbf's coupling is e⁻²⁵ ≈ 1e-11, imq's still (1 + 25)^(−1/2) ≈ 0.2."""
    theta = torch.tensor([[0.0], [5.0]], dtype=F64)
    assert float(RBFKernel(bandwidth=1.0)(theta)[0][0, 1]) < 1e-10
    assert float(IMQKernel(bandwidth=1.0)(theta)[0][0, 1]) == pytest.approx(26 ** -0.5, rel=1e-12)


def _log_mixture(x):
    # 0.5 N(−2, 0.5²) + 0.5 N(2, 0.5²), unnormalised
    return torch.logaddexp(-0.5 * ((x - 2.0) / 0.5) ** 2, -0.5 * ((x + 2.0) / 0.5) ** 2)


def test_imq_svgd_covers_both_modes():
    """100 particles from a narrow clump N(0, 0.1²) on modes ±2 (std 0.5), IMQ kernel: ≥ 30 % in
    each mode, mode means within 0.1 and spreads within 20 % of 0.5 (independent particles
    collapse to spread < 0.05, see test_svgd)."""
    gen = torch.Generator().manual_seed(0)
    p = torch.nn.Parameter(0.1 * torch.randn(100, 1, generator=gen, dtype=F64))
    opt = ParticleOptimizer([p], SteinCoupling("imq"), lr=0.05, optimizer="adam")
    for _ in range(600):
        opt.step(_log_mixture(p).squeeze(1))
    x = p.detach().squeeze(1)
    for mode, centre in ((x[x > 0], 2.0), (x[x < 0], -2.0)):
        assert len(mode) >= 30
        assert abs(mode.mean().item() - centre) < 0.1
        assert abs(mode.std().item() - 0.5) < 0.1


def test_kernels_are_objects_with_their_own_parameters():
    imq = make_kernel({"name": "imq", "beta": -0.3, "bandwidth": "s2vgd"})
    assert isinstance(imq, IMQKernel) and imq.beta == -0.3 and imq.rule == "s2vgd"
    assert make_kernel(imq.spec()).spec() == {"name": "imq", "bandwidth": "s2vgd", "beta": -0.3, "space": "weights"}
    assert make_kernel("rbf").spec() == {"name": "rbf", "bandwidth": "svpg", "space": "weights"}
    # β changes the kernel: (1 + d²/h)^β by hand at d² = 3, h = 1
    theta = torch.tensor([[0.0], [3 ** 0.5]], dtype=F64)
    assert float(make_kernel({"name": "imq", "beta": -0.3, "bandwidth": 1.0})(theta)[0][0, 1]) == \
        pytest.approx(4 ** -0.3, rel=1e-12)
    # a mapping without name sets parameters of the kernel so far
    assert kernel_spec({"beta": -0.9}, {"name": "imq", "beta": -0.3, "bandwidth": 2.0}) == \
        {"name": "imq", "bandwidth": 2.0, "beta": -0.9, "space": "weights"}
    assert kernel_spec({"name": "rbf"}, {"name": "imq", "beta": -0.3, "bandwidth": 2.0}) == \
        {"name": "rbf", "bandwidth": "svpg", "space": "weights"}


def test_kernel_choice_and_errors():
    p = torch.nn.Parameter(torch.zeros(3, 2))
    assert isinstance(make_coupling("stein", kernel="imq").kernel, IMQKernel)
    assert isinstance(make_coupling("stein").kernel, RBFKernel)
    with pytest.raises(ValueError, match="does not take"):
        make_coupling("independent", kernel="imq")
    with pytest.raises(ConfigError, match="rbf, imq"):
        ParticleOptimizer([p], SteinCoupling("laplace"), lr=0.1)
    with pytest.raises(ValueError, match="beta"):
        IMQKernel(0.5)
    with pytest.raises(ConfigError, match=r"kernel 'imq': parameter 'beta' must be in \(-1, 0\)"):
        make_kernel({"name": "imq", "beta": 0.5})
    with pytest.raises(ConfigError, match="no parameter 'gamma'; its parameters: bandwidth, space, states, driving$"):
        make_kernel({"name": "rbf", "gamma": 2})
    with pytest.raises(ConfigError, match="bandwidth"):
        make_kernel({"name": "rbf", "bandwidth": "scott"})
    assert KERNELS.names() == ["rbf", "imq"]


def test_update_kernel_option():
    """``update.kernel`` is declared by the stein update, for RL and Stein Thompson sampling
    alike, as a name or a mapping of name and parameters; the independent update has no kernel.
    The code's default is the RBF kernel on the weights at lambda = 1 (a task without a file); every task
    file ships the same (the repulsion study's W); a function-space kernel is a mapping away."""
    spec = load_config(algo="svgd-a2c", env="Acrobot-v1").update.kernel
    assert spec == {"name": "rbf", "bandwidth": "svpg", "space": "weights"}
    for env in ("CartPole-v1", "Walker2d-v5", "SparseHalfCheetah", "CartpoleSwingUp", "MountainCarContinuous-v0"):
        shipped = load_config(algo="svgd-ppo", env=env).update
        assert shipped.kernel == {"name": "rbf", "bandwidth": "svpg", "space": "weights"}, env
        assert shipped.repulsion == {"name": "constant", "weight": 1.0}, env
    functions = load_config(algo="svgd-a2c", env="CartPole-v1", overrides={
        "update.kernel": {"space": "functions", "states": 64}, "update.repulsion": {"name": "share", "target": 0.05}})
    assert functions.update.kernel == {"name": "rbf", "bandwidth": "svpg", "space": "functions", "states": 64,
                                       "driving": "weights"}
    assert functions.update.repulsion == {"name": "share", "target": 0.05, "per": "particle"}
    imq = load_config(algo="s2vgd-a2c", env="CartPole-v1", overrides={"update.kernel": "imq"}).update.kernel
    assert imq == {"name": "imq", "bandwidth": "svpg", "beta": -0.5, "space": "weights"}
    bandit = load_config(algo="svgd-ts", env="Mushroom", overrides={"update.kernel": "imq"})
    assert bandit.update.kernel["name"] == "imq"
    nested = load_config(algo="svgd-a2c", env="CartPole-v1",
                         overrides={"update": {"kernel": {"name": "imq", "beta": -0.3, "bandwidth": 2.5}}})
    assert nested.update.kernel == {"name": "imq", "bandwidth": 2.5, "beta": -0.3, "space": "weights"}
    with pytest.raises(ConfigError, match="unknown kernel 'laplace'.*rbf, imq"):
        load_config(algo="svgd-a2c", env="CartPole-v1", overrides={"update.kernel": "laplace"})
    with pytest.raises(ConfigError, match="kernel"):
        load_config(algo="independent-a2c", env="CartPole-v1", overrides={"update.kernel": "imq"})
    with pytest.raises(ConfigError, match="update.bandwidth is now a parameter of the kernel"):
        load_config(algo="svgd-a2c", env="CartPole-v1", overrides={"update.bandwidth": "s2vgd"})
    with pytest.raises(ConfigError, match="must be a string or a mapping"):
        load_config(algo="svgd-a2c", env="CartPole-v1", overrides={"update.kernel": 3})


def test_kernel_set_from_the_command_line_in_one_piece_or_by_parameter(tmp_path):
    """``--set 'update.kernel={name: imq, beta: -0.3}'``, then ``--set 'update.kernel={beta: -0.2}'``
    (a later layer changes a parameter of the kernel so far); a config file likewise."""
    from steinrl.run.config import parse_set

    sets = parse_set(["update.kernel={name: imq, beta: -0.3}"])
    cfg = load_config("svgd-a2c", "CartPole-v1", sets)
    assert cfg.update.kernel == {"name": "imq", "bandwidth": "svpg", "beta": -0.3, "space": "weights"}
    path = tmp_path / "k.yaml"
    path.write_text("update:\n  kernel: {name: imq, bandwidth: s2vgd}\n")
    cfg = load_config("svgd-a2c", "CartPole-v1", parse_set(["update.kernel={beta: -0.2}"]), config_files=[path])
    assert cfg.update.kernel == {"name": "imq", "bandwidth": "s2vgd", "beta": -0.2, "space": "weights"}
