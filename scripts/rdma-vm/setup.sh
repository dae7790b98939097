#!/bin/bash
# setup.sh - prepare what scripts/rdma-vm.sh boots: a Debian kernel that has Soft-RoCE and a
# small initramfs. Called by `scripts/rdma-vm.sh setup` (and by `run` when something is
# missing); idempotent and cached under $RMEMFS_VM_DIR (default /var/tmp/rmemfs-vm):
#
#   kernel -> k-<KVER>/     Debian's linux-image-<KVER> (bookworm, generic amd64 flavour:
#                           CONFIG_RDMA_RXE=m, 9p and fuse as modules) downloaded with
#                           `apt-get download` and unpacked with dpkg-deb, never installed;
#                           depmod run on the unpacked tree
#   initramfs.cpio.gz       busybox + the modules the guest needs + scripts/rdma-vm/init;
#                           rebuilt only when one of those inputs changes (initramfs.stamp)
#   initramfs-systemd.cpio.gz  the same for scripts/systemd-vm/init (the systemd guest of
#                           scripts/test-systemd.sh), with its modules (initramfs-systemd.stamp)
#
# The host kernel needs no RDMA support and loads nothing. KVER: the cached kernel, else
# $RMEMFS_VM_KVER, else the version linux-image-amd64 depends on.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
D=${RMEMFS_VM_DIR:-/var/tmp/rmemfs-vm}
# modules loaded at boot, in dependency order (crc32_generic before rdma_rxe: without it rxe
# fails with "failed to init crc32 algorithm err:-2")
# fails with "failed to init crc32 algorithm err:-2"); brd and ext4 for the guest's TMPDIR;
# loop for swap on an rmemfs file (the fs-swap step)
MODS="virtio_pci 9pnet_virtio 9p overlay crc32_generic rdma_rxe ib_uverbs rdma_ucm fuse dummy veth
      brd ext4 loop"
# the systemd guest's (scripts/systemd-vm/init, scripts/test-systemd.sh): its root is an overlay
# of the host's / over 9p on an ext4 on a virtio disk; fuse for the rmemfs mounts
SD_MODS="virtio_pci virtio_blk 9pnet_virtio 9p overlay ext4 fuse"
t0=$(date +%s.%N)
log() { echo "[rdma-vm setup] $*"; }

mkdir -p "$D"
exec 9>"$D/.setup.lock"
flock -w 900 9 || { log "could not lock $D/.setup.lock within 900 s" >&2; exit 1; }

"$HERE/../deps.sh" vm

# --- kernel ---
KVER=${RMEMFS_VM_KVER:-}
if [ -z "$KVER" ] && [ -L "$D/kernel" ]; then
	cur=$(readlink "$D/kernel")
	cur=${cur#k-}
	[ -f "$D/k-$cur/boot/vmlinuz-$cur" ] && KVER=$cur
fi
kver_from_apt()
{
	apt-cache depends linux-image-amd64 2>/dev/null |
		sed -n 's/.*Depends: linux-image-\([0-9].*-amd64\)$/\1/p' | head -1
}
if [ -z "$KVER" ]; then
	KVER=$(kver_from_apt)
	if [ -z "$KVER" ]; then
		apt-get -o DPkg::Lock::Timeout=300 update -qq
		KVER=$(kver_from_apt)
	fi
	[ -n "$KVER" ] || { log "cannot tell which linux-image-*-amd64 to fetch" >&2; exit 1; }
fi
KDIR="$D/k-$KVER"
if [ ! -f "$KDIR/boot/vmlinuz-$KVER" ]; then
	log "fetching linux-image-$KVER (downloaded and unpacked, not installed)"
	rm -rf "$D/debs" "$KDIR.tmp"
	mkdir -p "$D/debs" "$KDIR.tmp"
	chmod 755 "$D/debs"
	fetch() { (cd "$D/debs" && apt-get download "linux-image-$KVER" 2>&1 |
		grep -v 'Download is performed unsandboxed' || true); }
	fetch
	if ! ls "$D"/debs/linux-image-"$KVER"_*_amd64.deb >/dev/null 2>&1; then
		apt-get -o DPkg::Lock::Timeout=300 update -qq
		fetch
	fi
	deb=$(ls "$D"/debs/linux-image-"$KVER"_*_amd64.deb 2>/dev/null | head -1)
	[ -n "$deb" ] || { log "apt-get download linux-image-$KVER failed" >&2; exit 1; }
	dpkg-deb -x "$deb" "$KDIR.tmp"
	depmod -b "$KDIR.tmp" "$KVER"
	rm -rf "$KDIR"
	mv "$KDIR.tmp" "$KDIR"
	rm -rf "$D/debs"
fi
for opt in RDMA_RXE INFINIBAND_USER_ACCESS FUSE_FS 9P_FS NET_9P_VIRTIO OVERLAY_FS DUMMY \
	BLK_DEV_RAM EXT4_FS VIRTIO_BLK; do
	grep -Eq "^CONFIG_$opt=[ym]" "$KDIR/boot/config-$KVER" ||
		{ log "kernel $KVER lacks CONFIG_$opt" >&2; exit 1; }
done
ln -sfn "k-$KVER" "$D/kernel"
# drop kernels of other versions left by earlier setups
for old in "$D"/k-*; do
	[ -e "$old" ] || continue
	[ "$old" = "$KDIR" ] || { log "removing old ${old##*/}"; rm -rf "$old"; }
done

# --- initramfs images: each rebuilt only when its inputs change ---
# build_initramfs NAME INIT NEEDED "MODS": $D/NAME.cpio.gz holding busybox, INIT as /init and
# MODS with what they depend on (listed in load order in /mods.list), which must include the
# module file NEEDED; NAME.stamp records the inputs
build_initramfs()
{
	local name=$1 init=$2 needed=$3 mods=$4 stamp ir m kw path b
	stamp=$({
		echo "$KVER $mods"
		sha256sum "$init" /bin/busybox | cut -d' ' -f1
	} | sha256sum | cut -d' ' -f1)
	if [ -f "$D/$name.cpio.gz" ] && [ "$(cat "$D/$name.stamp" 2>/dev/null)" = "$stamp" ]; then
		[ "${RMEMFS_VM_QUIET:-0}" = 1 ] || log "$name up to date (kernel $KVER)"
		return 0
	fi
	ir="$D/$name.tmp"
	rm -rf "$ir"
	mkdir -p "$ir"/{bin,proc,sys,dev,mods}
	cp /bin/busybox "$ir/bin/busybox"
	: >"$ir/mods.list"
	for m in $mods; do
		modprobe -d "$KDIR" -S "$KVER" --show-depends "$m" | while read -r kw path _; do
			[ "$kw" = insmod ] || continue
			b=$(basename "$path")
			grep -qx "$b" "$ir/mods.list" && continue
			case $b in
			*.ko) cp "$path" "$ir/mods/$b" ;;
			*.ko.xz) xz -dc "$path" >"$ir/mods/${b%.xz}"; b=${b%.xz} ;;
			*.ko.zst) zstd -qdc "$path" >"$ir/mods/${b%.zst}"; b=${b%.zst} ;;
			*) log "unexpected module file $path" >&2; exit 1 ;;
			esac
			echo "$b" >>"$ir/mods.list"
		done
	done
	grep -qx "$needed" "$ir/mods.list" || { log "$needed not found in $KVER" >&2; exit 1; }
	cp "$init" "$ir/init"
	chmod 755 "$ir/init"
	(cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1 >"$D/$name.cpio.gz.tmp")
	mv "$D/$name.cpio.gz.tmp" "$D/$name.cpio.gz"
	echo "$stamp" >"$D/$name.stamp"
	log "$name: kernel $KVER, modules: $(tr '\n' ' ' <"$ir/mods.list")"
	rm -rf "$ir"
	log "$name $(du -h "$D/$name.cpio.gz" | cut -f1), done in" \
		"$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N)-$t0}") s"
}
build_initramfs initramfs "$HERE/init" rdma_rxe.ko "$MODS"
build_initramfs initramfs-systemd "$HERE/../systemd-vm/init" virtio_blk.ko "$SD_MODS"
