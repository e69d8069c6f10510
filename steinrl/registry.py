"""Registries of named parts, and the settings each part declares.

Every composable part of steinrl (a layer family, a prior, a coupling, an
estimator, a policy head, a critic, a bandit task, ...) is registered by name in a
:class:`Registry` and declares its own configuration as ``Settings``: a frozen dataclass
whose fields are :func:`setting` s (default, one-line doc, type, range check, choices). Its
:class:`Option` s, which the config checks values against, are derived from it
(:func:`settings_options`); a config section several parts share is one class composed of
theirs (:func:`compose`). The run config (:mod:`steinrl.run.config`) is built from these
declarations, so the CLI's choices, its error messages and ``docs/config.md`` always list
exactly what is registered.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from steinrl.errors import ConfigError

__all__ = ["Option", "Registry", "options_of", "coerce", "check_yaml_colons", "setting", "settings_options",
           "settings_values", "compose", "SettingsObject"]

T = TypeVar("T")


@dataclass(frozen=True)
class Option:
    """One configuration option of a part.

    :param name: key inside the part's config section (``lr``, ``hidden``, ...).
    :param type: ``bool``, ``int``, ``float``, ``str``, ``list[int]``, or a tuple of
        these for a union (e.g. ``(str, float)``; ``None`` in the tuple allows null).
    :param default: the default value (must fit ``type``).
    :param doc: one line saying what the value does.
    :param choices: the allowed strings, or a zero-argument callable returning them
        (e.g. a registry's ``names``), so lists are never copied by hand.
    :param check: ``value -> error text or None`` for range checks (``"must be > 0"``; not called on null).
    :param normalize: ``(value, current) -> value`` after the type check, for structured values
        (a mapping option: a kernel and its parameters); ``current`` is the value set so far.
        Raises :class:`~steinrl.errors.ConfigError` (or ``ValueError``) naming what is valid.
    """

    name: str
    type: Any
    default: Any
    doc: str
    choices: tuple[str, ...] | Callable[[], list[str]] | None = None
    check: Callable[[Any], str | None] | None = None
    normalize: Callable[[Any, Any], Any] | None = None

    def allowed_choices(self) -> list[str] | None:
        if self.choices is None:
            return None
        return list(self.choices() if callable(self.choices) else self.choices)


def positive(value: Any) -> str | None:
    """Check: a number > 0."""
    return None if value > 0 else "must be > 0"


def step_size(value: Any) -> str | None:
    """Check: a learning rate in (0, 1e6] (larger values overflow float32 updates)."""
    return None if 0 < value <= 1e6 else "must be in (0, 1e6]"


def non_negative(value: Any) -> str | None:
    """Check: a number >= 0."""
    return None if value >= 0 else "must be >= 0"


def at_least_one(value: Any) -> str | None:
    """Check: a size in [1, 10**9], or a list of such sizes (larger ones cannot be allocated)."""
    values = value if isinstance(value, list) else [value]
    return None if all(1 <= v <= 10**9 for v in values) else "must be in [1, 10**9]"


def seed_range(value: Any) -> str | None:
    """Check: a seed in [0, 2**32)."""
    return None if 0 <= value < 2**32 else "must be in [0, 2**32)"


def unit_interval(value: Any) -> str | None:
    """Check: a number in [0, 1]."""
    return None if 0.0 <= value <= 1.0 else "must be in [0, 1]"


def open_unit_interval(value: Any) -> str | None:
    """Check: a number in (0, 1) (a mixture weight, an EWMA decay)."""
    return None if 0.0 < value < 1.0 else "must be in (0, 1)"


class Registry(Generic[T]):
    """Name -> part. ``get`` of an unknown name raises :class:`ConfigError` listing the names.

    :param kind: what the parts are, for messages (``"estimator"``, ``"layer"``, ...).
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._parts: dict[str, T] = {}

    def register(self, name: str, part: T | None = None) -> Any:
        """Register ``part`` under ``name``; without ``part``, a class/function decorator."""
        if part is None:
            def decorator(obj: T) -> T:
                self.register(name, obj)
                return obj

            return decorator
        if name in self._parts and self._parts[name] is not part:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._parts[name] = part
        return part

    def get(self, name: str) -> T:
        try:
            return self._parts[name]
        except (KeyError, TypeError):
            close = difflib.get_close_matches(str(name), list(self._parts), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown {self.kind} {name!r}{hint}; registered: {', '.join(self.names())}") from None

    def names(self) -> list[str]:
        return list(self._parts)

    def __contains__(self, name: object) -> bool:
        return name in self._parts

    def __iter__(self) -> Iterator[str]:
        return iter(self._parts)

    def items(self) -> list[tuple[str, T]]:
        return list(self._parts.items())


def options_of(part: Any) -> tuple[Option, ...]:
    """The options a registered part declares (its ``options`` class attribute, derived from its ``Settings``)."""
    return tuple(part.options)


def _type_name(t: Any) -> str:
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string", None: "null",
            list[int]: "a list of integers", list[float]: "a list of numbers", dict: "a mapping"}.get(t, str(t))


def _convert(t: Any, value: Any) -> tuple[bool, Any]:
    """Try to read ``value`` as type ``t``: ``(ok, converted)``."""
    if t is None:
        return value is None, None
    if t is bool:
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return True, value.lower() == "true"
        return isinstance(value, bool), value
    if isinstance(value, bool) or value is None:
        return False, value
    if t in (int, float) and isinstance(value, str):
        try:
            value = float(value) if t is float or not value.strip().lstrip("+-").isdigit() else int(value)
        except ValueError:
            return False, value
    if t is int:
        if isinstance(value, float) and math.isfinite(value) and value == int(value):
            value = int(value)
        return isinstance(value, int), value
    if t is float:
        return isinstance(value, (int, float)), float(value) if isinstance(value, (int, float)) else value
    if t is str:
        return isinstance(value, str), value
    if t is dict:
        return isinstance(value, Mapping), dict(value) if isinstance(value, Mapping) else value
    if t in (list[int], list[float]):
        if not isinstance(value, list):
            return False, value
        items = [_convert(t.__args__[0], v) for v in value]
        return all(ok for ok, _ in items), [v for _, v in items]
    raise TypeError(f"unsupported option type {t!r}")


def coerce(option: Option, value: Any, key: str, where: str, current: Any = None) -> Any:
    """``value`` checked against ``option`` (type, finiteness, choices, range) and normalised
    (``option.normalize``, over ``current``, the value set so far). ``where`` names the
    source in messages (``""``: the key alone)."""
    name = f"config key {key!r}" + (f" in {where}" if where else "")
    types = option.type if isinstance(option.type, tuple) else (option.type,)
    # numbers before strings, so "1e-3" is a number where one is allowed
    order = sorted(types, key=lambda t: t is str)
    for t in order:
        ok, converted = _convert(t, value)
        if ok:
            break
    else:
        names = " or ".join(_type_name(t) for t in types)
        raise ConfigError(f"{name} must be {names}, got {value!r}")
    if isinstance(converted, float) and not math.isfinite(converted):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    choices = option.allowed_choices()
    if isinstance(converted, str) and choices is not None and converted not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {converted!r}")
    if option.check is not None and converted is not None and not (isinstance(converted, str) and choices):
        problem = option.check(converted)
        if problem:
            raise ConfigError(f"{name} {problem}, got {value!r}")
    if option.normalize is not None:
        try:
            converted = option.normalize(converted, current)
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None
    return converted


def named_spec(value: Any, current: Mapping[str, Any] | None, registry: Registry[Any], what: str,
               extra: tuple[Option, ...] = (), keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """A registered part named in a config, ``{name, every parameter}``, checked (a kernel, a
    repulsion controller): ``value`` is its name, or a mapping of ``name`` and parameters; a
    mapping without ``name`` sets parameters of ``current`` (the part configured so far; default
    the registry's first). ``extra``: parameters every part takes besides its own ``options``;
    ``keep``: those that stay when the name changes.

    :raises ConfigError: naming the registered parts, or the parameters a part takes and what
        values they take.
    """
    first = registry.names()[0]
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, Mapping):
        raise ConfigError(f"a {what} is a name ({', '.join(registry.names())}) or a mapping {{name: ..., "
                          f"<parameter>: ...}}, got {value!r}")
    base = dict(current) if current is not None and "name" not in value else {"name": first}
    name = value.get("name", base["name"])
    cls = registry.get(name)
    if name != base["name"]:
        base = {k: v for k, v in base.items() if k in keep}
        base["name"] = name
    declared = {o.name: o for o in (*options_of(cls), *extra)}
    unknown = sorted(set(value) - set(declared) - {"name"})
    if unknown:
        raise ConfigError(f"{what} {name!r} has no parameter {', '.join(map(repr, unknown))}; its parameters: "
                          f"{', '.join(declared) or 'none'}")
    spec = {"name": name}
    for key, option in declared.items():
        raw = value.get(key, base.get(key, option.default))
        try:
            spec[key] = coerce(option, raw, key, "")
        except ConfigError as exc:
            raise ConfigError(f"{what} {name!r}: {str(exc).replace('config key', 'parameter', 1)}") from None
    return spec


def setting(default: Any = dataclasses.MISSING, doc: str = "", *, kind: Any = None,
            check: Callable[[Any], str | None] | None = None,
            choices: tuple[str, ...] | Callable[[], list[str]] | None = None,
            normalize: Callable[[Any, Any], Any] | None = None) -> Any:
    """A field of a settings dataclass that is also a config option (:func:`settings_options`):
    its default, one-line doc, type (``kind``; default: the default's type; a list or mapping
    default needs one, e.g. ``list[int]``, ``(str, dict)``), range check, choices and ``normalize``
    (see :class:`Option`). A list or mapping default is copied for every instance; no default
    (``MISSING``): the config supplies it (defaults computed per algorithm, e.g. SB3's)."""
    metadata = {"doc": doc, "kind": kind, "check": check, "choices": choices, "normalize": normalize}
    if isinstance(default, (list, dict)):
        if kind is None:
            raise TypeError(f"a setting with a {type(default).__name__} default needs its kind (e.g. list[int])")
        return dataclasses.field(default_factory=functools.partial(copy.deepcopy, default), metadata=metadata)
    if default is dataclasses.MISSING and kind is None:
        raise TypeError("a setting without a default needs its kind")
    return dataclasses.field(default=default, metadata=metadata)


def _default(f: dataclasses.Field) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None if f.default is dataclasses.MISSING else f.default


def settings_options(cls: type, defaults: Mapping[str, Any] | None = None) -> tuple[Option, ...]:
    """The :class:`Option` s of a settings dataclass whose fields are :func:`setting` s, in order;
    ``defaults`` replace declared defaults (the defaults of a task, of a method)."""
    defaults = defaults or {}
    options = []
    for f in dataclasses.fields(cls):
        meta = f.metadata
        default = defaults[f.name] if f.name in defaults else _default(f)
        kind = meta["kind"] if meta.get("kind") is not None else type(default)
        options.append(Option(f.name, kind, default, meta["doc"], choices=meta.get("choices"),
                              check=meta.get("check"), normalize=meta.get("normalize")))
    return tuple(options)


class SettingsObject(Protocol):
    """A settings dataclass instance (a config section, a part's settings)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


def settings_values(settings: SettingsObject, of: type | None = None) -> dict[str, Any]:
    """The values of a settings dataclass by field name (lists and mappings copied): all of them,
    or those of the part ``of`` (a settings class ``settings`` is composed of, :func:`compose`),
    e.g. a head's own options in the ``policy`` section, as keyword arguments of the part."""
    names = [f.name for f in dataclasses.fields(of if of is not None else settings)]
    return {name: copy.deepcopy(getattr(settings, name)) for name in names}


_COMPOSED: dict[tuple[Any, ...], type] = {}


def compose(name: str, *parts: type, defaults: Mapping[str, Any] | None = None) -> type:
    """A frozen settings dataclass made of the parts' settings classes: its fields are theirs, in
    order (the first part's first), and it is a subclass of each, so a part reads its own fields
    from it (a config section several parts declare: the ``update`` section is the particle
    optimizer's settings and the coupling's). A part given twice, or one another part derives
    from, counts once. ``defaults`` replace fields' defaults (a method's layer defaults). The same
    arguments give the same class (configs compare equal), and its instances pickle by their parts.

    :raises TypeError: two parts declare one field.
    """
    if any(hasattr(p, "_composed_from") for p in parts):  # its instances could not pickle by their parts
        raise TypeError(f"{name}: compose the parts of a composed settings class, not the class")
    unique = list(dict.fromkeys(parts))
    parts = tuple(p for p in unique if not any(q is not p and issubclass(q, p) for q in unique))
    defaults = dict(defaults or {})
    key = (name, parts, repr(sorted(defaults.items())))
    if key in _COMPOSED:
        return _COMPOSED[key]
    fields, seen = [], set()
    for part in parts:
        for f in dataclasses.fields(part):
            if f.name in seen:
                raise TypeError(f"{name}: {f.name!r} is declared by two of its parts")
            seen.add(f.name)
            meta = dict(f.metadata)
            has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
            value = defaults[f.name] if f.name in defaults else (_default(f) if has_default else dataclasses.MISSING)
            fields.append((f.name, f.type, setting(value, meta.pop("doc"), **meta)))
    unknown = sorted(set(defaults) - seen)
    if unknown:
        raise TypeError(f"{name}: no field {', '.join(unknown)} to give a default")
    cls = dataclasses.make_dataclass(name, fields, bases=tuple(reversed(parts)), frozen=True,
                                     namespace={"__reduce__": _reduce_composed, "__module__": __name__})
    cls._composed_from = (name, parts, defaults)
    _COMPOSED[key] = cls
    return cls


def _reduce_composed(self: SettingsObject) -> tuple[Any, ...]:
    name, parts, defaults = type(self)._composed_from
    return _rebuild_composed, (name, parts, defaults, settings_values(self))


def _rebuild_composed(name: str, parts: tuple[type, ...], defaults: dict[str, Any], values: dict[str, Any]) -> Any:
    return compose(name, *parts, defaults=defaults)(**values)


def check_yaml_colons(key: str, value: Any, where: str) -> None:
    """A mapping value whose keys hold a colon (``{name:imq,beta:-0.3}``: YAML reads ``name:imq`` as one
    key with no value) raises a ConfigError saying YAML needs a space after the colon."""
    if not isinstance(value, Mapping):
        return
    slipped = [k for k in value if isinstance(k, str) and ":" in k]
    if slipped:
        fixed = ", ".join(k.replace(":", ": ", 1) if v is None else f"{k}: {v}" for k, v in value.items())
        raise ConfigError(f"config key {key!r} in {where}: {slipped[0]!r} reads as one key with no value; YAML "
                          f"needs a space after each colon: {{{fixed}}}")
