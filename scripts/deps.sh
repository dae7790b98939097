#!/bin/bash
# deps.sh - install the Debian packages rmemfs needs, and nothing when they are all there.
#
# usage: scripts/deps.sh [--check] [GROUP...]      (default groups: build test)
#   build  compiler, meson, scdoc (the man pages), and the -dev packages of glib, rdma-core
#          and libfuse3
#   test   what the test suites run: pytest (Debian's, run with /usr/bin/python3), fio, fuse3,
#          the rdma-core userspace providers, valgrind, man-db and bsdextrautils (the man
#          page check renders with man -l and col)
#   package  scripts/package.sh: debhelper, dpkg-dev, lintian, systemd (systemd-analyze), git
#   demo   what scripts/demo.sh runs besides the build: fuse3, fio, python3 (fio's JSON)
#   vm     the soft-RoCE VM harness (scripts/rdma-vm.sh): qemu, busybox, kmod, cpio, iproute2
#          (its `rdma` tool), e2fsprogs, and the rdma-core utilities used in the guest
#   bench  scripts/bench.sh: fio, sshfs + openssh-server/-client (the sshfs baseline),
#          gnuplot-nox (the chart), procps, fuse3, python3
#   farmem scripts/farmem.sh: redis-server + redis-tools (its redis workload), gnuplot-nox,
#          util-linux (swapon, losetup, zramctl), coreutils (sort), procps, fuse3, python3;
#          Debian's redis-server service is stopped and disabled after the install (farmem.sh
#          starts its own instances)
#   all    every group
#   --check  install nothing: list what is missing and exit 1 if anything is
#
# Idempotent: `apt-get update` and `apt-get install` run only when a package is missing.
# Needs root (or passwordless sudo) only when something has to be installed.
set -euo pipefail

declare -A GROUP_PKGS=(
	[build]="meson ninja-build pkg-config gcc libc6-dev scdoc libglib2.0-dev libibverbs-dev
		 librdmacm-dev libfuse3-dev libisal-dev liburing-dev"
	[test]="python3 python3-pytest fio fuse3 ibverbs-providers valgrind man-db bsdextrautils"
	[package]="debhelper dpkg-dev lintian systemd git"
	[demo]="fuse3 fio python3"
	[vm]="qemu-system-x86 busybox-static kmod cpio gzip iproute2 e2fsprogs ibverbs-providers
	      ibverbs-utils rdmacm-utils perftest"
	# scripts/bench.sh: fio, the sshfs baseline (sshfs + a private sshd on loopback), the
	# chart (gnuplot), ps/pgrep (procps), fuse3, and python3 for fio's JSON
	[bench]="fio sshfs openssh-server openssh-client gnuplot-nox procps fuse3 python3"
	[farmem]="redis-server redis-tools gnuplot-nox util-linux coreutils procps fuse3 python3"
)
ALL_GROUPS="build test demo vm bench farmem package"

usage()
{
	sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//'
}

check_only=0
groups=()
for arg in "$@"; do
	case $arg in
	--check) check_only=1 ;;
	-h | --help) usage; exit 0 ;;
	all) read -r -a groups <<<"$ALL_GROUPS" ;;
	*)
		if [ -z "${GROUP_PKGS[$arg]+set}" ]; then
			echo "deps.sh: unknown group '$arg' (groups: $ALL_GROUPS all)" >&2
			exit 2
		fi
		groups+=("$arg")
		;;
	esac
done
[ ${#groups[@]} -gt 0 ] || groups=(build test)

# the packages of the selected groups, each once
declare -A seen=()
wanted=()
for g in "${groups[@]}"; do
	for p in ${GROUP_PKGS[$g]}; do
		[ -n "${seen[$p]+x}" ] && continue
		seen[$p]=1
		wanted+=("$p")
	done
done

is_installed()
{
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

missing=()
for p in "${wanted[@]}"; do
	is_installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
if [ $check_only = 1 ]; then
	echo "deps.sh: missing: ${missing[*]}"
	exit 1
fi

SUDO=()
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		SUDO=(sudo -n)
	else
		echo "deps.sh: missing packages: ${missing[*]}" >&2
		echo "deps.sh: run as root (e.g. sudo $0 ${groups[*]}) to install them" >&2
		exit 1
	fi
fi

export DEBIAN_FRONTEND=noninteractive
echo "deps.sh: installing: ${missing[*]}"
# wait for a concurrent apt/dpkg run instead of failing on its lock
APT_OPTS=(-o DPkg::Lock::Timeout=300)
"${SUDO[@]}" apt-get "${APT_OPTS[@]}" update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y -qq \
	--no-install-recommends "${missing[@]}" >/dev/null

still=()
for p in "${missing[@]}"; do
	is_installed "$p" || still+=("$p")
done
if [ ${#still[@]} -gt 0 ]; then
	echo "deps.sh: still missing after apt-get install: ${still[*]}" >&2
	exit 1
fi
# a package that starts a system service on install: stop it and keep it from starting at
# boot (farmem.sh runs its own redis-server instances; a system one would hold memory and a port)
for p in "${missing[@]}"; do
	case $p in
	redis-server)
		if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
			"${SUDO[@]}" systemctl disable --now redis-server >/dev/null 2>&1 || true
		else
			"${SUDO[@]}" service redis-server stop >/dev/null 2>&1 || true
			"${SUDO[@]}" update-rc.d redis-server disable >/dev/null 2>&1 || true
		fi
		;;
	esac
done
echo "deps.sh: installed ${#missing[@]} package(s)"
