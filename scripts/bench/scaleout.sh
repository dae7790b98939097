#!/bin/bash
# scaleout.sh - the scale-out benchmark of rmemfs over several memservers (scripts/bench.sh
# --scale-out runs it): does one filesystem get faster with more members, what do replicas
# cost, and what does losing a member mid-job cost. With --ec, the other mode: erasure-coded
# member sets (issue 24) against copies on six members.
#
# usage: scripts/bench.sh --scale-out [--ec] [OPTIONS]   (as root: namespaces, tc, mounts)
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
# --ec (erasure coding, issue 24): --members members (default 6), three configurations in
# the same run, each on fresh memservers: -o ec=4+2, replicas=3 (both survive two lost
# members) and replicas=1. For each: the capacity statfs reports right after the format
# (f_blocks x f_frsize, as a fraction of the raw pool bytes of all members), then the three
# jobs above. Then the slow member, with ec=4+2 and (for comparison) replicas=3: the p99 of
# 4 KiB random reads (O_DIRECT, fio's lat, --runtime seconds each) at QD1 (psync) and QD32
# (libaio), healthy, then with the last member's link slowed by `tc netem delay
# --slow-delay` on the client's end of its veth (what the client sends to that member waits
# there; tbf stays the root qdisc, netem is its child, so the rate limit holds), checked
# with ping from the client (the RTT must grow by at least 3/4 of the delay, or the run
# stops). An erasure-coded set reads a slow member's fragments by decoding them from the
# others (fuse-client/pool/remote_ec.c); no option is involved.
# Where tc has no netem (a kernel without sch_netem; fq and etf are often missing too, so no
# EDT delay either) the member is slowed by a userspace relay instead, said on the terminal
# and in the report: scripts/bench/delayrelay.c (built with cc into BUILD/bench/), in the
# root namespace at the client's end of the member's link (10.79.N.1, where netem would sit;
# the member's namespace and memserver stay as they are), holding each chunk the client sends
# to the member --slow-delay before passing it on, replies not held: netem on the client's
# end delays the requests only, and adds its delay once to the RTT (ping, min RTT 0.31 ->
# 2.39 ms with 2ms in the soft-RoCE VM). Many requests in flight are each delayed, not
# serialised. The set is formatted with the direct addresses; the slowed runs remount it
# listing the relay's address in the member's place (rmemfs finds a member by its pool id,
# not its address). ping cannot see a TCP relay: the check is the QD1 4 KiB read latency of
# rmem-perf (tools/rmem-perf) to the member, direct and through the relay, against the same
# 3/4 of the delay. The healthy runs are then on a fresh mount too (direct), so both start
# with the client's cache cold.
# The report holds the issue's targets, met or missed with the numbers: capacity >= 0.65 of
# raw (replicas=3 is shown against its 0.33), sequential write >= 1.6x replicas=3,
# sequential read >= 0.9x replicas=1, random read QD32 >= 0.8x replicas=3, slow-member p99
# <= 2x the healthy p99. A configuration the mount refuses (an rmemfs without -o ec) is
# said on the terminal and in the report, the run goes on with the others and exits 1 at
# the end.
# Each member's pool in --ec mode is 3/4 of --size plus 64M: at replicas=3 six members hold
# two pools' worth (1.5x --size + 128M) less the metadata (journal and checkpoints, about 8%
# of the filesystem), so the file fits with about a third to spare.
#
# Options:
#   --quick            smoke run: --size 128M, --runtime 3 (--ec: about 2 minutes)
#   --ec               the erasure-coding mode above (about 5 minutes at the defaults)
#   --size SIZE        the sequential file (default 512M)
#   --runtime SECS     each random-read job (default 10)
#   --rate RATE        each link, each way, in tc's units (default 1gbit)
#   --members N        the most members (default 4; 2..12); --ec: the members (default 6,
#                      at least 6)
#   --slow-delay D     --ec: the slowed member's added delay, in ms (default 2ms)
#   --build-dir DIR    build here (default build-bench/, release)
#   --no-build         use --build-dir as it is
#   --out DIR          results directory (default bench-results/scaleout-<timestamp>/, --ec:
#                      bench-results/ec-<timestamp>/)
#   --update-docs      write the table into docs/PERFORMANCE.md ("Scale-out") and the chart
#                      into docs/perf/scaleout.png; --ec: the "Erasure coding" section
#                      (added at the end of the page the first time) and docs/perf/ec.png
#   --report-only DIR  no run: the report of results directory DIR again
#
# Output: results.txt (the table), results.json, scaleout.png or ec.png (gnuplot), raw/ (fio
# JSON, logs, commands). A trap unmounts, stops every memserver and deletes the namespaces
# (and so the veth pairs and their qdiscs) on any exit, Ctrl-C included.
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
SEQ_SIZE="" RUNTIME="" RATE=1gbit MEMBERS="" SLOW_DELAY=2ms EC=0
declare -A VALUE_OPTS=([--size]=SEQ_SIZE [--runtime]=RUNTIME [--rate]=RATE [--members]=MEMBERS
	[--slow-delay]=SLOW_DELAY)
REPORT=$HERE/scaleout.py DOC=$ROOT/docs/PERFORMANCE.md DOC_DIR=$ROOT/docs/perf
# --ec is this script's own flag (cli_parse knows the value options and the shared flags)
args=()
for a in "$@"; do
	if [ "$a" = --ec ]; then EC=1; else args+=("$a"); fi
done
cli_parse ${args[@]+"${args[@]}"}

if [ $quick = 1 ]; then
	: "${SEQ_SIZE:=128M}" "${RUNTIME:=3}"
else
	: "${SEQ_SIZE:=512M}" "${RUNTIME:=10}"
fi
if ! [[ $RUNTIME =~ ^[0-9]+$ ]] || [ "$RUNTIME" -lt 1 ]; then
	die "--runtime: whole seconds, at least 1"
fi
if [ $EC = 1 ]; then
	: "${MEMBERS:=6}"
	if ! [[ $MEMBERS =~ ^[0-9]+$ ]] || [ "$MEMBERS" -lt 6 ] || [ "$MEMBERS" -gt 12 ]; then
		die "--members with --ec: 6..12 (ec=4+2 needs six)"
	fi
	[[ $SLOW_DELAY =~ ^([0-9]+(\.[0-9]+)?)ms$ ]] || die "--slow-delay: milliseconds, e.g. 2ms"
	SLOW_MS=${BASH_REMATCH[1]}
	SLOW_US=$(awk -v d="$SLOW_MS" 'BEGIN { printf "%d", d * 1000 + 0.5 }')
else
	: "${MEMBERS:=4}"
	if ! [[ $MEMBERS =~ ^[0-9]+$ ]] || [ "$MEMBERS" -lt 2 ] || [ "$MEMBERS" -gt 12 ]; then
		die "--members: 2..12"
	fi
fi
[ "$(id -u)" = 0 ] || die "run as root: it creates network namespaces, veth pairs and mounts"
for t in fio ip tc; do
	command -v "$t" >/dev/null || die "$t is missing (scripts/deps.sh bench installs it)"
done
# the addresses are fixed: two runs at once would route over each other
if ip -4 -o addr show | grep -q ' 10\.79\.'; then
	die "10.79.0.0/16 is already in use here (another scale-out run?): $(ip -4 -o addr show |
		awk '/ 10\.79\./ {print $2; exit}')"
fi

build=${build:-$ROOT/build-bench}
if [ -z "$out" ]; then
	out=$ROOT/bench-results/$([ $EC = 1 ] && echo ec || echo scaleout)-$(date +%Y%m%d-%H%M%S)
fi
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
FS_PID="" RELAY_PID=""
# members' addresses in place of 10.79.N.2:7471 (--ec: the slowed member through the relay)
declare -A MEMBER_ADDR=()

cleanup()
{
	set +e
	mountpoint -q "$MNT" 2>/dev/null && { fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT"; }
	[ -n "$FS_PID" ] && stop_pid "$FS_PID" 50
	local pid i
	for pid in "${MS_PIDS[@]}"; do
		[ -n "$pid" ] && stop_pid "$pid" 30
	done
	[ -n "$RELAY_PID" ] && stop_pid "$RELAY_PID" 30
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

# members N: the server list of members 1..N (MEMBER_ADDR[i] in place of member i's own)
members()
{
	local i s=""
	for i in $(seq "$1"); do s+="${s:+,}${MEMBER_ADDR[$i]:-10.79.$i.2:7471}"; done
	echo "$s"
}

# mount_try N OPTS NAME: mount members 1..N with -o OPTS (a new set when they are blank),
# the client's output appended to raw/logs/client-NAME.log; 1, the daemon gone, if it did
# not mount within 30 s
mount_try()
{
	local cmd=("$build/fuse-client/rmemfs" "$(members "$1")" "$MNT" -f
		-o "token_file=$WORK/token,transport=tcp,cache_size=$CACHE,$2")
	record_cmd scaleout "mount-$3" "${cmd[@]}"
	"${cmd[@]}" >>"$RAW/logs/client-$3.log" 2>&1 &
	FS_PID=$!
	wait_mount "$MNT" "$FS_PID" 300 && return 0
	stop_pid "$FS_PID" 50
	FS_PID=""
	return 1
}

# mount_fs N R: mount members 1..N (a new set with replicas R when they are blank), or die
mount_fs()
{
	mount_try "$1" "replicas=$2" "$1-$2" && return 0
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

# ---- --ec: erasure coding against copies ----

# what --ec measures for each configuration, and where (raw/ec/TAG/): TAG and its -o options
EC_CONFIGS=("ec4+2 ec=4+2" "r3 replicas=3" "r1 replicas=1")
EC_NOT_MEASURED=()

# ec_mount TAG OPTS WHAT: mount the members with -o OPTS for configuration TAG; when the
# mount fails, its reason (the client's last lines) goes to raw/ec/TAG/refused.tsv with WHAT
# (format, remount) and onto the terminal, and the status is 1
ec_mount()
{
	local log=$RAW/logs/client-$1.log at why
	at=$(stat -c %s "$log" 2>/dev/null || echo 0)
	mount_try "$MEMBERS" "$2" "$1" && return 0
	why=$(tail -c +"$((at + 1))" "$log" 2>/dev/null | grep -v '^[[:space:]]*$' | tail -3 |
		paste -sd' ')
	: "${why:=the daemon exited without a message (raw/logs/client-$1.log)}"
	printf '%s\t%s\t%s\n' "$3" "$2" "$why" >>"$RAW/ec/$1/refused.tsv"
	printf '  %-22s REFUSED: rmemfs -o %s: %s\n' "mount ($3)" "$2" "$why"
	return 1
}

# ec_remount TAG OPTS: unmount and mount again (the client cache cold)
ec_remount() { umount_fs; ec_mount "$1" "$2" remount; }

# ec_job TAG JOB: one job of --ec on the mounted configuration TAG, into raw/ec/TAG/JOB.json;
# p99-qd1-* and p99-qd32-* are the slow-member jobs (with latency percentiles)
ec_job()
{
	local tag=$1 job=$2 json=$RAW/ec/$1/$2.json rc
	local rnd=(--rw=randread --bs=4k --size="$SEQ_SIZE" --direct=1 --time_based
		--runtime="$RUNTIME")
	local lat=(--lat_percentiles=1 --percentile_list=50:99:99.9)
	case $job in
	seq-write-1m) fio_job "$job" "$json" --rw=write --bs=1M --size="$SEQ_SIZE" --end_fsync=1 ;;
	seq-read-1m) fio_job "$job" "$json" --rw=read --bs=1M --size="$SEQ_SIZE" ;;
	randread-4k-qd32) fio_job "$job" "$json" "${rnd[@]}" --ioengine=libaio --iodepth=32 ;;
	p99-qd1-*) fio_job "$job" "$json" "${rnd[@]}" --ioengine=psync "${lat[@]}" ;;
	p99-qd32-*) fio_job "$job" "$json" "${rnd[@]}" --ioengine=libaio --iodepth=32 "${lat[@]}" ;;
	*) die "ec_job: no job $job" ;;
	esac
	rc=$?
	printf '  %-22s %s\n' "$job" "$("$PY" "$REPORT" fio-line "$json" "$rc")"
}

# slow_link I on|off: the client's end of member I's link (what the client sends to the
# member) gets tc netem delay SLOW_DELAY as the child of its tbf (on), or its plain tbf back
# (off); the qdiscs are logged to raw/logs/qdiscs.log
slow_link()
{
	local dev=${TAG}h$1
	tc qdisc del dev "$dev" root 2>/dev/null
	tc qdisc add dev "$dev" root handle 1: tbf rate "$RATE" burst 256kb latency 50ms ||
		die "tc tbf on $dev failed"
	if [ "$2" = on ]; then
		tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$SLOW_DELAY" limit 100000 ||
			die "tc netem on $dev failed"
	fi
	{ echo "# member $1 $2"; tc qdisc show dev "$dev"; } >>"$RAW/logs/qdiscs.log"
}

# netem_probe: NETEM_WHY empty when tc netem works under tbf on this kernel, else why not;
# SLOW_MODE netem, or relay (the slowed runs go through delayrelay, the report says why)
NETEM_WHY="" SLOW_MODE=netem
netem_probe()
{
	local dev=${TAG}h$MEMBERS err
	slow_link "$MEMBERS" off
	if ! err=$(tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$SLOW_DELAY" 2>&1); then
		NETEM_WHY="tc netem is not available here (no sch_netem in this kernel?): tc says: $err"
		SLOW_MODE=relay
	fi
	slow_link "$MEMBERS" off
}

# rtt_ms ADDR: "MIN AVG" round-trip ms of 20 pings from the client to ADDR (nothing if none
# came back)
rtt_ms()
{
	timeout -k 2 20 ping -n -q -c 20 -i 0.05 -W 2 "$1" 2>/dev/null |
		sed -n 's|^rtt [^=]*= \([0-9.]*\)/\([0-9.]*\)/.*|\1 \2|p'
}

# read_rtt_ms ADDR:PORT NAME: "MIN MEDIAN" ms of 4 KiB reads at QD1 (rmem-perf, 300 of them)
# from the client to the memserver at ADDR:PORT, its output in raw/logs/rmem-perf-NAME.txt;
# nothing if it failed. They read the pool, never write it: safe on a member of the set.
read_rtt_ms()
{
	local log=$RAW/logs/rmem-perf-$2.txt
	local cmd=("$build/tools/rmem-perf" "$1" --transport tcp --token-file "$WORK/token"
		--op read --size 4K --qd 1 --iters 300 --poll event)
	record_cmd scaleout "rmem-perf-$2" "${cmd[@]}"
	timeout -k 5 60 "${cmd[@]}" >"$log" 2>&1 || return 0
	awk '$1 == "read" && NF >= 9 { printf "%.3f %.3f\n", $8 / 1000, $9 / 1000 }' "$log"
}

# relay_start I NAME: delayrelay at the client's end of member I's link, to member I, holding
# what the client sends SLOW_US us; RELAY_PID, and RELAY_PORT its port; output in
# raw/logs/relay-NAME.{out,err}
relay_start()
{
	local out=$RAW/logs/relay-$2.out
	local cmd=("$RELAY_BIN" --listen "10.79.$1.1:0" --to "10.79.$1.2:7471"
		--delay-us "$SLOW_US")
	record_cmd scaleout "relay-$2" "${cmd[@]}"
	"${cmd[@]}" >"$out" 2>"$RAW/logs/relay-$2.err" &
	RELAY_PID=$!
	RELAY_PORT=$(ready_port "$out" "$RELAY_PID" 50) ||
		{ cat "$RAW/logs/relay-$2.err" >&2; die "delayrelay for member $1 did not start"; }
}

relay_stop() { [ -n "$RELAY_PID" ] && stop_pid "$RELAY_PID" 30; RELAY_PID=""; }

# rtt_check TAG M HEALTHY SLOW WHAT: the RTTs to member M ("MIN AVG" ms, measured with WHAT)
# into raw/ec/TAG/rtt.tsv and onto the terminal; dies unless the minimum grew by 3/4 of the
# delay or more (the delay is in effect)
rtt_check()
{
	local tag=$1 m=$2 healthy=$3 slow=$4 what=$5
	if [ -z "$healthy" ] || [ -z "$slow" ]; then
		die "$what to member $m got no answer (raw/logs/)"
	fi
	printf 'healthy\t%s\nslow\t%s\n' "$healthy" "$slow" >"$RAW/ec/$tag/rtt.tsv"
	printf '  %-22s RTT min/%s %s ms healthy, %s ms slowed\n' "$what member $m" \
		"$([ "$SLOW_MODE" = netem ] && echo avg || echo median)" "${healthy/ //}" \
		"${slow/ //}"
	awk -v h="${healthy%% *}" -v s="${slow%% *}" -v d="$SLOW_MS" \
		'BEGIN { exit !(s - h >= 0.75 * d) }' ||
		die "the $SLOW_DELAY delay ($SLOW_MODE) is not in effect on member $m's link (min RTT $healthy -> $slow ms)"
}

# ec_slow TAG OPTS: the p99 of 4 KiB random reads at QD1 and QD32 on the mounted
# configuration TAG (-o OPTS), healthy, then with the last member slowed (netem on its link,
# or the relay in its place: then both on a fresh mount); the RTTs before and after into
# raw/ec/TAG/rtt.tsv. Ends with nothing mounted.
ec_slow()
{
	local tag=$1 opts=$2 m=$MEMBERS addr=10.79.$MEMBERS.2 healthy slow
	if [ "$SLOW_MODE" = relay ]; then
		ec_remount "$tag" "$opts" || { EC_NOT_MEASURED+=("$opts (remount)"); return 0; }
	fi
	ec_job "$tag" p99-qd1-healthy
	ec_job "$tag" p99-qd32-healthy
	if [ "$SLOW_MODE" = netem ]; then
		healthy=$(rtt_ms "$addr")
		slow_link "$m" on
		slow=$(rtt_ms "$addr")
		rtt_check "$tag" "$m" "$healthy" "$slow" ping
	else
		umount_fs
		healthy=$(read_rtt_ms "$addr:7471" "$tag-direct")
		relay_start "$m" "$tag"
		slow=$(read_rtt_ms "10.79.$m.1:$RELAY_PORT" "$tag-relay")
		rtt_check "$tag" "$m" "$healthy" "$slow" "rmem-perf 4K read"
		MEMBER_ADDR[$m]=10.79.$m.1:$RELAY_PORT
		if ! ec_mount "$tag" "$opts" remount; then
			EC_NOT_MEASURED+=("$opts (remount through the relay)")
			unset "MEMBER_ADDR[$m]"
			relay_stop
			return 0
		fi
		unset "MEMBER_ADDR[$m]"
	fi
	ec_job "$tag" p99-qd1-slow
	ec_job "$tag" p99-qd32-slow
	umount_fs
	if [ "$SLOW_MODE" = netem ]; then
		slow_link "$m" off
	else
		relay_stop
	fi
}

# ec_statfs TAG: the capacity right after the format into raw/ec/TAG/statfs.txt ("f_blocks
# f_bsize f_frsize"), and on the terminal
ec_statfs()
{
	local f=$RAW/ec/$1/statfs.txt
	stat -f -c '%b %s %S' "$MNT" >"$f" || { echo "  statfs failed"; rm -f "$f"; return 1; }
	awk -v raw=$((MEMBERS * POOL_MIB)) '{ c = $1 * $3 / 1048576
		printf "  %-22s %.1f MiB, %.3f of the raw %d MiB\n", "capacity (statfs)", c, c / raw, raw }' "$f"
}

# ec_config_run TAG OPTS: one configuration on fresh members: capacity, the three jobs, and
# for ec=4+2 and replicas=3 the slow member
ec_config_run()
{
	local tag=$1 opts=$2 i
	step "$MEMBERS members, -o $opts"
	mkdir -p "$RAW/ec/$tag"
	config "opts:$tag" "$opts"
	for i in $(seq "$MEMBERS"); do ms_stop "$i"; ms_start "$i"; done
	ec_mount "$tag" "$opts" format || { EC_NOT_MEASURED+=("$opts"); return 1; }
	ec_statfs "$tag"
	ec_job "$tag" seq-write-1m
	ec_remount "$tag" "$opts" || { EC_NOT_MEASURED+=("$opts (remount)"); return 1; }
	ec_job "$tag" seq-read-1m
	ec_remount "$tag" "$opts" || { EC_NOT_MEASURED+=("$opts (remount)"); return 1; }
	ec_job "$tag" randread-4k-qd32
	if [ "$tag" = r1 ]; then umount_fs; else ec_slow "$tag" "$opts"; fi
}

# ec_main: the --ec run and its report; 1 when a configuration could not be measured
ec_main()
{
	local c
	step "network: $MEMBERS namespaces, veth pairs at $RATE each way"
	net_up
	netem_probe
	config netem "${NETEM_WHY:-yes}"
	config slow_mode "$SLOW_MODE"
	if [ "$SLOW_MODE" = netem ]; then
		command -v ping >/dev/null ||
			die "ping is missing (apt-get install iputils-ping): --ec checks the slowed link with it"
		config slow_where "netem under the tbf of the client's end of its veth (requests wait)"
		config slow_check "ping from the client, min RTT"
	else
		[ -x "$build/tools/rmem-perf" ] ||
			die "$build/tools/rmem-perf is not built: it checks the relay's delay"
		echo "netem missing in this kernel: member $MEMBERS slowed by a userspace relay" \
			"(delayrelay) holding each chunk the client sends it $SLOW_DELAY, replies not held:" \
			"the RTT grows by $SLOW_DELAY, as with netem on the client's end ($NETEM_WHY)"
		config slow_where "netem missing in this kernel: a userspace relay (scripts/bench/delayrelay.c) in its place at the client's end of its link, holding each chunk the client sends it $SLOW_DELAY, replies not held (the RTT grows by $SLOW_DELAY, as with netem)"
		config slow_check "rmem-perf 4 KiB read QD1, direct and through the relay, min latency"
	fi
	for c in "${EC_CONFIGS[@]}"; do
		# shellcheck disable=SC2086 # "TAG OPTS"
		ec_config_run $c
	done
	step "report"
	report "$OUT"
	cat "$OUT/results.txt"
	[ ${#EC_NOT_MEASURED[@]} = 0 ] && return 0
	echo "bench --scale-out --ec: not measured: ${EC_NOT_MEASURED[*]} (the mount refused;" \
		"see above and $OUT/raw/ec/*/refused.tsv)" >&2
	return 1
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
if [ $EC = 1 ]; then
	# the file under replicas=3: MEMBERS/3 pools' worth less about 8% of metadata (the help)
	POOL_MIB=$(( SEQ_MIB * 3 / 4 + 64 ))
else
	POOL_MIB=$(( SEQ_MIB * 2 + 256 ))
fi
POOL=${POOL_MIB}M
CACHE=$(( SEQ_MIB / 8 < 64 ? 64 : SEQ_MIB / 8 ))M
head -c 32 /dev/urandom | base64 >"$WORK/token"
chmod 600 "$WORK/token"

BUILD=$build
if [ "$no_build" = 0 ]; then
	step "building $build"
	targets=(memserver/memserver fuse-client/rmemfs)
	# rmem-perf: the check of the relay's delay, where --ec needs the relay
	[ $EC = 0 ] || targets+=(tools/rmem-perf)
	build_tree "${targets[@]}"
fi
for b in memserver/memserver fuse-client/rmemfs; do
	[ -x "$build/$b" ] || die "$build/$b is not built"
done
if [ $EC = 1 ]; then
	# the stand-in for netem, where the kernel has none (bench.sh builds metabench the same way)
	RELAY_BIN=$build/bench/delayrelay
	relay_cmd=(cc -O2 -Wall -Wextra -o "$RELAY_BIN" "$HERE/delayrelay.c")
	if [ ! -x "$RELAY_BIN" ] || [ "$HERE/delayrelay.c" -nt "$RELAY_BIN" ]; then
		mkdir -p "$build/bench" || die "cannot create $build/bench"
		"${relay_cmd[@]}" || die "building delayrelay failed"
	fi
	record_cmd scaleout "build delayrelay" "${relay_cmd[@]}"
fi

config quick "$quick"
config size "$SEQ_SIZE"
config runtime "$RUNTIME"
config rate "$RATE"
config members "$MEMBERS"
config pool "$POOL"
config pool_mib "$POOL_MIB"
config cache_size "$CACHE"
config commit "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
config kernel "$(uname -r)"
config cpus "$(nproc)"
config date "$(date -u +%Y-%m-%dT%H:%M:%SZ)"

if [ $EC = 1 ]; then
	config mode ec
	config slow_member "$MEMBERS"
	config slow_delay "$SLOW_DELAY"
	ec_main
	exit
fi
config mode scaleout
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
