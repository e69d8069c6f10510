"""UCI BNN regression benchmark (Hernández-Lobato & Adams' protocol, S²VGD table 1).

    python benchmarks/uci.py --data benchmarks/data/uci/yacht --splits 20
    python benchmarks/uci.py --data benchmarks/data/uci/energy --methods svgd,s2vgd --prior invgamma
    python benchmarks/uci.py --data benchmarks/data/uci/yacht --splits 20 --methods svgd \
        --update 'kernel={space: functions}'

For each method and split k: a random 90/10 train/test split with seed k
(:func:`steinrl.bayes.regression.split_indices`), inputs/targets standardised with the
training split inside :func:`~steinrl.bayes.regression.fit_regressor`, one hidden layer of 50
ReLU units, M = 20 particles; test RMSE (original scale) and test log-likelihood measured once,
after the last epoch. Splits run in parallel over ``--jobs`` processes with one torch thread each.

How long: about ``splits x (sum of the methods' seconds per split) / jobs``. With all eight
methods, ``--splits 20`` takes about 30-35 minutes on 2 cores (``--jobs 2``) for yacht and
about 10 minutes for energy (research/results/uci.md gives each method's seconds per split); the
first line says the estimate for the run at hand.

``--update KEY=VALUE`` (repeatable; YAML values) sets an option of the Stein methods' particle
update (the ``update`` config section's: ``kernel``, whose mapping sets parameters of the RBF
kernel with the S²VGD bandwidth rule, ``repulsion``, ...), passed to
:func:`~steinrl.bayes.regression.fit_regressor` as ``update_options``; e.g.
``--update 'kernel={space: functions}'`` puts the kernel on the particles' predictions at each
minibatch's first B inputs. The other methods have no Stein update and ignore it.

Prints one line per finished split, then one summary line per method (the last lines)::

    uci set=<name> method=<m> [update.<key>[.<parameter>]=<value> ...] splits=<n> rmse=<mean> rmse_se=<se>
        test_ll=<mean> seconds_per_split=<s>

(one line each; ``update.<key>=<value>`` for a Stein method run with ``--update``)
and writes / refreshes the section ``## UCI regression: <set>`` of ``<--out>/uci_<set>.md``
(default runs/benchmarks/; rows keyed by method, its update options and prior, so a rerun
replaces its own rows and keeps the others: ``svgd`` and ``svgd update.kernel.space=functions``
are two rows). ``--update-results`` refreshes the same section of research/results/uci.md.

Every argument and every file of ``--data`` is checked before the first fit: a missing,
wrong-kind, unreadable or empty file, a value that is not a finite number (named by file,
line and column) or an out-of-range count is one line ``error: ...``, exit 2.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steinrl.bayes.regression import PARTICLE_METHODS, REGRESSION_METHODS, fit_regressor, load_uci, split_indices  # noqa: E402
from steinrl.core.couplings import COUPLINGS, SteinSettings, check_embedding_states  # noqa: E402
from steinrl.core.kernels import kernel_spec  # noqa: E402
from steinrl.core.methods import METHODS  # noqa: E402
from steinrl.errors import ConfigError  # noqa: E402
from steinrl.registry import coerce  # noqa: E402
from steinrl.run.cli_base import Parser, input_path, output_dir, run_cli  # noqa: E402
from steinrl.run.config import read_user_text  # noqa: E402

#: S²VGD paper, table 1: test RMSE of S²VGD and SVGD (the issue's reference figures).
TABLE1 = {"yacht": (0.47, 0.86), "energy": (0.38, 1.37), "boston": (2.56, 2.96), "concrete": (4.25, 5.32)}
#: Seconds per split of each method on one core of the 2-core machine, two splits side by side
#: (research/results/uci.md, 20 splits at the default epochs): the start line's time estimate.
SECONDS_PER_SPLIT = {
    "yacht": {"svgd": 13.3, "s2vgd": 24.3, "vmg": 18.2, "kron": 35.0, "bbb": 16.6, "badam": 6.0, "kflow": 17.6,
              "rdp": 46.5},
    "energy": {"svgd": 5.8, "s2vgd": 9.8, "vmg": 6.8, "kron": 13.4, "bbb": 4.0, "badam": 1.6, "kflow": 4.4,
               "rdp": 13.3},
}
#: Minibatch steps the default epoch count aims at (Liu & Wang's UCI code runs 2000 iterations).
DEFAULT_STEPS = 2000
DEFAULT_OUT = ROOT / "runs" / "benchmarks"
UCI_FILES = ("data", "index_features", "index_target", "n_splits")
HEADER = "# Results\n\nNumbers written by the scripts in `benchmarks/`; each section names the command behind it.\n"


def default_epochs(n_train: int, batch_size: int, steps: int = DEFAULT_STEPS) -> int:
    """Epochs giving about ``steps`` minibatch steps on ``n_train`` examples."""
    return max(1, round(steps / math.ceil(n_train / batch_size)))


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def is_stein(method: str) -> bool:
    """True for a particle method moved by the Stein update (``--update`` applies to it)."""
    return method in PARTICLE_METHODS and METHODS.get(method).coupling == "stein"


#: the Stein methods' kernel here unless ``--update kernel=...`` sets its parameters
DEFAULT_KERNEL = {"name": "rbf", "bandwidth": "s2vgd"}


def parse_update(items: list[str], batch_size: int) -> dict:
    """``--update KEY=VALUE`` items as checked options of the Stein update, as given (YAML values;
    a kernel mapping sets parameters of :data:`DEFAULT_KERNEL`); one :class:`ConfigError` line for
    an unknown key, a bad value, or shared inputs (``states``) above the batch."""
    options = {o.name: o for o in COUPLINGS.get("stein").options}
    out: dict = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--update expects KEY=VALUE, got {item!r}")
        if key not in options:
            raise ConfigError(f"--update {key}: not an option of the Stein update; its options: {', '.join(options)}")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            raise ConfigError(f"--update {key}: cannot parse value {raw!r}") from None
        out[key] = {**out[key], **value} if isinstance(out.get(key), dict) and isinstance(value, dict) else value
    section = {k: coerce(options[k], v, k, "--update", kernel_spec(DEFAULT_KERNEL) if k == "kernel" else None)
               for k, v in out.items()}  # checked; kept as given
    try:
        check_embedding_states(SteinSettings(**section), batch_size, f"the minibatch (--batch-size {batch_size})")
    except ConfigError as exc:
        raise ConfigError(f"--update: {exc}") from None
    return out


def method_label(method: str, update: dict) -> str:
    """The method's name in the table and the summary lines: with its ``--update`` options if it
    is a Stein method (a mapping's parameters each as ``update.<key>.<parameter>=<value>``)."""
    parts = []
    for key, value in update.items() if is_stein(method) else ():
        items = value.items() if isinstance(value, dict) else [(None, value)]
        parts += [f"update.{key}{'' if p is None else '.' + str(p)}={v}" for p, v in items]
    return " ".join([method, *parts])


def run_split(data_dir: str, method: str, split: int, options: dict) -> tuple[str, int, float, float, float]:
    """Fit one method on one split: ``(method, split, rmse, test_ll, seconds)``."""
    start = time.perf_counter()
    X, y, _ = load_uci(data_dir)
    train, test = split_indices(len(y), split)
    if not is_stein(method):
        options = {k: v for k, v in options.items() if k != "update_options"}
    reg = fit_regressor(method, X[train], y[train], seed=split, **options)
    rmse, ll = reg.rmse(X[test], y[test]), reg.test_log_likelihood(X[test], y[test])
    return method, split, rmse, ll, time.perf_counter() - start


def _mean_se(values: list[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    se = float(arr.std(ddof=1) / math.sqrt(len(arr))) if len(arr) > 1 else float("nan")
    return float(arr.mean()), se


def write_section(path: Path, name: str, rows: dict[tuple[str, str], str], note: str) -> None:
    """Replace the rows ``rows`` ((method, prior) -> table line) of the set's section in ``path``."""
    text = path.read_text() if path.exists() else HEADER
    title = f"## UCI regression: {name}"
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == title), None)
    old: dict[tuple[str, str], str] = {}
    if start is not None:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        for line in lines[start + 1:end]:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("| ") and len(cells) > 2 and cells[0].split(" ")[0] in REGRESSION_METHODS:
                old[(cells[0], cells[1])] = line
        before, after = lines[:start], lines[end:]
    else:
        before, after = lines + [""], []
    merged = {**old, **rows}
    order = {m: i for i, m in enumerate(REGRESSION_METHODS)}
    keys = sorted(merged, key=lambda k: (k[1] != "joint", order.get(k[0].split(" ")[0], 99), k[0], k[1]))
    s2, sv = TABLE1.get(name, (None, None))
    ref = (f"S²VGD paper table 1 (test RMSE): S²VGD {s2}, SVGD {sv}. " if s2 is not None else "")
    section = [title, "", ref + note, "",
               "| method | prior | splits | epochs | test RMSE | ± se | test log-lik | ± se | s / split | command |",
               "|---|---|---|---|---|---|---|---|---|---|", *(merged[k] for k in keys), ""]
    while before and before[-1] == "":
        before.pop()
    out = before + [""] + section + ([""] + after if after else [])
    path.write_text("\n".join(out).rstrip("\n") + "\n")


def check_data_file(path: Path) -> None:
    """Every line of ``data.txt`` holds the same number of finite numbers; else a one-line
    :class:`ConfigError` naming the file, line and column."""
    text = read_user_text(path, "data file")
    rows = [(n, line.split()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not rows:
        raise ConfigError(f"{path} is empty")
    width = len(rows[0][1])
    for n, fields in rows:
        if len(fields) != width:
            raise ConfigError(f"{path}: line {n} has {len(fields)} values, line {rows[0][0]} has {width}")
        for column, field in enumerate(fields, 1):
            try:
                value = float(field)
            except ValueError:
                raise ConfigError(f"{path}: line {n}, column {column}: {field!r} is not a number") from None
            if not math.isfinite(value):
                raise ConfigError(f"{path}: line {n}, column {column} holds {field!r}, not a finite number")


def read_data(directory: str) -> tuple[np.ndarray, np.ndarray, int]:
    """``load_uci(directory)`` after checking the directory and each of its files."""
    root = input_path(directory, "--data", kind="directory")
    for name in UCI_FILES:
        path = root / f"{name}.txt"
        if not path.exists():
            raise ConfigError(f"--data {directory} lacks {name}.txt (the format: benchmarks/data/uci/README.md)")
        input_path(path, "--data file")
        if path.stat().st_size == 0:
            raise ConfigError(f"{path} is empty")
    check_data_file(root / "data.txt")
    return load_uci(root)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = Parser(prog="benchmarks/uci.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a directory in the format of benchmarks/data/uci/<set>/")
    parser.add_argument("--methods", default=",".join(REGRESSION_METHODS))
    parser.add_argument("--splits", type=int, default=None, help="number of splits (default: n_splits.txt)")
    parser.add_argument("--epochs", type=int, default=None,
                        help=f"epochs (default: about {DEFAULT_STEPS} minibatch steps, Liu & Wang's 2000 iterations)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel processes (one torch thread each)")
    parser.add_argument("--prior", choices=("joint", "invgamma"), default="joint",
                        help="weight prior of the particle methods")
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam step size")
    parser.add_argument("--particles", type=int, default=20)
    parser.add_argument("--noise-scale", type=float, default=10.0,
                        help="log γ = noise_scale · (optimised coordinate); see fit_regressor")
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--update", action="append", default=[], metavar="KEY=VALUE",
                        help="an option of the Stein methods' coupling, e.g. 'kernel={space: functions, "
                             "states: 32}' or 'repulsion={name: share, target: 0.2}' (repeatable; the other methods "
                             "ignore it)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="directory of uci_<set>.md (default runs/benchmarks)")
    parser.add_argument("--update-results", action="store_true",
                        help="also refresh the set's section of research/results/uci.md")
    args = parser.parse_args(argv)
    for flag, value in (("--splits", args.splits), ("--epochs", args.epochs), ("--jobs", args.jobs),
                        ("--particles", args.particles), ("--batch-size", args.batch_size)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be >= 1, got {value}")
    for flag, value in (("--lr", args.lr), ("--noise-scale", args.noise_scale)):
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{flag} must be a finite number > 0, got {value}")
    args.methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in args.methods if m not in REGRESSION_METHODS]
    if unknown or not args.methods:
        raise ConfigError(f"--methods: unknown method(s) {unknown}; choices: {','.join(REGRESSION_METHODS)}")
    if args.update and not any(is_stein(m) for m in args.methods):
        raise ConfigError(f"--update sets the Stein update's options; --methods {','.join(args.methods)} has no "
                          f"Stein method ({', '.join(m for m in PARTICLE_METHODS if is_stein(m))})")
    args.update = parse_update(args.update, args.batch_size)
    output_dir(args.out, "--out")
    return args


def run_all(args, options: dict, tasks: list[tuple[str, int]], name: str) -> dict[str, list]:
    """Fit every (method, split) of ``tasks`` in ``args.jobs`` processes; per method the
    ``(rmse, test_ll, seconds)`` of each split."""
    results: dict[str, list[tuple[float, float, float]]] = {m: [] for m in args.methods}
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn"), initializer=_init_worker) as pool:
        futures = [pool.submit(run_split, args.data, m, k, options) for m, k in tasks]
        for future in as_completed(futures):
            m, k, rmse, ll, sec = future.result()
            results[m].append((rmse, ll, sec))
            print(f"  {name} {method_label(m, args.update)} split={k} rmse={rmse:.4f} test_ll={ll:.4f} "
                  f"seconds={sec:.1f}", flush=True)
    return results


def _command(argv: list[str]) -> str:
    """The command that reproduces the numbers (``--out`` and ``--update-results`` change no number)."""
    kept, skip = [], False
    for a in argv:
        if skip or a == "--update-results" or a.startswith("--out="):
            skip = False
            continue
        skip = a == "--out"
        if not skip:
            kept.append(a)
    return "python " + " ".join(shlex.quote(a) for a in ["benchmarks/uci.py", *kept])


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    X, y, n_splits = read_data(args.data)
    splits = n_splits if args.splits is None else args.splits
    name = Path(args.data).resolve().name
    n_train = len(split_indices(len(y), 0)[0])
    epochs = args.epochs or default_epochs(n_train, args.batch_size)
    options = dict(hidden=(50,), particles=args.particles, epochs=epochs, batch_size=args.batch_size,
                   lr=args.lr, prior=args.prior, optimizer="adam", noise_scale=args.noise_scale,
                   update_options=args.update)
    update = "".join(f" update.{k}={v}" for k, v in args.update.items())
    print(f"uci set={name} n={len(y)} d={X.shape[1]} n_train={n_train} epochs={epochs} splits={splits} "
          f"methods={','.join(args.methods)} prior={args.prior} lr={args.lr} jobs={args.jobs}{update}", flush=True)
    per_split = SECONDS_PER_SPLIT.get(name, SECONDS_PER_SPLIT["yacht"])  # other sets: yacht's, the slower
    minutes = splits * sum(per_split.get(m, 20.0) for m in args.methods) / min(args.jobs, 2) / 60
    print(f"uci: {splits} splits x {len(args.methods)} methods take about {max(1, round(minutes))} minutes on a "
          f"2-core machine at --jobs {min(args.jobs, 2)} (research/results/uci.md's seconds per split"
          f"{'' if name in SECONDS_PER_SPLIT else ', measured on yacht'})", flush=True)
    results = run_all(args, options, [(m, k) for k in range(splits) for m in args.methods], name)
    command = _command(argv)
    rows, summary = {}, []
    for m in args.methods:
        (rmse, rmse_se), (ll, ll_se) = _mean_se([r[0] for r in results[m]]), _mean_se([r[1] for r in results[m]])
        sec = float(np.mean([r[2] for r in results[m]]))
        prior = args.prior if m in PARTICLE_METHODS else "-"
        label = method_label(m, args.update)
        rows[(label, prior)] = (f"| {label} | {prior} | {splits} | {epochs} | {rmse:.3f} | {rmse_se:.3f} | {ll:.3f} | "
                                f"{ll_se:.3f} | {sec:.1f} | `{command}` |")
        summary.append(f"uci set={name} method={label} splits={splits} rmse={rmse:.4f} "
                       f"rmse_se={rmse_se:.4f} test_ll={ll:.4f} seconds_per_split={sec:.2f}")
    note = (f"Protocol: 90/10 splits with seed = split index, 50 ReLU units, M = {args.particles} particles, "
            f"batch {args.batch_size}, Adam lr {args.lr}, noise_scale {args.noise_scale}, RMSE/log-lik on "
            f"the test split after the last epoch. Seconds per split: wall time of one fit + evaluation in a "
            f"one-thread worker.")
    targets = [output_dir(args.out, "--out", create=True) / f"uci_{name}.md"]
    targets += [ROOT / "research" / "results" / "uci.md"] if args.update_results else []
    for path in targets:
        write_section(path, name, rows, note)
    print(f"wrote {', '.join(map(str, targets))}")
    print("\n".join(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
