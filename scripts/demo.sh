#!/bin/bash
# demo.sh - the main job, end to end on this machine: install what is missing, build, start a
# memserver on loopback and use it.
#
# usage: scripts/demo.sh          (as root on a fresh Debian 12; or as a user once the
#                                  packages are there)
#
#   1. scripts/deps.sh build demo, then builds build/ (configured if it is not yet)
#   2. memserver on 127.0.0.1, an ephemeral port, a 1 GiB pool (RMEMFS_DEMO_SIZE), a random
#      token in a 0600 file
#   3. rmem-perf against it: verified READ/WRITE over a size sweep and verified CAS/FETCH_ADD,
#      then bandwidth (1 MiB ops) and latency (64-byte ops), printed as tables
#   4. when the filesystem is built (build/fuse-client/rmemfs): mounts the pool, writes and
#      reads back files, runs a short fio job and prints its figures, unmounts, mounts again
#      from a new process and checks the files are still there, unmounts
#   5. stops the memserver. A trap unmounts (lazily) and kills what the demo started on any
#      exit. Exit status non-zero if any step fails.
# The transport is TCP here: this host has no RDMA device (scripts/test-rdma.sh runs the
# RDMA path in a soft-RoCE guest).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=lib/proc.sh
. "$ROOT/scripts/lib/proc.sh"
cd "$ROOT"
BUILD=$ROOT/build
POOL=${RMEMFS_DEMO_SIZE:-1G}
MEMSERVER=$BUILD/memserver/memserver
PERF=$BUILD/tools/rmem-perf
RMEMFS=$BUILD/fuse-client/rmemfs

step() { printf '\n==== %s\n' "$*"; }

WORK=$(mktemp -d /tmp/rmemfs-demo.XXXXXX)
MS_PID="" FS_PID="" MNT=$WORK/mnt
cleanup()
{
	set +e
	if [ -n "$FS_PID" ] || mountpoint -q "$MNT" 2>/dev/null; then
		fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	for pid in $FS_PID $MS_PID; do
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in $FS_PID $MS_PID; do
		wait_gone "$pid" 50 || kill -KILL "$pid" 2>/dev/null
	done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step "dependencies"
"$ROOT/scripts/deps.sh" build demo
echo "all present"

step "build ($BUILD)"
[ -f "$BUILD/meson-private/coredata.dat" ] || meson setup "$BUILD" >"$WORK/setup.log" ||
	{ cat "$WORK/setup.log"; exit 1; }
ninja -C "$BUILD"

step "memserver: a $POOL pool on 127.0.0.1"
head -c 32 /dev/urandom | base64 >"$WORK/token"
chmod 600 "$WORK/token"
"$MEMSERVER" --size "$POOL" --listen 127.0.0.1 --port 0 --token-file "$WORK/token" \
	>"$WORK/memserver.out" 2>"$WORK/memserver.err" &
MS_PID=$!
if ! PORT=$(ready_port "$WORK/memserver.out" "$MS_PID" 300); then
	echo "demo: the memserver did not start:" >&2
	cat "$WORK/memserver.out" "$WORK/memserver.err" >&2
	exit 1
fi
cat "$WORK/memserver.out"
SERVER=127.0.0.1:$PORT

perf() { "$PERF" "$SERVER" --transport tcp --token-file "$WORK/token" "$@"; }

step "rmem-perf: verified READ/WRITE, 64 B to 1 MiB"
perf --op read,write --sweep 64:1M --iters 200 --qd 8 --verify
step "rmem-perf: verified CAS and FETCH_ADD, 2 threads"
perf --op cas,fadd --iters 2000 --qd 4 --threads 2 --verify
step "rmem-perf: bandwidth, 1 MiB READ/WRITE, queue depth 8, 2 s each"
perf --op read,write --size 1M --qd 8 --duration 2
step "rmem-perf: latency, 64 B READ/WRITE, queue depth 1, 2 s each"
perf --op read,write --size 64 --qd 1 --duration 2

# fio_table JSON: one line per fio job: bandwidth, IOPS, completion latency percentiles
fio_table()
{
	/usr/bin/python3 - "$1" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
print('%-15s %10s %10s %12s %12s' % ('job', 'MiB/s', 'IOPS', 'p50 lat(us)', 'p99 lat(us)'))
for j in doc['jobs']:
	for d in ('read', 'write'):
		r = j[d]
		if r['io_bytes'] == 0:
			continue
		pct = r.get('clat_ns', {}).get('percentile', {})
		p50 = pct.get('50.000000', 0) / 1000.0
		p99 = pct.get('99.000000', 0) / 1000.0
		print('%-15s %10.1f %10.0f %12.1f %12.1f' %
		      (j['jobname'], r['bw_bytes'] / 1048576.0, r['iops'], p50, p99))
EOF
}

if [ -x "$RMEMFS" ]; then
	# mount_fs [OPTIONS]: start the client in the foreground (so the demo owns its pid) and
	# wait for the mount to appear
	mount_fs()
	{
		mkdir -p "$MNT"
		"$RMEMFS" "$SERVER" "$MNT" -f -o "token_file=$WORK/token${1:+,$1}" \
			>>"$WORK/rmemfs.log" 2>&1 &
		FS_PID=$!
		wait_mount "$MNT" "$FS_PID" 300 && return 0
		echo "demo: rmemfs did not mount:" >&2
		cat "$WORK/rmemfs.log" >&2
		exit 1
	}
	umount_fs()
	{
		fusermount3 -u "$MNT"
		if ! wait_gone "$FS_PID" 300; then
			echo "demo: rmemfs still running 30 s after the unmount" >&2
			exit 1
		fi
		wait "$FS_PID" || { echo "demo: rmemfs exited with an error:" >&2;
			cat "$WORK/rmemfs.log" >&2; exit 1; }
		FS_PID=""
	}

	# rmem-perf just wrote its patterns over the pool, so it holds no
	# filesystem and no longer reads as empty: -o format is needed (an
	# all-zero pool is formatted without it)
	step "rmemfs: format the pool (rmem-perf's patterns) and mount $SERVER on $MNT"
	mount_fs format
	df -h "$MNT"

	step "rmemfs: write and read back files"
	head -c 64M /dev/urandom >"$WORK/big.ref"
	cp "$WORK/big.ref" "$MNT/big"
	mkdir -p "$MNT/tree/a/b"
	for i in $(seq 200); do
		echo "file $i" >"$MNT/tree/a/b/f$i"
	done
	ln -s big "$MNT/big.link"
	sync
	cmp "$WORK/big.ref" "$MNT/big.link" || { echo "demo: big file differs" >&2; exit 1; }
	[ "$(cat "$MNT/tree/a/b/f117")" = "file 117" ] || { echo "demo: f117 differs" >&2; exit 1; }
	echo "64 MiB file written and read back identical; 200 small files; $(ls "$MNT/tree/a/b" |
		wc -l) entries listed"

	step "fio on the mount: sequential 1 MiB and random 4 KiB, 5 s each"
	fio --output-format=json --output="$WORK/fio.json" --filename="$MNT/fio.data" \
		--ioengine=psync --size=256M --time_based --runtime=5 \
		--name=seq-write-buf --rw=write --bs=1M --end_fsync=1 \
		--name=seq-read-dio --stonewall --rw=read --bs=1M --direct=1 \
		--name=rand-read-dio --stonewall --rw=randread --bs=4k --direct=1 \
		--name=rand-write-dio --stonewall --rw=randwrite --bs=4k --direct=1
	echo "(buf: through the page cache, fsync at the end; dio: O_DIRECT, no page cache)"
	fio_table "$WORK/fio.json"
	rm -f "$MNT/fio.data"

	step "rmemfs: unmount, mount again from a new process, check the files"
	umount_fs
	mount_fs
	cmp "$WORK/big.ref" "$MNT/big" || { echo "demo: big file differs after remount" >&2; exit 1; }
	[ "$(cat "$MNT/tree/a/b/f117")" = "file 117" ] ||
		{ echo "demo: f117 differs after remount" >&2; exit 1; }
	echo "the 64 MiB file and the tree are intact after the remount"
	umount_fs
	echo "unmounted"
else
	step "rmemfs: not built"
	echo "The filesystem ($RMEMFS) was not built (no libfuse3 at configure time); the demo stops at the"
	echo "transport benchmark above."
fi

step "stop the memserver"
kill -TERM "$MS_PID"
if wait "$MS_PID"; then
	echo "memserver stopped cleanly"
else
	echo "demo: the memserver exited with an error:" >&2
	cat "$WORK/memserver.err" >&2
	exit 1
fi
MS_PID=""
step "demo finished"
