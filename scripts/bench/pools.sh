#!/bin/bash
# pools.sh - what serving many pools costs one client of a memserver (issue 25): scripts/bench.sh
# --pools runs it.
#
# usage: scripts/bench.sh --pools [OPTIONS]
#
# Three memserver set-ups on 127.0.0.1, TCP, each fresh and measured in turn, the three in
# one round, --reps rounds (interleaved, every other round in reverse order, so a drift over
# the run hits all three alike):
#   default   memserver --size POOL: the default pool, as before named pools existed
#   alone     memserver --capacity 9xPOOL --token-dir: tenant t0's pool p0 and nothing else
#   beside-7  the same with seven more pools p1..p7 of tenants t1..t7 (created with
#             memserver-ctl), each filled with data (rmem-perf 1 MiB writes over all of it)
# In each, p0 (or the default pool) is filled the same way, then rmem-perf measures 4 KiB
# READ and WRITE at QD1 and QD32 against it (--duration seconds each, one thread).
# The report gives each row's median over the rounds and the ratios beside-7 / alone and
# alone / default; the issue's bar is beside-7 within 5% of alone.
#
# Options:
#   --pool SIZE        each pool (default 256M)
#   --duration SECS    each rmem-perf row (default 3; quick 1)
#   --reps N           rounds (default 6; quick 1)
#   --quick            smoke run
#   --build-dir DIR    build here (default build-bench/, release, no tests); --no-build
#   --out DIR          results directory (default bench-results/pools-<timestamp>/)
#   --update-docs      write the table into docs/PERFORMANCE.md (between its pools markers)
#   --report-only DIR  no run: the report of an earlier results directory
# Output: results.txt (the table), raw/ (rmem-perf JSON per round and set-up, memserver logs).
# A trap stops every memserver on any exit.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/bench
PY=/usr/bin/python3
usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//'; }
die() { echo "pools: $*" >&2; exit 1; }

# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$ROOT/scripts/lib/cli.sh"
POOL=256M DURATION="" REPS=""
declare -A VALUE_OPTS=([--pool]=POOL [--duration]=DURATION [--reps]=REPS)
REPORT=$HERE/pools.py DOC=$ROOT/docs/PERFORMANCE.md DOC_DIR=$ROOT/docs/perf
cli_parse "$@"
[ $quick = 1 ] && { DURATION=${DURATION:-1}; REPS=${REPS:-1}; }
DURATION=${DURATION:-3} REPS=${REPS:-6}

BUILD=${build:-$ROOT/build-bench}
OUT=${out:-$ROOT/bench-results/pools-$(date +%Y%m%d-%H%M%S)}
RAW=$OUT/raw
mkdir -p "$RAW/logs" || die "cannot create $OUT"
WORK=$(mktemp -d /tmp/rmemfs-pools.XXXXXX)
MS_PID=""

cleanup()
{
	[ -n "$MS_PID" ] && kill "$MS_PID" 2>/dev/null && wait "$MS_PID" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ $no_build = 0 ]; then
	if [ ! -f "$BUILD/meson-private/coredata.dat" ]; then
		meson setup "$BUILD" "$ROOT" --buildtype=release -Dtests=false \
			>"$RAW/logs/meson-setup.log" 2>&1 || die "meson setup $BUILD failed"
	fi
	ninja -C "$BUILD" >"$RAW/logs/ninja.log" 2>&1 || die "ninja -C $BUILD failed"
fi
MEMSERVER=$BUILD/memserver/memserver
PERF=$BUILD/tools/rmem-perf
CTL=$BUILD/tools/memserver-ctl
for b in "$MEMSERVER" "$PERF" "$CTL"; do [ -x "$b" ] || die "$b is not built"; done
POOL_B=$(numfmt --from=iec "$POOL") || die "--pool $POOL is not a size"

# tokens: the admin's and eight tenants'
mkdir -p "$WORK/tenants"
echo admin-token >"$WORK/admin"
for i in 0 1 2 3 4 5 6 7; do echo "tenant-token-$i" >"$WORK/tenants/t$i"; done

# ms_start ARGS...: a memserver on a free port; sets MS_PID and PORT
ms_start()
{
	local log=$RAW/logs/memserver-$SETUP-$ROUND.log i
	"$MEMSERVER" --listen 127.0.0.1 --port 0 --transport tcp "$@" >"$WORK/ready" 2>"$log" &
	MS_PID=$!
	for i in $(seq 100); do
		PORT=$(grep -o 'on tcp 127.0.0.1:[0-9]*' "$WORK/ready" | grep -o '[0-9]*$')
		[ -n "$PORT" ] && return 0
		kill -0 "$MS_PID" 2>/dev/null || break
		sleep 0.1
	done
	die "memserver did not start (see $log)"
}

ms_stop()
{
	kill "$MS_PID" 2>/dev/null
	wait "$MS_PID" 2>/dev/null
	MS_PID=""
}

# fill TARGET TOKENFILE: write the whole pool once (so it holds data, resident)
fill()
{
	"$PERF" "$1" --transport tcp --token-file "$2" --op write --size 1M --qd 8 \
		--iters $((POOL_B >> 20)) --warmup 0 --region "$POOL_B" >/dev/null ||
		die "filling $1 failed"
}

# measure TARGET TOKENFILE: the four rows into raw/SETUP-ROUND-OP-QD.json
measure()
{
	local op qd
	for op in read write; do
		for qd in 1 32; do
			"$PERF" "$1" --transport tcp --token-file "$2" --op $op --size 4096 --qd $qd \
				--duration "$DURATION" --region "$POOL_B" --json \
				>"$RAW/$SETUP-$ROUND-$op-$qd.json" || die "rmem-perf $op QD$qd on $1 failed"
		done
	done
}

run_default()
{
	ms_start --size "$POOL" --token-file "$WORK/admin"
	fill "127.0.0.1:$PORT" "$WORK/admin"
	measure "127.0.0.1:$PORT" "$WORK/admin"
	ms_stop
}

# run_named N: p0 and N more pools, every one filled
run_named()
{
	local n=$1 i
	ms_start --capacity $((9 * POOL_B)) --token-file "$WORK/admin" --token-dir "$WORK/tenants"
	for i in $(seq 0 "$n"); do
		"$CTL" "127.0.0.1:$PORT" --token-file "$WORK/tenants/t$i" create "p$i" "$POOL" \
			>/dev/null || die "memserver-ctl create p$i failed"
		fill "127.0.0.1:$PORT/p$i" "$WORK/tenants/t$i"
	done
	"$CTL" "127.0.0.1:$PORT" --token-file "$WORK/admin" --json list >"$RAW/$SETUP-$ROUND-list.json"
	measure "127.0.0.1:$PORT/p0" "$WORK/tenants/t0"
	ms_stop
}

printf 'pool\t%s\nduration_s\t%s\nrounds\t%s\nmachine\t%s, %s CPUs\n' "$POOL" "$DURATION" \
	"$REPS" "$(uname -r)" "$(nproc)" >"$RAW/config.tsv"
# odd rounds in one order, even rounds in the other, so a drift over the run hits all alike
for ROUND in $(seq "$REPS"); do
	order="default alone beside-7"
	[ $((ROUND % 2)) = 0 ] && order="beside-7 alone default"
	for SETUP in $order; do
		echo "round $ROUND: $SETUP"
		case $SETUP in
		default) run_default ;;
		alone) run_named 0 ;;
		beside-7) run_named 7 ;;
		esac
	done
done
report "$OUT"
