#!/usr/bin/env python
"""Contextual-bandit benchmark: agents x seeds on a task and protocol, Showdown-style tables.

    python benchmarks/bandits.py --env Mushroom --protocol showdown --seeds 0,1,2,3,4
    python benchmarks/bandits.py --env Wheel --delta 0.5,0.7,0.9,0.95,0.99 --seeds 0,1,2,3,4
    python benchmarks/bandits.py --env Mushroom --protocol s2vgd --agents s2vgd-ts,svgd-ts,vmg-ts,greedy,...
    python benchmarks/bandits.py --from runs/benchmarks/bandits_Mushroom_showdown.csv.gz   # re-draw, no runs

Each run is one ``steinrl.Trainer`` of the bandit job (``--jobs`` processes at a time, one
thread each). ``--agents`` takes algorithm names, optionally with config overrides after a
colon: ``egreedy:agent.epsilon=0.03``, ``svgd-ts:likelihood.learn_noise=true``. The
protocol is the preset ``bandit-<protocol>`` (configs/presets/). Every agent's config is
resolved before the first run starts: a bad argument is one line ``error: ...``, exit 2.

Prints one line per env x agent (x delta), the last lines in the form
``bandit env=<E> protocol=<P> agent=<A> seeds=<n> cum_reward=<mean> cum_reward_se=<se>
cum_regret=<mean> cum_regret_se=<se> norm_reward=<reward / optimal reward> seconds_per_run=<s>``,
and writes to ``--out`` (default runs/benchmarks/) ``bandits_<env>_<protocol>.md`` (a
markdown table: normalised cumulative reward ± s.e.), ``.png`` (cumulative regret, mean ±
s.e. over seeds, drawn by :func:`steinrl.run.plotting.draw_panels`) and ``.csv.gz`` (every
run's regret curve and totals: ``--from`` re-makes the table and figure from it).
``--update-results`` also writes the three files to research/results/ (the study page's figures).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one BLAS thread per run
    os.environ.setdefault(_var, "1")

import csv  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steinrl.errors import ConfigError  # noqa: E402
from steinrl.run.cli_base import Parser, input_path, output_dir, run_cli  # noqa: E402

DEFAULT_AGENTS = ("svgd-ts,s2vgd-ts,vmg-ts,kron-ts,independent-ts,svgd-ts:likelihood.learn_noise=true,"
                  "s2vgd-ts:likelihood.learn_noise=true,bbb-ts,badam-ts,kflow-ts,rdp-ts,greedy,"
                  "egreedy:agent.epsilon=0.01,egreedy:agent.epsilon=0.03,linfullpost,neurallinear,uniform")
DEFAULT_OUT = ROOT / "runs" / "benchmarks"
#: where ``--update-results`` copies the table, figure and archive (the bandit study page shows them)
RESULTS = ROOT / "research" / "results"
ARCHIVE_COLUMNS = ("delta", "agent", "seed", "round", "cumulative_regret", "reward", "optimal", "seconds")


def _top_level_split(text: str) -> list[str]:
    """Split on commas outside brackets (``model.hidden=[100,100]`` stays one item)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current]


def _split_specs(text: str) -> list[str]:
    """Split on commas that start a new algorithm (not those inside ``name:k=v,k=v``)."""
    specs: list[str] = []
    for part in _top_level_split(text):
        if specs and "=" in part and ":" not in part and "=" in specs[-1]:
            specs[-1] += "," + part
        else:
            specs.append(part)
    return specs


def parse_agent(spec: str) -> tuple[str, dict[str, str]]:
    """``name[:key=value,...]`` -> (algorithm, overrides); a malformed spec raises :class:`ConfigError`."""
    name, _, rest = spec.partition(":")
    items = [item for item in _top_level_split(rest) if item]
    bad = [item for item in items if "=" not in item or not item.partition("=")[0]]
    if not name or bad:
        raise ConfigError(f"--agents: {spec!r} is not name[:key=value,...] (e.g. egreedy:agent.epsilon=0.03)")
    return name, dict(item.split("=", 1) for item in items)


def _csv_numbers(text: str, flag: str, kind: type, check, what: str) -> list:
    try:
        values = [kind(item) for item in text.split(",")]
    except ValueError:
        raise ConfigError(f"{flag} takes {what} separated by commas, got {text!r}") from None
    if not values or len(set(values)) != len(values) or not all(check(v) for v in values):
        raise ConfigError(f"{flag} takes distinct {what} separated by commas, got {text!r}")
    return values


def run_one(job: tuple[str, str, dict, int, str]) -> dict:
    """Play one bandit run to the end; returns its final scalars and regret curve."""
    import torch

    import steinrl

    env, algo, overrides, seed, preset = job
    torch.set_num_threads(1)
    trainer = steinrl.Trainer(_config(env, algo, overrides, seed, preset))
    start = time.perf_counter()
    curve, rounds = [], []
    while not trainer.done:
        scalars = trainer.step()
        curve.append(scalars["bandit/cumulative_regret"])
        rounds.append(scalars["bandit/rounds"])
    return {"seconds": time.perf_counter() - start, "reward": scalars["bandit/cumulative_reward"],
            "regret": scalars["bandit/cumulative_regret"], "optimal": scalars["bandit/optimal_reward"],
            "curve": curve, "rounds": rounds}


def _config(env: str, algo: str, overrides: dict, seed: int, preset: str):
    import steinrl
    from steinrl.run.config import parse_set

    return steinrl.load_config(algo, env, {**parse_set([f"{k}={v}" for k, v in overrides.items()]), "seed": seed},
                               preset=preset)


def se(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def parser() -> Parser:
    p = Parser(prog="benchmarks/bandits.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="Mushroom", help="bandit task (Mushroom, Wheel, Linear, SparseLinear)")
    p.add_argument("--protocol", default="showdown", help="showdown or s2vgd (the preset bandit-<protocol>)")
    p.add_argument("--agents", default=DEFAULT_AGENTS, help="comma-separated algorithm specs (see above)")
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--delta", help="Wheel: comma-separated exploration parameters delta")
    p.add_argument("--rounds", type=int, help="override the protocol's number of rounds")
    p.add_argument("--jobs", type=int, default=2, help="runs at a time (one thread each)")
    p.add_argument("--out", default=str(DEFAULT_OUT), help="directory of the table, figure and curves archive")
    p.add_argument("--update-results", action="store_true",
                   help="also write the table, figure and archive to research/results/")
    p.add_argument("--from", dest="source", metavar="ARCHIVE", help="re-make the table and figure from a .csv.gz "
                   "this script wrote (no runs; --env, --protocol and --seeds are read from it)")
    return p


def plan(args) -> tuple[list[str], list[int], list, list[tuple], list[tuple]]:
    """Check every argument and resolve every agent's config (no run starts); the specs, seeds,
    deltas, the run jobs and their (delta, spec) keys."""
    from steinrl.run.config import presets

    if f"bandit-{args.protocol}" not in presets():
        known = [p.removeprefix("bandit-") for p in presets() if p.startswith("bandit-")]
        raise ConfigError(f"--protocol {args.protocol!r} is not a bandit protocol; choose from {', '.join(known)}")
    if args.jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {args.jobs}")
    if args.rounds is not None and args.rounds < 1:
        raise ConfigError(f"--rounds must be >= 1, got {args.rounds}")
    seeds = _csv_numbers(args.seeds, "--seeds", int, lambda s: 0 <= s < 2**32, "integers in [0, 2**32)")
    deltas = _csv_numbers(args.delta, "--delta", float, lambda d: True, "numbers") if args.delta else [None]
    specs = [s.strip() for s in _split_specs(args.agents)]
    if not all(specs) or len(set(specs)) != len(specs):
        raise ConfigError(f"--agents takes distinct comma-separated algorithm specs, got {args.agents!r}")
    preset = f"bandit-{args.protocol}"
    jobs, keys = [], []
    for delta in deltas:
        for spec in specs:
            algo, overrides = parse_agent(spec)
            overrides = {**overrides, **({} if delta is None else {"task.delta": str(delta)}),
                         **({} if args.rounds is None else {"rounds": str(args.rounds)})}
            _config(args.env, algo, overrides, seeds[0], preset)  # raises a one-line ConfigError naming the key
            jobs += [(args.env, algo, overrides, seed, preset) for seed in seeds]
            keys += [(delta, spec)] * len(seeds)
    return specs, seeds, deltas, jobs, keys


def run_all(jobs: list[tuple], keys: list[tuple], workers: int) -> dict[tuple, list[dict]]:
    results: dict[tuple, list[dict]] = {}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for job, key, result in zip(jobs, keys, pool.map(run_one, jobs)):
            results.setdefault(key, []).append({**result, "seed": job[3]})
            print(f"  {key[1]}{'' if key[0] is None else f' delta={key[0]}'} seed done: reward {result['reward']:.0f} "
                  f"regret {result['regret']:.0f} ({result['seconds']:.0f} s)", flush=True)
    return results


def write_archive(path: Path, header: dict[str, str], results: dict[tuple, list[dict]]) -> None:
    """Every run's regret curve and totals, gzip CSV; the first line ``# {json}`` holds ``header``."""
    with gzip.open(path, "wt", newline="") as f:
        f.write("# " + json.dumps(header) + "\n")
        writer = csv.writer(f)
        writer.writerow(ARCHIVE_COLUMNS)
        for (delta, spec), runs in results.items():
            for run in runs:
                for x, regret in zip(run["rounds"], run["curve"]):
                    writer.writerow(["" if delta is None else delta, spec, run["seed"], int(x), regret, run["reward"],
                                     run["optimal"], round(run["seconds"], 2)])


def read_archive(path: Path) -> tuple[dict[str, str], dict[tuple, list[dict]]]:
    """The header and results of :func:`write_archive`'s file; a file of another kind is a :class:`ConfigError`."""
    try:
        with gzip.open(path, "rt", newline="") as f:
            first = f.readline()
            rows = list(csv.DictReader(f))
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--from {path}: not a gzip CSV this script wrote ({exc})") from None
    try:
        header = json.loads(first.removeprefix("# "))
    except json.JSONDecodeError:
        header = {}
    needed = {"env", "protocol", "seeds", "agents", "command"}
    if not isinstance(header, dict) or not rows or set(ARCHIVE_COLUMNS) - set(rows[0]) or not needed <= set(header):
        raise ConfigError(f"--from {path}: not an archive of benchmarks/bandits.py "
                          f"(columns {', '.join(ARCHIVE_COLUMNS)})")
    results: dict[tuple, dict[int, dict]] = {}
    for r in rows:
        runs = results.setdefault((float(r["delta"]) if r["delta"] else None, r["agent"]), {})
        run = runs.setdefault(int(r["seed"]), {"curve": [], "rounds": [], "reward": float(r["reward"]), "seed":
                                               int(r["seed"]), "optimal": float(r["optimal"]),
                                               "seconds": float(r["seconds"])})
        run["curve"].append(float(r["cumulative_regret"]))
        run["rounds"].append(float(r["round"]))
    for runs in results.values():
        for run in runs.values():
            run["regret"] = run["curve"][-1]
    return header, {k: list(v.values()) for k, v in results.items()}


def summarise(results: dict[tuple, list[dict]], env: str, protocol: str) -> tuple[dict, list[str]]:
    """Per (delta, spec): the table's numbers, and the summary lines."""
    lines, rows = [], {}
    for (delta, spec), runs in results.items():
        reward, regret, optimal = (np.array([r[k] for r in runs]) for k in ("reward", "regret", "optimal"))
        seconds = float(np.mean([r["seconds"] for r in runs]))
        norm = reward / optimal
        rows[(delta, spec)] = (norm.mean(), se(norm), regret.mean(), se(regret), reward.mean(), se(reward), seconds)
        name = env if delta is None else f"{env}(delta={delta})"
        lines.append(f"bandit env={name} protocol={protocol} agent={spec} seeds={len(runs)} "
                     f"cum_reward={reward.mean():.1f} cum_reward_se={se(reward):.1f} cum_regret={regret.mean():.1f} "
                     f"cum_regret_se={se(regret):.1f} norm_reward={reward.mean() / optimal.mean():.3f} "
                     f"seconds_per_run={seconds:.1f}")
    return rows, lines


def write_table(path: Path, header: dict[str, str], specs, deltas, rows) -> None:
    head = ["agent"] + ([f"delta={d}" for d in deltas] if deltas != [None] else
                        ["total reward", "normalised reward", "regret", "s / run"])
    lines = [f"Normalised cumulative reward (cumulative reward / the optimal arms' rewards; mean ± s.e. over seeds "
             f"{header['seeds']}) on {header['env']}, protocol {header['protocol']}.", "",
             f"Command: `{header['command']}`", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for spec in specs:
        if deltas == [None]:
            norm, norm_se, regret, regret_se, reward, reward_se, seconds = rows[(None, spec)]
            cells = [f"{reward:.0f} ± {reward_se:.0f}", f"{norm:.3f} ± {norm_se:.3f}",
                     f"{regret:.0f} ± {regret_se:.0f}", f"{seconds:.0f}"]
        else:
            cells = [f"{rows[(d, spec)][0]:.3f} ± {rows[(d, spec)][1]:.3f}" for d in deltas]
        lines.append(f"| {spec} | " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n")


def plot_curves(path: Path, header: dict[str, str], specs, deltas, results):
    """Cumulative regret, mean ± s.e. over seeds, one panel per delta (off-scale agents in their own;
    at most three panels a row; no band for fewer than 3 seeds)."""
    from steinrl.run.plotting import Curve, Panel, draw_panels

    panels = []
    for delta in deltas:
        curves = []
        for spec in specs:
            runs = results[(delta, spec)]
            values = np.array([r["curve"] for r in runs])
            mean = values.mean(0)
            band = values.std(0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1 else np.zeros_like(mean)
            curves.append(Curve(spec, runs[0]["rounds"], mean, mean - band, mean + band, n=len(runs),
                                data_low=values.min(0), data_high=values.max(0)))
        title = header["env"] + ("" if delta is None else f" (delta={delta})") + f", {header['protocol']}"
        panels.append(Panel(title, "round", "cumulative regret", curves))
    return draw_panels(panels, path, band=f"mean ± s.e. over seeds {header['seeds']}")


def _command(argv: list[str]) -> str:
    """The command that reproduces the numbers (``--out`` and ``--update-results`` change no number)."""
    kept, skip = [], False
    for a in argv:
        if skip or a == "--update-results":
            skip = False
            continue
        if a == "--out":
            skip = True
            continue
        if not a.startswith("--out="):
            kept.append(a)
    return " ".join(["python benchmarks/bandits.py", *kept])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    out = output_dir(args.out, "--out")
    if args.source:
        header, results = read_archive(input_path(args.source, "--from"))
        specs = list(dict.fromkeys(spec for _, spec in results))
        deltas = list(dict.fromkeys(delta for delta, _ in results))
    else:
        specs, seeds, deltas, jobs, keys = plan(args)
        header = {"env": args.env, "protocol": args.protocol, "seeds": ",".join(map(str, seeds)),
                  "agents": args.agents, "command": _command(argv)}
        print(f"{len(jobs)} runs: {args.env}, protocol {args.protocol}, {len(specs)} agents x {len(seeds)} seeds"
              + (f" x {len(deltas)} deltas" if deltas != [None] else ""), flush=True)
        results = run_all(jobs, keys, args.jobs)
    rows, lines = summarise(results, header["env"], header["protocol"])
    output_dir(out, "--out", create=True)
    stem = out / f"bandits_{header['env']}_{header['protocol']}"
    table, figure = stem.with_suffix(".md"), stem.with_suffix(".png")
    archive = Path(args.source) if args.source else stem.with_suffix(".csv.gz")
    write_table(table, header, specs, deltas, rows)
    plot_curves(figure, header, specs, deltas, results)
    if not args.source:
        write_archive(archive, header, results)
    files = [table, figure, archive]
    written = files[:2] if args.source else files
    if args.update_results:
        kept = [RESULTS / f"{stem.name}{suffix}" for suffix in (".md", ".png", ".csv.gz")]
        for source, target in zip(files, kept):
            if source.resolve() != target.resolve():
                shutil.copyfile(source, target)
        written += kept
    print("wrote " + ", ".join(map(str, written)))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
