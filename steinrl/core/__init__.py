"""The particle core: structured layers, the batched ensemble MLP, priors, Stein kernels, the
couplings and the particle optimizer, and the registered particle methods. Knows nothing
about RL or bandits."""

from steinrl.core.couplings import COUPLINGS, IndependentCoupling, SteinCoupling, make_coupling
from steinrl.core.ensemble import EnsembleMLP, mlp_forward
from steinrl.core.kernels import KERNELS, IMQKernel, Kernel, RBFKernel, make_kernel
from steinrl.core.layers import LAYERS, DenseLinear, HouseholderLinear, KroneckerLinear, StructuredLinear, make_layer
from steinrl.core.methods import METHODS, Method
from steinrl.core.particle_optimizer import ParticleOptimizer
from steinrl.core.priors import PRIORS, GaussianPrior, InvGammaPrior, JointGammaPrior, Prior, make_prior
from steinrl.core.stein import svgd_direction

__all__ = ["EnsembleMLP", "mlp_forward", "KERNELS", "Kernel", "RBFKernel", "IMQKernel", "make_kernel", "LAYERS",
           "DenseLinear", "HouseholderLinear", "KroneckerLinear", "StructuredLinear", "make_layer", "METHODS", "Method",
           "ParticleOptimizer", "PRIORS", "GaussianPrior", "InvGammaPrior", "JointGammaPrior", "Prior", "make_prior",
           "COUPLINGS", "SteinCoupling", "IndependentCoupling", "make_coupling", "svgd_direction"]
