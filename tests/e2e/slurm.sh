#!/usr/bin/env bash
# Starts (`slurm.sh start DIR`) or stops (`slurm.sh stop DIR`) a throwaway single-node
# Slurm cluster on localhost for binder's end-to-end tests: munged, slurmctld and slurmd,
# all confined to DIR (own socket, ports, spool and state), run as root. By default task
# binding by Slurm is off (TaskPlugin=task/none); a site's configuration is asked for with
# E2E_SLURM_TASK (e.g. task/affinity,task/cgroup), E2E_SLURM_PROCTRACK (proctrack/cgroup)
# and E2E_SLURM_CONSTRAIN (yes or no, cgroup.conf's ConstrainCores); E2E_SLURM_OVERSUBSCRIBE
# is the partition's OverSubscribe (FORCE unless told), E2E_SPANK_ARGS the plugin's
# plugstack.conf arguments (default=SHAPE catalog=DIR); E2E_SLURM_SCHEDULER the
# scheduler (sched/builtin unless told; heterogeneous jobs need sched/backfill).
# E2E_SLURM_GPUS=N gives the node N fake GPUs (gres gpu, files DIR/dev/nvidia0..N-1:
# character devices like /dev/null), so that Slurm hands out SLURM_STEP_GPUS and
# CUDA_VISIBLE_DEVICES per job, step and task (--gpus-per-task, --gpu-bind).
# E2E_SLURM_NODES=K runs K nodes (node1..nodeK) on this host, each its own `slurmd -N
# nodeI` in a mount namespace of its own with a private tmpfs on /dev/shm (binder's
# default ledger root), so each node has its own node ledger as real nodes do.
# With BINDER_SPANK=path/to/libbinder_spank.so, plugstack.conf loads binder's SPANK plugin;
# E2E_PLUGSTACK is the whole plugstack.conf instead (a site's include line).
# Prints `export SLURM_CONF=...` on success.
set -euo pipefail
cmd=$1; dir=$2
case "$cmd" in
start)
  mkdir -p "$dir"/{state,spool,log}
  host=$(hostname -s)
  cpus=$(nproc --all)
  key="$dir/munge.key"
  head -c 1024 /dev/urandom >"$key"; chmod 600 "$key"
  munged --force --socket="$dir/munge.sock" --key-file="$key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge.seed"
  port=$((20000 + RANDOM % 20000))
  gres=""
  : >"$dir/gres.conf"
  if [ -n "${E2E_SLURM_GPUS:-}" ]; then
    mkdir -p "$dir/dev"
    last=$((E2E_SLURM_GPUS - 1))
    for i in $(seq 0 "$last"); do
      [ -e "$dir/dev/nvidia$i" ] || mknod "$dir/dev/nvidia$i" c 1 3
    done
    echo "AutoDetect=off" >"$dir/gres.conf"
    echo "Name=gpu File=$dir/dev/nvidia[0-$last]" >>"$dir/gres.conf"
    gres="Gres=gpu:$E2E_SLURM_GPUS"
  fi
  cat >"$dir/slurm.conf" <<CONF
ClusterName=binder-e2e
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=${E2E_SLURM_PROCTRACK:-proctrack/linuxproc}
TaskPlugin=${E2E_SLURM_TASK:-task/none}
LaunchParameters=use_interactive_step
MpiDefault=none
SchedulerType=${E2E_SLURM_SCHEDULER:-sched/builtin}
SchedulerParameters=bf_interval=1,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldTimeout=30
SlurmdTimeout=30
PlugStackConfig=$dir/plugstack.conf
GresTypes=gpu
CONF
  nodes=${E2E_SLURM_NODES:-}
  if [ -n "$nodes" ]; then
    # Each node its own name, port, spool, log and pid file (%n is the node's name).
    sed -i -e "s|^SlurmdSpoolDir=.*|SlurmdSpoolDir=$dir/spool/%n|" \
      -e "s|^SlurmdPidFile=.*|SlurmdPidFile=$dir/slurmd-%n.pid|" \
      -e "s|^SlurmdLogFile=.*|SlurmdLogFile=$dir/log/slurmd-%n.log|" "$dir/slurm.conf"
    for i in $(seq 1 "$nodes"); do
      echo "NodeName=node$i NodeHostname=$host NodeAddr=127.0.0.1 Port=$((port + 1 + i)) CPUs=$cpus $gres State=UNKNOWN" >>"$dir/slurm.conf"
    done
    echo "PartitionName=debug Nodes=node[1-$nodes] Default=YES MaxTime=INFINITE State=UP OverSubscribe=${E2E_SLURM_OVERSUBSCRIBE:-FORCE}" >>"$dir/slurm.conf"
  else
    echo "NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus $gres State=UNKNOWN" >>"$dir/slurm.conf"
    echo "PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=${E2E_SLURM_OVERSUBSCRIBE:-FORCE}" >>"$dir/slurm.conf"
  fi
  # binder's SPANK plugin, when the caller built it (BINDER_SPANK=path/libbinder_spank.so).
  if [ -n "${E2E_PLUGSTACK:-}" ]; then
    # A plugstack.conf as a site writes it (e.g. the `make install`ed include).
    printf '%s\n' "$E2E_PLUGSTACK" >"$dir/plugstack.conf"
  elif [ -n "${BINDER_SPANK:-}" ]; then
    echo "required $BINDER_SPANK ${E2E_SPANK_ARGS:-}" >"$dir/plugstack.conf"
  else
    : >"$dir/plugstack.conf"
  fi
  # slurmd 22.05 insists on a cgroup mount even with proctrack/linuxproc and task/none.
  # A booted machine has one; a bare chroot does not, so mount this process's cgroup v1
  # hierarchies (or cgroup2 on a unified host) for the duration of the test.
  printf "CgroupPlugin=autodetect\nIgnoreSystemd=yes\nConstrainCores=%s\n" "${E2E_SLURM_CONSTRAIN:-no}" >"$dir/cgroup.conf"
  if ! mountpoint -q /sys/fs/cgroup; then
    if grep -q '^0::/' /proc/self/cgroup && [ "$(wc -l </proc/self/cgroup)" = 1 ]; then
      mount -t cgroup2 none /sys/fs/cgroup
    else
      mount -t tmpfs cgroup_root /sys/fs/cgroup
      cut -d: -f2 /proc/self/cgroup | grep -v '^$' | while read -r ctl; do
        case "$ctl" in
          name=*) sub=${ctl#name=}; opts="none,$ctl" ;;
          *) sub=$ctl; opts=$ctl ;;
        esac
        mkdir -p "/sys/fs/cgroup/$sub"
        mount -t cgroup -o "$opts" cgroup "/sys/fs/cgroup/$sub"
      done
    fi
    echo mounted >"$dir/cgroup.mounted"
  fi
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF"
  if [ -n "$nodes" ]; then
    for i in $(seq 1 "$nodes"); do
      mkdir -p "$dir/spool/node$i"
      # A node of its own: a private mount namespace whose /dev/shm is a fresh tmpfs.
      # (In a chroot / is no mount point: then the mount that holds /dev/shm is made
      # private, as tests/hostile/hostile.sh does.)
      unshare --mount --propagation unchanged sh -c \
        "{ mount --make-rprivate / 2>/dev/null || mount --make-rprivate \"\$(findmnt -no TARGET -T /dev/shm)\"; } && mount -t tmpfs -o mode=1777,size=64m tmpfs /dev/shm && exec slurmd -N node$i -f '$SLURM_CONF'"
    done
    want=$nodes
  else
    slurmd -f "$SLURM_CONF"
    want=1
  fi
  for _ in $(seq 1 60); do
    if [ "$(sinfo -h -N -o %T 2>/dev/null | grep -cE '^(idle|mixed|allocated)')" -ge "$want" ]; then
      echo "export SLURM_CONF=$SLURM_CONF"
      exit 0
    fi
    sleep 0.5
  done
  echo "slurm did not come up; logs in $dir/log" >&2
  exit 1
  ;;
stop)
  # Every daemon this cluster started is stopped and waited for (#56: a slurmctld whose
  # pid file was not written yet, or one of a directory a later test reused, outlived
  # the suite): by pid file, then by the configuration or socket in its command line,
  # SIGTERM, then SIGKILL after 10 s.
  daemons() {
    { for pidfile in "$dir"/slurmd*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
        [ -f "$pidfile" ] && cat "$pidfile"
      done
      pgrep -f -- "$dir/(slurm.conf|munge.sock)" || true
    } 2>/dev/null | sort -u
  }
  pids=$(daemons)
  [ -n "$pids" ] && kill $pids 2>/dev/null || true
  for _ in $(seq 1 100); do
    alive=$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
    [ -z "$alive" ] && break
    sleep 0.1
  done
  [ -n "${alive:-}" ] && kill -9 $alive 2>/dev/null || true
  if [ -f "$dir/cgroup.mounted" ]; then
    sleep 1
    for m in /sys/fs/cgroup/*; do mountpoint -q "$m" && umount "$m" || true; done
    umount /sys/fs/cgroup || true
  fi
  ;;
esac
