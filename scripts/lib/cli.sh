# shellcheck shell=bash
# cli.sh - the command line and the report step bench.sh and farmem.sh share. Sourced before
# they parse their arguments; the caller defines die, usage, PY and REPORT (its report.py, DOC
# and DOC_DIR: the page and figures --update-docs rewrites). Sourcing it sets the shared
# options' defaults.

quick=0 out="" build="" no_build=0 update_docs=0 report_only="" RDMA_ADDR=${RMEM_RDMA_IP:-}

need() { [ $# -ge 2 ] || die "$1 needs a value (see --help)"; }

# shared_opt ARGS...: apply $1, an option every experiment script takes (or fail with the
# usual message); SHARED_SHIFT is how many words it used
shared_opt()
{
	SHARED_SHIFT=1
	case $1 in
	--quick) quick=1 ;;
	--rdma-addr) need "$@"; RDMA_ADDR=$2; SHARED_SHIFT=2 ;;
	--build-dir) need "$@"; build=$2; SHARED_SHIFT=2 ;;
	--no-build) no_build=1 ;;
	--out) need "$@"; out=$2; SHARED_SHIFT=2 ;;
	--update-docs) update_docs=1 ;;
	--report-only) need "$@"; report_only=$2; SHARED_SHIFT=2 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown argument '$1' (see --help)" ;;
	esac
}

# cli_parse ARGS...: the script's own value options (VALUE_OPTS: option -> variable) and the
# shared ones; with --report-only DIR, the report of that earlier run, then exit
cli_parse()
{
	while [ $# -gt 0 ]; do
		if [ -n "$1" ] && [ -n "${VALUE_OPTS[$1]:-}" ]; then
			need "$@"
			printf -v "${VALUE_OPTS[$1]}" '%s' "$2"
			shift 2
		else
			shared_opt "$@"
			shift "$SHARED_SHIFT"
		fi
	done
	[ -n "$report_only" ] || return 0
	[ -f "$report_only/raw/config.tsv" ] ||
		die "$report_only is not a $(basename "$0") results directory"
	report "$report_only"
	exit 0
}

# report DIR: the report of the results in DIR and, with --update-docs, the docs from it
report()
{
	"$PY" "$REPORT" build "$1" || die "report failed"
	[ "$update_docs" = 0 ] || "$PY" "$REPORT" update-docs "$1" "$DOC" "$DOC_DIR" ||
		die "updating ${DOC#"$ROOT"/} failed"
}

