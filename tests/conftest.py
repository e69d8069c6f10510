import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _single_thread():
    """Tiny tensors: one intra-op thread is faster and keeps results identical across runs."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def run_script(script: str, *args: str, cwd: Path | None = None, timeout: float = 300):
    """Run ``python <script> args`` from the repo root; returns the CompletedProcess."""
    import subprocess

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, str(ROOT / script), *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=timeout, env=env)


def signal_training(args: list[str], metrics: Path, sig: int, rows: int = 2) -> tuple[int, str]:
    """Start ``python train.py args``, send ``sig`` once ``metrics`` (its metrics.jsonl) has ``rows``
    lines (at most 120 s), and wait for it; ``(exit code, stderr)``."""
    import subprocess
    import time

    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (metrics.exists() and metrics.read_text().count("\n") >= rows):
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


#: Small batches for fast end-to-end runs (bare keys: each names one config section).
TINY = {"particles": 3, "envs_per_particle": 2, "batch_size": 40, "horizon": 40, "iterations": 2,
        "run.progress": False, "run.tensorboard": False}


#: Tasks whose files set the fast preset's continuing sampling; their tiny runs keep the whole
#: episodes they were written with (a tiny continuing iteration of 20 steps ends no episode).
FAST_SAMPLING_TASKS = ("CartpoleSwingUp", "CartpoleSwingUpRllab", "steinrl/CartpoleSwingUp-v0",
                       "steinrl/CartpoleSwingUpRllab-v0")


def tiny_config(algo="s2vgd-a2c", env="CartpoleSwingUp", **overrides):
    """A resolved config of ``algo`` on ``env`` with :data:`TINY` batches (2 critic steps where there
    is a critic; on the swing-ups, whole episodes and the critic after the update unless overridden)."""
    from steinrl.run.config import load_config

    cfg = load_config(algo, env, {**TINY, **overrides})
    if "critic" in cfg and not any(k.startswith("critic.") or k == "steps" for k in overrides):
        cfg = cfg.replace({"critic.steps": 2})
    if env in FAST_SAMPLING_TASKS and "rollout" in cfg:
        pinned = {"rollout.sampling": "whole_episodes",
                  **({"critic.overlap": False} if "overlap" in cfg.to_dict().get("critic", {}) else {})}
        cfg = cfg.replace({k: v for k, v in pinned.items()
                           if k not in overrides and k.split(".")[1] not in overrides})
    return cfg


def trained_run(root, algo="s2vgd-a2c", env="Cartpole", run_name="r", **overrides):
    """Train a tiny run through the CLI's run loop into ``<root>/<env>/<algo>/r``; returns the run directory."""
    from steinrl.run.cli import train

    return train(tiny_config(algo, env, **{"run.logdir": str(root), "run.run_name": run_name, **overrides}))


def stepped_with_a_restore(cfg, path: Path, steps: int = 4, first_cfg=None) -> tuple[list, list]:
    """``(straight, resumed)``: the rows of ``steps`` steps of one Trainer, and of a Trainer that takes the
    first half (built from ``first_cfg`` if given), saves to ``path``, and a fresh one that restores and
    takes the rest."""
    import steinrl

    straight = steinrl.Trainer(cfg)
    expected = [straight.step() for _ in range(steps)]
    first = steinrl.Trainer(first_cfg or cfg)
    head = [first.step() for _ in range(steps // 2)]
    first.save(path)
    second = steinrl.Trainer(cfg)
    second.restore(path)
    return expected, head + [second.step() for _ in range(steps - steps // 2)]


def check_posterior_draws(q) -> torch.Tensor:
    """Check a 5 → [7, 6] → 3 posterior's draws: per-layer ``(4, in, out)`` / ``(4, out)`` shapes, the
    batched forward ``(4, 9, 3)``, and the same generator seed giving the same draws; returns the ``(9, 5)``
    inputs used."""
    from steinrl.core.ensemble import mlp_forward

    draws = q.sample(4, torch.Generator().manual_seed(1))
    assert [(tuple(w.shape), tuple(b.shape)) for w, b in draws] == [((4, 5, 7), (4, 7)), ((4, 7, 6), (4, 6)),
                                                                    ((4, 6, 3), (4, 3))]
    x = torch.randn(9, 5)
    assert mlp_forward(draws, x, "relu").shape == (4, 9, 3)
    again = q.sample(4, torch.Generator().manual_seed(1))
    assert all(torch.equal(w, w2) and torch.equal(b, b2) for (w, b), (w2, b2) in zip(draws, again))
    return x


#: what the recorded references (the code before the kernel object) logged for the independent
#: update, which has no kernel: a bandwidth, kernel mean and repulsive norm it never used (today
#: not logged at all)
NO_KERNEL_KEYS = {"train/bandwidth", "train/kernel_mean", "train/repulsive_norm", "bandwidth", "kernel_mean",
                  "repulsive_norm"}


def recorded(old: dict, algo: str) -> dict:
    """The recorded metrics today's code still logs for ``algo``."""
    return {k: v for k, v in old.items() if not (algo.startswith("independent") and k in NO_KERNEL_KEYS)}


#: The coupling the recorded references (tests/data/*.json) were made with: the code's default, the RBF
#: kernel on the weights at lambda = 1 (what the task files ship; set explicitly, whatever they ship).
RECORDED_COUPLING = {"update.kernel": {"space": "weights"}, "update.repulsion": "constant"}


def with_recorded_coupling(algo: str, overrides: dict) -> dict:
    """``overrides`` plus each key of :data:`RECORDED_COUPLING` they do not set, for a Stein method."""
    from steinrl.core.methods import METHODS

    if METHODS.get(algo.split("-")[0]).coupling != "stein":
        return overrides
    return {**{k: v for k, v in RECORDED_COUPLING.items() if k not in overrides}, **overrides}
