#!/usr/bin/env bash
# Planning time and peak RSS against node size and local size. The bench writes its own
# XMLs (`lstopo -i "pack:2 core:C pu:2" --of xml`, cached in target/bench-xml: hwloc's
# synthetic backend is slow on big nodes, about two minutes for the 16,384-PU one, once)
# and times `binder --dry-run` of every catalog CPU shape against
# `hwloc-calc --input XML core:0` on the same file (medians of 5 rounds, the two
# alternating, so a VM's drift slows both alike), so the ratio is planning's own cost on
# top of loading the XML. Target: every shape <= 1.5x on the largest node (on small ones,
# both are a few milliseconds and process start-up dominates).
# Usage: benches/plan-scaling.sh [PUS...]   (default 64 256 1024 4096 16384; needs hwloc)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${*:-64 256 1024 4096 16384}
cargo build --release -q
mkdir -p target/bench-xml
for pus in $sizes; do
  xml=target/bench-xml/pus-$pus.xml
  [ -f "$xml" ] || lstopo -i "pack:2 core:$((pus / 4)) pu:2" --of xml "$xml" 2>/dev/null
done
python3 - $sizes <<'PY'
import glob, resource, statistics, subprocess, sys, time

def run(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t

def median(cmd, n=5):
    return statistics.median(run(cmd) for _ in range(n))

def paired(a, b, n=5):
    """Medians of `a` and `b`, timed alternately."""
    ta, tb = [], []
    for _ in range(n):
        ta.append(run(a))
        tb.append(run(b))
    return statistics.median(ta), statistics.median(tb)

def rss_kb(cmd):
    out = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True).stderr.strip().splitlines()
    return out[-1] if out else "?"

shapes = sorted(s for s in glob.glob("shapes/*.yaml") if "gpu" not in s and "nic" not in s)
worst = 0.0
print(f"{'PUs':>6}  {'shape':<30} {'binder ms':>9} {'hwloc ms':>9} {'ratio':>6} {'RSS KiB':>8}")
for pus in sys.argv[1:]:
    xml = f"target/bench-xml/pus-{pus}.xml"
    for s in shapes:
        cmd = ["target/release/binder", "-n", "--topology", xml, s]
        h, b = paired(["hwloc-calc", "--input", xml, "core:0"], cmd)
        if pus == sys.argv[-1]:
            worst = max(worst, b / h)
        print(f"{pus:>6}  {s[7:]:<30} {b*1e3:9.1f} {h*1e3:9.1f} {b/h:6.2f} {rss_kb(cmd):>8}")
print(f"worst ratio binder/hwloc-calc on {sys.argv[-1]} PUs: {worst:.2f} (target <= 1.5)")
xml = f"target/bench-xml/pus-{sys.argv[-1]}.xml"
print(f"against local size on {sys.argv[-1]} PUs:")
for n in [1, 64, 1024, int(sys.argv[-1]) // 2]:
    for s in ["shapes/cores-packed.yaml", "shapes/pus-interleave.yaml"]:
        cmd = ["target/release/binder", "-n", "--topology", xml, "--local-size", str(n), s]
        print(f"  local size {n:>6}  {s[7:]:<22} {median(cmd, 3)*1e3:8.1f} ms  RSS {rss_kb(cmd)} KiB")
PY
