#!/usr/bin/env bash
# Brings a real single-node Slurm cluster up or down on this machine, for
# xrun's scale-out tests (see ../shared/docs/slurm.md for the facts behind
# each step). Everything lives under $XRUN_SLURM_DIR; nothing is left
# running after `down`.
#
#   .ci/slurm-cluster.sh install   # apt-get slurm-wlm + munge (needs root)
#   .ci/slurm-cluster.sh up        # start munged, slurmctld, slurmd; prints SLURM_CONF=...
#   .ci/slurm-cluster.sh down      # cancel jobs, stop the daemons
#   .ci/slurm-cluster.sh status
set -euo pipefail

dir=${XRUN_SLURM_DIR:-/tmp/xrun-slurm}
gpus=${XRUN_SLURM_GPUS:-4}      # fake GPUs (character devices) offered through gres
cpus=${XRUN_SLURM_CPUS:-8}      # advertised CPUs, so several tasks run at once on 2 cores
conf=$dir/etc/slurm.conf

log() { printf 'slurm-cluster: %s\n' "$*" >&2; }

install_pkgs() {
	if command -v slurmctld >/dev/null && command -v munged >/dev/null && command -v sbatch >/dev/null; then
		return 0
	fi
	[ "$(id -u)" = 0 ] || { log "need root to install slurm-wlm and munge"; exit 1; }
	command -v apt-get >/dev/null || { log "no apt-get: cannot install Slurm here"; exit 1; }
	apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
}

up() {
	install_pkgs
	down_quiet
	rm -rf "$dir"
	mkdir -p "$dir"/{etc,state,spool,log,run,gpu}
	host=$(hostname -s)

	# munge: no systemd here creates /run/munge. A munged already running
	# (the host's own) is used and left alone; one started here is
	# recorded, and stopped by `down`.
	install -d -o munge -g munge -m 0755 /run/munge
	if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
		runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
		cp /run/munge/munged.pid "$dir/run/munged.pid"
	fi
	for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
	munge -n | unmunge >/dev/null || { log "munge does not work"; exit 1; }

	# Fake GPUs: character devices, so each task gets its own CUDA_VISIBLE_DEVICES.
	for i in $(seq 0 $((gpus - 1))); do mknod "$dir/gpu/gpu$i" c 1 3; done

	# RealMemory must not exceed what slurmd -C reports, or the node goes INVAL.
	mem=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
	cat >"$conf" <<CONF
ClusterName=xrun-ci
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
GresTypes=gpu
SlurmdParameters=config_overrides
MinJobAge=300
# Cancelled or timed-out tasks get SIGKILL 2 s after SIGTERM (default 30 s),
# so that "down" need not wait long for their slurmstepd to end.
KillWait=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
NodeName=$host CPUs=$cpus RealMemory=$((mem / 2)) Gres=gpu:$gpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
	cat >"$dir/etc/gres.conf" <<GRES
AutoDetect=off
NodeName=$host Name=gpu File=$dir/gpu/gpu[0-$((gpus - 1))]
GRES
	cat >"$dir/etc/cgroup.conf" <<CG
CgroupPlugin=cgroup/v1
IgnoreSystemd=yes
CG
	export SLURM_CONF=$conf
	slurmctld -f "$conf"
	slurmd -f "$conf"
	for _ in $(seq 100); do
		state=$(sinfo -h -N -o '%t' 2>/dev/null | head -1)
		[ "$state" = idle ] && break
		sleep 0.2
	done
	if [ "${state:-}" != idle ]; then
		log "node did not become idle (state '${state:-none}'); logs:"
		tail -n 20 "$dir"/log/*.log >&2 || true
		down_quiet
		exit 1
	fi
	echo "SLURM_CONF=$conf"
}

# alive PID: the process runs (a zombie, waiting for PID 1 to reap it,
# does not count).
alive() {
	local st
	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	case $st in Z*) return 1 ;; esac
}

stop_pidfile() {
	local f=$1
	[ -f "$f" ] || return 0
	local pid
	pid=$(cat "$f")
	rm -f "$f"
	alive "$pid" || return 0
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 50); do alive "$pid" || return 0; sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
}

down_quiet() {
	# Only a running controller can cancel jobs (scancel retries an absent
	# one for ~18 s). Waiting for the queue to drain lets each task's
	# slurmstepd end before slurmd does, so nothing is left running.
	if [ -f "$conf" ] && [ -f "$dir/run/slurmctld.pid" ] && alive "$(cat "$dir/run/slurmctld.pid")"; then
		SLURM_CONF=$conf scancel --full --quiet --user "$(id -un)" 2>/dev/null || true
		for _ in $(seq 50); do
			[ -z "$(SLURM_CONF=$conf squeue -h 2>/dev/null)" ] && break
			sleep 0.2
		done
	fi
	stop_pidfile "$dir/run/slurmd.pid"
	stop_pidfile "$dir/run/slurmctld.pid"
	stop_pidfile "$dir/run/munged.pid"
}

case ${1:-} in
install) install_pkgs ;;
up) up ;;
down) down_quiet ;;
status) SLURM_CONF=$conf sinfo; SLURM_CONF=$conf squeue ;;
*) echo "usage: $0 install|up|down|status" >&2; exit 2 ;;
esac
