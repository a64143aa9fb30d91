#!/usr/bin/env bash
# Launch overhead on this host: `binder SHAPE -- true` with a warm node cache (the usual
# case: every task but the first on a node) and with the cache off (what the first task
# pays: discovery), against `taskset -c 0 true`, `numactl -C 0 true` and
# `hwloc-bind core:0 -- true`, timed in interleaved rounds (benches/interleave.py: a
# drifting VM then slows every command alike). Also: `binder-full` on the same warm cache
# (what a launch would cost if one executable loaded libhwloc), and a GPU shape cold (I/O
# discovery; on a host without GPUs it refuses after loading the topology, so its time is
# still the price). Each run is its own one-task job, so the warm line includes the node
# ledger's whole path for a new job (scan, write); the other tasks of a job only append to
# its file (benches/concurrent.sh measures those). Cache and ledger live on tmpfs, as
# their defaults do (/dev/shm, $XDG_RUNTIME_DIR).
# Targets: warm (ledger on) <= 1.0x taskset (binder is linked static-pie: no dynamic loader),
# cold <= 0.5x hwloc-bind.
# With BURST=N, N short one-core jobs (each its own session, so its own job) run first:
# what a launch costs right after a burst of short jobs left their files behind.
# Usage: benches/launch.sh [GPU_SHAPE] [ROUNDS]   (needs numactl, hwloc; builds binder)
set -euo pipefail
cd "$(dirname "$0")/.."
gpu_shape=${1:-shapes/gpu-local.yaml}
rounds=${2:-600}
cargo build --release -q
cache=$(mktemp -d -p /dev/shm)
ledger=$(mktemp -d -p /dev/shm)
export BINDER_CACHE_DIR=$cache BINDER_LEDGER_DIR=$ledger
target/release/binder shapes/cores-packed.yaml -- true   # fills the cache
if [ "${BURST:-0}" -gt 0 ]; then
  one=$(mktemp --suffix .yaml)
  printf 'resources:\n  - type: core\n' >"$one"
  for _ in $(seq "$BURST"); do setsid target/release/binder "$one" -- true; done
  rm -f "$one"
  echo "after a burst of $BURST short jobs: $(ls "$ledger"/binder-ledger.* | wc -l) files left in the ledger"
fi
out=$(mktemp)
benches/interleave.py "$rounds" \
  "taskset -c 0 true" \
  "numactl -C 0 true" \
  "hwloc-bind core:0 -- true" \
  "target/release/binder shapes/cores-packed.yaml -- true" \
  "env BINDER_LEDGER=off target/release/binder shapes/cores-packed.yaml -- true" \
  "target/release/binder-full shapes/cores-packed.yaml -- true" \
  "env BINDER_CACHE=off target/release/binder shapes/cores-packed.yaml -- true" \
  "env BINDER_CACHE=off true" \
  "true" \
  "env BINDER_CACHE=off target/release/binder $gpu_shape -- true" >"$out"
rm -rf "$cache" "$ledger"
python3 - "$out" "$gpu_shape" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
w = {k: v["wall"] for k, v in r.items()}
taskset, numactl, hwloc = w["taskset -c 0 true"], w["numactl -C 0 true"], w["hwloc-bind core:0 -- true"]
warm = w["target/release/binder shapes/cores-packed.yaml -- true"]
full = w["target/release/binder-full shapes/cores-packed.yaml -- true"]
# `env VAR=... cmd` costs env's own exec more: subtract it from the runs that use it.
env_cost = w["env BINDER_CACHE=off true"] - w["true"]
cold = w["env BINDER_CACHE=off target/release/binder shapes/cores-packed.yaml -- true"] - env_cost
gpu = w[f"env BINDER_CACHE=off target/release/binder {sys.argv[2]} -- true"] - env_cost
print("median wall (ms): " + ", ".join(f"{k} {v*1e3:.2f}" for k, v in w.items()))
off = w["env BINDER_LEDGER=off target/release/binder shapes/cores-packed.yaml -- true"] - env_cost
print(f"binder warm / taskset      = {warm/taskset:.2f} (ledger on; target <= 1.0: binder is static-pie)")
print(f"binder warm, ledger off    = {off/taskset:.2f}")
print(f"binder warm / numactl -C   = {warm/numactl:.2f}")
print(f"binder warm / hwloc-bind   = {warm/hwloc:.2f}")
print(f"binder-full warm / taskset = {full/taskset:.2f} (one executable, libhwloc loaded)")
print(f"binder cold / taskset      = {cold/taskset:.2f}")
print(f"binder cold / hwloc-bind   = {cold/hwloc:.2f} (target <= 0.5)")
print(f"binder gpu (cold) / binder cold = {gpu/cold:.2f} (the price of I/O discovery)")
PY
