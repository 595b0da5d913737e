#!/bin/sh
# Run libFuzzer targets for a bounded time each, two at a time (the CI
# machine has 2 cores), and print one closing line "fuzz: N passed, N failed".
#
#   sh test/fuzz/run.sh SECONDS build/fuzz/fuzz_NAME...
#
# Each target starts from its seed corpus test/fuzz/corpus/NAME (read only:
# new inputs go to build/fuzz/work/NAME, so a run never dirties the tree)
# and uses test/fuzz/NAME.dict when there is one.  A crash or a broken
# invariant leaves its input in build/fuzz/artifacts/ and the log in
# build/fuzz/NAME.log; minimise it with `BIN -minimize_crash=1 -runs=10000
# FILE` and add it to the corpus as a regression case.
cd "$(dirname "$0")/../.." || exit 1
secs=${1:?usage: run.sh SECONDS BINARY...}
shift
mkdir -p build/fuzz/artifacts
res=build/fuzz/results.$$
: > "$res"

one() {
	bin=$1
	name=${bin##*/fuzz_}
	corpus=test/fuzz/corpus/$name
	work=build/fuzz/work/$name
	log=build/fuzz/$name.log
	mkdir -p "$work" "$corpus"
	set -- -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix=build/fuzz/artifacts/"$name"- -print_final_stats=1
	[ -f test/fuzz/"$name".dict ] && set -- "$@" -dict=test/fuzz/"$name".dict
	# The outer timeout only guards against a hang of libFuzzer itself:
	# -max_total_time stops fuzzing, -timeout stops one slow input.
	if timeout $((secs + 60)) "$bin" "$@" "$work" "$corpus" > "$log" 2>&1; then
		execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
		echo "fuzz: $name: ok, ${execs:-?} runs in ${secs}s"
		echo pass >> "$res"
	else
		echo "fuzz: $name: FAILED (log $log)"
		grep -E 'ERROR|invariant broken|SUMMARY|Test unit written' "$log" | head -5
		echo fail >> "$res"
	fi
}

# Two at a time: start a pair, wait for both.
while [ $# -gt 0 ]; do
	one "$1" &
	if [ $# -gt 1 ]; then
		one "$2" &
		shift
	fi
	shift
	wait
done
pass=$(grep -c pass "$res")
fail=$(grep -c fail "$res")
rm -f "$res"
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
