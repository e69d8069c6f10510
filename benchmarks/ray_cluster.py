#!/usr/bin/env python
"""A sweep on a multi-node Ray cluster: trials spread over the nodes, survive losing one, and
give the numbers a one-node run gives.

    python benchmarks/ray_cluster.py                    # the smoke spec's 4 trials, 40 iterations each
    python benchmarks/ray_cluster.py --iterations 20 --out /tmp/ray_cluster

Starts a local cluster with ``ray.cluster_utils.Cluster`` (Ray's own way of testing several
nodes on one machine, as RLlib's and Ray Train's tests do): a head node with no CPUs, so that
no trial can run there, and two worker nodes with one CPU each, all on 127.0.0.1. Then:

1. runs the smoke spec (configs/sweeps/smoke.yaml: 2 algos x 2 seeds on Cartpole, tiny
   batches) with ``--iterations`` iterations per trial and a checkpoint every 5, as
   ``steinrl sweep SPEC --address <the head>``;
2. as soon as a trial under way has written two checkpoints, kills the worker node that runs
   it (``Cluster.remove_node``: its raylet and the trial's actor die);
3. checks that trials ran on both worker nodes (each trial's ``result.json`` records the
   node id of every iteration; the killed node's trial alone shows both, one before the
   kill and one after), that every trial finished, and that the killed node's trial
   went on from its checkpoint on the other node (``iterations_since_restore`` back at 1 at
   an iteration past 1; Ray Tune retries a trial whose node died, ``max_failures`` in the spec);
4. compares ``results.csv`` with the same spec run on one node (a local Ray, run first; or,
   with ``--reference trainer``, each trial's Trainer stepped in this process, as the CI test
   does): equal in every column but the timings (``time/*``, ``wall_s``), the trial ids and
   the node.

The cluster is the script's own, whatever else runs on the machine (another Ray, other users):
every port its nodes listen on is a free port chosen here (never Ray's defaults 6379, 8265,
10001, 52365, ...), its files go to a temporary directory of its own (``temp_dir``, not
``/tmp/ray``, where another Ray keeps its session and port files), it writes no
``ray_current_cluster`` file, and ``RAY_ADDRESS`` is neither read nor passed on: every process
joins it by its address only. When it cannot make its two worker nodes (a node that fails
to start, a port taken between choosing and binding, a CPU count the scheduler never shows)
it says why in its last line, ``ray_cluster skipped: <why>``, and exits 77 (the test then
skips) instead of running a sweep whose answer would mean nothing.

The cluster's nodes share this machine's file system, so the sweep's ``out/ray/`` is shared
storage here; docs/sweeps.md says what a real cluster needs. Last line:
``ray_cluster nodes=2 trials=N nodes_used=K node_killed=1 finished=F equal=1`` (exit 0 when
nodes_used=2, node_killed=1, finished=N and equal=1; exit 1 otherwise; 77 when skipped).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from steinrl.run.sweep import RAY_ENV  # noqa: E402

COMMAND = [sys.executable, "-c", "from steinrl.run.cli import main; main()", "sweep"]
EXIT_SKIPPED = 77  #: the cluster could not be made (the last line says why); the test skips


class ClusterUnavailable(Exception):
    """The two-worker cluster could not be made here; the message says why."""


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 now (bound together, then released)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def node_ports() -> dict[str, int]:
    """A node's listening ports, each a free one (a head also takes ``gcs_server_port``): none is
    Ray's default, which another Ray on the machine may hold."""
    names = ("gcs_server_port", "object_manager_port", "dashboard_agent_listen_port", "runtime_env_agent_port",
             "metrics_agent_port", "metrics_export_port")
    return dict(zip(names, free_ports(len(names))))


def write_spec(work: Path, iterations: int, checkpoint_every: int = 5) -> Path:
    """The smoke spec with ``iterations`` per trial and a checkpoint every ``checkpoint_every`` results."""
    spec = yaml.safe_load((ROOT / "configs" / "sweeps" / "smoke.yaml").read_text())
    spec.update(iterations=iterations, checkpoint_every=checkpoint_every)
    spec.pop("out", None)
    path = work / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def trial_rows(out: Path) -> dict[str, list[dict]]:
    """Trial directory name -> the rows of its result.json (Ray's per-result record)."""
    rows = {}
    for path in sorted(out.glob("ray/*/*/result.json")):
        rows[path.parent.name] = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


SKIP = ("wall_s", "trial_id", "node_id", "algo", "env", "seed", "iteration")


def table(out: Path) -> dict[tuple[str, str, str], dict[str, float]]:
    """results.csv as (algo, seed, iteration) -> the columns that measure neither time nor place."""
    with open(out / "results.csv") as f:
        return {(r["algo"], r["seed"], r["iteration"]): {
            k: float(v) for k, v in r.items() if v != "" and not k.startswith("time/") and k not in SKIP}
            for r in csv.DictReader(f)}


def trainer_table(spec: Path) -> dict[tuple[str, str, str], dict[str, float]]:
    """The same table from each trial's Trainer stepped in this process, without Ray (``--reference trainer``)."""
    from steinrl.run.sweep import load_spec, make_trials, trial_config
    from steinrl.run.trainer import Trainer

    rows = {}
    for trial in make_trials(load_spec(spec)):
        trainer = Trainer(trial_config(trial))
        while not trainer.done:
            metrics = trainer.step()
            rows[(trial["algo"], str(trial["seed"]), str(trainer.iteration))] = {
                k: float(v) for k, v in metrics.items() if "/" in k and not k.startswith("time/")}
        trainer.close()
    return rows


def same(a: dict, b: dict) -> bool:
    """Equal tables (NaN equal to NaN)."""
    return a.keys() == b.keys() and all(
        a[k].keys() == b[k].keys() and all(x == y or (x != x and y != y) for x, y in
                                           ((a[k][c], b[k][c]) for c in a[k])) for k in a)


def running_trials(workers: list) -> dict[str, Any]:
    """Trial directory name -> the worker node whose process runs that trial now: Ray Tune runs a
    trial in an actor whose working directory is named after the trial's directory, and a node's
    worker processes are its raylet's children."""
    import psutil

    found = {}
    for node in workers:
        for info in node.all_processes.get("raylet", []):
            with contextlib.suppress(psutil.Error):
                for child in psutil.Process(info.process.pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        found[Path(child.cwd()).name] = node
    return found


def kill_a_busy_worker(cluster: Any, workers: list, out: Path, proc: subprocess.Popen, timeout: float,
                       checkpoints: int) -> str | None:
    """Once a trial has written two checkpoints and is some of its ``checkpoints`` from done, remove
    the worker node that runs it; that node's id. The trial then goes on from its checkpoint on
    the other node, so it ran on both. (The node is the one running a trial in the middle, not a
    fixed one: on a loaded machine Ray Tune may run every trial in turn in one reused actor, the
    other node's actor starting too late to get one. Ray Tune copies result.json to the sweep's
    directory only now and then: the checkpoints, which each trial writes there itself, tell how
    far the trials are. A trial's checkpoint directory appears before the driver has registered
    that checkpoint, and a trial killed in between starts again from scratch: the second
    checkpoint's directory says the first is registered, on a loaded machine too.)"""
    import psutil

    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        counts = {d.name: len(list(d.glob("checkpoint_*"))) for d in (out / "ray").glob("*/*") if d.is_dir()}
        busy = [name for name, n in counts.items() if 2 <= n <= checkpoints - 3]
        running = running_trials(workers) if busy else {}
        node = next((running[name] for name in busy if name in running), None)
        if node is not None:
            # the node's processes as a machine going down would take them: its raylet and, at once,
            # the worker processes it started (a trial's actor would otherwise run on for a moment)
            raylets = [info.process.pid for info in node.all_processes.get("raylet", [])]
            workers_of_node = [c for pid in raylets for c in psutil.Process(pid).children(recursive=True)]
            cluster.remove_node(node, allow_graceful=False)
            for child in workers_of_node:
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
            print(f"killed worker node {node.node_id[:12]} mid-trial (checkpoints written: {sorted(counts.values())})",
                  flush=True)
            return node.node_id
        time.sleep(0.05)
    return None


def node_gone(cluster: Any, node_id: str, timeout: float) -> bool:
    """Whether the cluster's GCS counts ``node_id`` dead within ``timeout`` seconds (it notices a
    killed raylet by its missed health checks, some seconds after the kill)."""
    deadline = time.monotonic() + timeout
    while node_id in cluster.global_state._live_node_ids():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def alive_cpus(cluster: Any) -> dict[str, float]:
    """Node id -> CPUs of the cluster's alive nodes, as its GCS sees them (a driver connected briefly)."""
    import ray

    ray.init(address=cluster.address, logging_level="warning")
    try:
        return {n["NodeID"]: n.get("Resources", {}).get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")}
    finally:
        ray.shutdown()


def start_cluster(temp_dir: Path, timeout: float) -> tuple[Any, list]:
    """This script's own cluster: a head with no CPUs and two worker nodes of one CPU each, all on
    127.0.0.1, on free ports, with ``temp_dir`` for their files; ``(cluster, workers)`` once the
    scheduler sees exactly these three nodes alive with the workers' two CPUs. Raises
    :class:`ClusterUnavailable` (naming why; what was started is shut down) otherwise."""
    import ray._private.utils
    from ray.cluster_utils import Cluster

    # Cluster writes its address to <the default temp dir>/ray_current_cluster, where any other ray.init()
    # on this machine would find it and join this cluster: the sweep gets --address instead
    ray._private.utils.write_ray_address = lambda *args, **kwargs: None
    common = {"node_ip_address": "127.0.0.1", "temp_dir": str(temp_dir), "include_dashboard": False}
    t0 = time.perf_counter()
    try:
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, **common, **node_ports()})
    except Exception as exc:  # noqa: BLE001 - any failure to start the head is the reason to skip
        raise ClusterUnavailable(f"the head node did not start ({type(exc).__name__}: "
                                 f"{' '.join(str(exc).split())[:200]})") from None
    try:
        workers = []
        for _ in range(2):
            ports = node_ports()
            del ports["gcs_server_port"]
            workers.append(cluster.add_node(num_cpus=1, **common, **ports))
        cluster.wait_for_nodes(timeout=timeout)
        ours = {cluster.head_node.node_id, *(w.node_id for w in workers)}
        deadline = time.perf_counter() + timeout
        while True:
            alive = alive_cpus(cluster)
            if (set(alive) == ours and sum(alive.values()) == 2 and all(alive[w.node_id] == 1 for w in workers)
                    and ours <= cluster.global_state._live_node_ids()):
                break
            if time.perf_counter() > deadline:
                raise ClusterUnavailable(f"after {timeout:.0f} s the scheduler sees {len(alive)} alive node(s) with "
                                         f"{sum(alive.values()):g} CPU(s), not this script's head and two 1-CPU "
                                         f"workers")
            time.sleep(0.2)
    except Exception as exc:
        cluster.shutdown()
        if isinstance(exc, ClusterUnavailable):
            raise
        raise ClusterUnavailable(f"a worker node did not start ({type(exc).__name__}: "
                                 f"{' '.join(str(exc).split())[:200]})") from None
    print(f"cluster at {cluster.address} (temp dir {temp_dir}): a head with 0 CPUs, worker nodes "
          f"{', '.join(w.node_id[:12] for w in workers)} with 1 CPU each ({time.perf_counter() - t0:.0f} s)",
          flush=True)
    return cluster, workers


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=40, help="iterations per trial (default 40)")
    p.add_argument("--out", help="working directory (default: a temporary one)")
    p.add_argument("--checkpoint-every", type=int, default=5, help="results between checkpoints (default 5)")
    p.add_argument("--reference", choices=("sweep", "trainer"), default="sweep",
                   help="the one-node run: the same sweep on a local Ray (default), or each trial's Trainer "
                        "stepped in this process (faster: the CI test's)")
    p.add_argument("--timeout", type=float, default=600, help="seconds a sweep may take (default 600)")
    args = p.parse_args(argv)
    if args.iterations < 5 * args.checkpoint_every:
        p.error("--iterations must be at least 5 x --checkpoint-every (a kill must land between a trial's second "
                "checkpoint and its end)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)
    os.environ.pop("RAY_ADDRESS", None)  # this cluster only: never one named by the caller's environment
    # every address on the loopback: Ray otherwise replaces 127.0.0.1 by this machine's own IP when it
    # connects (services.resolve_ip_for_localhost); this setting (Ray's for clusters on one laptop) keeps
    # 127.0.0.1. Set before ray is imported, here and in the sweep's process.
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    work = Path(args.out or tempfile.mkdtemp(prefix="ray_cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    spec = write_spec(work, args.iterations, args.checkpoint_every)
    # a short path of its own for the cluster's files (Ray's socket paths must stay under ~107 characters)
    ray_tmp = Path(tempfile.mkdtemp(prefix="rc-", dir="/tmp" if os.path.isdir("/tmp") else None))
    env = {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "RAY_TMPDIR": str(ray_tmp)}

    t0 = time.perf_counter()  # the one-node reference first: a local Ray, before the cluster exists
    if args.reference == "sweep":
        one = subprocess.run([*COMMAND, str(spec), "--out", str(work / "one_node")], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=args.timeout)
        reference = table(work / "one_node") if one.returncode == 0 else {}
        print(f"one node: exit {one.returncode} in {time.perf_counter() - t0:.0f} s", flush=True)
    else:
        reference = trainer_table(spec)
        print(f"one node: each trial's Trainer in this process, {time.perf_counter() - t0:.0f} s", flush=True)

    try:
        cluster, workers = start_cluster(ray_tmp, min(args.timeout, 120.0))
    except ClusterUnavailable as exc:
        shutil.rmtree(ray_tmp, ignore_errors=True)
        print(f"ray_cluster skipped: {exc}", flush=True)
        return EXIT_SKIPPED
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen([*COMMAND, str(spec), "--out", str(work / "cluster"), "--address", cluster.address],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        killed = kill_a_busy_worker(cluster, workers, work / "cluster", proc, args.timeout,
                                    args.iterations // args.checkpoint_every)
        _, err = proc.communicate(timeout=args.timeout)
        print(f"cluster sweep: exit {proc.returncode} in {time.perf_counter() - t0:.0f} s", flush=True)
        if killed is not None and not node_gone(cluster, killed, 120.0):  # the GCS must see the killed node gone
            print(f"worker node {killed[:12]} is still alive 120 s after its removal", flush=True)
            killed = None
    finally:
        cluster.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)

    rows = trial_rows(work / "cluster")
    worker_ids = {w.node_id for w in workers}
    used = {r["node_id"] for trial in rows.values() for r in trial if r.get("node_id") in worker_ids}
    finished = sum(bool(trial and trial[-1].get("done")) for trial in rows.values())
    for name, trial in rows.items():
        nodes = list(dict.fromkeys(r["node_id"][:12] for r in trial))
        restores = [r["training_iteration"] for r in trial if r["iterations_since_restore"] == 1
                    and r["training_iteration"] > 1]
        print(f"  {name}: nodes {' -> '.join(nodes)}" + (f", went on from its checkpoint at iteration "
                                                         f"{', '.join(map(str, restores))}" if restores else ""))
    went_on = any(r["iterations_since_restore"] == 1 and r["training_iteration"] > 1
                  for trial in rows.values() for r in trial)
    b = table(work / "cluster") if (work / "cluster" / "results.csv").is_file() else {}
    equal = bool(reference) and same(reference, b) and len(reference) == len(rows) * args.iterations
    if proc.returncode != 0:
        print(err.strip()[-2000:], file=sys.stderr)
    print(f"ray_cluster nodes={len(workers)} trials={len(rows)} nodes_used={len(used)} "
          f"node_killed={int(killed is not None)} finished={finished} equal={int(equal)}")
    if killed is not None and not went_on:
        print("the killed node's trial did not go on from a checkpoint", file=sys.stderr)
    ok = len(used) == 2 and killed is not None and went_on and finished == len(rows) == 4 and equal
    return 0 if ok and proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
