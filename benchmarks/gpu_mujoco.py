"""The MuJoCo Warp figures and checks on a GPU (benchmarks/gpu_mujoco_checks.sh runs every part in one go).

    python benchmarks/gpu_mujoco.py raw     [--tasks ...] [--worlds 1024,4096,16384] [--out DIR]
    python benchmarks/gpu_mujoco.py checks  [--tasks ...] [--out DIR]
    python benchmarks/gpu_mujoco.py train   [--tasks Hopper-v5,HalfCheetah-v5] [--seconds 300] [--out DIR]
    python benchmarks/gpu_mujoco.py summary [--out DIR]

Parts (each appends its results to ``DIR/results.jsonl`` and prints a line per task):

- ``raw``: env steps per second of ``WarpMujocoTask.step`` alone (uniform random actions drawn on the
  device, autoresets included) at each world count, after a warm-up (kernels compiled, the physics
  recorded as a Warp graph); also with each kernel launched eagerly (``raw_eager_<n>``);
- ``checks``: on a small svgd-ppo run of the task (64 worlds per particle, continuing sampling):
  ``capture_ok`` (``run.cuda_graph on`` captured the iteration, physics included, and replays it),
  ``graphed_eq_eager`` (its logged rows equal an eager run's, 5 iterations), ``resume_exact`` (a
  graphed run saved after 2 iterations and restored gives the straight run's next 2 rows);
- ``train``: ``svgd-ppo --preset gpu-mujoco`` for ``--seconds`` of wall time, compile included:
  training env steps per second (env steps over training seconds), the wall time (from the start of
  the process's build of the trainer) at which the training return of the best particle first
  reached the task's target, and at the end the held-out pick: every particle's deterministic mean
  over 3 episodes of Gymnasium's env (seeds 10000+), then the best one's mean over 10 fresh
  episodes (seeds 20000+), deterministic;
- ``summary``: one line per task from ``results.jsonl``:
  ``gpu_mujoco task=... raw_1024=... raw_4096=... raw_16384=... train_steps_per_s=... t_target_s=...
  heldout=... capture_ok=... graphed_eq_eager=... resume_exact=...`` (``-``: not measured).

Targets (issue 53): Hopper-v5 > 3000, HalfCheetah-v5 > 5819 (rl-zoo3's 10⁶-step PPO figure).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGETS = {"Hopper-v5": 3000.0, "HalfCheetah-v5": 5819.0}
TASKS = ("Hopper-v5", "HalfCheetah-v5", "Walker2d-v5", "Ant-v5", "Swimmer-v5", "InvertedDoublePendulum-v5",
         "steinrl/SparseHalfCheetah-v1")
SMALL = {"particles": 2, "rollout.envs_per_particle": 64, "rollout.batch_size": 512, "rollout.sampling": "continuing",
         "rollout.vectorization": "warp", "estimator.minibatches": 4, "estimator.epochs": 2, "run.progress": False,
         "run.tensorboard": False, "device": "cuda"}


def record(out: Path, task: str, **values: Any) -> None:
    with open(out / "results.jsonl", "a") as f:
        f.write(json.dumps({"task": task, **values}) + "\n")


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def raw(task_id: str, worlds: list[int], out: Path, device: str, steps: int = 50) -> None:
    from steinrl.envs.warp_mujoco import make_warp_vec

    for n in worlds:
        for graph in (True, False):
            task = make_warp_vec(task_id, n, device=device, physics_graph=graph)
            task.reset(seed=0)
            gen = torch.Generator(device=task.device).manual_seed(0)
            actions = torch.rand((steps + 3, n, task.nu), generator=gen, device=task.device) * 2 - 1
            for a in actions[:3]:
                task.step(a)
            task.check_overflow()
            sync()
            start = time.perf_counter()
            for a in actions[3:]:
                task.step(a)
            sync()
            rate = n * steps / (time.perf_counter() - start)
            task.check_overflow()
            key = f"raw_{n}" if graph else f"raw_eager_{n}"
            record(out, task_id, **{key: round(rate)})
            print(f"gpu_mujoco_raw task={task_id} worlds={n} physics_graph={int(graph)} steps_per_s={rate:.0f}",
                  flush=True)
            task.close()
            del task
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


def _strip(rows: list[dict]) -> list[dict]:
    return [{k: repr(v) for k, v in r.items() if not k.startswith("time/") or k == "time/total_env_steps"}
            for r in rows]


def checks(task_id: str, out: Path, tmp: Path) -> None:
    import steinrl

    def trainer(graph: str) -> Any:
        return steinrl.Trainer(steinrl.load_config("svgd-ppo", task_id, {**SMALL, "run.cuda_graph": graph}))

    result: dict[str, Any] = {}
    try:
        graphed = trainer("on")
        replayed = _strip([graphed.step() for _ in range(5)])
        result["capture_ok"] = int(graphed.job.graph.graph is not None and graphed.job.graph.failed is None)
        if graphed.job.graph.failed:
            result["capture_error"] = graphed.job.graph.failed[:200]
        eager = trainer("off")
        result["graphed_eq_eager"] = int(replayed == _strip([eager.step() for _ in range(5)]))
        straight = trainer("on")
        expected = _strip([straight.step() for _ in range(4)])
        first = trainer("on")
        head = _strip([first.step() for _ in range(2)])
        first.save(tmp / "c.pt")
        second = trainer("on")
        second.restore(tmp / "c.pt")
        result["resume_exact"] = int(head + _strip([second.step() for _ in range(2)]) == expected)
    except Exception as exc:  # a figure of the script, not its end: the next task still runs
        result["checks_error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    record(out, task_id, **result)
    print(f"gpu_mujoco_checks task={task_id} " + " ".join(f"{k}={v}" for k, v in result.items()), flush=True)


def heldout(cfg: Any, policy: Any) -> tuple[float, int]:
    """The deterministic held-out pick: the best particle on 3 episodes, scored on 10 fresh ones."""
    from steinrl.rl.evaluation import run_episodes

    pick = run_episodes(cfg, policy, 3, deterministic=True, seed=10_000)["returns"]
    best = int(np.argmax([np.mean(r) for r in pick]))
    fresh = run_episodes(cfg, policy, 10, deterministic=True, seed=20_000)["returns"][best]
    return float(np.mean(fresh)), best


def train(task_id: str, seconds: float, out: Path, device: str, overrides: dict[str, Any]) -> None:
    import steinrl

    wall0 = time.perf_counter()
    cfg = steinrl.load_config("svgd-ppo", task_id, {"max_seconds": float(seconds), "run.progress": False,
                                                      "run.tensorboard": False, "run.logdir": str(out / "runs"),
                                                      "device": device, **overrides}, preset="gpu-mujoco")
    trainer = steinrl.Trainer(cfg)
    target = TARGETS.get(task_id, math.inf)
    t_target = None
    rows = []
    while not trainer.job.done(trainer.iteration) and time.perf_counter() - wall0 < seconds:
        row = trainer.step()
        rows.append(row)
        if t_target is None and row["rollout/ep_rew_max_particle"] >= target:
            t_target = time.perf_counter() - wall0
    wall = time.perf_counter() - wall0
    steps, train_s = rows[-1]["time/total_env_steps"], rows[-1]["time/total_seconds"]
    score, particle = heldout(cfg, trainer.job.agent.policy)
    result = {"train_steps_per_s": round(steps / train_s), "train_env_steps": int(steps), "train_wall_s": round(wall),
              "train_iterations": len(rows), "train_best_return": round(max(r["rollout/ep_rew_max_particle"]
                                                                           for r in rows), 1),
              "t_target_s": "-" if t_target is None else round(t_target), "heldout": round(score, 1),
              "heldout_particle": particle, "target": target if math.isfinite(target) else "-"}
    record(out, task_id, **result)
    print(f"gpu_mujoco_train task={task_id} " + " ".join(f"{k}={v}" for k, v in result.items()), flush=True)


def summary(out: Path) -> None:
    merged: dict[str, dict[str, Any]] = {}
    path = out / "results.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        row = json.loads(line)
        merged.setdefault(row.pop("task"), {}).update(row)
    keys = ("raw_1024", "raw_4096", "raw_16384", "raw_eager_16384", "train_steps_per_s", "t_target_s", "heldout",
            "target", "capture_ok", "graphed_eq_eager", "resume_exact")
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    for task in [t for t in TASKS if t in merged] + [t for t in merged if t not in TASKS]:
        values = merged[task]
        extra = " ".join(f"{k}={v}" for k, v in values.items() if k.endswith("error"))
        print(f"gpu_mujoco task={task} " + " ".join(f"{k}={values.get(k, '-')}" for k in keys)
              + f" device={device.replace(' ', '_')}" + (f" {extra}" if extra else ""), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("part", choices=("raw", "checks", "train", "summary"))
    parser.add_argument("--tasks", default=None, help="comma-separated ids (default: all seven; train: the targets')")
    parser.add_argument("--worlds", default="1024,4096,16384")
    parser.add_argument("--seconds", type=float, default=300.0, help="train: wall seconds per task")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu_mujoco"))
    parser.add_argument("--device", default="cuda", help="raw / train: cpu checks the script itself")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="train: a config override (e.g. rollout.envs_per_particle=8 for a dry run)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(out)  # MuJoCo's MUJOCO_LOG.TXT lands there
    if args.part == "summary":
        summary(out)
        return
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_mujoco: needs a CUDA device (--device cpu checks the script)")
    import yaml

    overrides = {k: yaml.safe_load(v) for k, _, v in (item.partition("=") for item in args.set)}
    default = ",".join(TARGETS) if args.part == "train" else ",".join(TASKS)
    for task in (args.tasks or default).split(","):
        if args.part == "raw":
            raw(task, [int(n) for n in args.worlds.split(",")], out, args.device)
        elif args.part == "checks":
            checks(task, out, out)
        else:
            train(task, args.seconds, out, args.device, overrides)


if __name__ == "__main__":
    main()
