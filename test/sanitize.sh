#!/bin/sh
# `make sanitize`: run the unit tests under ASan+UBSan and under valgrind
# memcheck, and the ThreadSanitizer hammer of the lock-free tables; print
# one closing line "sanitize: N passed, N failed".
#
#   sh test/sanitize.sh --asan BIN... --valgrind BIN... --tsan BIN...
#
# CK_FORK=no runs every check(3) case in the test's own process, so the
# sanitizer sees all of it and a report fails the binary (in fork mode a
# report in a child would only fail that case, and valgrind would not
# follow the case into the child at all).  Every run has a timeout.
cd "$(dirname "$0")/.." || exit 1
# The cases' own timeouts (tcase_set_timeout) are for a run at full
# speed: valgrind runs the symbol cache's DWARF walks of libc 20-50 times
# slower, and on a busy 2-core machine they passed 120 s.
export CK_FORK=no CK_DEFAULT_TIMEOUT=300 CK_TIMEOUT_MULTIPLIER=4
# Stop at the first report with a non-zero status; leaks count (LSan).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
pass=0; fail=0; mode=
log=build/sanitize.log
mkdir -p build
: > "$log"

run() {
	label=$1
	shift
	if timeout 1500 "$@" >> "$log" 2>&1; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "sanitize: FAILED: $label $* (see $log)"
	fi
}

for arg in "$@"; do
	case $arg in
	--asan|--valgrind|--tsan) mode=${arg#--}; continue ;;
	esac
	echo "== $mode $arg" >> "$log"
	case $mode in
	asan) run asan "$arg" ;;
	# definite and possible leaks are errors; still-reachable ones
	# (check's and libc's globals at exit) are not.
	valgrind) run valgrind valgrind --quiet --error-exitcode=1 \
		--leak-check=full --errors-for-leak-kinds=definite,possible \
		"$arg" ;;
	tsan) run tsan "$arg" ;;
	*) echo "sanitize: $arg: no --asan/--valgrind/--tsan before it" >&2; exit 2 ;;
	esac
done
grep -h -E '^tsan_tables:|^SUMMARY:' "$log"
echo "sanitize: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
