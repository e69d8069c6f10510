"""``steinrl sweep SPEC.yaml``: algorithms x tasks x seeds (x a grid, or an Optuna search) on Ray Tune.

Every trial is one :class:`~steinrl.run.trainer.Trainer` wrapped in a Ray Tune Trainable
(:data:`SteinTrainable`): Ray schedules the trials on the CPUs of this machine or of a
cluster (``RAY_ADDRESS`` / ``--address``), checkpoints them every ``checkpoint_every``
iterations, and the same command started again continues an interrupted sweep from its
trials' checkpoints. The outputs (``results.csv``, ``summary.md``, ``curves.png``) are
written from the trials' own results by :mod:`steinrl.run.sweep_report`. The spec format
is in ``docs/sweeps.md``; every trial's config is validated before Ray starts.

Ray is an optional dependency (the ``sweep`` extra: ``pip install -e ".[sweep]"`` in a checkout), imported only
here, on use.
"""

from __future__ import annotations

import difflib
import itertools
import logging
import math
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from steinrl.errors import ConfigError
from steinrl.run.cli_base import Parser, input_path, output_dir
from steinrl.run.config import Config, load_config, load_yaml
from steinrl.run.legacy import migrate_overrides
from steinrl.run.sweep_report import block_result, report

__all__ = ["Spec", "load_spec", "make_trials", "trial_config", "run_sweep", "sweep_main", "CHECKPOINT_NAME"]

RAY_MISSING = 'steinrl sweep needs Ray Tune: pip install -e ".[sweep]" in the steinrl checkout (the sweep extra)'
CHECKPOINT_NAME = "checkpoint.pt"
#: The spec's fields (docs/sweeps.md describes each).
FIELDS = ("algos", "envs", "seeds", "iterations", "rounds", "preset", "config", "grid", "per_env", "per_algo",
          "resources", "num_cpus", "max_concurrent", "checkpoint_every", "max_failures", "out", "search")
#: The fields that define the trials: a sweep continues only with the same values.
IDENTITY = ("algos", "envs", "seeds", "iterations", "rounds", "preset", "config", "grid", "per_env", "per_algo",
            "search")
#: Keys a spec sets through its own fields, not through config / grid / per_env / per_algo / search.
RESERVED = ("algo", "env", "seed", "iterations", "rounds")
DISTRIBUTIONS = ("loguniform", "uniform", "choice")
#: Environment of a local Ray: no token auth, no dashboard, no usage stats, every log line, the table reporter.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_DEDUP_LOGS": "0", "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AIR_NEW_OUTPUT": "0", "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0"}


# --- the spec -------------------------------------------------------------------------
def _need(ok: Any, where: str, field: str, what: str, got: Any) -> None:
    """Raise a one-line :class:`ConfigError` naming ``field`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{field} in {where} must be {what}, got {got!r}")


def _is_int(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _keys(value: Any, field: str, where: str) -> dict[str, Any]:
    """A mapping of config keys (``{}`` for None), none of them set by the spec's own fields."""
    value = {} if value is None else value
    _need(isinstance(value, dict) and all(isinstance(k, str) and k for k in value), where, field,
          "a mapping of config keys", value)
    for key in value:
        _need(key not in RESERVED, where, field, f"free of {', '.join(RESERVED)} (the spec's own fields set "
              "them: algos, envs, seeds, iterations, rounds)", key)
    return dict(value)


@dataclass(frozen=True)
class Search:
    """``search:``: Optuna samples ``space`` ``num_samples`` times, scoring a trial by its last ``metric``."""

    metric: str | None  #: None: the headline metric
    mode: str | None  #: "max" / "min"; None: the headline metric's direction
    num_samples: int
    space: dict[str, list]  #: key -> [distribution, *arguments]


@dataclass(frozen=True)
class Spec:
    """A checked sweep spec (:func:`load_spec`); ``raw`` is the file's mapping."""

    path: Path
    raw: dict[str, Any]
    algos: tuple[str, ...]
    envs: tuple[str, ...]
    seeds: tuple[int, ...]
    config: dict[str, Any]
    grid: dict[str, list]
    per_env: dict[str, dict[str, Any]]
    per_algo: dict[str, dict[str, Any]]
    resources: dict[str, float]
    search: Search | None

    def __getattr__(self, field: str) -> Any:  # the plain fields: iterations, rounds, preset, out, ...
        if field in FIELDS:
            return self.raw.get(field, {"checkpoint_every": 50, "max_failures": 2}.get(field))
        raise AttributeError(field)

    def identity(self) -> dict[str, Any]:
        """The fields that define the trials."""
        return {k: self.raw.get(k) for k in IDENTITY}


def _search(value: Any, where: str) -> Search | None:
    if value is None:
        return None
    fields = ("algorithm", "metric", "mode", "num_samples", "space")
    _need(isinstance(value, dict) and set(value) <= set(fields), where, "search", f"a mapping of {', '.join(fields)}",
          value)
    _need(value.get("algorithm", "optuna") == "optuna", where, "search.algorithm", "optuna", value.get("algorithm"))
    _need(value.get("mode") in ("max", "min", None), where, "search.mode", "max or min", value.get("mode"))
    _need(value.get("mode") or "metric" not in value, where, "search.mode", "given with search.metric: max or min",
          None)
    _need(isinstance(value.get("metric", ""), str), where, "search.metric", "a metric name", value.get("metric"))
    _need(_is_int(value.get("num_samples"), 1), where, "search.num_samples", "an integer >= 1",
          value.get("num_samples"))
    space = _keys(value.get("space"), "search.space", where)
    _need(space, where, "search.space", "a mapping of at least one key to tune", value.get("space"))
    for key, dist in space.items():
        ok = isinstance(dist, list) and len(dist) >= 2 and dist[0] in DISTRIBUTIONS
        if ok and dist[0] != "choice":
            ok = len(dist) == 3 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in dist[1:]) \
                and (dist[0] == "uniform" or dist[1] > 0) and dist[1] < dist[2]
        _need(ok, where, f"search.space.{key}", "[loguniform, low, high] (0 < low < high), [uniform, low, high] "
              "or [choice, value, ...]", dist)
    return Search(value.get("metric"), value.get("mode"), value["num_samples"], space)


def load_spec(path: str | Path) -> Spec:
    """Read and check a sweep spec; any bad field raises a one-line :class:`ConfigError` naming it."""
    from steinrl.run.algos import parse_algo

    path = input_path(path, "sweep spec")
    raw, where = load_yaml(path), str(path)
    if not raw:
        raise ConfigError(f"sweep spec {path} is empty; a spec names at least algos, envs and seeds (docs/sweeps.md)")
    for key in raw:
        if key not in FIELDS:
            close = difflib.get_close_matches(str(key), FIELDS, n=1)
            raise ConfigError(f"unknown field {key!r} in {where}" + (f" (did you mean {close[0]!r}?)" if close else "")
                              + f"; fields: {', '.join(FIELDS)}")
    names = {}
    for field in ("algos", "envs"):
        value = raw.get(field)
        _need(isinstance(value, list) and value and all(isinstance(v, str) and v for v in value)
              and len(set(value)) == len(value), where, field, "a non-empty list of distinct names", value)
        names[field] = tuple(value)
    try:
        jobs = {algo: parse_algo(algo).job for algo in names["algos"]}
    except ConfigError as exc:
        raise ConfigError(f"algos in {where}: {exc}") from None
    seeds = raw.get("seeds")
    seeds = list(range(seeds)) if _is_int(seeds, 1) else seeds
    _need(isinstance(seeds, list) and seeds and len(set(seeds)) == len(seeds) and all(_is_int(s, 0) for s in seeds),
          where, "seeds", "a count N >= 1 (seeds 0..N-1) or a list of distinct seeds >= 0", raw.get("seeds"))
    grid = _keys(raw.get("grid"), "grid", where)
    for key, values in grid.items():
        _need(isinstance(values, list) and values, where, f"grid.{key}", "a non-empty list of values", values)
    per = {}
    for field, allowed in (("per_env", names["envs"]), ("per_algo", tuple(jobs))):
        value = raw.get(field) or {}
        _need(isinstance(value, dict) and set(value) <= set(allowed), where, field,
              f"a mapping from {field[4:]}s ({', '.join(allowed)}) to config keys", value)
        per[field] = {name: _keys(keys, f"{field}.{name}", where) for name, keys in value.items()}
    resources = raw.get("resources") or {}
    resources = {"cpu": 1, **resources} if isinstance(resources, dict) else {"": resources}
    _need(set(resources) <= {"cpu", "gpu"} and all(isinstance(v, (int, float)) and v >= 0 for v in resources.values())
          and resources["cpu"] > 0, where, "resources", "{cpu: N > 0, gpu: N >= 0} per trial", raw.get("resources"))
    _need(raw.get("max_failures") is None or _is_int(raw["max_failures"], 0), where, "max_failures",
          "an integer >= 0", raw.get("max_failures"))
    for field in ("iterations", "rounds", "num_cpus", "max_concurrent", "checkpoint_every"):
        _need(raw.get(field) is None or _is_int(raw[field], 1), where, field, "an integer >= 1", raw.get(field))
        _need(raw.get(field) is None or field not in ("iterations", "rounds")
              or any(field in {o.name for o in job.options} for job in jobs.values()),
              where, field, f"a setting of one of algos ({', '.join(jobs)})", raw.get(field))
    for field in ("preset", "out"):
        _need(isinstance(raw.get(field, ""), str), where, field, "a string", raw.get(field))
    search = _search(raw.get("search"), where)
    _need(not search or (len(jobs) == len(names["envs"]) == len(seeds) == 1 and not grid), where, "search",
          "used with one algo, one env, one seed and no grid", f"{len(jobs)} algos, {len(names['envs'])} envs, "
          f"{len(seeds)} seeds" + (", a grid" if grid else ""))
    return Spec(path, raw, names["algos"], names["envs"], tuple(seeds), _keys(raw.get("config"), "config", where),
                grid, per["per_env"], per["per_algo"], resources, search)


# --- trials -----------------------------------------------------------------------------
def make_trials(spec: Spec) -> list[dict[str, Any]]:
    """Every trial of ``spec`` (env x algo x grid point x seed) as a plain dict, each config
    validated (one :class:`ConfigError` naming the spec, algo, env and key on the first problem;
    a search space with each bound or choice and a point inside each range)."""
    from steinrl.run.algos import parse_algo

    points = [dict(zip(spec.grid, values)) for values in itertools.product(*spec.grid.values())]
    space = spec.search.space if spec.search else {}
    probes = [{}] + [{k: v} for k, d in space.items() for v in d[1:]] + [
        {k: d[1] + (d[2] - d[1]) / math.e} for k, d in space.items() if d[0] != "choice"]  # int options fail here
    trials = []
    for env, algo in itertools.product(spec.envs, spec.algos):
        own = {o.name for o in parse_algo(algo).job.options}
        length = {k: spec.raw[k] for k in ("iterations", "rounds") if k in own and spec.raw.get(k) is not None}
        for point in points:
            group = {"algo": algo, "env": env, "preset": spec.preset, "params": point,
                     "threads": max(1, math.floor(spec.resources["cpu"])),
                     "overrides": {**spec.config, **spec.per_env.get(env, {}), **spec.per_algo.get(algo, {}), **point,
                                   **length}}
            for probe in probes:
                try:
                    trial_config({**group, "seed": spec.seeds[0]}, probe, str(spec.path))
                except ConfigError as exc:
                    where = "".join(f", {k}={v!r}" for k, v in {**point, **probe}.items())
                    raise ConfigError(f"{spec.path}: {algo} on {env}{where}: {exc}") from None
            trials += [{**group, "seed": seed} for seed in spec.seeds]
    return trials


def trial_config(trial: dict[str, Any], search: dict[str, Any] | None = None, where: str = "the sweep spec") -> Config:
    """The resolved config of one trial (a dict of :func:`make_trials`) with sampled ``search`` values:
    ``load_config`` with the spec's keys as the last layer (errors name ``where`` as their source)."""
    # run.threads: the trial's CPUs (the Trainer sets it), unless the spec sets it itself
    overrides = {"run.threads": trial["threads"], **trial["overrides"], **(search or {}), "seed": trial["seed"]}
    overrides = migrate_overrides(overrides)  # a spec written with an earlier version's keys
    try:
        return load_config(trial["algo"], trial["env"], overrides, preset=trial["preset"])
    except ConfigError as exc:
        raise ConfigError(str(exc).replace("in the command line", f"in {where}")) from None


def _define_trainable() -> type:
    """Define :data:`SteinTrainable` (imports Ray Tune, starts nothing)."""
    import ray
    from ray import tune

    from steinrl.run.trainer import Trainer

    class SteinTrainable(tune.Trainable):
        """One sweep trial: a :class:`~steinrl.run.trainer.Trainer`, stepped, saved and restored by Ray Tune.

        Its config is ``{"trial": <a dict of make_trials>, "search": {key: sampled value}}``.
        A result is the trainer's metrics plus ``done`` (the trainer's own stop criterion).
        """

        def setup(self, config: dict[str, Any]) -> None:
            self.trainer = Trainer(trial_config(config["trial"], config.get("search")))

        def step(self) -> dict[str, Any]:  # run.report_every trainer iterations: block_result of their rows
            rows = [self.trainer.step()]
            while len(rows) < self.trainer.config.run.report_every and not self.trainer.done:
                rows.append(self.trainer.step())
            # node_id: the Ray node the iteration ran on (in result.json; results.csv keeps steinrl's metrics)
            return {**block_result(rows), "done": self.trainer.done, "node_id": ray.get_runtime_context().get_node_id()}

        def save_checkpoint(self, checkpoint_dir: str) -> None:
            self.trainer.save(Path(checkpoint_dir) / CHECKPOINT_NAME)

        def load_checkpoint(self, checkpoint: str) -> None:
            self.trainer.restore(Path(checkpoint) / CHECKPOINT_NAME)

        def reset_config(self, new_config: dict[str, Any]) -> bool:
            self.trainer.close()
            self.setup(new_config)
            return True

        def cleanup(self) -> None:
            self.trainer.close()

    SteinTrainable.__module__, SteinTrainable.__qualname__ = __name__, "SteinTrainable"
    return SteinTrainable


def __getattr__(name: str) -> Any:
    """``SteinTrainable`` is defined on first use, so that importing this module needs no Ray
    (and Ray's workers find the class by name when they unpickle it)."""
    if name == "SteinTrainable":
        globals()[name] = _define_trainable()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --- running ----------------------------------------------------------------------------
def import_tune(search: Search | None = None) -> Any:
    """``ray.tune`` (after setting :data:`RAY_ENV`), or a one-line :class:`ConfigError` saying what to install."""
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)
    try:
        from ray import tune
        if search is not None:
            import optuna  # noqa: F401
    except ImportError:
        raise ConfigError(RAY_MISSING) from None
    return tune


def _dirname(trial: Any) -> str:
    t = trial.config["trial"]
    return f"{t['algo']}_{t['env']}_seed{t['seed']}_{trial.trial_id}".replace("/", "_")


def _check_same_spec(spec: Spec, out: Path) -> None:
    """``out`` holds this spec's sweep or none: keep a copy of the spec there, refuse a different one."""
    saved = out / "spec.yaml"
    if saved.exists() and not saved.is_file():
        raise ConfigError(f"{saved} is not a file; {out} is not a sweep's output directory: choose another --out")
    if saved.is_file():
        if load_spec(saved).identity() != spec.identity():
            raise ConfigError(f"{out} holds a sweep of a different spec ({saved}); choose another --out, or "
                              f"delete {out} to start over")
    elif spec.path.resolve() != saved.resolve():
        shutil.copyfile(spec.path, saved)


def _tuner(tune: Any, spec: Spec, trials: list[dict[str, Any]], out: Path) -> Any:
    """A new or restored Tuner of ``spec`` whose experiment lives in ``out/ray/<spec name>``."""
    from steinrl.run.algos import parse_algo

    trainable = tune.with_resources(__getattr__("SteinTrainable"), dict(spec.resources))
    path = out / "ray" / spec.path.stem
    if tune.Tuner.can_restore(str(path)):
        print(f"continuing the sweep in {path} from its trials' checkpoints", file=sys.stderr)
        return tune.Tuner.restore(str(path), trainable, resume_unfinished=True, restart_errored=True)
    headlines = list(dict.fromkeys(parse_algo(a).job.headline_metric for a in spec.algos))
    search_keys = list(spec.search.space) if spec.search else []
    reporter = tune.CLIReporter(
        metric_columns={"training_iteration": "iter", **{h: h for h in headlines}, "time_total_s": "seconds"},
        parameter_columns={"trial/algo": "algo", "trial/env": "env", "trial/seed": "seed",
                           **{f"trial/params/{k}": k for k in spec.grid}, **{f"search/{k}": k for k in search_keys}},
        max_report_frequency=30, max_progress_rows=30)
    options = {"max_concurrent_trials": spec.max_concurrent, "trial_dirname_creator": _dirname, "reuse_actors": True}
    param_space: dict[str, Any] = {"trial": tune.grid_search(trials)}
    if spec.search is not None:
        from ray.tune.search.optuna import OptunaSearch

        metric = spec.search.metric or headlines[0]  # load_spec: a search.metric comes with its search.mode
        param_space = {"trial": trials[0], "search": {
            k: tune.choice(v[1:]) if v[0] == "choice" else getattr(tune, v[0])(v[1], v[2])
            for k, v in spec.search.space.items()}}
        mode = spec.search.mode or parse_algo(spec.algos[0]).job.headline_mode
        options.update(metric=metric, mode=mode,
                       search_alg=OptunaSearch(seed=spec.seeds[0]), num_samples=spec.search.num_samples)
    run_config = tune.RunConfig(
        name=spec.path.stem, storage_path=str(out / "ray"), progress_reporter=reporter, verbose=1,
        failure_config=tune.FailureConfig(max_failures=spec.max_failures),  # a lost node: on from the checkpoint
        # every checkpoint is kept: after a kill -9, Ray's saved record of a trial's latest checkpoint can
        # lag behind the trial, and a restore needs the checkpoint that record names
        checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=spec.checkpoint_every, checkpoint_at_end=True,
                                                num_to_keep=None))
    return tune.Tuner(trainable, param_space=param_space, tune_config=tune.TuneConfig(**options),
                      run_config=run_config)


def run_sweep(spec: Spec, out: str | Path, address: str | None = None, command: str = "steinrl sweep") -> int:
    """Run (or continue) ``spec``'s sweep into ``out`` and write its outputs; returns the exit code:
    0 all trials finished, 1 some failed, 130 interrupted (run the same command again to continue)."""
    tune = import_tune(spec.search)
    trials = make_trials(spec)
    out = output_dir(Path(out).resolve(), "--out", create=True)
    _check_same_spec(spec, out)
    import ray

    # quiet: Ray's INFO lines (a checkpoint written, ...) and its warning about trials not started yet
    logging.getLogger("ray.tune.analysis.experiment_analysis").setLevel(logging.ERROR)
    quiet = {"logging_level": "warning", "logging_config": ray.LoggingConfig(log_level="WARNING")}
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, **quiet)
    else:
        # address "local": a Ray of its own, never a cluster that another program started on this machine
        ray.init(address="local", num_cpus=spec.num_cpus or os.cpu_count(), include_dashboard=False, **quiet)
    print(f"sweep {spec.path}: {len(trials) if spec.search is None else spec.search.num_samples} trials, "
          f"{spec.resources['cpu']:g} CPU each, into {out}", file=sys.stderr)
    try:
        results = _tuner(tune, spec, trials, out).fit()
    finally:
        ray.shutdown()
    return report(results, out, command)


# --- the command ------------------------------------------------------------------------
def sweep_main(argv: Sequence[str] | None = None, prog: str = "steinrl sweep") -> int:
    """``steinrl sweep SPEC.yaml [--out DIR] [--address ADDR]``."""
    p = Parser(prog=prog, description="Run algorithms x tasks x seeds (x a grid or a search) on Ray Tune; "
                                       "started again, continue from the trials' checkpoints. Spec: docs/sweeps.md.")
    p.add_argument("spec", metavar="SPEC.yaml", help="the sweep spec")
    p.add_argument("--out", metavar="DIR", help="output directory (default: the spec's out)")
    p.add_argument("--address", metavar="ADDR", help="a running Ray cluster (default: $RAY_ADDRESS, else local Ray)")
    args = p.parse_args(argv)
    import_tune()
    spec = load_spec(args.spec)
    out = args.out or spec.out
    if not out:
        raise ConfigError(f"no output directory: give --out DIR or out: in {spec.path}")
    output_dir(out, "--out" if args.out else f"out in {spec.path}")
    command = " ".join([prog, *(sys.argv[1:] if argv is None else argv)])
    return run_sweep(spec, out, args.address, command)
