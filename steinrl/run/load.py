"""Loading a saved run: its config and its policy particles, read safely."""

from __future__ import annotations

from pathlib import Path

from steinrl import envs
from steinrl.errors import ConfigError
from steinrl.rl.agent import build_policy
from steinrl.rl.policy import EnsemblePolicy
from steinrl.run.checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint
from steinrl.run.config import Config, read_run_config, resolve

__all__ = ["load_run"]


def load_run(path: str | Path, device: str = "cpu") -> tuple[Config, EnsemblePolicy, Path]:
    """Load ``(config, policy, checkpoint path)`` from a run directory or a checkpoint file."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"no run directory or checkpoint at {path}")
    ckpt_path = path / CHECKPOINT_NAME if path.is_dir() else path
    state = load_checkpoint(ckpt_path, map_location=device)
    cfg_file = ckpt_path.parent / "config.yaml"
    if cfg_file.is_file():
        cfg = read_run_config(cfg_file)
    elif isinstance(state.get("config"), dict):
        cfg = resolve([(state["config"], str(ckpt_path))])
    else:
        raise CheckpointError(f"{ckpt_path} is not a steinrl checkpoint (no config)")
    cfg = cfg.replace({"device": device})
    single = envs.make(cfg.env)
    policy = build_policy(cfg, single.observation_space, single.action_space).to(device)
    single.close()
    try:
        policy.load_state_dict(state["job"]["agent"]["policy"])
    except (KeyError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{ckpt_path} does not hold this run's policy "
                              f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
    policy.eval()
    return cfg, policy, ckpt_path
