#!/bin/bash
# test-systemd.sh - the memserver unit and an fstab mount under a real systemd, across a reboot.
#
# usage: scripts/test-systemd.sh [BUILDDIR]        (default: build/ under the repo)
#
# On the host: builds the Debian packages (scripts/package.sh, into BUILDDIR/systemd-test/debs;
# or takes them from $RMEMFS_SYSTEMD_DEBS), makes a small ext4 disk image, and boots a qemu
# guest (the kernel of scripts/rdma-vm.sh, TCG, no network device) whose init
# (scripts/systemd-vm/init) starts /lib/systemd/systemd on an overlay: the host's / over 9p,
# read-only, below an upper layer on that disk, so what the guest installs and writes survives
# its reboot. BUILDDIR/systemd-test is shared read-write; it carries the test unit in and the
# results out. The guest boots twice on the same disk:
#   boot 1  dpkg -i the rmemfs and rmemfs-server packages; /etc/rmemfs/memserver-main.conf: a
#           capacity and no default pool, an admin token, a tenant (token dir), a backing dir
#           /var/lib/rmemfs/main; systemctl enable --now memserver@main; the unit is active and
#           serves (memserver-ctl creates a scratch pool, rmem-perf --verify on it, delete);
#           the tenant's first mount of HOST:PORT/data with -o format,size= creates pool data
#           (its file in the backing dir); an /etc/fstab line naming HOST:PORT/data
#           (fuse.rmemfs, _netdev, the tenant's token) is mounted by systemd; files are written
#           (some fsync'ed, some left to the unmount at shutdown); then `systemctl reboot`:
#           systemd stops everything, qemu exits (-no-reboot)
#   boot 2  the harness boots the same disk again: memserver@main is active and lists pool
#           data as persistent, systemd mounted
#           the fstab line, every file reads back as written, the previous boot's journal
#           shows the mount and the unit stopped cleanly, and this mount found the
#           filesystem closed cleanly (no journal recovery); then `systemctl poweroff`
# Prints a PASS or FAIL line per check and a last line `N passed, N failed` (`, N skipped`),
# exits non-zero on any failure. Where qemu cannot start at all (rdma-vm.sh check) it prints a
# loud SKIP banner and reports the planned checks as skipped.
#
# env: RMEMFS_SYSTEMD_BUDGET=SECS  time for both boots together (default 450, 2x what they
#                                  take on a busy 2-core machine): a boot that
#                                  runs out of it is killed and counts as a failure, and so
#                                  does every check left unrun
#      RMEMFS_SYSTEMD_DEBS=DIR     use the .deb packages in DIR (scripts/package.sh --out DIR)
#                                  instead of building them
#      RMEMFS_SYSTEMD_RESULTS=FILE also write "PASSED FAILED SKIPPED" and then the failed
#                                  checks, one a line, to FILE (as test-rdma.sh does)
#      RMEMFS_SYSTEMD_KEEP=1       keep BUILDDIR/systemd-test (disk image, console logs)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUDGET=${RMEMFS_SYSTEMD_BUDGET:-450}
RESULTS_FILE=${RMEMFS_SYSTEMD_RESULTS:-}
# the unit instance, its pool, the mount: the same names in both boots
PORT=7471
MNT=/mnt/rmem
UNIT_MNT=mnt-rmem.mount
TOKEN=/etc/rmemfs/token
TENANT=/etc/rmemfs/tenants/tenant1
CONF=/etc/rmemfs/memserver-main.conf
BACKING_DIR=/var/lib/rmemfs/main
POOL=data
# the checks each boot makes, in order (a boot that dies early fails the rest)
CHECKS_1="install config enable-now unit-active serving create-pool fstab-mount write"
CHECKS_2="unit-active-again pool-listed-again fstab-mounted-again files-synced files-unsynced
	  clean-shutdown clean-unmount"

# ---------------------------------------------------------------------------- in the guest
# check NAME CMD...: run CMD, record "NAME OK|FAIL" in $OUT/steps; 0 if it passed
check()
{
	local name=$1 rc t
	shift
	t=$(cut -d' ' -f1 /proc/uptime)
	echo "---- $name: $* (up $t s)"
	"$@"
	rc=$?
	echo "---- $name: exit $rc after $(awk -v t="$t" '{ printf "%.1f", $1 - t }' /proc/uptime) s"
	if [ $rc = 0 ]; then
		echo "$name OK" >>"$OUT/steps"
	else
		echo "test-systemd: $name failed (exit $rc)"
		echo "$name FAIL" >>"$OUT/steps"
	fi
	return $rc
}

# the unit and the mount point as systemd and the kernel see them, for the log
show_state()
{
	systemctl --no-pager status memserver@main.service "$UNIT_MNT"
	journalctl --no-pager -b -n 40 -u memserver@main.service \
		-u "$UNIT_MNT"
	findmnt "$MNT"
}

g_install()
{
	local d=$OUT/debs
	# man-db's trigger would rebuild the whole man page index (minutes over 9p under TCG);
	# without this file it does nothing (what debconf's man-db/auto-update=false does)
	rm -f /var/lib/man-db/auto-update
	dpkg -i "$d"/rmemfs_*_amd64.deb "$d"/rmemfs-server_*_amd64.deb || return 1
	[ "$(command -v memserver)" = /usr/bin/memserver ] &&
		[ "$(command -v rmemfs)" = /usr/bin/rmemfs ] &&
		[ -f /lib/systemd/system/memserver@.service ]
}

g_config()
{
	mkdir -p "${TENANT%/*}" &&
		chmod 700 "${TENANT%/*}" &&
		(umask 077 && head -c 32 /dev/urandom | base64 >"$TOKEN") &&
		(umask 077 && head -c 32 /dev/urandom | base64 >"$TENANT") || return 1
	# named pools only (no default pool), each kept in its own file of the backing dir
	cat >"$CONF" <<-EOF
		# written by scripts/test-systemd.sh
		LISTEN=127.0.0.1
		PORT=$PORT
		CAPACITY=--capacity 256M
		SIZE=
		TOKEN_FILE=--token-file $TOKEN
		TOKEN_DIR=--token-dir ${TENANT%/*}
		BACKING_DIR=--backing-dir $BACKING_DIR
		EXTRA_ARGS=
	EOF
}

# ctl ARGS...: memserver-ctl with the admin's token
ctl()
{
	timeout -k 5 60 memserver-ctl "127.0.0.1:$PORT" --token-file "$TOKEN" "$@"
}

# the unit's ready notification came (Type=notify) and the port serves: the admin creates a
# scratch pool, a verified exchange runs on it, the pool goes again
g_serving()
{
	ctl create scratch 8M &&
		timeout -k 5 60 rmem-perf "127.0.0.1:$PORT/scratch" --transport tcp \
			--token-file "$TOKEN" --verify --op write,read --size 4K --iters 64 &&
		ctl delete scratch &&
		ctl list
}

# the tenant's first mount of HOST:PORT/NAME with -o format,size= creates the pool and formats
# it (in the foreground; unmounted again once it is up); its file is in the backing dir
g_create_pool()
{
	local pid rc=0
	mkdir -p "$MNT"
	rmemfs "127.0.0.1:$PORT/$POOL" "$MNT" -f -o "format,size=64M,token_file=$TENANT" &
	pid=$!
	wait_mount "$MNT" $pid 600 || rc=1
	mountpoint -q "$MNT" && fusermount3 -u "$MNT"
	wait_gone $pid 300 || { kill -KILL $pid; rc=1; }
	wait $pid || rc=1
	[ -f "$BACKING_DIR/$POOL.pool" ] || { echo "no $BACKING_DIR/$POOL.pool"; rc=1; }
	return $rc
}

# the pool is back after the reboot, from its file in the backing dir
g_pool_listed()
{
	local l
	l=$(ctl list) || return 1
	echo "$l"
	echo "$l" | grep -q "^ *$POOL .*persistent"
}

g_fstab_mount()
{
	echo "127.0.0.1:$PORT/$POOL  $MNT  fuse.rmemfs  _netdev,token_file=$TENANT,x-systemd.after=memserver@main.service,x-systemd.mount-timeout=120  0  0" \
		>>/etc/fstab
	systemctl daemon-reload &&
		timeout -k 5 180 systemctl start remote-fs.target &&
		g_mounted_by_systemd
}

g_mounted_by_systemd()
{
	systemctl is-active "$UNIT_MNT" &&
		[ "$(findmnt -n -o FSTYPE "$MNT")" = fuse.rmemfs ]
}

# files with known content: synced/ fsync'ed here, unsynced/ left to the unmount at shutdown;
# their checksums go to $OUT (the host) and to /root (the guest's disk)
g_write()
{
	local i
	mkdir -p "$MNT/synced/dir" "$MNT/unsynced" || return 1
	head -c 3M /dev/urandom >"$MNT/synced/big" &&
		printf 'rmemfs under systemd, %s\n' "$(date)" >"$MNT/synced/small" &&
		for i in $(seq 20); do head -c $((i * 1000)) /dev/urandom >"$MNT/synced/dir/f$i"; done &&
		sync "$MNT/synced/big" "$MNT/synced/small" "$MNT"/synced/dir/f* &&
		head -c 1M /dev/urandom >"$MNT/unsynced/big" &&
		echo "written last, not fsync'ed" >"$MNT/unsynced/small" || return 1
	(cd "$MNT" && find synced -type f | sort | xargs sha256sum) >"$OUT/synced.sums" &&
		(cd "$MNT" && find unsynced -type f | sort | xargs sha256sum) >"$OUT/unsynced.sums" &&
		cp "$OUT/synced.sums" "$OUT/unsynced.sums" /root/
}

g_sums()
{
	[ -s "$OUT/$1.sums" ] && (cd "$MNT" && sha256sum --quiet -c "$OUT/$1.sums")
}

# the previous boot's journal (made persistent in boot 1): the shutdown unmounted the mount
# and then stopped memserver@main cleanly (exit 0)
g_clean_shutdown()
{
	local j
	j=$(journalctl --no-pager -b -1 -o cat -u memserver@main.service -u "$UNIT_MNT") || return 1
	echo "$j" | tail -20
	echo "$j" | grep -q "Unmounted $UNIT_MNT" &&
		echo "$j" | grep -q "memserver@main.service: Deactivated successfully" &&
		! echo "$j" | grep -Eq "memserver@main.service: (Main process exited|Failed)"
}

# this boot's mount found the filesystem closed cleanly: the previous shutdown let the rmemfs
# daemon finish its unmount (flush, checkpoint, lease) before it stopped the memserver. The
# kernel's unmount of a FUSE mount returns before the daemon has closed; systemd's umount -c
# runs umount.fuse.rmemfs, which waits for the daemon, and only then stops memserver@main
g_clean_unmount()
{
	! journalctl --no-pager -b 0 -o cat -u "$UNIT_MNT" | grep "unclean shutdown"
}

# test-systemd.sh --in-guest PHASE OUT: run by the guest's rmemfs-systemd-test.service
in_guest()
{
	local phase=$1 c
	OUT=$2
	# shellcheck source=lib/proc.sh
	. "$ROOT/scripts/lib/proc.sh"
	echo "start $(cut -d' ' -f1 /proc/uptime)" >"$OUT/times-$phase"
	echo "test-systemd: boot $phase, systemd $(systemctl --version | head -1 | cut -d' ' -f2)," \
		"up $(cut -d' ' -f1 /proc/uptime) s, state $(systemctl is-system-running)"
	if [ "$phase" = 1 ]; then
		# a persistent journal, so that boot 2 can read how boot 1 shut down
		mkdir -p /var/log/journal && journalctl --flush
		check install g_install &&
			check config g_config &&
			check enable-now timeout -k 5 120 systemctl enable --now memserver@main.service &&
			check unit-active systemctl is-active memserver@main.service &&
			check serving g_serving &&
			check create-pool g_create_pool &&
			check fstab-mount g_fstab_mount &&
			check write g_write
	else
		check unit-active-again systemctl is-active memserver@main.service &&
			check pool-listed-again g_pool_listed
		check fstab-mounted-again g_mounted_by_systemd &&
			check files-synced g_sums synced
		check files-unsynced g_sums unsynced
		check clean-shutdown g_clean_shutdown
		check clean-unmount g_clean_unmount
	fi
	show_state
	echo "end $(cut -d' ' -f1 /proc/uptime)" >>"$OUT/times-$phase"
	touch "$OUT/done-$phase"
	sync
	if [ "$phase" = 1 ]; then
		systemctl --no-block reboot
	else
		systemctl --no-block poweroff
	fi
}

if [ "${1:-}" = --in-guest ]; then
	in_guest "$2" "$3" >>"$3/guest-$2.log" 2>&1
	exit 0	# the results are in the files
fi

# ------------------------------------------------------------------------------- on the host
BUILD=${1:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
WORK=$BUILD/systemd-test
D=${RMEMFS_VM_DIR:-/var/tmp/rmemfs-vm}
QEMU=${RMEMFS_VM_QEMU:-qemu-system-x86_64}
T0=$(date +%s)
PASSED=0 FAILED=0 SKIPPED=0
FAILED_NAMES=()
QPID=""
# shellcheck source=lib/proc.sh
. "$ROOT/scripts/lib/proc.sh"

kill_guest()
{
	if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
		kill -TERM "$QPID" 2>/dev/null
		wait_gone "$QPID" 50 || kill -KILL "$QPID" 2>/dev/null
		# timeout(1) runs qemu in its own process group: make sure it is gone too
		pkill -KILL -g "$QPID" 2>/dev/null
		wait "$QPID" 2>/dev/null
	fi
	QPID=""
}

cleanup()
{
	kill_guest
	[ "${RMEMFS_SYSTEMD_KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM HUP
trap cleanup EXIT

# shellcheck source=lib/counts.sh
. "$ROOT/scripts/lib/counts.sh"
report() { counts_report test-systemd; }

fail()
{
	echo "FAIL $1${2:+ ($2)}"
	FAILED=$((FAILED + 1))
	FAILED_NAMES+=("$1${2:+ ($2)}")
}

host_fail()
{
	fail "$1" "$2"
	report
}

case $WORK in
*[[:space:],]*) host_fail setup "$WORK: paths with blanks or commas cannot be shared with the guest" ;;
/proc* | /sys* | /dev* | /run*) host_fail setup "$WORK is not visible in the guest" ;;
esac
[ "$(id -u)" = 0 ] || host_fail setup "run as root (qemu's 9p share of / and apt-get)"
"$ROOT/scripts/deps.sh" vm test package || host_fail deps "installing dependencies failed"

if ! "$ROOT/scripts/rdma-vm.sh" check; then
	SKIPPED=$(($(wc -w <<<"$CHECKS_1 $CHECKS_2")))
	cat <<EOF

##########################################################################################
##  SKIPPED: THE SYSTEMD GUEST TEST DID NOT RUN
##  qemu cannot start on this machine (scripts/rdma-vm.sh check failed, see above), so
##  the guest cannot boot: $SKIPPED check(s) are reported as skipped.
##  Nothing here says the memserver unit works under systemd.
##########################################################################################

EOF
	report
fi
"$ROOT/scripts/rdma-vm.sh" setup || host_fail vm-setup "rdma-vm.sh setup failed"

rm -rf "$WORK"
mkdir -p "$WORK/units" "$WORK/debs"
t=$(date +%s)
if [ -n "${RMEMFS_SYSTEMD_DEBS:-}" ]; then
	cp "$RMEMFS_SYSTEMD_DEBS"/rmemfs_*_amd64.deb "$RMEMFS_SYSTEMD_DEBS"/rmemfs-server_*_amd64.deb \
		"$WORK/debs/" || host_fail package "no .deb packages in $RMEMFS_SYSTEMD_DEBS"
else
	"$ROOT/scripts/package.sh" --out "$WORK/debs" || host_fail package "scripts/package.sh failed"
fi
T_PACKAGE=$(($(date +%s) - t))

# the persistent disk: the overlay's upper layer (no loop device: mkfs writes the file)
truncate -s 1G "$WORK/disk.img" && mkfs.ext4 -q -F -E nodiscard "$WORK/disk.img" ||
	host_fail disk "making the guest's disk image failed"

kver=$(readlink "$D/kernel")
kver=${kver#k-}
KMODS=$(readlink -f "$D/kernel")
# the console noise of a machine that has no udev and no network: no getty on ttyS0 (its
# device unit never appears), no sshd or postgresql the host may have enabled
SD_ARGS="systemd.getty_auto=0 systemd.mask=ssh.service systemd.mask=postgresql.service"
SD_ARGS+=" systemd.wants=rmemfs-systemd-test.service"

# boot PHASE: boot the guest on the disk until it powers off or reboots (qemu exits either way:
# -no-reboot) or the budget runs out; 0 if the guest's test unit finished its phase
boot()
{
	local phase=$1 left rc t
	left=$((DEADLINE - $(date +%s)))
	if [ "$left" -lt 30 ]; then
		echo "test-systemd: boot $phase: the time budget of ${BUDGET} s is used up"
		return 1
	fi
	cat >"$WORK/units/rmemfs-systemd-test.service" <<-EOF
		# written by scripts/test-systemd.sh for boot $phase; copied in by the guest's init
		[Unit]
		Description=rmemfs systemd guest test, boot $phase
		After=multi-user.target

		[Service]
		Type=oneshot
		ExecStart=/bin/bash $ROOT/scripts/test-systemd.sh --in-guest $phase $WORK
	EOF
	echo "test-systemd: boot $phase (at most $left s)"
	t=$(date +%s)
	timeout -k 10 "$left" "$QEMU" -accel tcg,thread=multi,tb-size=256 -cpu max \
		-m 2048 -smp 2 -nodefaults -display none -monitor none -serial stdio \
		-no-reboot -nic none \
		-kernel "$KMODS/boot/vmlinuz-$kver" -initrd "$D/initramfs-systemd.cpio.gz" \
		-append "console=ttyS0 loglevel=3 panic=-1 sdvm.rw=$WORK sdvm.units=$WORK/units sdvm.kmods=$KMODS $SD_ARGS" \
		-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
		-virtfs "local,path=$WORK,mount_tag=rw,security_model=none,multidevs=remap" \
		-drive "file=$WORK/disk.img,format=raw,if=virtio,cache=writeback" \
		</dev/null >"$WORK/console-$phase.log" 2>&1 &
	QPID=$!
	wait $QPID
	rc=$?
	QPID=""
	T_BOOT[phase]=$(($(date +%s) - t))
	[ -f "$WORK/guest-$phase.log" ] && sed 's/^/  guest: /' "$WORK/guest-$phase.log"
	if [ $rc = 124 ] || [ $rc = 137 ]; then
		echo "test-systemd: boot $phase timed out and was killed"
	elif [ $rc != 0 ]; then
		echo "test-systemd: qemu exited $rc"
	fi
	if [ ! -f "$WORK/done-$phase" ]; then
		echo "test-systemd: boot $phase did not finish its checks; the console's end:"
		sed 's/\x1b\[[0-9;]*[A-Za-z]//g' "$WORK/console-$phase.log" | tail -40 | sed 's/^/  console: /'
		return 1
	fi
	[ $rc = 0 ]
}

# tally PHASE CHECKS: count what the guest recorded for CHECKS; missing ones fail
tally()
{
	local phase=$1 c res
	for c in $2; do
		res=$(sed -n "s/^$c \(OK\|FAIL\)$/\1/p" "$WORK/steps" 2>/dev/null | tail -1)
		case $res in
		OK) echo "PASS boot$phase/$c"; PASSED=$((PASSED + 1)) ;;
		FAIL) fail "boot$phase/$c" ;;
		*) fail "boot$phase/$c" "did not finish" ;;
		esac
	done
}

declare -a T_BOOT=()
DEADLINE=$(($(date +%s) + BUDGET))
boot 1
vm1=$?
tally 1 "$CHECKS_1"
[ $vm1 = 0 ] || fail boot1 "the guest did not finish boot 1 cleanly"
if [ $vm1 = 0 ]; then
	boot 2 || fail boot2 "the guest did not finish boot 2 cleanly"
fi
tally 2 "$CHECKS_2"

# where the time went: the guest's uptime when its test unit started and ended
times()
{
	local s e
	[ -n "${T_BOOT[$1]:-}" ] || { echo "boot $1: not run"; return; }
	s=$(sed -n 's/^start //p' "$WORK/times-$1" 2>/dev/null)
	e=$(sed -n 's/^end //p' "$WORK/times-$1" 2>/dev/null)
	[ -n "$s" ] && [ -n "$e" ] || { echo "boot $1: ${T_BOOT[$1]:-0} s"; return; }
	awk -v b="$1" -v s="$s" -v e="$e" -v t="${T_BOOT[$1]:-0}" 'BEGIN {
		printf "boot %s: %d s (up to the test unit %.0f s, its checks %.0f s, shutdown and qemu %.0f s)\n",
			b, t, s, e - s, t - e }'
}
echo "test-systemd: time: packages ${T_PACKAGE} s; $(times 1); $(times 2)"
report
