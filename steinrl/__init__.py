"""steinrl: ensembles of policy particles trained by Stein variational policy gradient."""

__version__ = "0.2.0"
