"""Gymnasium registration of the steinrl tasks and name resolution for the CLI.

Executed on ``import steinrl.envs``. Our tasks are registered as ``steinrl/<Name>-v0``: the
numpy tasks of :data:`SHORT_NAMES` with a single-env ``entry_point`` and a
``vector_entry_point``; the MuJoCo variants of :data:`MUJOCO_NAMES` (``SparseHalfCheetah``,
``EpisodicHopper``, ``EpisodicWalker2d``) with an ``entry_point`` only (Gymnasium's vector modes
run them, as any MuJoCo id; the episodic ones add their reward wrapper through the spec's
``additional_wrappers``, which ``gymnasium.make`` applies outside its ``TimeLimit``). Any other
Gymnasium id (e.g. ``"CartPole-v1"``, ``"InvertedDoublePendulum-v5"``) is passed through to
Gymnasium.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym

from steinrl.errors import ConfigError

from .core import DEFAULT_MAX_EPISODE_STEPS, NO_STEP_LIMIT
from .episodic_mujoco import EPISODIC_TASKS, episodic_wrapper_spec

NAMESPACE = "steinrl"

#: Short task name -> registered Gymnasium id.
SHORT_NAMES: dict[str, str] = {
    "Cartpole": f"{NAMESPACE}/Cartpole-v0",
    "CartpoleSwingUp": f"{NAMESPACE}/CartpoleSwingUp-v0",
    "DoublePendulum": f"{NAMESPACE}/DoublePendulum-v0",
    "CartpoleRllab": f"{NAMESPACE}/CartpoleRllab-v0",
    "CartpoleSwingUpRllab": f"{NAMESPACE}/CartpoleSwingUpRllab-v0",
}

_ENTRY_POINTS: dict[str, tuple[str, str]] = {
    "Cartpole": ("steinrl.envs.cartpole:CartpoleEnv", "steinrl.envs.cartpole:CartpoleVectorEnv"),
    "CartpoleSwingUp": ("steinrl.envs.cartpole:CartpoleSwingUpEnv", "steinrl.envs.cartpole:CartpoleSwingUpVectorEnv"),
    "DoublePendulum": (
        "steinrl.envs.double_pendulum:DoublePendulumEnv",
        "steinrl.envs.double_pendulum:DoublePendulumVectorEnv",
    ),
    "CartpoleRllab": (
        "steinrl.envs.cartpole_rllab:CartpoleRllabEnv",
        "steinrl.envs.cartpole_rllab:CartpoleRllabVectorEnv",
    ),
    "CartpoleSwingUpRllab": (
        "steinrl.envs.cartpole_rllab:CartpoleSwingUpRllabEnv",
        "steinrl.envs.cartpole_rllab:CartpoleSwingUpRllabVectorEnv",
    ),
}


#: steinrl's MuJoCo task variants, short name -> registered id: Gymnasium envs (no numpy vector
#: entry point, no torch twin), built on a Gymnasium MuJoCo task (envs/sparse_mujoco.py,
#: envs/episodic_mujoco.py).
MUJOCO_NAMES: dict[str, str] = {
    "SparseHalfCheetah": f"{NAMESPACE}/SparseHalfCheetah-v1",
    "EpisodicHopper": f"{NAMESPACE}/EpisodicHopper-v0",
    "EpisodicWalker2d": f"{NAMESPACE}/EpisodicWalker2d-v0",
}

#: Entry point, time limit and ``reward_threshold`` of each :data:`MUJOCO_NAMES` task
#: (SparseHalfCheetah: HalfCheetah-v5's 1000 steps; a return of 1 or more can only come from steps
#: past the goal, the actions' cost being >= 0: the goal reached. The episodic tasks: Hopper-v5's and
#: Walker2d-v5's own env and 1000 steps; 2000: a step pays at most 1 for staying healthy plus its
#: forward travel / 0.008 s, so a return of 2000 needs >= 8 m forward, standing 1000 steps ~1000).
_MUJOCO_ENTRY_POINTS: dict[str, tuple[str, int, float]] = {
    "SparseHalfCheetah": ("steinrl.envs.sparse_mujoco:SparseHalfCheetahEnv", 1000, 1.0),
    **{short: (entry_point, 1000, 2000.0) for short, (_, entry_point) in EPISODIC_TASKS.items()},
}


class UnknownEnvError(ConfigError):
    """Raised for an env name that is neither a steinrl short name / id nor a registered
    Gymnasium id."""


def register_envs() -> None:
    """Register the tasks of :data:`SHORT_NAMES` and :data:`MUJOCO_NAMES` with Gymnasium (idempotent)."""
    for short, env_id in SHORT_NAMES.items():
        if env_id in gym.registry:
            continue
        entry_point, vector_entry_point = _ENTRY_POINTS[short]
        gym.register(
            id=env_id,
            entry_point=entry_point,
            vector_entry_point=vector_entry_point,
            max_episode_steps=DEFAULT_MAX_EPISODE_STEPS,
        )
    for short, env_id in MUJOCO_NAMES.items():
        if env_id not in gym.registry:
            entry_point, limit, threshold = _MUJOCO_ENTRY_POINTS[short]
            wrappers = (episodic_wrapper_spec(),) if short in EPISODIC_TASKS else ()
            gym.register(id=env_id, entry_point=entry_point, max_episode_steps=limit, reward_threshold=threshold,
                         additional_wrappers=wrappers)


def is_steinrl_env(name: str) -> bool:
    """True for a steinrl short name (``"Cartpole"``) or id (``"steinrl/Cartpole-v0"``)."""
    return name in SHORT_NAMES or name in SHORT_NAMES.values()


def short_name(env: str) -> str:
    """The short name of a steinrl id (``steinrl/SparseHalfCheetah-v1`` -> ``SparseHalfCheetah``);
    any other name as it is."""
    return next((short for short, env_id in {**SHORT_NAMES, **MUJOCO_NAMES}.items() if env == env_id), env)


def resolve_env_id(name: str) -> str:
    """Gymnasium id for ``name``: a short name maps to ``steinrl/<Name>-v0``; our ids and
    any id in ``gymnasium.registry`` pass through.

    :raises UnknownEnvError: anything else (the message lists the valid names).
    """
    if name in SHORT_NAMES:
        return SHORT_NAMES[name]
    if name in MUJOCO_NAMES:
        return MUJOCO_NAMES[name]
    if name in gym.registry:
        return name
    names = {**SHORT_NAMES, **MUJOCO_NAMES}
    candidates = list(names) + list(gym.registry)
    close = difflib.get_close_matches(str(name), candidates, n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownEnvError(
        f"Unknown environment {name!r}.{hint} Valid short names: {', '.join(names)} "
        f"(ids {', '.join(names.values())}); any id registered with Gymnasium "
        "(e.g. 'CartPole-v1', 'Pendulum-v1', 'InvertedDoublePendulum-v5') also works."
    )


def _raised_in(exc: BaseException, packages: tuple[str, ...]) -> bool:
    """True if ``exc``'s traceback passes through one of ``packages`` (site-packages folders)."""
    tb = exc.__traceback__
    while tb is not None:
        parts = Path(tb.tb_frame.f_code.co_filename).parts
        if any(p in parts for p in packages):
            return True
        tb = tb.tb_next
    return False


@contextlib.contextmanager
def _missing_dependency(env_id: str) -> Iterator[None]:
    """An env whose simulator is not installed (MuJoCo, Box2D, ...), or whose MuJoCo cannot load
    the OpenGL backend ``MUJOCO_GL`` names (MuJoCo loads it on import), raises one clear ConfigError."""
    try:
        yield
    except gym.error.DependencyNotInstalled as exc:
        extra = ' (pip install "steinrl[mujoco]")' if "mujoco" in str(exc).lower() else ""
        raise ConfigError(f"{env_id} needs a simulator that is not installed{extra}: "
                          f"{' '.join(str(exc).split())}") from None
    except Exception as exc:
        gl = os.environ.get("MUJOCO_GL")
        if not gl or not _raised_in(exc, ("mujoco", "OpenGL")):
            raise
        from .rendering import GL_HINT

        why = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        raise ConfigError(f"{env_id}: MuJoCo cannot load the OpenGL backend MUJOCO_GL={gl} ({why}); "
                          f"{GL_HINT}") from None


#: What MuJoCo's compiler says about Gymnasium's own model files that a user can do nothing about
#: (HalfCheetah's and Ant's XML set ``settotalmass``, deprecated since MuJoCo 3.3): dropped while
#: :func:`make` and :func:`make_vec` build a MuJoCo env (it was printed once per env built).
QUIET_MUJOCO_WARNINGS = ("compiler attribute 'settotalmass' is deprecated",)


@contextlib.contextmanager
def _quiet_mujoco_model_warnings(env_id: str) -> Iterator[None]:
    """While a MuJoCo env of ``env_id`` is built: MuJoCo's warnings of
    :data:`QUIET_MUJOCO_WARNINGS` dropped, every other one passed on (to the handler set before,
    or printed as ``WARNING: ...`` on stderr); MuJoCo's own handler is back afterwards. MuJoCo
    prints from C (not Python's ``warnings``), so this is its ``mju_user_warning`` hook, held
    only for the build. Other envs: nothing."""
    entry = getattr(gym.spec(env_id), "entry_point", "")
    if "mujoco" not in str(entry):
        yield
        return
    try:
        import mujoco
    except ImportError:  # Gymnasium says what to install
        yield
        return
    previous = mujoco.get_mju_user_warning()

    def handler(message: str) -> None:
        if any(text in message for text in QUIET_MUJOCO_WARNINGS):
            return
        if previous is not None:
            previous(message)
        else:
            print(f"WARNING: {message}", file=sys.stderr)

    mujoco.set_mju_user_warning(handler)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


#: ``vectorization_mode`` values of :func:`make_vec` besides Gymnasium's own.
VECTORIZATION_MODES = ("auto", "sync", "async", "envpool")


def make_vec(
    name: str, num_envs: int, *, vectorization_mode: str | None = None, **kwargs: Any
) -> gym.vector.VectorEnv:
    """Vector env of ``num_envs`` copies of ``name`` (short name or any Gymnasium id).

    Our tasks use their native numpy vector env (``vectorization_mode=
    "vector_entry_point"`` unless overridden); other ids default to ``"sync"``.
    ``"envpool"`` runs a MuJoCo v5 id on EnvPool (:mod:`steinrl.envs.envpool`, the
    ``steinrl[envpool]`` extra); ``"auto"`` does so where EnvPool is installed and runs
    the id, and otherwise takes the default. ``kwargs`` go to the env constructor (e.g.
    ``max_episode_steps``, ``render_mode``).

    :raises ConfigError: ``"envpool"`` where EnvPool is not installed or does not run the id.
    """
    env_id = resolve_env_id(name)
    default_mode = "vector_entry_point" if is_steinrl_env(env_id) else "sync"
    mode = vectorization_mode or default_mode
    if mode == "warp":
        raise ConfigError(f"vectorization warp runs {env_id} as torch tensors on a device "
                          "(steinrl.envs.warp_mujoco.make_warp_vec), not as a Gymnasium vector env")
    if mode in ("auto", "envpool"):
        from .envpool import (
            ENVPOOL_TASKS,
            EnvPoolVectorEnv,
            envpool_installed,
            envpool_supports,
        )

        if envpool_supports(env_id, kwargs) and envpool_installed():
            return EnvPoolVectorEnv(env_id, num_envs, **kwargs)
        if mode == "envpool":
            why = (f"runs the MuJoCo ids {', '.join(ENVPOOL_TASKS)} (without render_mode or other options)"
                   if envpool_installed() else 'is not installed (pip install "steinrl[envpool]")')
            raise ConfigError(f"vectorization envpool cannot run {env_id}: EnvPool {why}; "
                              "use vectorization auto, sync or async")
        mode = default_mode
    with _missing_dependency(env_id), _quiet_mujoco_model_warnings(env_id):
        return gym.make_vec(env_id, num_envs, vectorization_mode=mode, **kwargs)


def make(name: str, **kwargs: Any) -> gym.Env:
    """Single env for ``name`` (short name or any Gymnasium id) through ``gymnasium.make``.

    ``max_episode_steps`` (a ``gymnasium.make`` argument, used for its ``TimeLimit``
    wrapper) is also applied to our envs' own truncation counter, so that e.g. 1000
    really gives 1000-step episodes (``-1``: no limit).
    """
    env_id = resolve_env_id(name)
    with _missing_dependency(env_id), _quiet_mujoco_model_warnings(env_id):
        env = gym.make(env_id, **kwargs)
    limit = kwargs.get("max_episode_steps")
    if limit is not None and is_steinrl_env(env_id):
        env.unwrapped.max_episode_steps = int(limit) if limit > 0 else NO_STEP_LIMIT
    return env


register_envs()
