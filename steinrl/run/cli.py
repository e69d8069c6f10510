"""Command-line front ends of ``train.py`` and ``evaluate.py``.

User errors (unknown algo/env/config key, invalid value, missing file) print one line
``error: ...`` and exit with code 2, without a traceback.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from steinrl.run.algos import ALGOS

EXIT_USAGE = 2
EXIT_NONFINITE = 1
EXIT_INTERRUPTED = 130


def _user_errors() -> tuple[type[BaseException], ...]:
    import steinrl.envs as envs
    from steinrl.run.config import ConfigError

    return (ConfigError, envs.UnknownEnvError, FileNotFoundError)


def run_cli(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None) -> int:
    """Run ``main`` mapping user errors to ``error: ...`` and exit code 2."""
    try:
        return main(argv)
    except _user_errors() as exc:
        msg = exc.args[0] if exc.args else str(exc)
        print(f"error: {msg}", file=sys.stderr)
        return EXIT_USAGE


def train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train.py",
        description="Train M policy particles jointly by Stein variational policy gradient.",
        epilog="Algorithms: " + ", ".join(ALGOS) + ". Envs: Cartpole, CartpoleSwingUp, DoublePendulum, "
               "or any Gymnasium id (e.g. CartPole-v1, Pendulum-v1, InvertedDoublePendulum-v5).",
    )
    p.add_argument("--algo", help="<update>-<estimator>, e.g. s2vgd-a2c (default from config)")
    p.add_argument("--env", help="task name (default CartpoleSwingUp)")
    p.add_argument("--particles", type=int, help="number of particles M")
    p.add_argument("--iterations", type=int, help="number of iterations")
    p.add_argument("--seed", type=int, help="random seed")
    p.add_argument("--temperature", type=float, help="SVPG temperature alpha")
    p.add_argument("--device", help="torch device: cpu or cuda")
    p.add_argument("--logdir", help="root of run directories (default runs)")
    p.add_argument("--run-name", help="run directory name (default seed<seed>-<timestamp>)")
    p.add_argument("--config", action="append", default=[], metavar="FILE", help="extra YAML config (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="set_",
                   help="override any config key, e.g. --set lr=1e-3 (repeatable)")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its checkpoint (its own config)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def train_main(argv: Sequence[str] | None = None) -> int:
    from steinrl.rl.agent import NonFiniteError
    from steinrl.run.config import ConfigError, parse_set, resolve_config
    from steinrl.run.trainer import Trainer, TrainingInterrupted

    args = train_parser().parse_args(argv)
    flags = {
        "algo": args.algo, "particles": args.particles, "iterations": args.iterations, "seed": args.seed,
        "temperature": args.temperature, "device": args.device, "logdir": args.logdir, "run_name": args.run_name,
    }
    overrides = {k: v for k, v in flags.items() if v is not None}
    overrides.update(parse_set(args.set_))
    if args.no_progress:
        overrides["progress"] = False
    if args.resume:
        extra = sorted(set(overrides) - {"iterations", "progress"}) + (["--env"] if args.env else []) + (
            ["--config"] if args.config else [])
        if extra:
            raise ConfigError(f"--resume continues a run with its saved config; cannot also set {', '.join(extra)} "
                              "(only --iterations may change)")
        trainer = Trainer(None, resume=args.resume, iterations=args.iterations)
        if args.no_progress:
            trainer.cfg.progress = False
    else:
        cfg = resolve_config(args.env, args.config, overrides)
        trainer = Trainer(cfg)
    print(f"run directory: {trainer.run_dir}", file=sys.stderr)
    try:
        run_dir = trainer.train()
    except TrainingInterrupted as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INTERRUPTED
    except NonFiniteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_NONFINITE
    print(f"done: {run_dir}  (tensorboard --logdir {trainer.cfg.logdir}; python evaluate.py {run_dir})",
          file=sys.stderr)
    return 0


def train_entry() -> None:
    sys.exit(run_cli(train_main))


def evaluate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="evaluate.py",
        description="Score trained runs (every particle and the ensemble), plot learning curves, record a video.",
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directory or checkpoint file (several for --plot)")
    p.add_argument("--episodes", type=int, default=10, help="episodes per particle and per ensemble mode")
    p.add_argument("--stochastic", action="store_true", help="sample actions instead of mean / arg-max")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation episodes")
    p.add_argument("--device", default="cpu", help="torch device")
    p.add_argument("--json", metavar="FILE", help="where to write the scores (default <run>/evaluation.json)")
    p.add_argument("--plot", metavar="PNG", help="draw learning curves of all RUNs (mean ± std across seeds)")
    p.add_argument("--key", default="rollout/ep_rew_max_particle", help="TensorBoard scalar to plot")
    p.add_argument("--plot-only", action="store_true", help="only plot, do not run episodes")
    p.add_argument("--video", metavar="FILE", help="record one episode (.mp4 needs imageio[ffmpeg]; .gif works)")
    p.add_argument("--video-mode", default="best", choices=["best", "sample", "mean"],
                   help="who acts in the video: the best particle, a sampled particle, or the mean action")
    return p


def evaluate_main(argv: Sequence[str] | None = None) -> int:
    import json
    from pathlib import Path

    from steinrl.run.config import ConfigError
    from steinrl.rl.evaluation import evaluate, format_table, load_run, record_video
    from steinrl.run.plotting import plot_runs

    args = evaluate_parser().parse_args(argv)
    if args.episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {args.episodes}")
    if args.plot:
        plot_runs(args.runs, args.plot, key=args.key)
        print(f"wrote {args.plot}")
    if args.plot_only:
        return 0
    if len(args.runs) > 1 and (args.json or args.video):
        raise ConfigError("--json and --video take a single RUN")
    for run in args.runs:
        cfg, policy, ckpt = load_run(run, device=args.device)
        result = evaluate(cfg, policy, args.episodes, deterministic=not args.stochastic, seed=args.seed)
        result["checkpoint"] = str(ckpt)
        print(format_table(result))
        out = Path(args.json) if args.json else ckpt.parent / "evaluation.json"
        out.write_text(json.dumps(result, indent=2))
        print(f"wrote {out}")
        if args.video:
            best = int(result["best_particle"].split()[-1])
            record_video(cfg, policy, args.video, mode=args.video_mode, particle=best, seed=args.seed)
            print(f"wrote {args.video}")
    return 0
