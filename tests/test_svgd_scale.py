"""SVGD at scale: the optional attractive norm, bf16 kernel products with full-precision distances.

References are float64 numpy computations of the SVGD maths (never the code's own output); the
bf16 error bound is the standard rounding analysis (unit roundoff u = 2⁻⁸ for bfloat16).
"""

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import steinrl.core.stein as svgd_mod
from steinrl.core.couplings import SteinCoupling, make_coupling
from steinrl.core.kernels import bandwidth, make_kernel, sq_dists_from_gram
from steinrl.core.particle_optimizer import ParticleOptimizer, make_particle_optimizer
from steinrl.core.stein import svgd_direction
from steinrl.errors import ConfigError
from steinrl.run.config import load_config

#: float tolerances: .ci/run reruns this module under the forced CPU kernel sets
pytestmark = pytest.mark.numerics

U_BF16 = 2.0 ** -8  # bfloat16 unit roundoff (8-bit significand)


def clustered(M=16, D=200, seed=0):
    """Particles in two tight clusters (12 and 4) far from the origin: within-cluster squared
    distances are ~30x smaller than ‖c_i‖², so the Gram formula of the distances cancels, and the
    svpg median falls among them. Returns float64 ``(theta, grad)``, each ``(M, D)``."""
    gen = np.random.default_rng(seed)
    side = np.where(np.arange(M)[:, None] < 12, 1.0, -1.0)
    theta = 5.0 + side * gen.standard_normal(D) / np.sqrt(D) + 0.1 * gen.standard_normal((M, D)) / np.sqrt(D)
    return theta, gen.standard_normal((M, D))


def svpg_h(theta):
    d = ((theta[:, None] - theta[None]) ** 2).sum(-1)
    return np.median(d) / (2 * np.log(len(theta) + 1))


def tf32_round(x):
    """x with its float32 significand rounded to TF32's 11 bits (round to nearest, ties away)."""
    bits = x.view(torch.int32)
    return ((bits + (1 << 12)) & ~((1 << 13) - 1)).view(torch.float32)


# ----------------------------------------------------------------------------- distances stay FP32
def test_bf16_products_keep_the_fp32_bandwidth():
    theta, grad = clustered()
    h_ref = svpg_h(theta)
    t, g = torch.tensor(theta, dtype=torch.float32), torch.tensor(grad, dtype=torch.float32)
    full = svgd_direction(t, g)[1]
    reduced = svgd_direction(t, g, precision="bf16")[1]
    assert full["bandwidth"].item() == pytest.approx(h_ref, rel=1e-5)
    assert reduced["bandwidth"].item() == pytest.approx(full["bandwidth"].item(), rel=1e-5)
    assert reduced["bandwidth"].item() == pytest.approx(h_ref, rel=1e-5)
    d = np.sqrt(((theta[:, None] - theta[None]) ** 2).sum(-1))
    off = ~np.eye(16, dtype=bool)
    assert reduced["mean_pairwise_distance"].item() == pytest.approx(d[off].mean(), rel=1e-5)
    # exp(−d²/h) turns a relative error e of d² into r·e (r = d²/h reaches ~40 across the clusters)
    assert reduced["kernel_mean"].item() == pytest.approx(np.exp(-d[off] ** 2 / h_ref).mean(), rel=1e-4)
    for key in ("bandwidth", "mean_pairwise_distance", "kernel_mean", "repulsive_norm"):
        assert reduced[key].item() == full[key].item()  # the same float32 computation
    # the control: the same Gram from bf16 or TF32 operands moves the bandwidth well beyond 1e-5
    # (by 1.1e-3 and 1.1e-4 here; the float32 Gram by 3.5e-6)
    c = t - t.mean(0)
    for rounded, at_least in ((c.to(torch.bfloat16), 3e-4), (tf32_round(c), 3e-5)):
        h = bandwidth(sq_dists_from_gram((rounded @ rounded.T).float())).item()
        assert abs(h / h_ref - 1) > at_least


class RecordProducts(TorchDispatchMode):
    """Records (dtype of the operands, inner size) of every matrix product."""

    def __init__(self):
        super().__init__()
        self.products = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in ("mm", "bmm", "addmm", "baddbmm"):
            a, b = args[-2], args[-1]
            self.products.append((a.dtype, b.dtype, a.shape[-1]))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("kernel", ["rbf", "imq"])
@pytest.mark.parametrize("grouped", [False, True])
def test_which_products_run_in_bf16(kernel, grouped):
    """Over D: the particle Gram in float32; the kernel product(s) and the gradients' Gram in bf16."""
    theta, grad = (torch.tensor(a, dtype=torch.float32) for a in clustered(D=40))
    if grouped:
        theta, grad = theta.view(2, 8, 40), grad.view(2, 8, 40)
    with RecordProducts() as rec:
        svgd_direction(theta, grad, kernel=make_kernel(kernel), precision="bf16", attractive_norm=True)
    over_d = [(a, b) for a, b, k in rec.products if k == 40]  # the (M, D) x (D, M) Grams
    over_m = [(a, b) for a, b, k in rec.products if k != 40 and (a, b) != (torch.float32,) * 2]
    f32, bf16 = (torch.float32,) * 2, (torch.bfloat16,) * 2
    assert over_d == [f32, bf16]  # particle Gram, then the gradients' Gram
    assert over_m == [bf16] * (1 if kernel == "rbf" else 2)  # the kernel product(s) with (M, D)


# ----------------------------------------------------------------------------- bf16 direction error
def reference(theta, grad, h, kernel):
    """float64 φ = (1/M)[K G − (2/h) R Θ + (2/h) rowsum(R) Θ] and the bound's scale B ≥ 0 ``(M, D)``:
    Σ_j over the products' |terms| (what bf16 operand and result rounding scale with)."""
    M = len(theta)
    d = ((theta[:, None] - theta[None]) ** 2).sum(-1)
    r = d / h
    K, R = (np.exp(-r), np.exp(-r)) if kernel == "rbf" else ((1 + r) ** -0.5, 0.5 * (1 + r) ** -1.5)
    c = theta - theta.mean(0)
    phi = (K @ grad - (2 / h) * R @ c + (2 / h) * R.sum(1, keepdims=True) * c) / M
    if kernel == "rbf":  # one product: K (G − (2/h) Θ)
        scale = np.abs(K) @ np.abs(grad - (2 / h) * c) / M
    else:
        scale = (np.abs(K) @ np.abs(grad) + (2 / h) * np.abs(R) @ np.abs(c)) / M
    return phi, scale


@pytest.mark.parametrize("kernel", ["rbf", "imq"])
def test_bf16_direction_is_within_its_rounding_bound(kernel):
    gen = np.random.default_rng(1)
    theta, grad = 0.3 * gen.standard_normal((16, 300)), gen.standard_normal((16, 300))
    h = 0.5 * svpg_h(theta)  # fixed, so the reference needs no median
    phi_ref, scale = reference(theta, grad, h, kernel)
    t, g = torch.tensor(theta, dtype=torch.float32), torch.tensor(grad, dtype=torch.float32)
    k = make_kernel({"name": kernel, "bandwidth": h})
    full = svgd_direction(t, g, kernel=k)[0].double().numpy()
    bf16 = svgd_direction(t, g, kernel=k, precision="bf16")[0].double().numpy()
    slack = 1e-5 * (scale + np.abs(phi_ref))  # float32 rounding of the rest
    assert np.all(np.abs(full - phi_ref) <= slack)
    err = np.abs(bf16 - phi_ref)
    assert np.all(err <= 3 * U_BF16 * scale + slack)  # operand rounding of both factors + the result's
    assert err.max() > 0.05 * U_BF16 * scale.max()  # and bf16 really ran (float32 is 1000x closer)


def test_bf16_groups_match_each_group_alone():
    theta, grad = (torch.tensor(a, dtype=torch.float32) for a in clustered(M=12, D=30, seed=3))
    phi, info = svgd_direction(theta.view(3, 4, 30), grad.view(3, 4, 30), precision="bf16")
    for i in range(3):
        alone, alone_info = svgd_direction(theta[4 * i:4 * i + 4], grad[4 * i:4 * i + 4], precision="bf16")
        torch.testing.assert_close(phi[i], alone, rtol=1e-6, atol=1e-6)
        assert info["bandwidth"][i].item() == pytest.approx(alone_info["bandwidth"].item(), rel=1e-6)


# ----------------------------------------------------------------------------- optional attractive norm
def test_attractive_norm_is_optional_and_off_by_default_at_large_d(monkeypatch):
    gen = np.random.default_rng(2)
    theta, grad = 0.3 * gen.standard_normal((8, 20)), gen.standard_normal((8, 20))
    t, g = torch.tensor(theta), torch.tensor(grad)
    phi, info = svgd_direction(t, g, kernel=make_kernel({"name": "rbf", "bandwidth": 0.4}))
    phi_ref, _ = reference(theta, grad, 0.4, "rbf")
    K = np.exp(-((theta[:, None] - theta[None]) ** 2).sum(-1) / 0.4)
    assert info["attractive_norm"].item() == pytest.approx(np.linalg.norm(K @ grad / 8), rel=1e-9)
    off_phi, off = svgd_direction(t, g, kernel=make_kernel({"name": "rbf", "bandwidth": 0.4}), attractive_norm=False)
    assert "attractive_norm" not in off and set(off) == set(info) - {"attractive_norm"}
    torch.testing.assert_close(off_phi, phi, rtol=0, atol=0)  # φ itself does not change
    np.testing.assert_allclose(off_phi.numpy(), phi_ref, rtol=1e-9, atol=1e-12)
    monkeypatch.setattr(svgd_mod, "ATTRACTIVE_NORM_MAX_DIM", 19)  # D = 20 is now "large"
    assert "attractive_norm" not in svgd_direction(t, g)[1]
    assert "attractive_norm" in svgd_direction(t, g, attractive_norm=True)[1]
    with RecordProducts() as rec:
        svgd_direction(t, g)
    assert [k for *_, k in rec.products].count(20) == 1  # the particle Gram alone (+ the product over M)
    monkeypatch.setattr(svgd_mod, "ATTRACTIVE_NORM_MAX_DIM", 20)
    assert "attractive_norm" in svgd_direction(t, g)[1]


# ----------------------------------------------------------------------------- config and the particle optimizer
def test_scale_options_reach_the_update_from_the_config():
    cfg = load_config("svgd-a2c", "CartpoleSwingUp", {"update.attractive_norm": "off",
                                                      "update.kernel_precision": "bf16"})
    p = torch.nn.Parameter(torch.randn(3, 4))
    update = make_particle_optimizer("stein", [p], cfg.update).coupling
    assert (update.attractive_norm, update.precision) == (False, "bf16")
    assert (make_coupling("stein").attractive_norm, make_coupling("stein").precision) == (None, "full")
    with pytest.raises(ValueError, match="does not take"):
        make_coupling("independent", kernel_precision="bf16")
    for key, value in (("update.attractive_norm", "sometimes"), ("update.kernel_precision", "fp8")):
        with pytest.raises(ConfigError, match=key.split(".")[1]):
            load_config("svgd-a2c", "CartpoleSwingUp", {key: value})
    with pytest.raises(ConfigError, match="kernel_precision"):  # no kernel, no kernel product
        load_config("independent-a2c", "CartpoleSwingUp", {"update.kernel_precision": "bf16"})
    with pytest.raises(ValueError, match="precision"):
        SteinCoupling(kernel_precision="tf32")
    with pytest.raises(ValueError, match="attractive_norm"):
        make_coupling("stein", attractive_norm="yes")


def test_svgd_step_in_bf16_moves_particles_like_full_precision():
    torch.manual_seed(0)
    start = torch.randn(8, 50)
    target = torch.randn(8, 50)
    moved = []
    for precision in ("full", "bf16"):
        p = torch.nn.Parameter(start.clone())
        opt = ParticleOptimizer([p], SteinCoupling(attractive_norm="off", kernel_precision=precision), lr=0.05,
                                optimizer="sgd")
        info = opt.step(-0.5 * (p - target).square().sum(1)).coupling_stats
        assert "attractive_norm" not in info and "repulsive_norm" in info
        moved.append(p.detach() - start)
    assert (moved[1] - moved[0]).norm() <= 4 * U_BF16 * moved[0].norm()
