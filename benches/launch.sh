#!/usr/bin/env bash
# Launch overhead on this host, in two interleaved runs (benches/interleave.py: each round
# runs every command once in a new random order, so a drifting VM slows them alike; env
# assignments and new sessions are applied by posix_spawn, so no `env`/`setsid` is timed).
#
# 1. The floor: `binder SHAPE -- true` with a warm node cache and the node ledger on,
#    against `taskset -c 0 true` (and `numactl -C 0 true`): a task of a running job (the
#    usual case: every task but the first), the first task of a new job (its own session:
#    a new job in the ledger, which scans and writes), and the same with the ledger off.
#    With BURST=N, N short one-core jobs run first, each its own job, so the ledger holds
#    what a burst of short jobs left behind. Target: warm, ledger on <= 1.0x taskset.
# 2. The rest: cold (cache off: discovery), binder-full warm (libhwloc loaded), hwloc-bind,
#    and a GPU shape cold (I/O discovery; on a host without GPUs it refuses after loading
#    the topology, so its time is still the price). Target: cold <= 0.5x hwloc-bind.
#
# Cache and ledger live on tmpfs, as their defaults do (/dev/shm, $XDG_RUNTIME_DIR).
# The executables timed are installed copies (as `cargo install` or a site's `install`
# makes them), not the linker's output in target/: on Linux 6.x the linker's file sits in
# the page cache in small pieces and every exec of it takes more page faults; a copy is
# read in large folios like /usr/bin/taskset. Measured on the 2-CPU VM: the same bytes
# start 6% faster copied (0.93x against 1.00x taskset).
# Usage: benches/launch.sh [GPU_SHAPE] [ROUNDS]   (needs numactl, hwloc; builds binder)
set -euo pipefail
cd "$(dirname "$0")/.."
gpu_shape=${1:-shapes/gpu-local.yaml}
rounds=${2:-600}
cargo build --release -q
cache=$(mktemp -d -p /dev/shm)
ledger=$(mktemp -d -p /dev/shm)
prefix=$(mktemp -d)
trap 'rm -rf "$cache" "$ledger" "$prefix"' EXIT
export BINDER_CACHE_DIR=$cache BINDER_LEDGER_DIR=$ledger
install -m 755 target/release/binder target/release/binder-full "$prefix"
bin=$prefix/binder
shape=shapes/cores-packed.yaml
$bin $shape -- true   # fills the cache
if [ "${BURST:-0}" -gt 0 ]; then
  one=$(mktemp --suffix .yaml)
  printf 'resources:\n  - type: core\n' >"$one"
  for _ in $(seq "$BURST"); do setsid $bin "$one" -- true; done
  rm -f "$one"
  echo "after a burst of $BURST short jobs: $(ls "$ledger"/binder-ledger.*/ | wc -l) files in the ledger"
fi
floor=$(mktemp)
benches/interleave.py "$rounds" \
  "taskset -c 0 true" \
  "numactl -C 0 true" \
  "$bin $shape -- true" \
  "@session $bin $shape -- true" \
  "BINDER_LEDGER=off $bin $shape -- true" \
  "@session taskset -c 0 true" >"$floor"
rest=$(mktemp)
benches/interleave.py "$(( rounds / 4 ))" \
  "taskset -c 0 true" \
  "hwloc-bind core:0 -- true" \
  "$prefix/binder-full $shape -- true" \
  "BINDER_CACHE=off $bin $shape -- true" \
  "BINDER_CACHE=off $bin $gpu_shape -- true" >"$rest"
python3 - "$floor" "$rest" "$bin" "$shape" "$gpu_shape" "$rounds" "$prefix" <<'PY'
import json, sys
floor, rest, bin, shape, gpu_shape, rounds, prefix = sys.argv[1:]
f = {k: v["wall"] for k, v in json.load(open(floor)).items()}
r = {k: v["wall"] for k, v in json.load(open(rest)).items()}
ms = lambda d: ", ".join(f"{k} {v*1e3:.3f}" for k, v in d.items())
print(f"run 1, {rounds} interleaved rounds, median wall (ms): {ms(f)}")
t = f["taskset -c 0 true"]
warm = f[f"{bin} {shape} -- true"]
print(f"binder warm / taskset            = {warm/t:.2f} (ledger on, a task of a running job; target <= 1.0)")
print(f"binder warm, new job / taskset   = {f[f'@session {bin} {shape} -- true']/f['@session taskset -c 0 true']:.2f} (each in a session of its own)")
print(f"binder warm, ledger off / taskset = {f[f'BINDER_LEDGER=off {bin} {shape} -- true']/t:.2f}")
print(f"binder warm / numactl -C         = {warm/f['numactl -C 0 true']:.2f}")
print(f"run 2, {int(rounds)//4} interleaved rounds, median wall (ms): {ms(r)}")
t2, hwloc = r["taskset -c 0 true"], r["hwloc-bind core:0 -- true"]
cold = r[f"BINDER_CACHE=off {bin} {shape} -- true"]
print(f"binder-full warm / taskset       = {r[f'{prefix}/binder-full {shape} -- true']/t2:.2f} (one executable, libhwloc loaded)")
print(f"binder cold / taskset            = {cold/t2:.2f}")
print(f"binder cold / hwloc-bind         = {cold/hwloc:.2f} (target <= 0.5)")
print(f"binder gpu (cold) / binder cold  = {r[f'BINDER_CACHE=off {bin} {gpu_shape} -- true']/cold:.2f} (the price of I/O discovery)")
PY
