#!/bin/sh
# Shows that a wrong-way include fails the build: for every layer L and
# every layer M, a probe file in L that includes a header of M must compile
# exactly when the Makefile lets L use M (arguments "L:M1 M2 ...", from
# LAYERS_* in the Makefile).  Prints "layers: N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
all=""
for spec in "$@"; do all="$all ${spec%%:*}"; done
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
for spec in "$@"; do
	layer=${spec%%:*}; allowed=" ${spec#*:} "
	for other in $all; do
		hdr=$(ls "$other"/*.h 2>/dev/null | head -n 1)
		[ -n "$hdr" ] || continue
		printf '#include "%s"\n' "$hdr" > "$tmp/probe.c"
		if cc -D_GNU_SOURCE -DPS_VERSION=\"probe\" -std=c11 -fsyntax-only -Ibuild/inc/"$layer" -Ibuild/gen \
		      "$tmp/probe.c" 2>/dev/null; then got=yes; else got=no; fi
		case $allowed in *" $other "*) want=yes ;; *) want=no ;; esac
		if [ "$got" = "$want" ]; then
			pass=$((pass + 1))
		else
			fail=$((fail + 1))
			echo "layers: $layer including $hdr: compiled=$got, allowed=$want"
		fi
	done
done
echo "layers: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
