#!/usr/bin/env bash
# A launch's cost beside many idle processes, after a quiet spell (#62, SEMANTICS §13.5):
# in a private PID namespace with its own /proc, N idle processes (default 2,000: what a
# 2-socket node's kernel threads number) owned by OWNER (default root; a user name for
# another user's), then, interleaved (benches/interleave.py), `taskset -c 0 true` against
# the first task of a new job (`@session binder SHAPE -- true`), ledger on and off, for
# each SPACING (default "0.3 1.2": seconds between binder's launches, each past the 250 ms
# a look at the kernel is shared for; a third of it passes before every run, and the
# ledger's launches are paced exactly SPACING apart: in a random order alone they were
# 0.1-0.5 s apart, and one in nine lists /proc, timing a mix of two cases). Within
# 419 ms of the last look (a pid_max of 4,194,304: systemd's, and a new PID namespace's
# since Linux 6.14) and 10 s of the last listing, a look reads only what changed; past
# it, it lists /proc. The node cache is warm; cache and ledger are on tmpfs.
#
#   sudo benches/crowded.sh [N] [ROUNDS]      (root: namespaces, and processes of OWNER)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-2000}
rounds=${2:-200}
owner=${OWNER:-root}
if [ -z "${BINDER_CROWDED_INSIDE:-}" ]; then
  cargo build --release -q
  exec unshare --pid --fork --mount --propagation private --mount-proc \
    env BINDER_CROWDED_INSIDE=1 "$0" "$@"
fi
prefix=$(mktemp -d)
cache=$(mktemp -d -p /dev/shm)
ledger=$(mktemp -d -p /dev/shm)
trap 'pkill -P $$ sleep 2>/dev/null; rm -rf "$prefix" "$cache" "$ledger"' EXIT
install -m 755 target/release/binder target/release/binder-full "$prefix"
export BINDER_CACHE_DIR=$cache BINDER_LEDGER_DIR=$ledger
for _ in $(seq "$n"); do
  if [ "$owner" = root ]; then sleep 600 & else setpriv --reuid="$owner" --regid="$owner" --clear-groups sleep 600 & fi
done
sleep 1
echo "processes in this namespace: $(ls /proc | grep -c '^[0-9]')"
bin=$prefix/binder
shape=shapes/cores-packed.yaml
$bin $shape -- true
echo "pid_max $(cat /proc/sys/kernel/pid_max)"
for spacing in ${SPACINGS:-0.3 1.2}; do
  gap=$(python3 -c "print($spacing / 3)")
  out=$(GAP=$gap benches/interleave.py "$rounds" \
    "taskset -c 0 true" \
    "@paced @session $bin $shape -- true" \
    "@session BINDER_LEDGER=off $bin $shape -- true")
  python3 - "$out" "$bin" "$n" "$owner" "$spacing" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
base = r["taskset -c 0 true"]["wall"]
print(f"beside {sys.argv[3]} idle processes of {sys.argv[4]}, binder's launches {sys.argv[5]} s apart:")
for cmd, t in r.items():
    print(f"  {t['wall']*1000:7.2f} ms  {t['wall']/base:5.2f}x  {cmd.replace(sys.argv[2], 'binder')}")
PY
done
