"""Repulsion controllers (steinrl.core.repulsion) on cases whose answer is known: the target share
reached in one step against a hand computation of both terms, the spread controller driving a
Gaussian's particles to a target spread, the bandit's feedback by hand and its choice on a rigged
score sequence; the SVPG authors' adaptive bandwidth against their scan written out; resume."""

import math

import numpy as np
import pytest
import torch

import steinrl
from steinrl.core.couplings import SteinCoupling
from steinrl.core.function_space import function_space_direction
from steinrl.core.kernels import make_kernel
from steinrl.core.particle_optimizer import ParticleOptimizer
from steinrl.core.repulsion import BanditRepulsion, TargetShare, TargetSpread, make_repulsion, output_spread
from steinrl.core.stein import Forces, svgd_direction
from steinrl.errors import ConfigError

F64 = torch.float64


def particles(M=6, D=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(M, D, generator=g, dtype=F64), torch.randn(M, D, generator=g, dtype=F64)


def hand_terms(theta, grad, h):
    """The RBF SVGD terms written out in numpy: attractive (1/M) Σ_j k_ij g_j and repulsive
    (1/M) Σ_j (2/h) k_ij (θ_i − θ_j), each (M, D)."""
    x, g = theta.numpy(), grad.numpy()
    diff = x[:, None, :] - x[None, :, :]  # i j D
    k = np.exp(-(diff ** 2).sum(-1) / h)
    M = len(x)
    return k @ g / M, (2.0 / h) * (k[:, :, None] * diff).sum(1) / M


@pytest.mark.parametrize("per", ["particle", "seed"])
def test_the_target_share_is_reached_in_one_step(per):
    theta, grad = particles()
    h = 1.3
    att, rep = hand_terms(theta, grad, h)
    phi, info = svgd_direction(theta, grad, kernel=make_kernel({"bandwidth": h}), repulsion=TargetShare(0.25, per))
    pushed = phi.numpy() - att  # λ_i rep_i
    if per == "particle":
        np.testing.assert_allclose(np.linalg.norm(pushed, axis=1) / np.linalg.norm(att, axis=1), 0.25, rtol=1e-10)
        lam = np.linalg.norm(pushed, axis=1) / np.linalg.norm(rep, axis=1)
    else:
        assert np.linalg.norm(pushed) / np.linalg.norm(att) == pytest.approx(0.25, rel=1e-10)
        lam = np.full(len(att), np.linalg.norm(pushed) / np.linalg.norm(rep))
    np.testing.assert_allclose(pushed, lam[:, None] * rep, rtol=1e-9, atol=1e-12)  # the repulsion's direction kept
    assert float(info["repulsion_weight"]) == pytest.approx(lam.mean(), rel=1e-9)
    assert float(info["repulsive_norm"]) == pytest.approx(np.linalg.norm(pushed), rel=1e-9)


def test_a_constant_weight_scales_the_repulsion_and_one_is_svgd():
    theta, grad = particles(seed=1)
    kernel = make_kernel({"name": "imq", "bandwidth": 0.9})
    plain, _ = svgd_direction(theta, grad, kernel=kernel)
    att, _ = svgd_direction(theta, grad, kernel=kernel, repulsion=make_repulsion({"name": "constant", "weight": 0.0}))
    tripled, _ = svgd_direction(theta, grad, kernel=kernel, repulsion=make_repulsion({"weight": 3.0}))
    torch.testing.assert_close(tripled, att + 3.0 * (plain - att), rtol=1e-10, atol=1e-12)
    assert make_repulsion("constant") is None  # λ = 1: the fused SVGD direction, untouched


def test_the_target_share_in_function_space_is_taken_after_the_pull_back():
    """The share is of the weight-space norms (where the optimizer steps), the repulsion pulled back first."""
    g = torch.Generator().manual_seed(4)
    W = torch.nn.Parameter(torch.randn(5, 3, 2, generator=g, dtype=F64))
    X = torch.randn(4, 3, generator=g, dtype=F64)
    grad = torch.randn(5, 6, generator=g, dtype=F64)
    kernel = make_kernel({"space": "functions", "states": 4, "bandwidth": 0.8})
    f = lambda: torch.tanh(X @ W).flatten(1)  # noqa: E731  (M, B·2)
    att, _ = function_space_direction(f(), [W], grad, kernel=kernel, repulsion=make_repulsion({"weight": 0.0}))
    phi, info = function_space_direction(f(), [W], grad, kernel=kernel, repulsion=TargetShare(0.5))
    pushed = (phi - att).norm(dim=1) / att.norm(dim=1)
    torch.testing.assert_close(pushed, torch.full_like(pushed, 0.5), rtol=1e-10, atol=0)


@pytest.mark.parametrize("target", [0.3, 3.0])
def test_the_spread_controller_drives_a_gaussians_particles_to_its_target(target):
    """Particles of N(0, I) under plain gradient steps: with no repulsion they collapse to the mode,
    with a strong one they spread out; the controller finds the λ whose equilibrium spread (mean
    pairwise squared distance, the embedding being the particles themselves) is the target."""
    torch.manual_seed(0)
    theta = torch.nn.Parameter(0.1 * torch.randn(8, 2, dtype=F64))
    control = TargetSpread(target=target, lr=0.05, states=1)
    opt = ParticleOptimizer([theta], SteinCoupling({"bandwidth": 1.0}, repulsion=control), lr=0.1, optimizer="sgd")
    for _ in range(800):
        opt.step(-0.5 * theta.square().sum(1), embed=lambda: theta)
    spread = float(output_spread(theta.detach(), 1, 1))
    assert spread == pytest.approx(target, rel=0.05)
    assert float(control.info()["repulsion_log_weight"]) != 0.0  # λ moved from its start


def test_the_bandits_feedback_by_hand_and_its_choice_on_rigged_scores():
    bandit = BanditRepulsion(arms=[0.0, 1.0], window=50, lookback=2, warmup=3)
    # score t against the max of the 2 before it: 1 better, ½ equal, 0 worse; none for the first 2 or a NaN
    assert bandit.feedback([1.0, 2.0, 3.0, 3.0, 1.0, math.nan, 5.0]) == [None, None, 1.0, 0.5, 0.0, None, 1.0]
    # arm 1 always beats the record, arm 0 always falls below it: after the warm-up arm 1 takes over
    best = 0.0
    for it in range(120):
        bandit.start(it, [7])
        arm = bandit.chosen[0][-1]
        best = best + 1.0 if arm == 1 else best - 10.0
        bandit.observe([best if arm == 1 else best])
        best = max(best, max(bandit.scores[0]))
    late = bandit.chosen[0][-60:]
    assert sum(late) / len(late) > 0.9


def test_a_restored_bandit_chooses_what_the_straight_one_chooses():
    straight, first = BanditRepulsion(), BanditRepulsion()
    scores = np.random.default_rng(0).normal(size=30).cumsum()
    for it in range(30):
        straight.start(it, [3, 4])
        straight.observe([scores[it], -scores[it]])
    for it in range(17):
        first.start(it, [3, 4])
        first.observe([scores[it], -scores[it]])
    again = BanditRepulsion()
    again.load_state_dict([first.state_dict(0, 2), first.state_dict(1, 2)])
    for it in range(17, 30):
        again.start(it, [3, 4])
        again.observe([scores[it], -scores[it]])
    assert again.chosen == straight.chosen
    assert straight.chosen[0] != straight.chosen[1]  # each seed its own bandit


def test_the_adaptive_bandwidth_is_the_svpg_codes_scan():
    theta, _ = particles(M=9, D=3, seed=5)
    x = theta.numpy()
    d = ((x[:, None] - x[None]) ** 2).sum(-1)
    h = np.median(d) / (2 * np.log(10))  # the svpg rule (numpy's median of all M² entries)
    best, loss = None, None
    for a in np.linspace(0.1, 2.0, num=20):
        rows = np.exp(d * (-a / h)).sum(1)
        current = np.mean((rows - 2.0) ** 2)
        if loss is None or current < loss:
            best, loss = a, current
    _, info = svgd_direction(theta, torch.zeros_like(theta), kernel=make_kernel({"bandwidth": "svpg_adaptive"}))
    assert float(info["bandwidth"]) == pytest.approx(h / best, rel=1e-10)


def test_controllers_are_config_values_with_one_line_errors():
    cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {"update.repulsion": {"name": "share", "target": 0.2}})
    assert cfg.update.repulsion == {"name": "share", "target": 0.2, "per": "particle"}
    for bad, message in [({"name": "share", "target": -1}, "must be > 0"),
                         ({"name": "bandit", "arms": [1.0]}, "at least 2"),
                         ({"name": "spread", "speed": 1}, "has no parameter 'speed'"),
                         ("pid", "unknown repulsion controller 'pid'")]:
        with pytest.raises(ConfigError, match=message) as info:
            steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {"update.repulsion": bad})
        assert "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="bandit needs a score per training iteration"):
        steinrl.load_config("svgd-ts", "Mushroom", {"update.repulsion": "bandit"})
    with pytest.raises(ConfigError, match="repulsion"):  # no kernel, no repulsion
        steinrl.load_config("independent-a2c", "CartpoleSwingUp", {"update.repulsion": "share"})


@pytest.mark.parametrize("repulsion", [{"name": "bandit", "warmup": 1, "lookback": 1},
                                       {"name": "spread", "target": 0.05, "states": 16},
                                       {"name": "share", "target": 0.3}])
def test_a_resumed_run_with_a_controller_continues_exactly(tmp_path, repulsion):
    over = {"particles": 3, "rollout.batch_size": 40, "rollout.envs_per_particle": 2, "rollout.sampling": "continuing",
            "update.repulsion": repulsion, "run.progress": False, "run.tensorboard": False}
    cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", over)
    straight = steinrl.Trainer(cfg)
    rows = [straight.step() for _ in range(4)]
    first = steinrl.Trainer(cfg)
    for _ in range(3):
        first.step()
    first.save(tmp_path / "c.pt")
    again = steinrl.Trainer(cfg).restore(tmp_path / "c.pt")
    last = again.step()
    assert "train/repulsion_weight" in last
    for key, value in rows[-1].items():
        if not key.startswith("time/"):
            assert last[key] == value or (math.isnan(value) and math.isnan(last[key])), key


def test_forces_reach_a_custom_controller():
    seen = []

    def controller(forces: Forces) -> torch.Tensor:
        seen.append(forces)
        return torch.ones(forces.repulsive_norm.shape[0], 1, dtype=F64)

    theta, grad = particles(seed=2)
    plain, _ = svgd_direction(theta, grad)
    same, _ = svgd_direction(theta, grad, repulsion=controller)
    torch.testing.assert_close(same, plain, rtol=1e-10, atol=1e-12)
    assert seen[0].attractive_norm.shape == (1, 6) and seen[0].spread is None
