"""The MuJoCo Warp backend (steinrl.envs.warp_mujoco) against Gymnasium's own MuJoCo envs, on Warp's CPU device.

The reference is always Gymnasium's env of the same id (float64 MuJoCo): its observation, reward
and termination from the same states under the same actions, its reset distribution, its step
semantics. MuJoCo Warp computes in float32, so values agree within a stated tolerance (the
``TOL`` constants) for a few dozen steps; each episode is compared up to its end (after it,
Gymnasium's env, not reset, and the autoreset world part). Two tasks run here (Hopper, whose
falls must end at the same step, and the contact-rich Walker2d); ``benchmarks/warp_mujoco_parity.py``
runs all seven. Then the backend inside the trainer: the same rows from the static iteration
as eagerly, no host sync in it, exact resume, reproducible runs.

Skipped without the ``gpu-mujoco`` extra (the tests of its error messages run everywhere).
Warp compiles each model's kernels once per machine into its kernel cache (``~/.cache/warp``).
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from conftest import stepped_with_a_restore
from torch.utils._python_dispatch import TorchDispatchMode

import steinrl
from steinrl.envs import warp_mujoco, warp_sim
from steinrl.envs.warp_mujoco import INSTALL_HINT, WARP_TASKS, warp_installed

HAVE_MUJOCO = importlib.util.find_spec("mujoco") is not None
needs_warp = pytest.mark.skipif(not (warp_installed() and HAVE_MUJOCO),
                                reason=f"needs the gpu-mujoco extra ({INSTALL_HINT})")

#: float32 physics against Gymnasium's float64: |Δ| <= TOL_OBS * (1 + |value|) per observed value and
#: |Δreward| <= TOL_REWARD, at every step of an episode up to its end (measured on this machine: at most
#: 5e-6 on Hopper over 30 steps and 2.4e-4 on Walker2d over 25).
TOL_OBS = 2e-3
TOL_REWARD = 2e-3

SMALL = {"particles": 2, "rollout.envs_per_particle": 2, "rollout.batch_size": 16, "rollout.sampling": "continuing",
         "rollout.vectorization": "warp", "estimator.minibatches": 2, "estimator.epochs": 2, "run.progress": False,
         "run.tensorboard": False,
         # the function-space kernel and the share controller (state the warp path must carry), B within the batch
         "update.kernel": {"space": "functions", "states": 16}, "update.repulsion": {"name": "share", "target": 0.05}}


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    """MuJoCo writes its warnings to MUJOCO_LOG.TXT in the working directory: keep it out of the repository."""
    monkeypatch.chdir(tmp_path)


# --- choosing the backend (no extra needed) -------------------------------------------------------


def test_a_missing_extra_is_one_error_line_naming_the_install_command(monkeypatch):
    monkeypatch.setattr(warp_mujoco, "warp_installed", lambda: False)
    monkeypatch.setattr(warp_sim, "warp_installed", lambda: False)
    cfg = steinrl.load_config("svgd-ppo", "Hopper-v5", SMALL)
    with pytest.raises(steinrl.ConfigError) as err:
        steinrl.Trainer(cfg)
    assert 'pip install "steinrl[gpu-mujoco]"' in str(err.value) and len(str(err.value).splitlines()) == 1
    with pytest.raises(steinrl.ConfigError, match="not installed"):
        warp_mujoco.configure()
    # auto never picks it where it is missing, nor on the CPU
    auto = steinrl.load_config("svgd-ppo", "Hopper-v5", {**SMALL, "rollout.vectorization": "auto"})
    assert not warp_mujoco.warp_backend(auto.env, auto.device, auto.rollout)
    assert not warp_mujoco.warp_backend(auto.env, "cuda", auto.rollout)


def test_choosing_warp_where_it_cannot_run_is_one_error_line():
    for env, extra, match in (("CartPole-v1", {}, "vectorization warp runs HalfCheetah-v5"),
                              ("Hopper-v5", {"rollout.env_backend": "numpy"}, "env_backend must be auto or torch"),
                              ("Hopper-v5", {"rollout.compile": True}, "rollout.compile cannot trace")):
        cfg = steinrl.load_config("svgd-ppo", env, {**SMALL, **extra})
        with pytest.raises(steinrl.ConfigError, match=match) as err:
            steinrl.Trainer(cfg)
        assert len(str(err.value).splitlines()) == 1
    assert set(WARP_TASKS) == {"HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Swimmer-v5",
                               "InvertedDoublePendulum-v5", "steinrl/SparseHalfCheetah-v1"}
    assert warp_mujoco.warp_task_id("SparseHalfCheetah") == "steinrl/SparseHalfCheetah-v1"


def test_auto_picks_warp_only_on_cuda_where_installed(monkeypatch):
    monkeypatch.setattr(warp_mujoco, "warp_installed", lambda: True)
    cfg = steinrl.load_config("svgd-ppo", "Hopper-v5", {**SMALL, "rollout.vectorization": "auto"})
    assert not warp_mujoco.warp_backend(cfg.env, cfg.device, cfg.rollout)  # cpu: the host backends (faster there)
    assert warp_mujoco.warp_backend(cfg.env, "cuda", cfg.rollout)
    assert not warp_mujoco.warp_backend(cfg.env, "cuda", cfg.replace({"rollout.env_backend": "numpy"}).rollout)
    assert not warp_mujoco.warp_backend("Pendulum-v1", "cuda", steinrl.load_config("svgd-ppo", "Pendulum-v1").rollout)


# --- parity with Gymnasium ----------------------------------------------------------------------------


def _gymnasium_twins(env_id, n):
    """``n`` of Gymnasium's envs reset with seeds 0..n-1, and their states ``(nq + nv, n)`` float32."""
    from steinrl import envs

    refs = [envs.make(env_id).unwrapped for _ in range(n)]
    obs = np.array([ref.reset(seed=i)[0] for i, ref in enumerate(refs)])
    states = np.array([np.concatenate([ref.data.qpos, ref.data.qvel]) for ref in refs]).T
    return refs, obs, torch.tensor(states, dtype=torch.float32)


def _close(warp, gym_value, tol):
    return np.abs(warp - gym_value) <= tol * (1 + np.abs(gym_value))


@needs_warp
@pytest.mark.parametrize("env_id, steps", [("Hopper-v5", 40), ("Walker2d-v5", 60)])
def test_episodes_match_gymnasiums_from_the_same_states_and_a_fall_ends_at_the_same_step(env_id, steps):
    """N worlds start from Gymnasium's reset states (seeds 0..N-1) and take the same random actions as
    Gymnasium's envs: every observation, reward and flag agrees (``TOL_OBS``, ``TOL_REWARD``) until
    Gymnasium's episode ends, which it does at the same step, terminated (a fall); the next step is
    the world's autoreset (reward 0, neither flag, an observation inside the reset noise)."""
    N = 4
    refs, ref_obs, initial = _gymnasium_twins(env_id, N)
    task = warp_mujoco.make_warp_vec(env_id, N)
    obs = task.start(initial).numpy()
    assert obs.shape == ref_obs.shape and obs.dtype == np.float32
    assert _close(obs, ref_obs, 1e-6).all()
    rng = np.random.default_rng(0)
    low, high = refs[0].action_space.low, refs[0].action_space.high
    ended = np.full(N, -1)
    contacts = 0
    worst = 0.0
    for t in range(steps):
        actions = rng.uniform(low, high, size=(N, len(low))).astype(np.float32)
        obs, reward, terminated, truncated = (x.numpy() for x in task.step(torch.from_numpy(actions)))
        for i, ref in enumerate(refs):
            if ended[i] >= 0:
                if ended[i] == t - 1:  # the autoreset step
                    assert reward[i] == 0 and not terminated[i] and not truncated[i]
                    assert np.abs(obs[i] - task.observe()[i].numpy()).max() == 0
                    assert (task.steps[i] == 0) and np.abs(task.qpos[i].numpy() - ref.init_qpos).max() <= 5e-3 + 1e-6
                continue
            ref_obs, ref_reward, ref_terminated, ref_truncated, _ = ref.step(actions[i].astype(np.float64))
            contacts += ref.data.ncon
            assert _close(obs[i], ref_obs, TOL_OBS).all(), (t, i, np.abs(obs[i] - ref_obs).max())
            assert abs(reward[i] - ref_reward) <= TOL_REWARD, (t, i, reward[i], ref_reward)
            assert (terminated[i], truncated[i]) == (ref_terminated, ref_truncated), (t, i)
            worst = max(worst, float(np.abs(obs[i] - ref_obs).max()))
            if ref_terminated:
                ended[i] = t
    assert (ended >= 0).sum() >= 2, ended  # falls, compared to the step
    assert contacts > 0  # the feet touched the floor
    print(f"{env_id}: {N} worlds, episodes of {ended.tolist()} steps, largest |Δobs| {worst:.2e}")


@needs_warp
def test_time_limit_truncates_as_gymnasiums_time_limit():
    """With a limit of 3 steps, Gymnasium's ``TimeLimit`` and the worlds truncate at the same step
    (not terminated), and the next step is the world's autoreset (its step count restarts)."""
    from steinrl import envs

    ref = envs.make("Hopper-v5", max_episode_steps=3)
    ref.reset(seed=0)
    u = ref.unwrapped
    task = warp_mujoco.make_warp_vec("Hopper-v5", 2, max_episode_steps=3)
    task.start(torch.tensor(np.concatenate([u.data.qpos, u.data.qvel]), dtype=torch.float32)[:, None].repeat(1, 2))
    zero = torch.zeros(2, 3)
    flags = [tuple(x.tolist() for x in task.step(zero)[2:]) for _ in range(5)]
    theirs = [ref.step(np.zeros(3))[2:4] for _ in range(3)]
    assert [(f[0][0], f[1][0]) for f in flags[:3]] == theirs == [(False, False), (False, False), (False, True)]
    assert flags[2] == ([False, False], [True, True])
    assert flags[3] == ([False, False], [False, False]) and task.steps.tolist() == [1, 1]  # autoreset, then a step


@needs_warp
@pytest.mark.parametrize("env_id", ["Hopper-v5", "HalfCheetah-v5"])
def test_reset_states_have_gymnasiums_distribution(env_id):
    """2048 reset observations a side (Hopper: uniform noise; HalfCheetah: normal velocities): every
    coordinate's mean agrees within 5 standard errors, its standard deviation within 10 %, and a
    two-sample KS test passes at p > 1e-4 (deterministic seeds: a fixed outcome)."""
    from scipy import stats

    from steinrl import envs

    n = 2048
    task = warp_mujoco.make_warp_vec(env_id, n)
    ours = task.reset(seed=123).double().numpy()
    ref = envs.make(env_id).unwrapped
    theirs = np.array([ref.reset(seed=10_000 + i)[0] for i in range(n)])
    se = np.sqrt(ours.var(0) / n + theirs.var(0) / n)
    assert (np.abs(ours.mean(0) - theirs.mean(0)) <= 5 * se).all()
    assert np.allclose(ours.std(0), theirs.std(0), rtol=0.1)
    assert min(stats.ks_2samp(ours[:, j], theirs[:, j]).pvalue for j in range(ours.shape[1])) > 1e-4
    # a reseeded reset replays the same states; another seed draws others
    assert torch.equal(task.reset(seed=123), torch.from_numpy(ours).float())
    assert not torch.equal(task.reset(seed=124), torch.from_numpy(ours).float())


@needs_warp
def test_an_overflow_of_the_contact_buffers_is_a_named_error():
    """Walker2d's feet need constraint rows (4 per contact, 1 per joint limit): with room for 2, the
    step that needs more raises :class:`WarpCapacityError` (on the CPU at that step)."""
    task = warp_mujoco.make_warp_vec("Walker2d-v5", 2, njmax=2)
    task.reset(seed=0)
    with pytest.raises(warp_mujoco.WarpCapacityError, match=r"NEFC.*raise nconmax \(now 48.*njmax \(now 2"):
        for _ in range(40):
            task.step(torch.zeros(2, 6))
    assert task.overflowed().any()


@needs_warp
def test_the_physics_replayed_as_a_warp_graph_gives_the_eager_numbers():
    rows = []
    for graph in (False, True):
        task = warp_mujoco.make_warp_vec("Hopper-v5", 3, physics_graph=graph)
        task.reset(seed=5)
        actions = torch.rand((6, 3, 3), generator=torch.Generator().manual_seed(1)) * 2 - 1
        rows.append([torch.cat([o.reshape(3, -1).float() for o in task.step(a)], 1) for a in actions])
    assert all(torch.equal(a, b) for a, b in zip(*rows))


@needs_warp
def test_a_saved_state_continues_exactly():
    task = warp_mujoco.make_warp_vec("Walker2d-v5", 3, max_episode_steps=6)
    task.reset(seed=2)
    actions = torch.rand((12, 3, 6), generator=torch.Generator().manual_seed(3)) * 2 - 1
    for a in actions[:5]:
        task.step(a)
    saved = task.get_state()
    straight = [torch.cat([o.reshape(3, -1).float() for o in task.step(a)], 1) for a in actions[5:]]
    other = warp_mujoco.make_warp_vec("Walker2d-v5", 3, max_episode_steps=6)
    other.reset(seed=99)
    other.set_state(saved)
    resumed = [torch.cat([o.reshape(3, -1).float() for o in other.step(a)], 1) for a in actions[5:]]
    assert all(torch.equal(a, b) for a, b in zip(straight, resumed))


# --- inside the trainer --------------------------------------------------------------------------------


def _strip(rows):
    return [{k: str(v) for k, v in r.items() if not k.startswith("time/") or k == "time/total_env_steps"}
            for r in rows]


@needs_warp
def test_warp_trains_hopper_reproducibly_and_resumes_exactly(tmp_path):
    cfg = steinrl.load_config("svgd-ppo", "Hopper-v5", SMALL)
    expected, resumed = stepped_with_a_restore(cfg, tmp_path / "c.pt")
    assert _strip(resumed) == _strip(expected)
    again = steinrl.Trainer(cfg)
    assert _strip([again.step() for _ in range(4)]) == _strip(expected)  # a second run: the same numbers
    assert isinstance(again.job.envs, warp_mujoco.WarpHopper) and again.job.task.action_shape == (3,)
    assert all(np.isfinite(r["train/surrogate"]) for r in expected) and expected[-1]["time/total_env_steps"] > 100


@needs_warp
def test_a_capacity_overflow_seen_by_the_job_is_the_named_error(monkeypatch):
    """On a GPU the step does not read the overflow flags: the job reads them with the iteration's other
    values, and raises the named error after the iteration (emulated here by hiding the CPU's per-step check)."""
    monkeypatch.setattr(warp_mujoco.WarpWalker2d, "capacity", warp_mujoco.Capacity(nconmax=48, njmax=2))
    t = steinrl.Trainer(steinrl.load_config("svgd-ppo", "Walker2d-v5", {**SMALL, "rollout.batch_size": 80}))
    t.job.envs._overflow_host = None
    with pytest.raises(warp_mujoco.WarpCapacityError, match=r"NEFC.*njmax \(now 2 per world\)"):
        t.step()


class Syncs(TorchDispatchMode):
    SYNC_OPS = {"_local_scalar_dense", "item", "is_nonzero", "nonzero", "masked_select", "equal"}

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.__name__.split(".")[0] in self.SYNC_OPS:
            self.seen.append(func.__name__)
        return func(*args, **(kwargs or {}))


@needs_warp
def test_the_static_iteration_gives_the_eager_numbers_keeps_its_storage_and_reads_nothing_back(tmp_path):
    """What a CUDA graph of the iteration needs, on the CPU (as tests/test_graph_safe.py for the
    classic tasks): static draws give the eager rows, every persistent tensor (the Warp arrays
    included) keeps its storage, the iteration makes no host sync, and checkpoints move between
    static and eager runs exactly."""
    from steinrl.rl.graph import WARMUP, IterationGraph, persistent_tensors

    cfg = steinrl.load_config("svgd-ppo", "Hopper-v5", {**SMALL, "rollout.batch_size": 24, "iterations": 8})

    def trainer(static):
        t = steinrl.Trainer(cfg)
        if static:
            t.job.graph = IterationGraph(t.job._iterate, t.job.agent.draws, torch.device("cpu"), capture=False)
        return t

    n = WARMUP + 3
    eager = trainer(False)
    eager_rows = _strip([eager.step() for _ in range(n + 1)])
    static = trainer(True)
    static_rows = _strip([static.step() for _ in range(WARMUP + 1)])
    before = {k: v.data_ptr() for k, v in persistent_tensors(static.job).items()}
    assert {"envs.qpos", "envs.qacc_warmstart", "draws.reset_states", "carry.obs"} <= set(before)
    static_rows += _strip([static.step() for _ in range(n - WARMUP - 1)])
    assert static.job.agent.draws.static  # the last iterations ran from static draws
    assert {k: v.data_ptr() for k, v in persistent_tensors(static.job).items()} == before
    assert static_rows == eager_rows[:n]
    static.save(tmp_path / "c.pt")  # a static run's checkpoint continues eagerly with the straight run's numbers
    resumed = trainer(False)
    resumed.restore(tmp_path / "c.pt")
    assert _strip([resumed.step()]) == eager_rows[n:]
    job, recorder = static.job, Syncs()
    job.set_step_sizes(static.iteration)
    job.agent.draws.fill(static.iteration)
    with recorder:
        job._iterate(static.iteration)  # what the graph captures: collect (physics included), learn, pack
    assert recorder.seen == []


@pytest.mark.skipif(not (torch.cuda.is_available() and warp_installed() and HAVE_MUJOCO),
                    reason="needs CUDA and the gpu-mujoco extra (benchmarks/gpu_mujoco_checks.sh runs it on a GPU)")
def test_a_captured_cuda_graph_with_the_physics_gives_the_eager_numbers():
    """The real capture (``run.cuda_graph on``): rollout, MuJoCo Warp physics, update and logging as one
    graph, against eager iterations on the same GPU."""
    base = {**SMALL, "device": "cuda", "rollout.batch_size": 64, "rollout.envs_per_particle": 64}
    graphed = steinrl.Trainer(steinrl.load_config("svgd-ppo", "Hopper-v5", {**base, "run.cuda_graph": "on"}))
    replayed = _strip([graphed.step() for _ in range(5)])
    assert graphed.job.graph.failed is None and graphed.job.graph.graph is not None
    eager = steinrl.Trainer(steinrl.load_config("svgd-ppo", "Hopper-v5", {**base, "run.cuda_graph": "off"}))
    assert replayed == _strip([eager.step() for _ in range(5)])
