#!/usr/bin/env bash
# Launch overhead on this host, in one hyperfine run: `binder SHAPE -- true` for a
# CPU-only shape against `taskset -c 0 true`, `numactl -C 0 true` and
# `hwloc-bind core:0 -- true`. Targets: binder <= 2x taskset, <= 0.5x hwloc-bind.
# A GPU shape's cost (I/O discovery) is measured too: on a host without GPUs it refuses
# after loading the topology with I/O, so its time is still the price of discovery.
# Usage: benches/launch.sh [GPU_SHAPE]   (needs hyperfine, numactl, hwloc; builds binder)
set -euo pipefail
cd "$(dirname "$0")/.."
gpu_shape=${1:-shapes/gpu-local.yaml}
cargo build --release -q
out=$(mktemp)
hyperfine -N -i --warmup 20 --min-runs 200 --export-json "$out" \
  -n taskset "taskset -c 0 true" \
  -n numactl "numactl -C 0 true" \
  -n hwloc-bind "hwloc-bind core:0 -- true" \
  -n binder-cpu "target/release/binder shapes/cores-packed.yaml -- true" \
  -n binder-gpu "target/release/binder $gpu_shape -- true"
python3 - "$out" <<'PY'
import json, sys
r = {x["command"]: x["median"] for x in json.load(open(sys.argv[1]))["results"]}
b = r["binder-cpu"]
print(f"medians (ms): " + ", ".join(f"{k} {v*1e3:.2f}" for k, v in r.items()))
print(f"binder-cpu / taskset = {b/r['taskset']:.2f} (target <= 2)")
print(f"binder-cpu / hwloc-bind = {b/r['hwloc-bind']:.2f} (target <= 0.5)")
print(f"binder-gpu / binder-cpu = {r['binder-gpu']/b:.2f} (the price of I/O discovery)")
PY
