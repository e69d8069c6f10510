"""The function-space Stein direction against a finite-difference computation of its formula on a
tiny network, against weight-space SVGD where the net is linear and the inputs the identity, and
the RL agent's shared states."""

import numpy as np
import pytest
import torch

import steinrl
from steinrl.core.couplings import SteinCoupling
from steinrl.core.function_space import function_space_direction
from steinrl.core.kernels import make_kernel
from steinrl.core.particle_optimizer import ParticleOptimizer
from steinrl.core.stein import flatten, svgd_direction

F64 = torch.float64


def tiny(M=4, seed=0):
    """Particles of a 2-3-1 tanh net on B = 5 shared inputs, and random log-target gradients."""
    g = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(0.8 * torch.randn(M, 2, 3, generator=g, dtype=F64)),
              torch.nn.Parameter(0.8 * torch.randn(M, 3, generator=g, dtype=F64)),
              torch.nn.Parameter(0.8 * torch.randn(M, 3, 1, generator=g, dtype=F64))]
    X = torch.randn(5, 2, generator=g, dtype=F64)

    def f(ps):
        W1, b1, W2 = ps
        return (torch.tanh(X @ W1 + b1[:, None]) @ W2).squeeze(-1)  # (M, B)

    grad = torch.randn(M, sum(p[0].numel() for p in params), generator=g, dtype=F64)
    return params, f, grad


def numeric_jacobians(params, f, eps=1e-6):
    """J_i = ∂f_i/∂θ_i ``(M, F, D)`` by central differences, one coordinate at a time."""
    theta = flatten([p.detach() for p in params]).numpy()
    M, D = theta.shape
    sizes = [p[0].numel() for p in params]

    def outputs(flat):
        pieces = np.split(flat, np.cumsum(sizes)[:-1], axis=1)
        return f([torch.tensor(x).reshape(p.shape) for x, p in zip(pieces, params)]).detach().numpy()

    F = outputs(theta).shape[1]
    J = np.zeros((M, F, D))
    for d in range(D):
        up, down = theta.copy(), theta.copy()
        up[:, d] += eps
        down[:, d] -= eps
        J[:, :, d] = (outputs(up) - outputs(down)) / (2 * eps)
    return J


@pytest.mark.parametrize("driving", ["weights", "functions"])
@pytest.mark.parametrize("kernel", [{"name": "rbf", "bandwidth": 0.7}, {"name": "imq", "beta": -0.3}])
def test_function_space_direction_against_finite_differences(driving, kernel):
    params, f, grad = tiny()
    k = make_kernel({**kernel, "space": "functions", "states": 5, "driving": driving})
    phi, info = function_space_direction(f(params), params, grad, kernel=k)
    # the formula written out in numpy, with numerical Jacobians
    fv = f(params).detach().numpy()
    J = numeric_jacobians(params, f)
    M = fv.shape[0]
    d2 = ((fv[:, None] - fv[None]) ** 2).sum(-1)
    h = float(info["bandwidth"])
    if kernel.get("bandwidth") == 0.7:
        assert h == 0.7
    else:  # the svpg rule on the function-space distances: median of all M² entries / 2 log(M + 1)
        assert h == pytest.approx(np.median(d2) / (2 * np.log(M + 1)), rel=1e-10)
    r = d2 / h
    beta = kernel.get("beta", -0.5)
    K, R = (np.exp(-r), np.exp(-r)) if kernel["name"] == "rbf" else ((1 + r) ** beta, -beta * (1 + r) ** (beta - 1))
    g = grad.numpy()
    rep_f = np.stack([(2 / (M * h)) * sum(R[i, j] * (fv[i] - fv[j]) for j in range(M)) for i in range(M)])
    rep = np.einsum("mfd,mf->md", J, rep_f)
    if driving == "weights":
        att = K @ g / M
    else:
        jg = np.einsum("mfd,md->mf", J, g)
        att = np.einsum("mfd,mf->md", J, K @ jg / M)
    np.testing.assert_allclose(phi.numpy(), att + rep, rtol=1e-6, atol=1e-8)
    assert float(info["repulsive_norm"]) == pytest.approx(np.linalg.norm(rep), rel=1e-6)
    assert float(info["attractive_norm"]) == pytest.approx(np.linalg.norm(att), rel=1e-6)
    assert float(info["mean_pairwise_distance"]) == pytest.approx(np.sqrt(d2)[~np.eye(M, dtype=bool)].mean(), rel=1e-9)


@pytest.mark.parametrize("driving", ["weights", "functions"])
def test_a_linear_net_on_the_identity_inputs_is_weight_space_svgd(driving):
    """f_i = I W_i = W_i: distances, kernel and Jacobian (the identity) are those of the weights."""
    g = torch.Generator().manual_seed(1)
    W = torch.nn.Parameter(torch.randn(6, 4, 3, generator=g, dtype=F64))
    grad = torch.randn(6, 12, generator=g, dtype=F64)
    eye = torch.eye(4, dtype=F64)
    k = make_kernel({"name": "rbf", "bandwidth": "s2vgd"})
    fk = make_kernel({**k.spec(), "space": "functions", "states": 4, "driving": driving})
    phi, info = function_space_direction((eye @ W).flatten(1), [W], grad, kernel=fk)
    ref, ref_info = svgd_direction(W.detach().flatten(1), grad, kernel=k)
    torch.testing.assert_close(phi, ref, rtol=1e-10, atol=1e-12)
    for key in ("bandwidth", "kernel_mean", "mean_pairwise_distance", "repulsive_norm"):
        torch.testing.assert_close(info[key], ref_info[key], rtol=1e-10, atol=1e-12)


def test_groups_are_coupled_only_within_themselves():
    params, f, grad = tiny(M=6, seed=2)
    k = make_kernel({"name": "rbf", "space": "functions", "states": 5, "driving": "functions"})
    phi, info = function_space_direction(f(params), params, grad, kernel=k, groups=2)
    for s in range(2):
        rows = slice(3 * s, 3 * s + 3)
        alone = [torch.nn.Parameter(p.detach()[rows].clone()) for p in params]
        ref, ref_info = function_space_direction(f(alone), alone, grad[rows], kernel=k)
        torch.testing.assert_close(phi[rows], ref, rtol=1e-10, atol=1e-12)
        torch.testing.assert_close(info["bandwidth"][s], ref_info["bandwidth"])


def test_parameters_the_outputs_do_not_reach_keep_the_weight_space_driving_term():
    params, f, grad = tiny(M=4, seed=3)
    extra = torch.nn.Parameter(torch.randn(4, 2, dtype=F64))  # e.g. a prior's own per-particle parameter
    g_extra = torch.randn(4, 2, dtype=F64)
    k = make_kernel({"name": "rbf", "bandwidth": 1.0, "space": "functions", "states": 5, "driving": "functions"})
    phi, _ = function_space_direction(f(params), [*params, extra], torch.cat([grad, g_extra], 1), kernel=k)
    fv = f(params).detach()
    K = torch.exp(-torch.cdist(fv, fv).square() / 1.0)
    torch.testing.assert_close(phi[:, -2:], K @ g_extra / 4, rtol=1e-10, atol=1e-12)


def test_the_particle_optimizer_asks_for_the_outputs():
    params, f, _ = tiny()
    opt = ParticleOptimizer(params, SteinCoupling({"space": "functions", "states": 5}), lr=0.1, optimizer="sgd")
    objective = -sum(p.square().reshape(4, -1).sum(1) for p in params)
    with pytest.raises(ValueError, match="outputs"):
        opt.step(objective)
    before = flatten([p.detach() for p in params]).clone()
    info = opt.step(-sum(p.square().reshape(4, -1).sum(1) for p in params), embed=lambda: f(params)).coupling_stats
    assert not torch.equal(before, flatten([p.detach() for p in params])) and float(info["repulsive_norm"]) > 0


def test_rl_agent_shares_b_states_per_seed_and_rejects_a_b_larger_than_the_batch():
    over = {"particles": 3, "rollout.batch_size": 40, "rollout.envs_per_particle": 2, "rollout.sampling": "continuing",
            "update.kernel": {"space": "functions", "states": 8}, "rollout.env_backend": "torch"}
    cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", over)
    trainer = steinrl.Trainer(cfg, [0, 1])
    trainer.step_seeds()
    states = trainer.job.agent.shared_states  # (G·M, B, obs_dim), normalised as the policy sees them
    assert states.shape == (6, 8, 4)
    for s in range(2):
        group = states[3 * s:3 * s + 3]
        assert torch.equal(group[0], group[1]) and torch.equal(group[0], group[2])  # one set per seed
    assert not torch.equal(states[0], states[3])
    assert cfg.replace({"update.kernel": {"states": 120}}).update.kernel["states"] == 120  # 3 particles x 40: all
    with pytest.raises(steinrl.ConfigError, match=r"update.kernel states 121 .* = 120\)"):
        cfg.replace({"update.kernel": {"states": 121}})  # refused with the config (a sweep: before Ray starts)
    with pytest.raises(steinrl.ConfigError, match="states"):
        steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {"update.kernel": {"space": "functions", "states": 1}})


def test_shared_states_repeat_the_real_samples_where_a_seed_holds_fewer_than_b():
    """Short episodes compacted can leave a seed fewer real samples than B (2 particles x 3 slots,
    4 of them real, B = 6; it once raised a shape error): the 4 real ones, each drawn, then repeated
    in their order, never a padding slot; with enough real samples, B distinct real ones."""
    from steinrl.rl.draws import Draws
    from steinrl.rl.embedding import shared_states

    obs = torch.arange(1.0, 7.0).reshape(2, 3, 1)  # (M, n, 1): values 1..6
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])  # 3 and 6 are padding
    draws = Draws([0])
    draws.begin(0)
    picked = shared_states(obs, mask, 6, draws)  # (M, B, 1)
    values = picked[0, :, 0].tolist()
    assert picked.shape == (2, 6, 1) and torch.equal(picked[0], picked[1])
    assert sorted(values[:4]) == [1.0, 2.0, 4.0, 5.0] and values[4:] == values[:2]
    draws.begin(1)
    full = shared_states(obs, torch.ones(2, 3), 6, draws)[0, :, 0].tolist()
    assert sorted(full) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


def test_a_bandit_b_larger_than_the_refit_minibatch_is_refused_with_the_config():
    over = {"protocol.minibatch": 32}
    assert steinrl.load_config("svgd-ts", "Mushroom", {**over, "update.kernel": {"space": "functions", "states": 32}})
    with pytest.raises(steinrl.ConfigError, match=r"kernel states 33 .*protocol.minibatch 32"):
        steinrl.load_config("svgd-ts", "Mushroom", {**over, "update.kernel": {"space": "functions", "states": 33}})


def test_a_resumed_function_space_run_continues_exactly(tmp_path):
    over = {"particles": 3, "rollout.batch_size": 40, "rollout.envs_per_particle": 2, "rollout.sampling": "continuing",
            "update.kernel": {"space": "functions", "states": 16, "driving": "functions"}}
    cfg = steinrl.load_config("svgd-ppo", "CartpoleSwingUp", {**over, "estimator.minibatches": 2})
    straight = steinrl.Trainer(cfg)
    rows = [straight.step() for _ in range(3)]
    first = steinrl.Trainer(cfg)
    first.step(), first.step()
    first.save(tmp_path / "c.pt")
    again = steinrl.Trainer(cfg).restore(tmp_path / "c.pt")
    last = again.step()
    want = {k: v for k, v in rows[-1].items() if not k.startswith("time/")}
    assert {k: v for k, v in last.items() if not k.startswith("time/")} == pytest.approx(want, rel=0, abs=0,
                                                                                         nan_ok=True)
    assert float(rows[-1]["train/repulsive_norm"]) > 0
    for a, b in zip(again.job.agent.policy.parameters(), straight.job.agent.policy.parameters()):
        assert torch.equal(a, b)
