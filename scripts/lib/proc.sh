# shellcheck shell=bash
# proc.sh - waiting for the processes the scripts start: one way to wait for an exit, to stop
# a daemon, to wait for a FUSE daemon's mount, and to read a memserver's port from its ready
# line.

# wait_gone PID TENTHS: wait up to TENTHS tenths of a second for PID to exit; 1 if it did not
wait_gone()
{
	local _
	for _ in $(seq "$2"); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	! kill -0 "$1" 2>/dev/null
}

# stop_pid PID TENTHS: SIGTERM, wait_gone, then SIGKILL; reaps it if it is our child
stop_pid()
{
	kill -TERM "$1" 2>/dev/null
	wait_gone "$1" "$2" || kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	return 0
}

# wait_mount MNT PID TENTHS: wait up to TENTHS tenths of a second for MNT to be a mount point
# while PID (the daemon mounting it) lives; 1 if PID exits or the time passes first
wait_mount()
{
	local _
	for _ in $(seq "$3"); do
		mountpoint -q "$1" && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	mountpoint -q "$1"
}

# ready_port FILE PID TENTHS: print the TCP port of the memserver ready line in FILE (the
# memserver's stdout) once PID printed it; 1 if PID exits or TENTHS pass first
ready_port()
{
	local _ port
	for _ in $(seq "$3"); do
		port=$(grep -o 'on tcp [^ ,]*' "$1" 2>/dev/null | sed 's/.*://') || true
		[ -n "$port" ] && { echo "$port"; return 0; }
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
