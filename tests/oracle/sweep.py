#!/usr/bin/env python3
"""Cross-checks binder against fixtures/tools/oracle.py (hwloc-calc) over many cases.

The oracle is used unchanged: its own `check()` runs binder and compares. The only
addition is that its hwloc-calc answers are cached per topology across shapes and local
sizes (the oracle's `Topo` caches per call), which makes a full sweep affordable.

Usage: sweep.py BINDER SHARED_DIR --topologies T1.xml,... --shapes S1.yaml,... --sizes 1,2,3,8
Prints one line per case and closes with `N passed, M failed`; exits 1 on any failure.
"""
import argparse
import contextlib
import importlib.util
import io
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import partial


def load_oracle(shared):
    spec = importlib.util.spec_from_file_location("oracle", os.path.join(shared, "tools", "oracle.py"))
    oracle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(oracle)
    caches = {}
    base = oracle.Topo

    class CachedTopo(base):
        def __init__(self, xml):
            super().__init__(xml)
            self.cache = caches.setdefault(xml, {})

    oracle.Topo = CachedTopo
    return oracle


def one_topology(binder, shared, shapes, sizes, topo):
    oracle = load_oracle(shared)
    xml = topo if os.path.isabs(topo) else os.path.join(shared, "topologies", topo)
    lines, bad = [], 0
    for shape in shapes:
        for n in sizes:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                rc = oracle.check(binder, xml, shape, n)
            lines.append(buf.getvalue().rstrip())
            bad += rc != 0
    return lines, bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binder")
    ap.add_argument("shared")
    ap.add_argument("--topologies", required=True)
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--sizes", default="1,2,3,8")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    topos = [t for t in args.topologies.split(",") if t]
    shapes = [s for s in args.shapes.split(",") if s]
    sizes = [int(n) for n in args.sizes.split(",") if n]
    work = partial(one_topology, args.binder, args.shared, shapes, sizes)
    passed = failed = 0
    # One process per topology: the oracle prints on sys.stdout, which threads would share.
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        for lines, bad in pool.map(work, topos):
            for line in lines:
                print(line)
            failed += bad
            passed += len(lines) - bad
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
