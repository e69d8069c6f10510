"""The one sampler on a device task: the host rollout's batches, without host synchronisation."""

import numpy as np
import pytest
import torch
from conftest import stepped_with_a_restore
from torch.utils._python_dispatch import TorchDispatchMode

import steinrl
import steinrl.envs as envs
from steinrl.envs.torch_tasks import make_torch_vec
from steinrl.rl.episodes import Start
from steinrl.rl.rollout import Sampler
from steinrl.rl.tasks import DeviceTask, HostTask

M, E, HORIZON = 2, 3, 15
W = np.array([[0.3], [-0.2], [0.5], [0.1], [-0.4], [0.2]])  # a fixed linear policy on the 6-d observation


def numpy_act(obs, t):
    return np.tanh(obs @ W.astype(np.float32) * (1 + 0.1 * t)).astype(np.float32)


def torch_act(obs, t):
    return torch.tanh(obs.double() @ torch.as_tensor(W) * (1 + 0.1 * t))


def pair():
    venv = envs.make_vec("DoublePendulum", M * E, max_episode_steps=HORIZON)
    task = make_torch_vec("DoublePendulum", M * E, dtype=torch.float64, max_episode_steps=HORIZON)
    return Sampler(HostTask(venv), M, E, HORIZON), Sampler(DeviceTask(task), M, E, HORIZON), venv, task


def test_continuing_batches_equal_the_numpy_rollout_from_the_same_states():
    """DoublePendulum never terminates and the horizon (15) outlasts the batch (10 steps):
    no reset is drawn, so from the same start both backends must give the same batches."""
    numpy_sampler, torch_sampler, venv, task = pair()
    obs, _ = venv.reset(seed=0)
    task.reset(seed=0)
    task.set_state({**task.get_state(), "state": torch.as_tensor(venv.get_state()["state"])})
    # (each sampler owns its carry-over: it writes the next batch's start into it)
    numpy_sampler.carry = Start.fresh(torch.from_numpy(obs.copy()))
    torch_sampler.carry = Start.fresh(torch.from_numpy(obs.copy()))
    nb = numpy_sampler.collect(numpy_act, 10 * E, mode="continuing")
    tb = torch_sampler.collect(torch_act, 10 * E, mode="continuing")
    torch.testing.assert_close(tb.obs.double(), nb.obs.double(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tb.rewards.double(), nb.rewards.double(), rtol=1e-5, atol=1e-5)
    for field in ("valid", "done", "terminated", "timestep"):
        assert torch.equal(getattr(tb, field), getattr(nb, field)), field


def test_whole_episode_bookkeeping_matches_the_numpy_rollout():
    numpy_sampler, torch_sampler, _, _ = pair()
    nb = numpy_sampler.collect(numpy_act, 2 * HORIZON, mode="whole_episodes", seed=0)
    tb = torch_sampler.collect(torch_act, 2 * HORIZON, mode="whole_episodes", seed=0)
    T = nb.valid.shape[0]
    assert torch.equal(tb.valid, nb.valid)  # both stop at the last env's last step
    assert torch.equal(tb.done[:T] & tb.valid[:T], nb.done & nb.valid)
    np.testing.assert_array_equal(tb.episode_stats[1:].numpy(), nb.episode_stats[1:].numpy())  # lengths, counts


SYNC_OPS = {"_local_scalar_dense", "item", "is_nonzero", "nonzero", "masked_select", "equal"}


class RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("mode", ["continuing", "cut"])
def test_the_device_rollout_makes_no_host_synchronisation(mode):
    """No op that copies a value to the host (``item``, ``nonzero``, boolean indexing, ...)
    runs while a continuing or cut batch is collected, policy forward included."""
    cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {"particles": 2, "envs_per_particle": 4,
                                                                "batch_size": 40, "rollout.sampling": mode,
                                                                "rollout.env_backend": "torch"})
    trainer = steinrl.Trainer(cfg)
    agent, sampler = trainer.job.agent, trainer.job.sampler
    assert isinstance(sampler.task, DeviceTask)
    trainer.step()
    noise = agent.policy.head.draw_noise((10, 2, 4), torch.Generator().manual_seed(0), "cpu")
    with torch.no_grad():
        act = agent.policy.actor(noise)
        with RecordOps() as recorder:
            sampler.collect(act, 40, mode=mode, seed=1)
    assert recorder.ops and not (recorder.ops & SYNC_OPS), recorder.ops & SYNC_OPS
    if torch.cuda.is_available():  # the real thing
        cfg = cfg.replace({"device": "cuda"})
        trainer = steinrl.Trainer(cfg)
        trainer.step()
        torch.cuda.set_sync_debug_mode("error")
        try:
            with torch.no_grad():
                trainer.job.sampler.collect(trainer.job.agent.policy.actor(None), 40, mode=mode, seed=1)
        finally:
            torch.cuda.set_sync_debug_mode(0)


def test_torch_backend_trains_and_resumes_exactly(tmp_path):
    cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {"particles": 2, "envs_per_particle": 4, "batch_size": 40,
                                                                "rollout.sampling": "continuing", "iterations": 4,
                                                                "rollout.env_backend": "torch", "critic.steps": 2})
    expected, resumed = stepped_with_a_restore(cfg, tmp_path / "c.pt")
    strip = lambda rows: [{k: str(v) for k, v in r.items() if not k.startswith("time/")} for r in rows]  # noqa: E731
    assert strip(resumed) == strip(expected) and all(np.isfinite(r["train/surrogate"]) for r in expected)


def test_torch_backend_needs_a_steinrl_task():
    with pytest.raises(steinrl.ConfigError, match="has no torch twin"):
        steinrl.Trainer(steinrl.load_config("svgd-a2c", "CartPole-v1", {"rollout.env_backend": "torch"}))


@pytest.mark.parametrize("mode", ["continuing", "whole_episodes"])
def test_the_whole_step_compiles_as_one_graph_and_gives_the_eager_batch(mode):
    """``rollout.compile``: each step (policy forward, sampling, env step, autoreset, buffer
    writes) is one ``torch.compile(fullgraph=True)`` graph (Inductor on the CPU; a graph break
    would raise), the same graph for every step and iteration (the time index is a device
    tensor, the randomness drawn before the steps); its first batch is the eager one up to
    float rounding (later iterations drift chaotically)."""
    from torch._dynamo.utils import counters

    rows = []
    for compile_ in (False, True):
        cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {
            "particles": 2, "envs_per_particle": 4, "batch_size": 40, "rollout.sampling": mode,
            "rollout.horizon": 7, "rollout.env_backend": "torch", "rollout.compile": compile_})  # (autoresets)
        trainer = steinrl.Trainer(cfg)
        torch._dynamo.reset()
        counters.clear()
        rows.append(trainer.step())
        trainer.step()
        if compile_:
            assert counters["stats"]["unique_graphs"] == 1, dict(counters["stats"])
            assert counters["stats"]["calls_captured"] > 0
    for key in ("train/surrogate", "train/value_loss", "train/explained_variance", "train/bandwidth",
                "rollout/ep_rew_mean"):
        assert rows[1][key] == pytest.approx(rows[0][key], rel=1e-5, abs=1e-6), key


class CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("env, seeds", [("CartpoleSwingUp", None), ("CartpoleSwingUp", [3, 4]),
                                        ("DoublePendulum", [0, 1, 2])])
def test_a_batch_draws_its_reset_states_once_per_seed(env, seeds):
    """The device batch's random numbers are drawn before its steps: one reset-state draw per
    seed group (the steps draw none), and the policy's noise once per seed."""
    cfg = steinrl.load_config("svgd-a2c", env, {"particles": 2, "envs_per_particle": 4, "batch_size": 80,
                                                 "rollout.sampling": "continuing", "rollout.env_backend": "torch",
                                                 "rollout.horizon": 5})  # many autoresets
    trainer = steinrl.Trainer(cfg, seeds)
    trainer.step_seeds()
    with CountOps() as recorder:
        batch = trainer.job.agent.collect(trainer.job.sampler, 1)
    groups = len(seeds or [0])
    assert recorder.counts.get("rand", 0) + recorder.counts.get("randn", 0) == 2 * groups, recorder.counts
    assert batch.actions.shape[0] == 20 and (batch.timestep[1:] == 0).any()  # 20 steps, with autoresets


VIEW_OPS = {"view", "_unsafe_view", "select", "slice", "transpose", "t", "permute", "unsqueeze", "squeeze", "expand",
            "unbind", "alias", "as_strided", "reshape"}


def test_an_eager_step_launches_at_most_40_kernels():
    """One eager env step of the device rollout on the swing-up (policy forward, sampling, env
    step, autoreset, buffer writes; the fast preset's two hidden layers) runs at most 40 aten
    ops that are not views, none of which draws random numbers or reads a value back."""
    cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {"particles": 4, "envs_per_particle": 8, "batch_size": 80,
                                                 "rollout.env_backend": "torch", "rollout.horizon": 5},
                              preset="fast")
    trainer = steinrl.Trainer(cfg)
    trainer.step()
    sampler, recorder, real_step = trainer.job.sampler, CountOps(), trainer.job.sampler._step

    def counted_step(*args):
        with recorder:
            return real_step(*args)

    sampler._step = counted_step
    with torch.no_grad():
        batch = trainer.job.agent.collect(sampler, 1)
    steps = batch.actions.shape[0]
    kernels = sum(n for op, n in recorder.counts.items() if op not in VIEW_OPS)
    assert steps == 10 and kernels <= 40 * steps, (kernels / steps, recorder.counts)
    assert not set(recorder.counts) & (SYNC_OPS | {"rand", "randn", "normal_", "uniform_"})


def test_drawing_many_steps_of_reset_states_at_once_continues_the_same_stream():
    """``sample_initial_state(n, steps)`` gives the numbers of ``steps`` successive draws (CPU:
    a uniform draw; a normal one of at least 16 values per group), each group from its own stream."""
    for name, n in (("CartpoleSwingUp", 6), ("DoublePendulum", 8)):
        one, many = make_torch_vec(name, n, groups=2), make_torch_vec(name, n, groups=2)
        one.reset(seed=[5, 6])
        many.reset(seed=[5, 6])
        expected = torch.stack([one.sample_initial_state(n) for _ in range(7)])
        torch.testing.assert_close(many.sample_initial_state(n, 7), expected, rtol=0, atol=0)


@pytest.mark.parametrize("algo, seeds", [("svgd-a2c", None), ("s2vgd-ppo", [3, 4]), ("svgd-reinforce", [0, 1, 2])])
def test_an_iteration_reads_the_device_once(algo, seeds, monkeypatch):
    """A whole iteration on a device task (rollout, advantages, update, critic, every logged
    scalar and the finiteness of every quantity) makes one host transfer (the job's
    ``to_host``) and no other synchronising op, for one seed and for seed batches."""
    import steinrl.rl.job as job_module

    cfg = steinrl.load_config(algo, "CartpoleSwingUp", {"particles": 2, "envs_per_particle": 4, "batch_size": 40,
                                                         "rollout.sampling": "continuing", "critic.steps": 2,
                                                         "rollout.env_backend": "torch"} if algo != "svgd-reinforce"
                              else {"particles": 2, "envs_per_particle": 4, "batch_size": 40,
                                    "rollout.sampling": "cut", "rollout.env_backend": "torch"})
    trainer = steinrl.Trainer(cfg, seeds)
    trainer.step_seeds()  # warm-up (first-call allocations)
    transfers = []
    real = job_module.to_host

    def counted(values):
        transfers.append(len(values))
        return real(values)

    monkeypatch.setattr(job_module, "to_host", counted)
    with RecordOps() as recorder:
        rows = trainer.step_seeds()
    assert len(transfers) == 1 and len(rows) == len(seeds or [0])
    assert not (recorder.ops & SYNC_OPS), recorder.ops & SYNC_OPS
