#!/usr/bin/env bash
# 256 tasks starting at once on one node, as a launcher starts them: total wall time of
# 256 concurrent `binder shapes/bind-none.yaml -- true` (a warm cache, `--local-size 256`
# `--local-rank r`, so every task plans the same node; each run in a session of its own, so
# each run is one job of 256 ranks in the node ledger, as a launcher's would be) against 256 concurrent
# `taskset -c 0 true`, in one hyperfine run. Target: ratio <= 1.5.
# Usage: benches/concurrent.sh [N]   (needs hyperfine; builds binder)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-256}
cargo build --release -q
cache=$(mktemp -d -p /dev/shm)
ledger=$(mktemp -d -p /dev/shm)
export BINDER_CACHE_DIR=$cache BINDER_LEDGER_DIR=$ledger
bin=$PWD/target/release/binder
target/release/binder --local-rank 0 --local-size "$n" shapes/bind-none.yaml -- true
out=$(mktemp)
hyperfine -N --warmup 3 --min-runs 20 --export-json "$out" \
  -n taskset "bash -c 'for i in \$(seq 0 $((n-1))); do taskset -c 0 true & done; wait'" \
  -n binder "setsid -w bash -c 'for i in \$(seq 0 $((n-1))); do $bin --local-rank \$i --local-size $n shapes/bind-none.yaml -- true & done; wait'"
rm -rf "$cache" "$ledger"
python3 - "$out" "$n" <<'PY'
import json, sys
r = {x["command"]: x["median"] for x in json.load(open(sys.argv[1]))["results"]}
print(f"{sys.argv[2]} concurrent launches, median wall: taskset {r['taskset']*1e3:.1f} ms, binder {r['binder']*1e3:.1f} ms; ratio = {r['binder']/r['taskset']:.2f} (target <= 1.5)")
PY
