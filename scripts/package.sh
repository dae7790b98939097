#!/bin/bash
# package.sh - build the Debian packages of this checkout and check them.
#
# usage: scripts/package.sh [--out DIR]      (default DIR: build-deb/ of the checkout)
#
# Installs what is missing (deps.sh build package), copies the files git tracks
# (as they are in the work tree) to a temporary directory, runs
# `dpkg-buildpackage -b -us -uc` there and moves the .deb, .buildinfo and .changes
# to DIR. Then checks, each one line "ok NAME" or "not ok NAME: why":
#   build     dpkg-buildpackage succeeded and made rmemfs and rmemfs-server
#   contents  each package holds its programs and man pages, the server its unit
#   lintian   lintian reports no error (warnings are printed, not counted)
#   unit      systemd-analyze verify accepts memserver@.service as packaged
#             (ExecStart pointed at the packaged binary, the packaged man pages)
# With RMEMFS_PACKAGE_RESULTS=FILE the counts "PASSED FAILED SKIPPED" go to FILE,
# then one failed check a line (scripts/test.sh reads it). Exit status 1 if any
# check failed.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/build-deb
while [ $# -gt 0 ]; do
	case $1 in
	--out) OUT=$2; shift ;;
	-h | --help) sed -n '2,/^set -uo/p' "$0" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "package.sh: unknown argument '$1'" >&2; exit 2 ;;
	esac
	shift
done
"$ROOT/scripts/deps.sh" build package || { echo "package.sh: installing dependencies failed" >&2; exit 1; }

WORK=$(mktemp -d /tmp/rmemfs-package.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
passed=0 failed=0
fails=()
ok() { echo "ok $1"; passed=$((passed + 1)); }
not_ok() { echo "not ok $1: $2"; failed=$((failed + 1)); fails+=("$1: $2"); }

finish()
{
	echo "package: $passed passed, $failed failed"
	if [ -n "${RMEMFS_PACKAGE_RESULTS:-}" ]; then
		echo "$passed $failed 0" >"$RMEMFS_PACKAGE_RESULTS"
		[ ${#fails[@]} -gt 0 ] && printf '%s\n' "${fails[@]}" >>"$RMEMFS_PACKAGE_RESULTS"
	fi
	[ $failed = 0 ]
	exit
}

version=$(sed -n '1s/^rmemfs (\([^)]*\)).*/\1/p' "$ROOT/debian/changelog")
src=$WORK/rmemfs-$version
mkdir -p "$src" "$OUT"
(cd "$ROOT" && git ls-files -z | xargs -0 cp --parents -t "$src") ||
	{ not_ok build "copying the tracked files failed"; finish; }
echo "==== dpkg-buildpackage -b -us -uc in $src"
if (cd "$src" && dpkg-buildpackage -b -us -uc) >"$WORK/build.log" 2>&1; then
	rm -f "$OUT"/rmemfs*_"$version"_*
	mv "$WORK"/rmemfs*_"$version"_* "$OUT"/
	if ls "$OUT"/rmemfs_"$version"_*.deb "$OUT"/rmemfs-server_"$version"_*.deb >/dev/null 2>&1; then
		ok build
	else
		not_ok build "no rmemfs or rmemfs-server package in $OUT"
		finish
	fi
else
	tail -30 "$WORK/build.log"
	not_ok build "dpkg-buildpackage failed (the end of its log is above)"
	finish
fi
ls -l "$OUT"/*.deb

# contents: what each package must hold
client=$(ls "$OUT"/rmemfs_"$version"_*.deb) server=$(ls "$OUT"/rmemfs-server_"$version"_*.deb)
dpkg-deb -c "$client" | awk '{print $NF}' >"$WORK/client.list"
dpkg-deb -c "$server" | awk '{print $NF}' >"$WORK/server.list"
missing=()
for f in usr/bin/rmemfs usr/bin/rmemfs-fsck usr/bin/rmemfs-ctl usr/sbin/rmemfs-swap \
	usr/bin/rmem-touch usr/share/man/man8/rmemfs.8.gz usr/share/man/man8/rmemfs-fsck.8.gz \
	usr/share/man/man8/rmemfs-ctl.8.gz usr/share/man/man8/rmemfs-swap.8.gz \
	usr/share/man/man1/rmem-touch.1.gz usr/sbin/umount.fuse.rmemfs \
	usr/share/man/man8/umount.fuse.rmemfs.8.gz; do
	grep -qx "\./$f" "$WORK/client.list" || missing+=("rmemfs:$f")
done
for f in usr/bin/memserver usr/bin/memserver-ctl usr/bin/rmem-perf \
	lib/systemd/system/memserver@.service usr/share/man/man8/memserver.8.gz \
	usr/share/man/man8/memserver-ctl.8.gz usr/share/man/man1/rmem-perf.1.gz \
	usr/share/doc/rmemfs-server/examples/memserver-example.conf; do
	grep -qx "\./$f" "$WORK/server.list" || missing+=("rmemfs-server:$f")
done
if [ ${#missing[@]} = 0 ]; then ok contents; else not_ok contents "missing ${missing[*]}"; fi

echo "==== lintian"
changes=$(ls "$OUT"/rmemfs_"$version"_*.changes)
lintian --tag-display-limit 0 "$changes" 2>&1 | tee "$WORK/lintian.log"
errors=$(grep -c '^E: ' "$WORK/lintian.log")
if [ "$errors" = 0 ]; then ok lintian; else not_ok lintian "$errors error(s) (above)"; fi

echo "==== systemd-analyze verify"
x=$WORK/server
dpkg-deb -x "$server" "$x"
mkdir -p "$WORK/units" "$WORK/man/man8"
sed "s|^ExecStart=/usr/bin/memserver|ExecStart=$x/usr/bin/memserver|" \
	"$x/lib/systemd/system/memserver@.service" >"$WORK/units/memserver@check.service"
for page in memserver memserver-ctl; do # the unit's Documentation= pages must exist
	gunzip -c "$x/usr/share/man/man8/$page.8.gz" >"$WORK/man/man8/$page.8"
done
if MANPATH=$WORK/man systemd-analyze verify "$WORK/units/memserver@check.service" \
	>"$WORK/verify.log" 2>&1; then
	ok unit
else
	cat "$WORK/verify.log"
	not_ok unit "systemd-analyze verify failed (above)"
fi
finish
