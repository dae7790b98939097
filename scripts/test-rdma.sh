#!/bin/bash
# test-rdma.sh - the RDMA suite on real verbs: soft-RoCE (rdma_rxe) inside a qemu guest.
#
# usage: scripts/test-rdma.sh [BUILDDIR]          (default: build/ under the repo)
#
# On the host: installs what is missing, configures and builds BUILDDIR if needed (it must be
# built with RDMA), then boots the guest with scripts/rdma-vm.sh, BUILDDIR shared read-write
# (meson test writes its logs there and the results come back through it). In the guest,
# with rxe0 on 10.77.0.1:
#   rdma-suite      meson test --suite rdma (the verbs wrappers, the transport over rdma_cm...)
#   rdma-rerun      the transport integration tests (names matching $RMEMFS_RDMA_RERUN,
#                   default ^xport) again with RMEM_TEST_TRANSPORT=rdma
#                   RMEM_TEST_HOST=10.77.0.1
#   rdma-rerun-oob  the same with RMEM_TEST_RDMA_OOB=1 (QPs brought up by hand, parameters
#                   exchanged over TCP; test-xport then runs only its bring-up and teardown
#                   cases)
#   rdma-perf       rmem-perf --transport rdma --verify against a memserver serving RDMA on
#                   10.77.0.1: READ/WRITE over a size sweep, CAS/FETCH_ADD with 2 threads,
#                   READ/WRITE with completion events; then the memserver must exit cleanly
#   rdma-fs         the filesystem tests (suite fs) whose paths depend most on the transport:
#                   fs-random, fs-durability, fs-failure, fs-members (several memservers
#                   on different ports), fs-readers and fs-swap (swap on a loop device over
#                   an rmemfs file, a verified hog at 3x a 32 MiB cgroup2 limit; correctness
#                   only, its lost-member case skips at this scale), fs-ec (erasure-coded
#                   sets: the stripes' I/O, losses, the rebuild by decoding), fs-pools (named
#                   pools of tenants, a set of them, donors=), fs-crashsum (a client killed
#                   while in-place writes and their write-ahead checksums are in flight, with
#                   damaged copies and lost members) ($RMEMFS_RDMA_FS), every mount
#                   using -o transport=rdma, RMEM_TEST_SCALE=0.1 (emulated rxe moves a few
#                   tens of MB/s). The files run in ONE pytest process (cwd, arguments and
#                   environment from meson's definitions of the tests), not one meson test
#                   each: python and pytest's imports take ~6 s a file in the emulated guest.
#                   scripts/lib/pytest_results.py logs each result as it happens, and the
#                   counts are still one a file (a meson test's name): FAIL naming the failed
#                   tests, NOT RUN, INCOMPLETE (stopped in it), SKIP when all of it skipped
# Prints each step's counts and a last line `N passed, N failed` (`, N skipped`), exits
# non-zero on any failure. Where qemu cannot start at all (rdma-vm.sh check), it prints a loud
# SKIP banner and reports every planned test as skipped.
#
# env: RMEMFS_RDMA_RESULTS=FILE  also write "PASSED FAILED SKIPPED" and then the failed tests,
#                                one a line, to FILE (scripts/test.sh adds them up)
#      RMEMFS_RDMA_BUDGET=SECS   time for the guest's steps (default 1800): a step that runs
#                                out of it is stopped (the tests it finished still count)
#                                and counts as a failure, and so does every step left unrun;
#                                the guest is killed at SECS + 150 whatever happens
#      RMEMFS_RDMA_RERUN=REGEX   which integration tests re-run over RDMA (default ^xport)
#      RMEMFS_RDMA_FS=REGEX      which fs-suite tests run over RDMA
#                                (default ^fs-(random|durability|failure|members|readers|swap|ec|pools|footprint|crashsum)$;
#                                . for all)
#      RMEMFS_RDMA_FS_SCALE=F    RMEM_TEST_SCALE of the fs step (default 0.1)
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
RERUN=${RMEMFS_RDMA_RERUN:-^xport}
FS_SCALE=${RMEMFS_RDMA_FS_SCALE:-0.1}
# the filesystem tests whose code paths depend most on the transport: data integrity (random
# reads, writes, truncates, holes, mmap, O_DIRECT), remount / crash / lease (RDMA CAS), sets
# and readers (atomics on every member, a follower's READs of the journal), swap (the daemon's
# locked memory and the RDMA registrations under mlockall, swap-ins and -outs), footprint (the
# cache arena registered chunk by chunk as it grows, deregistered as it gives memory back); the whole suite
# takes about 20 minutes on emulated rxe. fs-model (the namespace model) ran here until
# issue 22: its paths are the metadata layer's, the same over either transport, and its
# 54 s in the guest were what kept CI under 30 minutes (RMEMFS_RDMA_FS=. still runs it).
# In fs-members and fs-ec the tests of the pool layer's logic alone (refusals, capacity,
# records, a crash's intent map, fsck: conftest.py pool_logic_only) skip here: the same code
# runs over TCP in the main and ASan builds; 136 s of fs-members' 207 s in the guest
FS_TESTS=${RMEMFS_RDMA_FS:-^fs-(random|durability|failure|members|readers|swap|ec|pools|footprint|crashsum)$}
RESULTS_FILE=${RMEMFS_RDMA_RESULTS:-}
BUDGET=${RMEMFS_RDMA_BUDGET:-1800}
# the guest's steps get BUDGET seconds; booting, starting and powering off get the rest
VM_TIMEOUT=$((BUDGET + 150))

# list_tests BUILD SELECT: names of the tests meson knows in BUILD; SELECT is "suite" (the rdma
# suite), "rerun" (tests outside it whose name matches $RERUN) or "fs" (the fs suite)
list_tests()
{
	meson introspect --tests "$1" 2>/dev/null | /usr/bin/python3 -c '
import json, re, sys
sel, pat = sys.argv[1], re.compile(sys.argv[2])
for t in json.load(sys.stdin):
	suites = [s.split(":")[-1] for s in t["suite"]]
	if sel == "suite" and "rdma" in suites:
		print(t["name"])
	elif sel == "rerun" and "rdma" not in suites and pat.search(t["name"]):
		print(t["name"])
	elif sel == "fs" and "fs" in suites and re.search(sys.argv[3], t["name"]):
		print(t["name"])' "$2" "$RERUN" "$FS_TESTS"
}

# fs_plan BUILD: how to run the selected fs tests (list_tests BUILD fs) in one pytest process,
# from meson's definitions of them: "env VAR=VALUE" lines (their environment), "arg ARG" lines
# (their command without the file, the same for all of them) and "test NAME FILE" lines
fs_plan()
{
	meson introspect --tests "$1" | /usr/bin/python3 -c '
import json, os, re, sys
tests = [t for t in json.load(sys.stdin)
	 if "fs" in [s.split(":")[-1] for s in t["suite"]] and re.search(sys.argv[1], t["name"])]
if not tests:
	sys.exit(0)
prefix = tests[0]["cmd"][:-1]
for t in tests:
	if t["cmd"][:-1] != prefix or t["env"] != tests[0]["env"] or t["workdir"]:
		sys.exit("test-rdma: %s is not run like %s: cannot share its pytest process"
			 % (t["name"], tests[0]["name"]))
for k, v in sorted(tests[0]["env"].items()):
	print("env %s=%s" % (k, v))
for a in prefix:
	print("arg " + a)
for t in tests:
	print("test %s %s" % (t["name"], os.path.realpath(t["cmd"][-1])))' "$FS_TESTS"
}

# ---------------------------------------------------------------------------- in the guest
# The guest's steps share a time budget ($BUDGET seconds from the start of in_guest): a step
# runs under a timeout of what is left (meson test flushes its log of the tests that finished
# when it gets SIGTERM), and one that runs out is a failure, as is every step left unrun.
remaining() { echo $((DEADLINE - $(date +%s))); }

# budget_exceeded OUT STEP: record that STEP ran out of (or found no) time
budget_exceeded()
{
	echo "test-rdma: $2: the RDMA run's time budget of ${BUDGET} s is used up"
	step_result "$1" "$2" budget-exceeded FAIL
	OVER_BUDGET=1
}

# meson_step BUILD OUT LOGBASE TITLE [VAR=VALUE...] -- TEST...: one meson test run, logged as
# BUILD/meson-logs/LOGBASE.json
meson_step()
{
	local build=$1 out=$2 logbase=$3 title=$4 left rc t0
	local -a envs=()
	shift 4
	while [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	shift
	echo "==== $logbase: $title: $*"
	left=$(remaining)
	if [ "$OVER_BUDGET" = 1 ] || [ "$left" -lt 10 ]; then
		budget_exceeded "$out" "$logbase"
		return
	fi
	t0=$(date +%s)
	timeout -k 30 "$left" env "${envs[@]}" \
		meson test -C "$build" --no-rebuild --print-errorlogs --logbase "$logbase" "$@"
	rc=$?
	echo "test-rdma: $logbase took $(($(date +%s) - t0)) s"
	[ $rc = 124 ] || [ $rc = 137 ] && budget_exceeded "$out" "$logbase"
}

# test-rdma.sh --in-guest BUILD OUT: run the steps listed in OUT/suite, OUT/rerun (test names)
# and OUT/fs-plan (fs_plan's output), leave meson's logs in BUILD/meson-logs and the non-meson
# results as "STEP NAME RESULT" lines in OUT/steps; OUT/finished at the end
in_guest()
{
	local build=$1 out=$2
	local -a names=()
	local rdma_env=(RMEM_TEST_TRANSPORT=rdma "RMEM_TEST_HOST=$RMEM_RDMA_IP")
	DEADLINE=$(($(date +%s) + BUDGET))
	OVER_BUDGET=0
	cd "$ROOT" || exit 1
	: >"$out/steps"
	echo "test-rdma: guest up; $RMEM_RDMA_DEV on $RMEM_RDMA_IP (GID index" \
		"$RMEM_RDMA_GID_INDEX); time budget ${BUDGET} s"

	mapfile -t names <"$out/suite"
	if [ ${#names[@]} -gt 0 ]; then
		meson_step "$build" "$out" rdma-suite "the rdma suite" -- "${names[@]}"
	else
		echo "==== rdma-suite: no test in the rdma suite yet"
	fi

	mapfile -t names <"$out/rerun"
	if [ ${#names[@]} -gt 0 ]; then
		meson_step "$build" "$out" rdma-rerun "over RDMA (rdma_cm)" "${rdma_env[@]}" -- \
			"${names[@]}"
		meson_step "$build" "$out" rdma-rerun-oob \
			"over RDMA (QP parameters exchanged over TCP)" \
			"${rdma_env[@]}" RMEM_TEST_RDMA_OOB=1 -- "${names[@]}"
	else
		echo "==== rdma-rerun: no integration test matches '$RERUN'"
	fi

	perf_verify "$build" "$out"

	# last: the longest step
	fs_step "$build" "$out" "${rdma_env[@]}" "RMEM_TEST_SCALE=$FS_SCALE"
	touch "$out/finished"
}

# fs_step BUILD OUT VAR=VALUE...: the selected fs tests, their files in ONE pytest process
# (with cwd and environment as meson gives them, plus VAR=VALUE...); pytest_results.py writes
# each result to OUT/fs-results as it comes and OUT/fs-tests maps the meson test names to their
# files: the host counts them file by file, as it counted the meson tests. A file per meson
# test cost ~6 s each of interpreter start-up and pytest's imports in the emulated guest.
fs_step()
{
	local build=$1 out=$2 left rc t0 line kind rest
	shift 2
	: >"$out/fs-tests"
	local -a envs=() args=() files=() names=() plan=()
	mapfile -t plan <"$out/fs-plan"
	for line in "${plan[@]}"; do
		kind=${line%% *} rest=${line#* }
		case $kind in
		env) envs+=("$rest") ;;
		arg) args+=("$rest") ;;
		test)
			names+=("${rest%% *}")
			files+=("${rest#* }")
			echo "$rest" >>"$out/fs-tests"
			;;
		*)
			echo "==== rdma-fs: cannot plan one pytest run of the fs tests"
			step_result "$out" rdma-fs plan FAIL
			return
			;;
		esac
	done
	if [ ${#files[@]} = 0 ]; then
		echo "==== rdma-fs: the filesystem suite is not built"
		return
	fi
	echo "==== rdma-fs: the filesystem mounted with -o transport=rdma, one pytest run:" \
		"${names[*]}"
	left=$(remaining)
	if [ "$OVER_BUDGET" = 1 ] || [ "$left" -lt 10 ]; then
		budget_exceeded "$out" rdma-fs
		return
	fi
	t0=$(date +%s)
	(cd "$build" && timeout -k 30 "$left" env "${envs[@]}" "$@" \
		"PYTHONPATH=$ROOT/scripts/lib${PYTHONPATH:+:$PYTHONPATH}" \
		"RMEMFS_PYTEST_RESULTS=$out/fs-results" \
		"${args[@]}" -p pytest_results --continue-on-collection-errors \
		"--durations=$((3 * ${#files[@]}))" "${files[@]}")
	rc=$?
	echo "test-rdma: rdma-fs took $(($(date +%s) - t0)) s (pytest exit $rc)"
	case $rc in
	0 | 1) ;;	# all passed; some failed (named by the counts)
	124 | 137) budget_exceeded "$out" rdma-fs ;;
	*) step_result "$out" rdma-fs "pytest-exit-$rc" FAIL ;;
	esac
}

# one non-meson result: step_result OUT STEP NAME OK|FAIL|SKIP
step_result()
{
	echo "$2 $3 $4" >>"$1/steps"
	echo "test-rdma: $2 / $3: $4"
}

# rmem-perf in verify mode against a memserver serving RDMA on the guest's rxe0
perf_verify()
{
	local build=$1 out=$2 dir ms_pid port rc left
	local perf=$build/tools/rmem-perf memserver=$build/memserver/memserver
	echo "==== rdma-perf: rmem-perf --transport rdma --verify"
	if [ "$OVER_BUDGET" = 1 ] || [ "$(remaining)" -lt 30 ]; then
		budget_exceeded "$out" rdma-perf
		return
	fi
	if [ ! -x "$perf" ] || [ ! -x "$memserver" ]; then
		echo "test-rdma: rdma-perf SKIPPED: $perf or $memserver is not built"
		step_result "$out" rdma-perf rmem-perf SKIP
		return
	fi
	dir=$(mktemp -d)
	head -c 24 /dev/urandom | base64 >"$dir/token"
	G_DEBUG=fatal-warnings "$memserver" --size 64M --listen "$RMEM_RDMA_IP" --port 0 \
		--transport rdma --token-file "$dir/token" >"$dir/ms.out" 2>"$dir/ms.err" &
	ms_pid=$!
	port=""
	for _ in $(seq 300); do
		port=$(grep -o 'on tcp [^ ,]*' "$dir/ms.out" 2>/dev/null | sed 's/.*://')
		[ -n "$port" ] && break
		kill -0 $ms_pid 2>/dev/null || break
		sleep 0.1
	done
	if [ -z "$port" ]; then
		echo "test-rdma: memserver --transport rdma did not become ready:"
		cat "$dir/ms.out" "$dir/ms.err"
		step_result "$out" rdma-perf memserver-ready FAIL
		kill -KILL $ms_pid 2>/dev/null
		wait $ms_pid 2>/dev/null
		rm -rf "$dir"
		return
	fi
	cat "$dir/ms.out"
	# name, then rmem-perf's options: data checked end to end, polling and event modes
	local -a runs=(
		"verify-rw-sweep --op read,write --sweep 8:64K --iters 64 --qd 8"
		"verify-atomics --op cas,fadd --iters 500 --qd 4 --threads 2"
		"verify-rw-event --op write,read --size 4K --iters 200 --qd 4 --threads 2 --poll event"
	)
	local r name
	for r in "${runs[@]}"; do
		name=${r%% *}
		echo "---- rmem-perf ${r#* } --verify"
		left=$(remaining)
		[ "$left" -gt 150 ] && left=150
		if [ "$left" -lt 5 ]; then
			budget_exceeded "$out" rdma-perf
			break
		fi
		# shellcheck disable=SC2086
		timeout -k 5 "$left" "$perf" "$RMEM_RDMA_IP:$port" --transport rdma \
			--token-file "$dir/token" --verify ${r#* }
		rc=$?
		if [ $rc = 0 ]; then
			step_result "$out" rdma-perf "$name" OK
		else
			echo "test-rdma: rmem-perf ($name) exited $rc"
			step_result "$out" rdma-perf "$name" FAIL
		fi
	done
	kill -TERM $ms_pid
	for _ in $(seq 100); do
		kill -0 $ms_pid 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL $ms_pid 2>/dev/null
	wait $ms_pid
	rc=$?
	if [ $rc = 0 ]; then
		step_result "$out" rdma-perf memserver-clean-exit OK
	else
		echo "test-rdma: memserver exited $rc after SIGTERM; its stderr:"
		cat "$dir/ms.err"
		step_result "$out" rdma-perf memserver-clean-exit FAIL
	fi
	rm -rf "$dir"
}

if [ "${1:-}" = --in-guest ]; then
	# in a subshell: a shell error in a step must not fall through to the host part below
	(in_guest "$2" "$3")
	exit 0	# the results are in the files; a step that failed is counted there
fi

# ------------------------------------------------------------------------------- on the host
BUILD=${1:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
T0=$(date +%s)
PASSED=0 FAILED=0 SKIPPED=0
FAILED_NAMES=()

# shellcheck source=lib/counts.sh
. "$ROOT/scripts/lib/counts.sh"
report() { counts_report test-rdma; }

host_fail()
{
	echo "test-rdma: $2" >&2
	FAILED=$((FAILED + 1))
	FAILED_NAMES+=("$1 ($2)")
	report
}

"$ROOT/scripts/deps.sh" build test vm || host_fail deps "installing dependencies failed"

if [ ! -f "$BUILD/meson-private/coredata.dat" ]; then
	meson setup "$BUILD" "$ROOT" || host_fail build "meson setup $BUILD failed"
fi
ninja -C "$BUILD" || host_fail build "building $BUILD failed"
grep -q '^#define RMEM_HAVE_RDMA 1' "$BUILD/config.h" ||
	host_fail build "$BUILD is built without RDMA (rdma-core's -dev packages missing?)"

# what the guest runs, listed here: meson (python) takes ~6 s a start in the emulated guest
OUT=$BUILD/rdma-results
rm -rf "$OUT"
mkdir -p "$OUT"
list_tests "$BUILD" suite >"$OUT/suite"
list_tests "$BUILD" rerun >"$OUT/rerun"
fs_plan "$BUILD" >"$OUT/fs-plan" || echo "failed" >"$OUT/fs-plan"
nsuite=$(wc -l <"$OUT/suite")
nrerun=$(wc -l <"$OUT/rerun")
nfs=$(grep -c '^test ' "$OUT/fs-plan")

if ! "$ROOT/scripts/rdma-vm.sh" check; then
	SKIPPED=$((nsuite + 2 * nrerun + 4 + nfs))
	cat <<EOF

##########################################################################################
##  SKIPPED: THE RDMA SUITE DID NOT RUN
##  qemu cannot start on this machine (scripts/rdma-vm.sh check failed, see above), so
##  the soft-RoCE guest cannot boot: $SKIPPED RDMA test(s) are reported as skipped.
##  Nothing here says the RDMA path works.
##########################################################################################

EOF
	report
fi

"$ROOT/scripts/rdma-vm.sh" setup || host_fail vm-setup "rdma-vm.sh setup failed"

for log in rdma-suite rdma-rerun rdma-rerun-oob rdma-fs; do
	rm -f "$BUILD/meson-logs/$log.json" "$BUILD/meson-logs/$log.txt"
done

echo "test-rdma: booting the guest (timeout ${VM_TIMEOUT} s)"
(cd "$ROOT" && "$ROOT/scripts/rdma-vm.sh" run -t "$VM_TIMEOUT" -w "$BUILD" \
	-e "RMEMFS_RDMA_BUDGET=$BUDGET" -- \
	"$ROOT/scripts/test-rdma.sh" --in-guest "$BUILD" "$OUT")
vmrc=$?

# the results: meson's JSON logs of the meson steps, then the steps file (rmem-perf, steps
# that ran out of time)
echo "test-rdma: results"
counts=$(/usr/bin/python3 - "$BUILD/meson-logs" "$OUT" <<'EOF'
import json, os, sys
logs, out = sys.argv[1], sys.argv[2]
steps = os.path.join(out, 'steps')
per_step = {}
failed = []
def add(step, name, res):
	c = per_step.setdefault(step, [0, 0, 0])
	if res in ('OK', 'EXPECTEDFAIL'):
		c[0] += 1
	elif res == 'SKIP':
		c[2] += 1
	else:  # FAIL, TIMEOUT, ERROR, UNEXPECTEDPASS, INTERRUPT; budget-exceeded steps
		c[1] += 1
		failed.append('%s: %s (%s)' % (step, name, res))
def lines(path):
	try:
		return open(path).read().splitlines()
	except OSError:
		return []
# rdma-fs: one pytest run of several files, counted file by file (each file a meson test):
# FAIL naming its failed tests, or not run, or incomplete (stopped in it), SKIP if all skipped
def base(nodeid):
	return os.path.basename(nodeid.split('::')[0])
def count_fs():
	recs, collected = {}, None
	for line in lines(os.path.join(out, 'fs-results')):
		try:
			r = json.loads(line)
		except ValueError:
			continue
		if 'collected' in r:
			collected = r['collected']
		else:
			recs.setdefault(base(r['nodeid']), []).append(r)
	for line in lines(os.path.join(out, 'fs-tests')):
		name, path = line.split(' ', 1)
		rs = recs.get(os.path.basename(path), [])
		bad = sorted({'%s %s' % (r['nodeid'].split('::')[-1], r['when'])
			      for r in rs if r['outcome'] == 'failed'})
		items = [n for n in collected or [] if base(n) == os.path.basename(path)]
		done = {r['nodeid'] for r in rs if r['when'] == 'call' or r['outcome'] == 'skipped'}
		if bad:
			add('rdma-fs', name, 'FAIL: ' + ', '.join(bad))
		elif collected is None:
			add('rdma-fs', name, 'NOT RUN')
		elif not items:
			add('rdma-fs', name, 'NO TESTS COLLECTED')
		elif not set(items) <= done:
			add('rdma-fs', name, 'INCOMPLETE: %d of %d tests ran' % (len(done), len(items)))
		elif all(r['outcome'] == 'skipped' for r in rs):
			add('rdma-fs', name, 'SKIP')
		else:
			add('rdma-fs', name, 'OK')
for step in ('rdma-suite', 'rdma-rerun', 'rdma-rerun-oob'):
	path = os.path.join(logs, step + '.json')
	if not os.path.exists(path):
		continue
	for line in open(path):
		try:
			t = json.loads(line)
		except ValueError:
			continue
		add(step, t.get('name', '?'), t.get('result', '?'))
count_fs()
if os.path.exists(steps):
	for line in open(steps):
		f = line.split()
		if len(f) == 3:
			add(f[0], f[1], f[2])
total = [0, 0, 0]
for step, c in per_step.items():
	print('  %-15s %d passed, %d failed, %d skipped' % (step, c[0], c[1], c[2]),
	      file=sys.stderr)
	for i in range(3):
		total[i] += c[i]
print(*total)
for f in failed:
	print(f)
EOF
)
countrc=$?
read -r PASSED FAILED SKIPPED <<<"$(head -1 <<<"$counts")"
mapfile -t FAILED_NAMES < <(tail -n +2 <<<"$counts")
# a count that could not be made, or that found nothing at all, is a failure, never "0 failed"
if [ $countrc != 0 ] || ! [[ "$PASSED $FAILED $SKIPPED" =~ ^[0-9]+\ [0-9]+\ [0-9]+$ ]]; then
	PASSED=0 FAILED=1 SKIPPED=0
	FAILED_NAMES=("results (counting them failed: exit $countrc)")
elif [ $((PASSED + FAILED + SKIPPED)) = 0 ]; then
	FAILED=1
	FAILED_NAMES=("results (no test result was found)")
fi
if [ $vmrc != 0 ]; then
	case $vmrc in
	124) why="the guest timed out after ${VM_TIMEOUT} s" ;;
	125) why="the VM harness failed" ;;
	*) why="the guest's test script exited $vmrc" ;;
	esac
	echo "test-rdma: $why" >&2
	FAILED=$((FAILED + 1))
	FAILED_NAMES+=("vm ($why)")
fi
if [ ! -f "$OUT/finished" ]; then
	FAILED=$((FAILED + 1))
	FAILED_NAMES+=("vm (the guest did not finish its steps)")
fi
for n in "${FAILED_NAMES[@]}"; do
	echo "  failed: $n"
done
rm -rf "$OUT"
report
