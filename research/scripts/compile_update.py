#!/usr/bin/env python
"""Does Inductor pay for the PPO minibatch step on the CPU? Eager against ``torch.compile``, alternated.

    python research/scripts/compile_update.py [--env HalfCheetah-v5] [--particles 16] [--steps 32] [--rounds 3]

At mujoco_throughput's defaults (``svgd-ppo``, ``--preset mujoco-ppo``: SB3's PPO per particle,
M = 16 x E = 4, [64, 64] tanh networks, 64-sample minibatches, a joint critic), after one
iteration, on one batch and one torch thread, it times ``--steps`` minibatch steps three ways,
in alternating rounds (every variant sees the same load):

1. eager: the policy's forward, PPO's clipped surrogate and the particle step as the update runs them;
2. the forward and surrogate compiled (``torch.compile``, Inductor), the particle step eager;
3. the forward eager, the whole particle step compiled (``torch.compile`` of
   ``ParticleOptimizer.step`` with compiled autograd: backward, clipping, the Stein direction, Adam).

Last line: ``compile_update eager_ms=<per step> forward_compiled_ms=<x> step_compiled_ms=<x>
compile_s=<seconds the compilations took>`` (the best round of each).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository (research/scripts/../..)

from steinrl.rl.minibatches import minibatch_keys, minibatches  # noqa: E402
from steinrl.rl.samples import compact  # noqa: E402
from steinrl.run.config import load_config  # noqa: E402
from steinrl.run.trainer import Trainer  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                allow_abbrev=False)
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument("--particles", type=int, default=16)
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    cfg = load_config("svgd-ppo", args.env, {"particles": args.particles, "rollout.envs_per_particle": 4,
                                             "iterations": 3, "run.progress": False}, preset="mujoco-ppo")
    trainer = Trainer(cfg)
    trainer.step()
    job = trainer.job
    agent, est, critic = job.agent, job.estimator, job.agent.critic
    batch = agent.collect(job.sampler, 1)
    job.set_step_sizes(1)
    advantages = est.advantages(batch, critic, normalize=False)
    data = compact(batch, advantages.advantages, advantages.value_targets, agent.device)
    with torch.no_grad():  # what PPO.learn trains on (the preset's joint critic, no value clipping)
        samples = {"obs": agent.policy.obs_norm(data.obs), "actions": data.actions, "mask": data.mask,
                   "advantages": data.advantages, "old_log_prob": agent.policy.log_prob(data.obs, data.actions)[0],
                   "targets": data.targets.float()}
    parts = list(minibatches(samples, est.settings.minibatches, minibatch_keys(data.mask, 1, job.draws)[0]))
    parts = (parts * (1 + args.steps // len(parts)))[:args.steps]

    def objective(part: dict) -> torch.Tensor:
        log_prob, _ = agent.policy.log_prob(part["obs"], part["actions"], mask=part["mask"])
        return est.surrogate(log_prob, part["old_log_prob"], part["advantages"], part["mask"])

    def particle_step(objective: torch.Tensor, part: dict) -> object:  # PPO.learn's step with the joint critic
        value_loss = critic.value_loss(part["obs"], part["targets"], part["mask"])
        return agent.particle_optimizer.step(objective, aux_loss=critic.vf_coef * value_loss.sum(),
                                    aux_params=list(critic.net.parameters()), aux_optimizer=critic.optimizer)

    torch._dynamo.config.compiled_autograd = True
    forward_c, step_c = torch.compile(objective, dynamic=False), torch.compile(particle_step, dynamic=False)
    variants = {"eager": (objective, particle_step), "forward_compiled": (forward_c, particle_step),
                "step_compiled": (objective, step_c)}

    def run(name: str, n: int) -> float:
        forward, step = variants[name]
        start = time.perf_counter()
        with agent.policy.obs_norm.bypassed():
            for part in parts[:n]:
                step(forward(part), part)
        return time.perf_counter() - start

    start = time.perf_counter()
    for name in variants:  # compile (and warm up)
        run(name, 3)
    compile_s = time.perf_counter() - start
    best = dict.fromkeys(variants, float("inf"))
    for r in range(args.rounds):
        for name in variants:
            best[name] = min(best[name], run(name, args.steps))
        print(f"round {r + 1}: " + ", ".join(f"{k} {1e3 * run_s / args.steps:.2f} ms/step"
                                            for k, run_s in best.items()), flush=True)
    print(f"compile_update eager_ms={1e3 * best['eager'] / args.steps:.2f} "
          f"forward_compiled_ms={1e3 * best['forward_compiled'] / args.steps:.2f} "
          f"step_compiled_ms={1e3 * best['step_compiled'] / args.steps:.2f} compile_s={compile_s:.1f}")


if __name__ == "__main__":
    main()
