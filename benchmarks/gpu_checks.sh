#!/usr/bin/env bash
# The GPU checks of the graphed iteration, as one script for a lent GPU machine (docs/gpu.md):
#   bash benchmarks/gpu_checks.sh [OUTDIR]     (GRAPH_TIMEOUT / THROUGHPUT_TIMEOUT: seconds per part, 300 / 280)
# On a machine without gymnasium / stable-baselines3, put their wheels in .whl/ first (pure Python:
# `pip download --no-deps --only-binary=:all: -d .whl gymnasium farama-notifications stable_baselines3`);
# they are installed into /tmp/site. The package is installed in editable mode without its dependencies
# (torch, numpy, pyyaml, tqdm, filelock, tensorboard, matplotlib must be there).
set -uo pipefail
out="${1:-${OUT:-/tmp/gpu_checks}}"
mkdir -p "$out"
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$out/install.log" 2>&1 \
  || echo "editable install failed (see install.log)"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$out/device.txt"
python3 -c "import steinrl, torch; print('steinrl', steinrl.__version__, 'torch', torch.__version__)" | tee -a "$out/device.txt"
# 1. graphed = eager, resume, the 1000-iteration swing-up, 10 seeds learning (gpu_graph's last line)
timeout "${GRAPH_TIMEOUT:-300}" python3 benchmarks/gpu_graph.py --device cuda 2>&1 | tee "$out/gpu_graph.log"
# 2. the figures, eager and graphed rows, 100 seeds (gpu_throughput's last line)
timeout "${THROUGHPUT_TIMEOUT:-280}" python3 benchmarks/gpu_throughput.py --device cuda 2>&1 | tee "$out/gpu_throughput.log"
