"""Short, readable names for config settings and metric keys, wherever a person reads them:
figure legends and axes (:mod:`steinrl.run.plotting`), ``steinrl compare``'s ``params`` column
and the settings a run prints at its start.

A setting is shown as ``key=value`` with the key's section dropped where no other key in view
has the same name (``update.kernel`` -> ``kernel``, while ``update.lr`` and ``critic.lr`` keep
theirs), and a part with parameters as its name and the parameters that differ from its own
defaults (``{'name': 'imq', 'bandwidth': 'svpg', 'beta': -0.3}`` -> ``imq(β=-0.3)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from steinrl.run.config import Config

__all__ = ["short_value", "short_keys", "settings_label", "metric_label", "changed_settings", "settings_lines",
           "SYMBOLS"]

#: Parameters shown by their symbol in the papers' notation.
SYMBOLS = {"beta": "β", "temperature": "α"}

def metric_label(key: str) -> str:
    """``key`` in words, as a job declares it (``metric_labels``; the first job that names it), or
    ``key`` itself where none does. The run stack names no metric itself."""
    from steinrl.run.algos import JOBS

    return next((job.metric_labels[key] for _, job in JOBS.items() if key in job.metric_labels), key)


def _part_defaults(name: Any) -> dict[str, Any]:
    """The declared parameter defaults of the registered kernel or repulsion controller ``name``
    (a kernel's with its space's; ``{}`` for another name)."""
    from steinrl.core.kernels import FUNCTION_SPACE_OPTIONS, KERNELS, SPACE
    from steinrl.core.repulsion import REPULSIONS

    if isinstance(name, str) and name in KERNELS.names():
        return {o.name: o.default for o in (*KERNELS.get(name).options, SPACE, *FUNCTION_SPACE_OPTIONS)}
    if isinstance(name, str) and name in REPULSIONS.names():
        return {o.name: o.default for o in REPULSIONS.get(name).options}
    return {}


def short_value(value: Any) -> str:
    """A config value in short form: a part with parameters ``name(p=v, ...)`` (only those off its
    defaults; parameters by :data:`SYMBOLS`), floats ``%g``, booleans lower case, lists without spaces."""
    if isinstance(value, Mapping) and "name" in value:
        defaults = _part_defaults(value["name"])
        missing = object()
        params = [f"{SYMBOLS.get(k, k)}={short_value(v)}" for k, v in value.items()
                  if k != "name" and defaults.get(k, missing) != v]
        return f"{value['name']}({', '.join(params)})" if params else str(value["name"])
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}={short_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(short_value(v) for v in value) + "]"
    return str(value)


def short_keys(keys: Iterable[str], known: Iterable[str] = ()) -> dict[str, str]:
    """Each dotted key of ``keys`` -> its shown name: without its section where no other key of
    ``keys`` or ``known`` (e.g. every key of the configs in view) has the same last part."""
    keys = list(keys)
    names: dict[str, set[str]] = {}
    for key in {*keys, *known}:
        names.setdefault(key.rsplit(".", 1)[-1], set()).add(key)
    shown = {}
    for key in keys:
        last = key.rsplit(".", 1)[-1]
        shown[key] = SYMBOLS.get(last, last) if len(names[last]) == 1 else key
    return shown


def settings_label(values: Mapping[str, Any], known: Iterable[str] = ()) -> str:
    """``key=value ...`` in short form (:func:`short_keys`, :func:`short_value`), in the given order."""
    shown = short_keys(values, known)
    return " ".join(f"{shown[k]}={short_value(v)}" for k, v in values.items())


def changed_settings(cfg: Config, base: Config, skip: Iterable[str] = ("run",)) -> dict[str, Any]:
    """The keys of config ``cfg`` whose values differ from ``base``'s (dotted, in ``cfg``'s order;
    the keys and sections of ``skip`` left out)."""
    skip = set(skip)
    ours, theirs = cfg.to_dict(), base.to_dict()
    changed: dict[str, Any] = {}
    for key, value in ours.items():
        if key in skip:
            continue
        if isinstance(value, dict):  # a section (a mapping option, a kernel, is one of its values)
            their_section = theirs[key] if isinstance(theirs.get(key), dict) else {}
            changed.update({f"{key}.{k}": v for k, v in value.items() if f"{key}.{k}" not in skip
                            and (k not in their_section or their_section[k] != v)})
        elif key not in theirs or theirs[key] != value:
            changed[key] = value
    return changed


def settings_lines(cfg: Config, skip: Iterable[str] = ("run",), width: int = 120) -> list[str]:
    """What a run prints at its start: the settings in effect that differ from those of ``steinrl
    train --algo <algo> --env <env>`` (the declared defaults and the task's ``configs/<env>.yaml``),
    in short form (the kernel and its parameters, ``kernel=imq(β=-0.3)``), wrapped at ``width``."""
    import textwrap

    from steinrl.run.config import load_config

    changed = changed_settings(cfg, load_config(cfg.algo, cfg.env), skip)
    known = [f"{s}.{k}" for s, section in cfg.to_dict().items() if isinstance(section, dict) for k in section]
    what = settings_label(changed, known) if changed else "none"
    head = f"settings beyond the defaults of {cfg.algo} on {cfg.env}: "
    return textwrap.wrap(head + what, width=width, subsequent_indent="  ", break_on_hyphens=False)
