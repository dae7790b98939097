# shellcheck shell=bash
# workloads.sh - the runs of scripts/farmem.sh: one workload in one memory cgroup on the swap
# backend that is up, and the scratch-space sorts. Sourced by farmem.sh after system.sh (it
# uses their globals and functions); not run on its own.
#
# Each run leaves in raw/runs/WORKLOAD/BACKEND-PCT.*: .json (rmem-touch --json), .get.csv and
# .set.csv (redis-benchmark --csv), .load (redis-cli --pipe), .err, .oom (the kernel's report
# of an OOM kill in the run's cgroup), and .meta ("key<TAB>value":
# status, limit, the cgroup's peak, OOM kills, swap traffic, the FUSE daemon's peak RSS, zram's
# mm_stat, passthrough_ll's tmpfs use), and a line in raw/runs.tsv. report.py reads only those.

LAST_PEAK=0

# since T0: seconds from T0 (date +%s.%N) to now
since() { awk -v t0="$1" -v t1="$(date +%s.%N)" 'BEGIN {printf "%.3f", t1 - t0}'; }

# vmstat_get NAME: a counter of /proc/vmstat
vmstat_get() { awk -v n="$1" '$1 == n {print $2}' /proc/vmstat; }

# svc_switches: the context switches (voluntary and not) of every thread of SVC_PIDS so far
svc_switches()
{
	local p
	for p in ${SVC_PIDS[@]+"${SVC_PIDS[@]}"}; do
		cat "/proc/$p/task/"*/status 2>/dev/null
	done | awk '/ctxt_switches:/ {s += $2} END {print s + 0}'
}

# run_status RC OOM_KILLS: ok, OOM (killed by the OOM killer), TIMEOUT or FAILED
run_status()
{
	if [ "$1" = 0 ]; then
		echo ok
	elif [ "${2:-0}" -gt 0 ]; then
		echo OOM
	elif [ "$1" = 124 ]; then
		echo TIMEOUT
	else
		echo FAILED
	fi
}

# daemon_hwm_line PID: "daemon_hwm_B<TAB>bytes" of a FUSE daemon (VmHWM), when PID runs
daemon_hwm_line()
{
	[ -n "$1" ] && [ -r "/proc/$1/status" ] || return 0
	printf 'daemon_hwm_B\t%s\n' $(($(awk '/^VmHWM:/ {print $2}' "/proc/$1/status") * 1024))
}

# touch_cmd WORKLOAD: the rmem-touch command line of a workload, into CMD
touch_cmd()
{
	case $1 in
	touch-seq) CMD=("$TOUCH_BIN" "${TOUCH_MIB}M" --pattern seq --passes 1 --json) ;;
	touch-rand) CMD=("$TOUCH_BIN" "${TOUCH_MIB}M" --pattern rand --touches "$TOUCHES" --json) ;;
	sort) CMD=("$TOUCH_BIN" --sort "${SORT_MIB}M" --json) ;;
	esac
}

# redis_cli ARGS...: redis-cli on the run's socket, bounded
redis_cli() { timeout -k 5 30 redis-cli -s "$WORK/redis.sock" "$@"; }

# redis_run BASE TAG: redis-server in $CG, loaded, then GET and SET; 0 when all of it ran
redis_run()
{
	local base=$1 tag=$2 rpid rc=0 t0 keys
	rm -rf "$WORK/redis" "$WORK/redis.sock"
	mkdir -p "$WORK/redis"
	local srv=(redis-server --port 0 --unixsocket "$WORK/redis.sock" --unixsocketperm 700
		--save "" --appendonly no --daemonize no --dir "$WORK/redis"
		--logfile "$base.redis.log")
	record_cmd "$tag" "redis-server (in the cgroup)" "${srv[@]}"
	"$WORK/cg-exec" "$CG" "${srv[@]}" 3>&- &
	rpid=$!
	echo "$rpid" >>"$WORK/pids"
	# not a job of this shell any more: an OOM kill of the server is a result, not a "Killed"
	# line from bash (its end is watched with kill -0)
	disown "$rpid"
	for _ in $(seq 100); do
		redis_cli ping 2>/dev/null | grep -q PONG && break
		kill -0 "$rpid" 2>/dev/null || break
		sleep 0.1
	done
	redis_cli ping 2>/dev/null | grep -q PONG || { echo "redis-server did not start" >>"$base.err"; rc=1; }

	# the dataset: every key of the keyspace once, as redis-benchmark names them
	# (key:%012d), 1 KiB values of hex digits (they compress about 2:1, like rmem-touch's pages)
	local load=(redis-cli -s "$WORK/redis.sock" --pipe)
	record_cmd "$tag" "redis load" "$PY $HERE/report.py redis-load $REDIS_KEYS $REDIS_VALUE |" "${load[@]}"
	if [ $rc = 0 ]; then
		t0=$(date +%s.%N)
		"$PY" "$HERE/report.py" redis-load "$REDIS_KEYS" "$REDIS_VALUE" 2>>"$base.err" |
			timeout -k 10 "$RUN_LIMIT" "${load[@]}" >"$base.load" 2>>"$base.err"
		rc=$?
		printf 'load_s\t%s\n' "$(since "$t0")" >>"$base.meta"
		keys=$(redis_cli dbsize 2>/dev/null)
		printf 'keys_loaded\t%s\n' "${keys:-0}" >>"$base.meta"
		[ $rc = 0 ] && [ "${keys:-0}" != "$REDIS_KEYS" ] && rc=1
	fi
	local op
	for op in get set; do
		[ $rc = 0 ] || break
		local bench=(redis-benchmark -s "$WORK/redis.sock" -t "$op" -n "$REDIS_REQ"
			-r "$REDIS_KEYS" -d "$REDIS_VALUE" -c 16 --csv)
		record_cmd "$tag" "redis-benchmark $op" "${bench[@]}"
		run timeout -k 10 "$RUN_LIMIT" "${bench[@]}" >"$base.$op.csv" 2>>"$base.err"
		rc=$?
		kill -0 "$rpid" 2>/dev/null || rc=137
		[ $rc = 0 ] && ! grep -q '^"'"${op^^}"'"' "$base.$op.csv" && rc=1
	done
	redis_cli shutdown nosave >/dev/null 2>&1
	for _ in $(seq 100); do kill -0 "$rpid" 2>/dev/null || break; sleep 0.1; done
	kill -KILL "$rpid" 2>/dev/null
	for _ in $(seq 50); do kill -0 "$rpid" 2>/dev/null || break; sleep 0.1; done
	rm -rf "$WORK/redis" "$WORK/redis.sock"
	return $rc
}

# workload_run WORKLOAD BACKEND PCT LIMIT_B: one run; LIMIT_B 0 = unlimited (the working-set
# measurement). Sets LAST_PEAK (the cgroup's peak usage); 0 when the workload completed
workload_run()
{
	local w=$1 b=$2 pct=$3 limit=$4 swap=1 rc t0 oom status base tag
	mkdir -p "$RAW/runs/$w"
	base=$RAW/runs/$w/$b-$pct
	tag="$w/$b-$pct"
	: >"$base.meta"
	: >"$base.err"
	[ "$b" = none ] || [ "$b" = unlimited ] && swap=0
	cg_new "$w-$b-$pct" "$limit" "$swap" || { echo "farmem: cgroup for $tag failed" >&2; return 1; }
	[ -n "$ZRAM_ID" ] && echo 0 >"/sys/block/zram$ZRAM_ID/mem_used_max"
	# the swap backend's FUSE daemon: its VmHWM from here on is this run's
	[ -n "$DAEMON_PID" ] && echo 5 >"/proc/$DAEMON_PID/clear_refs"
	local pin0 pout0 sw0
	pin0=$(vmstat_get pswpin) pout0=$(vmstat_get pswpout) sw0=$(svc_switches)
	t0=$(date +%s.%N)
	if [ "$w" = redis ]; then
		redis_run "$base" "$tag"
		rc=$?
	else
		touch_cmd "$w"
		record_cmd "$tag" "$w (in the cgroup)" "${CMD[@]}"
		run timeout -k 10 "$RUN_LIMIT" "$WORK/cg-exec" "$CG" "${CMD[@]}" >"$base.json" 2>>"$base.err"
		rc=$?
	fi
	oom=$(cg_read "$CG" oom_kills)
	LAST_PEAK=$(cg_read "$CG" peak)
	local sw1 majflt
	sw1=$(svc_switches) majflt=$(cg_read "$CG" majflt)
	# the kernel's OOM report names the cgroup: keep it (what the memory was when it gave up)
	[ "${oom:-0}" -gt 0 ] && dmesg 2>/dev/null | grep -B70 "oom_memcg=${CG#"$CG_ROOT"}," >"$base.oom"
	status=$(run_status "$rc" "$oom")
	{
		printf 'workload\t%s\nbackend\t%s\nlocal_pct\t%s\nlimit_B\t%s\n' "$w" "$b" "$pct" "$limit"
		printf 'status\t%s\nrc\t%s\noom_kills\t%s\ncg_peak_B\t%s\n' "$status" "$rc" "$oom" "$LAST_PEAK"
		printf 'wall_s\t%s\n' "$(since "$t0")"
		printf 'pswpin\t%s\npswpout\t%s\n' $(($(vmstat_get pswpin) - pin0)) $(($(vmstat_get pswpout) - pout0))
		printf 'daemon_rss_B\t%s\n' "$DAEMON_RSS"
		daemon_hwm_line "$DAEMON_PID"
		printf 'cg_majflt\t%s\n' "${majflt:-0}"
		[ ${#SVC_PIDS[@]} = 0 ] || printf 'svc_switches\t%s\n' $((sw1 - sw0))
		[ -n "$ZRAM_ID" ] && printf 'zram_mm_stat\t%s\n' "$(cat "/sys/block/zram$ZRAM_ID/mm_stat")"
		[ -n "$PT_TMPFS" ] && printf 'tmpfs_used_B\t%s\n' "$(tmpfs_used_b)"
		[ -n "$SWAPDEV" ] && printf 'swapdev\t%s\n' "$SWAPDEV"
	} >>"$base.meta"
	cg_remove "$CG"
	printf '%s\t%s\t%s\t%s\n' "$w" "$b" "$pct" "$base" >>"$RAW/runs.tsv"
	printf '  %-10s %-14s %5s  limit %5s MiB  %s\n' "$w" "$b" "$([ "$b" = unlimited ] || echo "$pct%")" \
		"$([ "$limit" = 0 ] && echo '-' || echo $((limit >> 20)))" \
		"$("$PY" "$HERE/report.py" line "$base")"
	[ "$status" = ok ]
}

# ---- scratch space ----

# scratch_one NAME DIR LIMIT_B INPUT LINES: one GNU sort with -T DIR in a cgroup (LIMIT_B 0:
# unlimited), output checked
scratch_one()
{
	local name=$1 dir=$2 limit=$3 input=$4 lines=$5 rc t0 status oom outl
	local base=$RAW/runs/scratch/$name
	mkdir -p "$RAW/runs/scratch"
	: >"$base.meta"
	cg_new "scratch-$name" "$limit" 0 || return 1
	[ -n "$FS_PID" ] && [ "$name" = rmemfs ] && echo 5 >"/proc/$FS_PID/clear_refs"
	local cmd=(env LC_ALL=C sort -S "${SCRATCH_BUF_MIB}M" -T "$dir" --parallel=2
		-o "$WORK/scratch/out" "$input")
	record_cmd "scratch/$name" "sort (in the cgroup)" "${cmd[@]}"
	sync
	t0=$(date +%s.%N)
	run timeout -k 10 "$RUN_LIMIT" "$WORK/cg-exec" "$CG" "${cmd[@]}" >"$base.err" 2>&1
	rc=$?
	printf 'time_s\t%s\n' "$(since "$t0")" >>"$base.meta"
	oom=$(cg_read "$CG" oom_kills)
	printf 'cg_peak_B\t%s\n' "$(cg_read "$CG" peak)" >>"$base.meta"
	cg_remove "$CG"
	status=$(run_status "$rc" "$oom")
	if [ $rc = 0 ]; then
		outl=$(wc -l <"$WORK/scratch/out")
		if ! LC_ALL=C sort -c "$WORK/scratch/out" 2>>"$base.err" || [ "$outl" != "$lines" ]; then
			status=WRONG
			echo "output not sorted or $outl lines instead of $lines" >>"$base.err"
		fi
	fi
	{
		printf 'name\t%s\ndir\t%s\nlimit_B\t%s\nstatus\t%s\nrc\t%s\n' "$name" "$dir" "$limit" "$status" "$rc"
		printf 'oom_kills\t%s\nlines\t%s\n' "$oom" "$lines"
		printf 'daemon_rss_B\t%s\n' "$DAEMON_RSS"
		[ "$name" = rmemfs ] && daemon_hwm_line "$FS_PID"
	} >>"$base.meta"
	rm -f "$WORK/scratch/out"
	rm -rf "${dir:?}"/* 2>/dev/null
	printf '  %-8s %-44s limit %5s MiB  %s\n' "$name" "$dir" \
		"$([ "$limit" = 0 ] && echo '-' || echo $((limit >> 20)))" \
		"$("$PY" "$HERE/report.py" line "$base")"
}

scratch_all()
{
	local input=$WORK/scratch/input lines budget=$(((SCRATCH_BUF_MIB + 128) << 20)) b=rmemfs-scratch
	mkdir -p "$WORK/scratch"
	# random lines of base64 (76 characters), SCRATCH_MIB in all, on the local disk
	record_cmd scratch input "head -c $((SCRATCH_MIB * 3 / 4))M /dev/urandom | base64 -w 76 > input"
	head -c "$((SCRATCH_MIB * 3 / 4))M" /dev/urandom | base64 -w 76 >"$input" ||
		{ note scratch all "writing the input failed"; return 1; }
	lines=$(wc -l <"$input")
	config scratch_lines "$lines"
	config scratch_budget_B "$budget"

	# rmemfs: a normal mount (no -o swap) with the same 64 MiB cache as a swap mount
	POOL="$((SCRATCH_MIB * 2 + 256))M"
	MS_EXTRA=(--spin-us 0)	# (as for the swap backends: system.sh)
	unset RMEMFS_SOURCE
	MNT=$WORK/mnt/$b
	RMEMFS_OPTS=cache_size=64M
	DAEMON_RSS=0
	if memserver_start "$b" 127.0.0.1 tcp 3>&- && rmemfs_mount "$b" 1 3>&- &&
		mkdir -p "$MNT/tmp"; then
		DAEMON_RSS=$(($(awk '/^VmRSS:/ {print $2}' "/proc/$FS_PID/status") * 1024))
		config "daemon_rss_after_mount_B:$b" "$DAEMON_RSS"
		echo "  rmemfs daemon pid $FS_PID: VmRSS $((DAEMON_RSS >> 20)) MiB after mount" \
			"(taken out of the limit)"
		scratch_one rmemfs "$MNT/tmp" $((budget - DAEMON_RSS)) "$input" "$lines"
	else
		note scratch rmemfs "the memserver or the mount failed (see raw/logs)"
	fi
	[ -n "$FS_PID" ] && rmemfs_unmount "$b"
	memserver_stop
	DAEMON_RSS=0

	mkdir -p "/var/tmp/rmemfs-farmem-$$-scratch"
	echo "/var/tmp/rmemfs-farmem-$$-scratch" >>"$WORK/files"
	scratch_one disk "/var/tmp/rmemfs-farmem-$$-scratch" "$budget" "$input" "$lines"
	rmdir "/var/tmp/rmemfs-farmem-$$-scratch"

	mkdir -p "$WORK/mnt/tmpfs"
	if mount -t tmpfs -o "size=$((SCRATCH_MIB * 2 + 256))M,mode=0700" rmemfs-farmem "$WORK/mnt/tmpfs"; then
		scratch_one tmpfs "$WORK/mnt/tmpfs" 0 "$input" "$lines"
		umount "$WORK/mnt/tmpfs"
	fi
	rm -f "$input"
}
