#!/bin/sh
# `make check`: lint, unit tests, the unit tests under sanitizers and
# valgrind, a short fuzzing run, a smoke run of the benchmarks, integration
# tests; then one closing line
# "check: N passed, N failed" counting the suites.
cd "$(dirname "$0")/.." || exit 1
pass=0; fail=0
run() {
	if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); fi
}
run sh test/lint.sh
run make -s layers
run make -s sigsafe
run sh test/run-unit.sh "$@"
run make -s sanitize
run make -s fuzz-smoke
run make -s bench-smoke
run python3 test/integration/run.py
echo "check: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
