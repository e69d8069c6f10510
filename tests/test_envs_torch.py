"""Torch twins of the control tasks (``steinrl.envs.torch_tasks``) against their numpy vector envs.

From the same states and actions the float64 torch task gives the numpy env's next states,
observations and rewards to 1e-10 and the same termination / truncation flags, with the
same next-step autoreset; its reset distribution is the numpy one (moments and KS tests);
float32 works; ``step`` makes no host synchronisation (no ``.item()``, ``nonzero()``, ...).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from torch.utils._python_dispatch import TorchDispatchMode

import steinrl.envs as envs
from steinrl.envs.double_pendulum import RESET_STD
from steinrl.envs.torch_tasks import TORCH_TASKS, TorchCartpoleSwingUp, make_torch_vec

NAMES = list(TORCH_TASKS)
TOL = 1e-10
# Per task: (mean, std) of the Gaussian actions and max_episode_steps, so that 150 steps
# of 64 envs contain terminations (not the double pendulum: it never terminates) and
# truncations.
EPISODE_SETUP = {
    "Cartpole": (0.0, 1.0, 12),
    "CartpoleSwingUp": (0.6, 0.6, 25),
    "DoublePendulum": (0.0, 0.6, 12),
    "CartpoleRllab": (0.0, 1.0, 12),
    "CartpoleSwingUpRllab": (0.6, 0.6, 25),
}


def _observation(name: str, state: np.ndarray) -> np.ndarray:
    """The numpy task's observation formula in float64, ``(n, obs_dim)``."""
    if name == "DoublePendulum":
        theta1, theta2, omega1, omega2 = state
        return np.stack([np.sin(theta1), np.cos(theta1), omega1, np.sin(theta2), np.cos(theta2), omega2], 1)
    return state.T


@pytest.mark.parametrize("name", NAMES)
def test_float64_steps_match_numpy_twin(name):
    """Lockstep over 150 steps: each step both start from the same states (the torch ones)
    and get the same actions; envs being autoreset get reward 0, flags False and a fresh
    reset state (from each side's own generator) in both."""
    n, (mean, std, max_steps) = 64, EPISODE_SETUP[name]
    vec = envs.make_vec(name, n, max_episode_steps=max_steps)
    task = make_torch_vec(name, n, dtype=torch.float64, max_episode_steps=max_steps)
    vec.reset(seed=0)
    task.reset(seed=0)
    rng = np.random.default_rng(1)
    counts = {"terminated": 0, "truncated": 0, "autoreset": 0}
    for _ in range(150):
        vec.state = task.state.numpy()
        resetting = task._prev_done.numpy().copy()
        actions = np.clip(rng.normal(mean, std, (n, 1)), -1.5, 1.5)
        obs_np, reward_np, terminated_np, truncated_np, _ = vec.step(actions.astype(np.float32))
        obs, reward, terminated, truncated = task.step(torch.as_tensor(actions.astype(np.float32)))
        assert obs.dtype == reward.dtype == torch.float64 and terminated.dtype == truncated.dtype == torch.bool
        stepped = ~resetting
        np.testing.assert_allclose(task.state.numpy()[:, stepped], vec.state[:, stepped], rtol=0, atol=TOL)
        np.testing.assert_allclose(obs.numpy()[stepped], _observation(name, vec.state)[stepped], rtol=0, atol=TOL)
        np.testing.assert_allclose(obs.numpy().astype(np.float32)[stepped], obs_np[stepped], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(reward.numpy(), reward_np, rtol=0, atol=TOL)
        np.testing.assert_array_equal(terminated.numpy(), terminated_np)
        np.testing.assert_array_equal(truncated.numpy(), truncated_np)
        np.testing.assert_array_equal(task.steps.numpy(), vec._steps)
        # autoreset envs: reward 0, not done, a reset observation of the new state
        assert not reward.numpy()[resetting].any() and not (terminated | truncated).numpy()[resetting].any()
        np.testing.assert_allclose(obs.numpy(), _observation(name, task.state.numpy()), rtol=0, atol=1e-15)
        counts["terminated"] += int(terminated_np.sum())
        counts["truncated"] += int(truncated_np.sum())
        counts["autoreset"] += int(resetting.sum())
    assert counts["truncated"] > 0 and counts["autoreset"] > 0
    assert (counts["terminated"] > 0) == (name != "DoublePendulum")


def _check_sample(name: str, torch_states: np.ndarray, numpy_states: np.ndarray) -> None:
    """Each state row against the numpy task's reset distribution (KS) and against numpy's
    own draws (two-sample KS); mean and variance within 5 standard errors."""
    n = torch_states.shape[1]
    task_cls = TORCH_TASKS[name].numpy_task
    for row in range(task_cls.state_dim):
        t, ref = torch_states[row], numpy_states[row]
        if name == "DoublePendulum":
            std = RESET_STD[row]
            dist, mean, var = stats.norm(0.0, std), 0.0, std**2
        else:
            low, high = task_cls.reset_low[row], task_cls.reset_high[row]
            dist, mean, var = stats.uniform(low, high - low), (low + high) / 2, (high - low) ** 2 / 12
            assert low <= t.min() and t.max() < high
        assert stats.kstest(t, dist.cdf).pvalue > 1e-3
        assert stats.ks_2samp(t, ref).pvalue > 1e-3
        assert abs(t.mean() - mean) < 5 * math.sqrt(var / n)
        assert abs(t.var() - var) < 5 * var * math.sqrt(2.0 / n)  # (sample-variance sd ≤ σ² √(2/n))


@pytest.mark.parametrize("name", NAMES)
def test_reset_distribution_matches_numpy(name):
    n = 20_000
    task = make_torch_vec(name, n, dtype=torch.float64)
    task.reset(seed=3)
    vec = envs.make_vec(name, n)
    vec.reset(seed=3)
    _check_sample(name, task.state.numpy(), vec.state)
    # the states drawn by next-step autoreset follow the same distribution
    task = make_torch_vec(name, n, dtype=torch.float64, max_episode_steps=1)
    task.reset(seed=4)
    zero = torch.zeros(n, dtype=torch.float64)
    task.step(zero)  # all truncated
    _, reward, terminated, truncated = task.step(zero)  # all autoreset
    assert not reward.any() and not terminated.any() and not truncated.any()
    _check_sample(name, task.state.numpy(), vec.state)


def test_seeding_is_reproducible():
    a, b = make_torch_vec("CartpoleSwingUp", 8), make_torch_vec("CartpoleSwingUp", 8)
    torch.testing.assert_close(a.reset(seed=5), b.reset(seed=5), rtol=0, atol=0)
    actions = torch.full((8,), 0.7)
    for _ in range(30):
        for x, y in zip(a.step(actions), b.step(actions)):
            torch.testing.assert_close(x, y, rtol=0, atol=0)
    assert not torch.equal(a.reset(seed=6), b.reset(seed=7))


@pytest.mark.parametrize("name", NAMES)
def test_float32(name):
    """float32 end to end, finite under bang-bang actions (2000 steps, autoresets), and one
    step from the same state agrees with float64 to float32 precision."""
    n = 32
    task = make_torch_vec(name, n, dtype=torch.float32, max_episode_steps=100)
    obs = task.reset(seed=0)
    assert obs.dtype == torch.float32 and obs.shape == (n, task.obs_dim) and task.state.dtype == torch.float32
    gen = torch.Generator().manual_seed(0)
    for _ in range(2000):
        actions = torch.randint(0, 2, (n, 1), generator=gen).float().mul_(2).sub_(1)
        obs, reward, terminated, truncated = task.step(actions)
    assert obs.dtype == reward.dtype == torch.float32 and terminated.dtype == truncated.dtype == torch.bool
    assert torch.isfinite(obs).all() and torch.isfinite(reward).all() and torch.isfinite(task.state).all()

    wide = make_torch_vec(name, n, dtype=torch.float64)
    wide.reset(seed=1)
    task.reset(seed=1)
    task.state = wide.state.float()
    actions = torch.linspace(-1.0, 1.0, n)
    single, double = task.step(actions), wide.step(actions.double())
    torch.testing.assert_close(single[0].double(), double[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(single[1].double(), double[1], rtol=1e-5, atol=1e-5)


class _RecordOps(TorchDispatchMode):
    """Records the aten ops dispatched inside the ``with`` block."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("name", NAMES)
def test_step_makes_no_host_sync(name):
    """``.item()``, ``bool(tensor)``, ``nonzero()``, ``tolist()`` and boolean-mask indexing all
    dispatch to ops that copy a value to the host; none may run inside ``step`` (including
    autoresets)."""
    task = make_torch_vec(name, 16, max_episode_steps=2)
    task.reset(seed=0)
    recorder = _RecordOps()
    with recorder:
        for _ in range(5):  # steps, truncations and autoresets
            task.step(torch.full((16, 1), 0.9))
    syncing = {"aten._local_scalar_dense", "aten.nonzero", "aten.masked_select", "aten.index", "aten.unique"}
    assert recorder.ops and not (recorder.ops & syncing), recorder.ops & syncing


def test_actions_factory_and_errors():
    task = make_torch_vec("steinrl/CartpoleSwingUp-v0", 4, dtype=torch.float64)
    assert isinstance(task, TorchCartpoleSwingUp) and task.name == "CartpoleSwingUp" and task.num_envs == 4
    other = make_torch_vec("CartpoleSwingUp", 4, dtype=torch.float64)
    task.reset(seed=0)
    other.reset(seed=0)
    a = torch.tensor([0.5, -2.0, 3.0, -0.1])  # out-of-range actions are clipped
    for x, y in zip(task.step(a), other.step(a[:, None])):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"shape \(4,\) or \(4, 1\), got \(4, 2\)"):
        task.step(torch.zeros(4, 2))
    with pytest.raises(ValueError, match="No torch task 'CartPole-v1'; valid names: Cartpole"):
        make_torch_vec("CartPole-v1", 4)
    with pytest.raises(ValueError, match="dtype"):
        make_torch_vec("Cartpole", 4, dtype=torch.float16)
    with pytest.raises(ValueError, match="num_envs"):
        make_torch_vec("Cartpole", 0)
    assert set(TORCH_TASKS) == set(envs.SHORT_NAMES)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", NAMES)
def test_cuda_matches_cpu(name):
    """On CUDA (float64), stepping from the CPU task's states gives the CPU results to 1e-10
    (envs being autoreset draw from different generators and are left out)."""
    cpu = make_torch_vec(name, 256, dtype=torch.float64)
    cuda = make_torch_vec(name, 256, device="cuda", dtype=torch.float64)
    cpu.reset(seed=0)
    cuda.reset(seed=0)
    assert cuda.state.device.type == "cuda"
    actions = torch.linspace(-1.0, 1.0, 256, dtype=torch.float64)
    for _ in range(20):
        cuda.state = cpu.state.cuda()
        stepped = ~cpu._prev_done
        torch.testing.assert_close(cuda._prev_done.cpu(), cpu._prev_done, rtol=0, atol=0)
        out_cpu, out_cuda = cpu.step(actions), cuda.step(actions.cuda())
        for x, y in zip(out_cuda, out_cpu):
            torch.testing.assert_close(x.cpu()[stepped], y[stepped], rtol=0, atol=TOL)
