#!/usr/bin/env bash
# The MuJoCo Warp checks and figures on a GPU, in one go (docs/gpu.md#mujoco-on-the-gpu-mujoco-warp):
#   bash benchmarks/gpu_mujoco_checks.sh [OUTDIR]
# Environment: TASKS (comma-separated ids; default all seven), WORLDS (default 1024,4096,16384),
# TRAIN_TASKS (default Hopper-v5,HalfCheetah-v5), TRAIN_SECONDS (default 300 each, compile included),
# RAW_TIMEOUT / CHECKS_TIMEOUT / TRAIN_TIMEOUT (seconds per part; default 420 / 420 / TRAIN_SECONDS x 2 + 240).
# The parts run cheapest first (correctness before long training), each under its timeout, and every part
# appends to OUTDIR/results.jsonl, so the summary (one `gpu_mujoco task=...` line per task) reports what
# finished; `-` marks a figure not measured. On a machine that cannot reach a package index, put the wheels in
# .whl/ first (mujoco-warp, warp-lang (~150 MB), mujoco, mujoco-core, gymnasium, farama-notifications, ...;
# `pip download -d .whl "steinrl[gpu-mujoco]"` on a machine that can); they are installed into /tmp/site.
set -uo pipefail
out="${1:-${OUT:-/tmp/gpu_mujoco}}"
mkdir -p "$out"
rm -f "$out/results.jsonl"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1 \
  || echo "editable install failed (see install.log)"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$out/device.txt"
python3 -c "import torch, warp, mujoco_warp; print('torch', torch.__version__, 'warp', warp.__version__, \
'mujoco_warp', mujoco_warp.__version__)" 2>&1 | tee -a "$out/device.txt"
tasks="${TASKS:-HalfCheetah-v5,Hopper-v5,Walker2d-v5,Ant-v5,Swimmer-v5,InvertedDoublePendulum-v5,steinrl/SparseHalfCheetah-v1}"
train_seconds="${TRAIN_SECONDS:-300}"
# 1. the CUDA-graph checks (capture, graphed = eager, resume) on small runs; compiles each model's kernels once
timeout "${CHECKS_TIMEOUT:-420}" python3 benchmarks/gpu_mujoco.py checks --tasks "$tasks" --out "$out" 2>&1 \
  | tee "$out/checks.log"
# 2. raw env steps/s at 1k / 4k / 16k worlds (Warp-graph physics, and eager launches)
timeout "${RAW_TIMEOUT:-420}" python3 benchmarks/gpu_mujoco.py raw --tasks "$tasks" --worlds "${WORLDS:-1024,4096,16384}" \
  --out "$out" 2>&1 | tee "$out/raw.log"
# 3. the pytest capture test (skipped without CUDA elsewhere)
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_warp_mujoco.py -k captured 2>&1 | tail -3 \
  | tee "$out/pytest.log"
# 4. training with --preset gpu-mujoco: env steps/s, time to the targets, the held-out pick
timeout "${TRAIN_TIMEOUT:-$((train_seconds * 2 + 240))}" python3 benchmarks/gpu_mujoco.py train \
  --tasks "${TRAIN_TASKS:-Hopper-v5,HalfCheetah-v5}" --seconds "$train_seconds" --out "$out" 2>&1 | tee "$out/train.log"
# the summary: one line per task
python3 benchmarks/gpu_mujoco.py summary --out "$out" | tee "$out/summary.txt"
