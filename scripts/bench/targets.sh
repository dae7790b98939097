# shellcheck shell=bash
# targets.sh - the filesystems scripts/bench.sh measures: how each one is started, mounted,
# made cold, and torn down. Sourced by bench.sh (it uses bench.sh's globals: WORK, RAW, BUILD,
# TMPFS_DIR, POOL, ...); not run on its own. scripts/farmem.sh sources it too, for the
# bookkeeping helpers, the rmemfs/memserver functions and passthrough_ll_mount. Only
# definitions: sourcing it early is safe. It sources scripts/lib/proc.sh for waiting on
# processes.
#
# Targets (one set of functions each, dispatched by target_* below):
#   rmemfs-tcp      memserver on 127.0.0.1 (ephemeral port, random token), rmemfs mounted with
#                   its default options (-o token_file only; -o format on the first mount)
#   rmemfs-readers  the rmemfs-tcp setup plus READERS (2) `-o ro` mounts of the same pool, each
#                   with a follow loop (bench/follow.py); mounted by readers_mount after the
#                   writer's first mount, and left mounted through the writer's cold steps
#   rmemfs-rdma     the same with -o transport=rdma, memserver on the RDMA device's address;
#                   only where a verbs device exists
#   tmpfs           a directory of bench.sh's private tmpfs mount (the local limit)
#   passthrough_ll  libfuse's example, built from Debian's libfuse3-dev source, over a tmpfs
#                   directory, with its default caching mode (-o source=DIR only)
#   sshfs           sshfs to root@127.0.0.1 over a tmpfs directory, through a private sshd
#                   (own host key and config, 127.0.0.1 only, key-only auth)
#
# Every daemon runs in the foreground as bench.sh's child; its pid is written to $WORK/pids
# (cleanup kills them) and, for those whose memory is reported, to $WORK/track (the memory
# sampler reads it). Every command line run goes to the results through record_cmd.

# shellcheck source=../lib/proc.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/proc.sh"

# ---- bookkeeping ----

# shquote ARG...: the arguments as one shell command line (quoted only where needed)
shquote()
{
	local a out=""
	for a in "$@"; do
		if [[ $a =~ ^[A-Za-z0-9_./=:,@%+-]+$ ]]; then
			out+="$a "
		else
			out+="'${a//\'/\'\\\'\'}' "
		fi
	done
	printf '%s' "${out% }"
}

# to_mib SIZE: "1G" -> 1024 (K/M/G/T, binary; whole MiB, rounded up)
to_mib()
{
	local s=${1^^} n u
	[[ $s =~ ^([0-9]+)([KMGT]?)(I?B)?$ ]] || die "'$1' is not a size (e.g. 512M, 1G)"
	n=${BASH_REMATCH[1]} u=${BASH_REMATCH[2]}
	case $u in
	"") echo $(((n + 1048575) / 1048576)) ;;
	K) echo $(((n + 1023) / 1024)) ;;
	M) echo "$n" ;;
	G) echo $((n * 1024)) ;;
	T) echo $((n * 1048576)) ;;
	esac
}
# build_tree [NINJA_TARGET...]: meson setup of $BUILD (release, no tests) when it has none,
# then ninja (every target when none is named); logs in $RAW/logs, dies on failure
build_tree()
{
	if [ ! -f "$BUILD/meson-private/coredata.dat" ]; then
		meson setup "$BUILD" "$ROOT" --buildtype=release -Dtests=false \
			>"$RAW/logs/meson-setup.log" 2>&1 ||
			{ cat "$RAW/logs/meson-setup.log"; die "meson setup $BUILD failed"; }
	fi
	ninja -C "$BUILD" "$@" >"$RAW/logs/ninja.log" 2>&1 ||
		{ tail -40 "$RAW/logs/ninja.log"; die "ninja -C $BUILD failed"; }
}

# record_cmd TARGET WHAT CMD...: append the exact command line to the results
record_cmd()
{
	local target=$1 what=$2
	shift 2
	printf '%s\t%s\t%s\n' "$target" "$what" "$(shquote "$@")" >>"$RAW/commands.tsv"
}

# run CMD...: run CMD and wait for it with the `wait` builtin. bash defers a trap while a
# foreground child runs, and skips the INT trap altogether when that child catches SIGINT and
# exits normally (fio does); `wait` returns at once on a trapped signal, so Ctrl-C and TERM
# reach cleanup, which stops the child (a `timeout` passes the signal on to its command)
run()
{
	"$@" &
	local pid=$!
	echo "$pid" >>"$WORK/pids"
	wait "$pid"
}

# ours PID: PID is alive and a child of this script (a pid in $WORK/pids may have exited and
# been reused by an unrelated process: never signal those)
ours() { [ "$(ps -o ppid= -p "$1" 2>/dev/null | tr -d ' ')" = "$$" ]; }

# track ROLE PID: sample this process's memory from now on
track() { echo "$1 $2" >>"$WORK/track"; echo "$2" >>"$WORK/pids"; }

# mem_sample_now: one sample of every tracked process (before it exits)
mem_sample_now()
{
	local role pid hwm rss
	[ -f "$WORK/track" ] || return 0
	while read -r role pid; do
		[ -r "/proc/$pid/status" ] || continue
		hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
		rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null)
		[ -n "$hwm" ] && echo "$(date +%s.%N) $role $pid $hwm $rss" >>"$RAW/memory.log"
	done <"$WORK/track"
	return 0
}

# mem_sampler: background loop, a sample every 0.5 s until $WORK/sampler.stop exists
mem_sampler()
{
	while [ ! -e "$WORK/sampler.stop" ]; do
		mem_sample_now
		sleep 0.5
	done
}

# wait_mounted MNT PID LOG: until MNT is a mount point (30 s), or fail if PID exits
wait_mounted()
{
	local mnt=$1 pid=$2 log=$3
	wait_mount "$mnt" "$pid" 300 && return 0
	if kill -0 "$pid" 2>/dev/null; then
		echo "bench: $mnt not mounted after 30 s" >&2
	else
		echo "bench: the daemon for $mnt exited before mounting:" >&2
	fi
	tail -20 "$log" >&2
	return 1
}

# fuse_unmount MNT PID: unmount and wait (up to 120 s: rmemfs flushes and checkpoints) for
# the daemon to exit; lazy unmount and SIGKILL if it does not
# fuse_daemon_mount TARGET ROLE LOG WHAT PIDVAR CMD...: start the FUSE daemon CMD on $MNT in
# the background, logged to LOG, recorded (as WHAT) and tracked as TARGET:ROLE; its pid goes
# into the variable PIDVAR
fuse_daemon_mount()
{
	local target=$1 role=$2 log=$3 what=$4 pidvar=$5 pid
	shift 5
	record_cmd "$target" "$what" "$@"
	"$@" >>"$log" 2>&1 &
	pid=$!
	printf -v "$pidvar" '%s' "$pid"
	echo "$pid" >>"$WORK/pids"
	wait_mounted "$MNT" "$pid" "$log" || return 1
	track "$target:$role" "$pid"
}

# fuse_daemon_unmount PIDVAR: fuse_unmount $MNT and the daemon whose pid PIDVAR holds; empties it
fuse_daemon_unmount()
{
	local rc
	fuse_unmount "$MNT" "${!1}"
	rc=$?
	printf -v "$1" '%s' ""
	return $rc
}

fuse_unmount()
{
	local mnt=$1 pid=$2
	mem_sample_now
	if mountpoint -q "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null ||
			fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	[ -n "$pid" ] || return 0
	if ! wait_gone "$pid" 1200; then
		echo "bench: daemon $pid still running 120 s after unmounting $mnt; killing it" >&2
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		return 1
	fi
	wait "$pid" 2>/dev/null
	return 0
}

# drop_caches: write back and drop the kernel's page, dentry and inode caches (all of the
# host's, not only the target's: the only way for tmpfs-backed FUSE and sshfs)
drop_caches()
{
	sync
	echo 3 >/proc/sys/vm/drop_caches
}

# ---- rmemfs (rmemfs-tcp, rmemfs-uring, rmemfs-readers, rmemfs-rdma) ----

MS_PID="" MS_PORT="" MS_ADDR="" FS_PID="" RMEMFS_SOURCE=""

# memserver_start TARGET LISTEN TRANSPORT: MS_EXTRA (an array, may be unset) holds more options;
# it waits MS_READY_TENTHS (default 300) tenths of a second for the ready line
memserver_start()
{
	local target=$1 listen=$2 transport=$3
	[ -f "$WORK/token" ] || { head -c 32 /dev/urandom | base64 >"$WORK/token"; chmod 600 "$WORK/token"; }
	local cmd=("$BUILD/memserver/memserver" --size "$POOL" --listen "$listen" --port 0
		--transport "$transport" --token-file "$WORK/token" ${MS_EXTRA[@]+"${MS_EXTRA[@]}"})
	record_cmd "$target" memserver "${cmd[@]}"
	"${cmd[@]}" >"$RAW/logs/$target.memserver.out" 2>"$RAW/logs/$target.memserver.err" &
	MS_PID=$!
	echo "$MS_PID" >>"$WORK/pids"
	if ! MS_PORT=$(ready_port "$RAW/logs/$target.memserver.out" "$MS_PID" "${MS_READY_TENTHS:-300}"); then
		echo "bench: the memserver did not start:" >&2
		cat "$RAW/logs/$target.memserver.out" "$RAW/logs/$target.memserver.err" >&2
		return 1
	fi
	MS_ADDR=$listen
	track "$target:memserver" "$MS_PID"
	echo "  $(cat "$RAW/logs/$target.memserver.out")"
}

memserver_stop()
{
	[ -n "$MS_PID" ] || return 0
	mem_sample_now
	stop_pid "$MS_PID" 100
	MS_PID=""
}

# rmemfs_transport TARGET: tcp or rdma
rmemfs_transport() { case $1 in rmemfs-rdma) echo rdma ;; *) echo tcp ;; esac; }

# rmemfs_mount_opts TARGET [FIRST]: the -o options of TARGET's (read-write) mount; FIRST=1:
# of the first one, which formats the fresh pool
rmemfs_mount_opts()
{
	local opts="token_file=$WORK/token"
	[ "$1" = rmemfs-rdma ] && opts="$opts,transport=rdma"
	# the channel pair: rmemfs-tcp on /dev/fuse, rmemfs-uring on the FUSE ring (both TCP)
	[ "$1" = rmemfs-tcp ] && opts="$opts,uring=off"
	[ "$1" = rmemfs-uring ] && opts="$opts,uring=on"
	[ -n "$RMEMFS_OPTS" ] && opts="$opts,$RMEMFS_OPTS"
	[ "${2:-}" = 1 ] && opts="$opts,format"
	echo "$opts"
}

# rmemfs_mount TARGET [FIRST]: the memserver just started, or RMEMFS_SOURCE (a member set)
rmemfs_mount()
{
	local target=$1 first=$2
	mkdir -p "$MNT"
	local cmd=("$BUILD/fuse-client/rmemfs" "${RMEMFS_SOURCE:-$MS_ADDR:$MS_PORT}" "$MNT" -f -o
		"$(rmemfs_mount_opts "$target" "$first")")
	fuse_daemon_mount "$target" client "$RAW/logs/$target.client.log" \
		"mount${first:+ (first: formats the fresh pool)}" FS_PID "${cmd[@]}"
}

# rmemfs_save_stats MNT LOG: append the xattrs of MNT's root (where rmemfs publishes its cache
# and reader statistics) to LOG
rmemfs_save_stats()
{
	/usr/bin/python3 - "$1" >>"$2" 2>/dev/null <<'EOF' || true
import os, sys, time
# (the stats are not listed: listxattr leaves them out, so that copying the root does not copy them)
names = ['user.rmemfs.stats'] + [n for n in os.listxattr(sys.argv[1]) if n != 'user.rmemfs.stats']
print('# %s' % time.strftime('%H:%M:%S'))
for n in names:
    try:
        print('%s=%s' % (n, os.getxattr(sys.argv[1], n).decode(errors='replace').strip()))
    except OSError as e:
        print('%s: %s' % (n, e))
EOF
}

rmemfs_unmount()
{
	rmemfs_save_stats "$MNT" "$RAW/logs/$1.stats"
	fuse_daemon_unmount FS_PID
}

URING_PARAM=/sys/module/fuse/parameters/enable_uring URING_OLD=""

rmemfs_start()
{
	local target=$1 listen=127.0.0.1 transport=tcp
	if [ "$target" = rmemfs-uring ]; then
		[ -w "$URING_PARAM" ] || {
			echo "bench: no writable $URING_PARAM: this kernel has no FUSE ring" >&2
			return 1
		}
		URING_OLD=$(cat "$URING_PARAM")
		echo Y >"$URING_PARAM"
	fi
	if [ "$target" = rmemfs-rdma ]; then
		listen=$RDMA_ADDR
		transport=rdma
	fi
	memserver_start "$target" "$listen" "$transport"
}

# the readers too, when a target broke off before run_target unmounted them
rmemfs_stop()
{
	readers_unmount "$1"
	memserver_stop
	if [ -n "$URING_OLD" ]; then
		echo "$URING_OLD" >"$URING_PARAM"
		URING_OLD=""
	fi
}

# ---- rmemfs-readers: the readers beside the writer ----

READERS=2
READER_PIDS=() READER_MNTS=() READER_LOOP_PIDS=()
FOLLOW_PY=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/follow.py

# rmemfs_reader_opts: the -o options of a reader: the writer's (rmemfs-tcp, without format),
# ro, and --reader-opts (READER_OPTS: e.g. refresh=SECS; none by default)
rmemfs_reader_opts()
{
	local opts
	opts="$(rmemfs_mount_opts rmemfs-tcp),ro"
	[ -n "${READER_OPTS:-}" ] && opts="$opts,$READER_OPTS"
	echo "$opts"
}

# readers_mount TARGET: mount READERS readers of the pool on $WORK/mnt/TARGET.readerN (the
# writer formatted it already) and start one follow loop on each (follow.py loop, its lines
# in raw/logs/TARGET.readerN.follow); 0, or 1 when a reader did not mount
readers_mount()
{
	local target=$1 i reader_pid rc MNT
	for i in $(seq "$READERS"); do
		MNT=$WORK/mnt/$target.reader$i	# (local: fuse_daemon_mount mounts $MNT)
		mkdir -p "$MNT"
		local cmd=("$BUILD/fuse-client/rmemfs" "$MS_ADDR:$MS_PORT" "$MNT" -f -o
			"$(rmemfs_reader_opts)")
		fuse_daemon_mount "$target" "reader$i" "$RAW/logs/$target.reader$i.log" \
			"mount reader$i" reader_pid "${cmd[@]}"
		rc=$?
		READER_PIDS+=("$reader_pid") READER_MNTS+=("$MNT")
		[ $rc = 0 ] || return 1
		cmd=(/usr/bin/python3 "$FOLLOW_PY" loop "$MNT" "$RAW/logs/$target.reader$i.follow"
			"$FILES")
		record_cmd "$target" "follow loop reader$i" "${cmd[@]}"
		"${cmd[@]}" 2>>"$RAW/logs/$target.reader$i.log" &
		READER_LOOP_PIDS+=("$!")
		echo "$!" >>"$WORK/pids"
	done
	echo "  $READERS readers mounted (-o ...,$(rmemfs_reader_opts | cut -d, -f2-)): each lists" \
		"bench/ and stats a few files every 0.5 s"
}

# readers_stop_loops: stop the follow loops (cleanup calls it before unmounting anything)
readers_stop_loops()
{
	local pid
	for pid in "${READER_LOOP_PIDS[@]}"; do
		ours "$pid" && stop_pid "$pid" 20
	done
	READER_LOOP_PIDS=()
}

# readers_unmount TARGET: stop the loops, note what each reader saw, save its statistics,
# unmount it and wait for its daemon; 0, or 1 when a daemon had to be killed
readers_unmount()
{
	local target=$1 i name rc=0
	readers_stop_loops
	for i in "${!READER_PIDS[@]}"; do
		name=reader$((i + 1))
		note "$target" all "$name: $(/usr/bin/python3 "$FOLLOW_PY" summary \
			"$RAW/logs/$target.$name.follow")"
		rmemfs_save_stats "${READER_MNTS[$i]}" "$RAW/logs/$target.$name.stats"
		fuse_unmount "${READER_MNTS[$i]}" "${READER_PIDS[$i]}" || rc=1
	done
	READER_PIDS=() READER_MNTS=()
	return $rc
}

# ---- tmpfs ----

tmpfs_start() { mkdir -p "$TMPFS_DIR/tmpfs"; }
tmpfs_mount() { MNT=$TMPFS_DIR/tmpfs; }
tmpfs_unmount() { :; }
tmpfs_stop() { rm -rf "$TMPFS_DIR/tmpfs"; }

# ---- passthrough_ll ----

# PT_BIN (scripts/lib/passthrough_ll.sh builds it); the directory it serves and its
# RLIMIT_NOFILE, set by passthrough_ll_start (farmem.sh sets them itself); the daemon's pid
PT_SOURCE="" PT_NOFILE="" PT_PID=""

# passthrough_ll holds an O_PATH fd for every inode the kernel knows. The metadata job drops
# the kernel's dentries and inodes every META_DROP_EVERY files (bench.sh), so it needs a few
# more than that; raise the limit to the files where the host lets us, and say what it got
passthrough_ll_start()
{
	local target=$1 want=$((FILES + 4096)) need=$((META_DROP_EVERY + 4096)) hard
	PT_SOURCE=$TMPFS_DIR/passthrough_ll
	mkdir -p "$PT_SOURCE"
	hard=$(ulimit -Hn)
	if [ "$hard" = unlimited ] || [ "$hard" -ge "$want" ] || (ulimit -n "$want") 2>/dev/null; then
		PT_NOFILE=$want
	elif [ "$hard" -ge "$need" ]; then
		PT_NOFILE=$hard
		echo "  passthrough_ll: RLIMIT_NOFILE $hard (hard limit) < $FILES files; enough with" \
			"the metadata job's drop of the kernel's inodes every $META_DROP_EVERY files"
	else
		PT_NOFILE=$hard
		note "$target" all "RLIMIT_NOFILE hard limit $hard < $need: passthrough_ll keeps one fd per inode the kernel knows, so its meta-* jobs may stop early and their rates cover the files done"
	fi
}

# passthrough_ll_mount TARGET: the daemon PT_BIN on $MNT over the directory PT_SOURCE, with
# its default caching (-o source only) and RLIMIT_NOFILE PT_NOFILE; its pid in PT_PID
passthrough_ll_mount()
{
	local target=$1
	mkdir -p "$MNT"
	local cmd=(prlimit "--nofile=$PT_NOFILE" "$PT_BIN" -f -o "source=$PT_SOURCE" "$MNT")
	fuse_daemon_mount "$target" daemon "$RAW/logs/$target.log" mount PT_PID "${cmd[@]}"
}

passthrough_ll_unmount()
{
	fuse_daemon_unmount PT_PID
}

passthrough_ll_stop() { rm -rf "$TMPFS_DIR/passthrough_ll"; }

# ---- sshfs over a private sshd ----

SSHD_PID="" SSHD_PORT="" SSHFS_PID=""
SSHFS_OPTS="Ciphers=aes128-gcm@openssh.com,Compression=no"

# a free TCP port on 127.0.0.1 (the kernel's pick; sshd binds it right after)
free_port()
{
	/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

sshfs_start()
{
	local target=$1 d=$WORK/ssh
	mkdir -p "$TMPFS_DIR/sshfs" "$d"
	chmod 700 "$d"
	ssh-keygen -q -t ed25519 -N '' -C rmemfs-bench-host -f "$d/host_ed25519" </dev/null
	ssh-keygen -q -t ed25519 -N '' -C rmemfs-bench-client -f "$d/id_ed25519" </dev/null
	cp "$d/id_ed25519.pub" "$d/authorized_keys"
	chmod 600 "$d/authorized_keys"
	# the privilege separation directory Debian's sshd expects (its init script makes it)
	[ -d /run/sshd ] || { mkdir -p /run/sshd && chmod 755 /run/sshd; }
	local sftp=/usr/lib/openssh/sftp-server
	[ -x "$sftp" ] || sftp=internal-sftp
	for attempt in 1 2 3; do
		SSHD_PORT=$(free_port)
		cat >"$d/sshd_config" <<EOF
# private sshd of scripts/bench.sh: loopback only, key-only, root only, gone after the run
ListenAddress 127.0.0.1
Port $SSHD_PORT
HostKey $d/host_ed25519
PidFile none
AuthorizedKeysFile $d/authorized_keys
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers root
UsePAM no
StrictModes no
X11Forwarding no
AllowTcpForwarding no
PrintMotd no
LogLevel ERROR
Subsystem sftp $sftp
EOF
		local cmd=(/usr/sbin/sshd -D -e -f "$d/sshd_config")
		"${cmd[@]}" >>"$RAW/logs/$target.sshd.log" 2>&1 &
		SSHD_PID=$!
		echo "$SSHD_PID" >>"$WORK/pids"
		for _ in $(seq 50); do
			kill -0 "$SSHD_PID" 2>/dev/null || break
			if (exec 3<>"/dev/tcp/127.0.0.1/$SSHD_PORT") 2>/dev/null; then
				record_cmd "$target" sshd "${cmd[@]}"
				cp "$d/sshd_config" "$RAW/logs/sshd_config"
				return 0
			fi
			sleep 0.1
		done
		kill -TERM "$SSHD_PID" 2>/dev/null
		wait "$SSHD_PID" 2>/dev/null
		SSHD_PID=""
		echo "bench: sshd did not come up on port $SSHD_PORT (attempt $attempt)" >&2
	done
	tail -5 "$RAW/logs/$target.sshd.log" >&2
	return 1
}

sshfs_mount()
{
	local target=$1 d=$WORK/ssh
	mkdir -p "$MNT"
	local cmd=(sshfs -f "root@127.0.0.1:$TMPFS_DIR/sshfs" "$MNT" -p "$SSHD_PORT"
		-o "IdentityFile=$d/id_ed25519,IdentitiesOnly=yes,BatchMode=yes"
		-o "UserKnownHostsFile=/dev/null,StrictHostKeyChecking=no,LogLevel=ERROR"
		-o "$SSHFS_OPTS")
	fuse_daemon_mount "$target" client "$RAW/logs/$target.log" mount SSHFS_PID "${cmd[@]}"
}

sshfs_unmount()
{
	fuse_daemon_unmount SSHFS_PID
}

sshfs_stop()
{
	if [ -n "$SSHD_PID" ]; then
		kill -TERM "$SSHD_PID" 2>/dev/null
		wait "$SSHD_PID" 2>/dev/null
		SSHD_PID=""
	fi
	rm -rf "$TMPFS_DIR/sshfs" "$WORK/ssh"
}

# ---- dispatch ----

# the function prefix of a target
target_fn() { case $1 in rmemfs-*) echo rmemfs ;; *) echo "$1" ;; esac; }

target_start() { "$(target_fn "$1")_start" "$1"; }
target_stop() { "$(target_fn "$1")_stop" "$1"; }
# target_mount TARGET [FIRST]: sets MNT to where the jobs run
target_mount()
{
	MNT=$WORK/mnt/$1
	"$(target_fn "$1")_mount" "$1" "${2:-}"
}
target_unmount() { "$(target_fn "$1")_unmount" "$1"; }

# target_cold TARGET: make the client side cold (see cold_meaning)
target_cold()
{
	case $1 in
	tmpfs) drop_caches ;;
	*)
		target_unmount "$1" || return 1
		drop_caches
		target_mount "$1"
		;;
	esac
}

# what "cold" means for a target, for the results
cold_meaning()
{
	case $1 in
	rmemfs-readers) echo "the writer as on rmemfs-tcp (unmount + mount from a new rmemfs process + drop_caches); the two readers stay mounted and follow the writer across its restart" ;;
	rmemfs-*) echo "unmount + mount from a new rmemfs process (its block cache and the kernel page cache of the mount start empty) + drop_caches; the data is in the memserver's RAM" ;;
	tmpfs) echo "no cold state: tmpfs pages are the data (drop_caches only); every read is a memory copy" ;;
	passthrough_ll) echo "unmount + mount (the FUSE page cache starts empty) + drop_caches; the backing tmpfs stays in RAM" ;;
	sshfs) echo "unmount + mount (sshfs's and the kernel's caches start empty) + drop_caches; the backing tmpfs stays in RAM" ;;
	esac
}
