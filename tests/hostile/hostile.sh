#!/usr/bin/env bash
# The node ledger against a hostile user (SEMANTICS §13.1), as three real users would meet
# on one node: alice and bob run honest jobs, mallory does whatever she can to the ledger.
#
#   unshare --mount --propagation unchanged bash tests/hostile/hostile.sh BIN SCENARIO
#
# Run as root inside a private mount namespace: /dev/shm (binder's default ledger root)
# becomes a fresh tmpfs that nobody set up, so the host's is never touched. The users
# binder-alice, binder-bob and binder-mallory are made for the scenario and removed after
# it (a user left by a run that was killed is taken over, then removed).
# Prints lines the Rust test reads:
#   run USER TAG rc=N ms=N cpus=LIST      one launch of a 1-core job
#   task JOB RANK CPUS T0 T1              one task of a short job (ns, monotonic)
#   node-bytes N / node-rc N              `binder node` as alice
set -u
BIN=$1
scenario=$2
# One scenario at a time on this machine: they share the users, and the clean-up ends
# every process of theirs.
exec 9>/tmp/binder-hostile.lock
flock 9
# Nothing mounted here may reach the host: make the mounts of this namespace private (the
# whole tree, or, in a chroot where / is no mount point, the mount that holds /dev/shm).
if ! mount --make-rprivate / 2>/dev/null; then
  mp=$(findmnt -no TARGET -T /dev/shm) && mount --make-rprivate "$mp" ||
    { echo "cannot make the mount holding /dev/shm private" >&2; exit 77; }
fi
mount -t tmpfs -o mode=1777,size=512m tmpfs /dev/shm || { echo "cannot mount a private /dev/shm" >&2; exit 77; }
# This PID namespace's own /proc (attacks.rs starts the script in a new one): bound tasks
# of other users elsewhere on the machine are not the scenario's, so the scenarios pass
# beside them. Mounted only once /proc's mount is private, so it never reaches the host.
if mount --make-rprivate /proc 2>/dev/null; then
  mount -t proc proc /proc || { echo "cannot mount this namespace's /proc" >&2; exit 77; }
fi
scratch=$(mktemp -d /tmp/binder-hostile.XXXXXX)
chmod 1777 "$scratch"
# The users, for this scenario only (no home, no login shell): made under the lock above,
# so scenarios never race for /etc/passwd, and removed on the way out.
for u in alice bob mallory; do
  id "binder-$u" >/dev/null 2>&1 ||
    useradd --no-create-home --shell /usr/sbin/nologin "binder-$u" ||
    { echo "cannot create user binder-$u" >&2; exit 77; }
done
finish() {
  for u in alice bob mallory; do pkill -KILL -u "binder-$u" 2>/dev/null; done
  # userdel refuses a user whose processes still run: wait for the kills to land.
  for _ in $(seq 40); do
    pgrep -u binder-alice,binder-bob,binder-mallory >/dev/null 2>&1 || break
    sleep 0.05
  done
  for u in alice bob mallory; do userdel "binder-$u" 2>/dev/null; done
  rm -rf "$scratch"
}
trap finish EXIT
# Each user's home (where binder keeps the key of its secret ledger name), unless NOHOME.
for u in alice bob mallory; do
  install -d -m 700 -o "binder-$u" -g "binder-$u" "$scratch/home-$u"
done
printf 'resources:\n  - type: core\n' >"$scratch/one.yaml"
chmod 644 "$scratch/one.yaml"

uid() { id -u "binder-$1"; }
# Variables every user's command gets besides PATH (a scenario may add some).
EXTRA=()
# What a user's command is started under (a scenario may put it in a PID namespace).
WRAP=()
# Runs a command as a user, with a clean environment (no launcher variables).
as() {
  local who=$1; shift
  local home=HOME=$scratch/home-$who
  [ -n "${NOHOME:-}" ] && home=NOHOME=1
  ${WRAP[@]+"${WRAP[@]}"} setpriv --reuid="binder-$who" --regid="binder-$who" --init-groups \
    env -i PATH=/usr/bin:/bin BINDER_SITE_FILE=/nonexistent "$home" "${EXTRA[@]}" "$@"
}
now_ms() { date +%s%3N; }
# A CPU list as its numbers ("0-2,5" -> "0 1 2 5"), for a scenario's Python to read.
cpu_words() {
  local part parts out=()
  IFS=, read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    # shellcheck disable=SC2207
    out+=($(seq "${part%-*}" "${part#*-}"))
  done
  echo "${out[*]}"
}
# `run USER TAG`: a 1-core job holding its CPU for HOLD seconds (default 3) in its own
# session (so its own job); prints its line once it is bound (or refused).
run() {
  local who=$1 tag=$2 hold=${3:-3} t0 rc
  t0=$(now_ms)
  as "$who" setsid "$BIN" "$scratch/one.yaml" -- sh -c \
    'echo "$(grep Cpus_allowed_list /proc/self/status | cut -f2)" >"$0"; exec sleep "$1"' \
    "$scratch/$tag.cpus" "$hold" >"$scratch/$tag.out" 2>"$scratch/$tag.err" &
  local pid=$!
  for _ in $(seq 200); do
    [ -s "$scratch/$tag.cpus" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.01
  done
  rc=0
  if [ ! -s "$scratch/$tag.cpus" ]; then wait "$pid"; rc=$?; fi
  echo "run $who $tag rc=$rc ms=$(( $(now_ms) - t0 )) cpus=$(cat "$scratch/$tag.cpus" 2>/dev/null)"
  # What binder printed must be its own words: no byte of mallory's reaches a terminal.
  cat "$scratch/$tag.err" >&2
}
# mallory's live process: `msleep [taskset-cpus]` prints "pid start".
msleep() {
  if [ -n "${1:-}" ]; then
    as mallory setsid taskset -c "$1" sleep 60 >/dev/null 2>&1 &
  else
    as mallory setsid sleep 60 >/dev/null 2>&1 &
  fi
  local p=$!
  for _ in $(seq 100); do
    # setsid forks when it is a group leader: find mallory's sleep by its parent chain.
    local s
    s=$(pgrep -u binder-mallory -n -x sleep)
    [ -n "$s" ] && [ "$(awk '{print $22}' /proc/"$s"/stat 2>/dev/null)" ] && { echo "$s $(awk '{print $22}' /proc/"$s"/stat)"; return; }
    sleep 0.01
  done
  echo "0 0"
}
# mallory's own ledger directory (as binder would make it).
mdir() {
  local d=/dev/shm/binder-ledger.$(uid mallory)
  as mallory mkdir -p "$d"
  echo "$d"
}
# A claim by mallory for process (pid, start) with the given JSON cpus and job, in the
# format this binder writes (attacks.rs passes it: a stale one is refused unread, and the
# attack would test nothing).
forge() {
  local pid=$1 start=$2 cpus=$3 job=${4:-forged} gpus=${5:-[]}
  local d; d=$(mdir)
  printf '%s' "{\"format\":${CLAIM_FORMAT:?attacks.rs sets it},\"job\":\"$job\",\"rank\":0,\"size\":1,\"pid\":$pid,\"start\":$start,\"cpus\":$cpus,\"gpus\":$gpus,\"pack\":\"fill\",\"unit\":\"core\",\"places\":1}" |
    as mallory sh -c 'umask 022; cat >"$1"' sh "$d/c.$pid.$start.0.forged$RANDOM"
}
# One of alice's own processes takes her ledger lock and stops, holding it.
stop_holding_lock() {
  as alice python3 -c '
import fcntl, glob, os, signal
f = open(glob.glob("/dev/shm/binder-ledger.%s*/.lock" % os.getuid())[0], "r+")
fcntl.flock(f, fcntl.LOCK_EX)
os.kill(os.getpid(), signal.SIGSTOP)' &
  sleep 0.3
}
# Both honest users' jobs, then the verdict lines.
honest() {
  run bob bob
  run alice alice
}

case $scenario in
huge-cpu)
  # Claims of CPU 2^31 beside a live, unbound process of mallory's.
  read -r p s < <(msleep)
  forge "$p" "$s" '"2147483648"'
  forge "$p" "$s" '"0-1,2147483648"'
  forge "$p" "$s" '"0-18446744073709551615"'
  forge "$p" "$s" "\"$(printf '0-1048576,%.0s' $(seq 2000))0\""
  honest
  ;;
bound-inside)
  # mallory's process really runs on CPU 0; her claim says 0-1: she holds 0, not 1.
  read -r p s < <(msleep 0)
  forge "$p" "$s" '"0-1"'
  # And an unbound process beside a claim of everything holds nothing.
  read -r p2 s2 < <(msleep)
  forge "$p2" "$s2" '"0-1"'
  run alice alice
  ;;
squat)
  # mallory takes the users' directory names first, in every form she can.
  as mallory mkdir -m 0777 "/dev/shm/binder-ledger.$(uid alice)"
  as mallory mkfifo "/dev/shm/binder-ledger.$(uid bob)"
  as mallory mkdir -m 0777 /dev/shm/binder-ledger /dev/shm/binder-ledger.x
  as mallory ln -s /dev/shm/binder-ledger.x "/dev/shm/binder-ledger.$(uid bob).0"
  as mallory mkdir "/dev/shm/binder-ledger.$(uid alice).ffffffffffffffff"
  honest
  # Her lock on anything of alice's is refused: alice's directory is hers alone.
  d=$(ls -d /dev/shm/binder-ledger."$(uid alice)".* | grep -v ffff | head -1)
  as mallory flock -n "$d/.lock" true 2>/dev/null && echo "mallory locked alice's lock"
  as mallory touch "$d/c.1.1.0.x" 2>/dev/null && echo "mallory wrote in alice's directory"
  ;;
flood)
  # Tens of thousands of junk names in /dev/shm and in mallory's directory, some with
  # the users' own prefixes, some directories, some FIFOs.
  d=$(mdir)
  as mallory bash -c '
    cd /dev/shm
    for i in $(seq 6000); do : >"binder-ledger.junk$i"; done
    for i in $(seq 3000); do mkdir "binder-ledger.$1.$i" "binder-ledger.$2.$i"; done
    for i in $(seq 20); do mkfifo "binder-ledger.fifo$i"; done
    cd "$3"
    for i in $(seq 20000); do : >"c.$i.$i.0.junk"; done
    for i in $(seq 20); do mkfifo "c.1$i.1.0.fifo"; done
  ' sh "$(uid alice)" "$(uid bob)" "$d"
  honest
  ;;
homeless-flood)
  # alice has no home to keep her ledger key in (HOME unset; or read-only, or its key
  # removed at logout). mallory takes alice's directory name and plants FLOOD (100,000)
  # directories with alice's prefix. alice's jobs, one after another, never stack; the
  # second costs no more than bob's launch on the quiet node before (`quiet`, timed as
  # every `run` is): the first one's read of the root is shared.
  run bob quiet 0
  as mallory mkdir -m 0755 "/dev/shm/binder-ledger.$(uid alice)"
  as mallory /usr/bin/python3 -c '
import os, sys
os.chdir("/dev/shm")
for i in range(int(sys.argv[2])):
    os.mkdir("binder-ledger.%s.%016x" % (sys.argv[1], i))' "$(uid alice)" "${FLOOD:-100000}"
  NOHOME=1
  run alice first 8
  run alice second 8
  NOHOME=
  ;;
big)
  # 64 live processes, each with a 200 KB claim, and one 16 MiB claim.
  d=$(mdir)
  cpus="\"$(seq -s, 0 20000)\""
  for _ in $(seq 64); do
    read -r p s < <(msleep)
    forge "$p" "$s" "$cpus"
  done
  # (Unbound: a process of hers bound to a CPU would hold it, claim or not.)
  read -r p s < <(msleep)
  as mallory sh -c 'head -c 16777216 /dev/zero | tr "\0" " " >"$1"' sh "$d/c.$p.$s.0.huge"
  honest
  ;;
node-children)
  # SEMANTICS §13.5: bob's one-task job whose task starts three children (they inherit
  # its binding), and a bound process of his that is no task's child (`taskset`):
  # `binder node` as alice shows bob's job once, its task once, and the other process
  # as a job of its own.
  as bob setsid "$BIN" "$scratch/one.yaml" -- sh -c \
    'sleep 30 & sleep 30 & sh -c "sleep 30" & echo ready >"$0"; wait' "$scratch/kids.ready" \
    >/dev/null 2>&1 &
  for _ in $(seq 200); do [ -s "$scratch/kids.ready" ] && break; sleep 0.01; done
  sleep 0.2
  as bob setsid taskset -c 0 sleep 30 >/dev/null 2>&1 &
  sleep 0.2
  as alice "$BIN" node --format json >"$scratch/node.json" 2>"$scratch/node.err"
  echo "node-rc $?"
  python3 -c '
import json, sys
node = json.load(open(sys.argv[1]))
for j in node["jobs"]:
    print("job", j["job"], j["running"])' "$scratch/node.json"
  cat "$scratch/node.err" >&2
  ;;
node-output)
  # A claim that holds (bound inside) with escape codes and fake lines in every field
  # mallory writes, and file names with control characters.
  read -r p s < <(msleep 0)
  job=$(printf '\\u001b[2J\\u001b[31mMALLORY\\nFAKE-LINE %.0s' $(seq 3000))
  forge "$p" "$s" '"0"' "$job" '["\u001b]0;owned\u0007","0000:01:00.0"]'
  d=$(mdir)
  as mallory bash -c 'cd "$1"; : >"c.$2.$3.0.$(printf "\e[2J\nFAKE-LINE")"; cd /dev/shm; mkdir "binder-ledger.$(printf "\e[31m\nFAKE-LINE")"' sh "$d" "$p" "$s"
  t0=$(now_ms)
  as alice "$BIN" node >"$scratch/node.out" 2>"$scratch/node.err"
  echo "node-rc $? ms=$(( $(now_ms) - t0 ))"
  echo "node-bytes $(cat "$scratch/node.out" "$scratch/node.err" | wc -c)"
  cat "$scratch/node.out" "$scratch/node.err" >&2
  ;;
race)
  # alice and bob start at the same moment, round after round, while mallory churns
  # names in /dev/shm and in her directory; their jobs must never share a CPU.
  d=$(mdir)
  as mallory bash -c 'while :; do for i in $(seq 50); do : >"$1/c.$i.$i.0.x"; : >/dev/shm/binder-ledger.j$i; done; rm -f "$1"/c.* /dev/shm/binder-ledger.j*; sleep 0.02; done' sh "$d" &
  rounds=${ROUNDS:-24}
  for r in $(seq "$rounds"); do
    pids=()
    for who in alice bob; do
      as "$who" setsid "$BIN" "$scratch/one.yaml" -- sh -c \
        'echo "$(grep Cpus_allowed_list /proc/self/status | cut -f2)" >"$0"; sleep 0.3' \
        "$scratch/r$r.$who" 2>"$scratch/r$r.$who.err" &
      pids+=($!)
    done
    wait "${pids[@]}"
    echo "round $r alice=$(cat "$scratch/r$r.alice" 2>/dev/null) bob=$(cat "$scratch/r$r.bob" 2>/dev/null)"
    cat "$scratch/r$r.alice.err" "$scratch/r$r.bob.err" >&2
  done
  ;;
short-jobs)
  # 64 jobs of 4 short tasks each (all four bound to one core, Grid Engine host mode),
  # alice's and bob's in turn, eight at a time; each task starts after 0-0.3 s and runs
  # 0.1-0.3 s, so ranks often start after their job's first ranks ended and another job
  # took the core. No two jobs may ever run on one CPU at the same time.
  cat >"$scratch/task.sh" <<'EOT'
t0=$(date +%s%N)
c=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
sleep "0.$((1 + $$ % 3))"
echo "task $1 $2 $c $t0 $(date +%s%N)"
EOT
  chmod 644 "$scratch/task.sh"
  for j in $(seq "${JOBS:-64}"); do
    who=alice; [ $((j % 2)) = 0 ] && who=bob
    as "$who" setsid bash -c '
      for r in 0 1 2 3; do
        ( sleep "0.$((RANDOM % 4))"
          "$1" --local-rank $r --local-size 4 --ge "-btype host -bunit C -bamount 1" -- \
            sh "$3/task.sh" "$2" $r >>"$3/tasks.$2.$r" 2>>"$3/err.$2" ) &
      done
      wait' sh "$BIN" "$j" "$scratch" &
    [ $((j % 8)) = 0 ] && wait
  done
  wait
  cat "$scratch"/tasks.* 2>/dev/null
  cat "$scratch"/err.* >&2 2>/dev/null
  ;;
threads)
  # A 4,096-thread process of mallory's named by 64 claims, and 20,000 claims naming her
  # live sleep: reading them must not spend the time that finds bob's task.
  as mallory python3 -c '
import threading, time
ev = threading.Event()
for _ in range(4095):
    threading.Thread(target=ev.wait, daemon=True).start()
open("/tmp/binder-hostile-threads.ready", "w").close()
time.sleep(60)' &
  for _ in $(seq 300); do [ -e /tmp/binder-hostile-threads.ready ] && break; sleep 0.05; done
  rm -f /tmp/binder-hostile-threads.ready
  p=$(pgrep -u binder-mallory -n python3); s=$(awk '{print $22}' "/proc/$p/stat")
  for _ in $(seq 64); do forge "$p" "$s" '"0-1"'; done
  read -r p2 s2 < <(msleep)
  d=$(mdir)
  as mallory python3 -c '
import sys
d, p, s, fmt = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
body = "{\"format\":%s,\"job\":\"x\",\"rank\":0,\"size\":1,\"pid\":%s,\"start\":%s,\"cpus\":\"0-1\",\"gpus\":[],\"pack\":\"fill\",\"unit\":\"core\",\"places\":1}" % (fmt, p, s)
for i in range(20000):
    with open("%s/c.%s.%s.0.j%d" % (d, p, s, i), "w") as f:
        f.write(body)' "$d" "$p2" "$s2" "$CLAIM_FORMAT"
  honest
  ;;
root-flood)
  # bob's directory name taken first, then a flood of junk names in the ledger root.
  as mallory mkdir -m 0755 "/dev/shm/binder-ledger.$(uid bob)"
  as mallory python3 -c '
import os, sys
os.chdir("/dev/shm")
for i in range(int(sys.argv[1])):
    os.close(os.open("binder-ledger.x%d" % i, os.O_CREAT | os.O_WRONLY, 0o644))' "${FLOOD:-300000}"
  run bob bob 6
  run alice alice
  ;;
keeper)
  # SEMANTICS §13.4, the link-count keeper: 5,000 names and spare directories of
  # mallory's in the ledger root, and a watcher of hers that removes a spare directory
  # whenever the root's link count rises (a directory made there), so that it stays as it
  # was. alice's short job lists the root (and shares that read); bob's first job makes
  # his directory and holds a CPU; alice's next job, within 250 ms of her listing, must
  # not land on bob's CPU. TRIALS rounds, each with fresh users' directories.
  as mallory python3 -c '
import os
os.chdir("/dev/shm")
for i in range(5000):
    os.close(os.open("binder-ledger.junk%d" % i, os.O_CREAT | os.O_WRONLY, 0o644))
for i in range(200):
    os.mkdir("binder-ledger.spare%d" % i, 0o755)'
  as mallory python3 -c '
import os, time
os.chdir("/dev/shm")
spares = ["binder-ledger.spare%d" % i for i in range(200)]
links = os.stat(".").st_nlink
end = time.time() + 60
while time.time() < end and spares:
    now = os.stat(".").st_nlink
    if now > links:
        try:
            os.rmdir(spares.pop())
        except OSError:
            pass
        now = os.stat(".").st_nlink
    links = now' &
  sleep 0.3
  for t in $(seq "${TRIALS:-4}"); do
    # (Each round: bob's and alice's directories made anew, as new users' first jobs.)
    rm -rf /dev/shm/binder-ledger."$(uid alice)"* /dev/shm/binder-ledger."$(uid bob)"*
    run alice "first$t" 0
    sleep 0.05
    run bob "bob$t" 3
    run alice "next$t" 0.2
    pkill -u binder-bob sleep 2>/dev/null
    sleep 0.4
  done
  ;;
lifted)
  # SEMANTICS §13.5, a lifted squat: 5,000 names in the ledger root (so that alice's
  # listing is shared with her next launches) and mallory's directory under bob's
  # canonical name, so that bob's first job makes his secret directory. The moment bob's
  # task runs (its claim is in that directory) mallory removes her squat, and alice's
  # next launch, within 250 ms of her last listing and kernel look, must not land on
  # bob's CPU. TRIALS rounds, each with fresh users' directories.
  as mallory python3 -c '
import os
os.chdir("/dev/shm")
for i in range(5000):
    os.close(os.open("binder-ledger.junk%d" % i, os.O_CREAT | os.O_WRONLY, 0o644))'
  for t in $(seq "${TRIALS:-12}"); do
    rm -rf /dev/shm/binder-ledger."$(uid alice)"* /dev/shm/binder-ledger."$(uid bob)"*
    as mallory mkdir -m 755 /dev/shm/binder-ledger."$(uid bob)"
    run alice "first$t" 0
    run bob "bob$t" 3
    as mallory rmdir /dev/shm/binder-ledger."$(uid bob)"
    run alice "next$t" 0.2
    pkill -u binder-bob sleep 2>/dev/null
    sleep 0.4
  done
  ;;
unlisted)
  # SEMANTICS §13.5, a look that lists no /proc misses no process: alice's first launch
  # looks at the node; then mallory binds to the CPU alice's task had (where her next
  # would go again), by a new threaded process (odd rounds: its PIDs are handed out after
  # alice's look) or by an old one that was unbound at that look (even rounds); alice's
  # next launch, 300 ms after her first (past the shared look, within the window where a
  # look reads only what changed), must run on the other CPU. TRIALS rounds.
  echo "pid_max $(cat /proc/sys/kernel/pid_max)"
  for t in $(seq "${TRIALS:-6}"); do
    rm -f "$scratch/ugo" "$scratch/ubound"
    EXTRA=("GO=$scratch/ugo" "BOUND=$scratch/ubound")
    if [ $(( t % 2 )) = 0 ]; then
      as mallory python3 -c '
import os, time
while not os.path.exists(os.environ["BOUND"] + ".go"):
    time.sleep(0.001)
os.sched_setaffinity(0, {int(open(os.environ["GO"]).read())})
open(os.environ["BOUND"], "w").close()
time.sleep(30)' &
      sleep 0.1
    fi
    t0=$(now_ms)
    EXTRA=()
    run alice "look$t" 0.1
    cpu=$(cat "$scratch/look$t.cpus")
    EXTRA=("BOUND=$scratch/ubound")
    if [ $(( t % 2 )) = 1 ]; then
      as mallory setsid taskset -c "$cpu" python3 -c '
import os, threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
open(os.environ["BOUND"], "w").close()
time.sleep(30)' &
    else
      echo "$cpu" >"$scratch/ugo"
      touch "$scratch/ubound.go"
    fi
    EXTRA=()
    for _ in $(seq 300); do [ -e "$scratch/ubound" ] && break; sleep 0.001; done
    left=$(( 300 - ($(now_ms) - t0) ))
    [ "$left" -gt 0 ] && sleep "0.$(printf '%03d' "$left")"
    run alice "after$t" 0.1
    echo "mallory $t cpu=$cpu gap=$(( $(now_ms) - t0 ))"
    pkill -u binder-mallory python3 2>/dev/null
    rm -f "$scratch/ubound.go"
    sleep 0.5
  done
  ;;
ended)
  # SEMANTICS §13.4, a refusal on a fresh look: bob holds a CPU; mallory's process is
  # bound to every other CPU while alice's first launch looks (alice is refused: every
  # CPU is held, rightly), then lets go. alice's next launch, within 250 ms of the look
  # her first one shared, must run on a CPU that is free now, not be refused on what
  # that look saw. TRIALS rounds.
  run bob bob 30
  EXTRA=("BOB=$(cpu_words "$(cat "$scratch/bob.cpus")")" "GO=$scratch/go")
  as mallory python3 -c '
import os, time
every = os.sched_getaffinity(0)
bob = set(map(int, os.environ["BOB"].split()))
for t in range(1, 1 + int(os.environ.get("TRIALS", "4"))):
    while not os.path.exists(os.environ["GO"] + "bind" + str(t)):
        time.sleep(0.001)
    os.sched_setaffinity(0, every - bob)
    open("/tmp/binder-hostile-bound.%d" % t, "w").close()
    while not os.path.exists(os.environ["GO"] + str(t)):
        time.sleep(0.001)
    os.sched_setaffinity(0, every)
    open("/tmp/binder-hostile-free.%d" % t, "w").close()
time.sleep(30)' &
  EXTRA=()
  for t in $(seq "${TRIALS:-4}"); do
    touch "$scratch/gobind$t"
    for _ in $(seq 500); do [ -e /tmp/binder-hostile-bound.$t ] && break; sleep 0.01; done
    run alice "held$t" 0.2
    touch "$scratch/go$t"
    for _ in $(seq 500); do [ -e /tmp/binder-hostile-free.$t ] && break; sleep 0.001; done
    run alice "free$t" 0.2
    sleep 0.3
  done
  rm -f /tmp/binder-hostile-bound.* /tmp/binder-hostile-free.*
  ;;
duty)
  # SEMANTICS §13.4, a momentary binding steers: bob holds a CPU; mallory's process is
  # bound to every other CPU half the time (5 ms bound, 5 ms unbound). alice launches
  # TRIALS times: each runs (on a CPU mallory lets go of), never refused, never on bob's.
  run bob bob 30
  EXTRA=("BOB=$(cpu_words "$(cat "$scratch/bob.cpus")")")
  as mallory python3 -c '
import os, time
every = os.sched_getaffinity(0)
bob = set(map(int, os.environ["BOB"].split()))
end = time.time() + 20
while time.time() < end:
    os.sched_setaffinity(0, every - bob)
    time.sleep(0.005)
    os.sched_setaffinity(0, every)
    time.sleep(0.005)' &
  EXTRA=()
  sleep 0.2
  for t in $(seq "${TRIALS:-12}"); do
    run alice "d$t" 0.1
    sleep 0.2
  done
  ;;
squat65)
  # SEMANTICS §13.5, a momentary binding of many threads steers: bob holds a CPU;
  # mallory's process of THREADS threads (65: one more than binder watched before) binds
  # all of them to every other CPU for 9 ms, then lets go for 1 ms, over and over. alice
  # launches TRIALS times: each runs, never refused, never on bob's CPU.
  run bob bob 40
  EXTRA=("BOB=$(cpu_words "$(cat "$scratch/bob.cpus")")" "THREADS=${THREADS:-65}")
  as mallory python3 -c '
import os, threading, time
every = os.sched_getaffinity(0)
bob = set(map(int, os.environ["BOB"].split()))
tids, lock = [threading.get_native_id()], threading.Lock()
stop = threading.Event()
def idle():
    with lock:
        tids.append(threading.get_native_id())
    stop.wait()
for _ in range(int(os.environ["THREADS"]) - 1):
    threading.Thread(target=idle, daemon=True).start()
while len(tids) < int(os.environ["THREADS"]):
    time.sleep(0.001)
end = time.time() + 30
while time.time() < end:
    for t in tids:
        os.sched_setaffinity(t, every - bob)
    time.sleep(0.009)
    for t in tids:
        os.sched_setaffinity(t, every)
    time.sleep(0.001)
stop.set()' &
  EXTRA=()
  sleep 0.5
  for t in $(seq "${TRIALS:-20}"); do
    run alice "t$t" 0.1
    sleep 0.2
  done
  ;;
nofile)
  # SEMANTICS §13.4, limits fail closed: alice launches with a descriptor limit too low
  # to read the ledger and the kernel's view (`ulimit -n N` for N in LIMITS) while bob's
  # job holds a CPU: she runs on another CPU, or is refused, never on bob's.
  run bob bob 30
  for n in ${LIMITS:-6 7 32 64}; do
    BIN_REAL=$BIN
    BIN="$scratch/limited-$n.sh"
    printf '#!/bin/sh\nulimit -n %s\nexec "%s" "$@"\n' "$n" "$BIN_REAL" >"$BIN"
    chmod 755 "$BIN"
    run alice "n$n" 0.2
    BIN=$BIN_REAL
    sleep 0.3
  done
  ;;
chaser)
  # mallory's process follows alice's claims: bound to whatever CPUs alice claims,
  # unbound as soon as she takes the claim back.
  run bob bob 20
  EXTRA=("ALICE=$(uid alice)")
  as mallory python3 -c '
import glob, json, os, time
every = os.sched_getaffinity(0)
end = time.time() + 15
while time.time() < end:
    want = set()
    for f in glob.glob("/dev/shm/binder-ledger.%s*/c.*" % os.environ["ALICE"]):
        # Her live claims only (a dead one stays until alice tidies it).
        if not os.path.exists("/proc/" + os.path.basename(f).split(".")[1]):
            continue
        try:
            text = json.load(open(f))["cpus"]
            for part in text.split(","):
                a, _, b = part.partition("-")
                want.update(range(int(a), int(b or a) + 1))
        except Exception:
            pass
    os.sched_setaffinity(0, want or every)
    time.sleep(0.0005)' &
  chaser=$!  # setpriv and env exec: python's own pid
  EXTRA=()
  sleep 0.3
  # Each launch starts once the chaser has let go of alice's last (ended) job: bound
  # there while alice plans, it really holds that CPU and a refusal would be right. On a
  # loaded machine its loop can lag her task's end by more than the gap between runs.
  all=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
  for i in $(seq 8); do
    for _ in $(seq 300); do
      [ "$(grep Cpus_allowed_list "/proc/$chaser/status" 2>/dev/null | cut -f2)" = "$all" ] && break
      sleep 0.01
    done
    run alice "a$i" 0.2
    sleep 0.35
  done
  ;;
full-shm)
  # bob runs; then mallory fills the ledger root: alice cannot write a claim.
  run bob bob 6
  as mallory sh -c 'head -c 600M /dev/zero >/dev/shm/fill' 2>/dev/null
  run alice alice
  ;;
readonly-shm)
  # bob runs; then the ledger root becomes read-only before alice's first launch.
  run bob bob 6
  mount -o remount,ro /dev/shm
  run alice alice
  ;;
stuck-lock)
  # One of alice's own processes holds her ledger lock and is stopped.
  run bob bob 6
  run alice first 0.1 >/dev/null
  stop_holding_lock
  run alice alice
  ;;
ledger-dir)
  # BINDER_LEDGER_DIR names a directory mallory made first.
  run bob bob 6
  as mallory mkdir -m 1777 /tmp/binder-hostile-ledger
  EXTRA=(BINDER_LEDGER_DIR=/tmp/binder-hostile-ledger)
  run alice alice
  EXTRA=()
  rmdir /tmp/binder-hostile-ledger
  ;;
hidepid)
  # /proc hides other users' processes from alice and bob.
  mount -t proc -o hidepid=2 proc /proc
  run bob bob 6
  run alice alice
  ;;
hidepid-forged)
  # /proc hides other users' processes; bob's job holds CPU 0. mallory writes claims of
  # CPU 1 (the free one), for a PID that does not exist and for an unbound live sleep of
  # hers: neither sends alice onto bob's CPU (the kernel says where a PID runs, whatever
  # /proc hides).
  mount -t proc -o hidepid=2 proc /proc
  run bob bob 6
  forge $(( $(cat /proc/sys/kernel/pid_max) - 7 )) 4242 '"1"'
  read -r p s < <(msleep)
  forge "$p" "$s" '"1"'
  run alice alice
  ;;
pidns)
  # alice launches in a PID namespace with its own /proc (a container) while bob's job,
  # outside it, holds CPU 0: she is told once that she cannot see it, and goes around it.
  run bob bob 6
  # (`--mount-proc` would change /'s propagation, which fails in a chroot: this mounts
  # the namespace's /proc itself, on the mount this script already made private.)
  WRAP=(unshare --pid --fork --mount --propagation unchanged sh -c 'mount -t proc proc /proc && exec "$@"' sh)
  run alice alice
  WRAP=()
  ;;
timens)
  # alice's first job runs in a time namespace whose boot clock is 100,000 s ahead (its
  # /proc shows start times shifted by that much). Her next job, outside it, must still
  # find it (neither delete its claim nor land on its CPU), and so must one in another
  # time namespace (200,000 s ahead) once the second has ended.
  WRAP=(unshare --time --boottime 100000)
  run alice first 8
  WRAP=()
  run alice second 1
  sleep 1.5
  WRAP=(unshare --time --boottime 200000)
  run alice third 4
  WRAP=()
  echo "claims $(find /dev/shm -name 'c.*' | wc -l)"
  ;;
count-all)
  # alice's one-task job bound to the whole node holds it against her other jobs.
  printf 'resources:\n  - type: core\n    count: all\n' >"$scratch/all.yaml"
  chmod 644 "$scratch/all.yaml"
  as alice setsid "$BIN" "$scratch/all.yaml" -- sleep 5 &
  sleep 0.5
  t0=$(now_ms)
  as alice "$BIN" "$scratch/one.yaml" -- true 2>"$scratch/count.err"
  echo "count-all rc=$? ms=$(( $(now_ms) - t0 ))"
  cat "$scratch/count.err" >&2
  ;;
own-fallback)
  # alice's own job runs; then her ledger cannot be used (the root turns read-only, then
  # a stopped launch of hers holds her lock): her next jobs still go around her first.
  run alice first 6
  mount -o remount,ro /dev/shm
  run alice second 6
  mount -o remount,rw /dev/shm
  pkill -u binder-alice || true; sleep 0.3
  run alice third 6
  stop_holding_lock
  run alice fourth
  ;;
unseen)
  # bob's task bound where alice's ledger root shows nothing of his: by `taskset`, by
  # binder with BINDER_LEDGER=off, and by binder with another BINDER_LEDGER_DIR. Each
  # time alice's 1-core job must go around it (`run bob bob-K` / `run alice alice-K`).
  as bob setsid taskset -c 0 sleep 5 >/dev/null 2>&1 &
  sleep 0.3
  echo "run bob bob-taskset rc=0 ms=0 cpus=0"
  run alice alice-taskset
  pkill -u binder-alice || true; pkill -u binder-bob || true; sleep 0.3
  EXTRA=(BINDER_LEDGER=off)
  run bob bob-off 5
  EXTRA=()
  run alice alice-off
  pkill -u binder-alice || true; pkill -u binder-bob || true; sleep 0.3
  as bob mkdir -p /tmp/binder-hostile-bob-ledger
  EXTRA=(BINDER_LEDGER_DIR=/tmp/binder-hostile-bob-ledger)
  run bob bob-dir 5
  EXTRA=()
  run alice alice-dir
  pkill -u binder-alice || true; pkill -u binder-bob || true
  rm -rf /tmp/binder-hostile-bob-ledger
  ;;
churn)
  # SEMANTICS §13.4, churn: bob holds a CPU; alice launches short jobs beside mallory's
  # FLOOD (100,000) names in the ledger root and a watcher of hers that makes and removes
  # a directory there every 5 ms, so the root is never as it was (`churn`), in turns
  # with a launch of hers in a quiet ledger root of its own (`quiet`: BINDER_LEDGER_DIR),
  # ROUNDS (9) of each. Each launch is timed from alice's command to the task's exit
  # (`time PHASE MS CPUS`). Then a new user's first job, as far as alice's shared read
  # knows: bob's directory is removed and made again by his next job, in the churn, and
  # alice's job after it must not land on its CPU.
  timed() {
    local phase=$1 t0 t1 c
    t0=$(date +%s%N)
    c=$(as alice "$BIN" "$scratch/one.yaml" -- sh -c 'grep Cpus_allowed_list /proc/self/status | cut -f2' 2>>"$scratch/churn.err")
    t1=$(date +%s%N)
    echo "time $phase $(( (t1 - t0) / 1000000 )) ${c:-refused}"
  }
  quiet() { EXTRA=(BINDER_LEDGER_DIR=/dev/shm/quiet); timed "$1"; EXTRA=(); }
  run bob bob 30
  install -d -m 1777 /dev/shm/quiet
  # (Root's directory name, taken by mallory, makes nobody list the root again: only a
  # live user's, whose user may then have a directory of a secret name.)
  as mallory mkdir -m 0755 /dev/shm/binder-ledger.0
  as mallory python3 -c '
import os, sys
os.chdir("/dev/shm")
for i in range(int(sys.argv[1])):
    os.close(os.open("binder-ledger.x%d" % i, os.O_CREAT | os.O_WRONLY, 0o644))' "${FLOOD:-100000}"
  as mallory python3 -c '
import os, time
os.chdir("/dev/shm")
end = time.time() + 90
while time.time() < end:
    os.mkdir("binder-ledger.churn", 0o755)
    time.sleep(0.0025)
    os.rmdir("binder-ledger.churn")
    time.sleep(0.0025)' &
  sleep 0.3
  # (The first launch in each root makes alice's directory, and the first churned one
  # lists the root and shares the read: they are not the ones compared.)
  quiet first
  timed first
  for _ in $(seq "${ROUNDS:-9}"); do
    quiet quiet
    timed churn
  done
  # bob's next job, in a directory of his made again now (a new user's first job, as
  # far as alice's shared read knows); alice's job after it must avoid its CPU.
  pkill -u binder-bob sleep 2>/dev/null
  sleep 0.2
  rm -rf /dev/shm/binder-ledger."$(uid bob)"*
  run bob bob2 8
  run alice after 0.2
  cat "$scratch/churn.err" >&2 2>/dev/null
  ;;
thread-load)
  # #45's load test: LOAD (64) 1-core launches at once, alice's and bob's in turn, each
  # its own job holding its core 0.2 s; first unattacked (waves quiet, quiet2), then
  # (attacked, attacked2) while mallory runs two
  # processes of 4,000 idle unbound threads (ATTACK=flood: a flood of names, a squatted
  # user's name and a poked root instead). Prints `load PHASE JOB CPUS TL T0 T1` per
  # task that ran (TL: before binder started, T0: the task started) and `refused PHASE
  # JOB TL TEND` per launch that did not (the node has too few cores for all).
  cat >"$scratch/load.sh" <<'EOT'
t0=$(date +%s%N)
c=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
sleep 0.2
echo "load $1 $2 $c $3 $t0 $(date +%s%N)"
EOT
  chmod 644 "$scratch/load.sh"
  wave() {
    for j in $(seq "${LOAD:-64}"); do
      who=alice; [ $((j % 2)) = 0 ] && who=bob
      as "$who" setsid bash -c 'tl=$(date +%s%N)
        "$1" "$2/one.yaml" -- sh "$2/load.sh" "$3" "$4" "$tl" >"$2/load.$3.$4" 2>"$2/lerr.$3.$4" ||
          echo "refused $3 $4 $tl $(date +%s%N)" >"$2/load.$3.$4"' sh "$BIN" "$scratch" "$1" "$j" &
      pids+=($!)
    done
    wait "${pids[@]}"
  }
  pids=()
  # Two waves each, so that one slow moment of a busy machine does not decide the median.
  wave quiet
  pids=()
  wave quiet2
  pids=()
  if [ "${ATTACK:-threads}" = flood ]; then
    # SEMANTICS §13.5: 100,000 names in the ledger root, bob's canonical directory name
    # squatted (his launches use his secret directory), and a name made and removed in
    # the root every 10-20 ms.
    rm -rf /dev/shm/binder-ledger."$(uid bob)"
    as mallory mkdir -m 755 /dev/shm/binder-ledger."$(uid bob)"
    as mallory python3 -c '
import os
os.chdir("/dev/shm")
for i in range(int(os.environ.get("FLOOD", "100000"))):
    os.close(os.open("binder-ledger.f%d" % i, os.O_CREAT | os.O_WRONLY, 0o644))' 
    as mallory python3 -c '
import os, random, time
os.chdir("/dev/shm")
end = time.time() + 180
while time.time() < end:
    os.mkdir("binder-ledger.poke")
    os.rmdir("binder-ledger.poke")
    time.sleep(random.uniform(0.010, 0.020))' &
    echo "names $(ls -f /dev/shm | wc -l)"
  else
    for _ in 1 2; do
      as mallory python3 -c '
import threading, time, os
ev = threading.Event()
for _ in range(4000):
    threading.Thread(target=ev.wait, daemon=True).start()
open("/tmp/binder-hostile-load.%d" % os.getpid(), "w").close()
time.sleep(120)' &
    done
    for _ in $(seq 600); do [ "$(ls /tmp/binder-hostile-load.* 2>/dev/null | wc -l)" = 2 ] && break; sleep 0.05; done
    rm -f /tmp/binder-hostile-load.*
    echo "threads $(ps -L -u binder-mallory --no-headers | wc -l)"
  fi
  wave attacked
  pids=()
  wave attacked2
  cat "$scratch"/load.* 2>/dev/null
  grep -h -v "too few free units" "$scratch"/lerr.* >&2 2>/dev/null
  ;;
*)
  echo "unknown scenario $scenario" >&2
  exit 2
  ;;
esac
exit 0
