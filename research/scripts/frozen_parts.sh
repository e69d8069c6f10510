#!/usr/bin/env bash
# The repulsion study's parts (research/results/repulsion_study.md) run from a checkout frozen at one commit,
# so that work landing on main meanwhile cannot change a running sweep's code.
#
#   research/scripts/frozen_parts.sh setup COMMIT DIR       # a git worktree of COMMIT at DIR, its own virtualenv
#                                                           # (DIR-venv), and the specs registered after COMMIT
#   research/scripts/frozen_parts.sh run DIR PART...        # each research/sweeps/repulsion_confirm_<PART>.yaml
#                                                           # in order (a finished part returns at once), then
#                                                           # archives it into this checkout's research/archives/
#   research/scripts/frozen_parts.sh archive DIR PART [--where KEY=VALUE]...
#                                                           # archive a part now (--where: only those trials,
#                                                           # into research/archives/partial/<PART>/)
#
# Logs: DIR/runs/logs/<PART>.log (the sweep) and DIR/runs/logs/chain.log (start, end, archived lines).
set -euo pipefail
main_root="$(cd "$(dirname "$0")/../.." && pwd)"
export RAY_AUTH_MODE=disabled

usage() { echo "usage: $0 setup COMMIT DIR | run DIR PART... | archive DIR PART [--where KEY=VALUE]..." >&2; exit 2; }

setup() {
  local commit=$1 dir=$2 spec
  git -C "$main_root" worktree prune
  [ -d "$dir" ] || git -C "$main_root" worktree add --detach "$dir" "$commit"
  for spec in "$main_root"/research/sweeps/repulsion_confirm_*.yaml; do
    [ -f "$dir/research/sweeps/$(basename "$spec")" ] || cp "$spec" "$dir/research/sweeps/"
  done
  if [ ! -x "$dir-venv/bin/steinrl" ]; then
    python3 -m venv "$dir-venv"
    "$dir-venv/bin/pip" install -q --upgrade pip
    "$dir-venv/bin/pip" install -q torch==2.13.0  # the CPU build on local disk, before anything pulls CUDA's
    "$dir-venv/bin/pip" install -q -e "$dir[sweep,mujoco]"
  fi
  mkdir -p "$dir/runs/logs"
}

archive() {
  local dir=$1 part=$2; shift 2
  local sweep="runs/sweeps/repulsion_confirm_$part" out="$main_root/research/archives/repulsion_confirm_$part"
  [ $# -gt 0 ] && out="$main_root/research/archives/partial/repulsion_confirm_$part"
  cd "$dir"
  "$dir-venv/bin/python" benchmarks/combine_sweeps.py "$sweep" "$@" --x time/total_env_steps --archive --out "$out"
  "$dir-venv/bin/steinrl" compare "$sweep" --device cpu --out "$out/comparison.csv"
  if [ $# -gt 0 ]; then
    # a part stopped early: keep the finished runs' rows, and only if they are the trials the curves kept
    "$dir-venv/bin/python" - "$out" <<'PY'
import sys
from pathlib import Path

import pandas as pd

out = Path(sys.argv[1])
rows = pd.read_csv(out / "comparison.csv")
rows = rows[rows["finished"]]
curves = pd.read_csv(out / "results.csv.gz")
key = ["algo", "env", "seed"]
scored = set(map(tuple, rows[key].drop_duplicates().values.tolist()))
drawn = set(map(tuple, curves[key].drop_duplicates().values.tolist()))
if scored != drawn:
    sys.exit(f"error: the finished runs {sorted(scored)} are not the trials --where kept {sorted(drawn)}")
rows.to_csv(out / "finished.csv", index=False)
PY
    "$dir-venv/bin/steinrl" compare "$out/finished.csv" --out "$out/comparison.csv"
    rm "$out/finished.csv"
  fi
  echo "$(date -u +%FT%T) archived $part into $out" >> runs/logs/chain.log
}

run() {
  local dir=$1 part; shift
  for part in "$@"; do
    cd "$dir"
    echo "$(date -u +%FT%T) start $part" >> runs/logs/chain.log
    "$dir-venv/bin/steinrl" sweep "research/sweeps/repulsion_confirm_$part.yaml" >> "runs/logs/$part.log" 2>&1 || {
      rc=$?; echo "$(date -u +%FT%T) stopped $part rc=$rc" >> runs/logs/chain.log; return "$rc"; }
    echo "$(date -u +%FT%T) end $part rc=0" >> runs/logs/chain.log
    [ -f "$main_root/research/archives/repulsion_confirm_$part/comparison.csv" ] || archive "$dir" "$part"
  done
}

[ $# -ge 2 ] || usage
command=$1; shift
case "$command" in
  setup) [ $# -eq 2 ] || usage; setup "$@" ;;
  run) [ $# -ge 2 ] || usage; run "$@" ;;
  archive) [ $# -ge 2 ] || usage; archive "$@" ;;
  *) usage ;;
esac
