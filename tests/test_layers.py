"""Structured layers: factor algebra, the MVG covariance claim, priors, init, API."""

import math

import pytest
import torch

from steinrl.core.layers import (
    LAYERS,
    DenseLinear,
    HouseholderLinear,
    KroneckerLinear,
    StructuredLinear,
    make_layer,
)
from steinrl.core.priors import GaussianPrior, InvGammaPrior

F64 = torch.float64


def free_parameters(layer) -> int:
    """The free parameters of one particle: the entries of its prior groups (the stored count for
    ``gaussian`` and ``householder``; of a ``kronecker`` layer's square A, B only the strictly-lower entries)."""
    return sum(g.shape[1] for g in layer.param_groups().values())


def householder_matrix(v: torch.Tensor) -> torch.Tensor:
    """Explicit H(v) = I − 2vvᵀ/‖v‖² for one vector v (n,)."""
    n = v.shape[0]
    return torch.eye(n, dtype=v.dtype) - 2.0 * torch.outer(v, v) / v.dot(v)


def explicit_product(vs: torch.Tensor) -> torch.Tensor:
    """H_K … H_1 from vectors vs (K, n), multiplied out matrix by matrix."""
    n = vs.shape[1]
    P = torch.eye(n, dtype=vs.dtype)
    for k in range(vs.shape[0]):
        P = householder_matrix(vs[k]) @ P  # left-multiply: H_k (H_{k-1} … H_1)
    return P


def randomise_lambdas(layer, gen):
    with torch.no_grad():
        if isinstance(layer, DenseLinear):
            layer.bias.normal_(generator=gen)
            return
        layer.lambda_in.copy_(0.5 + torch.rand(layer.lambda_in.shape, generator=gen, dtype=layer.lambda_in.dtype))
        layer.lambda_out.copy_(0.5 + torch.rand(layer.lambda_out.shape, generator=gen, dtype=layer.lambda_out.dtype))
        if layer.bias is not None:
            layer.bias.normal_(generator=gen)


@pytest.mark.parametrize("K", [1, 2, 3])
def test_householder_matches_explicit_reflections(K):
    gen = torch.Generator().manual_seed(K)
    M, l1, l2 = 3, 5, 4
    layer = HouseholderLinear(M, l1, l2, K=K, generator=gen, dtype=F64)
    randomise_lambdas(layer, gen)
    W = layer.weight()
    assert W.shape == (M, l1, l2)
    for i in range(M):
        P = explicit_product(layer.v_in[i].detach())
        Q = explicit_product(layer.v_out[i].detach())
        torch.testing.assert_close(P.T @ P, torch.eye(l1, dtype=F64), atol=1e-5, rtol=0)
        torch.testing.assert_close(Q.T @ Q, torch.eye(l2, dtype=F64), atol=1e-5, rtol=0)
        ref = P @ torch.diag(layer.lambda_in[i]) @ layer.C[i] @ torch.diag(layer.lambda_out[i]) @ Q.T
        torch.testing.assert_close(W[i], ref.detach(), atol=1e-12, rtol=1e-12)


def test_householder_factor_is_orthogonal_float32():
    # Note: torch.linalg.householder_product is *not* a drop-in reference here: it uses
    # LAPACK's convention (implicit unit leading entry, zeros above it), not full vectors.
    gen = torch.Generator().manual_seed(0)
    M, n, K = 4, 6, 3
    layer = HouseholderLinear(M, n, n, K=K, generator=gen)
    eye = torch.eye(n).expand(M, n, n)
    for i in range(M):
        P = explicit_product(layer.v_in[i].detach())  # float32, built here from the layer's vectors
        Q = explicit_product(layer.v_out[i].detach())
        torch.testing.assert_close(P.T @ P, eye[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(Q.T @ Q, eye[0], atol=1e-5, rtol=0)
    # with C = I and Λ = 1 the layer's own W = P Qᵀ must be orthogonal as well
    with torch.no_grad():
        layer.C.copy_(eye)
    W = layer.weight().detach()
    torch.testing.assert_close(W.transpose(1, 2) @ W, eye, atol=1e-5, rtol=0)


def test_householder_k0_is_diagonal_scaling():
    gen = torch.Generator().manual_seed(1)
    layer = HouseholderLinear(3, 4, 5, K=0, generator=gen, dtype=F64)
    randomise_lambdas(layer, gen)
    assert layer.v_in is None and layer.v_out is None
    assert set(layer.param_groups()) == {"C", "lambda_in", "lambda_out", "bias"}
    W = layer.weight().detach()
    for i in range(3):
        ref = torch.diag(layer.lambda_in[i]) @ layer.C[i] @ torch.diag(layer.lambda_out[i])
        torch.testing.assert_close(W[i], ref.detach(), atol=1e-14, rtol=0)


def test_householder_without_scales_is_reflected_c():
    """scales=False: W = P C Qᵀ with Λ fixed at 1 (buffers), no lambda parameters or prior groups."""
    gen = torch.Generator().manual_seed(2)
    layer = HouseholderLinear(3, 4, 5, K=1, scales=False, generator=gen, dtype=F64)
    names = {n for n, _ in layer.named_parameters()}
    assert names == {"C", "v_in", "v_out", "bias"}
    assert set(layer.param_groups()) == {"C", "v_in", "v_out", "bias"}
    assert sum(p[0].numel() for p in layer.parameters()) == 1 * (4 + 5) + 4 * 5 + 5
    W = layer.weight().detach()
    for i in range(3):
        u, w = layer.v_in[i].detach()[0], layer.v_out[i].detach()[0]
        P = torch.eye(4, dtype=F64) - 2 * torch.outer(u, u) / u.dot(u)
        Q = torch.eye(5, dtype=F64) - 2 * torch.outer(w, w) / w.dot(w)
        torch.testing.assert_close(W[i], P @ layer.C[i].detach() @ Q.T, atol=1e-12, rtol=0)
    assert torch.equal(layer.lambda_in, torch.ones(3, 4, dtype=F64))  # still in the state dict
    assert "lambda_in" in layer.state_dict()


def test_kronecker_without_scales_is_a_c_bt():
    """scales=False on the K-Linear layer: W = A C Bᵀ with unit-lower-triangular A, B built
    by hand, Λ fixed at 1, and no lambda parameters or prior groups."""
    gen = torch.Generator().manual_seed(3)
    layer = make_layer("kronecker", 2, 3, 4, dtype=F64, generator=gen, factor_std=0.5, scales=False)
    assert {n for n, _ in layer.named_parameters()} == {"C", "A", "B", "bias"}
    assert set(layer.param_groups()) == {"C", "A", "B", "bias"}
    W = layer.weight().detach()
    for i in range(2):
        A = torch.eye(3, dtype=F64) + torch.tril(layer.A[i].detach(), -1)
        B = torch.eye(4, dtype=F64) + torch.tril(layer.B[i].detach(), -1)
        torch.testing.assert_close(W[i], A @ layer.C[i].detach() @ B.T, atol=1e-12, rtol=0)


@pytest.mark.parametrize("K", [0, 1, 2, 4])
@pytest.mark.parametrize("bias", [True, False])
def test_householder_parameter_count(K, bias):
    l1, l2 = 7, 5
    layer = HouseholderLinear(3, l1, l2, K=K, bias=bias)
    expected = (K + 1) * (l1 + l2) + l1 * l2 + (l2 if bias else 0)
    stored = sum(p[0].numel() for p in layer.parameters())
    assert stored == expected
    assert free_parameters(layer) == expected


def test_kronecker_and_dense_parameter_counts():
    l1, l2 = 4, 3
    k = KroneckerLinear(2, l1, l2)
    free = l1 * l2 + l1 + l2 + l1 * (l1 - 1) // 2 + l2 * (l2 - 1) // 2 + l2
    assert free_parameters(k) == free
    groups = k.param_groups()
    assert groups["A"].shape == (2, l1 * (l1 - 1) // 2) and groups["B"].shape == (2, l2 * (l2 - 1) // 2)
    assert set(groups) == {"C", "A", "B", "lambda_in", "lambda_out", "bias"}
    d = DenseLinear(2, l1, l2)
    assert free_parameters(d) == l1 * l2 + l2
    assert set(d.param_groups()) == {"weight", "bias"}


def test_kronecker_matches_explicit_triangular_product():
    gen = torch.Generator().manual_seed(2)
    M, l1, l2 = 3, 4, 3
    layer = KroneckerLinear(M, l1, l2, generator=gen, dtype=F64)
    randomise_lambdas(layer, gen)
    with torch.no_grad():  # fill every entry, including the inert diagonal/upper ones
        layer.A.normal_(generator=gen)
        layer.B.normal_(generator=gen)
    W = layer.weight().detach()
    for i in range(M):
        A = torch.eye(l1, dtype=F64)
        B = torch.eye(l2, dtype=F64)
        for r in range(l1):
            for c in range(r):
                A[r, c] = layer.A[i, r, c]
        for r in range(l2):
            for c in range(r):
                B[r, c] = layer.B[i, r, c]
        ref = A @ torch.diag(layer.lambda_in[i]) @ layer.C[i] @ torch.diag(layer.lambda_out[i]) @ B.T
        torch.testing.assert_close(W[i], ref.detach(), atol=1e-12, rtol=1e-12)


def test_kronecker_inert_entries_get_no_gradient():
    layer = KroneckerLinear(2, 4, 3, generator=torch.Generator().manual_seed(0))
    # diagonal and upper entries start at 0 in every particle
    assert torch.all(torch.triu(layer.A) == 0) and torch.all(torch.triu(layer.B) == 0)
    (layer.weight().square().sum() + layer.log_prior(InvGammaPrior()).sum()).backward()
    assert torch.all(torch.triu(layer.A.grad) == 0) and torch.all(torch.triu(layer.B.grad) == 0)
    assert torch.any(torch.tril(layer.A.grad, -1) != 0) and torch.any(torch.tril(layer.B.grad, -1) != 0)


def _mc_vec_covariance(W: torch.Tensor) -> torch.Tensor:
    """Covariance of column-stacked vec(W) over the leading (sample) dim; mean is 0 by construction."""
    N = W.shape[0]
    vec = W.transpose(1, 2).reshape(N, -1)  # columns stacked
    return vec.T @ vec / N


@pytest.mark.parametrize("kind", ["householder", "kronecker"])
def test_mvg_covariance_is_kronecker(kind):
    """vec(W) ~ N(0, V ⊗ U) for C ~ N(0, I) with fixed structured factors (Lemma 1 / Prop. 3)."""
    gen = torch.Generator().manual_seed(3)
    N, l1, l2 = 200_000, 3, 2
    lam1 = 0.5 + torch.rand(l1, generator=gen, dtype=F64)
    lam2 = 0.5 + torch.rand(l2, generator=gen, dtype=F64)
    layer = make_layer(kind, N, l1, l2, dtype=F64, generator=gen, **({"K": 2} if kind == "householder" else {}))
    with torch.no_grad():
        layer.C.copy_(torch.randn(N, l1, l2, generator=gen, dtype=F64))  # C ~ N(0, I)
        layer.lambda_in.copy_(lam1.expand(N, l1))
        layer.lambda_out.copy_(lam2.expand(N, l2))
        if kind == "householder":
            v_in = torch.randn(2, l1, generator=gen, dtype=F64)
            v_out = torch.randn(2, l2, generator=gen, dtype=F64)
            layer.v_in.copy_(v_in.expand(N, 2, l1))
            layer.v_out.copy_(v_out.expand(N, 2, l2))
            left, right = explicit_product(v_in), explicit_product(v_out)  # P, Q
        else:
            a = torch.tril(torch.randn(l1, l1, generator=gen, dtype=F64), -1)
            b = torch.tril(torch.randn(l2, l2, generator=gen, dtype=F64), -1)
            layer.A.copy_(a.expand(N, l1, l1))
            layer.B.copy_(b.expand(N, l2, l2))
            left, right = a + torch.eye(l1, dtype=F64), b + torch.eye(l2, dtype=F64)  # A, B
        cov = _mc_vec_covariance(layer.weight())
    U = left @ torch.diag(lam1**2) @ left.T
    V = right @ torch.diag(lam2**2) @ right.T
    ref = torch.kron(V, U)  # column-stacking convention
    err = (cov - ref).abs().max() / ref.abs().max()
    assert err < 0.02, f"max abs error {err:.4f} relative to the largest entry"
    # and the covariance is not trivially diagonal (the structure is really there)
    assert (ref - torch.diag(torch.diag(ref))).abs().max() > 0.1 * ref.abs().max()


def _by_hand_log_prior(layer, prior) -> torch.Tensor:
    """The prior summed over the layer's groups, assembled from the raw parameters here."""
    M = layer.num_particles
    if isinstance(layer, DenseLinear):
        groups = [layer.W.reshape(M, -1)]
    elif isinstance(layer, HouseholderLinear):
        groups = [layer.C.reshape(M, -1), layer.lambda_in, layer.lambda_out]
        if layer.K > 0:
            groups += [layer.v_in.reshape(M, -1), layer.v_out.reshape(M, -1)]
    else:
        l1, l2 = layer.in_features, layer.out_features
        A = torch.stack([layer.A[:, r, c] for r in range(l1) for c in range(r)], dim=1)
        B = torch.stack([layer.B[:, r, c] for r in range(l2) for c in range(r)], dim=1)
        groups = [layer.C.reshape(M, -1), layer.lambda_in, layer.lambda_out, A, B]
    groups.append(layer.bias)
    total = torch.zeros(M, dtype=F64)
    for g in groups:
        n = g.shape[1]
        sq = g.detach().square().sum(1)
        if isinstance(prior, GaussianPrior):
            normal = torch.distributions.Normal(torch.tensor(0.0, dtype=F64),
                                                torch.tensor(math.sqrt(prior.variance), dtype=F64))
            total += normal.log_prob(g.detach()).sum(1)
        else:
            a, b = prior.a, prior.b
            total += (
                math.lgamma(a + n / 2) - math.lgamma(a) + a * math.log(b) - n / 2 * math.log(2 * math.pi)
                - (a + n / 2) * torch.log(b + sq / 2)
            )
    return total


@pytest.mark.parametrize("kind,kwargs", [("gaussian", {}), ("householder", {"K": 0}), ("householder", {"K": 2}),
                                         ("kronecker", {})])
@pytest.mark.parametrize("prior", [GaussianPrior(0.01), InvGammaPrior(1.0, 0.1)])
def test_log_prior_is_sum_over_groups(kind, kwargs, prior):
    gen = torch.Generator().manual_seed(4)
    layer = make_layer(kind, 3, 4, 3, dtype=F64, generator=gen, **kwargs)
    randomise_lambdas(layer, gen)
    got = layer.log_prior(prior)
    assert got.shape == (3,)
    torch.testing.assert_close(got.detach(), _by_hand_log_prior(layer, prior), rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("kind,kwargs", [("gaussian", {}), ("householder", {"K": 1}), ("householder", {"K": 0}),
                                         ("kronecker", {})])
@pytest.mark.parametrize("gain", [1.0, 0.01])
def test_init_scale_like_dense(kind, kwargs, gain):
    torch.manual_seed(5)
    l1, l2 = 50, 40
    layer = make_layer(kind, 32, l1, l2, gain=gain, **kwargs)
    W = layer.weight().detach()
    assert abs(W.std().item() / (gain / math.sqrt(l1)) - 1) < 0.03
    assert abs(W.mean().item()) < 0.03 * gain / math.sqrt(l1)
    assert torch.all(layer.bias == 0)


@pytest.mark.parametrize("kind", LAYERS.names())
def test_forward_gradient_dtype_and_generator(kind):
    for dtype in (torch.float32, torch.float64):
        layer = make_layer(kind, 3, 4, 2, dtype=dtype, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            layer.bias.normal_()
        x = torch.randn(3, 5, 4, dtype=dtype, requires_grad=True)
        y = layer(x)
        assert y.shape == (3, 5, 2) and y.dtype == dtype
        ref = torch.einsum("mbi,mio->mbo", x, layer.weight()) + layer.bias[:, None, :]
        torch.testing.assert_close(y, ref)
        y.square().sum().backward()
        for name, p in layer.named_parameters():
            p = torch.tril(p.grad, -1) if name in ("A", "B") else p.grad
            assert p is not None and torch.all(torch.isfinite(p)) and torch.any(p != 0), name
    # the same generator seed reproduces the layer; a different one does not
    a = make_layer(kind, 2, 3, 3, generator=torch.Generator().manual_seed(7))
    b = make_layer(kind, 2, 3, 3, generator=torch.Generator().manual_seed(7))
    c = make_layer(kind, 2, 3, 3, generator=torch.Generator().manual_seed(8))
    torch.testing.assert_close(a.weight(), b.weight())
    assert not torch.allclose(a.weight(), c.weight())
    # .to(dtype) carries everything over
    assert a.to(F64).weight().dtype == F64


def test_no_bias():
    layer = make_layer("householder", 2, 3, 4, bias=False)
    assert layer.bias is None and "bias" not in layer.param_groups()
    x = torch.randn(2, 5, 3)
    torch.testing.assert_close(layer(x), x @ layer.weight())


def test_make_layer_errors():
    assert isinstance(make_layer("householder", 2, 3, 4, K=2), HouseholderLinear)
    assert all(issubclass(c, StructuredLinear) for _, c in LAYERS.items())
    with pytest.raises(ValueError, match="gaussian, householder, kronecker"):
        make_layer("dropout", 2, 3, 4)
    with pytest.raises(ValueError, match="does not take \\['K'\\]; its options are \\[\\]"):
        make_layer("gaussian", 2, 3, 4, K=1)
    with pytest.raises(ValueError, match="K"):
        make_layer("kronecker", 2, 3, 4, K=1)
    with pytest.raises(ValueError):
        make_layer("householder", 2, 3, 4, K=-1)


def test_scales_centre_one_puts_the_gaussian_prior_on_lambda_at_one():
    """scales_centre=1: N(1, σ²) on every entry of Λ1, Λ2 (scipy's logpdf, by hand), the
    other groups scored as before; at the initial Λ = 1 the scales add only the normaliser."""
    from scipy.stats import norm

    gen = torch.Generator().manual_seed(5)
    layer = make_layer("householder", 3, 4, 2, dtype=F64, generator=gen, K=1, scales_centre=1.0)
    randomise_lambdas(layer, gen)
    var = 0.01
    got = layer.log_prior(GaussianPrior(var)).detach()
    expected = []
    for i in range(3):
        total = 0.0
        for name in ("C", "v_in", "v_out", "bias"):
            x = getattr(layer, name)[i].detach().flatten().numpy()
            total += norm.logpdf(x, 0.0, math.sqrt(var)).sum()
        for name in ("lambda_in", "lambda_out"):
            x = getattr(layer, name)[i].detach().numpy()
            total += norm.logpdf(x, 1.0, math.sqrt(var)).sum()
        expected.append(total)
    torch.testing.assert_close(got, torch.tensor(expected, dtype=F64), rtol=1e-12, atol=1e-9)
    # the gradient of log p on Λ points to 1: (1 − Λ) / σ²
    layer.zero_grad()
    layer.log_prior(GaussianPrior(var)).sum().backward()
    torch.testing.assert_close(layer.lambda_in.grad, (1.0 - layer.lambda_in.detach()) / var)
