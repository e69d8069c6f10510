"""The one particle step (steinrl.core.particle_optimizer) against its order written out by hand:
gradients of J (and an auxiliary loss), per-particle clipping, /α, + w ∇log p, the direction,
the optimizers."""

import pytest
import torch

from steinrl.core.finite import FiniteFlags
from steinrl.core.particle_optimizer import ParticleOptimizer

F64 = torch.float64


def _setup(max_grad_norm):
    gen = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(2, n, generator=gen, dtype=F64) for n in (3, 1, 2))
    a[0] *= 10.0  # particle 0's gradient is clipped, particle 1's (norm < 1 after scaling) is not
    a[1], b[1], c[1] = 0.1 * a[1], 0.1 * b[1], 0.1 * c[1]
    p, q, r = (torch.nn.Parameter(torch.randn(2, n, generator=gen, dtype=F64)) for n in (3, 1, 2))
    aux_opt = torch.optim.SGD([r], lr=0.3)
    opt = ParticleOptimizer([p], "independent", lr=0.1, optimizer="sgd", temperature=2.0, prior_weight=0.5,
                            log_prior=lambda: -0.5 * p.square().sum(1), max_grad_norm=max_grad_norm, own=[q],
                            finite=FiniteFlags())
    return (a, b, c), (p, q, r), aux_opt, opt


def test_the_step_in_its_documented_order_by_hand():
    (a, b, c), (p, q, r), aux_opt, opt = _setup(max_grad_norm=1.0)
    p0, q0, r0 = (t.detach().clone() for t in (p, q, r))
    objective = (a * p).sum(1) + (b * q).sum(1)  # J_i
    result = opt.step(objective, aux_loss=(c * r).sum(), aux_params=[r], aux_optimizer=aux_opt)
    # by hand: each particle's gradient of (J, aux) has norm n_i, scaled by min(1, 1 / (n_i + 1e-6))
    norms = torch.cat([a, b, c], 1).norm(dim=1)
    f = (1.0 / (norms + 1e-6)).clamp(max=1.0)[:, None]
    assert f[0] < 0.5 and f[1] == 1.0
    torch.testing.assert_close(result.grad_norm, norms)
    alpha, w, lr = 2.0, 0.5, 0.1
    g_p = a * f / alpha - w * p0  # clip(∇J)/α + w ∇log p, log p = −‖p‖²/2
    torch.testing.assert_close(p.detach(), p0 + lr * g_p)  # independent: φ = g; SGD on −φ
    step_q = -b * f / alpha  # the own parameter's Adam, first step: lr · sign of its gradient
    torch.testing.assert_close(q.detach(), q0 - lr * step_q / (step_q.abs() + 1e-8))
    torch.testing.assert_close(r.detach(), r0 - 0.3 * c * f)  # the auxiliary loss: clipped, not /α
    torch.testing.assert_close(result.log_prior, -0.5 * p0.square().sum(1))
    assert set(opt.finite.flags) == {"objective", "gradient", "parameter"}
    assert all(bool(v.all()) for v in opt.finite.flags.values())


def test_without_clipping_one_backward_gives_the_same_step():
    """No max_grad_norm: −Σ (J/α + w log p) in one backward, the same step as clipping at a norm
    no gradient reaches."""
    moved = []
    for max_norm in (None, 1e9):
        (a, b, _), (p, q, _), _, opt = _setup(max_grad_norm=max_norm)
        result = opt.step((a * p).sum(1) + (b * q).sum(1))
        assert (result.grad_norm is None) == (max_norm is None)
        moved.append((p.detach().clone(), q.detach().clone()))
    for x, y in zip(*moved):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)


def test_non_finite_objective_is_flagged_for_its_particle():
    (a, b, _), (p, q, _), _, opt = _setup(max_grad_norm=None)
    objective = (a * p).sum(1) + (b * q).sum(1)
    opt.step(objective * torch.tensor([1.0, float("nan")], dtype=F64))
    flags = opt.finite.flags["log target (surrogate / temperature + prior)"]
    assert flags.tolist() == [True, False]


@pytest.mark.parametrize("bad", [{"max_grad_norm": 0.0}, {"max_direction_norm": -1.0}, {"groups": 3}])
def test_bad_settings_raise(bad):
    p = torch.nn.Parameter(torch.zeros(2, 2))
    with pytest.raises(ValueError):
        ParticleOptimizer([p], lr=0.1, **bad)
