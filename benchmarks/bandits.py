#!/usr/bin/env python
"""Contextual-bandit benchmark: agents x seeds on a task and protocol, Showdown-style tables.

    python benchmarks/bandits.py --env Mushroom --protocol showdown --seeds 0,1,2,3,4
    python benchmarks/bandits.py --env Wheel --delta 0.5,0.7,0.9,0.95,0.99 --seeds 0,1,2,3,4
    python benchmarks/bandits.py --env Mushroom --protocol s2vgd --agents s2vgd-ts,svgd-ts,vmg-ts,greedy,...

Each run is one ``steinrl.Trainer`` of the bandit job (``--jobs`` processes at a time, one
thread each). ``--agents`` takes algorithm names, optionally with config overrides after a
colon: ``egreedy:agent.epsilon=0.03``, ``svgd-ts:likelihood.learn_noise=true``. The
protocol is the preset ``bandit-<protocol>`` (configs/presets/).

Prints one line per env x agent (x delta), the last lines in the form
``bandit env=<E> protocol=<P> agent=<A> seeds=<n> cum_reward=<mean> cum_reward_se=<se>
cum_regret=<mean> cum_regret_se=<se> norm_reward=<reward / optimal reward> seconds_per_run=<s>``,
and writes a markdown table (normalised cumulative reward ± s.e.) and a cumulative-regret
figure (mean ± s.e. over seeds) to ``--out`` (default docs/).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # one BLAS thread per run
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DEFAULT_AGENTS = ("svgd-ts,s2vgd-ts,vmg-ts,kron-ts,independent-ts,svgd-ts:likelihood.learn_noise=true,"
                  "s2vgd-ts:likelihood.learn_noise=true,bbb-ts,badam-ts,kflow-ts,rdp-ts,greedy,"
                  "egreedy:agent.epsilon=0.01,egreedy:agent.epsilon=0.03,linfullpost,neurallinear,uniform")


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


def parse_agent(spec: str) -> tuple[str, dict[str, str]]:
    """``name[:key=value,...]`` -> (algorithm, overrides)."""
    name, _, rest = spec.partition(":")
    overrides = dict(item.split("=", 1) for item in _top_level_split(rest) if item)
    return name, overrides


def run_one(job: tuple[str, str, dict, int, str]) -> dict:
    """Play one bandit run to the end; returns its final scalars and regret curve."""
    import torch

    import steinrl
    from steinrl.run.config import parse_set

    env, algo, overrides, seed, preset = job
    torch.set_num_threads(1)
    cfg = steinrl.load_config(algo, env, {**parse_set([f"{k}={v}" for k, v in overrides.items()]), "seed": seed},
                              preset=preset)
    trainer = steinrl.Trainer(cfg)
    start = time.perf_counter()
    curve, rounds = [], []
    while not trainer.done:
        scalars = trainer.step()
        curve.append(scalars["bandit/cumulative_regret"])
        rounds.append(scalars["bandit/rounds"])
    return {"seconds": time.perf_counter() - start, "reward": scalars["bandit/cumulative_reward"],
            "regret": scalars["bandit/cumulative_regret"], "optimal": scalars["bandit/optimal_reward"],
            "curve": curve, "rounds": rounds}


def se(x: np.ndarray) -> float:
    return float(np.std(x, ddof=1) / np.sqrt(len(x))) if len(x) > 1 else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", default="Mushroom", help="bandit task (Mushroom, Wheel, Linear, SparseLinear)")
    p.add_argument("--protocol", default="showdown", help="showdown or s2vgd (the preset bandit-<protocol>)")
    p.add_argument("--agents", default=DEFAULT_AGENTS, help="comma-separated algorithm specs (see above)")
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--delta", help="Wheel: comma-separated exploration parameters delta")
    p.add_argument("--rounds", type=int, help="override the protocol's number of rounds")
    p.add_argument("--jobs", type=int, default=2, help="runs at a time (one thread each)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs"),
                   help="directory of the table and figure")
    args = p.parse_args()

    specs = [s for s in _split_specs(args.agents)]
    seeds = [int(s) for s in args.seeds.split(",")]
    deltas = [float(d) for d in args.delta.split(",")] if args.delta else [None]
    preset = f"bandit-{args.protocol}"
    jobs, keys = [], []
    for delta in deltas:
        for spec in specs:
            algo, overrides = parse_agent(spec)
            if delta is not None:
                overrides = {**overrides, "task.delta": str(delta)}
            if args.rounds:
                overrides = {**overrides, "rounds": str(args.rounds)}
            for seed in seeds:
                jobs.append((args.env, algo, overrides, seed, preset))
                keys.append((delta, spec))
    print(f"{len(jobs)} runs: {args.env}, protocol {args.protocol}, {len(specs)} agents x {len(seeds)} seeds"
          + (f" x {len(deltas)} deltas" if deltas != [None] else ""), flush=True)
    results: dict[tuple, list[dict]] = {}
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for key, result in zip(keys, pool.map(run_one, jobs)):
            results.setdefault(key, []).append(result)
            print(f"  {key[1]}{'' if key[0] is None else f' delta={key[0]}'} seed done: reward {result['reward']:.0f} "
                  f"regret {result['regret']:.0f} ({result['seconds']:.0f} s)", flush=True)
    lines, rows = [], {}
    for (delta, spec), runs in results.items():
        reward = np.array([r["reward"] for r in runs])
        regret = np.array([r["regret"] for r in runs])
        optimal = np.array([r["optimal"] for r in runs])
        env = args.env if delta is None else f"{args.env}(delta={delta})"
        norm = reward / optimal
        rows[(delta, spec)] = (norm.mean(), se(norm), regret.mean(), se(regret), reward.mean(), se(reward),
                               np.mean([r["seconds"] for r in runs]))
        lines.append(f"bandit env={env} protocol={args.protocol} agent={spec} seeds={len(runs)} "
                     f"cum_reward={reward.mean():.1f} cum_reward_se={se(reward):.1f} cum_regret={regret.mean():.1f} "
                     f"cum_regret_se={se(regret):.1f} norm_reward={reward.mean() / optimal.mean():.3f} "
                     f"seconds_per_run={np.mean([r['seconds'] for r in runs]):.1f}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"bandits_{args.env}_{args.protocol}"
    write_table(out / f"{stem}.md", args, specs, deltas, rows, seeds)
    plot_curves(out / f"{stem}.png", args, specs, deltas, results)
    print(f"wrote {out / (stem + '.md')} and {out / (stem + '.png')}")
    for line in lines:
        print(line)


def _split_specs(text: str) -> list[str]:
    """Split on commas that start a new algorithm (not those inside ``name:k=v,k=v``)."""
    specs: list[str] = []
    for part in _top_level_split(text):
        if specs and "=" in part and ":" not in part and "=" in specs[-1]:
            specs[-1] += "," + part
        else:
            specs.append(part)
    return specs


def write_table(path: Path, args, specs, deltas, rows, seeds) -> None:
    head = ["agent"] + ([f"delta={d}" for d in deltas] if deltas != [None] else
                        ["total reward", "normalised reward", "regret", "s / run"])
    lines = [f"Normalised cumulative reward (cumulative reward / the optimal arms' rewards; mean ± s.e. over seeds "
             f"{','.join(map(str, seeds))}) on {args.env}, protocol {args.protocol}.", "",
             f"Command: `python benchmarks/bandits.py --env {args.env} --protocol {args.protocol} --seeds "
             f"{args.seeds}" + (f" --delta {args.delta}" if args.delta else "") +
             (f" --rounds {args.rounds}" if args.rounds else "") + (f" --agents {args.agents}" if args.agents !=
                                                                  DEFAULT_AGENTS else "") + "`", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for spec in specs:
        if deltas == [None]:
            norm, norm_se, regret, regret_se, reward, reward_se, seconds = rows[(None, spec)]
            cells = [f"{reward:.0f} ± {reward_se:.0f}", f"{norm:.3f} ± {norm_se:.3f}", f"{regret:.0f} ± {regret_se:.0f}",
                     f"{seconds:.0f}"]
        else:
            cells = [f"{rows[(d, spec)][0]:.3f} ± {rows[(d, spec)][1]:.3f}" for d in deltas]
        lines.append(f"| {spec} | " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n")


def plot_curves(path: Path, args, specs, deltas, results) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(deltas), figsize=(6.4 * len(deltas), 4.4), squeeze=False)
    colors = plt.cm.tab20(np.linspace(0, 1, 20))
    for ax, delta in zip(axes[0], deltas):
        top = 0.0
        for i, spec in enumerate(specs):
            runs = results[(delta, spec)]
            curves = np.array([r["curve"] for r in runs])
            x = runs[0]["rounds"]
            mean = curves.mean(0)
            band = curves.std(0, ddof=1) / np.sqrt(len(runs)) if len(runs) > 1 else np.zeros_like(mean)
            label = spec
            if spec == "uniform" and len(specs) > 1:  # linear regret: it would flatten every other curve
                label = f"uniform (off scale: {mean[-1]:.0f})"
            else:
                top = max(top, float((mean + band).max()))
            style = dict(color=colors[(2 * i) % 20 if i < 10 else (2 * i + 1) % 20], ls="-" if i < 10 else "--")
            ax.plot(x, mean, label=label, **style)
            ax.fill_between(x, mean - band, mean + band, alpha=0.15, color=style["color"])
        if top > 0:
            ax.set_ylim(0, 1.1 * top)
        ax.set_xlabel("round")
        ax.set_ylabel("cumulative regret")
        ax.set_title(args.env + ("" if delta is None else f" (delta={delta})") + f", {args.protocol}")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
