#!/bin/sh
# build.sh -- compile the benchmark workloads bench/*.c into build/bench/.
#
# Same flags as the integration-test workloads (test/prog), plus
# -fno-optimize-sibling-calls so recursion stays DEPTH real frames deep and
# -fno-builtin-malloc/-free so the compiler cannot remove malloc/free pairs.
# Rebuilds a program only when its source is newer; run from anywhere.
set -eu
cd "$(dirname "$0")/.."
CC=${CC:-cc}
mkdir -p build/bench
flags="-D_GNU_SOURCE -std=gnu11 -O1 -g -fno-omit-frame-pointer -fno-inline
    -fno-optimize-sibling-calls -fno-builtin-malloc -fno-builtin-free
    -pthread -Wall -Wextra -Werror"
so_flags="-D_GNU_SOURCE -std=c11 -O2 -g -fPIC -fvisibility=hidden -shared
    -Wall -Wextra -Werror"
for src in bench/*.c; do
	name=$(basename "$src" .c)
	case $name in
	idle_thread) out=build/bench/libidle_thread.so f="$flags -shared -fPIC" ;;
	# The floor the shim is compared with: built as the shim is built.
	bare_interposer) out=build/bench/libbare_interposer.so f="$so_flags" ;;
	# Section 14o's floor for a CPU sampler in process trees.
	min_sampler) out=build/bench/libmin_sampler.so f="$so_flags -pthread" ;;
	# Section 13's floor for the waiting calls, and the slot prototype.
	bare_wait_interposer | slot_wait_interposer)
		out=build/bench/lib$name.so f="$so_flags -pthread" ;;
	*) out=build/bench/$name f=$flags ;;
	esac
	if [ ! -e "$out" ] || [ "$src" -nt "$out" ]; then
		# shellcheck disable=SC2086 # flags are words on purpose
		$CC $f "$src" -o "$out" -lm -ldl
	fi
done
