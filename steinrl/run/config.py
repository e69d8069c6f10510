"""Run configuration, resolved from the parts' own option declarations.

A config is nested: top-level keys (``algo``, ``env``, ``seed``, ``device``, ``iterations``,
``particles``, the job's own such as ``temperature``) and one section per part (``rollout``,
``policy``, ``layer``, ``prior``, ``update``, ``estimator``, ``critic``, ``run``). Each section
is a typed settings object, a frozen dataclass the job composes from the settings of the parts
the algorithm picked (``s2vgd-a2c``'s ``layer``: the householder layer's, with ``K``; its
``estimator``: a2c's, with ``gae_lambda``; :func:`section_types`): code reads ``cfg.update.lr``,
a float. The options a section accepts are derived from the same dataclasses (:func:`schema`):
no hand-copied list to drift; ``docs/config.md`` is rendered from them too (``python -m
steinrl.run.docs``). Resolution order, later wins:

1. every option's declared default, then the method's own defaults (``vmg``: K = 0); ``rollout.horizon``:
   the task's Gymnasium time limit (:func:`registered_horizon`: Hopper-v5 1000, steinrl's tasks 500);
2. ``configs/<env>.yaml`` if it exists (shipped as ``steinrl.configs``), then
   ``configs/presets/<preset>.yaml`` if a preset is named (both serve a family of algorithms
   and tasks: their keys an algorithm does not have are skipped);
3. ``--config FILE`` files, in order; 4. the command line: flags and ``--set key=value``.

Keys may be nested in YAML or dotted (``update.lr: 1e-3``); a bare key means the first section
that has it, in the order of the schema (``batch_size`` -> ``rollout.batch_size``, ``lr`` ->
``update.lr``, ``hidden`` -> ``policy.hidden``: the critic's come last). Values are checked
against the declared type (``1e-3`` a float, ``5e3`` an int where an int is declared) and range,
then the typed sections are built and keys that bound each other checked by the job's ``check_config``
(``update.kernel``'s ``states`` within the batch); anything else raises
:class:`~steinrl.errors.ConfigError` naming the key, where and what is valid. The files themselves
(strict YAML, ``--set``, the shipped configs) are :mod:`steinrl.run.config_files`'.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from steinrl.errors import ConfigError
from steinrl.job import Chosen, Job, RunSettings
from steinrl.registry import (
    Option,
    at_least_one,
    check_yaml_colons,
    coerce,
    seed_range,
    settings_options,
    settings_values,
)
from steinrl.run.config_files import CONFIG_DIR, env_config_path, load_yaml, parse_set, presets, read_user_text
from steinrl.run.legacy import check_moved, migrate_run_config

__all__ = ["Config", "load_config", "resolve", "resolve_saved", "load_yaml", "parse_set", "save_config",
           "read_run_config", "TRAINER_OPTIONS", "RUN_OPTIONS", "CONFIG_DIR", "schema", "section_types",
           "env_config_path", "presets", "read_user_text"]

#: Top-level options of every run (declared by the Trainer).
TRAINER_OPTIONS: tuple[Option, ...] = (
    Option("algo", str, "s2vgd-a2c", "Algorithm <method>-<estimator>, e.g. s2vgd-a2c (see the algorithm table)."),
    Option("env", str, "CartpoleSwingUp", "Task: a steinrl short name or any Gymnasium id."),
    Option("seed", int, 0, "Seed of parameter init, action noise and env resets.", check=seed_range),
    Option("device", str, "cpu", "Torch device of particles, kernel and update (cpu, cuda, cuda:1)."),
    Option("particles", int, 16, "Number of particles M.", check=at_least_one),
)

#: The ``run`` section's options (:class:`steinrl.job.RunSettings`): bookkeeping of the run loop, not of the algorithm.
RUN_OPTIONS: tuple[Option, ...] = settings_options(RunSettings)


class Config(Mapping):
    """A resolved, validated run config: its top-level values and one typed section per part (a
    frozen settings dataclass: ``cfg.update.lr`` is a float, ``cfg.rollout`` a
    :class:`~steinrl.rl.rollout.RolloutSettings`), read by attribute; read-only
    (:meth:`replace` makes a new one). A Mapping over its top-level keys and section names.

    ``sources`` lists where its values came from, in order (files, ``the command line``).
    """

    def __init__(self, values: Mapping[str, Any], sources: tuple[str, ...] = ()) -> None:
        object.__setattr__(self, "_values", dict(values))
        object.__setattr__(self, "sources", tuple(sources))

    def __getattr__(self, key: str) -> Any:
        if key.startswith("__") or key == "_values":
            raise AttributeError(key)
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(f"config has no key {key!r}; it has: {', '.join(self._values)}") from None

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("a config is read-only; use Config.replace({...})")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._values!r})"

    def to_dict(self) -> dict[str, Any]:
        """A nested plain dict (safe to dump as YAML / JSON): a section's values by key."""
        return {k: settings_values(v) if dataclasses.is_dataclass(v) else list(v) if isinstance(v, list) else v
                for k, v in self._values.items()}

    def replace(self, overrides: Mapping[str, Any], where: str = "Config.replace") -> Config:
        """A new config with ``overrides`` (nested, dotted or bare keys) applied and validated."""
        return Config(resolve([(self.to_dict(), "the config"), (dict(overrides), where)]), (*self.sources, where))


# --- resolution -----------------------------------------------------------------------
def _items(raw: Mapping[str, Any], where: str) -> list[tuple[tuple[str, ...], Any]]:
    """Flatten one layer to ``(path, value)``: nested sections and dotted keys become paths."""
    out = []
    for key, value in raw.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"config keys must be non-empty strings, got {key!r} in {where}")
        path = tuple(key.split("."))
        if len(path) > 2 or not all(path):
            raise ConfigError(f"config key {key!r} in {where} must be <key> or <section>.<key>")
        if not isinstance(value, Mapping) or len(path) == 2:  # a <section>.<key> may take a mapping (a kernel)
            check_yaml_colons(key, value, where)
            out.append((path, value))
            continue
        for sub, v in value.items():
            if not isinstance(sub, str) or not sub or "." in sub:
                raise ConfigError(f"section {key!r} in {where} must map keys to values, got {sub!r}: {v!r}")
            check_yaml_colons(f"{key}.{sub}", v, where)
            out.append(((key, sub), v))
    return out


def _last(layers: list[tuple[list, str]], path: tuple[str, ...], default: Any) -> Any:
    value = default
    for items, _ in layers:
        for p, v in items:
            if p == path:
                value = v
    return value


def _job(algo: str) -> tuple[Job, Any]:
    from steinrl.run.algos import parse_algo

    algorithm = parse_algo(algo)
    return algorithm.job, algorithm


def section_types(algo: str, chosen: Mapping[str, str] | None = None) -> dict[str, type]:
    """The typed sections of ``algo``'s config: section -> its settings class (the job's
    sections, then ``run``).

    :param chosen: part names picked inside the config (e.g. ``{"prior": "joint"}``) and its ``env``
        (:class:`~steinrl.job.Chosen`'s keys).
    """
    job, algorithm = _job(algo)
    types = dict(job.sections(algorithm.method, algorithm.estimator, Chosen(**(chosen or {}))))
    types["run"] = RunSettings
    return types


def _options(algo: str, types: Mapping[str, type]) -> dict[str, tuple[Option, ...]]:
    job, _ = _job(algo)
    own = {o.name for o in job.options}  # a job may redeclare a Trainer option (its own default)
    top = tuple(o for o in TRAINER_OPTIONS if o.name not in own) + tuple(job.options)
    return {"": top, **{name: settings_options(cls) for name, cls in types.items()}}


def schema(algo: str, chosen: Mapping[str, str] | None = None) -> dict[str, tuple[Option, ...]]:
    """The options of ``algo``'s config: ``""`` (top level) -> options, then every section's
    (derived from :func:`section_types`), ``run`` last."""
    return _options(algo, section_types(algo, chosen))


def check_algo_env(algo: str, env: str) -> Job:
    """``algo``'s job; :class:`ConfigError` unless ``env`` is one of its tasks (naming the job it belongs to)."""
    from steinrl.run.algos import JOBS

    job, _ = _job(algo)
    try:
        job.check_env(env)
    except ConfigError:
        for name, other in JOBS.items():
            if other is not job:
                try:
                    other.check_env(env)
                except ConfigError:
                    continue
                raise ConfigError(f"{env!r} is a task of {name} algorithms ({', '.join(other.algorithm_names())}); "
                                  f"{algo!r} is not one of them") from None
        raise
    return job


def _locate(path: tuple[str, ...], sections: dict[str, tuple[Option, ...]], where: str) -> tuple[str, Option]:
    """The (section, option) a key path names; bare keys are looked up in every section."""
    check_moved(path, where)
    if len(path) == 1:
        (key,) = path
        if key == "name":  # which prior / critic: always say whose
            named = [f"{s}.name" for s, o in sections.items() if any(x.name == "name" for x in o)]
            raise ConfigError(f"config key 'name' in {where} must name its section: {', '.join(named)}")
        top = {o.name: o for o in sections[""]}
        if key in top:
            return "", top[key]
        if key in sections:
            raise ConfigError(f"{key!r} in {where} is a config section; set its keys, e.g. {key}.<key>=... "
                              f"(keys: {', '.join(o.name for o in sections[key])})")
        # the first section that has it, in schema order (the critic after the policy's own parts)
        owners = [s for s, opts in sections.items() if s and any(o.name == key for o in opts)]
        if owners:
            return owners[0], next(o for o in sections[owners[0]] if o.name == key)
        valid = [o.name for o in sections[""]] + [f"{s}.{o.name}" for s, opts in sections.items() if s for o in opts]
        close = difflib.get_close_matches(key, valid + [v.split(".")[-1] for v in valid], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown config key {key!r} in {where}{hint}; valid keys: {', '.join(valid)}")
    section, key = path
    if section not in sections or not section:
        valid = [s for s in sections if s]
        raise ConfigError(f"unknown config section {section!r} in {where} for this algorithm; "
                          f"sections: {', '.join(valid)}")
    options = {o.name: o for o in sections[section]}
    if key not in options:
        close = difflib.get_close_matches(key, list(options), n=1)
        hint = f" (did you mean '{section}.{close[0]}'?)" if close else ""
        raise ConfigError(f"unknown config key {section + '.' + key!r} in {where}{hint}; "
                          f"valid keys of {section}: {', '.join(options) or '(none)'}")
    return section, options[key]


def registered_horizon(env: str, default: int) -> int:
    """The time limit ``env`` is registered with in Gymnasium (Hopper-v5: 1000, Pendulum-v1:
    200, steinrl's tasks: 500), or ``default`` for an id registered without one. An RL
    config whose layers leave ``rollout.horizon`` unset takes it, so that a Gymnasium task
    trains on its own episode length."""
    import gymnasium as gym

    from steinrl.envs import resolve_env_id

    limit = gym.spec(resolve_env_id(env)).max_episode_steps
    return int(limit) if limit is not None and limit > 0 else default


def resolve(layers: list[tuple[Mapping[str, Any], str]], shared: tuple[str, ...] = ()) -> Config:
    """Merge config layers ``(raw mapping, where it came from)`` in order, validate them and build
    the typed sections.

    :param shared: the ``where`` of layers written for a family of algorithms and tasks
        (per-task files, presets): their keys this algorithm does not have are skipped
        (``tests/test_config.py`` checks that every shipped key is a key of some algorithm).
    """
    flat = [(_items(raw, where), where) for raw, where in layers]
    algo = coerce(TRAINER_OPTIONS[0], _last(flat, ("algo",), TRAINER_OPTIONS[0].default), "algo", "the config")
    chosen = {part: _last(flat, (part, "name"), None) for part in ("prior", "critic")}
    chosen["env"] = _last(flat, ("env",), TRAINER_OPTIONS[1].default)
    types = section_types(algo, {k: v for k, v in chosen.items() if isinstance(v, str)})
    sections = _options(algo, types)
    values: dict[str, dict[str, Any]] = {s: {o.name: o.default for o in opts} for s, opts in sections.items()}
    assigned: set[tuple[str, str]] = set()  # (section, key) set by some layer
    for items, where in flat:
        for path, value in items:
            if where in shared:
                try:
                    section, option = _locate(path, sections, where)
                except ConfigError:
                    continue
            else:
                section, option = _locate(path, sections, where)
            key = f"{section}.{option.name}" if section else option.name
            values[section][option.name] = coerce(option, value, key, where, values[section][option.name])
            assigned.add((section, option.name))
    if "rollout" in values and "horizon" in values["rollout"] and ("rollout", "horizon") not in assigned:
        values["rollout"]["horizon"] = registered_horizon(values[""]["env"], values["rollout"]["horizon"])
    cfg = Config({**values[""], **{s: types[s](**v) for s, v in values.items() if s}}, tuple(w for _, w in layers))
    check_algo_env(cfg.algo, cfg.env).check_config(cfg)  # then keys that bound each other
    return cfg


def load_config(algo: str | None = None, env: str | None = None, overrides: Mapping[str, Any] | None = None,
                config_files: list[str | Path] | tuple = (), preset: str | None = None) -> Config:
    """The resolved config the CLI would use (see the module docstring for the order).

    :param algo: e.g. ``"s2vgd-a2c"`` (default: the declared default).
    :param env: task name; its ``configs/<env>.yaml`` applies.
    :param overrides: keys to set last (nested, dotted or bare), as ``--set`` does.
    :param config_files: extra YAML files, in order.
    :param preset: a shipped preset name (``configs/presets/<preset>.yaml``).
    """
    overrides = dict(overrides or {})
    files = [(load_yaml(p), str(p)) for p in config_files]
    if env is None:
        env = overrides.get("env") or next((f["env"] for f, _ in reversed(files) if "env" in f), None)
    env = TRAINER_OPTIONS[1].default if env is None else env
    if not isinstance(env, str):
        raise ConfigError(f"env must be a string, got {env!r}")
    if algo is None:
        algo = overrides.get("algo") or next((f["algo"] for f, _ in reversed(files) if "algo" in f), None)
    check_algo_env(TRAINER_OPTIONS[0].default if algo is None else algo, env)
    layers = []
    if env and env_config_path(env).is_file():
        layers.append((load_yaml(env_config_path(env)), str(env_config_path(env))))
    if preset is not None:
        if preset not in presets():
            raise ConfigError(f"unknown preset {preset!r}; shipped presets: {', '.join(presets()) or '(none)'}")
        path = CONFIG_DIR / "presets" / f"{preset}.yaml"
        layers.append((load_yaml(path), str(path)))
    shared = tuple(where for _, where in layers)  # the per-task file and the preset
    layers += files
    command_line = {"env": env, **({"algo": algo} if algo is not None else {}), **overrides}
    layers.append((command_line, "the command line"))
    return resolve(layers, shared)


def save_config(cfg: Config, path: str | Path, meta: Mapping[str, Any] | None = None) -> None:
    """Write the resolved config (plus ``meta`` under ``_meta``) as YAML, atomically (a resume
    rewrites a run's config.yaml: a kill then must not leave half of it)."""
    from steinrl.run.checkpoint import write_atomic

    data = cfg.to_dict()
    if meta:
        data["_meta"] = dict(meta)
    write_atomic(path, yaml.safe_dump(data, sort_keys=False))


def read_run_config(path: str | Path) -> Config:
    """Load a run directory's ``config.yaml`` (its ``_meta`` block ignored)."""
    data = load_yaml(path)
    data.pop("_meta", None)
    return resolve_saved(data, str(path))


def resolve_saved(data: Mapping[str, Any], where: str) -> Config:
    """A config a run saved (run directory, checkpoint), earlier versions' keys migrated."""
    return resolve([(migrate_run_config(dict(data)), where)])
