#!/usr/bin/env bash
# Launch overhead on this host, in one hyperfine run: `binder SHAPE -- true` with a warm
# node cache (the usual case: every task but the first on a node) and with the cache off
# (what the first task pays: discovery), against `taskset -c 0 true`, `numactl -C 0 true`
# and `hwloc-bind core:0 -- true`. A GPU shape is measured cold (I/O discovery; on a host
# without GPUs it refuses after loading the topology, so its time is still the price).
# With and without the node ledger (both warm, both through `env`): what the ledger adds.
# Targets: warm <= 1.2x taskset (2-CPU VM; <= 1.5x on a 16-core node), cold <= 0.5x hwloc-bind.
# Usage: benches/launch.sh [GPU_SHAPE]   (needs hyperfine, numactl, hwloc; builds binder)
set -euo pipefail
cd "$(dirname "$0")/.."
gpu_shape=${1:-shapes/gpu-local.yaml}
cargo build --release -q
cache=$(mktemp -d)
ledger=$(mktemp -d)
export BINDER_CACHE_DIR=$cache BINDER_LEDGER_DIR=$ledger
target/release/binder shapes/cores-packed.yaml -- true   # fills the cache
out=$(mktemp)
hyperfine -N -i --warmup 30 --min-runs 300 --export-json "$out" \
  -n taskset "taskset -c 0 true" \
  -n numactl "numactl -C 0 true" \
  -n hwloc-bind "hwloc-bind core:0 -- true" \
  -n binder-warm "target/release/binder shapes/cores-packed.yaml -- true" \
  -n binder-warm-no-ledger "env BINDER_LEDGER=off target/release/binder shapes/cores-packed.yaml -- true" \
  -n binder-warm-ledger "env BINDER_LEDGER=on target/release/binder shapes/cores-packed.yaml -- true" \
  -n binder-cold "env BINDER_CACHE=off target/release/binder shapes/cores-packed.yaml -- true" \
  -n env-only "env BINDER_CACHE=off true" \
  -n binder-gpu "env BINDER_CACHE=off target/release/binder $gpu_shape -- true"
rm -rf "$cache" "$ledger"
python3 - "$out" <<'PY'
import json, sys
r = {x["command"]: x["median"] for x in json.load(open(sys.argv[1]))["results"]}
# `env VAR=… cmd` costs one exec more: subtract it from the cold and GPU runs.
env_cost = r["env-only"] - r["taskset"]
cold = r["binder-cold"] - env_cost
gpu = r["binder-gpu"] - env_cost
print("medians (ms): " + ", ".join(f"{k} {v*1e3:.2f}" for k, v in r.items()))
print(f"binder warm / taskset    = {r['binder-warm']/r['taskset']:.2f} (target <= 1.2 on a 2-CPU VM)")
print(f"binder warm / numactl -C = {r['binder-warm']/r['numactl']:.2f}")
print(f"binder cold / taskset    = {cold/r['taskset']:.2f}")
print(f"binder cold / hwloc-bind = {cold/r['hwloc-bind']:.2f} (target <= 0.5)")
print(f"binder gpu (cold) / binder cold = {gpu/cold:.2f} (the price of I/O discovery)")
# Both through `env`, so the ratio is the node ledger's own cost (SEMANTICS §13).
print(f"ledger on / ledger off   = {r['binder-warm-ledger']/r['binder-warm-no-ledger']:.2f}"
      f" (+{(r['binder-warm-ledger']-r['binder-warm-no-ledger'])*1e3:.2f} ms per task)")
PY
