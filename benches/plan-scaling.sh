#!/usr/bin/env bash
# Planning time and peak RSS against node size and local size. The bench writes its own
# XMLs (`lstopo -i "pack:2 core:C pu:2" --of xml`, cached in target/bench-xml: hwloc's
# synthetic backend needs about a minute for the 16,384-PU one, once) and times
# `binder --dry-run` of every catalog CPU shape against `hwloc-calc --input XML core:0`
# on the same file, so the ratio is planning's own cost. Target: every shape <= 1.5x.
# Usage: benches/plan-scaling.sh [MAX_PUS]   (default 16384; needs hwloc, GNU time)
set -euo pipefail
cd "$(dirname "$0")/.."
max=${1:-16384}
cargo build --release -q
mkdir -p target/bench-xml
shapes=$(ls shapes/*.yaml | grep -v -e gpu -e nic)
median() { # median wall seconds of 5 runs of "$@"
  for _ in 1 2 3 4 5; do /usr/bin/time -f %e "$@" >/dev/null 2>>/tmp/binder-bench-$$ || true; done
  sort -n /tmp/binder-bench-$$ | sed -n 3p; rm -f /tmp/binder-bench-$$
}
printf '%8s  %-30s %9s %9s %6s %9s\n' PUs shape binder_s hwloc_s ratio rss_kb
for pus in 64 256 1024 4096 16384; do
  [ "$pus" -le "$max" ] || break
  xml=target/bench-xml/pus-$pus.xml
  [ -f "$xml" ] || lstopo -i "pack:2 core:$((pus / 4)) pu:2" --of xml "$xml" 2>/dev/null
  h=$(median hwloc-calc --input "$xml" core:0)
  worst=0
  for s in $shapes; do
    b=$(median target/release/binder -n --topology "$xml" "$s")
    rss=$( { /usr/bin/time -f %M target/release/binder -n --topology "$xml" "$s" >/dev/null; } 2>&1 | tail -1)
    ratio=$(python3 -c "print(f'{$b/max($h,1e-3):.2f}')")
    printf '%8s  %-30s %9s %9s %6s %9s\n' "$pus" "$(basename "$s")" "$b" "$h" "$ratio" "$rss"
  done
done
echo
echo "against local size (cores-packed, pus-interleave on the largest XML):"
for n in 1 64 1024 $((max / 2)); do
  for s in shapes/cores-packed.yaml shapes/pus-interleave.yaml; do
    b=$(median target/release/binder -n --topology "$xml" --local-size "$n" "$s")
    printf '  local size %6s  %-26s %9s s\n' "$n" "$(basename "$s")" "$b"
  done
done
