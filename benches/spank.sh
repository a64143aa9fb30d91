#!/usr/bin/env bash
# Launch overhead of binder's SPANK plugin: `srun -n2 --binder=SHAPE true` against plain
# `srun -n2 true` and `srun -n2 binder SHAPE -- true`, timed in interleaved rounds
# (benches/interleave.py) on the throwaway single-node Slurm of tests/e2e/slurm.sh.
# Needs root, slurm-wlm and munge (`bash .ci/setup test`). Target: srun --binder costs no
# more over plain srun than `srun binder` does.
# Usage: benches/spank.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-40}
cargo build --release -q
dir=$(mktemp -d)
trap 'bash tests/e2e/slurm.sh stop "$dir"; rm -rf "$dir"' EXIT
eval "$(BINDER_SPANK=$PWD/target/release/libbinder_spank.so bash tests/e2e/slurm.sh start "$dir")"
export BINDER_LEDGER_DIR=$dir/ledger BINDER_CACHE_DIR=$dir/cache
shape=shapes/cores-packed.yaml
benches/interleave.py "$rounds" \
  "srun -n2 --overcommit --cpu-bind=none true" \
  "srun -n2 --overcommit --cpu-bind=none --binder=$shape true" \
  "srun -n2 --overcommit --cpu-bind=none target/release/binder $shape -- true" \
  | python3 -c '
import json, sys
r = json.load(sys.stdin)
names = list(r)
base = r[names[0]]["wall"]
for n in names:
    w = r[n]["wall"]
    print("%8.1f ms  %5.3fx  %s" % (w * 1000, w / base, n))
'
