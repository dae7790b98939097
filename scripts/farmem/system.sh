# shellcheck shell=bash
# system.sh - what scripts/farmem.sh changes on the machine, and how it undoes it: memory
# cgroups (v1 or v2), the swap backends (disk swap file, zram, a loop device over a file of
# passthrough_ll on a tmpfs, rmemfs through rmemfs-swap) and the cleanup trap. Sourced by
# farmem.sh after scripts/bench/targets.sh and scripts/lib/passthrough_ll.sh (it uses their
# globals: WORK, RAW, BUILD, PRIO, SWAP_MIB, SWAP_TOOL, MNT, FS_PID, MS_PID, PT_BIN, PT_PID);
# not run on its own.
#
# Everything made is written down in $WORK as it is made (cgroups, swap areas, zram devices,
# loop devices, rmemfs swap mounts, tmpfs mounts), so that cleanup undoes exactly that, in this
# order: processes in our cgroups killed (their swapped pages are freed), each swap area off,
# our loop devices detached, zram reset and removed, cgroups removed, FUSE mounts unmounted,
# daemons stopped, tmpfs mounts unmounted, temporary files removed.

# ---- memory cgroups ----

CG_VER="" CG_ROOT="" CG_PARENT=""

# cg_v2_root: the mount point of a cgroup2 hierarchy that has the memory controller (the
# whole of /sys/fs/cgroup, or the unified mount beside v1 controllers), or nothing
cg_v2_root()
{
	local m
	for m in $(awk '$3 == "cgroup2" {print $2}' /proc/mounts); do
		grep -qw memory "$m/cgroup.controllers" 2>/dev/null && { echo "$m"; return 0; }
	done
	return 1
}

# cg_detect WANT (auto|v1|v2): CG_VER (v1|v2), CG_PARENT (our cgroup, made here); auto takes
# v2 where its memory controller is there, else v1; 1 when there is no such memory cgroup
cg_detect()
{
	local v2
	v2=$(cg_v2_root)
	if [ "$1" != v1 ] && [ -n "$v2" ]; then
		CG_VER=v2 CG_ROOT=$v2
		grep -qw memory "$CG_ROOT/cgroup.subtree_control" ||
			echo +memory >"$CG_ROOT/cgroup.subtree_control" || return 1
	elif [ "$1" != v2 ] && [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
		CG_VER=v1 CG_ROOT=/sys/fs/cgroup/memory
	else
		return 1
	fi
	CG_PARENT=$CG_ROOT/rmemfs-farmem-$$
	mkdir "$CG_PARENT" || return 1
	echo "$CG_PARENT" >>"$WORK/cgroups"
	[ $CG_VER = v1 ] || echo +memory >"$CG_PARENT/cgroup.subtree_control" || return 1
	if [ $CG_VER = v1 ] && [ ! -f "$CG_PARENT/memory.memsw.limit_in_bytes" ]; then
		note all all "$(echo "cgroup v1 without memory.memsw (swap accounting off): the" \
			"no-swap runs rely on no swap device being active")"
	fi
	return 0
}

# cg_new NAME LIMIT_B SWAP: a fresh cgroup under ours, path in CG; LIMIT_B 0 = no limit; SWAP 0
# = the cgroup may not swap
cg_new()
{
	CG=$CG_PARENT/$1
	mkdir "$CG" || return 1
	echo "$CG" >>"$WORK/cgroups"
	if [ $CG_VER = v1 ]; then
		[ "$2" = 0 ] || echo "$2" >"$CG/memory.limit_in_bytes" || return 1
		if [ "$3" = 0 ] && [ "$2" != 0 ] && [ -f "$CG/memory.memsw.limit_in_bytes" ]; then
			echo "$2" >"$CG/memory.memsw.limit_in_bytes" || return 1
		fi
	else
		[ "$2" = 0 ] || echo "$2" >"$CG/memory.max" || return 1
		[ "$3" = 1 ] || echo 0 >"$CG/memory.swap.max" || return 1
	fi
}

# cg_read CGDIR oom_kills|peak|usage|majflt
cg_read()
{
	case $CG_VER:$2 in
	v1:majflt) awk '$1 == "total_pgmajfault" {print $2}' "$1/memory.stat" ;;
	v2:majflt) awk '$1 == "pgmajfault" {print $2}' "$1/memory.stat" ;;
	v1:oom_kills) awk '$1 == "oom_kill" {print $2; f = 1} END {if (!f) print 0}' "$1/memory.oom_control" ;;
	v2:oom_kills) awk '$1 == "oom_kill" {print $2; f = 1} END {if (!f) print 0}' "$1/memory.events" ;;
	v1:peak) cat "$1/memory.max_usage_in_bytes" ;;
	v2:peak) cat "$1/memory.peak" 2>/dev/null || cat "$1/memory.current" ;;
	v1:usage) cat "$1/memory.usage_in_bytes" ;;
	v2:usage) cat "$1/memory.current" ;;
	esac
}

# cg_remove CGDIR: kill what runs in it, wait for it to empty (10 s), remove it
cg_remove()
{
	local cg=$1 pid
	[ -d "$cg" ] || return 0
	for _ in $(seq 100); do
		[ -s "$cg/cgroup.procs" ] || break
		while read -r pid; do
			kill -KILL "$pid" 2>/dev/null
		done <"$cg/cgroup.procs"
		sleep 0.1
	done
	for _ in $(seq 50); do
		rmdir "$cg" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "farmem: could not remove cgroup $cg" >&2
	return 1
}

# cg_exec CGDIR CMD...: CMD in the cgroup (as a file: timeout and redis need a program)
cat >"$WORK/cg-exec" <<'EOF'
#!/bin/sh
# cg-exec CGDIR CMD...: move into the cgroup, then become CMD
echo $$ >"$1/cgroup.procs" || exit 126
shift
exec "$@"
EOF
chmod 755 "$WORK/cg-exec"

# ---- swap backends ----

DAEMON_RSS=0	# bytes of the FUSE daemon after mount + swap on: taken out of every limit
DAEMON_PID=""	# that daemon (rmemfs or passthrough_ll): its VmHWM is reported per run
SVC_PIDS=()	# the processes that serve a swap-in (the FUSE daemon, the memservers): their
		# context switches per major fault are reported per run
MS_PIDS=()	# rmemfs's memservers (--members of them)
SWAPDEV=""	# the active swap area of the backend
ZRAM_ID=""
PT_TMPFS=""	# the private tmpfs passthrough_ll serves

# swap_used_kib DEV: its Used column in /proc/swaps (0 when absent)
swap_used_kib() { awk -v d="$1" '$1 == d {print $4; f = 1} END {if (!f) print 0}' /proc/swaps; }

# the pid that holds the swap lock (from /proc/locks), for messages
lock_holder()
{
	local ino pid
	ino=$(stat -c %i "$LOCK" 2>/dev/null) || { echo "nobody"; return; }
	pid=$(awk -v i=":$ino" '$2 == "FLOCK" && index($6, i) && $5 != "->" {print $5; exit}' /proc/locks)
	if [ -n "$pid" ] && [ -d "/proc/$pid" ]; then
		echo "pid $pid ($(ps -o args= -p "$pid" 2>/dev/null | cut -c1-60))"
	elif [ -n "$pid" ]; then
		# the descriptor lives on in a process it started: name those that have the file open
		local p fd open_by=""
		for p in /proc/[0-9]*; do
			[ "${p#/proc/}" = $$ ] && continue
			for fd in "$p"/fd/*; do
				[ "$(readlink "$fd" 2>/dev/null)" = "$LOCK" ] || continue
				open_by+="${open_by:+, }${p#/proc/} ($(cat "$p/comm" 2>/dev/null))"
				break
			done
		done
		echo "pid $pid, gone; the file is open in ${open_by:-no other process}"
	else
		echo "another process"
	fi
}

# sys_cmd BACKEND WHAT CMD...: run and record a setup command; its output goes to the log
sys_cmd()
{
	local b=$1 what=$2
	shift 2
	record_cmd "$b" "$what" "$@"
	"$@" >>"$RAW/logs/$b.setup.log" 2>&1 || {
		echo "farmem: $b: '$*' failed:" >&2
		tail -5 "$RAW/logs/$b.setup.log" >&2
		return 1
	}
}

disk_up()
{
	local f=/var/tmp/rmemfs-farmem-$$.swap
	echo "$f" >>"$WORK/files"
	sys_cmd disk fallocate fallocate -l "${SWAP_MIB}M" "$f" && chmod 600 "$f" &&
		sys_cmd disk mkswap mkswap "$f" || return 1
	echo "$f" >>"$WORK/swaps"
	sys_cmd disk swapon swapon -p "$PRIO" "$f" || return 1
	SWAPDEV=$f
}

zram_up()
{
	ZRAM_ID=$(cat /sys/class/zram-control/hot_add) || return 1
	echo "$ZRAM_ID" >>"$WORK/zram"
	record_cmd zram hot_add "cat /sys/class/zram-control/hot_add  # -> $ZRAM_ID"
	record_cmd zram disksize "echo ${SWAP_MIB}M > /sys/block/zram$ZRAM_ID/disksize"
	echo "${SWAP_MIB}M" >"/sys/block/zram$ZRAM_ID/disksize" || return 1
	config zram_comp_algorithm "$(cat "/sys/block/zram$ZRAM_ID/comp_algorithm")"
	sys_cmd zram mkswap mkswap "/dev/zram$ZRAM_ID" || return 1
	echo "/dev/zram$ZRAM_ID" >>"$WORK/swaps"
	sys_cmd zram swapon swapon -p "$PRIO" "/dev/zram$ZRAM_ID" || return 1
	SWAPDEV=/dev/zram$ZRAM_ID
}

# daemon_budget BACKEND PID: the FUSE daemon PID serves BACKEND's swap: its VmRSS now (after
# mount + swap on) is taken out of every limit (DAEMON_RSS), its VmHWM is reported per run
daemon_budget()
{
	DAEMON_PID=$2
	DAEMON_RSS=$(($(awk '/^VmRSS:/ {print $2}' "/proc/$2/status") * 1024))
	config "daemon_rss_after_swapon_B:$1" "$DAEMON_RSS"
	echo "  $1 daemon pid $2: VmRSS $((DAEMON_RSS >> 20)) MiB after mount + swap on" \
		"(taken out of every limit); swap on $SWAPDEV"
}

# daemon_peak BACKEND PID: the VmHWM of BACKEND's daemon PID over its whole life, into the
# config (before it is unmounted)
daemon_peak()
{
	[ -n "$2" ] || return 0
	config "daemon_peak_rss_B:$1" \
		"$(($(awk '/^VmHWM:/ {print $2}' "/proc/$2/status" 2>/dev/null || echo 0) * 1024))"
}

# ---- passthrough_ll: the FUSE ceiling ----
#
# The rmemfs-swap set-up (tools/swap_on.c) over a file of libfuse's passthrough_ll serving a
# private tmpfs: what a FUSE swap costs without any network. The file is written whole with
# zeros through O_DIRECT (every tmpfs page exists before swap on: a swap-out never
# allocates), attached to a loop device with direct I/O (checked: without it every swapped page
# would also go through the page cache), mkswap, swapon. The tmpfs is local RAM the cgroup is
# not charged for, like zram; it is mounted noswap where the kernel has that (6.4+), so that
# its pages, the swap area itself, are never swapped out to it.

PT_SWAPFILE_NAME=swapfile

# loop_detach DEV: losetup -d, then wait (10 s) for the kernel to let go of the backing file:
# it detaches at the last close, and udev's probes may hold the device a moment (a second
# losetup -d of a device already on its way out fails, and is not an error); 0 or 1
loop_detach()
{
	local dev=$1 sysf=/sys/block/${1#/dev/}/loop/backing_file
	[ -e "$sysf" ] || return 0
	losetup -d "$dev" 2>/dev/null
	for _ in $(seq 100); do
		[ -e "$sysf" ] || return 0
		sleep 0.1
	done
	echo "farmem: $dev still holds $(cat "$sysf" 2>/dev/null) 10 s after losetup -d" >&2
	return 1
}

# our_loops: the loop devices this run attached: those written down in $WORK/loops, and any
# whose backing file lies under $WORK (one whose losetup was interrupted before its name was
# written down)
our_loops()
{
	local f back
	{
		[ -f "$WORK/loops" ] && cat "$WORK/loops"
		for f in /sys/block/loop*/loop/backing_file; do
			[ -r "$f" ] || continue
			back=$(cat "$f" 2>/dev/null)
			[[ $back == "$WORK"/* ]] && { f=${f#/sys/block/}; echo "/dev/${f%%/*}"; }
		done
	} | sort -u
}

# tmpfs_used_b: bytes in use on passthrough_ll's tmpfs (statvfs), 0 when none is mounted
tmpfs_used_b()
{
	if [ -n "$PT_TMPFS" ] && mountpoint -q "$PT_TMPFS"; then
		df -B1 --output=used "$PT_TMPFS" | tail -1 | tr -d ' '
	else
		echo 0
	fi
}

passthrough_ll_swap_up()
{
	local b=passthrough_ll f dev dio used opts="size=$((SWAP_MIB + 64))M,mode=0700"
	PT_TMPFS=$WORK/pt-tmpfs
	mkdir -p "$PT_TMPFS"
	echo "$PT_TMPFS" >>"$WORK/tmpfs"
	if ! sys_cmd "$b" tmpfs mount -t tmpfs -o "$opts,noswap" rmemfs-farmem-pt "$PT_TMPFS"; then
		sys_cmd "$b" tmpfs mount -t tmpfs -o "$opts" rmemfs-farmem-pt "$PT_TMPFS" || return 1
		note "$b" all "$(echo "tmpfs without noswap (kernel before 6.4): its pages could be" \
			"swapped out under global memory pressure")"
	fi
	PT_SOURCE=$PT_TMPFS
	PT_NOFILE=1024	# a handful of inodes: the root and the swap file
	MNT=$WORK/mnt/$b
	# the daemon does not keep the swap lock's descriptor (fd 3)
	passthrough_ll_mount "$b" 3>&- || return 1
	config "passthrough_ll_pid" "$PT_PID"
	# (no fallocate first, as rmemfs-swap does: Debian's example source built without its
	# config.h answers it EOPNOTSUPP; the zeros allocate every page anyway)
	f=$MNT/$PT_SWAPFILE_NAME
	sys_cmd "$b" "zeros (O_DIRECT), fsync" dd if=/dev/zero of="$f" bs=1M count="$SWAP_MIB" \
		oflag=direct conv=fsync status=none && chmod 600 "$f" || return 1
	record_cmd "$b" losetup losetup --find --show --direct-io=on "$f"
	dev=$(losetup --find --show --direct-io=on "$f" 2>>"$RAW/logs/$b.setup.log") ||
		{ echo "farmem: $b: losetup failed:" >&2; tail -5 "$RAW/logs/$b.setup.log" >&2; return 1; }
	echo "$dev" >>"$WORK/loops"
	dio=$(cat "/sys/block/${dev#/dev/}/loop/dio" 2>/dev/null)
	config "loop_dio:$b" "$dio"
	if [ "$dio" != 1 ]; then
		echo "farmem: $b: $dev is attached without direct I/O (loop/dio '${dio:-absent}'): every" \
			"swapped-out page would also be cached; not measured" >&2
		return 1
	fi
	sys_cmd "$b" mkswap mkswap "$dev" || return 1
	echo "$dev" >>"$WORK/swaps"
	sys_cmd "$b" swapon swapon -p "$PRIO" "$dev" || return 1
	SWAPDEV=$dev
	used=$(tmpfs_used_b)
	config "tmpfs_used_B:$b" "$used"
	note "$b" all "$(echo "its swap file lies on a private tmpfs: $((used >> 20)) MiB of local" \
		"RAM (the whole swap area, written before swap on) that the cgroup is not charged" \
		"for, like zram's memory; the daemon's RSS after mount + swap on is taken out of" \
		"every limit, as rmemfs's is")"
	daemon_budget "$b" "$PT_PID"
	SVC_PIDS=("$PT_PID")
}

passthrough_ll_swap_down()
{
	local b=passthrough_ll dev
	MNT=$WORK/mnt/$b
	[ -n "$SWAPDEV" ] && { record_cmd "$b" swapoff swapoff "$SWAPDEV"; swap_off_one "$SWAPDEV"; }
	for dev in $(our_loops); do
		record_cmd "$b" "loop detach" losetup -d "$dev"
		loop_detach "$dev"
	done
	rm -f "$WORK/loops"
	daemon_peak "$b" "$PT_PID"
	if [ -n "$PT_PID" ]; then
		rm -f "$MNT/$PT_SWAPFILE_NAME"
		record_cmd "$b" unmount fusermount3 -u "$MNT"
		passthrough_ll_unmount "$b"
	fi
	if [ -n "$PT_TMPFS" ] && mountpoint -q "$PT_TMPFS"; then
		record_cmd "$b" "tmpfs unmount" umount "$PT_TMPFS"
		umount "$PT_TMPFS" || umount -l "$PT_TMPFS"
	fi
	PT_TMPFS=""
}

# the memserver's pool for a backend: its share of the swap area (MEMBERS servers holding
# REPLICAS copies of it), the file system's metadata, slack
rmemfs_pool() { echo "$(((SWAP_MIB * REPLICAS + MEMBERS - 1) / MEMBERS + 256))M"; }

# rmemfs_members_start BACKEND LISTEN TRANSPORT: MEMBERS memservers (MS_PIDS), RMEMFS_SOURCE
# the set's address list (a single server: unset, rmemfs_mount takes MS_ADDR:MS_PORT)
rmemfs_members_start()
{
	local b=$1 i src=""
	POOL=$(rmemfs_pool)
	# --spin-us 0: a memserver spins after each request for the next one (50 us by
	# default), which costs a remote machine nothing; here it would take one of the
	# two CPUs the workload, the loop worker and the daemon share
	MS_EXTRA=(--mlock --spin-us 0)
	MS_PIDS=()
	unset RMEMFS_SOURCE
	for i in $(seq "$MEMBERS"); do
		local name=$b
		[ "$MEMBERS" = 1 ] || name=$b-m$i
		# the daemons do not keep the swap lock's descriptor (fd 3): only rmemfs-swap gets it
		memserver_start "$name" "$2" "$3" 3>&-
		local rc=$?
		# (one that started but never said its port is stopped with the others)
		[ -n "$MS_PID" ] && MS_PIDS+=("$MS_PID")
		[ $rc = 0 ] || return 1
		src+="${src:+,}$MS_ADDR:$MS_PORT"
	done
	[ "$MEMBERS" = 1 ] || RMEMFS_SOURCE=$src
	return 0
}

rmemfs_members_stop()
{
	local p
	for p in ${MS_PIDS[@]+"${MS_PIDS[@]}"}; do
		MS_PID=$p
		memserver_stop
	done
	MS_PIDS=()
}

# transport_alone BACKEND TRANSPORT: the transport's 4 KiB read at queue depth 1 with the
# daemon's way of waiting (event), against the last memserver started, the file system idle:
# one of the parts of a swap-in's cost (report.py's cost table); into the config
transport_alone()
{
	local b=$1 log=$RAW/logs/$1.transport.json
	local cmd=("$BUILD/tools/rmem-perf" "$MS_ADDR:$MS_PORT" --transport "$2"
		--token-file "$WORK/token" --op read --size 4K --qd 1 --poll event --duration 5 --json)
	record_cmd "$b" "the transport alone" "${cmd[@]}"
	"${cmd[@]}" >"$log" 2>>"$RAW/logs/$b.setup.log" || {
		note "$b" all "the transport alone (rmem-perf) failed: see raw/logs/$b.setup.log"
		return 0
	}
	"$PY" - "$log" "$b" >>"$RAW/config.tsv" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))['results'][0]
for k in ('lat_mean_us', 'lat_med_us', 'lat_p99_us'):
    print('transport_%s:%s\t%s' % (k, sys.argv[2], r[k]))
PY
	echo "  the transport alone: $(grep -F ":$b" "$RAW/config.tsv" | grep '^transport_' |
		sed 's/:[^\t]*\t/ /' | tr '\n' ' ')"
}

rmemfs_swap_up()
{
	local b=$1 listen=127.0.0.1 transport=tcp stats
	[ "$b" = rmemfs-rdma ] && listen=$RDMA_ADDR transport=rdma
	rmemfs_members_start "$b" "$listen" "$transport" || return 1
	MNT=$WORK/mnt/$b
	RMEMFS_OPTS=swap
	[ "$MEMBERS" = 1 ] || RMEMFS_OPTS+=",replicas=$REPLICAS"
	rmemfs_mount "$b" 1 3>&- || return 1
	config "rmemfs_client_pid:$b" "$FS_PID"
	stats=$(getfattr --only-values -n user.rmemfs.stats "$MNT" 2>/dev/null ||
		"$PY" -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.rmemfs.stats").decode())' "$MNT")
	grep -q '^swap on' <<<"$stats" || { echo "farmem: $b: the daemon does not say 'swap on'" >&2; return 1; }
	# (a failed `on` undoes itself; the trap turns off whatever is left at our priority)
	sys_cmd "$b" "rmemfs-swap on" timeout -k 10 600 "$SWAP_TOOL" on "$MNT" "${SWAP_MIB}M" \
		--priority "$PRIO" || return 1
	echo "$MNT" >>"$WORK/swapmounts"
	SWAPDEV=$(awk -v p="$PRIO" 'NR > 1 && $5 == p {print $1; exit}' /proc/swaps)
	[ -n "$SWAPDEV" ] || { echo "farmem: $b: no swap area of priority $PRIO after rmemfs-swap on" >&2; return 1; }
	daemon_budget "$b" "$FS_PID"
	SVC_PIDS=("$FS_PID" "${MS_PIDS[@]}")
	transport_alone "$b" "$transport"
}

rmemfs_swap_down()
{
	local b=$1
	if [ -n "$MNT" ] && grep -qxF "$MNT" "$WORK/swapmounts" 2>/dev/null; then
		sys_cmd "$b" "rmemfs-swap off" timeout -k 10 600 "$SWAP_TOOL" off "$MNT"
		grep -vxF "$MNT" "$WORK/swapmounts" >"$WORK/swapmounts.new"
		mv "$WORK/swapmounts.new" "$WORK/swapmounts"
	fi
	daemon_peak "$b" "$FS_PID"
	[ -n "$FS_PID" ] && rmemfs_unmount "$b"
	rmemfs_members_stop
}

# backend_up BACKEND: SWAPDEV, DAEMON_RSS, DAEMON_PID set; 0 or 1
backend_up()
{
	SWAPDEV="" DAEMON_RSS=0 DAEMON_PID="" ZRAM_ID="" SVC_PIDS=()
	mkdir -p "$RAW/runs"
	case $1 in
	none) ;;
	disk) disk_up ;;
	zram) zram_up ;;
	passthrough_ll) passthrough_ll_swap_up ;;
	rmemfs-*) rmemfs_swap_up "$1" ;;
	esac
	local rc=$?
	[ $rc = 0 ] && [ -n "$SWAPDEV" ] && echo "  swap: $(grep -F "$SWAPDEV " /proc/swaps)"
	return $rc
}

# swap_off_one DEV: swapoff, and forget it
swap_off_one()
{
	grep -q "^$1 " /proc/swaps && { swapoff "$1" || echo "farmem: swapoff $1 failed" >&2; }
	grep -vxF "$1" "$WORK/swaps" >"$WORK/swaps.new" 2>/dev/null
	mv "$WORK/swaps.new" "$WORK/swaps"
}

zram_remove()
{
	local id=$1
	[ -e "/sys/block/zram$id" ] || return 0
	echo 1 >"/sys/block/zram$id/reset" 2>/dev/null
	echo "$id" >/sys/class/zram-control/hot_remove 2>/dev/null ||
		echo "farmem: could not remove zram$id" >&2
}

backend_down()
{
	case $1 in
	disk)
		[ -n "$SWAPDEV" ] && { record_cmd disk swapoff swapoff "$SWAPDEV"; swap_off_one "$SWAPDEV"; }
		rm -f "/var/tmp/rmemfs-farmem-$$.swap"
		;;
	zram)
		[ -n "$SWAPDEV" ] && { record_cmd zram swapoff swapoff "$SWAPDEV"; swap_off_one "$SWAPDEV"; }
		if [ -n "$ZRAM_ID" ]; then
			record_cmd zram remove "$(echo "echo 1 > /sys/block/zram$ZRAM_ID/reset;" \
				"echo $ZRAM_ID > /sys/class/zram-control/hot_remove")"
			zram_remove "$ZRAM_ID"
		fi
		;;
	passthrough_ll) passthrough_ll_swap_down ;;
	rmemfs-*) rmemfs_swap_down "$1" ;;
	esac
	SWAPDEV="" DAEMON_RSS=0 DAEMON_PID="" ZRAM_ID="" SVC_PIDS=()
	[ -z "$(tail -n +2 /proc/swaps)" ] ||
		note "$1" all "swap areas still active after $1 was torn down: $(tail -n +2 /proc/swaps |
			awk '{print $1}' | tr '\n' ' ')"
}

# ---- the trap ----

cleanup()
{
	set +e
	trap - INT TERM
	local cg pid m dev id mine=()
	# 1. whatever runs in our cgroups (their swapped-out pages go with them)
	[ -f "$WORK/cgroups" ] && while read -r cg; do
		[ -f "$cg/cgroup.procs" ] && while read -r pid; do
			kill -KILL "$pid" 2>/dev/null
		done <"$cg/cgroup.procs"
	done <"$WORK/cgroups"
	# 2. swap: our own areas, then the rmemfs ones through rmemfs-swap (it still has fd 3)
	[ -f "$WORK/swaps" ] && while read -r dev; do
		grep -q "^$dev " /proc/swaps && { swapoff "$dev" || echo "farmem: swapoff $dev failed" >&2; }
	done <"$WORK/swaps"
	[ -f "$WORK/swapmounts" ] && while read -r m; do
		timeout -k 10 300 "$SWAP_TOOL" off "$m" || echo "farmem: rmemfs-swap off $m failed" >&2
	done <"$WORK/swapmounts"
	# anything still on at our priority is ours (we started with no swap and hold the lock)
	awk -v p="$PRIO" 'NR > 1 && $5 == p {print $1}' /proc/swaps | while read -r dev; do
		swapoff "$dev" || echo "farmem: swapoff $dev failed" >&2
		local back
		back=$(cat "/sys/block/${dev#/dev/}/loop/backing_file" 2>/dev/null)
		[[ $dev == /dev/loop* ]] && [[ $back == "$WORK"/* ]] && losetup -d "$dev"
	done
	# our loop devices (the passthrough_ll swap file's), off swap now: detached before the
	# FUSE mount under them goes
	for dev in $(our_loops); do loop_detach "$dev"; done
	[ -f "$WORK/zram" ] && while read -r id; do zram_remove "$id"; done <"$WORK/zram"
	[ -f "$WORK/files" ] && while read -r m; do rm -rf "$m"; done <"$WORK/files"
	# 3. cgroups, deepest first
	[ -f "$WORK/cgroups" ] && tac "$WORK/cgroups" | while read -r cg; do
		[ -d "$cg" ] && cg_remove "$cg"
	done
	# 4. mounts (lazily: a job may still hold files open), then our daemons
	for m in "$WORK"/mnt/*; do
		mountpoint -q "$m" 2>/dev/null && { fusermount3 -uz "$m" 2>/dev/null || umount -l "$m"; }
	done
	while read -r pid; do
		[ -n "$pid" ] && ours "$pid" && mine+=("$pid")
	done <"$WORK/pids"
	for pid in "${mine[@]}"; do kill -TERM "$pid" 2>/dev/null; done
	for _ in $(seq 50); do
		local alive=0
		for pid in "${mine[@]}"; do ours "$pid" && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for pid in "${mine[@]}"; do ours "$pid" && kill -KILL "$pid" 2>/dev/null; done
	# 5. the tmpfs mounts (passthrough_ll's source), once no daemon holds files in them
	[ -f "$WORK/tmpfs" ] && while read -r m; do
		mountpoint -q "$m" 2>/dev/null && { umount "$m" 2>/dev/null || umount -l "$m"; }
	done <"$WORK/tmpfs"
	rm -rf "$WORK"
}
