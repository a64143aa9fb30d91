#!/usr/bin/env bash
# 256 tasks starting at once on one node, as a launcher starts them: total wall time of
# 256 concurrent `binder shapes/bind-none.yaml -- true` (a warm cache, `--local-size 256`
# `--local-rank r`, so every task plans the same node; each batch in a session of its own,
# so each batch is one job of 256 ranks in the node ledger, as a launcher's would be)
# against 256 concurrent `taskset -c 0 true`, in interleaved rounds (benches/interleave.py,
# which starts the new session itself, so no setsid is timed). Target: ratio <= 1.1.
# binder is timed as an installed copy, as benches/launch.sh explains.
# Usage: benches/concurrent.sh [N] [ROUNDS]   (builds binder)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-256}
rounds=${2:-40}
cargo build --release -q
cache=$(mktemp -d -p /dev/shm)
ledger=$(mktemp -d -p /dev/shm)
prefix=$(mktemp -d)
trap 'rm -rf "$cache" "$ledger" "$prefix"' EXIT
export BINDER_CACHE_DIR=$cache BINDER_LEDGER_DIR=$ledger
install -m 755 target/release/binder target/release/binder-full "$prefix"
bin=$prefix/binder
$bin --local-rank 0 --local-size "$n" shapes/bind-none.yaml -- true
out=$(mktemp)
benches/interleave.py "$rounds" \
  "@session bash -c 'for i in \$(seq 0 $((n-1))); do taskset -c 0 true & done; wait'" \
  "@session bash -c 'for i in \$(seq 0 $((n-1))); do $bin --local-rank \$i --local-size $n shapes/bind-none.yaml -- true & done; wait'" >"$out"
python3 - "$out" "$n" "$rounds" <<'PY'
import json, sys
r = [v["wall"] for v in json.load(open(sys.argv[1])).values()]
print(f"{sys.argv[2]} concurrent launches, {sys.argv[3]} interleaved rounds, median wall: taskset {r[0]*1e3:.1f} ms, binder {r[1]*1e3:.1f} ms; ratio = {r[1]/r[0]:.2f} (target <= 1.1)")
PY
