#!/bin/bash
# bench.sh - the rmemfs benchmark suite: the same fio matrix on rmemfs and on the filesystems a
# user would otherwise pick, on this machine in the same run, reported as ratios.
#
# usage: scripts/bench.sh [OPTIONS]          (as root: it mounts, drops caches, runs an sshd)
#
# Targets (--targets, comma-separated; default all of them):
#   rmemfs-tcp      rmemfs with its default options over TCP to a memserver on 127.0.0.1, on the
#                   /dev/fuse channel (-o uring=off)
#   rmemfs-uring    the same on the FUSE ring (-o uring=on; the fuse module's enable_uring is set
#                   for the target and put back): the results hold each job against rmemfs-tcp
#                   ("vs tcp"; issue 39's bar 1.30x on randread-4k-qd1-warm, randread-4k-qd32
#                   and meta-stat, 1.0x on the rest). Fails loudly where the kernel has no ring
#   rmemfs-readers  the writer's own speed with readers following it (issue 21): the rmemfs-tcp
#                   setup (its own memserver, the same options) plus two `-o ro` mounts of
#                   the same pool, mounted after the writer and kept through its cold steps
#                   (a reader of a pool without a writer is valid), each with a loop that
#                   every 0.5 s lists bench/ and stats a few of the jobs' files; it runs the
#                   write jobs only (seq-write-1m, randwrite-*, meta-create, meta-unlink; the
#                   read jobs are skipped, meta-stat runs untimed so that meta-unlink starts
#                   where rmemfs-tcp's does) and the results hold each one against
#                   rmemfs-tcp ("vs tcp", the issue's bar 0.90x). In the default set: it adds
#                   about 1.5 min to a full run. rmemfs-tcp runs the read jobs between its
#                   write jobs; for a like-for-like pair add --jobs seq-write,randwrite,meta
#   rmemfs-rdma     the same over RDMA; only where a verbs device exists (said, not silent)
#   tmpfs           a private tmpfs mount: the local limit
#   passthrough_ll  libfuse's passthrough_ll over a tmpfs directory: the FUSE ceiling, built
#                   from Debian's libfuse3-dev example source
#   sshfs           sshfs to root@127.0.0.1 over a tmpfs directory, through a private sshd
#                   (127.0.0.1 only, its own host key, key-only auth): what people use today
#   rmem-perf       the raw transport ceiling: 4 KiB and 1 MiB READ/WRITE on the memserver
# Jobs, in this order on each filesystem (--jobs selects by name prefix, e.g. seq,meta):
#   seq-write-1m          buffered sequential write of --size, 1 MiB blocks, fsync at the end
#   seq-read-1m-cold      sequential read after making the client cold (see "cold" below)
#   seq-read-1m-warm      the same read again
#   randread-4k-qd1-cold  4 KiB reads, O_DIRECT, QD1, after a cold step: one in every rmemfs
#                         cache block (block_size) of the --size file, in random order (an fio
#                         iolog), so each one is a client cache miss
#   randread-4k-qd1-warm  the same over a --warm-size file read once beforehand (fits the cache)
#   randwrite-4k-qd1      4 KiB random writes, O_DIRECT, QD1
#   randread-4k-qd32, randwrite-4k-qd32      libaio, iodepth 32, O_DIRECT
#   randread-4k-qd1-4j, randwrite-4k-qd1-4j  4 jobs in parallel (numjobs=4), O_DIRECT, QD1
#   meta-create, meta-stat, meta-unlink      --files small files (4 KiB) in one directory:
#                         create+write+close, then (after a cold step) stat, then unlink;
#                         on every target the kernel's dentries and inodes are dropped
#                         after each META_DROP_EVERY (5000) files, untimed, so that
#                         passthrough_ll (a descriptor per known inode) stays under the
#                         descriptor limit (`ulimit -Hn`, which root may not raise here)
# A target without O_DIRECT runs the O_DIRECT jobs buffered and the results say so.
# "Cold": the client side holds nothing. rmemfs, passthrough_ll and sshfs are unmounted and
# mounted again from a new process, then drop_caches (rmemfs-readers: the writer; its readers
# stay mounted); tmpfs has no cold state (drop_caches only). The data itself stays in RAM in
# every case (the memserver's pool, or tmpfs).
# Memory: VmHWM/VmRSS of the rmemfs client and memserver (and of the baselines' daemons),
# sampled every 0.5 s, reported against cache_size + 64 MiB and pool + 32 MiB; and the rmemfs
# client's RSS right after its first mount and after each job, with its cache's resident bytes.
#
# Options:
#   --quick            smoke run (< 2 minutes): small sizes, 1 s jobs; the figures mean little
#   --targets LIST     targets to run (default: all; "rmemfs" means the rmemfs targets)
#   --jobs LIST        only the jobs whose names start with one of LIST (default: all)
#   --size SIZE        sequential file, also the cold random-read file (default 1G; quick 128M)
#   --warm-size SIZE   warm random-read file (default 64M; quick 16M)
#   --runtime SECS     each time-based random job (default 10; quick 1)
#   --files N          metadata job files (default 100000; quick 2000)
#   --meta-limit SECS  stop a metadata phase after this long, reported as partial (default 180)
#   --perf-duration S  each rmem-perf row (default 3; quick 1)
#   --pool SIZE        memserver pool (default: what the jobs need plus 512M)
#   --rmemfs-opts OPTS extra -o options for rmemfs (default none: its defaults are measured);
#                      the readers of rmemfs-readers get them too
#   --reader-opts OPTS extra -o options for those readers only, e.g. refresh=0.5 (default
#                      none: a reader's defaults, refresh 1 s where rmemfs has the option)
#   --rdma-addr ADDR   memserver address on the RDMA device (default: $RMEM_RDMA_IP, as the
#                      soft-RoCE VM sets it, else the first IPv4 address of the device's netdev)
#   --build-dir DIR    build here (default build-bench/, meson buildtype=release, no tests)
#   --no-build         use --build-dir as it is
#   --out DIR          results directory (default bench-results/<timestamp>/)
#   --update-docs      write the figures into docs/PERFORMANCE.md (between its markers) and
#                      the chart into docs/perf/rmemfs-ratios.png
#   --report-only DIR  no run: rebuild the table, JSON and chart of results directory DIR
#                      (with --update-docs: and the docs)
#   --scale-out        the other benchmark: one filesystem over 1..4 memservers in network
#                      namespaces behind rate-limited links (scripts/bench/scaleout.sh --help);
#                      with --ec, erasure coding (issue 24): ec=4+2 against replicas=3 and
#                      replicas=1 on six members - capacity, throughput, a slowed member's p99
#   --pools            the third: what many pools on one memserver cost one client's rmem-perf
#                      (issue 25; scripts/bench/pools.sh --help)
#   --footprint        the fourth: the client's RSS after mount, writes, reads, idleness and a
#                      memory hog beside it (issue 26; scripts/bench/footprint.sh --help)
#   --growth           the fifth: mount time, ls -R, stat rate, rmemfs-fsck time and client
#                      RSS at 10k, 100k and 1M small files and at 1 GiB and 8 GiB of data
#                      (issue 26; scripts/bench/growth.sh --help)
#
# Output in the results directory: results.txt (the tables, the -o options of every rmemfs
# mount), results.json (the same data plus the environment and every exact command line),
# ratios.png (gnuplot: rmemfs / each baseline per job, log scale, 1.0 line), raw/ (fio JSON,
# metabench JSON, rmem-perf JSON, memory samples, daemon logs, the readers' follow loops). A
# trap unmounts (lazily), stops every daemon and follow loop and removes the temporary
# directory on any exit, Ctrl-C included. The median of several runs, each ratio taken within
# its run: scripts/bench/median.py DIR DIR DIR.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/scripts/bench
ALL_TARGETS="rmemfs-tcp rmemfs-uring rmemfs-readers rmemfs-rdma tmpfs passthrough_ll sshfs rmem-perf"
# what rmemfs-readers runs (the write jobs; "meta" runs meta-create and meta-unlink)
READERS_JOBS="seq-write-1m randwrite-4k-qd1 randwrite-4k-qd32 randwrite-4k-qd1-4j meta"
PY=/usr/bin/python3

# --scale-out, --pools, --footprint, --growth: the other benchmarks (many memservers behind
# rate-limited links; many pools on one memserver; the client's own memory; costs as the files
# and data grow), each its own script
for a in "$@"; do
	case $a in
	--scale-out) other=scaleout.sh ;;
	--pools) other=pools.sh ;;
	--footprint) other=footprint.sh ;;
	--growth) other=growth.sh ;;
	*) continue ;;
	esac
	rest=()
	for b in "$@"; do [ "$b" = "$a" ] || rest+=("$b"); done
	exec "$ROOT/scripts/bench/$other" ${rest[@]+"${rest[@]}"}
done

ORIG_ARGS=("$@")
usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//'; }
die() { echo "bench: $*" >&2; exit 1; }

# shellcheck source-path=SCRIPTDIR source=lib/cli.sh
. "$ROOT/scripts/lib/cli.sh"
META_DROP_EVERY=5000
targets_arg="" jobs_arg="" SEQ_SIZE="" WARM_SIZE="" RUNTIME="" FILES="" META_LIMIT=180
PERF_DURATION="" POOL="" RMEMFS_OPTS="" READER_OPTS=""
declare -A VALUE_OPTS=([--targets]=targets_arg [--jobs]=jobs_arg [--size]=SEQ_SIZE
	[--warm-size]=WARM_SIZE [--runtime]=RUNTIME [--files]=FILES [--meta-limit]=META_LIMIT
	[--perf-duration]=PERF_DURATION [--pool]=POOL [--rmemfs-opts]=RMEMFS_OPTS
	[--reader-opts]=READER_OPTS)
REPORT=$HERE/report.py DOC=$ROOT/docs/PERFORMANCE.md DOC_DIR=$ROOT/docs/perf
cli_parse "$@"

# to_mib, shquote, record_cmd, build_tree and the targets' functions (definitions only)
# shellcheck source-path=SCRIPTDIR source=bench/targets.sh
. "$HERE/targets.sh"
# passthrough_ll_build (PT_SRC, PT_BIN), shared with farmem.sh
# shellcheck source-path=SCRIPTDIR source=lib/passthrough_ll.sh
. "$ROOT/scripts/lib/passthrough_ll.sh"

# ---- settings ----

if [ $quick = 1 ]; then
	: "${SEQ_SIZE:=128M}" "${WARM_SIZE:=16M}" "${RUNTIME:=1}" "${FILES:=2000}"
	: "${PERF_DURATION:=1}"
else
	: "${SEQ_SIZE:=1G}" "${WARM_SIZE:=64M}" "${RUNTIME:=10}" "${FILES:=100000}"
	: "${PERF_DURATION:=3}"
fi
for v in RUNTIME FILES META_LIMIT PERF_DURATION; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "--${v,,}: expected a whole number, got '${!v}'"
done
[ "$RUNTIME" -ge 1 ] || die "--runtime: at least 1 second"

# (to_mib runs in a subshell: its die only ends that, hence the `|| exit`)
SEQ_MIB=$(to_mib "$SEQ_SIZE") || exit 2
WARM_MIB=$(to_mib "$WARM_SIZE") || exit 2
META_MIB=$(((FILES * 8 + 1023) / 1024))	# 4 KiB of data + metadata per file, generously
[ -n "$POOL" ] || POOL="$((SEQ_MIB + WARM_MIB + META_MIB + 512))M"
POOL_MIB=$(to_mib "$POOL") || exit 2
TMPFS_MIB=$((SEQ_MIB + WARM_MIB + META_MIB + 256))

# targets: expand aliases, keep the canonical order
want=" "
for t in ${targets_arg//,/ }; do
	case $t in
	all) want+="$ALL_TARGETS " ;;
	rmemfs) want+="rmemfs-tcp rmemfs-uring rmemfs-readers rmemfs-rdma " ;;
	passthrough | passthrough-ll) want+="passthrough_ll " ;;
	rmemfs-* | tmpfs | passthrough_ll | sshfs | rmem-perf)
		[[ " $ALL_TARGETS " == *" $t "* ]] ||
			die "unknown target '$t' (targets: $ALL_TARGETS)"
		want+="$t "
		;;
	*) die "unknown target '$t' (targets: $ALL_TARGETS; rmemfs = the rmemfs-* targets)" ;;
	esac
done
[ "$want" = " " ] && want=" $ALL_TARGETS "
TARGETS=()
for t in $ALL_TARGETS; do
	[[ $want == *" $t "* ]] && TARGETS+=("$t")
done
selected() { [[ " ${TARGETS[*]} " == *" $1 "* ]]; }
rmemfs_selected() { [[ " ${TARGETS[*]} " == *" rmemfs-"* ]]; }

# job_selected JOB: --jobs holds a prefix of its name (or --jobs is empty)
job_selected()
{
	[ -z "$jobs_arg" ] && return 0
	local p
	for p in ${jobs_arg//,/ }; do
		[[ $1 == "$p"* ]] && return 0
	done
	return 1
}

# job_on TARGET JOB: TARGET runs JOB (job_selected; rmemfs-readers: only READERS_JOBS)
job_on()
{
	job_selected "$2" || return 1
	[ "$1" != rmemfs-readers ] || [[ " $READERS_JOBS " == *" $2 "* ]]
}

[ "$(id -u)" = 0 ] ||
	die "run as root: it mounts a tmpfs, drops the page cache between jobs and runs an sshd"

build=${build:-$ROOT/build-bench}
[ -n "$out" ] || out=$ROOT/bench-results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/raw/logs" || die "cannot create $out"
OUT=$(cd "$out" && pwd)
RAW=$OUT/raw
BUILD=$build
WORK=$(mktemp -d /tmp/rmemfs-bench.XXXXXX)
TMPFS_DIR=$WORK/tmpfs
mkdir -p "$WORK/mnt" "$TMPFS_DIR"
: >"$WORK/pids"
: >"$WORK/track"
: >"$RAW/commands.tsv"
: >"$RAW/notes.tsv"
: >"$RAW/memory.log"
SAMPLER_PID=""
T_START=$(date +%s)

# the terminal's stdout/stderr: a trap can fire inside a redirected command (a job's output
# file), and its message and the cleanup belong on the terminal
exec 8>&1 9>&2
cleanup()
{
	set +e
	exec 1>&8 2>&9
	trap - INT TERM
	touch "$WORK/sampler.stop"
	local m pid
	readers_stop_loops
	# FUSE mounts first (lazily: a job may still hold files open), then every daemon
	for m in "$WORK"/mnt/*; do
		mountpoint -q "$m" 2>/dev/null && { fusermount3 -uz "$m" 2>/dev/null || umount -l "$m"; }
	done
	# only our own children: a listed pid may have exited and been reused
	local mine=()
	while read -r pid; do
		[ -n "$pid" ] && ours "$pid" && mine+=("$pid")
	done <"$WORK/pids"
	for pid in "${mine[@]}"; do
		kill -TERM "$pid" 2>/dev/null
	done
	for _ in $(seq 50); do
		local alive=0
		for pid in "${mine[@]}"; do
			ours "$pid" && alive=1
		done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for pid in "${mine[@]}"; do
		ours "$pid" && kill -KILL "$pid" 2>/dev/null
	done
	[ -n "$SAMPLER_PID" ] && wait "$SAMPLER_PID" 2>/dev/null
	mountpoint -q "$TMPFS_DIR" 2>/dev/null && umount -l "$TMPFS_DIR"
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "bench: interrupted; cleaning up" >&9; exit 130' INT
trap 'echo "bench: terminated; cleaning up" >&9; exit 143' TERM

step() { printf '\n==== %s\n' "$*"; }
note() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RAW/notes.tsv"; }
# config KEY VALUE: one setting for results.json
config() { printf '%s\t%s\n' "$1" "$2" >>"$RAW/config.tsv"; }
: >"$RAW/config.tsv"

# ---- dependencies and build ----

step "dependencies"
"$ROOT/scripts/deps.sh" build bench || die "scripts/deps.sh build bench failed"
echo "all present"

step "build"
if [ $no_build = 0 ]; then
	ninja_targets=()
	{ rmemfs_selected || selected rmem-perf; } && ninja_targets+=(memserver/memserver)
	selected rmem-perf && ninja_targets+=(tools/rmem-perf)
	rmemfs_selected && ninja_targets+=(fuse-client/rmemfs)
	[ ${#ninja_targets[@]} -eq 0 ] || build_tree "${ninja_targets[@]}"
fi
BUILDTYPE=$(meson introspect --buildoptions "$BUILD" 2>/dev/null | "$PY" -c '
import json, sys
print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"), "unknown"))
' 2>/dev/null) || BUILDTYPE=unknown
echo "build directory $BUILD, meson buildtype=$BUILDTYPE"
config build_dir "$BUILD"
config buildtype "$BUILDTYPE"

mkdir -p "$BUILD/bench"
META_BIN=$BUILD/bench/metabench
if selected passthrough_ll; then
	passthrough_ll_build passthrough_ll || die "passthrough_ll: see above"
fi
meta_cmd=(gcc -O2 -Wall -Wextra -I "$ROOT/common" -o "$META_BIN" "$HERE/metabench.c")
if [ ! -x "$META_BIN" ] || [ "$HERE/metabench.c" -nt "$META_BIN" ]; then
	"${meta_cmd[@]}" || die "building metabench failed"
fi
record_cmd all "build metabench" "${meta_cmd[@]}"

# ---- RDMA ----

rdma_devs=$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)
if selected rmemfs-rdma; then
	if [ -z "$rdma_devs" ]; then
		echo "rmemfs-rdma: SKIPPED: no RDMA verbs device on this host (/sys/class/infiniband" \
			"is empty); rmemfs is measured over TCP only"
		note rmemfs-rdma all "skipped: no RDMA verbs device on this host"
		TARGETS=("${TARGETS[@]/rmemfs-rdma/}")
	elif [ -z "$RDMA_ADDR" ]; then
		# the first IPv4 address of a netdev under the first device
		for nd in /sys/class/infiniband/"${rdma_devs%% *}"/device/net/* \
			/sys/class/infiniband/"${rdma_devs%% *}"/ports/1/gid_attrs/ndevs/0; do
			[ -e "$nd" ] || continue
			if [ -f "$nd" ]; then name=$(cat "$nd"); else name=$(basename "$nd"); fi
			RDMA_ADDR=$(ip -4 -o addr show dev "$name" 2>/dev/null |
				awk '{print $4}' | cut -d/ -f1 | head -1)
			[ -n "$RDMA_ADDR" ] && break
		done
		if [ -z "$RDMA_ADDR" ]; then
			echo "rmemfs-rdma: SKIPPED: RDMA device(s) $rdma_devs found but no IPv4" \
				"address on them; give one with --rdma-addr"
			note rmemfs-rdma all "skipped: no IPv4 address on RDMA device(s) $rdma_devs"
			TARGETS=("${TARGETS[@]/rmemfs-rdma/}")
		fi
	fi
fi
read -r -a TARGETS <<<"${TARGETS[*]}"	# drop the emptied slots

# ---- settings into the results ----

# rmemfs_opt NAME: the value of -o NAME= of the measured mount: from --rmemfs-opts, else the
# default as `rmemfs --help` states it (the last size in its "(default ...)": "(default 256M)",
# "(default RAM/16 within 64M..1G: 1.0 GiB here)")
rmemfs_opt()
{
	local v
	v=$(tr ',' '\n' <<<"$RMEMFS_OPTS" | sed -n "s/^$1=//p" | tail -1)
	if [ -z "$v" ] && [ -x "$BUILD/fuse-client/rmemfs" ]; then
		v=$("$BUILD/fuse-client/rmemfs" --help 2>&1 | "$PY" -c '
import re, sys
text = " ".join(sys.stdin.read().split())
m = re.search(sys.argv[1] + r"=SIZE.*?\(default ([^)]*)\)", text)
sizes = re.findall(r"[0-9.]+ ?[KMGT]i?B?\b|\b[0-9]+\b", m.group(1)) if m else []
print(sizes[-1].replace(" ", "") if sizes else "")' "$1")
	fi
	echo "$v"
}
CACHE_SIZE=$(rmemfs_opt cache_size)
BLOCK_SIZE=$(rmemfs_opt block_size)
config quick "$quick"
config targets "${TARGETS[*]}"
config jobs "${jobs_arg:-all}"
config seq_size "$SEQ_SIZE"
config warm_size "$WARM_SIZE"
config runtime_s "$RUNTIME"
config files "$FILES"
config meta_limit_s "$META_LIMIT"
config perf_duration_s "$PERF_DURATION"
config pool "$POOL"
config pool_mib "$POOL_MIB"
config rmemfs_opts "$RMEMFS_OPTS"
config reader_opts "$READER_OPTS"
config cache_size "${CACHE_SIZE:-unknown}"
config block_size "${BLOCK_SIZE:-unknown}"
# randread-4k-qd1-cold reads 4 KiB once in every COLD_STRIDE of the file, in random order: with
# the stride at least rmemfs's cache block, no read can hit a block another read fetched
COLD_STRIDE=$("$PY" "$HERE/report.py" bytes "${BLOCK_SIZE:-64K}" 4096) ||
	die "block_size '$BLOCK_SIZE' is not a size"
config cold_stride "$COLD_STRIDE"
config rdma_devices "${rdma_devs:-none}"
config sshfs_opts "$SSHFS_OPTS"
config command "$(shquote "$0" "${ORIG_ARGS[@]}")"
for t in "${TARGETS[@]}"; do
	[ "$t" = rmem-perf ] || config "cold:$t" "$(cold_meaning "$t")"
	# the -o options of each rmemfs mount (the first writer mount adds format)
	case $t in
	rmemfs-readers)
		config "mount_opts:$t" \
			"writer $(rmemfs_mount_opts "$t"); $READERS readers $(rmemfs_reader_opts)"
		;;
	rmemfs-*) config "mount_opts:$t" "$(rmemfs_mount_opts "$t")" ;;
	esac
done
"$PY" "$HERE/report.py" env "$RAW/env.json" "$ROOT" "$BUILD" || die "collecting the environment failed"

echo "targets: ${TARGETS[*]}"
echo "sizes: sequential file $SEQ_SIZE, warm file $WARM_SIZE, random jobs ${RUNTIME} s," \
	"$FILES files, pool $POOL, rmemfs cache_size ${CACHE_SIZE:-unknown} (its default" \
	"unless --rmemfs-opts says otherwise)"
[ $quick = 1 ] && echo "QUICK MODE: a smoke run; these figures are not the benchmark"

# the private tmpfs under the tmpfs, passthrough_ll and sshfs targets
if selected tmpfs || selected passthrough_ll || selected sshfs; then
	mount -t tmpfs -o "size=${TMPFS_MIB}M,mode=0755" rmemfs-bench "$TMPFS_DIR" ||
		die "mounting a tmpfs on $TMPFS_DIR failed"
fi

mem_sampler &
SAMPLER_PID=$!

# ---- the jobs ----

# fio_line FILE: "MiB/s IOPS lat" summary of one fio JSON for the progress output
fio_line() { "$PY" "$HERE/report.py" fio-line "$1"; }

# cache_stats TARGET JOB before|after: rmemfs's cache counters (the user.rmemfs.stats xattr of
# the mount's root, "name value" lines) into raw/TARGET/JOB.stats-{before,after}, where the
# client publishes them; the report turns the difference into the job's hits and misses
cache_stats()
{
	[[ $1 == rmemfs-* ]] || return 0
	"$PY" -c '
import os, sys
try:
    sys.stdout.write(os.getxattr(sys.argv[1], "user.rmemfs.stats").decode(errors="replace"))
except OSError:
    sys.exit(1)' "$MNT" >"$RAW/$1/$2.stats-$3" 2>/dev/null || { rm -f "$RAW/$1/$2.stats-$3"; return 0; }
	# and the client's RSS at that moment (issue 26: the report shows it after each job)
	local kib
	kib=$(client_rss_kib "$1")
	[ -n "$kib" ] && echo "client_rss_bytes $((kib * 1024))" >>"$RAW/$1/$2.stats-$3"
	return 0
}

# run_fio TARGET JOB TIMEOUT FIO-ARGS...: one fio job, JSON into raw/TARGET/JOB.json
run_fio()
{
	local target=$1 job=$2 limit=$3 rc
	shift 3
	local cmd=(fio --output-format=json --output="$RAW/$target/$job.json" --name="$job"
		--invalidate=0 --lat_percentiles=1 --percentile_list=50:99:99.9 --group_reporting
		"$@")
	record_cmd "$target" "$job" "${cmd[@]}"
	printf '  %-22s ' "$job"
	cache_stats "$target" "$job" before
	run timeout -k 10 "$limit" "${cmd[@]}" >"$RAW/$target/$job.stdout" 2>"$RAW/$target/$job.err"
	rc=$?
	cache_stats "$target" "$job" after
	if [ $rc = 0 ]; then
		fio_line "$RAW/$target/$job.json"
	else
		[ $rc = 124 ] && echo "timed out after $limit s" >>"$RAW/$target/$job.err"
		echo "FAILED (exit $rc): $(grep -v '^$' "$RAW/$target/$job.err" | tail -1)"
		note "$target" "$job" "failed (exit $rc): $(grep -v '^$' "$RAW/$target/$job.err" | tail -1)"
		rm -f "$RAW/$target/$job.json"
	fi
	return $rc
}

# client_rss_kib TARGET: VmRSS of the rmemfs client (nothing for other targets)
client_rss_kib()
{
	case $1 in
	rmemfs-*) [ -n "$FS_PID" ] && awk '/^VmRSS:/ {print $2}' "/proc/$FS_PID/status" 2>/dev/null ;;
	esac
}

# run_meta TARGET PHASE N [NAME]: one metabench phase, its results as NAME (default meta-PHASE;
# the report takes only meta-* names); sets META_OPS to how many files it did
run_meta()
{
	local target=$1 phase=$2 n=$3 name=${4:-meta-$2} rc
	local cmd=("$META_BIN" "$MNT/bench/meta" "$phase" -n "$n" -s 4096 -t "$META_LIMIT"
		-d "$META_DROP_EVERY")
	record_cmd "$target" "$name" "${cmd[@]}"
	printf '  %-22s ' "$name"
	cache_stats "$target" "$name" before
	local rss0
	rss0=$(client_rss_kib "$target")
	run timeout -k 10 $((META_LIMIT + 120)) "${cmd[@]}" >"$RAW/$target/$name.json" \
		2>"$RAW/$target/$name.err"
	rc=$?
	# what the client holds for the files it created: RSS before and after, in KiB
	[ "$phase" = create ] && [ -n "$rss0" ] &&
		printf '%s\t%s\n' "$rss0" "$(client_rss_kib "$target")" >"$RAW/$target/meta-create.rss"
	"$PY" "$HERE/report.py" meta-line "$RAW/$target/$name.json"
	cache_stats "$target" "$name" after
	META_OPS=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["ops"])' \
		"$RAW/$target/$name.json" 2>/dev/null) || META_OPS=0
	return $rc
}

# cold TARGET: the cold step, or fail the rest of the target
cold()
{
	printf '  %-22s %s\n' "(cold)" "$(cold_meaning "$1" | cut -d: -f1 | cut -d'(' -f1)"
	target_cold "$1"
}

# run_rmem_perf TRANSPORT: the raw transport rows against the running memserver
run_rmem_perf()
{
	local transport=$1 target=rmem-perf-$1 spec size qd rc
	mkdir -p "$RAW/$target"
	echo "rmem-perf over $transport (before the pool is formatted; $PERF_DURATION s per row):"
	for spec in 4K:1 4K:32 1M:4; do
		size=${spec%%:*} qd=${spec##*:}
		local cmd=("$BUILD/tools/rmem-perf" "$MS_ADDR:$MS_PORT" --transport "$transport"
			--token-file "$WORK/token" --op "read,write" --size "$size" --qd "$qd"
			--duration "$PERF_DURATION" --json)
		record_cmd "$target" "raw-${size,,}-qd$qd" "${cmd[@]}"
		run timeout -k 10 $((PERF_DURATION * 2 + 60)) "${cmd[@]}" \
			>"$RAW/$target/raw-${size,,}-qd$qd.json" 2>"$RAW/$target/raw-${size,,}-qd$qd.err"
		rc=$?
		if [ $rc = 0 ]; then
			"$PY" "$HERE/report.py" perf-line "$RAW/$target/raw-${size,,}-qd$qd.json"
		else
			echo "  rmem-perf $size qd $qd FAILED (exit $rc): $(tail -1 "$RAW/$target/raw-${size,,}-qd$qd.err")"
			note "$target" "raw-${size,,}-qd$qd" "failed (exit $rc)"
		fi
	done
}

# run_target TARGET: the whole matrix on one filesystem; returns non-zero if it broke off
run_target()
{
	local t=$1 D direct=1 dnote="" j name rw engine qd nj
	mkdir -p "$RAW/$t"
	config "loadavg:$t" "$(cut -d' ' -f1-3 /proc/loadavg)"
	target_start "$t" || { note "$t" all "failed to start"; return 1; }
	if [[ $t == rmemfs-* ]] && [ "$t" != rmemfs-readers ] && [ "$t" != rmemfs-uring ] &&
		selected rmem-perf; then
		run_rmem_perf "$(rmemfs_transport "$t")"
	fi
	target_mount "$t" 1 || { note "$t" all "failed to mount"; return 1; }
	[[ $t == rmemfs-* ]] && config "rss_after_mount:$t" "$(client_rss_kib "$t")"
	D=$MNT/bench
	mkdir -p "$D" || { note "$t" all "mkdir on the mount failed"; return 1; }
	if ! dd if=/dev/zero of="$D/.direct-probe" bs=4096 count=1 oflag=direct 2>/dev/null ||
		! dd if="$D/.direct-probe" of=/dev/null bs=4096 count=1 iflag=direct 2>/dev/null; then
		direct=0
		dnote="O_DIRECT not supported: ran buffered"
		echo "  $t: O_DIRECT is not supported here; the O_DIRECT jobs run buffered"
	fi
	rm -f "$D/.direct-probe"
	config "direct:$t" "$direct"
	if [ "$t" = rmemfs-readers ]; then
		readers_mount "$t" || { note "$t" all "a reader failed to mount"; return 1; }
		note "$t" all "the write jobs only (read jobs skipped, meta-stat untimed)"
	fi
	local seq=(--filename="$D/seq.dat" --size="$SEQ_SIZE" --bs=1M --ioengine=psync)
	local rnd=(--filename="$D/seq.dat" --size="$SEQ_SIZE" --bs=4k --direct="$direct"
		--time_based --runtime="$RUNTIME")
	local tl=$((RUNTIME + 120)) sl=900

	if job_on "$t" seq-write-1m; then
		run_fio "$t" seq-write-1m $sl "${seq[@]}" --rw=write --end_fsync=1
	fi
	# the other jobs read and write this file: lay it out when seq-write-1m did not run
	if [ ! -f "$D/seq.dat" ]; then
		run fio --name=layout "${seq[@]}" --rw=write --end_fsync=1 \
			--output="$RAW/$t/layout.txt" >/dev/null 2>&1 ||
			echo "  (writing seq.dat failed; see raw/$t/layout.txt)"
	fi
	cold "$t" || { note "$t" all "cold step failed"; return 1; }
	job_on "$t" seq-read-1m-cold && run_fio "$t" seq-read-1m-cold $sl "${seq[@]}" --rw=read
	job_on "$t" seq-read-1m-warm && run_fio "$t" seq-read-1m-warm $sl "${seq[@]}" --rw=read
	cold "$t" || { note "$t" all "cold step failed"; return 1; }
	if job_on "$t" randread-4k-qd1-cold; then
		# every read a miss: 4 KiB in each COLD_STRIDE of seq.dat once, in a random order
		# (the same seed on every target), replayed from an fio iolog
		"$PY" "$HERE/report.py" iolog "$WORK/cold.iolog" "$D/seq.dat" "$SEQ_SIZE" \
			"$COLD_STRIDE" || die "writing the iolog failed"
		run_fio "$t" randread-4k-qd1-cold $tl --read_iolog="$WORK/cold.iolog" \
			--replay_no_stall=1 --bs=4k --direct="$direct" --ioengine=psync &&
			[ -n "$dnote" ] && note "$t" randread-4k-qd1-cold "$dnote"
	fi
	if job_on "$t" randread-4k-qd1-warm; then
		# the warm file: written, then read once (O_DIRECT where supported) so that it is in
		# the client's cache before the measured reads
		local warm=(--filename="$D/warm.dat" --size="$WARM_SIZE" --bs=1M --ioengine=psync)
		run fio --name=warm-write "${warm[@]}" --rw=write --end_fsync=1 \
			--output="$RAW/$t/warm-prep.txt" >/dev/null 2>&1 &&
			run fio --name=warm-read "${warm[@]}" --rw=read --direct=$direct --invalidate=0 \
				--output="$RAW/$t/warm-prep2.txt" >/dev/null 2>&1 ||
			echo "  (preparing warm.dat failed; see raw/$t/warm-prep*.txt)"
		run_fio "$t" randread-4k-qd1-warm $tl --filename="$D/warm.dat" --size="$WARM_SIZE" \
			--bs=4k --direct=$direct --time_based --runtime="$RUNTIME" --rw=randread \
			--ioengine=psync && [ -n "$dnote" ] && note "$t" randread-4k-qd1-warm "$dnote"
		rm -f "$D/warm.dat"
	fi
	for j in randwrite-4k-qd1:randwrite:psync:1:1 randread-4k-qd32:randread:libaio:32:1 \
		randwrite-4k-qd32:randwrite:libaio:32:1 randread-4k-qd1-4j:randread:psync:1:4 \
		randwrite-4k-qd1-4j:randwrite:psync:1:4; do
		IFS=: read -r name rw engine qd nj <<<"$j"
		job_on "$t" "$name" || continue
		run_fio "$t" "$name" $tl "${rnd[@]}" --rw="$rw" --ioengine="$engine" \
			--iodepth="$qd" --numjobs="$nj" && [ -n "$dnote" ] && note "$t" "$name" "$dnote"
	done
	rm -f "$D/seq.dat"

	if job_on "$t" meta; then
		mkdir -p "$D/meta"
		run_meta "$t" create "$FILES"
		if [ "$META_OPS" -gt 0 ]; then
			cold "$t" || { note "$t" all "cold step failed"; return 1; }
			# rmemfs-readers: not a result, but meta-unlink starts where rmemfs-tcp's does
			if job_on "$t" meta-stat; then
				run_meta "$t" stat "$META_OPS"
			else
				run_meta "$t" stat "$META_OPS" untimed-meta-stat
			fi
			run_meta "$t" unlink "$META_OPS"
		fi
		rm -rf "$D/meta"
	fi
	rm -rf "$D"
	readers_unmount "$t" || note "$t" unmount "a reader's daemon did not exit cleanly after unmount"
	target_unmount "$t" || note "$t" unmount "the daemon did not exit cleanly after unmount"
	return 0
}

step "benchmark ($(date '+%F %T'))"
for t in "${TARGETS[@]}"; do
	[ "$t" = rmem-perf ] && continue
	step "$t"
	t0=$(date +%s)
	if ! run_target "$t"; then
		echo "bench: $t broke off (see $RAW/logs and $RAW/notes.tsv)" >&2
		[ -n "${MNT:-}" ] && mountpoint -q "$MNT" && target_unmount "$t"
	fi
	target_stop "$t"
	echo "  ($t: $(($(date +%s) - t0)) s)"
done
# rmem-perf alone when no rmemfs target ran it
if selected rmem-perf && ! selected rmemfs-tcp && ! selected rmemfs-rdma; then
	step "rmem-perf"
	memserver_start rmem-perf 127.0.0.1 tcp && run_rmem_perf tcp
	memserver_stop
fi

touch "$WORK/sampler.stop"
wait "$SAMPLER_PID" 2>/dev/null
SAMPLER_PID=""
config elapsed_s "$(($(date +%s) - T_START))"
config loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"

step "results ($OUT)"
report "$OUT"
echo "total $(($(date +%s) - T_START)) s"
