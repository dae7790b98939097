#!/bin/bash
# footprint.sh - the rmemfs client's own memory after mount, writes, reads, idleness and a
# memory hog beside it (issue 26): scripts/bench.sh --footprint runs it.
#
# usage: scripts/bench.sh --footprint [OPTIONS]
#
# Two rounds, the defaults and -o cache_size=64M, each on a fresh memserver over TCP on
# 127.0.0.1; what each point means is in scripts/bench/footprint.py.
#
# Options:
#   --size MIB         data written and read (default 1024; quick 128)
#   --idle SECS        -o cache_idle of the mounts (default 30, rmemfs's own; quick 3)
#   --hog MIB          the memory hog (default 1024; quick 384)
#   --quick            smoke run
#   --build-dir DIR    build here (default build-bench/, release, no tests); --no-build
#   --out DIR          results directory (default bench-results/footprint-<timestamp>/)
# Output: results.txt (a markdown table), results.json, raw/ (logs). Needs root (mounts,
# drop_caches, a memory cgroup).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/bench
PY=/usr/bin/python3
usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//'; }
die() { echo "footprint: $*" >&2; exit 1; }

# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$ROOT/scripts/lib/cli.sh"
SIZE="" IDLE="" HOG=""
declare -A VALUE_OPTS=([--size]=SIZE [--idle]=IDLE [--hog]=HOG)
REPORT=/dev/null DOC="" DOC_DIR=""
cli_parse "$@"
[ -z "$report_only" ] || die "--report-only: results.txt of that run is the report"

BUILD=${build:-$ROOT/build-bench}
OUT=${out:-$ROOT/bench-results/footprint-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT/raw/logs" || die "cannot create $OUT"
if [ $no_build = 0 ]; then
	if [ ! -f "$BUILD/meson-private/coredata.dat" ]; then
		meson setup "$BUILD" "$ROOT" --buildtype=release -Dtests=false \
			>"$OUT/raw/logs/meson-setup.log" 2>&1 || die "meson setup $BUILD failed"
	fi
	ninja -C "$BUILD" >"$OUT/raw/logs/ninja.log" 2>&1 || die "ninja -C $BUILD failed"
fi
args=()
[ $quick = 1 ] && args+=(--quick)
[ -n "$SIZE" ] && args+=(--size "$SIZE")
[ -n "$IDLE" ] && args+=(--idle "$IDLE")
[ -n "$HOG" ] && args+=(--hog "$HOG")
exec "$PY" "$HERE/footprint.py" "$BUILD" "$OUT" "${args[@]}"
