"""Learning-curve figures: ``steinrl evaluate --plot``, a sweep's ``curves.png`` and the
bandit benchmark's regret figures are all drawn by :func:`draw_panels`.

:func:`draw_panels` gives every curve its own colour *and* line style (the same label
keeps the same style in every panel), moves curves whose scale dwarfs the others (a
uniform-random baseline's linear regret) into a panel of their own, and puts one legend
outside the axes.

:func:`plot_runs` reads saved runs (``config.yaml`` and ``metrics.jsonl``) and groups them
by env, algorithm *and* resolved config: runs that differ only in their seed, their
length (``iterations`` / ``rounds``), ``device`` or the ``run`` section's bookkeeping are
seeds of one group; any other difference (``--set update.lr=1e-3``) makes another group,
labelled by the keys in which the groups of that algorithm differ. Each seed counts once
per group; curves of unequal length are averaged over the seeds each point has.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from steinrl.errors import ConfigError
from steinrl.run.config import Config, read_run_config
from steinrl.run.labels import metric_label, settings_label
from steinrl.run.logger import read_metrics

__all__ = ["Curve", "Panel", "Drawn", "draw_panels", "split_off_scale", "band_note", "find_runs", "collect_curves",
           "config_identity", "plot_runs", "IDENTITY_FREE_KEYS", "PANELS_PER_ROW", "MIN_BAND_SEEDS"]

#: Config keys that do not make a run a different configuration: its seed, its length (the
#: total a resume may raise), where it ran and the run loop's bookkeeping (``run.*``).
IDENTITY_FREE_KEYS = ("seed", "iterations", "rounds", "device", "run")
#: Line styles cycled together with the colours (a (colour, style) pair is unique for 20 curves).
LINE_STYLES = ("-", "--", "-.", ":")
#: A curve whose largest |value| is this many times the median of the panel's is off the scale.
OFF_SCALE_FACTOR = 4.0


# --- drawing ----------------------------------------------------------------------------
#: Panels per row: a figure stays readable at page width (wider layouts wrap into rows).
PANELS_PER_ROW = 3
#: A curve's band (its spread over seeds) is drawn only with at least this many seeds behind it.
MIN_BAND_SEEDS = 3
#: One panel's size in inches (at ``dpi`` 120: about 500 x 380 pixels).
PANEL_SIZE = (4.2, 3.2)


@dataclass(frozen=True)
class Curve:
    """One labelled curve: ``x`` and ``mean`` of equal length, with an optional band.

    ``low`` / ``high`` (None: no band) are the band; it is drawn only where ``n``, the
    number of seeds behind the curve or behind each point (None: not a seed mean), is at least
    :data:`MIN_BAND_SEEDS`, and clipped to ``data_low`` / ``data_high`` (the lowest and
    highest seed value at each x, where given): a band never reaches values no seed took
    (a 95 % interval of two seeds, or of returns bounded below, otherwise can).
    """

    label: str
    x: Sequence[float]
    mean: Sequence[float]
    low: Sequence[float] | None = None
    high: Sequence[float] | None = None
    n: int | Sequence[int] | None = None
    data_low: Sequence[float] | None = None
    data_high: Sequence[float] | None = None

    def band(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The band as drawn: clipped to the data's range, NaN (a gap) at points with fewer than
        :data:`MIN_BAND_SEEDS` seeds; None where no point has a band."""
        if self.low is None or self.high is None:
            return None
        low, high = np.asarray(self.low, dtype=float), np.asarray(self.high, dtype=float)
        if self.data_low is not None:
            low = np.maximum(low, np.asarray(self.data_low, dtype=float))
        if self.data_high is not None:
            high = np.minimum(high, np.asarray(self.data_high, dtype=float))
        if self.n is not None:
            few = np.broadcast_to(np.asarray(self.n), low.shape) < MIN_BAND_SEEDS
            if few.all():
                return None
            low, high = np.where(few, np.nan, low), np.where(few, np.nan, high)
        return low, high


@dataclass(frozen=True)
class Panel:
    """One axes: a title, axis labels and its curves (a ``ylabel`` that is a known metric key is
    drawn in words: :func:`steinrl.run.labels.metric_label`)."""

    title: str
    xlabel: str
    ylabel: str
    curves: Sequence[Curve]


@dataclass(frozen=True)
class Drawn:
    """What :func:`draw_panels` drew: the figure's size in pixels, its panels' grid, whether the
    legend stands clear of every axes, and each axes' x tick values."""

    size: tuple[int, int]
    rows: int
    columns: int
    legend_outside: bool
    xticks: list[list[float]]


def split_off_scale(curves: Sequence[Curve], factor: float = OFF_SCALE_FACTOR) -> tuple[list[Curve], list[Curve]]:
    """``(on scale, off scale)``: with three curves or more, those whose largest |mean| is over
    ``factor`` times the median of all curves' largest |mean| (at most half of them)."""
    curves = list(curves)
    scales = [float(np.nanmax(np.abs(c.mean))) if len(c.mean) and np.isfinite(c.mean).any() else 0.0
              for c in curves]
    if len(curves) < 3:
        return curves, []
    ref = float(np.median(scales))
    off = [c for c, s in zip(curves, scales) if ref > 0 and s > factor * ref]
    if not off or len(off) > len(curves) // 2:
        return curves, []
    return [c for c in curves if c not in off], off


def _styles(labels: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A distinct (colour, line style) per label, colours and styles cycled together."""
    import matplotlib

    colours = matplotlib.colormaps["tab10" if len(labels) <= 10 else "tab20"].colors
    return {label: {"color": colours[i % len(colours)], "linestyle": LINE_STYLES[i % len(LINE_STYLES)]}
            for i, label in enumerate(labels)}


def _integral(values: Sequence[float]) -> bool:
    v = np.asarray(values, dtype=float)
    return bool(len(v)) and bool(np.all(np.isfinite(v))) and bool(np.all(v == np.round(v)))


def band_note(curves: Sequence[Curve]) -> str:
    """What the figure's bands leave out or cut, for the legend's title."""
    notes = []
    if any(c.n is not None for c in curves):
        notes.append(f"none for n < {MIN_BAND_SEEDS}")
    if any(c.data_low is not None or c.data_high is not None for c in curves):
        notes.append("clipped to the seeds' range")
    return f" ({'; '.join(notes)})" if notes else ""


def draw_panels(panels: Sequence[Panel], out: str | Path, band: str, dpi: int = 120) -> Drawn:
    """Draw ``panels`` into ``out`` (any format matplotlib writes, by suffix), at most
    :data:`PANELS_PER_ROW` to a row.

    Curves off the scale of a panel (:func:`split_off_scale`) get a panel of their own beside
    it; an x axis of whole numbers (iterations, rounds) gets integer ticks; one legend (each
    label once, titled ``band``, what the bands are, and what they leave out) stands below
    the panels, outside every axes.
    """
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    laid_out: list[Panel] = []
    for panel in panels:
        on, off = split_off_scale(panel.curves)
        laid_out.append(Panel(panel.title, panel.xlabel, panel.ylabel, on))
        if off:
            laid_out.append(Panel(f"{panel.title}: off the left panel's scale", panel.xlabel, panel.ylabel, off))
    laid_out = laid_out or [Panel("", "", "", [])]
    labels = list(dict.fromkeys(c.label for p in laid_out for c in p.curves))
    styles = _styles(labels)
    columns = min(PANELS_PER_ROW, len(laid_out))
    rows = math.ceil(len(laid_out) / columns)
    width, height = PANEL_SIZE
    fig, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False)
    handles: dict[str, Any] = {}
    for ax, panel in zip(axes.flat, laid_out):
        for c in panel.curves:
            line, = ax.plot(c.x, c.mean, label=c.label, linewidth=1.4, **styles[c.label])
            drawn_band = c.band()
            if drawn_band is not None:
                ax.fill_between(c.x, *drawn_band, alpha=0.15, color=styles[c.label]["color"], linewidth=0)
            handles.setdefault(c.label, line)
        if panel.curves and all(_integral(c.x) for c in panel.curves):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(panel.title, fontsize="medium")
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel(metric_label(panel.ylabel), fontsize="small")  # a metric key in words
        ax.tick_params(labelsize="small")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(laid_out):]:
        ax.set_visible(False)
    fig.tight_layout()
    longest = max((len(label) for label in handles), default=1)
    # as many legend columns as the labels fit across the panels (a small-font character is ~4.3 pt,
    # the line sample and padding ~35 pt)
    ncol = max(1, min(len(handles), int(width * columns * 72 / (4.3 * longest + 35))))
    all_curves = [c for p in laid_out for c in p.curves]
    legend = fig.legend(list(handles.values()), list(handles), loc="upper center", bbox_to_anchor=(0.5, 0.0),
                        ncol=ncol, fontsize="small", title=band + band_note(all_curves), title_fontsize="small",
                        frameon=False)
    fig.savefig(out, dpi=dpi, bbox_inches="tight")
    renderer = fig.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    outside = not any(box.overlaps(ax.get_tightbbox(renderer)) for ax in axes.flat if ax.get_visible())
    ticks = [[float(t) for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
             for ax in axes.flat if ax.get_visible()]
    plt.close(fig)
    size = _image_size(out)
    return Drawn(size, rows, columns, outside, ticks)


def _image_size(path: str | Path) -> tuple[int, int]:
    """A PNG's (width, height) in pixels from its header; (0, 0) for other formats."""
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return 0, 0
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


# --- saved runs -------------------------------------------------------------------------
def find_runs(paths: Sequence[str | Path]) -> list[Path]:
    """Run directories (holding ``config.yaml``) at or below each path, each once."""
    runs: dict[Path, Path] = {}
    for p in map(Path, paths):
        if not p.exists():
            raise ConfigError(f"no such run directory: {p}")
        if p.is_file() and p.name == "checkpoint.pt":
            p = p.parent
        if not p.is_dir():
            raise ConfigError(f"{p} is a file, not a run directory (a directory holding config.yaml, or a folder "
                              "of such directories)")
        if (p / "config.yaml").is_file():
            found = [p]
        else:  # os.walk follows symlinked run directories (Path.rglob does not before 3.13)
            found = sorted(Path(d) for d, _, files in os.walk(p, followlinks=True) if "config.yaml" in files)
        for run in found:
            runs.setdefault(run.resolve(), run)
    if not runs:
        raise ConfigError(f"no run directories (with config.yaml) under {', '.join(map(str, paths))}")
    return list(runs.values())


def config_identity(cfg: Config) -> dict[str, Any]:
    """The config's keys (dotted, ``update.lr``) that make its configuration, with their values."""
    flat: dict[str, Any] = {}
    for key, value in cfg.to_dict().items():
        if key in IDENTITY_FREE_KEYS:
            continue
        if isinstance(value, dict):  # a section
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


@dataclass
class _Group:
    env: str
    algo: str
    identity: dict[str, Any]
    x_name: str
    y_name: str
    seeds: dict[int, dict[float, float]]
    label: str = ""


def _label_groups(groups: list[_Group]) -> None:
    """Label each group by its algo, plus, where one env has several groups of an algo, the
    config keys in which those groups differ, in short form (``svgd-a2c kernel=imq(β=-0.3) lr=0.001``:
    :func:`steinrl.run.labels.settings_label`)."""
    missing = object()
    for group in groups:
        twins = [g for g in groups if (g.env, g.algo) == (group.env, group.algo)]
        keys = sorted({k for g in twins for k in g.identity})
        differ = [k for k in keys if any(g.identity.get(k, missing) != group.identity.get(k, missing) for g in twins)]
        settings = settings_label({k: group.identity.get(k, "-") for k in differ}, keys)
        group.label = " ".join(part for part in (group.algo, settings) if part)


def collect_curves(paths: Sequence[str | Path], key: str | None) -> list[_Group]:
    """The groups of runs at or below ``paths`` (env x algo x resolved config), each with
    ``seed -> {x: value}`` of ``key`` (None: each run's headline metric; x: the job's
    ``x_metric``, or the iteration). A seed seen twice in one group keeps the longer curve."""
    from steinrl.run.algos import parse_algo

    groups: list[_Group] = []
    for run in find_runs(paths):
        cfg = read_run_config(run / "config.yaml")
        job = parse_algo(cfg.algo).job
        run_key, x_key = key or job.headline_metric, job.x_metric or "iteration"
        curve = {float(r[x_key]): float(r[run_key]) for r in read_metrics(run)
                 if isinstance(r.get(run_key), (int, float)) and isinstance(r.get(x_key), (int, float))}
        if not curve:
            print(f"warning: {run} has no {run_key!r} values; skipped", file=sys.stderr)
            continue
        identity = config_identity(cfg)
        group = next((g for g in groups if (g.env, g.algo, g.identity) == (cfg.env, cfg.algo, identity)), None)
        if group is None:
            group = _Group(cfg.env, cfg.algo, identity, x_key.split("/")[-1], run_key, {})
            groups.append(group)
        if cfg.seed in group.seeds:
            print(f"warning: seed {cfg.seed} of {cfg.algo} on {cfg.env} appears in more than one run directory with "
                  f"the same config (again in {run}); counting it once (the longer curve)", file=sys.stderr)
            if len(group.seeds[cfg.seed]) >= len(curve):
                continue
        group.seeds[cfg.seed] = curve
    _label_groups(groups)
    return groups


def plot_runs(paths: Sequence[str | Path], out: str | Path, key: str | None = None,
              title: str | None = None) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Draw mean ± std across seeds of ``key`` per env x algo x config into ``out`` (one panel per env;
    a band only where 3 seeds or more reached the point, within the seeds' range).

    ``key`` None: each run's headline metric (the job's ``headline_metric``).

    :return: per (env, group label), the x values, mean, std and number of seeds at each x.
    """
    groups = collect_curves(paths, key)
    if not groups:
        raise ConfigError(f"no run under {', '.join(map(str, paths))} has values of {key!r}")
    envs = sorted({g.env for g in groups})
    panels, drawn = [], {}
    for env in envs:
        curves = []
        for g in sorted((g for g in groups if g.env == env), key=lambda g: g.label):
            xs = sorted(set().union(*g.seeds.values()))
            lengths = sorted({len(c) for c in g.seeds.values()})
            if len(lengths) > 1:
                unit = "iterations" if g.x_name == "iteration" else "points"
                print(f"warning: {g.label} on {env}: curves have unequal lengths ({lengths[0]} to {lengths[-1]} "
                      f"{unit}); each point is averaged over the seeds that reached it", file=sys.stderr)
            values = [[c[x] for c in g.seeds.values() if x in c] for x in xs]
            mean, std = np.array([np.mean(v) for v in values]), np.array([np.std(v) for v in values])
            curves.append(Curve(f"{g.label} (n={len(g.seeds)})", xs, mean, mean - std, mean + std,
                                n=[len(v) for v in values], data_low=[min(v) for v in values],
                                data_high=[max(v) for v in values]))
            drawn[(env, g.label)] = {"iteration": [int(x) if x == int(x) else x for x in xs], "mean": mean.tolist(),
                                     "std": std.tolist(), "n": [len(v) for v in values]}
        first = next(g for g in groups if g.env == env)
        panels.append(Panel(title or env, first.x_name, first.y_name, curves))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    draw_panels(panels, out, band="mean ± std over seeds")
    return drawn
