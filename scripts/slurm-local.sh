#!/usr/bin/env bash
# slurm-local.sh — a one-node Slurm cluster on this machine, for rlm's `--runner slurm`
# tests and for trying it out.
#
#   scripts/slurm-local.sh start    install (Debian packages) and start munge, slurmctld, slurmd
#   scripts/slurm-local.sh status   sinfo and squeue
#   scripts/slurm-local.sh stop     stop the three daemons this script started
#
# Needs root (it installs packages and writes /etc/slurm and /etc/munge). The node
# declares 16 CPUs whatever the machine has (SlurmdParameters=config_overrides), so a
# fan-out of 16 jobs runs at once even on 2 cores; no accounting database (job state
# comes from squeue/scontrol). Daemon logs: /var/log/slurm/. Idempotent: `start` on a
# running cluster only waits for it to be ready.
set -euo pipefail

CPUS=${RLM_SLURM_CPUS:-16}
MEMORY_MB=${RLM_SLURM_MEMORY_MB:-16000}
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
STATE=/var/spool/slurmctld
SPOOL=/var/spool/slurmd
LOGS=/var/log/slurm
RUN=/run/rlm-slurm-local

say() { echo "slurm-local: $*" >&2; }

need_root() {
  if [ "$(id -u)" != 0 ]; then
    say "must run as root (it installs packages and starts system daemons)"
    exit 1
  fi
}

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
    return
  fi
  say "installing slurm-wlm and munge (Debian packages)…"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq slurm-wlm munge >/dev/null
}

write_config() {
  local host
  host=$(hostname -s)
  mkdir -p "$CONF_DIR" "$STATE" "$SPOOL" "$LOGS" "$RUN"
  cat >"$CONF" <<EOF
# Written by rlm's scripts/slurm-local.sh: a one-node cluster for tests.
ClusterName=rlm-local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE
SlurmdSpoolDir=$SPOOL
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOGS/slurmctld.log
SlurmdLogFile=$LOGS/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
# A job submitted while another is completing on the node waits for the next
# scheduling pass: pass every second (the default of 60 s made 200 short jobs crawl).
SchedulerParameters=sched_interval=1,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
KillWait=2
InactiveLimit=0
MinJobAge=2
NodeName=$host CPUs=$CPUS RealMemory=$MEMORY_MB State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

start_munge() {
  if pgrep -x munged >/dev/null; then
    return
  fi
  mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
  if [ ! -s /etc/munge/munge.key ]; then
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
  fi
  chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
  chmod 0700 /etc/munge /var/lib/munge /var/log/munge
  chmod 0755 /run/munge
  chmod 0400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged
}

running() { [ -s "$RUN/$1.pid" ] && kill -0 "$(cat "$RUN/$1.pid")" 2>/dev/null; }

start_daemons() {
  if running slurmctld; then
    scontrol reconfigure >/dev/null 2>&1 || true # a rewritten config takes effect
  else
    /usr/sbin/slurmctld
  fi
  running slurmd || /usr/sbin/slurmd
}

wait_ready() {
  local host
  host=$(hostname -s)
  for _ in $(seq 1 150); do
    if sinfo -h -n "$host" -o %t 2>/dev/null | grep -Eq '^(idle|mix|alloc)'; then
      say "ready: $(sinfo -h -o '%P %D node(s) %t, %c CPUs' | head -n 1)"
      return
    fi
    # A node left down by an earlier run comes back.
    scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
    sleep 0.2
  done
  say "the cluster did not become ready in 30 s; see $LOGS/"
  sinfo >&2 || true
  exit 1
}

stop_all() {
  for daemon in slurmd slurmctld; do
    if running "$daemon"; then
      kill "$(cat "$RUN/$daemon.pid")" 2>/dev/null || true
    fi
  done
  if [ -s /run/munge/munged.pid ]; then
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true
  fi
}

case "${1:-start}" in
  start)
    need_root
    install_packages
    write_config
    start_munge
    start_daemons
    wait_ready
    ;;
  status)
    sinfo
    squeue
    ;;
  stop)
    need_root
    stop_all
    ;;
  *)
    echo "usage: $0 start|status|stop" >&2
    exit 2
    ;;
esac
