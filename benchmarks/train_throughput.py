#!/usr/bin/env python
"""Training throughput: steinrl's SVPG (fast and paper modes) vs Stable-Baselines3 A2C vs raw env stepping.

    python benchmarks/train_throughput.py [--iterations 5] [--sb3-steps 20000] [--window 10] [--clock cpu]
    python benchmarks/train_throughput.py --profile [--rows 12] [--clock cpu]

Measures, in one process and one torch thread, on CartpoleSwingUp at paper scale
(M = 16 particles, 5000 env steps per particle per iteration):

(a) ``svgd-a2c`` (``--algo``) with the ``fast`` preset: continuing sampling (50 envs per particle, 100
    steps each per iteration, episodes carry on), the critic's default 10 regression steps;
(b) ``svgd-a2c`` in the papers' whole-episode mode (``--preset paper``: 10 envs per particle; the
    critic's regression after the policy update, as before the swing-ups' files turned ``critic.overlap`` on);
(c) Stable-Baselines3 ``A2C("MlpPolicy")`` with n_envs = 16 on our single-env task, default
    hyper-parameters, learning for ``--sb3-steps`` env steps;
(d) raw stepping of our vectorized CartpoleSwingUp with random actions, at the env counts
    of (a) and (b). The summary line's ``env`` is the rate at the papers' 16 x 10 = 160 envs
    (round 1's and the speed issue's reference, 3.7 M steps/s there); the numpy envs step
    more envs per call faster, so (a)'s fraction against the raw env at its own 800 envs is
    printed too and is lower (about a third);
(e) where an iteration's time goes in each mode (rollout, advantages, policy update, critic);
(f) a window of ``--window`` whole iterations of each mode (``Trainer.step``: rollout, update,
    the logged scalars' host transfer), extrapolated to a 1000-iteration run (the swing-up's
    ``iterations``; early iterations, so whole episodes are as long as the untrained
    policies keep them).

(a) and (b) count env steps of all particles per second of wall time, rollout and update
included, after one warm-up iteration. Last line: ``train_throughput ours_fast=<steps/s>
ours_paper=<steps/s> sb3_a2c=<steps/s> env=<steps/s> ratio_vs_sb3=<fast/sb3>
fast_fraction_of_env=<fast/env> paper_fraction_of_env=<paper/env> peak_rss_mb=<m>
fast_1000_its_s=<s> paper_1000_its_s=<s>``.

``--set KEY=VALUE`` (repeatable) overrides steinrl's config in (a), (b) and (f), e.g.
``--set critic.overlap=true`` (the critic's regression on a second thread beside the policy
update; (e)'s "policy update" is then the update's time less the critic's own, so less than
the policy update by what the overlap hides).

``--clock cpu`` times everything in this process's CPU seconds instead of wall seconds: on
a shared machine (other processes on the cores), the steadier figure to compare runs by.

``--profile``: instead, one iteration of each mode part by part under the torch profiler,
the ops of each part by self CPU time (``--rows`` of them; the tables of research/results/train_throughput.md).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import steinrl.envs as envs  # noqa: E402
from steinrl.rl.samples import compact  # noqa: E402
from steinrl.run.config import load_config  # noqa: E402
from steinrl.run.trainer import Trainer  # noqa: E402

ENV = "CartpoleSwingUp"
#: what every figure is timed by (``--clock``)
clock = time.perf_counter
#: config overrides of (a), (b) and (f) (``--set``)
OVERRIDES: dict[str, object] = {}
#: each mode's own keys, before OVERRIDES (paper mode: the critic after the policy update)
MODE_KEYS: dict[str, dict[str, object]] = {"fast": {}, "paper": {"critic.overlap": False}}


def ours(algo: str, preset: str, iterations: int) -> tuple[float, dict[str, float], int]:
    """Steps/s of paper-scale iterations, ms per iteration of each part, and the env count."""
    cfg = load_config(algo, ENV, {**MODE_KEYS[preset], **OVERRIDES, "iterations": iterations + 1}, preset=preset)
    trainer = Trainer(cfg)
    job, agent, sampler = trainer.job, trainer.job.agent, trainer.job.sampler
    parts = dict.fromkeys(("rollout", "advantages", "policy update", "critic", "whole iteration"), 0.0)
    steps = 0
    for it in range(iterations + 1):
        t0 = clock()
        batch = agent.collect(sampler, it)
        t1 = clock()
        est = job.estimator.advantages(batch, agent.critic)
        t2 = clock()
        job.set_step_sizes(it)
        stats = job.learn(batch)  # the whole update (advantages again, policy, critic)
        t3 = clock()
        if it == 0:  # warm-up
            continue
        steps += batch.num_steps
        parts["rollout"] += t1 - t0
        parts["advantages"] += t2 - t1
        parts["whole iteration"] += (t1 - t0) + (t3 - t2)
        tc = clock()
        data = compact(batch, est.advantages, est.value_targets, agent.device)
        n = data.mask.shape[1]
        columns = agent.critic.draw_columns(n, job.draws.generators("critic", it)) if agent.critic.samples_columns(n) \
            else None
        agent.critic.fit(data, columns)
        parts["critic"] += clock() - tc
        assert bool(torch.isfinite(stats.surrogate).all())
    seconds = parts["whole iteration"]
    parts["policy update"] = seconds - parts["rollout"] - parts["advantages"] - parts["critic"]
    trainer.close()
    return steps / seconds, {k: 1e3 * v / iterations for k, v in parts.items()}, cfg.particles * \
        cfg.rollout.envs_per_particle


def run_seconds(algo: str, preset: str, window: int, iterations: int = 1000) -> float:
    """Seconds of an ``iterations``-iteration run, extrapolated from ``window`` whole
    iterations (``Trainer.step``) after one warm-up iteration."""
    trainer = Trainer(load_config(algo, ENV, {**MODE_KEYS[preset], **OVERRIDES, "iterations": iterations},
                                  preset=preset))
    trainer.step()
    t0 = clock()
    for _ in range(window):
        trainer.step()
    seconds = clock() - t0
    trainer.close()
    return seconds / window * iterations


def profile_parts(algo: str, preset: str, rows: int) -> None:
    """Print one iteration's parts (after two warm-up iterations) under the torch profiler,
    each part's ``rows`` costliest ops by self CPU time: the rollout, the advantages (the
    critic's values and GAE), the critic's regression on the compacted samples, and the
    policy update (the estimator's ``learn`` with those two already computed: compaction, policy
    gradient, SVGD step)."""
    from torch.profiler import ProfilerActivity, profile

    trainer = Trainer(load_config(algo, ENV, {**MODE_KEYS[preset], "iterations": 3}, preset=preset))
    job, agent, sampler = trainer.job, trainer.job.agent, trainer.job.sampler
    trainer.step(), trainer.step()

    def table(part: str, fn):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = clock()
            out = fn()
            ms = 1e3 * (clock() - t0)
        print(f"--- {preset}: {part}, {ms:.1f} ms under the profiler")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=rows, max_name_column_width=44))
        return out

    batch = table("rollout", lambda: agent.collect(sampler, 2))
    est = table("advantages", lambda: job.estimator.advantages(batch, agent.critic))
    data = compact(batch, est.advantages, est.value_targets, agent.device)
    n = data.mask.shape[1]
    gens = job.draws.generators("critic", 3)
    columns = agent.critic.draw_columns(n, gens) if agent.critic.samples_columns(n) else None
    loss = table("critic", lambda: agent.critic.fit(data, columns))
    job.estimator.advantages = lambda *_: est  # the update reuses both (instance attributes, this trainer only)
    agent.critic.prepare_fit = lambda *_: lambda: loss
    job.set_step_sizes(2)
    table("policy update", lambda: job.learn(batch))
    trainer.close()


def sb3_a2c(steps: int) -> float:
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(envs.resolve_env_id(ENV), n_envs=16, seed=0)
    model = A2C("MlpPolicy", venv, seed=0, device="cpu", verbose=0)
    model.learn(2_000)  # warm-up
    t0 = clock()
    model.learn(steps, reset_num_timesteps=False)
    seconds = clock() - t0
    venv.close()
    return steps / seconds


def raw_env(num_envs: int, total_steps: int = 400_000) -> float:
    venv = envs.make_vec(ENV, num_envs)
    venv.reset(seed=0)
    steps = max(total_steps // num_envs, 50)
    actions = np.random.default_rng(0).uniform(-1, 1, size=(steps, num_envs, 1)).astype(np.float32)
    for a in actions[:50]:
        venv.step(a)
    best = 0.0
    for _ in range(3):
        t0 = clock()
        for a in actions:
            venv.step(a)
        best = max(best, steps * num_envs / (clock() - t0))
    venv.close()
    return best


def main() -> None:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=5, help="timed paper-scale iterations per mode")
    p.add_argument("--sb3-steps", type=int, default=20_000, help="env steps of SB3 A2C to time")
    p.add_argument("--algo", default="svgd-a2c", help="steinrl algorithm of (a) and (b)")
    p.add_argument("--no-sb3", action="store_true", help="skip (c) (its figures print as nan)")
    p.add_argument("--window", type=int, default=10, help="(f): whole iterations timed per mode")
    p.add_argument("--profile", action="store_true", help="only profile one iteration of each mode, part by part")
    p.add_argument("--rows", type=int, default=12, help="--profile: ops per part")
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="time by wall seconds, or by this process's CPU seconds (steadier on a shared machine)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a config override of steinrl's runs (repeatable), e.g. critic.overlap=true")
    args = p.parse_args()
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            p.error(f"--set {item!r}: expected KEY=VALUE")
        OVERRIDES[key] = yaml.safe_load(value)
    global clock
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    if min(args.iterations, args.window, args.rows) < 1:
        p.error("--iterations, --window and --rows must be >= 1")
    torch.set_num_threads(1)
    if args.profile:
        print(f"torch {torch.__version__}, 1 thread; {args.algo} on {ENV}, M=16, 5000 steps per particle per iteration")
        for preset in ("fast", "paper"):
            profile_parts(args.algo, preset, args.rows)
        return
    print(f"torch {torch.__version__}, 1 thread; {args.algo} on {ENV}, M=16, 5000 steps per particle per iteration; "
          f"{args.clock} clock" + "".join(f"; {k}={v}" for k, v in OVERRIDES.items()))
    fast, fast_parts, fast_envs = ours(args.algo, "fast", args.iterations)
    print(f"(a) fast preset (continuing, {fast_envs} envs): {fast:,.0f} env steps/s")
    paper, paper_parts, paper_envs = ours(args.algo, "paper", args.iterations)
    print(f"(b) paper mode (whole episodes, {paper_envs} envs): {paper:,.0f} env steps/s")
    sb3 = float("nan") if args.no_sb3 else sb3_a2c(args.sb3_steps)
    print(f"(c) SB3 A2C, n_envs=16: {sb3:,.0f} env steps/s")
    env_rates = {n: raw_env(n) for n in sorted({fast_envs, paper_envs})}
    for n, rate in env_rates.items():
        print(f"(d) raw {ENV} vector env, {n} envs, random actions: {rate:,.0f} env steps/s (best of 3)")
    env = env_rates[paper_envs]
    print(f"    fast against the raw env at its own {fast_envs} envs: {fast / env_rates[fast_envs]:.3f}; "
          f"paper against {paper_envs} envs: {paper / env:.3f}")
    for name, parts in (("fast", fast_parts), ("paper", paper_parts)):
        print(f"(e) {name}: " + ", ".join(f"{k} {v:.1f} ms" for k, v in parts.items()))
    run_s = {name: run_seconds(args.algo, name, args.window) for name in ("fast", "paper")}
    print(f"(f) 1000 iterations, from {args.window} timed: fast {run_s['fast']:.1f} s, paper {run_s['paper']:.1f} s")
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"train_throughput ours_fast={fast:.0f} ours_paper={paper:.0f} sb3_a2c={sb3:.0f} env={env:.0f} "
          f"ratio_vs_sb3={fast / sb3:.1f} fast_fraction_of_env={fast / env:.3f} "
          f"paper_fraction_of_env={paper / env:.3f} peak_rss_mb={peak_rss:.0f} "
          f"fast_1000_its_s={run_s['fast']:.1f} paper_1000_its_s={run_s['paper']:.1f}")


if __name__ == "__main__":
    main()
