#!/bin/bash
# crashmount.sh - what a client crash in the middle of in-place writes costs the next mount
# (issue 38: the recovery of the data checksums).
#
# usage: scripts/bench/crashmount.sh BUILD_DIR [RUNS] [FILE_MIB] [WRITE_S]   (as root)
#
# Each run: a memserver on 127.0.0.1 (a pool of FILE_MIB + 512 MiB), rmemfs from BUILD_DIR
# formats it, a FILE_MIB file is written and fsync'd, fio rewrites it with 4 KiB O_DIRECT
# random writes for WRITE_S seconds (defaults 3 runs, 256 MiB, 6 s), and the client is
# SIGKILLed while fio runs. The next mount (G_MESSAGES_DEBUG on) takes the lease over and
# recovers; the figure is the time from its "recovering after an unclean shutdown" line to
# its "mounted" line: the checks, the recovery of the checksums (format 2: recomputing every
# written block of the hot regions; format 3: settling the blocks written in place since
# their regions were last swept) and the recovery checkpoint, without the lease takeover's
# wait. One line a run: seconds, and the recovery's own line. Cleans up on any exit.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/lib/proc.sh"
BUILD=$(cd "${1:?usage: crashmount.sh BUILD_DIR [RUNS] [FILE_MIB] [WRITE_S]}" && pwd)
RUNS=${2:-3} FILE_MIB=${3:-256} WRITE_S=${4:-6}
MEMSERVER=$BUILD/memserver/memserver RMEMFS=$BUILD/fuse-client/rmemfs
for b in "$MEMSERVER" "$RMEMFS"; do [ -x "$b" ] || { echo "crashmount: $b is not built" >&2; exit 1; }; done
command -v fio >/dev/null || { echo "crashmount: fio is missing (scripts/deps.sh bench)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/rmemfs-crashmount.XXXXXX)
MNT=$WORK/mnt MS_PID="" FS_PID="" FIO_PID=""
mkdir -p "$MNT"
cleanup()
{
	[ -n "$FIO_PID" ] && kill -KILL "$FIO_PID" 2>/dev/null
	umount -l "$MNT" 2>/dev/null
	[ -n "$FS_PID" ] && stop_pid "$FS_PID" 50
	[ -n "$MS_PID" ] && stop_pid "$MS_PID" 50
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
head -c 32 /dev/urandom | base64 >"$WORK/token"

# mount [FORMAT]: rmemfs -f in the background, log in $WORK/client.log; sets FS_PID
mount_fs()
{
	local opts="token_file=$WORK/token"
	[ "${1:-}" = 1 ] && opts="$opts,format"
	G_MESSAGES_DEBUG=rmemfs-meta "$RMEMFS" "127.0.0.1:$PORT" "$MNT" -f -o "$opts" \
		>"$WORK/client.log" 2>&1 &
	FS_PID=$!
	wait_mount "$MNT" "$FS_PID" 600 || { tail -5 "$WORK/client.log" >&2; return 1; }
}

# stamp REGEX: the seconds of the day of the first log line matching REGEX
stamp()
{
	grep -m1 -E "$1" "$WORK/client.log" |
		sed -n 's/.* \([0-9][0-9]\):\([0-9][0-9]\):\([0-9][0-9]\.[0-9]*\): .*/\1 \2 \3/p' |
		awk '{ printf "%.3f", $1 * 3600 + $2 * 60 + $3 }'
}

for run in $(seq "$RUNS"); do
	"$MEMSERVER" --listen 127.0.0.1 --port 0 --size "$((FILE_MIB + 512))M" \
		--token-file "$WORK/token" >"$WORK/ms.out" 2>&1 &
	MS_PID=$!
	PORT=$(ready_port "$WORK/ms.out" "$MS_PID" 100) || { cat "$WORK/ms.out" >&2; exit 1; }
	mount_fs 1 || exit 1
	dd if=/dev/urandom of="$MNT/f" bs=1M count="$FILE_MIB" conv=fsync status=none || exit 1
	fio --name=rw --filename="$MNT/f" --rw=randwrite --bs=4k --direct=1 --ioengine=psync \
		--size="${FILE_MIB}M" --time_based --runtime=$((WRITE_S + 30)) >/dev/null 2>&1 &
	FIO_PID=$!
	sleep "$WRITE_S"
	kill -KILL "$FS_PID"
	wait "$FS_PID" 2>/dev/null
	kill -KILL "$FIO_PID" 2>/dev/null
	wait "$FIO_PID" 2>/dev/null
	FIO_PID=""
	umount -l "$MNT" 2>/dev/null
	mount_fs || exit 1
	a=$(stamp 'recovering after an unclean shutdown') b=$(stamp ': mounted ')
	line=$(grep -m1 -E 'recomputed [0-9]+ checksums|while writing in place' "$WORK/client.log" |
		sed 's/^[^:]*: [0-9:.]*: //')
	awk -v a="$a" -v b="$b" -v r="$run" -v l="$line" \
		'BEGIN { printf "run %d: %.3f s from recovery to mounted; %s\n", r, b - a, l }'
	umount "$MNT" && wait_gone "$FS_PID" 600
	FS_PID=""
	stop_pid "$MS_PID" 50
	MS_PID=""
done
