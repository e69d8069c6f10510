"""The graph-safe iteration, on the CPU: everything a CUDA graph needs but the capture call.

``IterationGraph(capture=False)`` runs the warm-up iterations, then freezes the iteration's
random numbers into static buffers drawn before each iteration, and runs the iteration eagerly
from them: what a replayed graph computes. Checked against plain eager runs (the same numbers),
for storage that stays put, for host syncs, for checkpoints both ways, and for the noise.
"""

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import steinrl
from steinrl.rl.graph import WARMUP, IterationGraph, persistent_tensors

SYNC_OPS = {"_local_scalar_dense", "item", "is_nonzero", "nonzero", "masked_select", "equal"}
BASE = {"particles": 3, "rollout.envs_per_particle": 2, "rollout.batch_size": 40, "rollout.env_backend": "torch",
        "rollout.sampling": "continuing", "rollout.horizon": 25, "critic.steps": 3, "critic.minibatch": 16,
        "run.progress": False}
CASES = [
    ("svgd-a2c", {}, None),
    ("s2vgd-a2c", {"rollout.sampling": "cut"}, [4, 1]),
    ("svgd-ppo", {"estimator.minibatches": 2, "estimator.epochs": 2, "estimator.scale_rewards": True,
                  "estimator.anneal_lr": True, "critic.joint": True, "iterations": 6}, None),
    ("svgd-ppo", {"estimator.minibatches": 2, "update.kernel": {"space": "functions", "states": 8},
                  "policy.normalize_obs": True, "iterations": 6}, None),
    ("independent-reinforce", {}, [0, 2]),
]


def trainer(algo, extra, seeds, static, cuda_graph=None):
    """``static``: the CPU's static iteration; ``cuda_graph`` (``on`` / ``off``): a CUDA trainer instead."""
    base = {k: v for k, v in BASE.items() if not (k.startswith("critic.") and algo.endswith("reinforce"))}
    if cuda_graph is not None:
        base = {**base, "device": "cuda", "run.cuda_graph": cuda_graph}
    t = steinrl.Trainer(steinrl.load_config(algo, "CartpoleSwingUp", {**base, **extra}), seeds)
    if static:
        t.job.graph = IterationGraph(t.job._iterate, t.job.agent.draws, torch.device("cpu"), capture=False)
    return t


def rows(t, n):
    """Every seed's scalars of ``n`` iterations, one flat dict (timings left out)."""
    return {f"{it}/{s}/{k}": v for it in range(n) for s, r in enumerate(t.step_seeds()) for k, v in r.items()
            if not k.startswith("time/")}


@pytest.mark.parametrize("algo, extra, seeds", CASES, ids=lambda c: str(c))
def test_static_iterations_give_the_eager_numbers(algo, extra, seeds):
    eager = rows(trainer(algo, extra, seeds, False), WARMUP + 3)
    static_trainer = trainer(algo, extra, seeds, True)
    static = rows(static_trainer, WARMUP + 3)
    assert static_trainer.job.agent.draws.static  # the last iterations ran from static draws
    assert static == pytest.approx(eager, rel=1e-6, abs=1e-9, nan_ok=True)
    assert sum(v for k, v in eager.items() if k.endswith("rollout/episodes")) > 0  # episodes ended: resets drawn


def test_static_state_keeps_its_storage_and_no_tensor_is_added():
    t = trainer("svgd-ppo", {"estimator.minibatches": 2, "estimator.scale_rewards": True, "critic.joint": True}, None,
                True)
    for _ in range(WARMUP + 1):
        t.step()
    before = {k: v.data_ptr() for k, v in persistent_tensors(t.job).items()}
    assert {"envs.state", "carry.obs", "draws.noise", "draws.reset_states", "draws.minibatch_keys",
            "reward_scaler.returns", "particles.0.exp_avg"} <= set(before)
    for _ in range(2):
        t.step()
        after = {k: v.data_ptr() for k, v in persistent_tensors(t.job).items()}
        assert after == before


class Syncs(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if name in SYNC_OPS:
            self.seen.append(name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("algo, extra, seeds", CASES[:4], ids=lambda c: str(c))
def test_a_static_iteration_reads_nothing_back_to_the_host(algo, extra, seeds):
    t = trainer(algo, extra, seeds, True)
    for _ in range(WARMUP + 1):
        t.step_seeds()
    job, recorder = t.job, Syncs()
    job.set_step_sizes(t.iteration)
    job.agent.draws.fill(t.iteration)
    with recorder:
        job._iterate(t.iteration)  # what the graph captures: collect, learn, pack
    assert recorder.seen == []


def test_checkpoints_move_between_static_and_eager_runs_exactly(tmp_path):
    algo, extra = "svgd-ppo", {"estimator.minibatches": 2, "estimator.scale_rewards": True, "iterations": 8}
    straight = rows(trainer(algo, extra, None, False), 6)
    tail = {k.replace("4/", "0/", 1).replace("5/", "1/", 1): v for k, v in straight.items() if k[0] in "45"}
    for first_static, second_static in ((True, False), (False, True)):
        first = trainer(algo, extra, None, first_static)
        rows(first, 4)
        first.save(tmp_path / "c.pt")
        second = trainer(algo, extra, None, second_static)
        second.restore(tmp_path / "c.pt")
        assert rows(second, 2) == pytest.approx(tail, rel=1e-6, abs=1e-9, nan_ok=True)


def test_static_iterations_draw_new_noise_and_the_eager_noise():
    static_t, eager_t = trainer("svgd-a2c", {}, None, True), trainer("svgd-a2c", {}, None, False)
    seen_eager = []
    draws = eager_t.job.agent.draws
    real_call = draws.__class__.__call__

    def recording(self, name, maker):
        value = real_call(self, name, maker)
        if name == "noise":
            seen_eager.append(value.clone())
        return value

    draws.__class__.__call__ = recording
    try:
        rows(eager_t, WARMUP + 2)
    finally:
        draws.__class__.__call__ = real_call
    seen_static = []
    for _ in range(WARMUP + 2):
        static_t.step()
        seen_static.append(static_t.job.agent.draws.buffers().get("noise"))
        seen_static[-1] = None if seen_static[-1] is None else seen_static[-1].clone()
    a, b = seen_static[-2], seen_static[-1]
    assert a is not None and not torch.equal(a, b)  # two static iterations: new noise
    torch.testing.assert_close(a, seen_eager[-2], rtol=0, atol=0)  # ... the eager run's, iteration by iteration
    torch.testing.assert_close(b, seen_eager[-1], rtol=0, atol=0)
    assert math.isclose(float(a.std()), 1.0, rel_tol=0.1)


def test_cuda_graph_on_where_it_cannot_run_is_one_error_before_anything_is_built():
    for overrides, reason in (({}, "device cpu is not CUDA"),
                              ({"rollout.sampling": "whole_episodes"}, "whole-episode sampling"),
                              ({"critic.name": "linear"}, "linear critic")):
        base = {k: v for k, v in BASE.items() if not k.startswith("critic.")}
        cfg = steinrl.load_config("svgd-a2c", "CartpoleSwingUp", {**base, **overrides, "run.cuda_graph": "on"})
        with pytest.raises(steinrl.ConfigError, match=reason) as err:
            steinrl.Trainer(cfg)
        assert len(str(err.value).splitlines()) == 1
    auto = steinrl.Trainer(steinrl.load_config("svgd-a2c", "CartpoleSwingUp", BASE))
    assert auto.job.graph is None  # auto on the CPU: eager


def test_a_graphed_critic_fits_on_the_iterating_thread(monkeypatch):
    """A capture records the capturing thread's stream only: a critic fitted beside the update on
    the overlap thread (``critic.overlap``) would run once at the capture and never in a replay.
    A graphed job fits it inline, with the overlapped run's numbers."""
    import steinrl.rl.critic_fit as critic_fit
    import steinrl.rl.graph as graph

    extra = {"critic.overlap": True}
    eager = rows(trainer("svgd-a2c", extra, None, False), WARMUP + 3)
    static_trainer = trainer("svgd-a2c", extra, None, True)
    monkeypatch.setattr(graph, "capturable", lambda opt: None)  # Adam's capturable step needs CUDA
    static_trainer.job.agent.make_capturable()  # what a graphed job does when it is built

    def no_thread():
        raise AssertionError("a graphed iteration submitted the critic's fit to the overlap thread")

    monkeypatch.setattr(critic_fit, "_overlap_pool", no_thread)
    static = rows(static_trainer, WARMUP + 3)
    assert static == pytest.approx(eager, rel=1e-6, abs=1e-9, nan_ok=True)
    assert any(k.endswith("train/value_loss") for k in static)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (CI has none: a GPU session runs it)")
@pytest.mark.parametrize("algo, extra, seeds", [*CASES, ("svgd-a2c", {"critic.overlap": True}, [0, 1])],
                         ids=lambda c: str(c))
def test_a_captured_cuda_graph_gives_the_eager_numbers(algo, extra, seeds):
    """The real capture and replay (``run.cuda_graph on``) against eager iterations on the same GPU,
    from the warm-ups through the capture to replays; the overlap case is the one a GPU found."""
    graphed = trainer(algo, extra, seeds, False, cuda_graph="on")
    replayed = rows(graphed, WARMUP + 3)
    assert graphed.job.graph.failed is None and graphed.job.graph.graph is not None
    eager = rows(trainer(algo, extra, seeds, False, cuda_graph="off"), WARMUP + 3)
    assert replayed == pytest.approx(eager, rel=1e-6, abs=1e-9, nan_ok=True)
