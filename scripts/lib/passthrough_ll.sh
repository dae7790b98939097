# shellcheck shell=bash
# passthrough_ll.sh - libfuse's example passthrough_ll, the FUSE ceiling both experiments
# measure rmemfs against: scripts/bench.sh mounts it as a filesystem target, scripts/farmem.sh
# puts a swap file on it. Built here from the source Debian's libfuse3-dev ships; mounted by
# passthrough_ll_mount in scripts/bench/targets.sh, which both scripts source. Sourced; the
# caller defines BUILD, and record_cmd (scripts/bench/targets.sh) before it calls anything.

PT_SRC=/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c
PT_BIN=""

# passthrough_ll_build TARGET: compile PT_SRC into $BUILD/bench/passthrough_ll when that is
# missing or older than its source, record the command for TARGET, set PT_BIN; 0, or 1 with
# a message on stderr (PT_BIN stays empty)
passthrough_ll_build()
{
	local target=$1 bin=$BUILD/bench/passthrough_ll flags cmd
	[ -f "$PT_SRC" ] || { echo "$PT_SRC missing (libfuse3-dev ships it)" >&2; return 1; }
	flags=$(pkg-config --cflags --libs fuse3) || { echo "pkg-config fuse3 failed" >&2; return 1; }
	read -r -a flags <<<"$flags"
	cmd=(gcc -O2 -o "$bin" "$PT_SRC" "${flags[@]}")
	if [ ! -x "$bin" ] || [ "$PT_SRC" -nt "$bin" ]; then
		if ! mkdir -p "$BUILD/bench" || ! "${cmd[@]}"; then
			echo "building passthrough_ll failed: $(shquote "${cmd[@]}")" >&2
			return 1
		fi
	fi
	record_cmd "$target" build "${cmd[@]}"
	PT_BIN=$bin
	echo "passthrough_ll: $PT_BIN (from $PT_SRC, libfuse $(pkg-config --modversion fuse3))"
}
