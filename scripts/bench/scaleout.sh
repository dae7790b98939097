#!/bin/bash
# scaleout.sh - the scale-out benchmark of rmemfs over several memservers (scripts/bench.sh
# --scale-out runs it): does one filesystem get faster with more members, what do replicas
# cost, and what does losing a member mid-job cost.
#
# usage: scripts/bench.sh --scale-out [OPTIONS]        (as root: namespaces, tc, mounts)
#
# Topology: each memserver runs in its own network namespace behind a veth pair whose two
# ends are rate-limited with tc (tbf, --rate each way): the namespaces stand in for machines
# on a network, the client runs in the root namespace. Addresses 10.79.N.2 (member N) and
# 10.79.N.1 (the client's end).
# Runs, each on fresh (blank) memservers: members 1..--members, replicas 1 and 2 (2 from two
# members on), jobs
#   seq-write-1m      buffered sequential write of --size, 1 MiB blocks, fsync at the end
#   seq-read-1m       the same file read back after a remount (the client cache is cold)
#   randread-4k-qd32  4 KiB random reads over it, libaio QD32, O_DIRECT, --runtime seconds,
#                     after another remount
# The client's cache is --size / 8 (at least 64M), so the random reads mostly miss and cross
# the links: they measure the members, not the client's memory. The memservers stand in for
# machines of their own but share this machine's CPUs: they run with --spin-us 0, since a
# memserver that polls its socket after each request (the default, for the latency of one
# client on its own machine) takes CPU from the client and the other memservers here.
# and, with all members and replicas=2, each job again with the last member SIGKILLed a
# third of the way in ("-kill" rows): errors must be zero, and the loss costs at most one
# member's share of the throughput.
# Ratios are against one member, replicas 1, in the same run.
#
# Options:
#   --quick            smoke run: --size 128M, --runtime 3
#   --size SIZE        the sequential file (default 512M)
#   --runtime SECS     the random-read job (default 10)
#   --rate RATE        each link, each way, in tc's units (default 1gbit)
#   --members N        the most members (default 4; 2..12)
#   --build-dir DIR    build here (default build-bench/, release)
#   --no-build         use --build-dir as it is
#   --out DIR          results directory (default bench-results/scaleout-<timestamp>/)
#   --update-docs      write the table into docs/PERFORMANCE.md ("Scale-out") and the chart
#                      into docs/perf/scaleout.png
#   --report-only DIR  no run: the report of results directory DIR again
#
# Output: results.txt (the table), results.json, scaleout.png (gnuplot), raw/ (fio JSON,
# logs, commands). A trap unmounts, stops every memserver and deletes the namespaces (and so
# the veth pairs) on any exit.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/bench
PY=/usr/bin/python3
usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//'; }
die() { echo "bench --scale-out: $*" >&2; exit 1; }

# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$ROOT/scripts/lib/cli.sh"
# to_mib, build_tree, record_cmd (and lib/proc.sh): the bench's bookkeeping; definitions only
# shellcheck source-path=SCRIPTDIR source=targets.sh
. "$HERE/targets.sh"
SEQ_SIZE="" RUNTIME="" RATE=1gbit MEMBERS=4
declare -A VALUE_OPTS=([--size]=SEQ_SIZE [--runtime]=RUNTIME [--rate]=RATE [--members]=MEMBERS)
REPORT=$HERE/scaleout.py DOC=$ROOT/docs/PERFORMANCE.md DOC_DIR=$ROOT/docs/perf
cli_parse "$@"

if [ $quick = 1 ]; then
	: "${SEQ_SIZE:=128M}" "${RUNTIME:=3}"
else
	: "${SEQ_SIZE:=512M}" "${RUNTIME:=10}"
fi
if ! [[ $RUNTIME =~ ^[0-9]+$ ]] || [ "$RUNTIME" -lt 1 ]; then
	die "--runtime: whole seconds, at least 1"
fi
if ! [[ $MEMBERS =~ ^[0-9]+$ ]] || [ "$MEMBERS" -lt 2 ] || [ "$MEMBERS" -gt 12 ]; then
	die "--members: 2..12"
fi
[ "$(id -u)" = 0 ] || die "run as root: it creates network namespaces, veth pairs and mounts"
for t in fio ip tc; do
	command -v "$t" >/dev/null || die "$t is missing (scripts/deps.sh bench installs it)"
done

build=${build:-$ROOT/build-bench}
[ -n "$out" ] || out=$ROOT/bench-results/scaleout-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/raw/logs" || die "cannot create $out"
OUT=$(cd "$out" && pwd)
RAW=$OUT/raw
WORK=$(mktemp -d /tmp/rmemfs-scaleout.XXXXXX)
MNT=$WORK/mnt
TAG=rso$$
mkdir -p "$MNT"
: >"$RAW/commands.tsv"
: >"$RAW/config.tsv"
declare -a MS_PIDS=()
FS_PID=""

cleanup()
{
	set +e
	mountpoint -q "$MNT" 2>/dev/null && { fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT"; }
	[ -n "$FS_PID" ] && stop_pid "$FS_PID" 50
	local pid i
	for pid in "${MS_PIDS[@]}"; do
		[ -n "$pid" ] && stop_pid "$pid" 30
	done
	for i in $(seq "$MEMBERS"); do
		ip netns del "$TAG-$i" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'echo "bench --scale-out: interrupted; cleaning up" >&2; exit 130' INT
trap 'exit 143' TERM

step() { printf '\n==== %s\n' "$*"; }
config() { printf '%s\t%s\n' "$1" "$2" >>"$RAW/config.tsv"; }

# ---- the network: member i behind its own rate-limited link ----

net_up()
{
	local i ns
	for i in $(seq "$MEMBERS"); do
		ns=$TAG-$i
		ip netns add "$ns" || die "ip netns add $ns failed"
		ip link add "${TAG}h$i" type veth peer name "${TAG}n$i" netns "$ns" ||
			die "ip link add veth for member $i failed"
		ip addr add "10.79.$i.1/24" dev "${TAG}h$i"
		ip link set "${TAG}h$i" up
		ip -n "$ns" addr add "10.79.$i.2/24" dev "${TAG}n$i"
		ip -n "$ns" link set "${TAG}n$i" up
		ip -n "$ns" link set lo up
		# each way: our end shapes what goes to the member, its end what comes back
		tc qdisc add dev "${TAG}h$i" root tbf rate "$RATE" burst 256kb latency 50ms ||
			die "tc on ${TAG}h$i failed"
		tc -n "$ns" qdisc add dev "${TAG}n$i" root tbf rate "$RATE" burst 256kb latency 50ms ||
			die "tc on member $i's end failed"
	done
}

# ms_start I: a blank memserver for member I in its namespace
ms_start()
{
	local i=$1 log=$RAW/logs/member$1.out
	local cmd=(ip netns exec "$TAG-$i" "$build/memserver/memserver" --size "$POOL"
		--listen "10.79.$i.2" --port 7471 --transport tcp --token-file "$WORK/token"
		--spin-us 0)
	record_cmd scaleout "member$i" "${cmd[@]}"
	"${cmd[@]}" >"$log" 2>"$RAW/logs/member$i.err" &
	MS_PIDS[i]=$!
	ready_port "$log" "${MS_PIDS[i]}" 300 >/dev/null ||
		{ cat "$log" "$RAW/logs/member$i.err" >&2; die "member $i did not start"; }
}

ms_stop() { [ -n "${MS_PIDS[$1]:-}" ] && stop_pid "${MS_PIDS[$1]}" 30; MS_PIDS[$1]=""; }

# members N: the server list of members 1..N
members() { local i s=""; for i in $(seq "$1"); do s+="${s:+,}10.79.$i.2:7471"; done; echo "$s"; }

# mount_fs N R: mount members 1..N (a new set with replicas R when they are blank)
mount_fs()
{
	local cmd=("$build/fuse-client/rmemfs" "$(members "$1")" "$MNT" -f
		-o "token_file=$WORK/token,transport=tcp,replicas=$2,cache_size=$CACHE")
	record_cmd scaleout "mount-$1-$2" "${cmd[@]}"
	"${cmd[@]}" >>"$RAW/logs/client-$1-$2.log" 2>&1 &
	FS_PID=$!
	wait_mount "$MNT" "$FS_PID" 300 && return 0
	tail -20 "$RAW/logs/client-$1-$2.log" >&2
	die "mounting $1 members, replicas $2 failed"
}

umount_fs()
{
	umount "$MNT" 2>/dev/null || fusermount3 -u "$MNT" || die "unmount failed"
	wait_gone "$FS_PID" 300 || die "rmemfs did not exit after unmount"
	wait "$FS_PID" 2>/dev/null
	FS_PID=""
}

# fio_job NAME OUTFILE ARGS...: run fio; its exit status
fio_job()
{
	local name=$1 json=$2
	shift 2
	local cmd=(fio --output-format=json --output="$json" --name="$name" --group_reporting
		--filename="$MNT/seq" "$@")
	record_cmd scaleout "$name" "${cmd[@]}"
	timeout -k 10 600 "${cmd[@]}" >"${json%.json}.stdout" 2>"${json%.json}.err"
}

# killer DELAY_S I: SIGKILL member I after DELAY_S seconds (background)
killer() { sleep "$1"; kill -KILL "${MS_PIDS[$2]}" 2>/dev/null; echo "killed member $2"; }

# run_job N R JOB [KILL_AFTER_S]: one job of the matrix (the file exists for the reads);
# with KILL_AFTER_S, member N is SIGKILLed that long after the job starts
run_job()
{
	local n=$1 r=$2 job=$3 kill_after=${4:-} tag=$1-$2 kpid="" rc
	local json=$RAW/$job${kill_after:+-kill}-$tag.json
	[ -n "$kill_after" ] && { killer "$kill_after" "$n" >>"$RAW/logs/kills.log" & kpid=$!; }
	case $job in
	seq-write-1m) fio_job "$job" "$json" --rw=write --bs=1M --size="$SEQ_SIZE" --end_fsync=1 ;;
	seq-read-1m) fio_job "$job" "$json" --rw=read --bs=1M --size="$SEQ_SIZE" ;;
	randread-4k-qd32) fio_job "$job" "$json" --rw=randread --bs=4k --size="$SEQ_SIZE" \
		--ioengine=libaio --iodepth=32 --direct=1 --time_based --runtime="$RUNTIME" ;;
	esac
	rc=$?
	[ -n "$kpid" ] && wait "$kpid"
	printf '  %-22s %s\n' "$job${kill_after:+ (kill)}" \
		"$("$PY" "$REPORT" fio-line "$json" "$rc")"
}

# fresh_set N R: members 1..N restarted blank, mounted as a new set with R copies
fresh_set()
{
	local i
	for i in $(seq "$1"); do ms_stop "$i"; ms_start "$i"; done
	mount_fs "$1" "$2"
}

# prepare N R: the file the reads read, written and flushed; then a cold remount
prepare()
{
	fio_job prepare "$RAW/prepare-$1-$2.json" --rw=write --bs=1M --size="$SEQ_SIZE" \
		--end_fsync=1 || die "writing the file to read failed"
	umount_fs
	mount_fs "$1" "$2"
}

# third S: a third of S seconds, at least 1
third() { local t=$(( $1 / 3 )); echo $(( t < 1 ? 1 : t )); }

# config_run N R: the three jobs on fresh members
config_run()
{
	step "$1 member(s), replicas $2"
	fresh_set "$1" "$2"
	run_job "$1" "$2" seq-write-1m
	umount_fs
	mount_fs "$1" "$2"
	run_job "$1" "$2" seq-read-1m
	umount_fs
	mount_fs "$1" "$2"
	run_job "$1" "$2" randread-4k-qd32
	umount_fs
}

# kill_run N R: each job on a fresh set, member N SIGKILLed a third of the way in
kill_run()
{
	local n=$1 r=$2 link_s=$(( SEQ_MIB / LINK_MIBS ))
	step "$n members, replicas $r, member $n killed a third of the way into each job"
	fresh_set "$n" "$r"
	run_job "$n" "$r" seq-write-1m "$(third $(( link_s * r / n )))"
	umount_fs
	fresh_set "$n" "$r"
	prepare "$n" "$r"
	run_job "$n" "$r" seq-read-1m "$(third $(( link_s / n )))"
	umount_fs
	fresh_set "$n" "$r"
	prepare "$n" "$r"
	run_job "$n" "$r" randread-4k-qd32 "$(third "$RUNTIME")"
	umount_fs
}

# link_mibs RATE: tc's RATE in MiB/s (bit, kbit, mbit, gbit; k/m/g are 1000s as tc's are)
link_mibs()
{
	local v=${1%%[a-z]*} u=${1##*[0-9]} bits
	case $u in
	bit) bits=$v ;; kbit) bits=$((v * 1000)) ;; mbit) bits=$((v * 1000000)) ;;
	gbit) bits=$((v * 1000000000)) ;; *) die "--rate $1: want NUMBER with bit, kbit, mbit or gbit" ;;
	esac
	echo $(( bits / 8 / 1048576 > 0 ? bits / 8 / 1048576 : 1 ))
}

# ---- the run ----

# (to_mib runs in a subshell: its die only ends that, hence the `|| exit`)
SEQ_MIB=$(to_mib "$SEQ_SIZE") || exit 2
[ "$SEQ_MIB" -ge 16 ] || die "--size: at least 16M"
LINK_MIBS=$(link_mibs "$RATE")
POOL="$(( SEQ_MIB * 2 + 256 ))M"
CACHE=$(( SEQ_MIB / 8 < 64 ? 64 : SEQ_MIB / 8 ))M
head -c 32 /dev/urandom | base64 >"$WORK/token"
chmod 600 "$WORK/token"

BUILD=$build
if [ "$no_build" = 0 ]; then
	step "building $build"
	build_tree memserver/memserver fuse-client/rmemfs
fi
for b in memserver/memserver fuse-client/rmemfs; do
	[ -x "$build/$b" ] || die "$build/$b is not built"
done

config size "$SEQ_SIZE"
config runtime "$RUNTIME"
config rate "$RATE"
config members "$MEMBERS"
config pool "$POOL"
config cache_size "$CACHE"
config commit "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
config kernel "$(uname -r)"
config cpus "$(nproc)"
config date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"

step "network: $MEMBERS namespaces, veth pairs at $RATE each way"
net_up
for n in $(seq "$MEMBERS"); do
	config_run "$n" 1
	[ "$n" -ge 2 ] && config_run "$n" 2
done
kill_run "$MEMBERS" 2

step "report"
report "$OUT"
cat "$OUT/results.txt"
