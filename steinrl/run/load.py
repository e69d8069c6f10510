"""Loading a saved run: its config and its acting policy, read safely.

The run stack knows no checkpoint layout of any job: the job class of the run's algorithm
builds its policy from the checkpoint's ``job`` entry (:meth:`steinrl.job.Job.load_policy`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from steinrl.errors import ConfigError
from steinrl.run.algos import parse_algo
from steinrl.run.checkpoint import CHECKPOINT_NAME, CheckpointError, load_checkpoint
from steinrl.run.config import Config, read_run_config, resolve_saved

__all__ = ["load_run"]


def load_run(path: str | Path, device: str = "cpu") -> tuple[Config, Any, Path]:
    """``(config, policy, checkpoint path)`` of a run directory or a checkpoint file.

    ``policy`` is what the run's job loads from the checkpoint (RL: the policy ensemble of
    M particles, in eval mode on ``device``), or None for a run without a policy to act
    with (bandits: such a run is scored by its logged metrics).
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"no run directory or checkpoint at {path}")
    ckpt_path = path / CHECKPOINT_NAME if path.is_dir() else path
    if path.is_dir() and not ckpt_path.exists():
        if (path / "config.yaml").is_file():
            raise ConfigError(f"{path} has no {CHECKPOINT_NAME}: the run stopped before its first checkpoint")
        raise ConfigError(f"{path} is not a run directory (no config.yaml, no {CHECKPOINT_NAME}); to plot the runs "
                          "under a folder, use --plot FILE --plot-only")
    state = load_checkpoint(ckpt_path, map_location=device)
    cfg_file = ckpt_path.parent / "config.yaml"
    if cfg_file.is_file():
        cfg = read_run_config(cfg_file)
    elif isinstance(state.get("config"), dict):
        cfg = resolve_saved(state["config"], str(ckpt_path))
    else:
        raise CheckpointError(f"{ckpt_path} is not a steinrl checkpoint (no config)")
    cfg = cfg.replace({"device": device})
    job_state = state.get("job")
    if not isinstance(job_state, dict):
        raise CheckpointError(f"{ckpt_path} is not a steinrl checkpoint (no job state)")
    try:
        policy = parse_algo(cfg.algo).job.load_policy(cfg, job_state, device)
    except ConfigError:  # the user's setting (e.g. a renderer), said as it is
        raise
    except (KeyError, TypeError, RuntimeError, ValueError) as exc:
        raise CheckpointError(f"{ckpt_path} does not hold this run's policy "
                              f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
    return cfg, policy, ckpt_path
