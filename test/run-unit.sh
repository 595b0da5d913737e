#!/bin/sh
# Runs every check(3) unit-test binary given as arguments and prints one
# closing line "N passed, N failed" counting test binaries.
pass=0; fail=0
for t in "$@"; do
	if CK_DEFAULT_TIMEOUT=60 "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAILED: $t"; fi
done
echo "unit: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
