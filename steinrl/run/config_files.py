"""The run config's files: YAML read strictly, ``--set`` values, and where the shipped configs lie.

A config file is UTF-8 YAML holding one mapping, without duplicate keys; anything else is one
:class:`~steinrl.errors.ConfigError` line naming the file. The shipped per-task files and
presets lie in ``configs/``, installed as the package data ``steinrl.configs``
(:data:`CONFIG_DIR`). Resolving what they say is :mod:`steinrl.run.config`'s.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any

import yaml

from steinrl.errors import ConfigError

__all__ = ["CONFIG_DIR", "load_yaml", "parse_set", "read_user_text", "env_config_path", "presets"]

#: The repository's configs/ folder, installed as the package data ``steinrl.configs``.
CONFIG_DIR = Path(str(importlib.resources.files("steinrl.configs")))


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that rejects duplicate keys."""


def _no_duplicates(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _no_duplicates)


def read_user_text(path: Path, what: str) -> str:
    """A user's text file as UTF-8; unreadable or not text: one ConfigError line naming ``what`` and ``path``."""
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping (UTF-8, no duplicate keys); any problem raises a one-line :class:`ConfigError`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    text = read_user_text(path, "config file")
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except (yaml.YAMLError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        msg = " ".join(str(exc).split())[:300]
        raise ConfigError(f"cannot parse {path}: {type(exc).__name__}: {msg}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config keys, got a {type(data).__name__}")
    return data


def parse_set(items: list[str]) -> dict[str, Any]:
    """``--set key=value`` items; values are read as YAML scalars or lists (``[25, 10]``, ``null``, ``true``)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(raw)
        except (yaml.YAMLError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            raise ConfigError(f"--set {key.strip()!r}: cannot parse value {raw!r}") from None
    return out


def env_config_path(env: str) -> Path:
    """The per-task YAML file for ``env`` (``configs/<env>.yaml``; '/' in ids becomes '_').
    A steinrl task's registered id takes its short name's file (``steinrl/CartpoleSwingUp-v0``
    -> ``CartpoleSwingUp.yaml``), so both names of a task get the same defaults."""
    from steinrl.envs import short_name

    return CONFIG_DIR / f"{short_name(env).replace('/', '_')}.yaml"


def presets() -> list[str]:
    """Names of the shipped presets (``configs/presets/*.yaml``)."""
    return sorted(p.stem for p in (CONFIG_DIR / "presets").glob("*.yaml"))
