#!/bin/sh
# run.sh -- run pyroshim's benchmarks against the anchors (BENCHMARKS.md).
#
#   sh bench/run.sh           full run (about 18 minutes on the 2-core VM);
#                             installs the anchor tools with apt-get first
#   sh bench/run.sh --smoke   tiny sizes, every path once, < 60 s; installs
#                             nothing (it runs inside make check): a missing
#                             tool is reported as "not measured: why"
#
# Expects shim/libpyroshim.so, shim/libpyroshim-bench.so, examples/ and
# build/prog/ to be built (make bench does that); builds bench/*.c itself.
# Results: standard output, build/bench/results.md and results.json.
set -eu
cd "$(dirname "$0")/.."

smoke=
case "${1:-}" in
--smoke) smoke=--smoke ;;
"") ;;
*) echo "usage: sh bench/run.sh [--smoke]" >&2; exit 2 ;;
esac

# The anchors, by Debian package name (checked with apt-cache policy):
#   google-perftools libgoogle-perftools-dev  libprofiler.so, libtcmalloc.so
#   heaptrack  linux-perf  valgrind  python3.11-dbg (a large binary with full DWARF)
# hyperfine is not needed: bench.py times every run itself with wait4.
PKGS="google-perftools libgoogle-perftools-dev heaptrack linux-perf valgrind python3.11-dbg"
if [ -z "$smoke" ]; then
	missing=
	for p in $PKGS; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' ||
			missing="$missing $p"
	done
	if [ -n "$missing" ]; then
		echo "bench: installing$missing" >&2
		# Not fatal: what cannot be installed is reported by bench.py
		# as "not measured: why".
		# shellcheck disable=SC2086 # one word per package, on purpose
		if [ "$(id -u)" = 0 ]; then
			apt-get install -y $missing >&2 || echo "bench: apt-get install failed" >&2
		else
			sudo -n apt-get install -y $missing >&2 || echo "bench: cannot install$missing (not root)" >&2
		fi
	fi
fi

for f in shim/libpyroshim.so shim/libpyroshim-bench.so examples/generator \
	build/prog/cpu_split build/prog/spin; do
	[ -e "$f" ] || { echo "bench: $f missing; run make bench" >&2; exit 1; }
done
sh bench/build.sh
exec python3 bench/bench.py $smoke
