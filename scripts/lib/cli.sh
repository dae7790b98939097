# shellcheck shell=bash
# cli.sh - the command-line options bench.sh and farmem.sh share. Sourced before they parse
# their arguments; the caller defines die and usage. Sourcing it sets the shared options'
# defaults.

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
