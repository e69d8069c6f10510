"""Batched ensemble forward against M separate torch modules."""

import math

import pytest
import torch
from torch import nn

from steinrl.core.ensemble import EnsembleMLP, mlp_forward
from steinrl.core.priors import GaussianPrior, InvGammaPrior

#: float tolerances: .ci/run reruns this module under the forced CPU kernel sets
pytestmark = pytest.mark.numerics

LAYER_CONFIGS = [
    ("gaussian", None),
    ("householder", {"K": 1}),
    ("householder", {"K": 0}),
    ("kronecker", None),
]
REF_ACT = {"tanh": torch.tanh, "relu": torch.relu, "elu": nn.functional.elu, "identity": lambda x: x}


def make(layer, layer_kwargs, activation="tanh", dtype=torch.float64, M=5):
    torch.manual_seed(0)
    net = EnsembleMLP(M, 4, (25, 10), 3, activation=activation, layer=layer, layer_options=layer_kwargs)
    net = net.to(dtype)
    with torch.no_grad():  # non-zero biases so they are checked too
        for lyr in net.layers:
            lyr.bias.normal_(0.0, 0.1)
    return net


def independent_linears(net, i):
    """Particle i rebuilt from freshly constructed nn.Linear layers with copied weights."""
    layers = []
    with torch.no_grad():
        for W, b in net.dense():
            lin = nn.Linear(W.shape[1], W.shape[2], dtype=W.dtype)
            lin.weight.copy_(W[i].T)
            lin.bias.copy_(b[i])
            layers.append(lin)
    return layers


#: float32's unit roundoff: every float32 operation is exact times (1 + δ), |δ| <= U
U32 = 2.0 ** -24


def float32_forward_bound(dense, x):
    """Elementwise bound on |y − y'| for two float32 evaluations y, y' of the same tanh MLP in any
    summation order (a batched matmul against torch.nn.Linear, AVX-512 against AVX2 or scalar
    kernels), from Higham's bound on a float32 dot product: |fl(Σ_j a_j b_j) − Σ_j a_j b_j| <=
    γ_n Σ_j |a_j b_j| with γ_n = n u / (1 − n u) <= 1.01 n u. Per layer, each evaluation's own
    error is within γ_{n+2} (Σ_j |W_jk| (|h_j| + 1) + |b_k|) of exact (n inputs, the bias, and the
    CPU forward's tanh = 2·sigmoid(2z) − 1 folded into the next layer, whose bias b − Wᵀ1 adds
    Σ_j |W_jk|), plus 4 u for the activation (torch's float32 tanh and sigmoid are within 2 ulp
    of |y| <= 1); an input error e propagates as |W|ᵀ e (tanh is 1-Lipschitz). The two
    evaluations together: twice that. Computed in float64 from the float32 weights."""
    h = x.double().abs()
    err = torch.zeros(())
    for k, (W, b) in enumerate(dense):
        absW, n = W.double().abs(), W.shape[1]
        magnitude = h @ absW + absW.sum(1)[:, None, :] + b.double().abs()[:, None, :]  # M B out
        err = err @ absW if err.dim() else err
        err = err + 2 * 1.01 * (n + 2) * U32 * magnitude
        if k < len(dense) - 1:
            err = err + 2 * 4 * U32
            h = torch.ones_like(magnitude)  # |tanh| <= 1
    return err


def run_linears(layers, x, act):
    for k, lin in enumerate(layers):
        x = lin(x)
        if k < len(layers) - 1:
            x = act(x)
    return x


@pytest.mark.parametrize("layer,layer_kwargs", LAYER_CONFIGS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("B", [7, 400])  # 400: large enough for the no-grad sigmoid form of tanh
def test_batched_forward_equals_separate_modules(layer, layer_kwargs, dtype, B):
    """The algebra in float64 (1e-10: float64 rounding is ~1e-16 of these sums), the shipped float32
    within :func:`float32_forward_bound` (summation order is each CPU's kernels' own)."""
    M = 5
    net = make(layer, layer_kwargs, dtype=dtype, M=M)
    x_per = torch.randn(M, B, 4, dtype=dtype)
    x_shared = torch.randn(B, 4, dtype=dtype)

    def check(got, want, bound):
        if dtype == torch.float64:
            torch.testing.assert_close(got, want, rtol=0, atol=1e-10)
        else:
            assert bool(((got - want).abs().double() <= bound).all()), float(((got - want).abs() - bound).max())

    with torch.no_grad():
        y_per = net(x_per)
        y_shared = net(x_shared)
        assert y_per.shape == (M, B, 3) and y_shared.shape == (M, B, 3) and y_per.dtype == dtype
        dense = net.dense()
        bound_per = float32_forward_bound(dense, x_per)
        bound_shared = float32_forward_bound(dense, x_shared.expand(M, B, 4))
        assert float(bound_per.max()) < 1e-3  # tight enough to catch a wrong weight or bias (outputs are O(1))
        for i in range(M):
            module = net.particle_module(i)
            assert isinstance(module, nn.Sequential)
            assert all(isinstance(m, (nn.Linear, nn.Tanh)) for m in module)
            check(y_per[i], module(x_per[i]), bound_per[i])
            check(y_shared[i], module(x_shared), bound_shared[i])
            linears = independent_linears(net, i)
            check(y_per[i], run_linears(linears, x_per[i], torch.tanh), bound_per[i])
            check(y_shared[i], run_linears(linears, x_shared, torch.tanh), bound_shared[i])


@pytest.mark.parametrize("activation", ["tanh", "relu", "elu", "identity"])
def test_activations_and_in_place_gradients(activation):
    """The in-place activations give the same outputs and gradients as out-of-place ones."""
    net = make("householder", {"K": 1}, activation=activation)
    x = torch.randn(5, 6, 4, dtype=torch.float64)
    dense = net.dense()
    y = net(x, dense)
    ref_y = x
    for k, (W, b) in enumerate(dense):
        ref_y = ref_y @ W + b[:, None, :]
        if k < len(dense) - 1:
            ref_y = REF_ACT[activation](ref_y)
    torch.testing.assert_close(y, ref_y, rtol=1e-12, atol=1e-12)
    params = list(net.parameters())
    g = torch.autograd.grad(y.square().sum(), params, retain_graph=True)
    g_ref = torch.autograd.grad(ref_y.square().sum(), params)
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    i = 2
    torch.testing.assert_close(y[i].detach(), net.particle_module(i)(x[i]), rtol=0, atol=1e-10)


@pytest.mark.parametrize("layer,layer_kwargs", LAYER_CONFIGS)
def test_gradients_reach_structured_parameters(layer, layer_kwargs):
    net = make(layer, layer_kwargs)
    dense = net.dense()  # materialised once, reused for several "steps"
    loss = sum(net(torch.randn(5, 3, 4, dtype=torch.float64), dense).square().sum() for _ in range(3))
    loss.backward()
    for name, p in net.named_parameters():
        g = torch.tril(p.grad, -1) if name.endswith((".A", ".B")) else p.grad
        assert g is not None and torch.isfinite(g).all() and (g != 0).any(), name


def test_extra_batch_dims_and_dense_reuse():
    net = make("kronecker", None)
    x = torch.randn(5, 6, 2, 4, dtype=torch.float64)  # M T E in
    y = net(x)
    assert y.shape == (5, 6, 2, 3)
    torch.testing.assert_close(y, net(x.reshape(5, 12, 4)).reshape(5, 6, 2, 3))
    dense = net.dense()
    torch.testing.assert_close(net(x, dense), y)
    torch.testing.assert_close(mlp_forward(dense, x, "tanh"), y)
    with pytest.raises(ValueError, match="M=5"):
        net(torch.randn(4, 3, 4, dtype=torch.float64))
    with pytest.raises(ValueError):
        net(torch.randn(4, dtype=torch.float64))


def test_shared_input_is_not_copied(monkeypatch):
    net = make("gaussian", None)
    x = torch.randn(7, 4, dtype=torch.float64)
    seen = []
    orig = torch.baddbmm

    def spy(input, batch1, batch2, **kwargs):
        seen.append(batch2)
        return orig(input, batch1, batch2, **kwargs)

    dense = net.dense()
    monkeypatch.setattr(torch, "baddbmm", spy)
    y = mlp_forward(dense, x, "tanh")
    monkeypatch.undo()
    assert len(seen) == 3  # one baddbmm per layer
    # the layers run feature-major: the shared input enters as an expanded view (M, in, B)
    assert seen[0].shape == (5, 4, 7) and seen[0].stride(0) == 0  # an expand, not a copy
    assert seen[0].data_ptr() == x.data_ptr()
    torch.testing.assert_close(y, net(x.expand(5, 7, 4).clone()))


def test_init_gains_log_prior_and_attributes():
    torch.manual_seed(1)
    net = EnsembleMLP(64, 40, (30,), 20, layer="householder", output_gain=0.01, init="lecun")
    assert (net.num_particles, net.in_dim, net.hidden, net.out_dim) == (64, 40, (30,), 20)
    W_hidden, W_out = (W.detach() for W, _ in net.dense())
    assert abs(W_hidden.std().item() * math.sqrt(40) - 1.0) < 0.05  # tanh: gain 1
    assert abs(W_out.std().item() * math.sqrt(30) / 0.01 - 1.0) < 0.05
    relu = EnsembleMLP(64, 40, (30,), 20, activation="relu", init="lecun")
    assert abs(relu.dense()[0][0].std().item() * math.sqrt(40) / math.sqrt(2) - 1.0) < 0.05
    for prior in (GaussianPrior(0.01), InvGammaPrior()):
        lp = net.log_prior(prior)
        assert lp.shape == (64,)
        torch.testing.assert_close(lp, sum(layer.log_prior(prior) for layer in net.layers))
    with pytest.raises(ValueError, match="tanh.*relu.*elu.*identity"):
        EnsembleMLP(2, 3, (4,), 1, activation="sigmoid")
    with pytest.raises(ValueError, match="gaussian"):
        EnsembleMLP(2, 3, (4,), 1, layer="dense")
    with pytest.raises(TypeError):
        EnsembleMLP(2, 3, (4,), 1, layer="gaussian", layer_kwargs={"K": 1})
    with pytest.raises(IndexError):
        net.particle_module(64)


def test_glorot_init_scale():
    net = EnsembleMLP(64, 40, (30,), 20, layer="gaussian", output_gain=0.5)
    W_hidden, W_out = net.layers[0].weight(), net.layers[1].weight()
    assert abs(W_hidden.std().item() / math.sqrt(2.0 / 70) - 1.0) < 0.05
    assert abs(W_out.std().item() / (0.5 * math.sqrt(2.0 / 50)) - 1.0) < 0.05


def test_torch_init_is_nn_linears_uniform_on_one_over_sqrt_in():
    """``init="torch"`` (SB3's with ortho_init=False): every layer's W and b uniform on
    ±1/√in, as torch.nn.Linear's reset_parameters; the moments of U(−a, a): mean 0, variance a²/3."""
    net = EnsembleMLP(64, 40, (30,), 20, layer="gaussian", init="torch", output_gain=0.01,
                      generator=torch.Generator().manual_seed(0))
    for layer, n_in in zip(net.layers, (40, 30)):
        a = 1.0 / math.sqrt(n_in)
        for t in (layer.weight(), layer.bias):
            assert t.abs().max().item() <= a and t.abs().max().item() > 0.95 * a  # output_gain unused
            assert abs(t.mean().item()) < 0.02 * a and abs(t.var().item() / (a * a / 3) - 1.0) < 0.05
    reference = nn.Linear(40, 30)  # the same bound as torch's own layer
    assert reference.weight.abs().max().item() <= 1.0 / math.sqrt(40)


@pytest.mark.parametrize("grad", [False, True])
def test_large_tanh_blocks_match_plain_tanh(grad):
    """Large hidden blocks take the sigmoid form of tanh; values and gradients match plain tanh."""
    torch.manual_seed(0)
    net = EnsembleMLP(4, 6, [40, 30], 2, activation="tanh", layer="gaussian").double()
    x = torch.randn(4, 3000, 6, dtype=torch.float64)  # 4 * 40 * 3000 elements: above the sigmoid-form threshold
    ref_layers = [(W.detach().clone().requires_grad_(grad), b.detach().clone().requires_grad_(grad))
                  for W, b in net.dense()]
    h = x
    for i, (W, b) in enumerate(ref_layers):  # reference: plain bmm + torch.tanh
        h = torch.bmm(h, W) + b.unsqueeze(1)
        if i < 2:
            h = torch.tanh(h)
    dense = [(W.detach().clone().requires_grad_(grad), b.detach().clone().requires_grad_(grad))
             for W, b in ref_layers]
    with torch.set_grad_enabled(grad):
        y = mlp_forward(dense, x, "tanh")
    torch.testing.assert_close(y, h.detach() if not grad else h, rtol=1e-10, atol=1e-10)
    if grad:
        h.square().sum().backward()
        y.square().sum().backward()
        for (W, b), (W0, b0) in zip(dense, ref_layers):
            torch.testing.assert_close(W.grad, W0.grad, rtol=1e-9, atol=1e-9)
            torch.testing.assert_close(b.grad, b0.grad, rtol=1e-9, atol=1e-9)
