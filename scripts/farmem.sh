#!/bin/bash
# farmem.sh - the far-memory experiment of rmemfs: applications with 100%, 75%, 50% and 25% of
# their working set in local memory (a memory cgroup), the rest on a swap backend, in one run:
# Infiniswap's Figure 1 measured on this machine, with rmemfs next to a disk swap file, zram and
# the best a FUSE swap can do here (passthrough_ll).
#
# usage: scripts/farmem.sh [OPTIONS]        (as root: cgroups, swapon, mounts, loop devices)
#
# Backends (--backends, comma-separated; one swap device active at a time, priority 32767):
#   none         no swap: the cgroup cannot swap (memsw/swap.max = the limit); an OOM kill is a
#                result, shown as OOM
#   disk         a swap file on the local disk (/var/tmp: fallocate, mkswap, swapon)
#   zram         a zram device (hot_add, default compressor): compressed local RAM, which the
#                cgroup is not charged for; its peak use (mm_stat) is reported next to it
#   passthrough_ll  the FUSE ceiling, no network: rmemfs-swap's set-up over a file of libfuse's
#                example passthrough_ll (built from Debian's libfuse3-dev source) serving a
#                private tmpfs (noswap): the file written whole with zeros (O_DIRECT, fsync),
#                a loop device with direct I/O (checked: loop/dio must say 1, else the backend
#                fails), mkswap, swapon. The tmpfs holds the whole swap area, local RAM the
#                cgroup is not charged for (said in the notes, like zram's); the daemon's RSS
#                after mount + swap on is taken out of the limit and its VmHWM reported per
#                run, as for rmemfs
#   rmemfs-tcp   a memserver on 127.0.0.1 (--mlock --spin-us 0: it stands for the remote
#                machine and is not counted, and does not spin on the CPUs the workload
#                shares), rmemfs mounted with -o swap, rmemfs-swap on; the daemon's resident
#                memory after mount + swap on is taken out of the workload's limit, and its
#                peak RSS (VmHWM) is reported per run; the transport alone (rmem-perf, 4 KiB
#                reads at queue depth 1) is measured against it for the cost table
#   rmemfs-rdma  the same over RDMA, only where a verbs device exists (said when skipped)
# Workloads (in a memory cgroup each; its working set measured first in an unlimited one):
#   touch-seq, touch-rand  rmem-touch: SIZE of anonymous memory filled, then pages touched in
#                order / uniformly at random, each one verified and rewritten; touches/s and
#                per-touch latency (p50, p99)
#   redis-get, redis-set   redis-server (no persistence) loaded with a dataset of 1 KiB values
#                through redis-cli --pipe, then redis-benchmark GET and SET over random keys of
#                the whole keyspace; ops/s and p99
#   sort         rmem-touch --sort: in-place introsort of SIZE of random 64-bit keys; time
# Scratch space (after the swap backends, no swap active): GNU sort of a file several times its
# buffer (sort -S) with -T on an rmemfs mount (-o cache_size=64M; its daemon's RSS taken out of
# the limit), on the local disk (both in a cgroup of the sort's budget, without swap, so that
# neither keeps the temporary files in local page cache), and on a tmpfs (not limited: tmpfs
# is local RAM, the reference); time to completion, output checked to be sorted.
#
# Options:
#   --quick              smoke run (~2 minutes): small sizes, fractions 100,50, few touches
#   --backends LIST      default none,disk,zram,passthrough_ll,rmemfs-tcp,rmemfs-rdma
#   --fractions LIST     local memory in % of the working set (default 100,75,50,25)
#   --workloads LIST     default touch-seq,touch-rand,redis,sort,scratch
#   --touch-size SIZE    rmem-touch memory (default 1G; quick 256M)
#   --touches N          random touches (default 200000; quick 20000); seq: one pass
#   --redis-size SIZE    redis dataset, 1 KiB values (default 1G; quick 128M)
#   --redis-requests N   redis-benchmark requests per test (default 100000; quick 10000)
#   --sort-size SIZE     keys sorted by the compute job (default 512M; quick 64M)
#   --scratch-size SIZE  GNU sort input (default 1G; quick 128M); buffer -S is 1/8 of it
#   --rdma-addr ADDR     memserver address on the RDMA device (default $RMEM_RDMA_IP)
#   --rmemfs-swap PATH   the rmemfs-swap program (default BUILD/tools/rmemfs-swap)
#   --lock-wait SECS     how long to wait for the swap lock (default 60)
#   --members N          the rmemfs backends on a member set of N memservers (loopback, one
#                        port each; default 1: a single server)
#   --replicas R         copies of each unit in that set (1..3, at most N; default 1)
#   --cgroup auto|v1|v2  the memory cgroup to use (default auto: v2 where a cgroup2 mount has
#                        the memory controller, else v1)
#   --build-dir DIR      default build-bench/ (meson buildtype=release, no tests)
#   --no-build           use --build-dir as it is
#   --out DIR            results directory (default farmem-results/<timestamp>/, printed)
#   --update-docs        write docs/FARMEM.md (between its markers) and docs/farmem/*.png
#   --report-only DIR    no run: rebuild the results of DIR (with --update-docs: the docs)
#
# Every run has a time limit (300 s; quick 120 s): one still running then is killed and shown
# as TIMEOUT, and the experiment goes on.
#
# Output: results.txt (one table, fixed columns with units; OOM / TIMEOUT / FAILED where a run
# did not finish; the scratch table; the targets block: rmemfs-tcp / disk on random touches at
# 50% and 25% and redis at 50%, need >= 1.5x; rmemfs-tcp / passthrough_ll on random touches
# and redis at 50% and 25%, need >= 0.8x), results.json (the same, the environment, every
# exact command line, sizes, limits, daemon RSS, zram and tmpfs use), one PNG per workload
# (performance against the local fraction, normalised to the run with all memory local, one
# line per backend), and raw/ (each run's output and bookkeeping).
#
# Swap is machine-global: the script holds an exclusive flock on /run/lock/rmemfs-swap.lock
# for the whole run (waiting up to --lock-wait for it) and refuses to start while any swap
# device is active. rmemfs-swap, which takes the same lock, runs as its child with the locked
# descriptor inherited (fd 3) and goes on under it; so does farmem.sh itself when its caller
# holds the lock and passes it as fd 3 (`exec 3>LOCK; flock 3; farmem.sh ...; farmem.sh ...`).
# Daemons are started with fd 3 closed, so a leftover one cannot keep the lock. A trap undoes
# everything on any exit, Ctrl-C included: cgroup processes killed, swapoff, rmemfs-swap off,
# loop devices detached, zram reset and removed, cgroups removed, mounts unmounted, daemons
# stopped, tmpfs mounts unmounted, temporary files removed.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
HERE=$ROOT/scripts/farmem
PY=/usr/bin/python3
LOCK=/run/lock/rmemfs-swap.lock
PRIO=32767
ALL_BACKENDS="none disk zram passthrough_ll rmemfs-tcp rmemfs-rdma"
ALL_WORKLOADS="touch-seq touch-rand redis sort scratch"

ORIG_ARGS=("$@")
usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//'; }
die() { echo "farmem: $*" >&2; exit 1; }

# shellcheck source-path=SCRIPTDIR source=lib/cli.sh
. "$ROOT/scripts/lib/cli.sh"
backends_arg="" fractions="" workloads_arg="" TOUCH_SIZE="" TOUCHES="" REDIS_SIZE=""
REDIS_REQ="" SORT_SIZE="" SCRATCH_SIZE="" SWAP_TOOL="" LOCK_WAIT=60 MEMBERS=1 REPLICAS=1 CG_WANT=auto
declare -A VALUE_OPTS=([--backends]=backends_arg [--fractions]=fractions
	[--workloads]=workloads_arg [--touch-size]=TOUCH_SIZE [--touches]=TOUCHES
	[--redis-size]=REDIS_SIZE [--redis-requests]=REDIS_REQ [--sort-size]=SORT_SIZE
	[--scratch-size]=SCRATCH_SIZE [--rmemfs-swap]=SWAP_TOOL [--lock-wait]=LOCK_WAIT
	[--members]=MEMBERS [--replicas]=REPLICAS [--cgroup]=CG_WANT)
REPORT=$HERE/report.py DOC=$ROOT/docs/FARMEM.md DOC_DIR=$ROOT/docs/farmem
cli_parse "$@"

# to_mib, shquote, record_cmd, run, ours, build_tree, and the rmemfs/memserver and
# passthrough_ll_mount functions of the benchmark suite (definitions only)
# shellcheck source-path=SCRIPTDIR source=bench/targets.sh
. "$ROOT/scripts/bench/targets.sh"
# passthrough_ll_build (PT_SRC, PT_BIN), shared with bench.sh
# shellcheck source-path=SCRIPTDIR source=lib/passthrough_ll.sh
. "$ROOT/scripts/lib/passthrough_ll.sh"

# ---- settings ----

if [ $quick = 1 ]; then
	: "${fractions:=100,50}" "${TOUCH_SIZE:=256M}" "${TOUCHES:=20000}" "${REDIS_SIZE:=128M}"
	: "${REDIS_REQ:=10000}" "${SORT_SIZE:=64M}" "${SCRATCH_SIZE:=128M}"
	RUN_LIMIT=120
else
	: "${fractions:=100,75,50,25}" "${TOUCH_SIZE:=1G}" "${TOUCHES:=200000}" "${REDIS_SIZE:=1G}"
	: "${REDIS_REQ:=100000}" "${SORT_SIZE:=512M}" "${SCRATCH_SIZE:=1G}"
	RUN_LIMIT=300
fi
for v in TOUCHES REDIS_REQ LOCK_WAIT MEMBERS REPLICAS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "${v,,}: expected a whole number, got '${!v}'"
done
[ "$MEMBERS" -le 12 ] || die "--members: at most 12 memservers, got $MEMBERS"
[ "$REPLICAS" -le 3 ] && [ "$REPLICAS" -le "$MEMBERS" ] ||
	die "--replicas: 1..3 and at most --members ($MEMBERS), got $REPLICAS"
[[ $CG_WANT =~ ^(auto|v1|v2)$ ]] || die "--cgroup: auto, v1 or v2, got '$CG_WANT'"
FRACTIONS=()
for f in ${fractions//,/ }; do
	[[ $f =~ ^[0-9]+$ ]] && [ "$f" -ge 1 ] && [ "$f" -le 100 ] ||
		die "--fractions: whole percentages from 1 to 100, got '$f'"
	FRACTIONS+=("$f")
done
[ ${#FRACTIONS[@]} -gt 0 ] || die "--fractions: none given"

TOUCH_MIB=$(to_mib "$TOUCH_SIZE") || exit 2
REDIS_MIB=$(to_mib "$REDIS_SIZE") || exit 2
SORT_MIB=$(to_mib "$SORT_SIZE") || exit 2
SCRATCH_MIB=$(to_mib "$SCRATCH_SIZE") || exit 2
REDIS_VALUE=1024
REDIS_KEYS=$((REDIS_MIB * 1048576 / REDIS_VALUE))
SCRATCH_BUF_MIB=$(((SCRATCH_MIB + 7) / 8))
# a swap area big enough for the largest working set swapped out whole
SWAP_MIB=$(((TOUCH_MIB > REDIS_MIB * 2 ? TOUCH_MIB : REDIS_MIB * 2) + 512))

pick()
{
	local all=$1 arg=$2 what=$3 x
	for x in ${arg//,/ }; do
		[[ " $all " == *" $x "* ]] || die "unknown $what '$x' ($what: $all)"
	done
	for x in $all; do
		[ -z "$arg" ] || [[ ",$arg," == *",$x,"* ]] && echo "$x"
	done
	return 0
}
# (pick runs in a subshell: its die only ends that, hence the `|| exit`)
backends=$(pick "$ALL_BACKENDS" "$backends_arg" backend) || exit 2
workloads=$(pick "$ALL_WORKLOADS" "$workloads_arg" workload) || exit 2
read -r -a BACKENDS <<<"$(echo $backends)"
read -r -a WORKLOADS <<<"$(echo $workloads)"
wanted() { [[ " ${WORKLOADS[*]} " == *" $1 "* ]]; }

[ "$(id -u)" = 0 ] || die "run as root: it creates memory cgroups, turns swap on and mounts"

build=${build:-$ROOT/build-bench}
[ -n "$out" ] || out=$ROOT/farmem-results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/raw/logs" "$out/raw/runs" || die "cannot create $out"
OUT=$(cd "$out" && pwd)
RAW=$OUT/raw
BUILD=$build
SWAP_TOOL=${SWAP_TOOL:-$BUILD/tools/rmemfs-swap}
WORK=$(mktemp -d /tmp/rmemfs-farmem.XXXXXX)
mkdir -p "$WORK/mnt"
: >"$WORK/pids"
: >"$RAW/commands.tsv"
: >"$RAW/notes.tsv"
: >"$RAW/config.tsv"
: >"$RAW/runs.tsv"
T_START=$(date +%s)

# shellcheck source=farmem/system.sh
. "$HERE/system.sh"

# ---- the trap that undoes everything, and the lock ----

trap cleanup EXIT
trap 'echo "farmem: interrupted; cleaning up" >&2; exit 130' INT
trap 'echo "farmem: terminated; cleaning up" >&2; exit 143' TERM
# a caller that holds the lock around several runs passes its descriptor as fd 3 (as with
# rmemfs-swap): flock on that same open file succeeds at once
if [ "$(readlink /proc/$$/fd/3 2>/dev/null)" != "$LOCK" ]; then
	exec 3>"$LOCK" || die "cannot open $LOCK"
fi
if ! flock -n 3; then
	echo "farmem: $LOCK is held by $(lock_holder); waiting up to $LOCK_WAIT s"
	flock -w "$LOCK_WAIT" 3 ||
		die "$LOCK still held by $(lock_holder) after $LOCK_WAIT s: another swap" \
			"experiment is running"
fi

others=$(tail -n +2 /proc/swaps)
if [ -n "$others" ]; then
	echo "farmem: swap is already active on this machine; the experiment needs it to itself" >&2
	echo "$others" >&2
	die "turn those off (swapoff, or rmemfs-swap off) and run again"
fi

step() { printf '\n==== %s\n' "$*"; }
note() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$RAW/notes.tsv"; }
config() { printf '%s\t%s\n' "$1" "$2" >>"$RAW/config.tsv"; }

# ---- dependencies and build ----

step "dependencies"
"$ROOT/scripts/deps.sh" build farmem || die "scripts/deps.sh build farmem failed"
echo "all present"

step "build"
[ $no_build = 1 ] || build_tree
TOUCH_BIN=$BUILD/tools/rmem-touch
[ -x "$TOUCH_BIN" ] || die "$TOUCH_BIN missing (build it, or drop --no-build)"
echo "build directory $BUILD"
# (also with --no-build, as bench.sh does: it is not part of the meson tree; a failure skips
# the backend below)
[[ " ${BACKENDS[*]} " == *" passthrough_ll "* ]] && passthrough_ll_build passthrough_ll

# ---- the machine ----

cg_detect "$CG_WANT" || die "no memory cgroup for --cgroup $CG_WANT on this machine (v1:" \
	"/sys/fs/cgroup/memory; v2: a cgroup2 mount with the memory controller)"
echo "memory cgroup: $CG_VER at $CG_PARENT"

rdma_devs=$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 -printf '%f ' 2>/dev/null)
keep=()
for b in "${BACKENDS[@]}"; do
	why=""
	case $b in
	rmemfs-rdma)
		if [ -z "$rdma_devs" ]; then
			why="no RDMA verbs device on this host (/sys/class/infiniband is empty)"
		elif [ -z "$RDMA_ADDR" ]; then
			why="RDMA device(s) ${rdma_devs% } but no address: give --rdma-addr"
		fi
		;;
	zram) [ -e /sys/class/zram-control/hot_add ] || modprobe zram num_devices=0 2>/dev/null
		[ -e /sys/class/zram-control/hot_add ] || why="no zram (module not available)" ;;
	passthrough_ll) [ -n "$PT_BIN" ] || why="passthrough_ll could not be built (see above)" ;;
	esac
	if [[ $b == rmemfs-* ]] && [ -z "$why" ] && [ ! -x "$SWAP_TOOL" ]; then
		why="$SWAP_TOOL is not built (rmemfs-swap)"
	fi
	if [ -n "$why" ]; then
		echo "$b: SKIPPED: $why"
		note "$b" all "skipped: $why"
	else
		keep+=("$b")
	fi
done
BACKENDS=("${keep[@]}")

"$PY" "$ROOT/scripts/bench/report.py" env "$RAW/env.json" "$ROOT" "$BUILD" ||
	die "collecting the environment failed"
config command "$(shquote "$0" "${ORIG_ARGS[@]}")"
config quick "$quick"
config backends "${BACKENDS[*]}"
config workloads "${WORKLOADS[*]}"
config fractions "${FRACTIONS[*]}"
config touch_size_mib "$TOUCH_MIB"
config touches "$TOUCHES"
config redis_size_mib "$REDIS_MIB"
config redis_keys "$REDIS_KEYS"
config redis_value_B "$REDIS_VALUE"
config redis_requests "$REDIS_REQ"
config sort_size_mib "$SORT_MIB"
config scratch_size_mib "$SCRATCH_MIB"
config scratch_buffer_mib "$SCRATCH_BUF_MIB"
config swap_size_mib "$SWAP_MIB"
config swap_priority "$PRIO"
config rmemfs_members "$MEMBERS"
config rmemfs_replicas "$REPLICAS"
config cgroup "$CG_VER"
config page_cluster "$(cat /proc/sys/vm/page-cluster)"
config swappiness "$(cat /proc/sys/vm/swappiness)"
config thp "$(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
config zswap "$(cat /sys/module/zswap/parameters/enabled 2>/dev/null || echo absent)"
config redis_version "$(redis-server --version 2>/dev/null)"
config sort_version "$(sort --version | head -1)"
config rdma_devices "${rdma_devs:-none}"
config disk_swap_fs "$(df -T /var/tmp | awk 'NR == 2 {print $1 " " $2}')"
[ $quick = 1 ] && echo "QUICK MODE: a smoke run; these figures are not the experiment"
echo "backends: ${BACKENDS[*]}; workloads: ${WORKLOADS[*]}; local fractions: ${FRACTIONS[*]} %"
echo "sizes: touch $TOUCH_SIZE ($TOUCHES random touches), redis $REDIS_KEYS keys of" \
	"$REDIS_VALUE B, sort $SORT_SIZE, scratch $SCRATCH_SIZE (-S ${SCRATCH_BUF_MIB}M);" \
	"swap areas ${SWAP_MIB} MiB"

# shellcheck source=farmem/workloads.sh
. "$HERE/workloads.sh"

# ---- working sets ----

step "working sets (each workload alone in an unlimited cgroup, no swap)"
declare -A WS=()
for w in touch-seq touch-rand redis sort; do
	wanted "$w" || continue
	workload_run "$w" unlimited 0 0 || die "$w failed without a memory limit: see $RAW/runs"
	WS[$w]=$LAST_PEAK
	config "working_set_B:$w" "$LAST_PEAK"
	printf '  %-11s working set %d MiB (the cgroup'"'"'s peak usage)\n' "$w" $((LAST_PEAK / 1048576))
done

# ---- the swap backends ----

for b in "${BACKENDS[@]}"; do
	[ ${#WS[@]} -gt 0 ] || break
	step "$b ($(date +%T))"
	config "loadavg:$b" "$(cut -d' ' -f1-3 /proc/loadavg)"
	if ! backend_up "$b"; then
		echo "farmem: backend $b failed to start (see $RAW/logs)" >&2
		note "$b" all "failed to start (see raw/logs)"
		backend_down "$b"
		continue
	fi
	for w in touch-seq touch-rand redis sort; do
		[ -n "${WS[$w]+x}" ] || continue
		for f in "${FRACTIONS[@]}"; do
			budget=$((WS[$w] * f / 100))
			limit=$((budget - DAEMON_RSS))
			if [ "$limit" -lt $((16 << 20)) ]; then
				echo "  $w $b $f%: budget $((budget >> 20)) MiB minus the daemon's" \
					"$((DAEMON_RSS >> 20)) MiB leaves nothing: not run"
				note "$b" "$w:$f" "$(echo "budget $((budget >> 20)) MiB <= the daemon's RSS" \
					"$((DAEMON_RSS >> 20)) MiB + 16 MiB")"
				continue
			fi
			workload_run "$w" "$b" "$f" "$limit"
		done
	done
	backend_down "$b"
done

# ---- scratch space ----

if wanted scratch; then
	step "scratch space: GNU sort of $SCRATCH_SIZE with -S ${SCRATCH_BUF_MIB}M ($(date +%T))"
	scratch_all
fi

config elapsed_s "$(($(date +%s) - T_START))"
config loadavg_end "$(cut -d' ' -f1-3 /proc/loadavg)"

step "results ($OUT)"
report "$OUT"
echo "total $(($(date +%s) - T_START)) s"
