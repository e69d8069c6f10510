"""Scoring trained ensembles: load a run, act as one policy, run whole episodes, plot curves.

Acting modes of an ensemble (:class:`EnsembleActor`):

- ``particle``: one fixed particle (``particle=i``);
- ``sample``: a particle drawn at random at the start of each episode (Thompson-style);
- ``mean``: the particles' mean action (Box) or their mean action probabilities (Discrete).

Each is deterministic (a particle's mean action / arg-max) or stochastic (its sampled action).
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from steinrl import envs
from steinrl.errors import ConfigError
from steinrl.rl.policy import EnsemblePolicy
from steinrl.rl.rollout import Sampler
from steinrl.rl.tasks import HostTask

if TYPE_CHECKING:
    from steinrl.rl.settings import RLConfig

ACT_MODES = ("particle", "sample", "mean")


class EnsembleActor:
    """An :class:`EnsemblePolicy` acting as one policy on a flat batch of observations.

    :param policy: the trained ensemble.
    :param mode: ``particle``, ``sample`` or ``mean`` (see module docstring).
    :param particle: the particle used in ``particle`` mode.
    :param deterministic: mean action / arg-max instead of a sampled action.
    :param seed: seeds the particle draws (``sample``) and the action noise.
    """

    def __init__(self, policy: EnsemblePolicy, mode: str = "sample", particle: int = 0,
                 deterministic: bool = True, seed: int | None = None):
        if mode not in ACT_MODES:
            raise ValueError(f"unknown acting mode {mode!r}; choices: {', '.join(ACT_MODES)}")
        if not 0 <= particle < policy.num_particles:
            raise ValueError(f"particle must be in [0, {policy.num_particles}), got {particle}")
        self.policy, self.mode, self.particle, self.deterministic = policy, mode, particle, deterministic
        device = next(policy.parameters()).device
        self.generator = torch.Generator(device=device)
        self.generator.manual_seed(int(seed) if seed is not None else int(torch.seed() & 0x7FFFFFFF))
        self.assigned: Tensor | None = None  # (B,) particle per env in ``sample`` mode

    def reset(self, starting: np.ndarray | Tensor | None = None, batch_size: int | None = None) -> None:
        """Draw a new particle for the envs whose episode starts (``starting`` (B,) bool; None = all)."""
        if self.mode != "sample":
            return
        M = self.policy.num_particles
        device = self.generator.device
        if starting is None or self.assigned is None or len(self.assigned) != len(starting):
            n = batch_size if starting is None else len(starting)
            self.assigned = torch.randint(M, (n,), generator=self.generator, device=device)
            return
        starting = torch.as_tensor(starting, dtype=torch.bool, device=device)
        if not bool(starting.any()):
            return
        fresh = torch.randint(M, (len(starting),), generator=self.generator, device=device)
        self.assigned = torch.where(starting, fresh, self.assigned)

    @torch.no_grad()
    def act(self, obs: Tensor) -> Tensor:
        """Actions ``(B, ...)`` (as the head makes them) for raw observations ``(B, obs_dim)``."""
        policy, head = self.policy, self.policy.head
        B = obs.shape[0]
        if self.mode == "particle":  # one particle's weights, its own outputs (1, B, out)
            i = slice(self.particle, self.particle + 1)
            out = policy.outputs(obs, [(W[i], b[i]) for W, b in policy.dense()])[0]
            scale = None if head.scale() is None else head.scale()[self.particle]
        elif self.mode == "sample":  # every particle on the shared batch, each env its own particle's row
            if self.assigned is None or len(self.assigned) != B:
                self.reset(batch_size=B)
            out = policy.outputs(obs)[self.assigned, torch.arange(B, device=obs.device)]  # (B, out)
            scale = None if head.scale() is None else head.scale()[self.assigned, 0]
        else:
            return head.ensemble_action(policy.outputs(obs), self.deterministic, self.generator)
        noise = None if self.deterministic else head.draw_noise((B,), self.generator, obs.device)
        return head.sample(out, noise, scale)


def run_episodes(cfg: RLConfig, policy: EnsemblePolicy, episodes: int, *, mode: str = "per-particle",
                 deterministic: bool = True, seed: int = 0) -> dict[str, Any]:
    """Run ``episodes`` whole episodes per particle (``per-particle``) or for the ensemble.

    :param mode: ``per-particle``, or an :class:`EnsembleActor` mode (``sample``, ``mean``).
    :return: ``{"returns": list, "lengths": list}``; for ``per-particle`` one list per particle.
    """
    M = policy.num_particles
    device = next(policy.parameters()).device
    with torch.no_grad():
        if mode == "per-particle":
            venv = envs.make_vec(cfg.env, M * episodes, max_episode_steps=cfg.rollout.horizon)
            sampler = Sampler(HostTask(venv), M, episodes, cfg.rollout.horizon)
            gen = torch.Generator(device=device).manual_seed(seed)
            dense = policy.dense()

            def act(obs: np.ndarray, t: int) -> np.ndarray:
                noise = None if deterministic else policy.head.draw_noise((M, episodes), gen, device)
                return policy.sample(torch.from_numpy(obs).to(device), noise, dense).cpu().numpy()

            returns, lengths = sampler.collect(act, 1, seed=seed).episodes()
            venv.close()
            return {"returns": [r.tolist() for r in returns], "lengths": [n.tolist() for n in lengths]}
        actor = EnsembleActor(policy, mode=mode, deterministic=deterministic, seed=seed)
        actor.reset(batch_size=episodes)
        venv = envs.make_vec(cfg.env, episodes, max_episode_steps=cfg.rollout.horizon)
        sampler = Sampler(HostTask(venv), 1, episodes, cfg.rollout.horizon)
        returns, lengths = sampler.collect(
            lambda obs, t: actor.act(torch.from_numpy(obs[0]).to(device)).cpu().numpy()[None], 1, seed=seed).episodes()
        venv.close()
        return {"returns": returns[0].tolist(), "lengths": lengths[0].tolist()}


def evaluate(cfg: RLConfig, policy: EnsemblePolicy, episodes: int = 10, *, deterministic: bool = True,
             seed: int = 0) -> dict[str, Any]:
    """Scores of every particle and of the ensemble (sampled particle, mean action).

    :raises ConfigError: ``policy`` is not a particle ensemble (an SB3 run's policy: ``steinrl
        compare`` scores those, with steinrl's ensembles, by SB3's evaluate_policy).
    """
    if not isinstance(policy, EnsemblePolicy):
        raise ConfigError(f"{cfg.algo} runs have one policy, not particles: score them with steinrl compare RUN "
                          "(SB3's evaluate_policy, side by side with steinrl's runs)")
    if episodes < 1:
        raise ConfigError(f"episodes must be >= 1, got {episodes}")
    per = run_episodes(cfg, policy, episodes, mode="per-particle", deterministic=deterministic, seed=seed)
    rows = []
    for i, (rets, lens) in enumerate(zip(per["returns"], per["lengths"])):
        rows.append({"who": f"particle {i}", "mean": float(np.mean(rets)), "std": float(np.std(rets)),
                     "min": float(np.min(rets)), "max": float(np.max(rets)), "mean_length": float(np.mean(lens)),
                     "episodes": len(rets)})
    for mode in ("sample", "mean"):
        res = run_episodes(cfg, policy, episodes, mode=mode, deterministic=deterministic, seed=seed)
        rets = res["returns"]
        rows.append({"who": f"ensemble ({mode})", "mean": float(np.mean(rets)), "std": float(np.std(rets)),
                     "min": float(np.min(rets)), "max": float(np.max(rets)),
                     "mean_length": float(np.mean(res["lengths"])), "episodes": len(rets)})
    best = max(rows[:-2], key=lambda r: r["mean"])
    return {"env": cfg.env, "algo": cfg.algo, "episodes_per_row": episodes, "deterministic": deterministic,
            "seed": seed, "rows": rows, "best_particle": best["who"],
            "max_particle_mean": best["mean"]}


def format_table(result: dict[str, Any]) -> str:
    """A plain-text table of :func:`evaluate`'s rows."""
    head = f"{'policy':<18} {'mean':>10} {'std':>9} {'min':>10} {'max':>10} {'len':>7} {'eps':>5}"
    lines = [f"{result['algo']} on {result['env']} ({'deterministic' if result['deterministic'] else 'stochastic'}"
             f" actions, seed {result['seed']})", head, "-" * len(head)]
    for r in result["rows"]:
        lines.append(f"{r['who']:<18} {r['mean']:>10.2f} {r['std']:>9.2f} {r['min']:>10.2f} {r['max']:>10.2f} "
                     f"{r['mean_length']:>7.1f} {r['episodes']:>5d}")
    return "\n".join(lines)


def _video_env(cfg: RLConfig, seed: int) -> tuple[Any, Any, np.ndarray]:
    """The env of a video reset with ``seed``, its first observation and first frame
    (``(H, W, 3)`` uint8). A MuJoCo task without a display renders through EGL or OSMesa,
    whichever is installed (:func:`steinrl.envs.rendering.use_headless_gl`), from its model's
    tracking camera where it has one (:func:`steinrl.envs.rendering.track_body`).

    :raises ConfigError: MuJoCo cannot render here (one line naming ``MUJOCO_GL``).
    """
    from steinrl.envs.rendering import GL_HINT, track_body, use_headless_gl

    env = envs.make(cfg.env, render_mode="rgb_array", max_episode_steps=cfg.rollout.horizon)
    mujoco = hasattr(env.unwrapped, "mujoco_renderer")
    if mujoco:
        track_body(env)  # the camera follows the body (Gymnasium's stays put: a cheetah runs out of the frame)
    try:
        backend = use_headless_gl() if mujoco else None
    except ConfigError:
        env.close()
        raise
    obs, _ = env.reset(seed=seed)
    try:
        with warnings.catch_warnings(record=True) as caught:  # GLFW warns (no DISPLAY, ...) before it fails
            warnings.simplefilter("always")
            frame = env.render()
    except Exception as exc:  # MuJoCo's GL failures come as FatalError, RuntimeError, ImportError, ...
        with contextlib.suppress(Exception):
            env.close()
        if not mujoco:
            raise
        notes = [f"{w.category.__name__}: {w.message}" for w in caught[:1]] + [f"{type(exc).__name__}: {exc}"]
        why = " ".join("; ".join(notes).split())
        raise ConfigError(f"cannot render {cfg.env} with MUJOCO_GL={backend or 'glfw'} ({why[:300]}); "
                          f"{GL_HINT}") from None
    for w in caught:  # a render that worked keeps its warnings
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return env, obs, frame


def check_video(cfg: RLConfig) -> None:
    """Render one frame of ``cfg.env`` as :func:`record_video` would (a failing renderer stops
    here, before anything is written). :raises ConfigError: as :func:`record_video`."""
    env, _, _ = _video_env(cfg, 0)
    env.close()


def record_video(cfg: RLConfig, policy: EnsemblePolicy, out: str | Path, *, mode: str = "best",
                 particle: int = 0, seed: int = 0, fps: int | None = None) -> int:
    """Record one deterministic episode to ``out`` (.gif via Pillow; .mp4 via imageio[ffmpeg]).
    A MuJoCo task without a display renders through EGL or OSMesa (see :func:`_video_env`).

    :param mode: ``best`` (particle ``particle``), ``sample`` or ``mean``.
    :return: the number of frames written.
    :raises ConfigError: MuJoCo cannot render here, or the video format cannot be written.
    """
    out = Path(out)
    env, obs, frame = _video_env(cfg, seed)
    actor = EnsembleActor(policy, mode="particle" if mode == "best" else mode, particle=particle, seed=seed)
    actor.reset(batch_size=1)
    device = next(policy.parameters()).device
    frames = [frame]
    done = False
    while not done:
        a = actor.act(torch.as_tensor(obs, dtype=torch.float32, device=device).unsqueeze(0))[0].cpu().numpy()
        if a.ndim == 0:
            a = int(a)
        elif hasattr(env.action_space, "low"):
            a = np.clip(a, env.action_space.low, env.action_space.high)
        obs, _, term, trunc, _ = env.step(a)
        frames.append(env.render())
        done = term or trunc
    fps = fps or env.metadata.get("render_fps", 30)
    env.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() == ".gif":
        from PIL import Image

        images = [Image.fromarray(f) for f in frames]
        images[0].save(out, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    else:
        try:
            import imageio.v2 as imageio

            imageio.mimsave(out, frames, fps=fps)
        except (ImportError, ValueError, RuntimeError) as exc:
            raise ConfigError(f"cannot write {out.suffix} video ({exc}); install imageio[ffmpeg] "
                              "(pip install 'imageio[ffmpeg]') or use a .gif file name") from None
    return len(frames)
