"""MuJoCo Warp against Gymnasium on all seven tasks, on Warp's CPU device (the suite runs two).

    python benchmarks/warp_mujoco_parity.py [--tasks Hopper-v5,Ant-v5] [--worlds 8] [--steps 50]

For each task of ``steinrl.envs.warp_mujoco.WARP_TASKS`` (needs the ``gpu-mujoco`` extra):

- **episodes**: ``--worlds`` worlds start from Gymnasium's reset states (seeds 0..N-1) and take the
  same uniform random actions as Gymnasium's envs for ``--steps`` steps; each world is compared
  until Gymnasium's episode ends. Printed: the largest relative observation error
  ``|Δ| / (1 + |value|)`` over the first 10 steps (``first10``), the median step at which it
  first exceeds the suite's tolerance 2e-3 (``diverge_median``; ``>K``: never within K steps),
  and how many of the episodes that ended within K steps ended at the same step (``same_end``);
- **resets**: 1024 reset observations a side: the largest mean difference in standard errors,
  the largest relative difference of standard deviations, the smallest two-sample KS p-value;
- **cpu_steps_per_s**: env steps per second of 64 worlds on this CPU (the physics replayed as a
  Warp graph; kernels compiled beforehand): a test figure, not a GPU one;
- Ant only: the constraint solver's accelerations from the same state in both (``mj_forward``),
  split by whether a contact involves a capsule within 30° of vertical, whose friction pyramid
  MuJoCo Warp orients along the world's y axis where MuJoCo's C code orients it along the capsule
  (``ant_qacc_rel``: median relative error, steep-capsule states / the other contact states).

One line per task, then ``warp_mujoco_parity tasks=... same_end=... worst_first10=...``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOL = 2e-3  # the suite's TOL_OBS (tests/test_warp_mujoco.py)


def rel_err(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a - b) / (1 + np.abs(b))


def episodes(env_id: str, n: int, steps: int) -> dict[str, float | str]:
    from steinrl import envs
    from steinrl.envs.warp_mujoco import make_warp_vec

    refs = [envs.make(env_id).unwrapped for _ in range(n)]
    ref_obs = np.array([ref.reset(seed=i)[0] for i, ref in enumerate(refs)])
    initial = torch.tensor(np.array([np.concatenate([r.data.qpos, r.data.qvel]) for r in refs]).T,
                           dtype=torch.float32)
    task = make_warp_vec(env_id, n)
    reset_err = float(rel_err(task.start(initial).numpy(), ref_obs).max())
    rng = np.random.default_rng(0)
    low, high = refs[0].action_space.low, refs[0].action_space.high
    live = np.ones(n, dtype=bool)
    diverge = np.full(n, steps + 1)
    first10 = 0.0
    ends = same = 0
    for t in range(steps):
        actions = rng.uniform(low, high, size=(n, len(low))).astype(np.float32)
        obs, _, terminated, _ = (x.numpy() for x in task.step(torch.from_numpy(actions)))
        for i in np.flatnonzero(live):
            o, _, term, trunc, _ = refs[i].step(actions[i].astype(np.float64))
            err = float(rel_err(obs[i], o).max())
            if t < 10:
                first10 = max(first10, err)
            if err > TOL and diverge[i] > steps:
                diverge[i] = t
            if term or trunc:
                live[i] = False
                ends += 1
                same += int(bool(terminated[i]) == term)
    med = float(np.median(diverge))
    return {"reset_err": f"{reset_err:.1e}", "first10": f"{first10:.1e}",
            "diverge_median": f">{steps}" if med > steps else f"{med:.0f}", "same_end": f"{same}/{ends}",
            "_first10": first10, "_same": same, "_ends": ends}


def resets(env_id: str, n: int = 1024) -> dict[str, str]:
    from scipy import stats

    from steinrl import envs
    from steinrl.envs.warp_mujoco import make_warp_vec

    ours = make_warp_vec(env_id, n).reset(seed=123).double().numpy()
    ref = envs.make(env_id).unwrapped
    theirs = np.array([ref.reset(seed=10_000 + i)[0] for i in range(n)])
    sd = np.where(theirs.std(0) > 0, theirs.std(0), 1.0)
    se = np.sqrt(ours.var(0) / n + theirs.var(0) / n)
    mean_se = np.where(se > 0, np.abs(ours.mean(0) - theirs.mean(0)) / np.where(se > 0, se, 1), 0)
    varying = theirs.std(0) > 0
    ks = min((stats.ks_2samp(ours[:, j], theirs[:, j]).pvalue for j in np.flatnonzero(varying)), default=1.0)
    std_rel = (np.abs(ours.std(0) - theirs.std(0)) / sd).max()
    return {"reset_mean_se": f"{mean_se.max():.1f}", "reset_std_rel": f"{std_rel:.3f}", "reset_ks_p": f"{ks:.2g}"}


def throughput(env_id: str, n: int = 64, steps: int = 20) -> str:
    from steinrl.envs.warp_mujoco import make_warp_vec

    task = make_warp_vec(env_id, n)
    task.reset(seed=0)
    actions = torch.zeros(n, task.nu)
    for _ in range(3):  # compile, then record the physics graph
        task.step(actions)
    start = time.perf_counter()
    for _ in range(steps):
        task.step(actions)
    return f"{n * steps / (time.perf_counter() - start):.0f}"


def ant_contact_frames(states: int = 150) -> str:
    """Relative error of the solver's accelerations from Gymnasium's Ant states (see the module docstring)."""
    import mujoco
    import mujoco_warp as mjw
    import warp as wp

    from steinrl import envs
    from steinrl.envs.warp_mujoco import make_warp_vec

    task = make_warp_vec("Ant-v5", 1)
    ref = envs.make("Ant-v5").unwrapped
    mjm, mjd = ref.model, ref.data
    rng = np.random.default_rng(0)
    steep, other = [], []
    ep = 0
    while len(steep) + len(other) < states // 3 and ep < 20:
        ref.reset(seed=ep)
        ep += 1
        for _ in range(150):
            if ref.step(rng.uniform(-1, 1, 8))[2]:
                break
            mujoco.mj_forward(mjm, mjd)
            if mjd.ncon == 0:
                continue
            for name in ("qpos", "qvel", "qacc_warmstart", "ctrl"):
                getattr(task, name).copy_(torch.tensor(getattr(mjd, name)))
            with wp.ScopedDevice("cpu"):
                mjw.forward(task.model, task.data)
            err = np.abs(wp.to_torch(task.data.qacc).numpy()[0] - mjd.qacc).max() / (1 + np.abs(mjd.qacc).max())
            axes = [np.linalg.norm(mjd.geom_xmat[c.geom[1]].reshape(3, 3)[:2, 2]) for c in mjd.contact[:mjd.ncon]
                    if mjm.geom_type[c.geom[1]] == mujoco.mjtGeom.mjGEOM_CAPSULE]
            (steep if min(axes, default=1.0) < 0.5 else other).append(err)
    return (f"{np.median(steep):.1e}/{np.median(other):.1e}" if steep and other
            else f"n/a({len(steep)}/{len(other)})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--tasks", default=None, help="comma-separated ids (default: all seven)")
    parser.add_argument("--worlds", type=int, default=8)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--no-throughput", action="store_true", help="skip the CPU steps/s")
    args = parser.parse_args(argv)
    os.chdir(os.environ.get("TMPDIR", "/tmp"))  # MuJoCo's MUJOCO_LOG.TXT stays out of the repository
    from steinrl.envs.warp_mujoco import WARP_TASKS, configure

    configure()
    tasks = args.tasks.split(",") if args.tasks else list(WARP_TASKS)
    same = ends = 0
    worst = 0.0
    start = time.perf_counter()
    for env_id in tasks:
        t0 = time.perf_counter()
        row = episodes(env_id, args.worlds, args.steps)
        row.update(resets(env_id))
        if not args.no_throughput:
            row["cpu_steps_per_s"] = throughput(env_id)
        if env_id == "Ant-v5":
            row["ant_qacc_rel"] = ant_contact_frames()
        same, ends, worst = same + row["_same"], ends + row["_ends"], max(worst, row["_first10"])
        shown = " ".join(f"{k}={v}" for k, v in row.items() if not k.startswith("_"))
        print(f"warp_parity task={env_id} {shown} seconds={time.perf_counter() - t0:.1f}", flush=True)
    print(f"warp_mujoco_parity tasks={len(tasks)} same_end={same}/{ends} worst_first10={worst:.1e} "
          f"seconds={time.perf_counter() - start:.0f} device=cpu", flush=True)


if __name__ == "__main__":
    main()
