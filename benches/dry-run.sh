#!/usr/bin/env bash
# Planning speed: `binder --dry-run` of 384 ranks on the 384-PU genoa XML against one
# `hwloc-calc --input <same XML> core:0`, in one hyperfine run. Target: ratio <= 2.
# Usage: benches/dry-run.sh [SHARED_DIR]   (needs hyperfine, hwloc; builds binder)
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${1:-fixtures}
xml=$shared/topologies/epyc9654-genoa-2s-192c-smt2.xml
cargo build --release -q
out=$(mktemp)
hyperfine -N --warmup 10 --min-runs 100 --export-json "$out" \
  -n binder "target/release/binder --dry-run --topology $xml --local-size 384 shapes/pus-interleave.yaml" \
  -n hwloc-calc "hwloc-calc --input $xml core:0"
python3 - "$out" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
b, h = r["binder"]["median"], r["hwloc-calc"]["median"]
print(f"median: binder {b*1e3:.2f} ms, hwloc-calc {h*1e3:.2f} ms; ratio binder/hwloc-calc = {b/h:.2f} (target <= 2)")
PY
