#!/usr/bin/env bash
# Starts (`slurm.sh start DIR`) or stops (`slurm.sh stop DIR`) a throwaway single-node
# Slurm cluster on localhost for binder's end-to-end tests: munged, slurmctld and slurmd,
# all confined to DIR (own socket, ports, spool and state), run as root. Task binding by
# Slurm is off (TaskPlugin=task/none), so what the tests see is binder's binding.
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
  cat >"$dir/slurm.conf" <<CONF
ClusterName=binder-e2e
SlurmctldHost=$host
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
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
LaunchParameters=use_interactive_step
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF"
  for _ in $(seq 1 60); do
    if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
      echo "export SLURM_CONF=$SLURM_CONF"
      exit 0
    fi
    sleep 0.5
  done
  echo "slurm did not come up; logs in $dir/log" >&2
  exit 1
  ;;
stop)
  for p in slurmd slurmctld munged; do
    [ -f "$dir/$p.pid" ] && kill "$(cat "$dir/$p.pid")" 2>/dev/null || true
  done
  ;;
esac
