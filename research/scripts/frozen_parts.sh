#!/usr/bin/env bash
# The repulsion study's parts (research/results/repulsion_study.md) run from a checkout frozen at one commit,
# so that work landing on main meanwhile cannot change a running sweep's code.
#
#   research/scripts/frozen_parts.sh setup COMMIT DIR       # a git worktree of COMMIT at DIR, its own virtualenv
#                                                           # (DIR-venv), and the specs registered after COMMIT
#   research/scripts/frozen_parts.sh run DIR PART...        # each research/sweeps/repulsion_confirm_<PART>.yaml
#                                                           # in order (a finished part returns at once), then
#                                                           # archives it into this checkout's research/archives/
#   research/scripts/frozen_parts.sh archive DIR PART [--partial]
#                                                           # archive a part now; --partial: its finished runs
#                                                           # only, into research/archives/partial/<PART>/ (stop
#                                                           # its sweep with SIGINT first), whole (algo, task)
#                                                           # groups only (every seed finished). The other groups
#                                                           # run from a spec of the same settings (PART_rest); `run`
#                                                           # and `archive` of PART_rest join the two into PART's
#                                                           # archive (combine_sweeps.py HALF REST --x ...
#                                                           # --archive; steinrl compare HALF/comparison.csv REST)
#
# Logs: DIR/runs/logs/<PART>.log (the sweep) and DIR/runs/logs/chain.log (start, end, archived lines).
set -euo pipefail
main_root="$(cd "$(dirname "$0")/../.." && pwd)"
export RAY_AUTH_MODE=disabled

usage() { echo "usage: $0 setup COMMIT DIR | run DIR PART... | archive DIR PART [--partial]" >&2; exit 2; }

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
  local dir=$1 part=$2 partial=${3:-}
  local sweep="runs/sweeps/repulsion_confirm_$part" out="$main_root/research/archives/repulsion_confirm_$part"
  cd "$dir"
  local halves="$main_root/research/archives/partial/repulsion_confirm_${part%_rest}"
  if [ "$partial" != --partial ] && [ "$part" != "${part%_rest}" ] && [ -d "$halves" ]; then
    # the rest of a part stopped earlier: joined with its archived half into the part's archive
    out="$main_root/research/archives/repulsion_confirm_${part%_rest}"
    "$dir-venv/bin/python" benchmarks/combine_sweeps.py "$halves" "$sweep" --x time/total_env_steps --archive --out "$out"
    "$dir-venv/bin/steinrl" compare "$halves/comparison.csv" "$sweep" --device cpu --out "$out/comparison.csv"
  elif [ "$partial" != --partial ]; then
    "$dir-venv/bin/python" benchmarks/combine_sweeps.py "$sweep" --x time/total_env_steps --archive --out "$out"
    "$dir-venv/bin/steinrl" compare "$sweep" --device cpu --out "$out/comparison.csv"
  else
    # a part a session's end stopped (its sweep interrupted, so that results.csv holds what ran): its finished
    # runs' evaluations, and their headline curves unbinned against env steps, to be joined with the rest
    out="$main_root/research/archives/partial/repulsion_confirm_$part"
    mkdir -p "$out"
    "$dir-venv/bin/steinrl" compare "$sweep" --device cpu --out "$out/all.csv"
    "$dir-venv/bin/python" - "$sweep" "$out" "research/sweeps/repulsion_confirm_$part.yaml" <<'PY' || { rm -r "$out"; exit 1; }
import csv
import dataclasses
import sys
from pathlib import Path

from steinrl.run.sweep import load_spec
from steinrl.run.sweep_report import read_results_csv, write_results_csv

sweep, out, seeds = Path(sys.argv[1]), Path(sys.argv[2]), set(load_spec(sys.argv[3]).seeds)
with open(out / "all.csv", newline="") as f:
    rows = list(csv.DictReader(f))
# whole (algo, task) groups only: a spec crosses algos, tasks and seeds, so a rest of identical settings can run
# the groups whose seeds did not all finish, again whole
done = {(r["algo"], r["env"], int(r["seed"])) for r in rows if r["finished"] == "True"}
whole = {(a, e) for a, e, _ in done if {(a, e, s) for s in seeds} <= done}
finished = [r for r in rows if r["finished"] == "True" and (r["algo"], r["env"]) in whole]
runs = {(r["algo"], r["env"], int(r["seed"])) for r in finished}
if not runs:
    sys.exit(f"error: no (algo, task) group of {sweep} has every seed finished; nothing archived")
trials = [dataclasses.replace(t, x_key="time/total_env_steps") for t in read_results_csv(sweep / "results.csv")
          if (t.algo, t.env, t.seed) in runs]
if len(trials) != len(runs):
    sys.exit(f"error: {sweep}/results.csv holds {len(trials)} of the {len(runs)} finished runs")
write_results_csv(trials, out / "results.csv.gz", headline_only=True)
with open(out / "comparison.csv", "w", newline="") as f:  # the finished runs' rows; compare re-makes them
    writer = csv.DictWriter(f, list(rows[0]))
    writer.writeheader()
    writer.writerows(finished)
print(f"partial archive: {len(runs)} finished runs of {len({(r['algo'], r['env'], r['seed']) for r in rows})} started, "
      f"in whole groups: {', '.join(sorted(f'{a} on {e}' for a, e in whole)) or 'none'}; the rest runs the other groups")
PY
    "$dir-venv/bin/steinrl" compare "$out/comparison.csv" --out "$out/comparison.csv"
    rm -f "$out/all.csv" "$out/all.md"
  fi
  sed -i "s#$main_root/##g" "$out"/*.md  # the commands' paths as in the repository, not this machine's
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
    [ -f "$main_root/research/archives/repulsion_confirm_${part%_rest}/comparison.csv" ] || archive "$dir" "$part"
  done
}

[ $# -ge 2 ] || usage
command=$1; shift
case "$command" in
  setup) [ $# -eq 2 ] || usage; setup "$@" ;;
  run) [ $# -ge 2 ] || usage; run "$@" ;;
  archive) { [ $# -eq 2 ] || { [ $# -eq 3 ] && [ "$3" = --partial ]; }; } || usage; archive "$@" ;;
  *) usage ;;
esac
