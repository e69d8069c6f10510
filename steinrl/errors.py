"""Exceptions meant for the user: the CLI prints their message on one line and exits 2."""


class ConfigError(ValueError):
    """A bad configuration value, key or file. The message is meant for the user."""
