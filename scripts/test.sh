#!/bin/bash
# test.sh - install what is missing, build, and run every rmemfs test; CI runs this (.ci/run).
#
# usage: scripts/test.sh [--no-asan] [--no-valgrind] [--no-package] [--no-systemd] [--no-rdma]
#
# Runs, in order (each is one "run" in the summary):
#   main      build/ (-Dwerror=true): `meson test` of every suite except rdma and uring-channel
#   uring     the fs files whose requests the FUSE ring carries differently, again with
#             every mount served over io_uring (suite uring-channel; as root the session sets
#             the fuse module's enable_uring and puts it back; skipped where the kernel has
#             no FUSE ring)
#   valgrind  the unit suite of build/ again under valgrind (memcheck; errors and definite
#             leaks fail the test)
#   asan      build-asan/ (-Db_sanitize=address,undefined -Dwerror=true): the unit and
#             integration suites, the member-set tests (suite sets) and the ring's own tests
#             (suite uring; RMEMFS_ASAN_SUITES overrides the list), with leak detection and UBSan halting on the first error
#   package   scripts/package.sh: the Debian packages built with dpkg-buildpackage, their
#             contents, lintian (no errors) and systemd-analyze verify of memserver@.service
#   systemd   scripts/test-systemd.sh build/: memserver@main enabled from the packages and an
#             fstab mount in a qemu guest with systemd as init, across a reboot of the guest
#             (the packages of the package run when it ran)
#   rdma      scripts/test-rdma.sh build/: the rdma suite and the transport tests over real
#             verbs (soft-RoCE) inside a qemu guest; a loud SKIP only where qemu cannot start
# The counts come from meson's JSON test logs (meson-logs/<run>.json) and from the systemd and
# RDMA runs' count files; the last line is `N passed, N failed` (`, N skipped` when something skipped),
# and the exit status is non-zero if any test or build failed. Works from any directory;
# never prompts (CI=true is honoured by every step).
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 1
BUILD=$ROOT/build
ASAN_BUILD=$ROOT/build-asan
ASAN_SUITES=${RMEMFS_ASAN_SUITES:-unit integration sets uring}
do_asan=1 do_valgrind=1 do_package=1 do_systemd=1 do_rdma=1
for arg in "$@"; do
	case $arg in
	--no-asan) do_asan=0 ;;
	--no-valgrind) do_valgrind=0 ;;
	--no-package) do_package=0 ;;
	--no-systemd) do_systemd=0 ;;
	--no-rdma) do_rdma=0 ;;
	-h | --help) sed -n '2,/^set -uo/p' "$0" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "test.sh: unknown argument '$arg'" >&2; exit 2 ;;
	esac
done
export CI=${CI:-}
T0=$(date +%s)
WORK=$(mktemp -d /tmp/rmemfs-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
SUMMARY=$WORK/summary	# lines: run passed failed skipped
FAILURES=$WORK/failures	# lines: run: test (RESULT)
: >"$SUMMARY"
: >"$FAILURES"

banner() { printf '\n==== %s (%ss)\n' "$*" $(($(date +%s) - T0)); }

# record_fail RUN WHAT: a failure that is not a meson test (a build, a crashed runner)
record_fail()
{
	echo "$1 0 1 0" >>"$SUMMARY"
	echo "$1: $2" >>"$FAILURES"
}

# add_counts RUN FILE RC SCRIPT: add a script's count file ("PASSED FAILED SKIPPED", then one
# failed test a line) to the summary; SCRIPT exited RC
add_counts()
{
	local p f s
	if read -r p f s <"$2" 2>/dev/null && [ -n "$s" ]; then
		echo "$1 $p $f $s" >>"$SUMMARY"
		tail -n +2 "$2" | sed "s/^/$1: /" >>"$FAILURES"
		if [ "$f" = 0 ] && [ "$3" != 0 ]; then
			record_fail "$1" "$4 exited $3 although no test failed"
		fi
	else
		record_fail "$1" "$4 exited $3 without reporting its counts"
	fi
}

# count_testlog RUN JSONLOG: add meson's per-test results of one run to the summary
count_testlog()
{
	/usr/bin/python3 - "$1" "$2" >>"$SUMMARY" 2>>"$FAILURES" <<'EOF' ||
import json, sys
run, path = sys.argv[1], sys.argv[2]
passed = failed = skipped = 0
try:
	lines = open(path).read().splitlines()
except OSError:
	lines = []
for line in lines:
	try:
		t = json.loads(line)
	except ValueError:
		continue
	res = t.get('result', '')
	if res in ('OK', 'EXPECTEDFAIL'):
		passed += 1
	elif res == 'SKIP':
		skipped += 1
	else:  # FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS, INTERRUPT
		failed += 1
		print('%s: %s (%s)' % (run, t.get('name', '?'), res), file=sys.stderr)
print(run, passed, failed, skipped)
EOF
		record_fail "$1" "could not read the test log $2"
}

# setup_build DIR MESON_OPTIONS...: configure DIR (reconfigure when it exists) and build it
setup_build()
{
	local dir=$1
	shift
	if [ -f "$dir/meson-private/coredata.dat" ]; then
		meson setup --reconfigure "$dir" "$@" || meson setup --wipe "$dir" "$@"
	else
		rm -rf "$dir"
		meson setup "$dir" "$@"
	fi || return 1
	ninja -C "$dir"
}

# run_meson_test RUN DIR MESON_TEST_ARGS...: one meson test run, logged as meson-logs/RUN.json
# (meson names it RUN-<wrapper>.json when --wrapper is given)
run_meson_test()
{
	local run=$1 dir=$2 rc log
	shift 2
	rm -f "$dir/meson-logs/$run".*json "$dir/meson-logs/$run"-*.json
	meson test -C "$dir" --no-rebuild --print-errorlogs --logbase "$run" "$@"
	rc=$?
	log=$(ls "$dir/meson-logs/$run.json" "$dir/meson-logs/$run"-*.json 2>/dev/null | head -1)
	if [ -z "$log" ]; then
		if [ $rc != 0 ]; then
			record_fail "$run" "meson test exited $rc without a test log"
		else
			echo "$run 0 0 0" >>"$SUMMARY"
		fi
		return
	fi
	count_testlog "$run" "$log"
	# a runner that failed although every test it logged passed (a crash, an interrupt)
	if [ $rc != 0 ] && [ "$(tail -1 "$SUMMARY" | cut -d' ' -f3)" = 0 ]; then
		record_fail "$run" "meson test exited $rc"
	fi
}

# the suites defined in DIR, one a line (from `meson introspect --tests`)
suites_of()
{
	meson introspect --tests "$1" | /usr/bin/python3 -c '
import json, sys
names = set()
for t in json.load(sys.stdin):
	for s in t["suite"]:
		names.add(s.split(":")[-1])
print("\n".join(sorted(names)))'
}

banner "dependencies"
groups=(build test)
{ [ $do_rdma = 1 ] || [ $do_systemd = 1 ]; } && groups+=(vm)
"$ROOT/scripts/deps.sh" "${groups[@]}" || { echo "test.sh: installing dependencies failed" >&2; exit 1; }

banner "build: $BUILD"
if setup_build "$BUILD" -Dwerror=true; then
	banner "tests: main (all suites but rdma)"
	run_meson_test main "$BUILD" --no-suite rdma --no-suite uring-channel

	banner "tests: uring (the fs files again over the FUSE ring)"
	run_meson_test uring "$BUILD" --suite uring-channel

	if [ $do_valgrind = 1 ] && suites_of "$BUILD" | grep -qx unit; then
		banner "tests: valgrind (unit suite under memcheck)"
		run_meson_test valgrind "$BUILD" --suite unit --timeout-multiplier 4 \
			--wrapper "valgrind --quiet --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --track-origins=yes"
	fi
else
	record_fail main "configuring or building $BUILD failed (see above)"
fi

if [ $do_asan = 1 ]; then
	banner "build: $ASAN_BUILD (ASan + UBSan)"
	if setup_build "$ASAN_BUILD" -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false; then
		export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
		export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
		# the fuzz test's 2000 damaged pools run in the main build; here 500 (a seed of
		# their own) look for the loaders' memory errors (58 s at 1000 in CI22); the member
		# set tests run at half their sizes (RMEM_TEST_SCALE): the same code paths under the
		# sanitizers, the full sizes run in the main build. Both keep CI near its 30 minutes
		export RMEMFS_FUZZ_CASES=${RMEMFS_FUZZ_CASES:-500}
		export RMEM_TEST_SCALE=${RMEM_TEST_SCALE:-0.5}
		args=()
		have=$(suites_of "$ASAN_BUILD")
		for s in $ASAN_SUITES; do
			grep -qx "$s" <<<"$have" && args+=(--suite "$s")
		done
		banner "tests: asan (${ASAN_SUITES// /, } suites)"
		if [ ${#args[@]} -gt 0 ]; then
			run_meson_test asan "$ASAN_BUILD" --timeout-multiplier 3 "${args[@]}"
		else
			echo "test.sh: no ${ASAN_SUITES} tests are defined yet"
			echo "asan 0 0 0" >>"$SUMMARY"
		fi
		unset ASAN_OPTIONS UBSAN_OPTIONS RMEMFS_FUZZ_CASES RMEM_TEST_SCALE
	else
		record_fail asan "configuring or building $ASAN_BUILD failed (see above)"
	fi
fi

if [ $do_package = 1 ]; then
	banner "tests: package (Debian packages)"
	RMEMFS_PACKAGE_RESULTS=$WORK/package.counts "$ROOT/scripts/package.sh" --out "$ROOT/build-deb"
	rc=$?
	add_counts package "$WORK/package.counts" $rc package.sh
fi

if [ $do_systemd = 1 ]; then
	banner "tests: systemd (the unit and an fstab mount in a systemd guest, across a reboot)"
	debs=""
	[ $do_package = 1 ] && debs=$ROOT/build-deb
	RMEMFS_SYSTEMD_RESULTS=$WORK/systemd.counts RMEMFS_SYSTEMD_DEBS=$debs \
		"$ROOT/scripts/test-systemd.sh" "$BUILD"
	rc=$?
	add_counts systemd "$WORK/systemd.counts" $rc test-systemd.sh
fi

if [ $do_rdma = 1 ]; then
	banner "tests: rdma (soft-RoCE guest)"
	RMEMFS_RDMA_RESULTS=$WORK/rdma.counts "$ROOT/scripts/test-rdma.sh" "$BUILD"
	rc=$?
	add_counts rdma "$WORK/rdma.counts" $rc test-rdma.sh
fi

banner "summary"
/usr/bin/python3 - "$SUMMARY" "$FAILURES" <<'EOF'
import sys
runs, total = {}, [0, 0, 0]
for line in open(sys.argv[1]):
	f = line.split()
	if len(f) != 4:
		continue
	c = runs.setdefault(f[0], [0, 0, 0])
	for i in range(3):
		c[i] += int(f[i + 1])
		total[i] += int(f[i + 1])
for run, (p, f, s) in runs.items():
	print('  %-10s %4d passed, %d failed, %d skipped' % (run, p, f, s))
fails = [l.rstrip() for l in open(sys.argv[2]) if l.strip()]
if fails:
	print('  failed:')
	for l in fails:
		print('    ' + l)
line = '%d passed, %d failed' % (total[0], total[1])
if total[2]:
	line += ', %d skipped' % total[2]
print(line)
sys.exit(1 if total[1] else 0)
EOF
