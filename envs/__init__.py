"""Vectorized Gymnasium versions of rllab's Box2D control tasks (see README).

``import steinrl.envs`` registers ``steinrl/Cartpole-v0``, ``steinrl/CartpoleSwingUp-v0`` and
``steinrl/DoublePendulum-v0`` (exact physics), and ``steinrl/CartpoleRllab-v0`` and
``steinrl/CartpoleSwingUpRllab-v0`` (with rllab's Box2D damping, for comparisons with the
papers) with Gymnasium, each with a single-env ``entry_point`` and a numpy
``vector_entry_point``, and the sparse-reward MuJoCo tasks ``steinrl/SparseHalfCheetah-v1``
(:mod:`steinrl.envs.sparse_mujoco`), ``steinrl/EpisodicHopper-v0`` and
``steinrl/EpisodicWalker2d-v0`` (:mod:`steinrl.envs.episodic_mujoco`: the return paid at the
episode's end), each an ``entry_point`` only: they need the ``mujoco`` extra::

    import steinrl.envs as envs
    vec = envs.make_vec("CartpoleSwingUp", num_envs=160)   # or any Gymnasium id
    obs, info = vec.reset(seed=0)                          # (160, 4) float32

Batched torch twins of the same tasks, on any device, are in :mod:`steinrl.envs.torch_tasks`
(``make_torch_vec``; not imported here).
"""

from .cartpole import (
    CartpoleEnv,
    CartpoleSwingUpEnv,
    CartpoleSwingUpVectorEnv,
    CartpoleVectorEnv,
)
from .cartpole_rllab import (
    CartpoleRllabEnv,
    CartpoleRllabVectorEnv,
    CartpoleSwingUpRllabEnv,
    CartpoleSwingUpRllabVectorEnv,
)
from .double_pendulum import DoublePendulumEnv, DoublePendulumVectorEnv
from .registration import (
    MUJOCO_NAMES,
    SHORT_NAMES,
    UnknownEnvError,
    is_steinrl_env,
    make,
    make_vec,
    resolve_env_id,
    short_name,
)

__all__ = [
    "MUJOCO_NAMES",
    "SHORT_NAMES",
    "CartpoleEnv",
    "CartpoleRllabEnv",
    "CartpoleRllabVectorEnv",
    "CartpoleSwingUpEnv",
    "CartpoleSwingUpRllabEnv",
    "CartpoleSwingUpRllabVectorEnv",
    "CartpoleSwingUpVectorEnv",
    "CartpoleVectorEnv",
    "DoublePendulumEnv",
    "DoublePendulumVectorEnv",
    "UnknownEnvError",
    "is_steinrl_env",
    "make",
    "make_vec",
    "resolve_env_id",
    "short_name",
]
