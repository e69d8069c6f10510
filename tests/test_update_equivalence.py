"""The update rewritten as one class per estimator over one shared particle step gives the
numbers of the code before it.

``tests/data/update_reference.json`` holds three iterations of every estimator (REINFORCE, A2C,
PPO with its whole recipe: minibatches, epochs, entropy bonus, per-particle clipping, annealing,
reward scaling, per-minibatch normalisation, a joint critic with value clipping), a critic fitted
beside the policy (``critic.overlap``), the linear critic, the IMQ kernel, the proximal term with
lr halving, discrete and continuous actions and seed batches, plus Stein Thompson sampling and
BNN regression, as the code of commit cafe6a3 computed them
(``tests/data/make_update_reference.py``). The same cases through today's code must agree within
float32 rounding: every logged metric, and checksums of the particles and critics.

The tolerances are **one recorded CPU against another** (float32 kernels sum in their
instruction set's order; three iterations of training carry a last-bit difference on). Measured
on this project's AMD EPYC (AVX-512) against the file on 2026-11-28: identical under the default
kernels and under avx2 with MKL and oneDNN limited to AVX2; under ``ATEN_CPU_CAPABILITY=default``
(scalar kernels) the metrics moved by at most 9.7e-6 relative (an explained variance; value
losses 6.1e-6) and the checksums Σθ by at most 3.4e-8 of Σ|θ|. Compared at rel 1e-4 / abs 1e-6
(10x) and at 1e-6 Σ|θ| (30x; Σθ cancels to a few percent of Σ|θ|, the scale of a float32 sum's
rounding). ``.ci/run`` reruns this file under the forced kernel sets.
"""

import json
import math
from pathlib import Path

import pytest
import torch
from conftest import recorded, with_recorded_coupling

import steinrl

#: float tolerances: .ci/run reruns this module under the forced CPU kernel sets
pytestmark = pytest.mark.numerics

DATA = json.loads((Path(__file__).parent / "data" / "update_reference.json").read_text())


def today(overrides: dict) -> dict:
    """The recorded overrides in today's keys: the update's bandwidth is a parameter of its kernel."""
    overrides = dict(overrides)
    if "update.bandwidth" in overrides:
        overrides["update.kernel"] = {"name": overrides.pop("update.kernel", "rbf"),
                                      "bandwidth": overrides.pop("update.bandwidth")}
    return overrides


def close(new: float, old: float, key: str) -> None:
    if isinstance(old, float) and math.isnan(old):
        assert math.isnan(new), key
    else:
        assert new == pytest.approx(old, rel=1e-4, abs=1e-6), key


def checksum(params) -> float:
    return float(sum(p.detach().double().sum() for p in params))


def same_checksum(params, recorded: float) -> None:
    """Σθ within 1e-6 Σ|θ| of the recorded value (a float32 sum's rounding scales with Σ|θ|)."""
    params = list(params)
    scale = float(sum(p.detach().double().abs().sum() for p in params))
    assert abs(checksum(params) - recorded) <= 1e-6 * scale, (checksum(params), recorded, scale)


@pytest.mark.parametrize("case", DATA["cases"],
                         ids=lambda c: f"{c['env']}-{c['algo']}-{c.get('seeds', 'single')}-{len(c['overrides'])}")
def test_every_estimator_matches_the_code_before_the_rewrite(case):
    torch.set_num_threads(1)
    cfg = steinrl.load_config(case["algo"], case["env"],
                              with_recorded_coupling(case["algo"], {**DATA["small"], **today(case["overrides"])}))
    trainer = steinrl.Trainer(cfg, case.get("seeds"))
    rows = [trainer.step_seeds() for _ in range(3)]
    agent = trainer.job.agent
    for it, (old_seeds, new_seeds) in enumerate(zip(case["metrics"], rows)):
        for old, new in zip(old_seeds, new_seeds):
            old = recorded(old, case["algo"])
            assert set(old) == {k for k in new if not k.startswith("time/")}, it
            for key, value in old.items():
                close(new[key], value, f"iteration {it}: {key}")
    same_checksum(agent.policy.parameters(), case["checksums"]["policy"])
    if "critic" in case["checksums"]:
        same_checksum(agent.critic.parameters(), case["checksums"]["critic"])
    trainer.close()


@pytest.mark.parametrize("case", DATA["bandits"], ids=lambda c: c["algo"])
def test_stein_thompson_sampling_matches_the_code_before_the_rewrite(case):
    cfg = steinrl.load_config(case["algo"], case["env"],
                              with_recorded_coupling(case["algo"], {**today(case["overrides"]), "run.progress": False}))
    trainer = steinrl.Trainer(cfg)
    last = None
    while not trainer.done:
        last = trainer.step()
    trainer.close()
    for key, value in recorded(case["metrics"][-1], case["algo"]).items():
        close(last[key], value, key)


@pytest.mark.parametrize("case", DATA["regression"], ids=lambda c: f"{c['method']}-{c['kernel']}")
def test_bnn_regression_matches_the_code_before_the_rewrite(case):
    from steinrl.bayes.regression import fit_regressor

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(40, 3, generator=gen, dtype=torch.float64).numpy()
    y = x @ [1.0, -2.0, 0.5] + 0.1 * torch.randn(40, generator=gen, dtype=torch.float64).numpy()
    options = {k: v for k, v in case.items() if k not in ("method", "checksum")}
    regressor = fit_regressor(case["method"], x, y, hidden=(8,), **options)
    assert checksum(regressor.model.parameters()) == pytest.approx(case["checksum"], rel=1e-6)


def test_a_run_of_steinrl_0_2_resumes_and_continues_as_it_would_have(tmp_path):
    """``tests/data/run_v0_2``: a 2-iteration svgd-ppo run (reward scaling, minibatches,
    ``update.bandwidth: s2vgd``) made by the code of commit cafe6a3, whose checkpoint keeps the
    particle optimizer under ``svgd`` and ``own_opt``. Today's ``steinrl train --resume`` reads
    its config (the bandwidth joins the kernel) and checkpoint, and iterations 3-4 are those of
    the old code's straight 4-iteration run (``straight_iterations_3_4.jsonl``)."""
    import shutil

    from steinrl.run.cli import train_main
    from steinrl.run.config import read_run_config

    data = Path(__file__).parent / "data" / "run_v0_2"
    run = tmp_path / "old"
    run.mkdir()
    for name in ("config.yaml", "checkpoint.pt"):
        shutil.copy(data / name, run / name)
    kernel = read_run_config(run / "config.yaml").update.kernel
    assert kernel == {"name": "rbf", "bandwidth": "s2vgd", "space": "weights"}
    assert train_main(["--resume", str(run), "--iterations", "4", "--no-progress"]) == 0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()][-2:]
    want = [json.loads(line) for line in (data / "straight_iterations_3_4.jsonl").read_text().splitlines()]
    for new, old in zip(rows, want):
        for key, value in old.items():
            if not key.startswith("time/"):
                close(new[key], value, key)
