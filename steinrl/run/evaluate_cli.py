"""``steinrl evaluate RUN ...``: score trained runs, plot learning curves, record a video.

A run whose job loads a policy (:meth:`steinrl.job.Job.load_policy`; RL) is scored by
episodes of every particle and of the ensemble; a run whose job has none (bandits) is
scored by the metrics it logged. Every argument and every RUN is checked before anything
is written: a bad one is one line ``error: ...`` and exit 2.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from steinrl.errors import ConfigError
from steinrl.run.cli_base import Parser, output_file

if TYPE_CHECKING:
    from steinrl.run.config import Config

__all__ = ["evaluate_parser", "evaluate_main", "PLOT_SUFFIXES", "VIDEO_SUFFIXES"]

#: File types ``--plot`` writes (matplotlib's Agg backend, chosen by the suffix).
PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".eps", ".ps", ".tif", ".tiff", ".webp")
#: File types ``--video`` writes (.gif with Pillow; the others need imageio[ffmpeg]).
VIDEO_SUFFIXES = (".gif", ".mp4", ".webm", ".avi", ".mov")
MAX_EPISODES = 10**6


def evaluate_parser(prog: str = "steinrl evaluate") -> argparse.ArgumentParser:
    p = Parser(prog=prog, description="Score trained runs (every particle and the ensemble; bandit runs: the rounds "
                                      "they played), plot learning curves, record a video.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directory or checkpoint file (several, or folders of "
                                                          "runs, for --plot)")
    p.add_argument("--episodes", type=int, default=10, help="episodes per particle and per ensemble mode")
    p.add_argument("--stochastic", action="store_true", help="sample actions instead of mean / arg-max")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation episodes")
    p.add_argument("--device", default="cpu", help="torch device")
    p.add_argument("--json", metavar="FILE", help="where to write the scores (default <run>/evaluation.json; "
                                                  "with --checkpoint best, <run>/evaluation_best.json)")
    p.add_argument("--checkpoint", choices=("last", "best"), default="last",
                   help="which policy of each RUN directory: last (checkpoint.pt, default) or best (best.pt: the "
                        "iteration of its best held-out evaluation, run.best_every)")
    p.add_argument("--plot", metavar="PNG", help="draw learning curves of all RUNs (mean ± std across seeds, one "
                                                 "curve per algorithm and config)")
    p.add_argument("--key", help="scalar to plot (default: each run's headline metric: RL "
                                 "rollout/ep_rew_max_particle, bandits bandit/cumulative_regret)")
    p.add_argument("--plot-only", action="store_true", help="only plot, do not score the runs")
    p.add_argument("--video", metavar="FILE", help="record one episode (.mp4 needs imageio[ffmpeg]; .gif works)")
    p.add_argument("--video-mode", default="best", choices=["best", "sample", "mean"],
                   help="who acts in the video: the best particle, a sampled particle, or the mean action")
    return p


def _check_args(args: argparse.Namespace) -> None:
    from steinrl.run.trainer import check_device

    if not 1 <= args.episodes <= MAX_EPISODES:
        raise ConfigError(f"--episodes must be in [1, {MAX_EPISODES}], got {args.episodes}")
    if not 0 <= args.seed < 2**32:
        raise ConfigError(f"--seed must be in [0, 2**32), got {args.seed}")
    check_device(args.device)
    if args.plot_only and not args.plot:
        raise ConfigError("--plot-only needs --plot FILE")
    if len(args.runs) > 1 and (args.json or args.video) and not args.plot_only:
        raise ConfigError("--json and --video take a single RUN")
    if args.json:
        output_file(args.json, "--json")
    if args.plot:
        output_file(args.plot, "--plot", PLOT_SUFFIXES)
    if args.video:
        output_file(args.video, "--video", VIDEO_SUFFIXES)


def _held(path: Path) -> tuple[int, str]:
    """``(episodes per policy, what it held)`` of an earlier scores file (0 episodes: a bandit
    run's metrics, or a file that is not one)."""
    from datetime import datetime

    try:
        old = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        old = None
    when = f"written {datetime.fromtimestamp(path.stat().st_mtime):%Y-%m-%d %H:%M}"
    if not isinstance(old, dict) or not isinstance(old.get("episodes_per_row"), int):
        return 0, when
    actions = "deterministic" if old.get("deterministic", True) else "stochastic"
    return old["episodes_per_row"], f"{old['episodes_per_row']} episodes per policy, seed {old.get('seed')}, " \
        f"{actions}, {when}"


def _write_json(out: Path, data: dict[str, Any]) -> None:
    """Write the scores to ``out``. An earlier file there is replaced, with a line saying what it
    held, unless it scored more episodes per policy than these (a short evaluation for a video):
    then it is kept, and these go beside it as ``<name>-<N>ep.json``."""
    episodes = data.get("episodes_per_row", 0)
    if out.is_file():
        held, what = _held(out)
        if held > episodes:
            beside = out.with_name(f"{out.stem}-{episodes}ep{out.suffix}")
            print(f"kept {out} ({what}): these {episodes} episodes per policy go beside it")
            _write_json(beside, data)
            return
        print(f"replaced {out} ({what})")
    try:
        out.write_text(json.dumps(data, indent=2))
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror}") from None
    print(f"wrote {out}")


def _score_by_metrics(cfg: Config, run_dir: Path, json_path: str | None) -> None:
    """A run without a policy (bandits) is scored by what it logged: its job's summary line,
    and its last metrics row in the JSON file."""
    from steinrl.run.algos import parse_algo
    from steinrl.run.logger import read_metrics

    rows = read_metrics(run_dir)
    print(f"{cfg.algo} on {cfg.env}: {parse_algo(cfg.algo).job.summary(rows)}")
    out = Path(json_path) if json_path else run_dir / "evaluation.json"
    _write_json(out, {"env": cfg.env, "algo": cfg.algo, "seed": cfg.seed, **(rows[-1] if rows else {})})


def evaluate_main(argv: Sequence[str] | None = None, prog: str = "steinrl evaluate") -> int:
    from steinrl.rl.evaluation import evaluate, format_table, record_video
    from steinrl.run.best import BEST_NAME, best_checkpoint_of
    from steinrl.run.load import load_run
    from steinrl.run.plotting import plot_runs

    args = evaluate_parser(prog).parse_args(argv)
    _check_args(args)
    runs = args.runs if args.checkpoint == "last" or args.plot_only else [best_checkpoint_of(r) for r in args.runs]
    loaded = [] if args.plot_only else [load_run(run, device=args.device) for run in runs]  # all checked first
    if args.video and loaded and loaded[0][1] is None:
        raise ConfigError(f"--video needs a run with a policy to act with; {args.runs[0]} ({loaded[0][0].algo}) is "
                          "scored by the metrics it logged")
    if args.video and loaded:
        from steinrl.rl.evaluation import check_video

        check_video(loaded[0][0])  # a renderer that cannot start stops here, before anything is written
    if args.plot:
        try:
            plot_runs(args.runs, args.plot, key=args.key)
        except OSError as exc:
            raise ConfigError(f"cannot write {args.plot}: {exc.strerror or exc}") from None
        print(f"wrote {args.plot}")
    for cfg, policy, ckpt in loaded:
        if policy is None:
            _score_by_metrics(cfg, ckpt.parent, args.json)
            continue
        result = evaluate(cfg, policy, args.episodes, deterministic=not args.stochastic, seed=args.seed)
        result["checkpoint"] = str(ckpt)
        print(format_table(result))
        _write_json(Path(args.json) if args.json else ckpt.parent / ("evaluation_best.json" if ckpt.name == BEST_NAME
                                                                             else "evaluation.json"), result)
        if args.video:
            best = int(result["best_particle"].split()[-1])
            try:
                record_video(cfg, policy, args.video, mode=args.video_mode, particle=best, seed=args.seed)
            except OSError as exc:
                raise ConfigError(f"cannot write {args.video}: {exc.strerror or exc}") from None
            print(f"wrote {args.video}")
    return 0

