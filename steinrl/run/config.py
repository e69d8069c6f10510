"""Run configuration, resolved from the parts' own option declarations.

A config is nested: top-level keys (``algo``, ``env``, ``seed``, ``device``, ``iterations``,
``particles``, the job's own such as ``temperature``) and one section per part (``rollout``,
``policy``, ``layer``, ``prior``, ``update``, ``estimator``, ``critic``, ``run``), whose options
are read from the parts the algorithm picked (``s2vgd-a2c``: the householder layer's ``K``, the
a2c estimator's ``gae_lambda``, ...): no hand-copied list to drift; ``docs/config.md`` is
rendered from the same declarations (``python -m steinrl.run.docs``). Resolution order, later wins:

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
then keys that bound each other by the job's ``check_config`` (``update.kernel``'s ``states`` within the
batch); anything else raises :class:`~steinrl.errors.ConfigError` naming the key, where and what is valid.
"""

from __future__ import annotations

import difflib
import importlib.resources
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from steinrl.errors import ConfigError
from steinrl.registry import Option, at_least_one, check_yaml_colons, coerce, non_negative, seed_range
from steinrl.run.best import BEST_OPTIONS
from steinrl.run.legacy import check_moved, migrate_run_config

__all__ = ["Config", "load_config", "resolve", "resolve_saved", "load_yaml", "parse_set", "save_config",
           "read_run_config", "TRAINER_OPTIONS", "RUN_OPTIONS", "CONFIG_DIR", "schema"]

#: The repository's configs/ folder, installed as the package data ``steinrl.configs``.
CONFIG_DIR = Path(str(importlib.resources.files("steinrl.configs")))

#: Top-level options of every run (declared by the Trainer).
TRAINER_OPTIONS: tuple[Option, ...] = (
    Option("algo", str, "s2vgd-a2c", "Algorithm <method>-<estimator>, e.g. s2vgd-a2c (see the algorithm table)."),
    Option("env", str, "CartpoleSwingUp", "Task: a steinrl short name or any Gymnasium id."),
    Option("seed", int, 0, "Seed of parameter init, action noise and env resets.", check=seed_range),
    Option("device", str, "cpu", "Torch device of particles, kernel and update (cpu, cuda, cuda:1)."),
    Option("particles", int, 16, "Number of particles M.", check=at_least_one),
)

#: The ``run`` section: bookkeeping of the command-line run loop, not of the algorithm.
RUN_OPTIONS: tuple[Option, ...] = (
    Option("logdir", str, "runs", "Root directory; a run lives in <logdir>/<env>/<algo>/<run_name>."),
    Option("run_name", (str, None), None, "Name of the run directory (null: seed<seed>-<timestamp>)."),
    Option("checkpoint_every", int, 50, "A checkpoint every this many iterations, and at the end.", check=at_least_one),
    *BEST_OPTIONS,  # best_every, best_episodes: steinrl.run.best
    Option("progress", bool, True, "A progress bar where stderr is a terminal (false, or no terminal: a line "
           "every log_every iterations)."),
    Option("log_every", int, 10, "Without a progress bar, a line every this many iterations.", check=at_least_one),
    Option("tensorboard", bool, True, "Write TensorBoard event files."),
    Option("report_every", int, 1, "steinrl sweep: iterations per Ray Tune result (the last one's metrics, the "
           "latest returns; a result costs Ray time: many short iterations report every 100 or so, docs/sweeps.md).",
           check=at_least_one),
    Option("cuda_graph", str, "auto", "RL on CUDA: replay each iteration as one CUDA graph (auto: where the run "
           "allows it, docs/gpu.md; on: or an error naming why not; off: eager).", choices=("auto", "on", "off")),
    Option("threads", int, 1, "Torch intra-op CPU threads, set for the process by every Trainer (the CLI, the "
           "Python API, SB3's SVPG, sweep trials alike; 0: leave torch's own or the caller's setting). 1 never "
           "oversubscribes a busy machine; what 1 and 2 threads measured: docs/benchmarks.md#torch-threads.",
           check=non_negative),
)


class Section(Mapping):
    """A read-only mapping of validated values with attribute access (``cfg.update.lr``)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", dict(values))

    def __getattr__(self, key: str) -> Any:
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


class Config(Section):
    """A resolved, validated run config (top-level values and :class:`Section` s).

    ``sources`` lists where its values came from, in order (files, ``the command line``).
    """

    def __init__(self, values: Mapping[str, Any], sources: tuple[str, ...] = ()) -> None:
        super().__init__(values)
        object.__setattr__(self, "sources", tuple(sources))

    def to_dict(self) -> dict[str, Any]:
        """A nested plain dict (safe to dump as YAML / JSON)."""
        def plain(v: Any) -> Any:
            return list(v) if isinstance(v, list) else v

        return {k: ({kk: plain(vv) for kk, vv in v.items()} if isinstance(v, Section) else plain(v))
                for k, v in self.items()}

    def replace(self, overrides: Mapping[str, Any], where: str = "Config.replace") -> Config:
        """A new config with ``overrides`` (nested, dotted or bare keys) applied and validated."""
        replaced = resolve([(self.to_dict(), "the config"), (dict(overrides), where)])
        return Config(replaced, (*self.sources, where))


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


def schema(algo: str, chosen: Mapping[str, str] | None = None) -> dict[str, tuple[Option, ...]]:
    """The sections of ``algo``'s config: ``""`` (top level) -> options, ``"run"``, and the job's.

    :param chosen: part names picked inside the config (e.g. ``{"prior": "joint"}``).
    """
    from steinrl.run.algos import parse_algo

    algorithm = parse_algo(algo)
    job = algorithm.job
    own = {o.name for o in job.options}  # a job may redeclare a Trainer option (its own default)
    sections = {"": tuple(o for o in TRAINER_OPTIONS if o.name not in own) + tuple(job.options)}
    sections.update(job.sections(algorithm.method, algorithm.estimator, dict(chosen or {})))
    sections["run"] = RUN_OPTIONS
    return sections


def check_algo_env(algo: Any, env: Any) -> Any:
    """``algo``'s job; :class:`ConfigError` unless ``env`` is one of its tasks (naming the job it belongs to)."""
    from steinrl.run.algos import JOBS, parse_algo

    job = parse_algo(algo).job
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
    """Merge config layers ``(raw mapping, where it came from)`` in order and validate them.

    :param shared: the ``where`` of layers written for a family of algorithms and tasks
        (per-task files, presets): their keys this algorithm does not have are skipped
        (``tests/test_config.py`` checks that every shipped key is a key of some algorithm).
    """
    flat = [(_items(raw, where), where) for raw, where in layers]
    algo = _last(flat, ("algo",), TRAINER_OPTIONS[0].default)
    chosen = {part: _last(flat, (part, "name"), None) for part in ("prior", "critic")}
    chosen["env"] = _last(flat, ("env",), TRAINER_OPTIONS[1].default)
    sections = schema(coerce(TRAINER_OPTIONS[0], algo, "algo", "the config"),
                      {k: v for k, v in chosen.items() if isinstance(v, str)})
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
    check_algo_env(values[""]["algo"], values[""]["env"]).check_config(values)  # then keys that bound each other
    if "horizon" in values.get("rollout", {}) and ("rollout", "horizon") not in assigned:
        values["rollout"]["horizon"] = registered_horizon(values[""]["env"], values["rollout"]["horizon"])
    return Config({**values[""], **{s: Section(v) for s, v in values.items() if s}}, tuple(w for _, w in layers))


# --- files ------------------------------------------------------------------------------
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
