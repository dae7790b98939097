#!/bin/bash
# rdma-vm.sh - run a command as root in a qemu guest that has Soft-RoCE (rdma_rxe) up.
#
# This host's kernel has no RDMA, so the verbs path runs for real only in a guest: Debian's own
# kernel (downloaded and unpacked, never installed) under qemu TCG, whose root is the host's /
# shared read-only over 9p (host-built binaries run unchanged; guest writes stay in guest RAM)
# plus one read-write share at its own host path (results come back through it).
# qemu always runs with -nic none: the guest has no network device, nothing leaves it.
#
# usage:
#   rdma-vm.sh setup                 install deps (deps.sh vm), fetch the kernel, build the
#                                    initramfs; idempotent, cached in $RMEMFS_VM_DIR
#                                    (default /var/tmp/rmemfs-vm)
#   rdma-vm.sh check                 exit 0 iff qemu can start here (binary present, a TCG
#                                    machine with 9p comes up and quits)
#   rdma-vm.sh run [options] -- CMD [ARGS...]
#       -t SECS    kill the guest after SECS (default 900); exit status 124 then
#       -w RWDIR   host dir shared read-write at the same path (default: the current dir)
#       -m MB      guest memory (default 3072)       -c N   guest CPUs (default 2)
#       -e VAR=VAL set VAR in CMD's environment (repeatable)
#       -l LOG     keep the console log in LOG       -v     show the guest's boot steps
#     Boots, brings up rxe (rd0: a dummy netdev with 10.77.0.1/24, rxe0 on it, and rxe_lo on
#     lo), then runs CMD as root in the current directory (which must be visible in the
#     guest: anywhere under / except /proc, /sys, /dev, /run) with the caller's PATH and
#       RMEM_RDMA_IP=10.77.0.1 RMEM_RDMA_DEV=rxe0 RMEM_RDMA_GID_INDEX=<GID index of 10.77.0.1>
#     plus the caller's RMEM_*, RMEMFS_*, G_DEBUG, G_MESSAGES_DEBUG, ASAN_OPTIONS,
#     UBSAN_OPTIONS and CI variables, and TMPDIR=/tmp/rdmavm, a fresh 1 GiB ext4 in guest RAM
#     (the rest of / is the host's, copy-on-write in guest RAM); then powers off. CMD's stdin
#     is /dev/null; its stdout and stderr come out here (through a pipe: CMD sees no tty).
#     Exit status: CMD's; 124 if the guest timed out; 125 if the harness failed (qemu did not
#     start, rxe did not come up, no exit status came back).
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/proc.sh
. "$HERE/lib/proc.sh"
D=${RMEMFS_VM_DIR:-/var/tmp/rmemfs-vm}
QEMU=${RMEMFS_VM_QEMU:-qemu-system-x86_64}
export RMEMFS_VM_DIR=$D

usage()
{
	sed -n '2,/^set -uo/p' "$0" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//'
}

die()
{
	echo "rdma-vm: $*" >&2
	exit 125
}

need_root()
{
	[ "$(id -u)" = 0 ] || die "run as root (the guest runs CMD as root and setup uses apt-get)"
}

cmd_setup()
{
	need_root
	"$HERE/rdma-vm/setup.sh"
}

cmd_check()
{
	local dir rc
	command -v "$QEMU" >/dev/null || { echo "rdma-vm: $QEMU not found" >&2; return 1; }
	dir=$(mktemp -d)
	# a TCG machine with the 9p device the guest needs: starts, answers the monitor, quits
	echo quit | timeout -k 5 60 "$QEMU" -accel tcg -machine q35 -m 64 -nodefaults \
		-display none -nic none -serial none -monitor stdio \
		-virtfs "local,path=$dir,mount_tag=t,security_model=none,readonly=on" \
		>"$dir.log" 2>&1
	rc=$?
	if [ $rc != 0 ]; then
		echo "rdma-vm: $QEMU cannot start here (exit $rc):" >&2
		sed 's/^/  /' "$dir.log" >&2
	fi
	rm -rf "$dir" "$dir.log"
	return $rc
}

cmd_run()
{
	local tmo=900 rw=$PWD mem=3072 cpus=2 log="" verbose=0 o
	local -a envs=()
	OPTIND=1
	while getopts "t:w:m:c:e:l:v" o; do
		case $o in
		t) tmo=$OPTARG ;;
		w) rw=$(cd "$OPTARG" && pwd) || die "no such directory: $OPTARG" ;;
		m) mem=$OPTARG ;;
		c) cpus=$OPTARG ;;
		e) [[ $OPTARG == [A-Za-z_]*=* ]] || die "-e wants VAR=VALUE, not '$OPTARG'"
		   envs+=("$OPTARG") ;;
		l) log=$OPTARG ;;
		v) verbose=1 ;;
		*) usage >&2; exit 2 ;;
		esac
	done
	shift $((OPTIND - 1))
	[ "${1:-}" = "--" ] && shift
	[ $# -ge 1 ] || { usage >&2; exit 2; }
	need_root
	case $PWD in
	/proc* | /sys* | /dev* | /run*) die "the current dir $PWD is not visible in the guest" ;;
	esac

	case $rw$PWD in
	*[[:space:],]*) die "paths with blanks or commas cannot be shared with the guest" ;;
	esac
	# cheap when everything is cached: checks the packages and the initramfs inputs
	RMEMFS_VM_QUIET=1 "$HERE/rdma-vm/setup.sh" >&2 || die "setup failed"
	local kver kernel
	kver=$(readlink "$D/kernel")
	kver=${kver#k-}
	kernel="$D/kernel/boot/vmlinuz-$kver"

	# the per-run control dir, shared with the guest at /run/rdmavm (and those of runs that
	# were killed too hard to clean up, a day later)
	mkdir -p "$D/runs"
	find "$D/runs" -mindepth 1 -maxdepth 1 -name 'run-*' -mmin +1440 -exec rm -rf {} + 2>/dev/null
	CTL=$(mktemp -d "$D/runs/run-XXXXXX")
	cp "$HERE/rdma-vm/guest-rxe-up" "$CTL/guest-rxe-up"
	chmod 755 "$CTL/guest-rxe-up"
	local nonce=${CTL##*-}$$ v
	{
		echo "# written by rdma-vm.sh; run by the guest's init with bash"
		printf 'export PATH=%q HOME=/root\n' "$PATH"
		for v in $(compgen -e); do
			case $v in
			RMEM_* | RMEMFS_* | G_DEBUG | G_MESSAGES_DEBUG | ASAN_OPTIONS | UBSAN_OPTIONS | CI)
				printf 'export %s=%q\n' "$v" "${!v}" ;;
			esac
		done
		for v in "${envs[@]}"; do
			printf 'export %s=%q\n' "${v%%=*}" "${v#*=}"
		done
		echo "ulimit -l unlimited"
		echo "ulimit -n $(ulimit -n)"
		echo "/run/rdmavm/guest-rxe-up >/run/rdmavm/rxe.env ||"
		echo "	{ echo 'rdma-vm: bringing up rxe in the guest failed' >&2; exit 125; }"
		echo ". /run/rdmavm/rxe.env"
		printf 'cd %q || exit 125\n' "$PWD"
		# through a pipe, not on the console's tty: batch output, no progress animations
		printf '%q ' "$@"
		echo '</dev/null 2>&1 | cat'
		echo 'exit ${PIPESTATUS[0]}'
	} >"$CTL/cmd.sh"

	[ -n "$log" ] || log="$CTL/console.log"
	: >"$log"
	# qemu under timeout(1): timeout forwards TERM to it and kills it after $tmo seconds
	timeout -k 10 "$tmo" "$QEMU" -accel tcg,thread=multi,tb-size=256 -cpu max \
		-m "$mem" -smp "$cpus" -nodefaults -display none -monitor none -serial stdio \
		-no-reboot -nic none \
		-kernel "$kernel" -initrd "$D/initramfs.cpio.gz" \
		-append "console=ttyS0 quiet loglevel=3 panic=-1 rdmavm.rw=$rw rdmavm.kmods=$(readlink -f "$D/kernel") rdmavm.nonce=$nonce rdmavm.verbose=$verbose" \
		-virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
		-virtfs "local,path=$rw,mount_tag=rw,security_model=none,multidevs=remap" \
		-virtfs "local,path=$CTL,mount_tag=ctl,security_model=none,multidevs=remap" \
		</dev/null >"$log" 2>&1 &
	QPID=$!
	trap 'kill_guest; exit 130' INT
	trap 'kill_guest; exit 143' TERM HUP
	trap 'kill_guest; rm -rf "$CTL"' EXIT
	# stream the console (CMD's output) as it comes
	tail -n +1 -s 0.2 --pid=$QPID -f "$log" |
		sed -u -e 's/\r$//' -e "/^RMEMFS-VM-EXIT-$nonce=/d" -e '/^\[ *[0-9.]*\] reboot: Power down$/d' &
	TPID=$!
	wait $QPID
	local qrc=$?
	QPID=""
	wait $TPID 2>/dev/null
	TPID=""

	local rc
	rc=$(cat "$CTL/exit-code" 2>/dev/null)
	[ -n "$rc" ] || rc=$(tr -d '\r' <"$log" | sed -n "s/^RMEMFS-VM-EXIT-$nonce=\([0-9]*\)$/\1/p" | tail -1)
	if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
		echo "rdma-vm: the guest timed out after ${tmo} s and was killed" >&2
		rc=124
	elif [ -z "$rc" ]; then
		echo "rdma-vm: no exit status came back from the guest (qemu exit $qrc)" >&2
		[ "$log" = "$CTL/console.log" ] && cp "$log" "$D/last-failed-console.log" &&
			echo "rdma-vm: console log kept in $D/last-failed-console.log" >&2
		rc=125
	fi
	return "$rc"
}

QPID="" TPID="" CTL=""
kill_guest()
{
	local _
	if [ -n "$QPID" ] && kill -0 "$QPID" 2>/dev/null; then
		kill -TERM "$QPID" 2>/dev/null
		wait_gone "$QPID" 50 || kill -KILL "$QPID" 2>/dev/null
		# timeout(1) runs qemu in its own process group: make sure it is gone too
		pkill -KILL -g "$QPID" 2>/dev/null
	fi
	[ -n "$TPID" ] && kill "$TPID" 2>/dev/null
	QPID="" TPID=""
}

case ${1:-} in
setup) shift; cmd_setup "$@" ;;
check) shift; cmd_check "$@" ;;
run) shift; cmd_run "$@" ;;
-h | --help | help) usage ;;
*) usage >&2; exit 2 ;;
esac
