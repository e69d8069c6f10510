"""The particle core: structured layers, the batched ensemble MLP, priors, the SVGD
optimizer and the registered particle methods. Knows nothing about RL or bandits."""

from steinrl.core.ensemble import EnsembleMLP, mlp_forward
from steinrl.core.layers import LAYERS, DenseLinear, HouseholderLinear, KroneckerLinear, StructuredLinear, make_layer
from steinrl.core.methods import METHODS, Method
from steinrl.core.priors import PRIORS, GaussianPrior, InvGammaPrior, JointGammaPrior, Prior, make_prior
from steinrl.core.svgd import SVGD, svgd_direction
from steinrl.core.updates import UPDATES, make_update

__all__ = ["EnsembleMLP", "mlp_forward", "LAYERS", "DenseLinear", "HouseholderLinear", "KroneckerLinear",
           "StructuredLinear", "make_layer", "METHODS", "Method", "PRIORS", "GaussianPrior", "InvGammaPrior",
           "JointGammaPrior", "Prior", "make_prior", "SVGD", "UPDATES", "make_update", "svgd_direction"]
