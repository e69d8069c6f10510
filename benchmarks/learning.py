#!/usr/bin/env python
"""Learning benchmark: the papers' settings, several seeds and algorithms, one table.

    python benchmarks/learning.py                                  # 3 tasks x 5 algos x 3 seeds
    python benchmarks/learning.py --env CartpoleSwingUp --algo s2vgd-a2c --seeds 3
    python benchmarks/learning.py --env InvertedDoublePendulum-v5 --algo s2vgd-a2c --sb3 a2c,ppo

Every run is ``train.py`` in its own process (``--jobs`` at a time, one torch thread
each), logging to ``<logdir>/<env>/<algo>/seed<k>``. Per task and algorithm it reports:

- ``peak``: the peak over iterations of the seed-averaged curve of
  ``rollout/ep_rew_max_particle`` (the papers' metric: max over particles of each
  particle's mean return over its whole episodes, averaged over seeds, no smoothing);
- ``it95``: the first iteration at which that curve reaches 95% of its rise from
  iteration 0 to the peak;
- ``final``: the seed-averaged ``rollout/ep_rew_mean`` over the last 10 iterations;
- ``wall``: mean wall-clock seconds per run.

``--sb3 a2c,ppo`` also trains Stable-Baselines3's A2C / PPO (default hyper-parameters,
one env) on the same task for the same number of env steps *per particle* and the same
seeds, and reports under ``peak (mean)`` the seed-averaged peak of their mean return over
the last 10 episodes (compare with steinrl's ``peak (mean)``: the peak of the
seed-averaged mean return over all particles' episodes of an iteration).

Results go to ``benchmarks/results/learning.json`` (merged with earlier results) and
``benchmarks/results/learning.md``; the last line is a summary with the targets.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steinrl.run.logger import read_metrics  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_ENVS = ["CartpoleSwingUp", "DoublePendulum", "Cartpole"]
DEFAULT_ALGOS = ["s2vgd-a2c", "svgd-a2c", "s2vgd-reinforce", "svgd-reinforce", "independent-a2c"]
#: What the SVPG authors reported (seed-averaged peak of max-over-particles return).
REPORTED = {"CartpoleSwingUp": 405.0, "DoublePendulum": -341.0, "Cartpole": 4900.0}


def run_one(env: str, algo: str, seed: int, logdir: Path, sets: list[str], iterations: int | None) -> dict:
    run_dir = logdir / env.replace("/", "_") / algo / f"seed{seed}"
    cmd = [sys.executable, str(ROOT / "train.py"), "--env", env, "--algo", algo, "--seed", str(seed),
           "--logdir", str(logdir), "--run-name", f"seed{seed}", "--no-progress"]
    if iterations:
        cmd += ["--iterations", str(iterations)]
    for s in sets:
        cmd += ["--set", s]
    if (run_dir / "checkpoint.pt").exists():
        cmd = [sys.executable, str(ROOT / "train.py"), "--resume", str(run_dir), "--no-progress"]
        if iterations:
            cmd += ["--iterations", str(iterations)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    result = read_run(env, algo, seed, logdir)
    print(f"  done {env} {algo} seed {seed}: {len(result['mean'])} iterations in {wall:.0f}s, "
          f"peak max-particle {max(result['max_particle']):.1f}", flush=True)
    return result


def read_run(env: str, algo: str, seed: int, logdir: Path) -> dict:
    """The curves of a finished run from its ``metrics.jsonl``."""
    run_dir = logdir / env.replace("/", "_") / algo / f"seed{seed}"
    rows = read_metrics(run_dir)
    if not rows:
        raise FileNotFoundError(f"no metrics in {run_dir}")
    return {"env": env, "algo": algo, "seed": seed, "run_dir": str(run_dir),
            "wall": sum(r["time/iteration_seconds"] for r in rows),
            "max_particle": [r["rollout/ep_rew_max_particle"] for r in rows],
            "mean": [r["rollout/ep_rew_mean"] for r in rows],
            "steps_per_particle": float(np.sum([r["time/steps_per_particle"] for r in rows]))}


def summarise(runs: list[dict]) -> dict:
    n = min(len(r["max_particle"]) for r in runs)
    curve = np.mean([r["max_particle"][:n] for r in runs], axis=0)
    mean_curve = np.mean([r["mean"][:n] for r in runs], axis=0)
    peak = float(curve.max())
    rise = peak - curve[0]
    it95 = int(np.argmax(curve >= curve[0] + 0.95 * rise)) if rise > 0 else 0
    return {"seeds": [r["seed"] for r in runs], "iterations": n, "peak": peak, "it95": it95,
            "peak_mean": float(mean_curve.max()), "mean_curve": mean_curve.tolist(),
            "final": float(mean_curve[-10:].mean()), "wall": float(np.mean([r["wall"] for r in runs])),
            "steps_per_particle": float(np.mean([r["steps_per_particle"] for r in runs])),
            "curve": curve.tolist()}


def run_sb3(env: str, name: str, seed: int, steps: int) -> dict:
    """SB3 A2C / PPO with default hyper-parameters; returns the peak of ep_rew_mean."""
    import torch
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    from steinrl import envs as steinrl_envs

    torch.set_num_threads(1)
    env_id = steinrl_envs.resolve_env_id(env)
    venv = make_vec_env(env_id, n_envs=1, seed=seed)  # SB3 defaults: one env
    curve: list[float] = []

    class Record(BaseCallback):
        def _on_rollout_end(self) -> None:
            buf = self.model.ep_info_buffer
            if buf:
                curve.append(float(np.mean([e["r"] for e in list(buf)[-10:]])))

        def _on_step(self) -> bool:
            return True

    cls = {"a2c": A2C, "ppo": PPO}[name]
    model = cls("MlpPolicy", venv, seed=seed, device="cpu")
    t0 = time.perf_counter()
    model.learn(steps, callback=Record())
    wall = time.perf_counter() - t0
    venv.close()
    print(f"  done {env} sb3-{name} seed {seed}: {steps} steps in {wall:.0f}s, peak {max(curve):.1f}", flush=True)
    return {"seed": seed, "peak": max(curve), "final": float(np.mean(curve[-10:])), "wall": wall, "curve": curve}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--env", action="append", help="task (repeatable; default: the three paper tasks)")
    p.add_argument("--algo", action="append", help="algorithm (repeatable; default: five)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    p.add_argument("--iterations", type=int, help="override the task's iteration count")
    p.add_argument("--set", action="append", default=[], help="config override for every run (key=value)")
    p.add_argument("--tag", default="paper", help="name of this result set (e.g. the network)")
    p.add_argument("--jobs", type=int, default=2, help="runs in parallel")
    p.add_argument("--logdir", default=str(RESULTS / "runs"), help="where the runs go")
    p.add_argument("--sb3", default="", help="comma-separated SB3 baselines to add: a2c,ppo")
    p.add_argument("--report-only", action="store_true",
                   help="train nothing: rebuild the table from the finished runs in --logdir")
    args = p.parse_args()
    env_list = args.env or DEFAULT_ENVS
    algos = args.algo or DEFAULT_ALGOS
    logdir = Path(args.logdir) / args.tag
    jobs = [(e, a, s) for e in env_list for a in algos for s in range(args.seeds)]
    print(f"learning benchmark '{args.tag}': {len(jobs)} runs, {args.jobs} at a time, logging to {logdir}",
          flush=True)
    if args.report_only:
        runs = [read_run(*j, logdir) for j in jobs]
    else:
        with ThreadPoolExecutor(args.jobs) as pool:
            runs = list(pool.map(lambda j: run_one(*j, logdir, args.set, args.iterations), jobs))

    sb3_rows: dict[str, dict[str, dict]] = {}
    if not args.report_only:
        for env in env_list:
            for name in filter(None, args.sb3.split(",")):
                steps = int(np.mean([r["steps_per_particle"] for r in runs if r["env"] == env]))
                sb3_runs = [run_sb3(env, name, s, steps) for s in range(args.seeds)]
                sb3_rows.setdefault(env, {})[f"sb3-{name}"] = {
                    "seeds": list(range(args.seeds)), "steps": steps,
                    "peak": float(np.mean([r["peak"] for r in sb3_runs])),
                    "final": float(np.mean([r["final"] for r in sb3_runs])),
                    "wall": float(np.mean([r["wall"] for r in sb3_runs])),
                }

    RESULTS.mkdir(parents=True, exist_ok=True)
    out_json = RESULTS / "learning.json"
    lock = open(RESULTS / ".learning.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)  # several benchmark processes may finish at once
    results = json.loads(out_json.read_text()) if out_json.exists() else {}
    table = results.setdefault(args.tag, {})
    for env in env_list:
        for algo in algos:
            group = [r for r in runs if r["env"] == env and r["algo"] == algo]
            if group:
                table.setdefault(env, {})[algo] = {**summarise(group), "sets": args.set}
        table.setdefault(env, {}).update(sb3_rows.get(env, {}))
    out_json.write_text(json.dumps(results, indent=1))

    lines = []
    for tag, envs_table in results.items():
        lines += [f"### {tag}", "", "| task | algorithm | seeds | iterations | peak (max particle) | it95 | peak (mean) "
                  "| final mean | wall s/run | SVPG reported |", "|---|---|---|---|---|---|---|---|---|---|"]
        for env, algos_table in envs_table.items():
            for algo, r in algos_table.items():
                its = r.get("iterations", "-")
                rep = REPORTED.get(env, "-") if algo == "s2vgd-a2c" else ""
                peak_mean = r.get("peak_mean", r["peak"] if algo.startswith("sb3-") else None)
                pm = "-" if peak_mean is None else f"{peak_mean:.1f}"
                pk = "-" if algo.startswith("sb3-") else f"{r['peak']:.1f}"
                lines.append(f"| {env} | {algo} | {len(r['seeds'])} | {its} | {pk} | {r.get('it95', '-')} "
                             f"| {pm} | {r['final']:.1f} | {r['wall']:.0f} | {rep} |")
        lines.append("")
    (RESULTS / "learning.md").write_text("\n".join(lines))
    fcntl.flock(lock, fcntl.LOCK_UN)
    print("\n".join(lines))
    summary = []
    for env in env_list:
        r = table.get(env, {}).get("s2vgd-a2c")
        if r and env in REPORTED:
            summary.append(f"{env}={r['peak']:.1f}(target>={REPORTED[env]:g}:{'ok' if r['peak'] >= REPORTED[env] else 'short'})")
    print("learning " + (f"tag={args.tag} " + " ".join(summary) if summary else f"tag={args.tag}"))


if __name__ == "__main__":
    main()
