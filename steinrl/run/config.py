"""Run configuration: one typed dataclass, resolved from YAML files and the command line.

Resolution order (later wins):

1. the dataclass defaults below (the papers' settings, S²VGD table 3 / SVPG code);
2. ``configs/<env>.yaml`` if it exists (per-task paper settings, e.g. 100 iterations
   for Cartpole);
3. any ``--config FILE`` given on the command line;
4. explicit flags (``--particles``, ``--seed``, ...) and ``--set key=value``.

Every key in a YAML file must be a field of :class:`Config`; an unknown key or a value
of the wrong type raises :class:`ConfigError` naming the key and the file.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import difflib
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from steinrl.errors import ConfigError

#: Directory holding the per-task YAML files (the repository's configs/, installed as steinrl.configs).
CONFIG_DIR = Path(str(importlib.resources.files("steinrl.configs")))


@dataclass
class Config:
    """Everything a training run needs. Defaults are the papers' RL settings."""

    algo: str = "s2vgd-a2c"
    """Algorithm ``<update>-<estimator>``, e.g. ``s2vgd-a2c`` (see ``steinrl.run.algos``)."""
    env: str = "CartpoleSwingUp"
    """Task: a steinrl short name (Cartpole, CartpoleSwingUp, DoublePendulum) or any Gymnasium id."""
    seed: int = 0
    """Seed for parameter init, action noise and env resets."""
    device: str = "cpu"
    """Torch device for particles, kernel and update (``cpu``, ``cuda``, ``cuda:1``)."""
    threads: int = 1
    """Torch intra-op CPU threads (0 = torch's default). The ops are small: 1 is fastest."""

    # --- sampling -----------------------------------------------------------------
    particles: int = 16
    """Number of policy particles M."""
    iterations: int = 1000
    """Number of SVGD iterations (one batch of env steps per particle each)."""
    batch_size: int = 5000
    """Env steps per particle per iteration (at least; whole episodes are kept)."""
    envs_per_particle: int = 10
    """Parallel envs per particle E; all M x E envs step together."""
    horizon: int = 500
    """Maximum episode length (time-limit truncation, not termination)."""
    whole_episodes: bool = True
    """Whole episodes (the SVPG code's rllab sampler): a particle's envs start new
    episodes only while its steps so far are below batch_size, and every episode runs to
    its end, so none is cut by the batch boundary. If false, every env runs exactly
    ceil(batch_size / envs_per_particle) steps and cut episodes are bootstrapped (A2C) or
    treated as ended (REINFORCE)."""
    vectorization: str = "sync"
    """How Gymnasium ids that are not ours are vectorised: ``sync`` (one process; best
    for cheap envs and few cores) or ``async`` (a process per env). Our tasks always use
    their numpy vector env."""
    normalize_obs: bool = False
    """Normalise observations by running mean / std (useful for MuJoCo tasks)."""

    # --- objective ----------------------------------------------------------------
    discount: float = 0.99
    """Discount factor gamma."""
    gae_lambda: float = 0.97
    """GAE(lambda) for the a2c estimator."""
    normalize_advantages: bool = True
    """Standardise advantages (or returns, for REINFORCE) per particle batch."""
    temperature: float = 10.0
    """SVPG temperature alpha: the target is exp(J / alpha) p(theta)."""

    # --- particles and prior ------------------------------------------------------
    policy_hidden: list[int] = field(default_factory=lambda: [25, 10])
    """Hidden layer sizes of the policy MLP."""
    activation: str = "tanh"
    """Hidden activation of policy and value MLPs (tanh, relu, elu)."""
    log_std_init: float = 0.0
    """Initial state-independent log standard deviation (Gaussian policies)."""
    log_std_in_kernel: bool = False
    """Gaussian policies: if true, the log-std is part of theta and moved by SVGD with the
    weights (the SVPG code). With its flat prior the repulsive term then drives the
    particles' log-stds apart without bound (the mean policy std climbs again late in
    training and returns fall; see the README's learning benchmark); so by default each
    particle's log-std follows its own policy gradient through a separate Adam and the
    kernel sees the network weights."""
    output_gain: float = 1.0
    """Init gain of the policy's output layer (1: Glorot, as the SVPG code)."""
    householder_k: int = 1
    """Householder reflections per side K (householder prior; 0 = VMG)."""
    householder_scales: bool = True
    """Householder prior: learn the diagonal scales Λ1, Λ2 of W = P Λ1 C Λ2 Qᵀ (S²VGD
    paper, eq. 10-14). False fixes them at 1 (W = P C Qᵀ, as the S²VGD code's RL
    experiments build it); see the README's learning benchmark for what each does."""
    prior: str = "gaussian"
    """Prior on each parameter group: ``gaussian`` (fixed variance) or ``invgamma``
    (hierarchical, variance marginalised in closed form)."""
    prior_variance: float = 0.01
    """Variance of the ``gaussian`` prior."""
    prior_a: float = 1.0
    """Shape a of the Inv-Gamma hyper-prior (``invgamma``)."""
    prior_b: float = 0.1
    """Scale b of the Inv-Gamma hyper-prior (``invgamma``)."""
    prior_weight: float | None = None
    """Weight w of log p(theta) in the target J/alpha + w log p. J is a per-step mean
    over the particle's batch, so the default (None) is w = 1 / (alpha * batch_size): the
    prior counts as one step's worth of tempered likelihood. (With w = 1 a variance-0.01
    prior outweighs the policy gradient by >1e4 and the policy never learns.)"""

    # --- SVGD update --------------------------------------------------------------
    optimizer: str = "adam"
    """Optimizer applied to -phi: ``adam`` (SVPG code) or ``rmsprop`` (S²VGD paper)."""
    lr: float = 5e-3
    """Step size epsilon of the particle update."""
    bandwidth: str | float = "svpg"
    """RBF bandwidth h: ``svpg`` (median d^2 / 2 log(M+1)), ``s2vgd`` (med^2 / log M), or a number."""
    proximal_weight: float = 0.0
    """Weight of the S²VGD code's proximal term, which pulls each particle towards its
    position before the last update (``steinrl.core.svgd.proximal_gradient``; 0.1 in that
    code; 0 = off, as in the SVPG code)."""
    lr_halving_every: int = 0
    """If > 0, halve lr every this many iterations after ``lr_halving_start`` (S²VGD code)."""
    lr_halving_start: int = 200
    """First iteration at which lr halving may apply."""

    # --- critic (a2c) -------------------------------------------------------------
    critic: str = "mlp"
    """The a2c baseline: ``mlp`` (a value network per particle, regressed on the GAE
    targets) or ``linear`` (rllab's LinearFeatureBaseline per particle, as the S²VGD code's
    actor-critic: least squares on [obs, obs², t, t², t³, 1] fitted to discounted returns)."""
    value_hidden: list[int] = field(default_factory=lambda: [32, 32])
    """Hidden layer sizes of each particle's value MLP."""
    value_lr: float = 3e-3
    """Adam step size of the value networks."""
    value_steps: int = 10
    """Value-regression steps per iteration."""
    value_minibatch: int = 1024
    """Samples per particle in each value-regression step."""

    # --- bookkeeping --------------------------------------------------------------
    logdir: str = "runs"
    """Root directory; a run lives in ``<logdir>/<env>/<algo>/<run_name>``."""
    run_name: str | None = None
    """Name of the run directory (default ``seed<seed>-<timestamp>``)."""
    checkpoint_every: int = 50
    """Write a checkpoint every this many iterations (and at the end)."""
    progress: bool = True
    """Show a progress bar."""
    tensorboard: bool = True
    """Write TensorBoard event files."""

    # ------------------------------------------------------------------------------
    def validate(self) -> "Config":
        """Raise :class:`ConfigError` for values that cannot work; returns self."""
        positive_int = ["particles", "iterations", "batch_size", "envs_per_particle", "horizon",
                        "checkpoint_every", "value_steps", "value_minibatch"]
        for name in positive_int:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        positive = ["lr", "value_lr", "temperature", "prior_variance", "prior_a", "prior_b"]
        for name in positive:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{name} must be a positive number, got {value}")
        if not 0.0 <= self.discount <= 1.0:
            raise ConfigError(f"discount must be in [0, 1], got {self.discount}")
        if not 0.0 <= self.gae_lambda <= 1.0:
            raise ConfigError(f"gae_lambda must be in [0, 1], got {self.gae_lambda}")
        if self.threads < 0:
            raise ConfigError(f"threads must be >= 0, got {self.threads}")
        if self.householder_k < 0:
            raise ConfigError(f"householder_k must be >= 0, got {self.householder_k}")
        if self.prior_weight is not None and not (math.isfinite(self.prior_weight) and self.prior_weight >= 0):
            raise ConfigError(f"prior_weight must be >= 0 or null, got {self.prior_weight}")
        if not (math.isfinite(self.proximal_weight) and self.proximal_weight >= 0):
            raise ConfigError(f"proximal_weight must be >= 0, got {self.proximal_weight}")
        if self.lr_halving_every < 0:
            raise ConfigError(f"lr_halving_every must be >= 0, got {self.lr_halving_every}")
        if any(h < 1 for h in self.policy_hidden) or any(h < 1 for h in self.value_hidden):
            raise ConfigError("hidden layer sizes must be >= 1")
        _check_choice("prior", self.prior, ["gaussian", "invgamma"])
        _check_choice("critic", self.critic, ["mlp", "linear"])
        _check_choice("optimizer", self.optimizer, ["adam", "rmsprop"])
        _check_choice("vectorization", self.vectorization, ["sync", "async"])
        _check_choice("activation", self.activation, ["tanh", "relu", "elu"])
        if isinstance(self.bandwidth, str):
            _check_choice("bandwidth", self.bandwidth, ["svpg", "s2vgd"])
        elif not self.bandwidth > 0:
            raise ConfigError(f"bandwidth must be 'svpg', 's2vgd' or a positive number, got {self.bandwidth}")
        # Imported here: algos imports this module.
        from steinrl.run.algos import parse_algo

        parse_algo(self.algo)
        return self

    @property
    def effective_prior_weight(self) -> float:
        if self.prior_weight is None:
            return 1.0 / (self.temperature * self.batch_size)
        return float(self.prior_weight)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check_choice(key: str, value: str, choices: list[str]) -> None:
    if value not in choices:
        raise ConfigError(f"{key} must be one of {', '.join(choices)}; got {value!r}")


FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(Config)}


def _unknown_key(key: str, where: str) -> ConfigError:
    close = difflib.get_close_matches(key, FIELDS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"unknown config key {key!r} in {where}{hint}; valid keys: {', '.join(FIELDS)}")


def _coerce(key: str, value: Any, where: str) -> Any:
    """Check ``value`` against the annotated type of field ``key`` (ints accepted as floats)."""
    hint = typing.get_type_hints(Config)[key]
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)

    def fits(t: Any, v: Any) -> bool:
        if t is type(None):
            return v is None
        origin = typing.get_origin(t)
        if origin is list:
            (item,) = typing.get_args(t)
            return isinstance(v, list) and all(fits(item, x) for x in v)
        if t is float:
            return isinstance(v, (int, float)) and not isinstance(v, bool)
        if t is int:
            return isinstance(v, int) and not isinstance(v, bool)
        return isinstance(v, t)

    for t in allowed:
        if fits(t, value):
            return float(value) if t is float else value
    names = " or ".join(getattr(t, "__name__", str(t)).replace("NoneType", "null") for t in allowed)
    raise ConfigError(f"config key {key!r} in {where} must be {names}, got {value!r}")


def apply_overrides(cfg: Config, overrides: dict[str, Any], where: str) -> Config:
    """Return a copy of ``cfg`` with ``overrides`` applied after type checks."""
    clean = {}
    for key, value in overrides.items():
        if key not in FIELDS:
            raise _unknown_key(key, where)
        clean[key] = _coerce(key, value, where)
    return dataclasses.replace(cfg, **clean)


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing or malformed file raises :class:`ConfigError`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"cannot parse {path}: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config keys, got {type(data).__name__}")
    return data


def parse_set(items: list[str]) -> dict[str, Any]:
    """Parse ``--set key=value`` items; values are read as YAML scalars (``1e-3``, ``true``, ``[25, 10]``)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {item!r}")
        try:
            out[key.strip()] = yaml.safe_load(raw)
        except yaml.YAMLError:
            raise ConfigError(f"--set {key}: cannot parse value {raw!r}") from None
    return out


def env_config_path(env: str) -> Path:
    """The per-task YAML file for ``env`` (``configs/<env>.yaml``; '/' in ids becomes '_')."""
    return CONFIG_DIR / f"{env.replace('/', '_')}.yaml"


def resolve_config(
    env: str | None = None,
    config_files: list[str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Config:
    """Build and validate the run config (see module docstring for the order)."""
    cfg = Config()
    overrides = dict(overrides or {})
    env = env or overrides.get("env") or cfg.env
    env_file = env_config_path(env)
    if env_file.is_file():
        cfg = apply_overrides(cfg, load_yaml(env_file), str(env_file))
    for path in config_files or []:
        cfg = apply_overrides(cfg, load_yaml(path), str(path))
    cfg = apply_overrides(cfg, {"env": env, **overrides}, "the command line")
    return cfg.validate()


def save_config(cfg: Config, path: str | Path, extra: dict[str, Any] | None = None) -> None:
    """Write the resolved config (plus ``extra`` metadata under ``_meta``) as YAML."""
    data = cfg.to_dict()
    if extra:
        data["_meta"] = extra
    Path(path).write_text(yaml.safe_dump(data, sort_keys=False))


def read_run_config(path: str | Path) -> Config:
    """Load a run directory's ``config.yaml`` (ignoring its ``_meta`` block)."""
    data = load_yaml(path)
    data.pop("_meta", None)
    return apply_overrides(Config(), data, str(path)).validate()
