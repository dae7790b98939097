# shellcheck shell=bash
# counts.sh - how a test script that is one run of scripts/test.sh (test-rdma.sh,
# test-systemd.sh) ends: its time, its last line `N passed, N failed[, N skipped]`, and the
# count file test.sh reads. The caller sets T0 (its start, date +%s), PASSED, FAILED, SKIPPED,
# FAILED_NAMES (an array) and RESULTS_FILE (may be empty).

# counts_report WHO: print "WHO: done in N s" and the counts line; with RESULTS_FILE, write
# "PASSED FAILED SKIPPED" and then the failed names, one a line, to it; exit 0 iff none failed
counts_report()
{
	local line="$PASSED passed, $FAILED failed"
	[ "$SKIPPED" -gt 0 ] && line+=", $SKIPPED skipped"
	if [ -n "$RESULTS_FILE" ]; then
		{
			echo "$PASSED $FAILED $SKIPPED"
			[ ${#FAILED_NAMES[@]} -gt 0 ] && printf '%s\n' "${FAILED_NAMES[@]}"
		} >"$RESULTS_FILE"
	fi
	echo "$1: done in $(($(date +%s) - T0)) s"
	echo "$line"
	[ "$FAILED" = 0 ]
	exit $?
}
