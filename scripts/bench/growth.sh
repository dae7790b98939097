#!/bin/bash
# growth.sh - how rmemfs's costs grow with the number of files and the amount of data (issue
# 26): scripts/bench.sh --growth runs it.
#
# usage: scripts/bench.sh --growth [OPTIONS]          (as root: it mounts, drops caches)
#
# For each data set, one after the other (never two at once): a memserver on 127.0.0.1 (TCP,
# a pool sized for the set), rmemfs with its default options (-o token_file only; -o format
# on the first mount), populated, unmounted; then, cold each time:
#   fsck      rmemfs-fsck of the pool, nothing mounted (the way it is meant to run: it loads
#             the filesystem as a mount does and checks it, every data block's checksum too)
#   mount     drop_caches, then the seconds from exec of `rmemfs ... -f` to the mount point
#             being mounted and its root listing (growth.py mount polls every 2 ms);
#             client RSS (VmRSS) right after
#   ls -R     `ls -R` of the whole tree on that fresh mount; RSS after it; unmount
#   stat      drop_caches, a second fresh mount (its time is in the JSON as mount2_s), then
#             stat() of every file by name (metabench stat, one run per directory); RSS after
# Sets (--sets, comma-separated): a count of small files (10k, 100k, 1m: k = 1000,
# m = 1000000) spread evenly over 100 directories, each file --file-size bytes (default 4096,
# written by metabench create: create+write+close), or an amount of data (1g, 8g: GiB) as
# 1 GiB files in one directory, written sequentially with dd (1 MiB blocks, fsync). The
# The empty filesystem is mounted cold too (after the formatting mount, before populating):
# its mount time and client RSS are the baseline, "mount empty s" and "RSS empty". The
# client logs its mount's stages (G_MESSAGES_DEBUG): "load s" is the filesystem's (lease,
# checkpoint, journal, check), "load us/file" that over the empty filesystem's per file; the
# rest of a mount (the block cache, touched at mount: cache_size, RAM/16 up to 1 GiB) does
# not depend on the files and its time varies with how readily the kernel finds the memory.
# "RSS B/file" is (RSS after the cold mount - RSS empty) / files: what each file adds.
# The pool: files x max(1.2 x the file's 4 KiB blocks, 4 KiB) + 256 MiB (the checkpoint slot,
# pool/32, must hold the metadata), or data x 1.1 + 256 MiB: 8g needs about 9 GiB.
#
# Options:
#   --sets LIST        data sets to run, in order (default 10k,100k,1m,1g,8g; quick 10k,1g)
#   --file-size BYTES  each small file (default 4096; 0: empty files)
#   --quick            smoke run: --sets 10k,1g unless given
#   --build-dir DIR    build here (default build-bench/, release, no tests); --no-build
#   --out DIR          results directory (default bench-results/growth-<timestamp>/)
#   --update-docs      write the table into docs/PERFORMANCE.md (between its growth markers)
#   --report-only DIR  no run: the report of an earlier results directory
# Output: results.md (the markdown table, also printed and as results.txt), results.json
# (every figure of every set and the configuration), raw/ (one SET.tsv of figures per set,
# metabench JSON lines, commands.tsv with every command line, daemon logs). A trap unmounts
# (lazily), stops the client and the memserver and removes the temporary directory on any
# exit, Ctrl-C included.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/scripts/bench
PY=/usr/bin/python3
usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//'; }
die() { echo "growth: $*" >&2; exit 1; }

# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
. "$ROOT/scripts/lib/cli.sh"
SETS="" FILE_SIZE=4096 DIRS=100
declare -A VALUE_OPTS=([--sets]=SETS [--file-size]=FILE_SIZE)
REPORT=$HERE/growth.py DOC=$ROOT/docs/PERFORMANCE.md DOC_DIR=$ROOT/docs/perf
cli_parse "$@"
[ $quick = 1 ] && SETS=${SETS:-10k,1g}
SETS=${SETS:-10k,100k,1m,1g,8g}
[[ $FILE_SIZE =~ ^[0-9]+$ ]] || die "--file-size: expected a whole number of bytes"
[ "$(id -u)" = 0 ] || die "run as root (it mounts and drops caches)"

# to_mib, record_cmd, build_tree, drop_caches, memserver_start/stop (definitions only)
# shellcheck source-path=SCRIPTDIR source=targets.sh
. "$HERE/targets.sh"

BUILD=${build:-$ROOT/build-bench}
OUT=${out:-$ROOT/bench-results/growth-$(date +%Y%m%d-%H%M%S)}
RAW=$OUT/raw
mkdir -p "$RAW/logs" || die "cannot create $OUT"
WORK=$(mktemp -d /tmp/rmemfs-growth.XXXXXX)
MNT=$WORK/mnt
mkdir -p "$MNT"
: >"$WORK/pids"
FS_PID="" POOL="" MOUNT_S=""
# a 9 GiB pool can take the memserver more than targets.sh's default 30 s to set up on a
# loaded machine
MS_READY_TENTHS=1800

# the client is growth.py mount's child, not ours: stop it only while it is still the rmemfs
# of our mount point (a pid that exited may have been reused)
client_is_ours() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF " $MNT "; }

cleanup()
{
	if mountpoint -q "$MNT"; then
		fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	[ -n "$FS_PID" ] && client_is_ours "$FS_PID" && stop_pid "$FS_PID" 300
	memserver_stop
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ $no_build = 0 ]; then
	build_tree memserver/memserver fuse-client/rmemfs fuse-client/rmemfs-fsck
fi
MEMSERVER=$BUILD/memserver/memserver RMEMFS=$BUILD/fuse-client/rmemfs
FSCK=$BUILD/fuse-client/rmemfs-fsck
for b in "$MEMSERVER" "$RMEMFS" "$FSCK"; do [ -x "$b" ] || die "$b is not built"; done
mkdir -p "$BUILD/bench"
META_BIN=$BUILD/bench/metabench
meta_cmd=(gcc -O2 -Wall -Wextra -I "$ROOT/common" -o "$META_BIN" "$HERE/metabench.c")
if [ ! -x "$META_BIN" ] || [ "$HERE/metabench.c" -nt "$META_BIN" ]; then
	"${meta_cmd[@]}" || die "building metabench failed"
fi
record_cmd all "build metabench" "${meta_cmd[@]}"
BUILDTYPE=$(meson introspect --buildoptions "$BUILD" 2>/dev/null | "$PY" -c '
import json, sys
print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"), "unknown"))
' 2>/dev/null) || BUILDTYPE=unknown

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.4f", b - a }'; }
# put KEY VALUE: one figure of the current set
put() { printf '%s\t%s\n' "$1" "$2" >>"$RAW/$SET.tsv"; echo "  $1 $2"; }

# client_mount WHAT [FIRST]: rmemfs -f on $MNT (FIRST=1: -o format); sets FS_PID and
# MOUNT_S, the seconds it took
client_mount()
{
	local opts="token_file=$WORK/token"
	[ "${2:-}" = 1 ] && opts="$opts,format"
	local cmd=(env "G_MESSAGES_DEBUG=rmemfs rmemfs-meta" "$RMEMFS" "127.0.0.1:$MS_PORT" "$MNT"
		-f -o "$opts")
	record_cmd "$SET" "$1" "${cmd[@]}"
	rm -f "$WORK/client.pid"
	MOUNT_S=$("$PY" "$REPORT" mount "$MNT" "$WORK/client.pid" "$RAW/logs/$SET.client.log" \
		"${cmd[@]}")
	local rc=$?
	FS_PID=$(cat "$WORK/client.pid" 2>/dev/null)
	[ $rc = 0 ] || { tail -20 "$RAW/logs/$SET.client.log" >&2; return 1; }
}

# client_unmount: unmount and wait (up to 300 s: the client writes a checkpoint) for it to exit
client_unmount()
{
	fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT" ||
		{ echo "growth: unmounting $MNT failed" >&2; return 1; }
	wait_gone "$FS_PID" 3000 || { echo "growth: the client did not exit" >&2; return 1; }
	FS_PID=""
}

rss() { "$PY" "$REPORT" rss "$FS_PID"; }

# put_stages PREFIX: the stage times of the last mount (its debug lines "mount stages: ..."
# and "load of N inodes: ...") as PREFIX_fs_s (loading the filesystem: superblock, lease,
# checkpoint, journal, check, go live), PREFIX_cache_s, PREFIX_ckpt_s (checkpoint and
# journal), PREFIX_derive_s and PREFIX_check_s
put_stages()
{
	local log=$RAW/logs/$SET.client.log line
	line=$(grep 'mount stages:' "$log" | tail -1)
	[[ $line =~ filesystem\ ([0-9.]+)\ s,\ cache\ ([0-9.]+) ]] || return 0
	put "$1_fs_s" "${BASH_REMATCH[1]}"
	put "$1_cache_s" "${BASH_REMATCH[2]}"
	line=$(grep 'load of [0-9]* inodes:' "$log" | tail -1)
	[[ $line =~ journal\ ([0-9.]+)\ s.*allocator\ ([0-9.]+)\ s,\ check\ ([0-9.]+) ]] || return 0
	put "$1_ckpt_s" "${BASH_REMATCH[1]}"
	put "$1_derive_s" "${BASH_REMATCH[2]}"
	put "$1_check_s" "${BASH_REMATCH[3]}"
}

# set_kind SET: "files N" or "data BYTES"
set_kind()
{
	local s=${1,,}
	[[ $s =~ ^([0-9]+)([kmg]?)$ ]] || die "--sets: '$1' is not a set (e.g. 10k, 1m, 8g)"
	case ${BASH_REMATCH[2]} in
	"") echo "files ${BASH_REMATCH[1]}" ;;
	k) echo "files $((BASH_REMATCH[1] * 1000))" ;;
	m) echo "files $((BASH_REMATCH[1] * 1000000))" ;;
	g) echo "data $((BASH_REMATCH[1] << 30))" ;;
	esac
}

# populate_files N: N files over DIRS directories d00..d99, metabench create in each
populate_files()
{
	local n=$1 i per
	per=$((n / DIRS))
	for i in $(seq -f '%02g' 0 $((DIRS - 1))); do
		mkdir "$MNT/d$i" || return 1
		"$META_BIN" "$MNT/d$i" create -n "$per" -s "$FILE_SIZE" >>"$RAW/$SET.create.jsonl" ||
			{ echo "growth: metabench create in d$i failed" >&2; return 1; }
	done
}

# populate_data BYTES: 1 GiB files g00.. in data/
populate_data()
{
	local n=$(($1 >> 30)) i
	mkdir "$MNT/data" || return 1
	for i in $(seq -f '%02g' 0 $((n - 1))); do
		dd if=/dev/zero of="$MNT/data/g$i" bs=1M count=1024 conv=fsync status=none ||
			{ echo "growth: writing data/g$i failed" >&2; return 1; }
	done
}

# stat_files N: metabench stat of every file, per directory; total seconds, p50 and p99 into
# the set's figures (p50/p99: the median over the directories) and stat_dir_med_us, the
# median over the directories of their time per file (a stall of the shared machine in one
# directory moves the total, not that)
stat_files()
{
	local n=$1 i per
	per=$((n / DIRS))
	: >"$RAW/$SET.stat.jsonl"
	for i in $(seq -f '%02g' 0 $((DIRS - 1))); do
		"$META_BIN" "$MNT/d$i" stat -n "$per" >>"$RAW/$SET.stat.jsonl" ||
			{ echo "growth: metabench stat in d$i failed" >&2; return 1; }
	done
	"$PY" - "$RAW/$SET.stat.jsonl" <<'EOF' | while read -r k v; do put "$k" "$v"; done
import json, statistics, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print('stat_s %.4f' % sum(r['elapsed_s'] for r in rs))
print('stat_p50_us %.2f' % statistics.median(r['lat_p50_us'] for r in rs))
print('stat_p99_us %.2f' % statistics.median(r['lat_p99_us'] for r in rs))
print('stat_dir_med_us %.2f' % statistics.median(r['elapsed_s'] * 1e6 / r['ops'] for r in rs))
EOF
}

# run_set SET
run_set()
{
	local kind amount pool_mib t rc
	read -r kind amount <<<"$(set_kind "$SET")" || return 1
	: >"$RAW/$SET.tsv"
	put kind "$kind"
	put dirs "$([ "$kind" = files ] && echo "$DIRS" || echo 1)"
	if [ "$kind" = files ]; then
		[ $((amount % DIRS)) = 0 ] || die "$SET: the file count must divide by $DIRS"
		local blocks=$(((FILE_SIZE + 4095) / 4096))
		local per=$((blocks * 4096 * 6 / 5))
		[ "$per" -ge 4096 ] || per=4096
		pool_mib=$(((amount * per >> 20) + 256))
		put files "$amount"
		put file_bytes "$FILE_SIZE"
		put data_bytes $((amount * FILE_SIZE))
	else
		pool_mib=$(((amount >> 20) * 11 / 10 + 256))
		put files $((amount >> 30))
		put file_bytes $((1 << 30))
		put data_bytes "$amount"
	fi
	POOL=${pool_mib}M
	put pool "$POOL"
	memserver_start "$SET" 127.0.0.1 tcp || return 1

	echo "  populating"
	client_mount "mount (first: formats the fresh pool)" 1 || return 1
	client_unmount || return 1
	drop_caches
	client_mount "mount (cold, the empty filesystem; then populate)" || return 1
	put mount_empty_s "$MOUNT_S"
	put_stages mount_empty
	put rss_empty_kib "$(rss)"
	t=$(now)
	if [ "$kind" = files ]; then populate_files "$amount"; else populate_data "$amount"; fi ||
		return 1
	sync -f "$MNT"
	put populate_s "$(since "$t")"
	t=$(now)
	client_unmount || return 1
	put unmount_s "$(since "$t")"

	local fsck_cmd=("$FSCK" -o "token_file=$WORK/token" "127.0.0.1:$MS_PORT")
	record_cmd "$SET" fsck "${fsck_cmd[@]}"
	drop_caches
	t=$(now)
	/usr/bin/time -f '%M' -o "$WORK/fsck.time" "${fsck_cmd[@]}" >"$RAW/logs/$SET.fsck.log" 2>&1
	rc=$?
	put fsck_s "$(since "$t")"
	put fsck_rc "$rc"
	put fsck_maxrss_kib "$(tail -1 "$WORK/fsck.time")"

	drop_caches
	client_mount "mount (cold, then ls -R)" || return 1
	put mount_s "$MOUNT_S"
	put_stages mount
	put rss_mount_kib "$(rss)"
	record_cmd "$SET" "ls -R" ls -R "$MNT"
	t=$(now)
	ls -R "$MNT" >/dev/null || return 1
	put ls_s "$(since "$t")"
	put rss_ls_kib "$(rss)"
	client_unmount || return 1

	drop_caches
	client_mount "mount (cold, then stat)" || return 1
	put mount2_s "$MOUNT_S"
	if [ "$kind" = files ]; then
		record_cmd "$SET" stat "$META_BIN" "$MNT/dNN" stat -n $((amount / DIRS))
		stat_files "$amount" || return 1
	else
		t=$(now)
		stat "$MNT"/data/* >/dev/null || return 1
		put stat_s "$(since "$t")"
	fi
	put rss_stat_kib "$(rss)"
	client_unmount || return 1
	memserver_stop
}

{
	printf 'sets\t%s\nfile_bytes\t%s\ndirs\t%s\ndata_file\t1 GiB\n' "$SETS" "$FILE_SIZE" "$DIRS"
	printf 'machine\t%s, %s CPUs, %s GiB RAM\n' "$(uname -r)" "$(nproc)" \
		"$(awk '/^MemTotal:/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)"
	printf 'commit\t%s\nbuildtype\t%s\ndate\t%s\n' \
		"$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" "$BUILDTYPE" \
		"$(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$RAW/config.tsv"
IFS=, read -r -a set_list <<<"$SETS"
for SET in "${set_list[@]}"; do set_kind "$SET" >/dev/null || exit 1; done
for SET in "${set_list[@]}"; do
	echo "set $SET"
	run_set || die "set $SET failed (logs in $RAW/logs)"
done
report "$OUT"
