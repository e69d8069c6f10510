"""The one optimisation step (steinrl.core.optim.gradient_step) against the steps written out."""

import torch

from steinrl.core.optim import gradient_step


def _quadratic(p, q, target):
    return (p - target).square().sum() + 3.0 * q.square().sum()


def test_gradient_step_equals_the_steps_written_out():
    """lr set, zero_grad, backward, clipping to a total norm, every optimizer stepped, in order;
    the first optimizer's step result comes back."""
    g = torch.Generator().manual_seed(0)
    target = torch.randn(4, 3, generator=g, dtype=torch.float64)
    start_p, start_q = torch.randn(4, 3, generator=g, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    p, q = torch.nn.Parameter(start_p.clone()), torch.nn.Parameter(start_q.clone())
    sgd, adam = torch.optim.SGD([p], lr=0.5), torch.optim.Adam([q], lr=0.5)
    p.grad, q.grad = torch.ones_like(p), torch.ones_like(q)  # stale gradients: must be zeroed
    seen = []
    result = gradient_step(_quadratic(p, q, target), [sgd, None, adam], lr=0.1, max_grad_norm=1.0,
                           on_gradients=lambda: seen.append((p.grad.clone(), q.grad.clone())))
    assert result is None and sgd.param_groups[0]["lr"] == adam.param_groups[0]["lr"] == 0.1
    # by hand: the gradients of the loss, their total norm clipped to 1, one SGD and one Adam step
    gp, gq = 2.0 * (start_p - target), 6.0 * start_q
    torch.testing.assert_close(seen[0][0], gp)
    torch.testing.assert_close(seen[0][1], gq)
    scale = 1.0 / (torch.cat([gp.flatten(), gq]).norm() + 1e-6)
    p_ref, q_ref = torch.nn.Parameter(start_p.clone()), torch.nn.Parameter(start_q.clone())
    p_ref.grad, q_ref.grad = gp * scale, gq * scale
    torch.optim.SGD([p_ref], lr=0.1).step()
    torch.optim.Adam([q_ref], lr=0.1).step()
    torch.testing.assert_close(p.detach(), p_ref.detach(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(q.detach(), q_ref.detach(), rtol=1e-12, atol=1e-12)


def test_gradient_step_takes_a_backward_callable():
    """A callable fills the gradients itself (here two backward passes, which accumulate)."""
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    opt = torch.optim.SGD([p], lr=0.25)

    def backward():
        p.square().sum().backward()  # 2p
        (3.0 * p.sum()).backward()  # + 3

    assert gradient_step(backward, [opt]) is None  # SGD's step returns None
    torch.testing.assert_close(p.detach(), torch.tensor([1.0 - 0.25 * 5.0, -2.0 - 0.25 * -1.0], dtype=torch.float64))
