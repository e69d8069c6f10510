"""Variational Bayesian baselines over the same layer shapes as steinrl.core: BBB, BADAM, Kronecker flow, RDP."""
