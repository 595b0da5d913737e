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
for src in bench/*.c; do
	name=$(basename "$src" .c)
	case $name in
	idle_thread) out=build/bench/libidle_thread.so extra="-shared -fPIC" ;;
	*) out=build/bench/$name extra= ;;
	esac
	if [ ! -e "$out" ] || [ "$src" -nt "$out" ]; then
		# shellcheck disable=SC2086 # flags are words on purpose
		$CC $flags $extra "$src" -o "$out" -lm
	fi
done
