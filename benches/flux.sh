#!/usr/bin/env bash
# Launch overhead of binder's Flux shell plugin: `flux run -n2 -o binder=SHAPE true`
# against plain `flux run -n2 true` and the wrapper `flux run -n2 binder SHAPE -- true`,
# timed in interleaved rounds (benches/interleave.py) inside one throwaway instance
# (`flux start --test-size=1`). Needs flux-core in /opt/flux (`bash .ci/setup test`).
# Target: the plugin costs at most 1% over plain `flux run`, and less than the wrapper.
# Usage: benches/flux.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-40}
cargo build --release -q
export PATH=/opt/flux/bin:$PATH
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
echo "plugin.load { file = \"$PWD/target/release/libbinder_flux.so\", conf = { catalog = \"$PWD/shapes\" } }" >"$dir/rc.lua"
export BINDER_LEDGER_DIR=$dir/ledger BINDER_CACHE_DIR=$dir/cache
shape=shapes/cores-packed.yaml
flux start --test-size=1 benches/interleave.py "$rounds" \
  "flux run -n2 true" \
  "flux run -n2 -o userrc=$dir/rc.lua -o binder=$shape true" \
  "flux run -n2 target/release/binder $shape -- true" \
  | python3 -c '
import json, sys
r = json.load(sys.stdin)
names = list(r)
base = r[names[0]]["wall"]
for n in names:
    w = r[n]["wall"]
    print("%8.1f ms  %5.3fx  %s" % (w * 1000, w / base, n))
'
