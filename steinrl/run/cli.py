"""The ``steinrl`` command: ``steinrl train ...`` and ``steinrl evaluate ...``.

``train.py`` and ``evaluate.py`` at the repository root are thin wrappers of the two
subcommands. Exit codes: 0 done; 2 a user error (one line ``error: ...``, nothing
written); 3 training diverged (a non-finite value; the last good checkpoint is kept);
130 stopped by Ctrl-C and 143 by SIGTERM (both after saving a checkpoint).
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Sequence

from steinrl.errors import ConfigError
from steinrl.run.cli_base import EXIT_DIVERGED, EXIT_SIGINT, EXIT_SIGTERM, EXIT_USAGE, _Parser, run_cli
from steinrl.run.sweep import sweep_main

# --- train ------------------------------------------------------------------------------
def train_parser(prog: str = "steinrl train") -> argparse.ArgumentParser:
    from steinrl.run.algos import algo_names

    p = _Parser(
        prog=prog,
        description="Train M particles jointly by Stein variational gradient descent.",
        epilog="Algorithms: " + ", ".join(algo_names()) + ". Envs: Cartpole, CartpoleSwingUp, DoublePendulum, or "
               "any Gymnasium id. Config keys: docs/config.md (--set section.key=value).",
    )
    p.add_argument("--algo", help="<method>-<estimator>, e.g. s2vgd-a2c")
    p.add_argument("--env", help="task name (default CartpoleSwingUp)")
    p.add_argument("--preset", help="a shipped preset (configs/presets/<name>.yaml)")
    p.add_argument("--particles", type=int, help="number of particles M")
    p.add_argument("--iterations", type=int, help="RL: number of iterations (with --resume: the new total)")
    p.add_argument("--rounds", type=int, help="bandits: number of rounds (with --resume: the new total)")
    p.add_argument("--seed", type=int, help="random seed")
    p.add_argument("--seeds", metavar="S1,S2,...", help="RL: train several seeds as one batch (torch envs; continuing "
                   "or cut sampling), each with its own run directory <run-name>-seed<S>")
    p.add_argument("--temperature", type=float, help="SVPG temperature alpha")
    p.add_argument("--device", help="torch device: cpu or cuda")
    p.add_argument("--logdir", help="root of run directories (default runs)")
    p.add_argument("--run-name", help="run directory name (default seed<seed>-<timestamp>)")
    p.add_argument("--config", action="append", default=[], metavar="FILE", help="extra YAML config (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="set_",
                   help="override any config key, e.g. --set update.lr=1e-3 (repeatable)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint (its own config)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar: a log line every run.log_every")
    return p


def _run_path(cfg) -> tuple[Path, bool]:
    """The run directory of ``cfg`` and whether its name was chosen automatically."""
    auto = cfg.run.run_name is None
    name = cfg.run.run_name or f"seed{cfg.seed}-{datetime.now():%Y%m%d-%H%M%S}"
    if Path(name).name != name or name in (".", ".."):
        raise ConfigError(f"--run-name must be a plain directory name (no '/' or '..'), got {name!r}")
    return Path(cfg.run.logdir) / cfg.env.replace("/", "_") / cfg.algo / name, auto


def _claim_new_run(cfg) -> "RunDirectory":  # noqa: F821
    """Create and lock a fresh run directory for ``cfg``. A directory in use (locked) or
    holding a run raises :class:`ConfigError`, unless the name is automatic: then the next
    free ``<name>-<k>`` is taken. A start that was killed before its first checkpoint (a
    ``config.yaml``, no ``checkpoint.pt``) holds nothing to resume: it is started again."""
    from steinrl.run.loop import RunDirectory, RunDirectoryInUse

    path, auto = _run_path(cfg)
    for k in range(100):
        candidate = RunDirectory(path if k == 0 else path.with_name(f"{path.name}-{k}"))
        if candidate.path.exists() and not auto:
            if (candidate.path / RunDirectory.LOCK_NAME).exists():
                candidate.acquire().release()  # raises, naming the PID, if another process holds it
            if candidate.checkpoint.exists():
                raise ConfigError(f"run directory {candidate.path} already holds a run; resume it with --resume "
                                  f"{candidate.path} or choose another --run-name")
            if (candidate.path / "config.yaml").exists():
                claimed = candidate.acquire()
                claimed.clear_aborted_start()
                print(f"note: {candidate.path} held a start that never saved a checkpoint; starting it again",
                      file=sys.stderr)
                return claimed
        if auto and candidate.path.exists():
            continue
        try:
            return candidate.acquire()
        except RunDirectoryInUse:
            if not auto:
                raise
    raise ConfigError(f"no free run directory name next to {path}")


def train_main(argv: Sequence[str] | None = None, prog: str = "steinrl train") -> int:
    from steinrl.run.config import load_config, parse_set, read_run_config
    from steinrl.run.loop import RunDirectory
    from steinrl.run.trainer import Trainer

    args = train_parser(prog).parse_args(argv)
    flags = {"algo": args.algo, "particles": args.particles, "iterations": args.iterations, "rounds": args.rounds,
             "seed": args.seed,
             "temperature": args.temperature, "device": args.device, "run.logdir": args.logdir,
             "run.run_name": args.run_name}
    overrides = {k: v for k, v in flags.items() if v is not None}
    overrides.update(parse_set(args.set_))
    if args.no_progress:
        overrides["run.progress"] = False
    command = " ".join([prog, *(sys.argv[1:] if argv is None else argv)])
    if args.seeds is not None:
        if args.seed is not None or args.resume:
            raise ConfigError("--seeds cannot be combined with --seed or --resume (resume each seed's run directory "
                              "on its own)")
        cfg = load_config(args.algo, args.env, overrides, args.config, args.preset)
        return _train_seeds(cfg, _parse_seeds(args.seeds), command)
    if not args.resume:
        cfg = load_config(args.algo, args.env, overrides, args.config, args.preset)
        trainer = Trainer(cfg)
        return run_training(trainer, _claim_new_run(cfg), command)
    run_dir = RunDirectory(Path(args.resume))
    extra = sorted(set(overrides) - {"iterations", "rounds", "run.progress"}) + [
        f"--{n}" for n in ("env", "config", "preset") if getattr(args, n)]
    if extra:
        raise ConfigError(f"--resume continues a run with its saved config; cannot also set {', '.join(extra)} "
                          "(only --iterations or --rounds, the new total, may change)")
    if not (run_dir.path / "config.yaml").is_file():
        raise ConfigError(f"cannot resume: {run_dir.path} has no config.yaml")
    if not run_dir.checkpoint.is_file():
        raise ConfigError(f"cannot resume: {run_dir.path} has no checkpoint.pt (it stopped before its first one; "
                          "start it again with its original command, in its config.yaml)")
    cfg = read_run_config(run_dir.path / "config.yaml").replace(overrides, "the command line")
    trainer = Trainer(cfg)
    trainer.restore(run_dir.checkpoint)
    if trainer.done:
        raise ConfigError(f"{run_dir.path} already has {trainer.iteration} iterations; --iterations (--rounds) is the "
                          f"total: give more to continue")
    return run_training(trainer, run_dir.acquire(), command)


def _parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(f"--seeds takes distinct integers separated by commas, e.g. 0,1,2; got {text!r}") from None
    if len(set(seeds)) != len(seeds) or any(not 0 <= s < 2**32 for s in seeds):
        raise ConfigError(f"--seeds takes distinct integers in [0, 2**32) separated by commas; got {text!r}")
    return seeds


def _train_seeds(cfg, seeds: list[int], command: str) -> int:  # noqa: ANN001
    """``steinrl train --seeds``: the seeds as one batch, each seed in its own locked run directory."""
    from contextlib import ExitStack

    import steinrl
    from steinrl.errors import NonFiniteError
    from steinrl.run.loop import CheckpointCallback, GracefulStop, MetricsCallback, ProgressCallback, fit_seeds
    from steinrl.run.seed_batch import SeedBatchTrainer

    import torch

    batch = SeedBatchTrainer(cfg, seeds)  # validates everything before any directory is made
    if cfg.run.threads > 0:
        torch.set_num_threads(cfg.run.threads)
    name = cfg.run.run_name
    with ExitStack() as stack:
        run_dirs = []
        for view in batch.views:
            if name is not None:
                view.config = view.config.replace({"run.run_name": f"{name}-seed{view.config.seed}"})
            run_dirs.append(stack.enter_context(_claim_new_run(view.config)))
        checkpoints = [CheckpointCallback(d.checkpoint, cfg.run.checkpoint_every) for d in run_dirs]
        callbacks = [[MetricsCallback(d.path, cfg.run.tensorboard), ck] for d, ck in zip(run_dirs, checkpoints)]
        callbacks[0].append(ProgressCallback(cfg.run.progress, cfg.run.log_every,
                                             f"{cfg.algo} {cfg.env} seeds {','.join(map(str, seeds))}"))
        for view, d in zip(batch.views, run_dirs):
            d.write_config(view.config, {"steinrl_version": steinrl.__version__, "command": command,
                                         "run_name": d.path.name, "seed_batch": seeds,
                                         "config_sources": list(view.config.sources),
                                         "started": datetime.now().isoformat(timespec="seconds")})
            print(f"run directory (seed {view.config.seed}): {d.path}", file=sys.stderr)
        start = time.perf_counter()
        with GracefulStop() as stop:
            try:
                status = fit_seeds(batch, callbacks, stop)
            except NonFiniteError as exc:
                print(f"error: training diverged: {exc} (particles numbered across the seeds, {cfg.particles} per "
                      "seed); the last good checkpoint of each seed, if any, is kept", file=sys.stderr)
                return EXIT_DIVERGED
            finally:
                batch.close()
        seconds = time.perf_counter() - start
        for view, d in zip(batch.views, run_dirs):
            _summary(view, d.path, view.config, status, 0, seconds)
    if status == "interrupted":
        return EXIT_SIGTERM if stop.signal == 15 else EXIT_SIGINT
    return 0


def run_training(trainer, run_dir, command: str = "") -> int:  # noqa: ANN001
    """Train ``trainer`` to the end in the locked ``run_dir`` (a :class:`~steinrl.run.loop.RunDirectory`)
    with metrics, checkpoints, progress and signal handling; returns the exit code."""
    import steinrl
    from steinrl.errors import NonFiniteError
    from steinrl.run.loop import CheckpointCallback, GracefulStop, MetricsCallback, ProgressCallback, fit

    import torch

    cfg = trainer.config
    if cfg.run.threads > 0:
        torch.set_num_threads(cfg.run.threads)
    meta = {"steinrl_version": steinrl.__version__, "command": command, "run_name": run_dir.path.name,
            "config_sources": list(cfg.sources), "started": datetime.now().isoformat(timespec="seconds")}
    start, first = time.perf_counter(), trainer.iteration
    checkpoints = CheckpointCallback(run_dir.checkpoint, cfg.run.checkpoint_every)
    callbacks = [MetricsCallback(run_dir.path, cfg.run.tensorboard), checkpoints,
                 ProgressCallback(cfg.run.progress, cfg.run.log_every, f"{cfg.algo} {cfg.env}")]
    print(f"run directory: {run_dir.path}", file=sys.stderr)
    with run_dir, GracefulStop() as stop:
        run_dir.write_config(cfg, meta)
        try:
            status = fit(trainer, callbacks, stop)
        except NonFiniteError as exc:
            saved = checkpoints.saved_iteration
            kept = (f"the last good checkpoint (iteration {saved}) is kept in {run_dir.path}" if saved is not None
                    else "no checkpoint was written")
            print(f"error: training diverged: {exc}; {kept}", file=sys.stderr)
            return EXIT_DIVERGED
        finally:
            trainer.close()
    _summary(trainer, run_dir.path, cfg, status, first, time.perf_counter() - start)
    if status == "interrupted":
        return EXIT_SIGTERM if stop.signal == 15 else EXIT_SIGINT
    return 0


def train(cfg) -> Path:  # noqa: ANN001
    """Programmatic ``steinrl train``: a new run directory for ``cfg``, trained to the end; returns it.

    Raises :class:`ConfigError` if the run could not finish (interrupted or diverged).
    """
    from steinrl.run.trainer import Trainer

    run_dir = _claim_new_run(cfg)
    code = run_training(Trainer(cfg), run_dir, "steinrl.run.cli.train")
    if code != 0:
        raise ConfigError(f"training in {run_dir.path} did not finish (exit code {code})")
    return run_dir.path


def _summary(trainer, run_dir: Path, cfg, status: str, first: int, seconds: float) -> None:
    from steinrl.run.logger import read_metrics

    result = trainer.job.summary(read_metrics(run_dir))
    if status == "interrupted":
        print(f"stopped after iteration {trainer.iteration}; checkpoint saved. Continue with: "
              f"steinrl train --resume {run_dir}", file=sys.stderr)
    print(f"{status}: {trainer.iteration - first} iterations ({trainer.iteration}/{trainer.job.num_steps}) in "
          f"{seconds:.1f} s; {result}; run {run_dir}\n"
          f"next: tensorboard --logdir {cfg.run.logdir}  |  steinrl evaluate {run_dir}", file=sys.stderr)


# --- evaluate ---------------------------------------------------------------------------
def evaluate_parser(prog: str = "steinrl evaluate") -> argparse.ArgumentParser:
    p = _Parser(prog=prog, description="Score trained runs (every particle and the ensemble), plot learning curves, "
                                       "record a video.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directory or checkpoint file (several for --plot)")
    p.add_argument("--episodes", type=int, default=10, help="episodes per particle and per ensemble mode")
    p.add_argument("--stochastic", action="store_true", help="sample actions instead of mean / arg-max")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation episodes")
    p.add_argument("--device", default="cpu", help="torch device")
    p.add_argument("--json", metavar="FILE", help="where to write the scores (default <run>/evaluation.json)")
    p.add_argument("--plot", metavar="PNG", help="draw learning curves of all RUNs (mean ± std across seeds)")
    p.add_argument("--key", help="scalar to plot (default: the run's headline metric: RL "
                                 "rollout/ep_rew_max_particle, bandits bandit/cumulative_regret)")
    p.add_argument("--plot-only", action="store_true", help="only plot, do not run episodes")
    p.add_argument("--video", metavar="FILE", help="record one episode (.mp4 needs imageio[ffmpeg]; .gif works)")
    p.add_argument("--video-mode", default="best", choices=["best", "sample", "mean"],
                   help="who acts in the video: the best particle, a sampled particle, or the mean action")
    return p


def evaluate_main(argv: Sequence[str] | None = None, prog: str = "steinrl evaluate") -> int:
    import json

    from steinrl.rl.evaluation import evaluate, format_table, record_video
    from steinrl.run.load import load_run
    from steinrl.run.plotting import plot_runs
    from steinrl.run.trainer import check_device

    args = evaluate_parser(prog).parse_args(argv)
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    if args.seed < 0:
        raise ConfigError(f"--seed must be >= 0, got {args.seed}")
    check_device(args.device)
    if len(args.runs) > 1 and (args.json or args.video) and not args.plot_only:
        raise ConfigError("--json and --video take a single RUN")
    if args.json and Path(args.json).is_dir():
        raise ConfigError(f"--json {args.json} is a directory; give a file name")
    if args.plot:
        plot_runs(args.runs, args.plot, key=args.key)
        print(f"wrote {args.plot}")
    if args.plot_only:
        return 0
    for run in args.runs:
        if _evaluate_bandit_run(Path(run), args.json):
            continue
        cfg, policy, ckpt = load_run(run, device=args.device)
        result = evaluate(cfg, policy, args.episodes, deterministic=not args.stochastic, seed=args.seed)
        result["checkpoint"] = str(ckpt)
        print(format_table(result))
        out = Path(args.json) if args.json else ckpt.parent / "evaluation.json"
        try:
            out.write_text(json.dumps(result, indent=2))
        except OSError as exc:
            raise ConfigError(f"cannot write {out}: {exc.strerror}") from None
        print(f"wrote {out}")
        if args.video:
            best = int(result["best_particle"].split()[-1])
            record_video(cfg, policy, args.video, mode=args.video_mode, particle=best, seed=args.seed)
            print(f"wrote {args.video}")
    return 0


def _evaluate_bandit_run(run: Path, json_path: str | None) -> bool:
    """A bandit run is scored by the rounds it played: print its summary; False for other runs."""
    import json

    from steinrl.run.algos import parse_algo
    from steinrl.run.config import read_run_config
    from steinrl.run.logger import read_metrics

    if not (run.is_dir() and (run / "config.yaml").is_file()):
        return False
    cfg = read_run_config(run / "config.yaml")
    job = parse_algo(cfg.algo).job
    if job.headline_metric != "bandit/cumulative_regret":
        return False
    rows = read_metrics(run)
    print(f"{cfg.algo} on {cfg.env}: {job.summary(rows)}")
    out = Path(json_path) if json_path else run / "evaluation.json"
    out.write_text(json.dumps({"env": cfg.env, "algo": cfg.algo, "seed": cfg.seed, **(rows[-1] if rows else {})},
                              indent=2))
    print(f"wrote {out}")
    return True


# --- the steinrl command ----------------------------------------------------------------
COMMANDS = {"train": train_main, "evaluate": evaluate_main, "sweep": sweep_main}


def steinrl_main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: steinrl {train,evaluate,sweep} ...\n\n  train     train particles (steinrl train --help)\n"
              "  evaluate  score runs, plot curves, record videos (steinrl evaluate --help)\n"
              "  sweep     algos x envs x seeds on Ray Tune (steinrl sweep --help)")
        return 0 if argv else EXIT_USAGE
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        raise ConfigError(f"unknown command {command!r}; commands: {', '.join(COMMANDS)}")
    return COMMANDS[command](rest)


def main() -> None:
    """Entry point of the ``steinrl`` console script."""
    sys.exit(run_cli(steinrl_main))


def script(command: str, prog: str) -> None:
    """Entry point of ``train.py`` / ``evaluate.py``: one subcommand under the script's name."""
    sys.exit(run_cli(lambda argv: COMMANDS[command](argv, prog=prog)))
