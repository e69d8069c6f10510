"""The batched sampler against a naive one-env-at-a-time loop."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from steinrl.rl.rollout import Sampler
from steinrl.rl.tasks import HostTask

M, E, BUDGET, HORIZON = 3, 3, 90, 60


def policy_action(obs: np.ndarray, particle: int) -> int:
    """A deterministic, particle-dependent CartPole policy (some short, some long episodes)."""
    return int(obs[2] + (0.3 * particle - 0.3) * obs[3] > 0.0)


def naive_episodes(seed: int, whole: bool):
    """Per particle: its E single envs stepped in lockstep, one python step at a time,
    following the sampler's contract (an env starts a new episode only while the
    particle's steps so far, episodes in progress included, are below the budget)."""
    out = {}
    T_cut = -(-BUDGET // E)
    for m in range(M):
        envs = [gym.make("CartPole-v1", max_episode_steps=HORIZON) for _ in range(E)]
        obs = [env.reset(seed=seed + m * E + e)[0] for e, env in enumerate(envs)]
        state = ["run"] * E  # run | reset (next vector step resets) | stopped
        rets, lens, ep_ret, ep_len, completed, t = [], [], [0.0] * E, [0] * E, 0, 0
        while any(st != "stopped" for st in state) and (whole or t < T_cut):
            resetting = [st == "reset" for st in state]
            ended = []
            for e in range(E):
                if state[e] == "reset":  # next-step autoreset spends one vector step on the reset
                    obs[e], _ = envs[e].reset()
                    state[e] = "run"
                elif state[e] == "run":
                    obs[e], r, term, trunc, _ = envs[e].step(policy_action(obs[e], m))
                    ep_ret[e] += r
                    ep_len[e] += 1
                    if term or trunc:
                        rets.append(ep_ret[e])
                        lens.append(ep_len[e])
                        completed += ep_len[e]
                        ep_ret[e], ep_len[e] = 0.0, 0
                        state[e] = "reset"
                        ended.append(e)
            t += 1
            if whole and completed + sum(ep_len) >= BUDGET:  # steps so far, episodes in progress included
                for e in range(E):
                    if e in ended or resetting[e]:
                        state[e] = "stopped"
        steps = sum(lens) + (0 if whole else sum(ep_len))
        out[m] = (rets, steps)
    return out


def act(obs: np.ndarray, t: int) -> np.ndarray:
    return np.array([[policy_action(obs[m, e], m) for e in range(E)] for m in range(M)])


@pytest.mark.parametrize("whole", [True, False])
def test_sampler_matches_naive_loop(whole):
    venv = gym.make_vec("CartPole-v1", M * E, vectorization_mode="sync", max_episode_steps=HORIZON)
    sampler = Sampler(HostTask(venv), M, E, HORIZON)
    batch = sampler.collect(act, BUDGET, mode="whole_episodes" if whole else "cut", seed=123)
    ref = naive_episodes(123, whole)
    valid, done, rewards, timestep = (x.numpy() for x in (batch.valid, batch.done, batch.rewards, batch.timestep))
    for m in range(M):
        expected = sorted(ref[m][0])
        assert sorted(batch.episodes()[0][m].tolist()) == expected
        steps = ref[m][1]
        assert valid[:, m].sum() == steps
        if whole:
            assert steps >= BUDGET
            # whole episodes: every valid step belongs to a completed episode
            assert batch.episodes()[1][m].sum() == steps
            assert rewards[:, m][valid[:, m]].sum() == pytest.approx(sum(expected))
    # timestep: obs[t]'s index within its episode (the final obs carries the episode length)
    ts = np.zeros_like(timestep)
    for t in range(1, ts.shape[0]):
        after_reset = done[t - 2] if t >= 2 else np.zeros_like(done[0])
        ts[t] = np.where(after_reset, 0, ts[t - 1] + 1)
    assert np.array_equal(timestep, ts)
    ends = done & valid
    for m in range(M):
        assert sorted(timestep[1:, m][ends[:, m]].tolist()) == sorted(batch.episodes()[1][m].tolist())
    if whole:
        assert batch.actions.shape[0] <= sampler.max_steps(BUDGET, "whole_episodes")
    else:
        assert batch.actions.shape[0] == -(-BUDGET // E)
    # the step after an episode end is a reset step and never valid
    after_done = np.zeros_like(done)
    after_done[1:] = done[:-1]
    assert not np.any(valid & after_done)
    # obs[t + 1] after a valid non-final step is the next step's observation (the stored layout)
    venv.close()


def naive_continuing(seed: int, batches: int):
    """Per particle: E single envs in lockstep for ``batches * T`` vector steps, never reset
    between batches (next-step autoreset); the returns of the episodes each batch completes."""
    T = -(-BUDGET // E)
    out = {m: [[] for _ in range(batches)] for m in range(M)}
    for m in range(M):
        envs = [gym.make("CartPole-v1", max_episode_steps=HORIZON) for _ in range(E)]
        obs = [env.reset(seed=seed + m * E + e)[0] for e, env in enumerate(envs)]
        resetting, ep_ret = [False] * E, [0.0] * E
        for step in range(batches * T):
            for e in range(E):
                if resetting[e]:
                    obs[e], _ = envs[e].reset()
                    resetting[e] = False
                    continue
                obs[e], r, term, trunc, _ = envs[e].step(policy_action(obs[e], m))
                ep_ret[e] += r
                if term or trunc:
                    out[m][step // T].append(ep_ret[e])
                    ep_ret[e], resetting[e] = 0.0, True
    return out


def test_continuing_sampling_carries_episodes_across_batches():
    venv = gym.make_vec("CartPole-v1", M * E, vectorization_mode="sync", max_episode_steps=HORIZON)
    sampler = Sampler(HostTask(venv), M, E, HORIZON)
    ref = naive_continuing(7, 3)
    last_obs = None
    for b in range(3):
        batch = sampler.collect(act, BUDGET, mode="continuing", seed=7)
        assert batch.actions.shape[0] == -(-BUDGET // E)
        if last_obs is not None:  # the batch starts where the last one stopped
            assert torch.equal(batch.obs[0], last_obs)
        last_obs = batch.obs[-1].clone()
        for m in range(M):
            assert sorted(batch.episodes()[0][m].tolist()) == sorted(ref[m][b])
    venv.close()


def test_sampler_rejects_wrong_env_count():
    venv = gym.make_vec("CartPole-v1", 5, vectorization_mode="sync")
    with pytest.raises(ValueError, match="M\\*E"):
        Sampler(HostTask(venv), 3, 2, 100)
    venv.close()


@pytest.mark.parametrize("host", [True, False])
@pytest.mark.parametrize("space,activation,normalize", [
    (gym.spaces.Box(-1, 1, (2,)), "tanh", False),
    (gym.spaces.Box(-1, 1, (1,)), "relu", True),
    (gym.spaces.Box(-1, 1, (1,)), "elu", False),
    (gym.spaces.Discrete(3), "tanh", True),
])
def test_rollout_actor_equals_per_particle_torch_modules(space, activation, normalize, host):
    """The rollout's act function (numpy views on the CPU) against each particle as plain ``nn.Linear`` modules
    (``particle_module``), the normalisation and the distribution written out by hand:
    Gaussian mean + exp(log_std) * noise, or arg-max of logits + Gumbel noise."""
    from steinrl.rl.policy import EnsemblePolicy

    torch.manual_seed(0)
    obs_space = gym.spaces.Box(-np.inf, np.inf, (5,))
    policy = EnsemblePolicy(4, obs_space, space, (7, 3), activation=activation, layer="householder",
                            head_options={"log_std_init": -0.5}, normalize_obs=normalize)
    policy.obs_norm.observe(torch.randn(100, 5) * 3 + 1)
    discrete = isinstance(space, gym.spaces.Discrete)
    obs = torch.randn(6, 4, 2, 5)  # (T, M, E, obs_dim)
    noise = policy.head.draw_noise((6, 4, 2), torch.Generator().manual_seed(1), "cpu")
    x = obs
    if normalize:
        n = policy.obs_norm
        x = ((obs.double() - n.mean) / (n.var + 1e-8).sqrt()).clamp(-10, 10).float()
    with torch.no_grad():
        act, det = policy.actor(noise, host=host), policy.actor(None, host=host)
        for m in range(4):
            out = policy.net.particle_module(m)(x[:, m])  # (T, E, out)
            if discrete:
                expected, greedy = (out + noise[:, m]).argmax(-1), out.argmax(-1)
            else:
                expected, greedy = out + policy.head.log_std[m].exp() * noise[:, m], out
            for t in range(6):
                got = np.asarray(act(obs[t].numpy() if host else obs[t], t)[m])
                if discrete:
                    assert np.array_equal(got, expected[t].numpy())
                    greedy_got = np.asarray(det(obs[t].numpy() if host else obs[t], t)[m])
                    assert np.array_equal(greedy_got, greedy[t].numpy())
                else:
                    np.testing.assert_allclose(got, expected[t].numpy(), rtol=1e-5, atol=1e-5)
                    greedy_got = np.asarray(det(obs[t].numpy() if host else obs[t], t)[m])
                    np.testing.assert_allclose(greedy_got, greedy[t].numpy(), rtol=1e-5, atol=1e-5)
