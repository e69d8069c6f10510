"""The ``steinrl`` command: ``steinrl train ...``, ``steinrl evaluate ...`` (:mod:`steinrl.run.evaluate_cli`)
and ``steinrl sweep ...`` (:mod:`steinrl.run.sweep`).

``train.py`` and ``evaluate.py`` at the repository root are thin wrappers of the two
subcommands. Exit codes: 0 done; 2 a user error (one line ``error: ...``, nothing
written); 3 training diverged (a non-finite value; the last good checkpoint is kept);
130 stopped by Ctrl-C and 143 by SIGTERM (both after saving a checkpoint).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from steinrl.errors import ConfigError
from steinrl.run.cli_base import EXIT_DIVERGED, EXIT_SIGINT, EXIT_SIGTERM, EXIT_USAGE, Parser, run_cli
from steinrl.run.evaluate_cli import evaluate_main, evaluate_parser  # noqa: F401 (steinrl.run.cli's API)
from steinrl.run.sweep import sweep_main

if TYPE_CHECKING:
    from steinrl.run.config import Config
    from steinrl.run.loop import RunDirectory
    from steinrl.run.trainer import Trainer


# --- train ------------------------------------------------------------------------------
def train_parser(prog: str = "steinrl train") -> argparse.ArgumentParser:
    from steinrl.bandits.tasks import BANDIT_TASKS
    from steinrl.envs import MUJOCO_NAMES, SHORT_NAMES
    from steinrl.run.algos import algo_names

    p = Parser(
        prog=prog,
        description="Train M particles jointly by Stein variational gradient descent.",
        epilog="Algorithms: " + ", ".join(algo_names()) + ". Tasks: " + ", ".join([*SHORT_NAMES, *MUJOCO_NAMES])
               + " or any Gymnasium id (RL algorithms); " + ", ".join(BANDIT_TASKS.names())
               + " (bandit algorithms, <method>-ts and the baselines). Config keys: docs/config.md"
               " (--set section.key=value).",
    )
    p.add_argument("--algo", help="<method>-<estimator>, e.g. s2vgd-a2c")
    p.add_argument("--env", help="task name (default CartpoleSwingUp)")
    p.add_argument("--preset", help="a shipped preset (configs/presets/<name>.yaml)")
    p.add_argument("--particles", type=int, help="number of particles M")
    p.add_argument("--iterations", type=int, help="RL: number of iterations (with --resume: the new total)")
    p.add_argument("--total-steps", type=int, metavar="N", help="RL: stop after N env steps, all particles together "
                   "(SB3's total_timesteps; replaces --iterations)")
    p.add_argument("--max-seconds", type=float, metavar="S", help="RL: stop after the iteration that passes S seconds "
                   "of training")
    p.add_argument("--rounds", type=int, help="bandits: number of rounds (with --resume: the new total)")
    p.add_argument("--seed", type=int, help="random seed")
    p.add_argument("--seeds", metavar="S1,S2,...", help="RL: train several seeds as one batch (continuing or cut "
                   "sampling: the swing-ups' default, or --preset fast), each with its own run directory "
                   "<run-name>-seed<S>")
    p.add_argument("--temperature", type=float, metavar="α",
                   help="the temperature α of the target exp(J / α) p(θ) (RL)")
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


def _claim_new_run(cfg) -> RunDirectory:  # noqa: F821
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
             "total_steps": args.total_steps, "max_seconds": args.max_seconds, "seed": args.seed,
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
        trainer = Trainer(cfg, _parse_seeds(args.seeds))  # validates everything before any directory is made
        run_dirs = _claim_seed_runs(trainer)
        note = trainer.algorithm.job.batch_note(cfg, trainer.seeds) if len(trainer.seeds) > 1 else None
        if note:
            print(note, file=sys.stderr)
        return run_training(trainer, run_dirs, command)
    if not args.resume:
        cfg = load_config(args.algo, args.env, overrides, args.config, args.preset)
        trainer = Trainer(cfg)
        return run_training(trainer, _claim_new_run(cfg), command)
    run_dir = RunDirectory(Path(args.resume))
    extra = sorted(set(overrides) - {"iterations", "rounds", "total_steps", "max_seconds", "run.progress"}) + [
        f"--{n}" for n in ("env", "config", "preset") if getattr(args, n)]
    if extra:
        raise ConfigError(f"--resume continues a run with its saved config; cannot also set {', '.join(extra)} "
                          "(only --iterations, --rounds, --total-steps or --max-seconds, the new totals, may change)")
    if not (run_dir.path / "config.yaml").is_file():
        raise ConfigError(f"cannot resume: {run_dir.path} has no config.yaml")
    if not run_dir.checkpoint.is_file():
        raise ConfigError(f"cannot resume: {run_dir.path} has no checkpoint.pt (it stopped before its first one; "
                          "start it again with its original command, in its config.yaml)")
    cfg = read_run_config(run_dir.path / "config.yaml").replace(overrides, "the command line")
    trainer = Trainer(cfg)
    trainer.restore(run_dir.checkpoint)
    if trainer.done:
        raise ConfigError(f"{run_dir.path} is done ({trainer.iteration} iterations); --iterations, --rounds, "
                          "--total-steps and --max-seconds are totals: give more to continue")
    what_next = "wait for it to finish or stop, then resume it again (a run directory is trained by one process)"
    return run_training(trainer, run_dir.acquire(what_next), command)


def _parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(f"--seeds takes distinct integers separated by commas, e.g. 0,1,2; got {text!r}") from None
    if len(set(seeds)) != len(seeds) or any(not 0 <= s < 2**32 for s in seeds):
        raise ConfigError(f"--seeds takes distinct integers in [0, 2**32) separated by commas; got {text!r}")
    return seeds


def _claim_seed_runs(trainer: Trainer) -> list[RunDirectory]:
    """One locked run directory per seed of ``trainer`` (``<run-name>-seed<S>`` under a given name)."""
    from contextlib import ExitStack

    name = trainer.config.run.run_name
    with ExitStack() as stack:  # release the ones claimed so far if a later one fails
        run_dirs = []
        for i, cfg in enumerate(trainer.seed_configs):
            if name is not None and len(trainer.seeds) > 1:
                cfg = trainer.seed_configs[i] = cfg.replace({"run.run_name": f"{name}-seed{cfg.seed}"})
            run_dirs.append(stack.enter_context(_claim_new_run(cfg)))
        stack.pop_all()
    return run_dirs


def run_training(trainer: Trainer, run_dirs: RunDirectory | list[RunDirectory], command: str = "") -> int:
    """Train ``trainer`` to the end, each seed in its locked run directory (``run_dirs``: one
    :class:`~steinrl.run.loop.RunDirectory` per seed, or one for a single seed) with metrics,
    checkpoints, progress and signal handling; returns the exit code."""
    from contextlib import ExitStack

    import steinrl
    from steinrl.errors import NonFiniteError
    from steinrl.run.best import BestCheckpointCallback
    from steinrl.run.labels import settings_lines
    from steinrl.run.loop import CheckpointCallback, GracefulStop, MetricsCallback, ProgressCallback, fit

    run_dirs = list(run_dirs) if isinstance(run_dirs, (list, tuple)) else [run_dirs]
    cfg, seeds = trainer.config, trainer.seeds
    start, first = time.perf_counter(), trainer.iteration
    checkpoints = [CheckpointCallback(d.checkpoint, cfg.run.checkpoint_every, i) for i, d in enumerate(run_dirs)]
    # an iteration's held-out evaluation (best.pt) before the checkpoint that covers it
    callbacks = [cb for i, d in enumerate(run_dirs) for cb in (
        MetricsCallback(d.path, cfg.run.tensorboard, i),
        BestCheckpointCallback(d.path, cfg.run.best_every, cfg.run.best_episodes, i), checkpoints[i])]
    desc = f"{cfg.algo} {cfg.env}" + (f" seeds {','.join(map(str, seeds))}" if len(seeds) > 1 else "")
    callbacks.append(ProgressCallback(cfg.run.progress, cfg.run.log_every, desc, seed=seeds[0] if len(seeds) > 1
                                      else None))
    with ExitStack() as stack, GracefulStop() as stop:
        for i, d in enumerate(run_dirs):
            stack.enter_context(d)
            seed_cfg = trainer.seed_configs[i]
            meta = {"steinrl_version": steinrl.__version__, "command": command, "run_name": d.path.name,
                    "config_sources": list(seed_cfg.sources), "started": datetime.now().isoformat(timespec="seconds")}
            if len(seeds) > 1:
                meta["seed_batch"] = seeds
            d.write_config(seed_cfg, meta)
            print(f"run directory{f' (seed {seed_cfg.seed})' if len(seeds) > 1 else ''}: {d.path}", file=sys.stderr)
        if cfg.run.progress:  # what took effect (not with --no-progress)
            print(*settings_lines(cfg, ("run", "seed") if len(seeds) > 1 else ("run",)), sep="\n", file=sys.stderr)
        try:
            status = fit(trainer, callbacks, stop)
        except NonFiniteError as exc:
            kept = [f"iteration {ck.saved_iteration} in {d.path}" for ck, d in zip(checkpoints, run_dirs)
                    if ck.saved_iteration is not None]
            where = f"the last good checkpoint ({'; '.join(kept)}) is kept" if kept else "no checkpoint was written"
            numbered = f" (particles numbered across the seeds, {cfg.particles} per seed)" if len(seeds) > 1 else ""
            print(f"error: training diverged: {exc}{numbered}; {where}", file=sys.stderr)
            return EXIT_DIVERGED
        finally:
            trainer.close()
    seconds = time.perf_counter() - start
    for i, d in enumerate(run_dirs):
        _summary(trainer, d.path, trainer.seed_configs[i], status, first, seconds)
    if status == "interrupted":
        return EXIT_SIGTERM if stop.signal == 15 else EXIT_SIGINT
    return 0


def train(cfg: Config) -> Path:
    """Programmatic ``steinrl train``: a new run directory for ``cfg``, trained to the end; returns it.

    Raises :class:`ConfigError` if the run could not finish (interrupted or diverged).
    """
    from steinrl.run.trainer import Trainer

    run_dir = _claim_new_run(cfg)
    code = run_training(Trainer(cfg), run_dir, "steinrl.run.cli.train")
    if code != 0:
        raise ConfigError(f"training in {run_dir.path} did not finish (exit code {code})")
    return run_dir.path


def _summary(trainer: Trainer, run_dir: Path, cfg: Config, status: str, first: int, seconds: float) -> None:
    """The end of a run: its status, iterations and headline. Iterations are counted from 1, as in
    the progress bar and log lines (iteration k is metrics.jsonl's row k - 1)."""
    from steinrl.run.best import read_best
    from steinrl.run.logger import read_metrics
    from steinrl.run.loop import planned_iterations

    result = trainer.job.summary(read_metrics(run_dir))
    planned = planned_iterations(trainer)
    if status == "interrupted":
        print(f"stopped after iteration {trainer.iteration} of {planned}; checkpoint saved. "
              f"Continue with: steinrl train --resume {run_dir}", file=sys.stderr)
    best = read_best(run_dir)
    held = (f"; held-out best {best['score']:.1f} at iteration {best['iteration']} (best.pt)"
            if best and isinstance(best.get("score"), (int, float)) else "")
    print(f"{status}: {trainer.iteration - first} iterations (now {trainer.iteration} of {planned}) in "
          f"{seconds:.1f} s; {result}{held}; run {run_dir}\n"
          f"next: tensorboard --logdir {cfg.run.logdir}  |  steinrl evaluate {run_dir}"
          + (f"  |  steinrl evaluate {run_dir} --checkpoint best" if held else ""), file=sys.stderr)


# --- the steinrl command ----------------------------------------------------------------
def compare_main(argv: Sequence[str] | None = None, prog: str = "steinrl compare") -> int:
    """``steinrl compare``: :func:`steinrl.run.compare.compare_main` (imported on use, as the trainer is)."""
    from steinrl.run.compare import compare_main as main

    return main(argv, prog=prog)


COMMANDS = {"train": train_main, "evaluate": evaluate_main, "sweep": sweep_main, "compare": compare_main}


def steinrl_main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: steinrl {train,evaluate,sweep,compare} ...\n\n"
              "  train     train particles (steinrl train --help)\n"
              "  evaluate  score runs, plot curves, record videos (steinrl evaluate --help)\n"
              "  sweep     algos x envs x seeds on Ray Tune (steinrl sweep --help)\n"
              "  compare   evaluate runs side by side, steinrl's and SB3's (steinrl compare --help)")
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
