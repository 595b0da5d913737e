#!/bin/sh
# Rejects calls that must never appear in code that runs inside the host:
# stdio that writes to the host's streams, unsafe string parsing, and
# scattered configuration reads.  Prints "lint: N passed, N failed".
cd "$(dirname "$0")/.." || exit 1
fail=0
check() {  # description, grep -E pattern, files...
	desc=$1; pat=$2; shift 2
	hits=$(grep -nE "$pat" "$@" 2>/dev/null | grep -v 'lint: allow')
	if [ -n "$hits" ]; then
		echo "lint: $desc:"; echo "$hits"; fail=$((fail + 1))
	fi
}
src=$(ls common/*.c shim/*.c symbolize/*.c uploader/*.c trace/*.c init/*.c)
check "getenv outside common/config.c and init/init.c" '\bgetenv\(' $(echo "$src" | grep -v -e common/config.c -e init/init.c)
check "stdio output to the host's streams" '\b(printf|fprintf|puts|fputs|perror|putchar)\(' $src
check "banned string functions" '\b(strtok|atoi|atol|sprintf|gets|strcpy)\(' $src
check "malloc in the signal-handler files" '\b(malloc|calloc|realloc|free)\(' shim/sampler.c shim/unwind.c shim/stacktab.c shim/livetab.c
# Includes of our own headers name their layer ("common/log.h"); the build
# gives each layer only the include roots below it (Makefile, LAYERS_*).
check "unqualified include of a project header" '#include "[a-z_]+\.h"' $(ls common/* shim/*.[ch] symbolize/*.[ch] uploader/*.[ch] trace/*.[ch] init/*.c)
# The symbolizer's one interface is symbolize/symbols.h: the rest of the
# layer (objects, ELF, DWARF, the symbol cache) is its own business.
check "a symbolizer header other than symbols.h outside symbolize/" \
	'#include "symbolize/([^s]|s[^y]|sy[^m]|sym[^b])' $(ls uploader/*.[ch] init/*.c)
total=6
echo "lint: $((total - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
