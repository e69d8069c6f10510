"""Exceptions meant for the user: the CLI prints their message on one line and exits 2."""


class ConfigError(ValueError):
    """A bad configuration value, key or file. The message is meant for the user."""


class NonFiniteError(RuntimeError):
    """A value became NaN/inf; the message names the iteration, the particle(s) and the quantity."""
