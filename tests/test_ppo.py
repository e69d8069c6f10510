"""PPO's recipe, detail by detail, against hand computations and independent references:
the minibatch partition, per-minibatch advantage normalisation, the clipped surrogate,
per-particle gradient clipping, learning-rate annealing, reward scaling (SB3's
``RunningMeanStd`` arithmetic), orthogonal init, the truncation bootstrap, one PPO update
at M = 1 against SB3's loss written out in plain torch, and exact resumption with the
normalisation statistics."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from stable_baselines3.common.running_mean_std import RunningMeanStd

import steinrl
from steinrl.core.ensemble import EnsembleMLP, orthogonal_
from steinrl.core.particle_optimizer import clip_grad_norms
from steinrl.rl.critics import ValueEnsemble
from steinrl.rl.draws import iteration_seed
from steinrl.rl.estimators import ESTIMATORS
from steinrl.rl.estimators.ppo import PPOSettings, standardize_minibatch
from steinrl.rl.estimators.returns import running_returns
from steinrl.rl.minibatches import minibatch_indices, take
from steinrl.rl.normalization import RewardScaler
from steinrl.rl.policy import ObsNormalizer
from steinrl.rl.samples import compact

#: float tolerances: .ci/run reruns this module under the forced CPU kernel sets
pytestmark = pytest.mark.numerics

#: The recipe's switches (configs/presets/mujoco-ppo.yaml), on a small batch.
RECIPE = {"estimator.minibatches": 4, "estimator.epochs": 2, "estimator.normalize_per_minibatch": True,
          "estimator.max_grad_norm": 0.5, "estimator.anneal_lr": True, "estimator.scale_rewards": True,
          "estimator.ent_coef": 0.01, "critic.joint": True, "critic.clip_range_vf": 0.2,
          "policy.normalize_obs": True, "policy.init": "orthogonal", "critic.init": "orthogonal",
          "policy.output_gain": 0.01, "rollout.sampling": "continuing"}


def config(algo="independent-ppo", env="Pendulum-v1", **over):
    return steinrl.load_config(algo, env, {"particles": 1, "rollout.batch_size": 64, "rollout.envs_per_particle": 2,
                                           "rollout.horizon": 50, "seed": 3, "iterations": 5, **over})


# --- minibatches ----------------------------------------------------------------------------
def keys_of(generators, n, per_group):
    """Shuffle keys ``(G · per_group, n)`` as the agent draws them: ``(n, per_group)`` per group, transposed."""
    return torch.cat([torch.rand((n, per_group), generator=g).T for g in generators])


def test_minibatch_partition_covers_every_particles_samples_once_in_near_equal_parts():
    counts = [10, 7, 3, 0, 12]
    n, K = 12, 3
    mask = (torch.arange(n) < torch.tensor(counts)[:, None]).float()  # real samples first, as compact lays them out
    idx, part_mask = minibatch_indices(mask, K, keys_of([torch.Generator().manual_seed(0)], n, 5))
    assert idx.shape == part_mask.shape == (K, 5, 4)  # b = ceil(12 / 3)
    for i, n_i in enumerate(counts):
        parts = [idx[k, i][part_mask[k, i] > 0].tolist() for k in range(K)]
        # part k holds ranks [k n_i // K, (k + 1) n_i // K): sizes by hand
        assert [len(p) for p in parts] == [(k + 1) * n_i // K - k * n_i // K for k in range(K)]
        assert sorted(sum(parts, [])) == list(range(n_i))  # every real sample once, no padding
    # a shuffle: particle 0's first part is not its first samples in order (for this seed)
    assert idx[0, 0][part_mask[0, 0] > 0].tolist() != [0, 1, 2]


def test_a_groups_shuffle_does_not_depend_on_the_other_groups_samples():
    """Seeds in one batch: a group's minibatches are those of the group alone (its own
    generator; the width of the batch only adds masked padding)."""
    alone = (torch.arange(6) < torch.tensor([6, 4])[:, None]).float()  # one group of 2 particles
    wide = torch.zeros(4, 9)
    wide[:2, :6] = alone
    wide[2:, :9] = 1.0  # the other group has more samples, so the batch is 9 columns wide
    gens = [torch.Generator().manual_seed(5), torch.Generator().manual_seed(6)]
    idx_a, m_a = minibatch_indices(alone, 2, keys_of(gens[:1], 6, 2))
    idx_w, m_w = minibatch_indices(wide, 2, keys_of([torch.Generator().manual_seed(5), gens[1]], 9, 2))
    for k in range(2):
        for i in range(2):
            assert idx_a[k, i][m_a[k, i] > 0].tolist() == idx_w[k, i][m_w[k, i] > 0].tolist()


def test_take_gathers_columns_with_trailing_dims():
    x = torch.arange(2 * 4 * 3).view(2, 4, 3)
    got = take(x, torch.tensor([[3, 0], [1, 1]]))
    assert got.tolist() == [[x[0, 3].tolist(), x[0, 0].tolist()], [x[1, 1].tolist(), x[1, 1].tolist()]]


def test_an_update_moves_the_particles_once_per_minibatch_per_epoch(monkeypatch):
    trainer = steinrl.Trainer(config(**{"estimator.minibatches": 3, "estimator.epochs": 2}))
    agent = trainer.job.agent
    calls = []
    step = agent.particle_optimizer.step
    monkeypatch.setattr(agent.particle_optimizer, "step", lambda *a, **k: calls.append(1) or step(*a, **k))
    trainer.step()
    assert len(calls) == 6


# --- advantages, surrogate, clipping ----------------------------------------------------------
def test_per_minibatch_standardisation_uses_the_unbiased_std_over_real_samples():
    adv = torch.tensor([[1.0, 2.0, 4.0, 99.0], [3.0, 99.0, 99.0, 99.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    got = standardize_minibatch(adv, mask)
    x = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(got[0, :3].numpy(), (x - x.mean()) / (x.std(ddof=1) + 1e-8), rtol=1e-6)
    assert got[1, 0] == 3.0  # one sample: left as it is (SB3 skips normalising a minibatch of one)


def test_clipped_surrogate_by_hand_and_no_gradient_through_the_clipped_side():
    ppo = ESTIMATORS.get("ppo")(PPOSettings(clip_range=0.2))
    ratios = torch.tensor([[0.5, 1.0, 1.5, 1.1, 0.7]])
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0, -2.0]])
    log_prob = ratios.log().requires_grad_()
    surrogate = ppo.surrogate(log_prob, torch.zeros_like(ratios), adv, torch.ones_like(ratios))
    # min(r A, clip(r, 0.8, 1.2) A): 0.5; -1; 1.2 (clipped); -1.1; min(-1.4, -1.6) = -1.6 (clipped)
    assert surrogate.item() == pytest.approx((0.5 - 1.0 + 1.2 - 1.1 - 1.6) / 5, rel=1e-6)
    surrogate.sum().backward()
    expected = torch.tensor([0.5, -1.0, 0.0, -1.1, 0.0]) / 5  # d(r A)/d log r = r A where unclipped
    torch.testing.assert_close(log_prob.grad[0], expected)
    diag = ppo.diagnostics(log_prob.detach(), torch.zeros_like(ratios), torch.ones_like(ratios))
    assert diag["clip_fraction"].item() == pytest.approx(3 / 5)  # |r - 1| > 0.2: 0.5, 1.5, 0.7
    r = ratios[0].double()
    assert diag["approx_kl"].item() == pytest.approx(float(((r - 1) - r.log()).mean()), rel=1e-5)


def test_per_minibatch_normalisation_happens_in_the_surrogate_and_not_on_the_batch():
    ppo = ESTIMATORS.get("ppo")(PPOSettings(normalize_per_minibatch=True))
    adv = torch.tensor([[2.0, 4.0, 9.0]])
    log_prob = torch.zeros(1, 3, requires_grad=True)
    ppo.surrogate(log_prob, torch.zeros(1, 3), adv, torch.ones(1, 3)).sum().backward()
    x = np.array([2.0, 4.0, 9.0])
    np.testing.assert_allclose(log_prob.grad[0].numpy(), (x - x.mean()) / (x.std(ddof=1) + 1e-8) / 3, rtol=1e-6)


def test_gradient_norms_are_clipped_per_particle_as_torch_clips_one_model():
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.zeros(3, 4, 2)), torch.nn.Parameter(torch.zeros(3, 5))]
    grads = [torch.randn(3, 4, 2) * torch.tensor([3.0, 0.01, 1.0])[:, None, None],
             torch.randn(3, 5) * torch.tensor([3.0, 0.01, 1.0])[:, None]]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    norms = clip_grad_norms(params, max_norm=0.5)
    for i in range(3):  # the reference: torch's clip_grad_norm_ on particle i's parameters alone
        alone = [torch.nn.Parameter(g[i].clone()) for g in grads]
        for a, g in zip(alone, grads):
            a.grad = g[i].clone()
        total = torch.nn.utils.clip_grad_norm_(alone, 0.5)
        assert norms[i].item() == pytest.approx(total.item(), rel=1e-6)
        for p, a in zip(params, alone):
            torch.testing.assert_close(p.grad[i], a.grad)
    assert norms[1] < 0.5 and torch.equal(params[1].grad[1], grads[1][1])  # small gradients untouched


def test_entropy_bonus_drives_the_log_std_by_ent_coef_over_the_temperature():
    """Zero advantages: the only gradient on the (own-Adam) log-std is the entropy bonus's,
    d(c H / alpha)/d log_std = c / alpha per action dimension."""
    c, alpha = 0.05, 4.0
    trainer = steinrl.Trainer(config(**{"estimator.ent_coef": c, "temperature": alpha}))
    agent, estimator = trainer.job.agent, trainer.job.estimator
    batch = agent.collect(trainer.job.sampler, 0)
    est = estimator.advantages(batch, agent.critic)
    est.advantages.zero_()
    samples = compact(batch, est.advantages, est.value_targets, agent.device)
    with torch.no_grad():
        old_log_prob = agent.policy.log_prob(samples.obs, samples.actions)[0]
    log_prob, entropy = agent.policy.log_prob(samples.obs, samples.actions)
    surrogate = estimator.surrogate(log_prob, old_log_prob, samples.advantages, samples.mask)
    agent.particle_optimizer.step(surrogate + c * entropy)
    torch.testing.assert_close(agent.policy.head.log_std.grad, torch.full_like(agent.policy.head.log_std, -c / alpha))


# --- learning rate ----------------------------------------------------------------------------
def test_learning_rates_anneal_linearly_to_zero_over_the_run():
    cfg = config(**{"estimator.anneal_lr": True, "critic.joint": True, "iterations": 10, "update.lr": 2e-3,
                    "critic.lr": 1e-3})
    trainer = steinrl.Trainer(cfg)
    job, agent = trainer.job, trainer.job.agent
    batch = agent.collect(trainer.job.sampler, 0)
    for it in (0, 3, 9):
        job.set_step_sizes(it)
        job.learn(batch)
        frac = 1 - it / 10  # CleanRL: full lr at the first update, lr / iterations at the last
        assert agent.particle_optimizer.torch_optimizer.param_groups[0]["lr"] == pytest.approx(2e-3 * frac, rel=1e-12)
        assert agent.particle_optimizer.own_optimizer.param_groups[0]["lr"] == pytest.approx(2e-3 * frac, rel=1e-12)
        assert agent.critic.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * frac, rel=1e-12)
    still = steinrl.Trainer(config(**{"iterations": 10, "update.lr": 2e-3}))
    batch = still.job.agent.collect(still.job.sampler, 0)
    still.job.set_step_sizes(9)
    still.job.learn(batch)
    assert still.job.agent.particle_optimizer.lr == 2e-3


# --- reward scaling ---------------------------------------------------------------------------
def test_running_returns_by_hand():
    r = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    valid = torch.tensor([1, 1, 1, 0, 1, 1]).bool()  # step 3: an autoreset step, skipped
    done = torch.tensor([0, 1, 0, 0, 0, 0]).bool()
    got = running_returns(r, valid, done, 0.5, torch.tensor(10.0))
    # 0.5 * 10 + 1; 0.5 * 6 + 2 (episode ends); 3 (restart); 3 (skipped); 0.5 * 3 + 5; 0.5 * 6.5 + 6
    assert got.tolist() == [6.0, 5.0, 3.0, 3.0, 6.5, 9.25]


def _sb3_reward_scaling(batches, gamma, n_envs):
    """SB3's VecNormalize reward path, step by step: returns = returns * gamma + r (valid
    envs only), ret_rms.update(returns), r / sqrt(var + 1e-8) clipped to 10, returns[done] = 0."""
    rms, ret, out = RunningMeanStd(shape=()), np.zeros(n_envs), []
    for rewards, valid, done in batches:
        scaled = np.zeros_like(rewards)
        for t in range(len(rewards)):
            v = valid[t]
            ret[v] = ret[v] * gamma + rewards[t][v]
            if v.any():
                rms.update(ret[v])
            scaled[t][v] = np.clip(rewards[t][v] / np.sqrt(rms.var + 1e-8), -10, 10)
            ret[v & done[t]] = 0.0
        out.append(scaled)
    return out, rms


def test_reward_scaling_matches_sb3s_running_statistics_across_batches():
    rng = np.random.default_rng(0)
    T, E, gamma = 40, 3, 0.9
    batches = [(rng.normal(3.0, 5.0, (T, E)), rng.random((T, E)) > 0.1, rng.random((T, E)) < 0.1) for _ in range(3)]
    expected, rms = _sb3_reward_scaling(batches, gamma, E)
    scaler = RewardScaler(groups=1, gamma=gamma)
    for (rewards, valid, done), want in zip(batches, expected):
        got = scaler(torch.tensor(rewards).view(T, 1, E), torch.tensor(valid).view(T, 1, E),
                     torch.tensor(done).view(T, 1, E), torch.zeros(1, E, dtype=torch.bool))
        np.testing.assert_allclose(got.view(T, E).numpy(), want, rtol=1e-5, atol=1e-6)
    assert scaler.mean.item() == pytest.approx(rms.mean, rel=1e-10)
    assert scaler.var.item() == pytest.approx(rms.var, rel=1e-10)
    assert scaler.count.item() == pytest.approx(rms.count, rel=1e-12)


def test_reward_scaling_keeps_one_scale_per_group_and_drops_the_return_of_a_fresh_episode():
    rng = np.random.default_rng(1)
    T, gamma = 30, 0.95
    batches = [(rng.normal([[5.0, 5.0, -50.0, -50.0]], [[1.0, 1.0, 30.0, 30.0]], (T, 4)), rng.random((T, 4)) > 0.1,
                rng.random((T, 4)) < 0.05) for _ in range(2)]
    scaler = RewardScaler(groups=2, gamma=gamma)  # particles (0, 1) and (2, 3), one env each
    got = [scaler(*(torch.tensor(x).view(T, 4, 1) for x in b), torch.zeros(4, 1, dtype=torch.bool)).view(T, 4).numpy()
           for b in batches]
    for g in range(2):
        cols = slice(2 * g, 2 * g + 2)
        want, rms = _sb3_reward_scaling([tuple(x[:, cols] for x in b) for b in batches], gamma, 2)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a[:, cols], b, rtol=1e-5, atol=1e-6)
        assert scaler.mean[g].item() == pytest.approx(rms.mean, rel=1e-10)
        assert scaler.var[g].item() == pytest.approx(rms.var, rel=1e-10)
    # the next batch's envs 0 and 2 start fresh episodes: their carried returns are dropped
    carried = scaler.returns.clone()
    scaler(torch.zeros(1, 4, 1), torch.ones(1, 4, 1, dtype=torch.bool), torch.zeros(1, 4, 1, dtype=torch.bool),
           torch.tensor([[True], [False], [True], [False]]))
    keep = torch.tensor([0.0, gamma, 0.0, gamma], dtype=torch.float64)
    torch.testing.assert_close(scaler.returns.view(-1), carried.view(-1) * keep)


# --- init -------------------------------------------------------------------------------------
def test_orthogonal_init_is_semi_orthogonal_with_the_gains_and_sign_symmetric():
    net = EnsembleMLP(3, 5, (16, 16), 2, init="orthogonal", output_gain=0.01,
                      generator=torch.Generator().manual_seed(0))
    (w0, b0), (w1, _), (w2, _) = net.dense()
    torch.testing.assert_close(w0 @ w0.mT, 2.0 * torch.eye(5).expand(3, 5, 5), atol=1e-5, rtol=0)  # rows: in < out
    torch.testing.assert_close(w1.mT @ w1, 2.0 * torch.eye(16).expand(3, 16, 16), atol=1e-5, rtol=0)
    torch.testing.assert_close(w2.mT @ w2, 1e-4 * torch.eye(2).expand(3, 2, 2), atol=1e-8, rtol=0)
    assert float(b0.detach().abs().max()) == 0.0 and not torch.allclose(w1[0], w1[1])
    # Haar: every entry has mean 0 and variance 1/n (QR's signs fixed); 4000 draws of 8 x 8
    w = orthogonal_(torch.empty(4000, 8, 8), generator=torch.Generator().manual_seed(1))
    assert abs(float(w[:, 0, 0].mean())) < 4 * math.sqrt(1 / 8 / 4000)
    assert float(w[:, 0, 0].square().mean()) == pytest.approx(1 / 8, rel=0.1)


def test_the_recipe_config_builds_orthogonal_policy_and_critic():
    agent = steinrl.Trainer(config(**RECIPE)).job.agent
    w_pi = agent.policy.net.layers[-1].W
    w_v0 = agent.critic.net.layers[0].W
    torch.testing.assert_close(w_pi.mT @ w_pi, 1e-4 * torch.eye(w_pi.shape[2]).expand_as(w_pi.mT @ w_pi),
                               atol=1e-8, rtol=0)
    torch.testing.assert_close(w_v0 @ w_v0.mT, 2.0 * torch.eye(w_v0.shape[1]).expand_as(w_v0 @ w_v0.mT),
                               atol=1e-5, rtol=0)


def test_adam_eps_reaches_every_optimizer_and_defaults_stay():
    """``update.optimizer_eps`` and ``critic.eps`` (SB3's PPO: 1e-5) set eps of the particle
    update's optimizer, the head's own Adam and the value networks' Adam; unset, each keeps
    its optimizer's default (Adam 1e-8, TF-style RMSprop 1e-10)."""
    def eps_of(agent):
        particles = agent.particle_optimizer
        return [opt.param_groups[0]["eps"]
                for opt in (particles.torch_optimizer, particles.own_optimizer, agent.critic.optimizer)]

    assert eps_of(steinrl.Trainer(config(**RECIPE)).job.agent) == [1e-8, 1e-8, 1e-8]
    sb3_like = config(**RECIPE, **{"update.optimizer_eps": 1e-5, "critic.eps": 1e-5})
    assert eps_of(steinrl.Trainer(sb3_like).job.agent) == [1e-5, 1e-5, 1e-5]
    rmsprop = steinrl.Trainer(config(**{"update.optimizer": "rmsprop_tf"})).job.agent
    assert rmsprop.particle_optimizer.torch_optimizer.param_groups[0]["eps"] == 1e-10
    sgd = steinrl.Trainer(config(**{"update.optimizer": "sgd", "update.optimizer_eps": 1e-5})).job.agent
    assert "eps" not in sgd.particle_optimizer.torch_optimizer.param_groups[0] and \
        sgd.particle_optimizer.own_optimizer.param_groups[0]["eps"] == 1e-5
    with pytest.raises(steinrl.ConfigError, match="optimizer_eps"):
        config(**{"update.optimizer_eps": 0.0})


# --- value loss, truncation -------------------------------------------------------------------
def test_value_clipping_by_hand():
    critic = ValueEnsemble(1, 2, ObsNormalizer(2, False), hidden=(4,), joint=True, clip_range_vf=0.2)
    with torch.no_grad():
        critic.net.layers[-1].W.zero_()
        critic.net.layers[-1].bias.fill_(1.0)  # V = 1 everywhere
    obs, targets, mask = torch.zeros(1, 3, 2), torch.tensor([[0.0, 1.0, 3.0]]), torch.ones(1, 3)
    loss = critic.value_loss(obs, targets, mask, old_values=torch.tensor([[0.0, 0.5, 1.1]]))
    # predictions clipped to old ± 0.2: 0.2, 0.7, 1.0
    assert loss.item() == pytest.approx((0.2 ** 2 + 0.3 ** 2 + 2.0 ** 2) / 3, rel=1e-6)
    assert critic.value_loss(obs, targets, mask).item() == pytest.approx((1 + 0 + 4) / 3, rel=1e-6)


def test_time_limit_truncation_bootstraps_from_the_final_observation():
    """Pendulum never terminates: every episode end is a time-limit truncation, whose
    advantage bootstraps from V(final observation) (SB3 adds gamma V(terminal obs))."""
    trainer = steinrl.Trainer(config(**{"rollout.horizon": 7, "estimator.gae_lambda": 0.0,
                                        "estimator.normalize_advantages": False}))
    agent = trainer.job.agent
    batch = agent.collect(trainer.job.sampler, 0)
    values = agent.critic.values(batch)  # (T + 1, M, E)
    adv = trainer.job.estimator.advantages(batch, agent.critic).advantages
    ends = batch.done & batch.valid
    assert int(ends.sum()) >= 4 and not bool(batch.terminated.any())
    want = batch.rewards.double() + 0.99 * values[1:] - values[:-1]  # lambda 0: one TD error
    torch.testing.assert_close(adv[ends], want[ends])
    assert not torch.allclose(adv[ends], (batch.rewards.double() - values[:-1])[ends])  # not treated as terminal


@pytest.mark.parametrize("when", ["after-update", "before-update"])
def test_ppo_old_log_probabilities_are_the_sampling_policys(when):
    """With normalize_obs (default ``policy.obs_stats_update: after-update``, as SB3's VecNormalize)
    the update's old log-probabilities are those of the policy that acted: the first rollout
    acts on observations normalised by the initial statistics (mean 0, var 1: only the clip at
    10), and its batch enters the statistics after the update. The other order re-normalises
    the batch with statistics that include it, so the old log-probabilities are not the
    sampling policy's (on Hopper-v5 the first batch then lay ~40 std from the policy and the
    PPO ratio overflowed)."""
    cfg = config("independent-ppo", "Pendulum-v1", **{**RECIPE, "particles": 2, "policy.obs_stats_update": when})
    trainer = steinrl.Trainer(cfg)
    agent = trainer.job.agent
    batch = agent.collect(trainer.job.sampler, 0)
    valid = batch.valid
    assert float(agent.policy.obs_norm.count) == pytest.approx(1e-4 + (0 if when == "after-update" else valid.sum()))
    # the sampling policy's log-density, by hand: N(mu(clip(obs, -10, 10)), std) per action dim
    obs, actions = batch.obs[:-1][valid].double().clamp(-10, 10), batch.actions[valid].double()  # (n, d), (n, 1)
    particle = torch.arange(2).view(1, 2, 1).expand_as(valid)[valid]
    with torch.no_grad():
        mu = torch.stack([agent.policy.net.particle_module(m)(obs.float()).double() for m in range(2)])  # (2, n, 1)
    std = agent.policy.head.log_std.detach().double().exp()  # (2, 1)
    z = (actions - mu[particle, torch.arange(len(particle))]) / std[particle]
    want = (-0.5 * z.square() - std[particle].log() - 0.5 * math.log(2 * math.pi)).sum(-1)
    seen = []
    estimator = trainer.job.estimator
    surrogate = estimator.surrogate
    estimator.surrogate = lambda log_prob, old, *rest: seen.append(old) or surrogate(log_prob, old, *rest)
    trainer.job.set_step_sizes(0)
    trainer.job.learn(batch)
    got = torch.cat([seen[0][m][torch.isfinite(seen[0][m])] for m in range(2)]).double()  # one minibatch's
    # each old log-probability of the first minibatch is one of the sampling policy's, to float rounding
    closest = (got[:, None] - want[None, :]).abs().min(1).values
    if when == "after-update":
        assert closest.max() < 1e-4
        batch_obs = batch.obs[:-1][valid].double()
        torch.testing.assert_close(agent.policy.obs_norm.mean, batch_obs.mean(0), rtol=1e-3, atol=1e-4)
        torch.testing.assert_close(agent.policy.obs_norm.var, batch_obs.var(0, unbiased=False), rtol=1e-3, atol=1e-4)
    else:
        assert closest.max() > 1e-2


# --- one update against SB3's loss ------------------------------------------------------------
def _sb3_reference(agent, samples, parts, lr, ent_coef, vf_coef, max_grad_norm, clip):
    """SB3's PPO.train minibatch loop on plain torch modules copied from particle 0."""
    pi, vf = agent.policy.net.particle_module(0), agent.critic.net.particle_module(0)
    log_std = torch.nn.Parameter(agent.policy.head.log_std.detach()[0].clone())
    params = [*pi.parameters(), log_std, *vf.parameters()]
    opt = torch.optim.Adam(params, lr=lr)
    for idx in parts:
        obs, actions = samples["obs"][0, idx], samples["actions"][0, idx]  # normalised by the agent
        dist = torch.distributions.Normal(pi(obs), log_std.exp())
        log_prob, values = dist.log_prob(actions).sum(-1), vf(obs).flatten()
        advantages = samples["advantages"][0, idx]
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        ratio = torch.exp(log_prob - samples["old_log_prob"][0, idx])
        policy_loss = -torch.min(advantages * ratio, advantages * torch.clamp(ratio, 1 - clip, 1 + clip)).mean()
        value_loss = F.mse_loss(samples["targets"][0, idx], values)
        loss = policy_loss + ent_coef * -dist.entropy().sum(-1).mean() + vf_coef * value_loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
        opt.step()
    return pi, log_std, vf


def test_one_update_at_one_particle_is_sb3s_ppo_update():
    over = {**RECIPE, "estimator.scale_rewards": False, "estimator.anneal_lr": False, "critic.clip_range_vf": None,
            "temperature": 1.0, "prior.weight": 0.0, "update.lr": 1e-2, "critic.lr": 1e-2, "critic.hidden": [16],
            "policy.hidden": [16], "rollout.batch_size": 96, "estimator.clip_range": 0.05}
    trainer = steinrl.Trainer(config(**over))
    trainer.step()  # the first iteration: observation statistics, Adam moments
    agent = trainer.job.agent
    batch = agent.collect(trainer.job.sampler, 1)
    est = trainer.job.estimator.advantages(batch, agent.critic)
    data = compact(batch, est.advantages, est.value_targets, agent.device)
    with torch.no_grad():  # what the update trains on: observations normalised, the sampling policy's log-probs
        samples = {"obs": agent.policy.obs_norm(data.obs), "actions": data.actions, "advantages": data.advantages,
                   "old_log_prob": agent.policy.log_prob(data.obs, data.actions)[0], "targets": data.targets.float(),
                   "mask": data.mask}
    gen = torch.Generator().manual_seed(iteration_seed(3, 1) + 2)  # the update's own stream
    parts = []
    for _ in range(2):  # epochs
        idx, mask = minibatch_indices(samples["mask"], 4, keys_of([gen], samples["mask"].shape[1], 1))
        parts += [idx[k, 0][mask[k, 0] > 0] for k in range(4)]
    particles = agent.particle_optimizer
    fresh = [torch.optim.Adam(o.param_groups[0]["params"], lr=1e-2)
             for o in (particles.torch_optimizer, particles.own_optimizer,
                       agent.critic.optimizer)]  # SB3's Adam starts fresh
    particles.torch_optimizer, particles.own_optimizer, agent.critic.optimizer = fresh
    pi, log_std, vf = _sb3_reference(agent, samples, parts, 1e-2, 0.01, 0.5, 0.5, 0.05)
    trainer.job.set_step_sizes(1)
    stats = trainer.job.learn(batch)
    assert 0.05 < float(stats.extra["clip_fraction"]) < 0.95 and float(stats.extra["grad_norm"]) > 0.5  # both clip
    ours = agent.policy.net.particle_module(0)
    for a, b in zip(ours.parameters(), pi.parameters()):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=1e-4)
    torch.testing.assert_close(agent.policy.head.log_std[0].detach(), log_std.detach(), atol=2e-6, rtol=1e-4)
    for a, b in zip(agent.critic.net.particle_module(0).parameters(), vf.parameters()):
        torch.testing.assert_close(a, b, atol=2e-6, rtol=1e-4)


# --- state ------------------------------------------------------------------------------------
@pytest.mark.parametrize("algo,env,extra", [
    ("svgd-ppo", "CartpoleSwingUp", {"particles": 3}),  # continuing episodes carried exactly (steinrl's task)
    ("independent-ppo", "Hopper-v5", {"rollout.sampling": "whole_episodes", "rollout.horizon": 40}),  # MuJoCo
])
def test_a_restored_run_continues_exactly_normalisation_statistics_included(tmp_path, algo, env, extra):
    cfg = config(algo, env, **{**RECIPE, **extra})

    def state(trainer):
        agent = trainer.job.agent
        stats = {**trainer.job.estimator.reward_scaler.state_dict(), **agent.policy.obs_norm.state_dict()}
        return {k: v.clone() for k, v in stats.items()}

    straight = steinrl.Trainer(cfg)
    rows = [straight.step() for _ in range(3)]
    first = steinrl.Trainer(cfg)
    first.step(), first.step()
    saved = state(first)
    first.save(tmp_path / "c.pt")
    again = steinrl.Trainer(cfg)
    again.restore(tmp_path / "c.pt")
    restored = state(again)
    assert saved.keys() == restored.keys() and all(torch.equal(saved[k], restored[k]) for k in saved)
    assert "returns" in saved and float(again.job.estimator.reward_scaler.count) > 100
    last = again.step()
    assert {k: v for k, v in last.items() if not k.startswith("time/")} == \
        {k: v for k, v in rows[-1].items() if not k.startswith("time/")}
    for a, b in zip(again.job.agent.policy.particle_parameters(), straight.job.agent.policy.particle_parameters()):
        assert torch.equal(a, b)
    assert all(torch.equal(a, b) for a, b in zip(state(again).values(), state(straight).values()))


def test_each_seed_of_a_batch_runs_the_recipe_as_it_would_alone(tmp_path):
    """Minibatch shuffles, reward scales and clipping are per seed: a 2-seed batch is each seed
    alone, and a seed's checkpoint (its reward statistics and returns included) continues alone."""
    recipe = {k: v for k, v in RECIPE.items() if k != "policy.normalize_obs"}  # shared statistics: not for batches
    cfg = config("svgd-ppo", "CartpoleSwingUp", **{**recipe, "particles": 2, "rollout.env_backend": "torch",
                                                     "rollout.batch_size": 40})
    keys = ("rollout/ep_rew_max_particle", "train/surrogate", "train/value_loss", "train/clip_fraction",
            "train/grad_norm", "train/repulsive_norm")
    trainer = steinrl.Trainer(cfg, [3, 4])
    batched = [trainer.step_seeds() for _ in range(3)]
    rows = {}
    for s, seed in enumerate([3, 4]):
        alone = steinrl.Trainer(cfg.replace({"seed": seed}))
        rows[seed] = [alone.step() for _ in range(3)]
        for it in range(3):
            for key in keys:
                assert batched[it][s][key] == pytest.approx(rows[seed][it][key], rel=1e-3, abs=1e-5, nan_ok=True), \
                    (seed, it, key)
    first = steinrl.Trainer(cfg, [3, 4])
    first.step_seeds(), first.step_seeds()
    first.save(tmp_path / "s4.pt", 1)
    single = steinrl.Trainer(cfg.replace({"seed": 4})).restore(tmp_path / "s4.pt")
    assert single.job.estimator.reward_scaler.returns.shape == (2, 2)  # seed 4's own particles x envs
    row = single.step()
    for key in keys:
        assert row[key] == pytest.approx(rows[4][2][key], rel=1e-3, abs=1e-5, nan_ok=True), key


# --- target_kl --------------------------------------------------------------------------------
def test_target_kl_stops_at_the_first_minibatch_past_one_and_a_half_times_it(monkeypatch):
    """SB3's early stop, on the mean over the particles: every minibatch that stepped had a mean
    approx_kl at most 1.5 target_kl (the first, at the sampling policy, always steps), the one that
    passed it took no step, and none after it did."""
    target = 2e-4
    trainer = steinrl.Trainer(config(**{"particles": 3, "estimator.minibatches": 4, "estimator.epochs": 10,
                                        "estimator.target_kl": target, "update.lr": 3e-2}))
    agent = trainer.job.agent
    kls, steps = [], []
    diagnostics, step = trainer.job.estimator.diagnostics, agent.particle_optimizer.step
    monkeypatch.setattr(trainer.job.estimator, "diagnostics",
                        lambda *a: (d := diagnostics(*a)) and kls.append(float(d["approx_kl"].mean())) or d)
    monkeypatch.setattr(agent.particle_optimizer, "step", lambda *a, **k: steps.append(len(kls)) or step(*a, **k))
    row = trainer.step()
    assert 1 <= len(steps) < 40  # it stopped early
    assert len(kls) == len(steps) + 1 and kls[-1] > 1.5 * target  # the minibatch that passed took no step
    assert all(kl <= 1.5 * target for kl in kls[1:-1])
    assert row["train/ppo_epochs"] == -(-len(steps) // 4)  # epochs that took a step


def test_without_target_kl_every_epoch_runs_and_with_seeds_it_is_refused():
    cfg = config(**{"estimator.minibatches": 2, "estimator.epochs": 3})
    assert "train/ppo_epochs" not in steinrl.Trainer(cfg).step()
    with pytest.raises(steinrl.ConfigError, match="target_kl"):
        config(**{"estimator.target_kl": 0.0})
    batch = config("svgd-ppo", "CartpoleSwingUp", **{"estimator.target_kl": 0.01, "rollout.sampling": "continuing"})
    with pytest.raises(steinrl.ConfigError, match="seeds in one batch"):
        steinrl.Trainer(batch, [0, 1])
