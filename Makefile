# pyroshim top-level build.  `make` builds shim/libpyroshim.so and the
# examples; `make check` runs every test; `make bench` runs the benchmarks.
#
# Layout rules the wildcards below rely on:
#   common/ shim/ trace/ symbolize/ uploader/ init/ *.c -> objects of libpyroshim.so
#   shim/hook_*.c, init/init.c        -> define interposed libc symbols or the
#                                        constructor; kept OUT of the core
#                                        archive that unit tests link, so a
#                                        test binary never interposes its own
#                                        malloc or starts the profiler.
#   uploader/*.proto                  -> nanopb code generated in build/gen
#
# Layers (README, "Architecture"): each directory compiles with the include
# root of the layers it may use and no other, so a wrong-way include is a
# build error.  build/inc/<dir>/ holds one symlink per allowed layer and is
# the only -I a layer gets; includes are written "layer/file.h".
#   common    -> (nothing of ours)
#   trace     -> common
#   shim      -> common
#   symbolize -> common, shim         (shim/gopclntab.h: Go's function table)
#   uploader  -> common, shim, trace, symbolize   (+ build/gen, its nanopb code)
#   init     -> everything: the one file that wires the layers together
#   test/check_<module>.c             -> one check(3) unit-test binary each
#   test/prog/*.c, *.cc               -> workloads the integration tests run
#   examples/*.c                      -> demo programs

CC      ?= cc
CXX     ?= c++
PREFIX  ?= /usr/local
DESTDIR ?=

# The version, said once: VERSION.  The C code gets it as PS_VERSION, the
# installed pyrorun and man pages get it substituted for @VERSION@.
VERSION := $(shell cat VERSION)
WARN     = -Wall -Wextra -Werror
# Tests, fuzzers and benchmarks see every layer.
CPPFLAGS = -D_GNU_SOURCE -DPS_VERSION='"$(VERSION)"' -I. -Ibuild/gen
LAYERS_common    = common
LAYERS_trace     = common trace
LAYERS_shim      = common shim
LAYERS_symbolize = common shim symbolize
LAYERS_uploader  = common shim trace symbolize uploader
LAYERS_init      = common shim trace symbolize uploader
layer_of = $(firstword $(subst /, ,$(1)))
LAYER_CPPFLAGS = -D_GNU_SOURCE -DPS_VERSION='"$(VERSION)"' -Ibuild/inc/$(call layer_of,$(1)) \
		 $(if $(filter uploader init,$(call layer_of,$(1))),-Ibuild/gen)
DEPFLAGS = -MMD -MP
CFLAGS   = -std=c11 -O2 -g -fPIC -pthread -fvisibility=hidden $(WARN)
LIBS     = -ldl -lprotobuf-nanopb -pthread
# zlib for the tests that inflate what the uploader compressed (the library
# loads it only in the uploader: common/gzip.h).
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt) -lz

PROTOS   = $(wildcard uploader/*.proto)
GEN_C    = $(patsubst %.proto,build/gen/%.pb.c,$(notdir $(PROTOS)))
GEN_H    = $(GEN_C:.c=.h)
LAYERS   = common shim trace symbolize uploader init
LIB_SRC  = $(foreach d,$(LAYERS),$(wildcard $(d)/*.c))
HEADERS  = $(foreach d,$(LAYERS),$(wildcard $(d)/*.h))
INC_DIRS = $(LAYERS:%=build/inc/%/.ok)
LIB_OBJ  = $(LIB_SRC:%.c=build/%.o) $(GEN_C:build/gen/%.c=build/gen/%.o)
CORE_OBJ = $(filter-out build/shim/hook_%.o build/init/init.o,$(LIB_OBJ))
TESTS    = $(patsubst test/%.c,build/test/%,$(wildcard test/check_*.c))
PROGS    = $(patsubst test/prog/%.c,build/prog/%,$(wildcard test/prog/*.c)) \
           $(patsubst test/prog/%.cc,build/prog/%,$(wildcard test/prog/*.cc))
PROGS   += build/prog/gogen build/prog/gogen-stripped build/prog/goleaf build/prog/lines
EXAMPLES = $(patsubst examples/%.c,examples/%,$(wildcard examples/*.c))

SO = shim/libpyroshim.so
# pyrorun's question to the library's traceparent rules (scripts/traceparent.c).
TP_TOOL = build/pyroshim-traceparent

.PHONY: all check unit integration bench install uninstall clean lint layers fuzz
all: $(SO) $(TP_TOOL) $(EXAMPLES)

build/gen/%.pb.c build/gen/%.pb.h: uploader/%.proto $(wildcard uploader/*.options)
	@mkdir -p build/gen
	cd uploader && nanopb_generator.py -q -D ../build/gen $(notdir $<)

build/gen/%.o: build/gen/%.c
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-error -c $< -o $@

# One include root per layer: a symlink for each layer it may use.
build/inc/%/.ok: Makefile
	@rm -rf build/inc/$* && mkdir -p build/inc/$*
	@for d in $(LAYERS_$*); do ln -s ../../../$$d build/inc/$*/$$d; done
	@touch $@

build/%.o: %.c $(GEN_H) $(INC_DIRS)
	@mkdir -p $(dir $@)
	$(CC) $(call LAYER_CPPFLAGS,$*) $(DEPFLAGS) $(CFLAGS) -c $< -o $@

$(TP_TOOL): scripts/traceparent.c build/trace/traceparent.o build/common/text.o
	$(CC) $(CPPFLAGS) $(DEPFLAGS) -std=c11 -O2 -g $(WARN) $< build/trace/traceparent.o \
	    build/common/text.o -o $@

$(SO): $(LIB_OBJ) shim/pyroshim.map
	$(CC) -shared -o $@ $(LIB_OBJ) -Wl,--version-script=shim/pyroshim.map -Wl,-e,ps_image_entry \
	    -Wl,-z,defs -Wl,-z,relro $(LIBS)

# The benchmark build: the same library with the handler timing compiled in.
BENCH_SO = shim/libpyroshim-bench.so
$(BENCH_SO): $(LIB_SRC) $(GEN_C) shim/pyroshim.map $(HEADERS)
	$(CC) $(CPPFLAGS) -DPS_BENCH $(CFLAGS) -Wno-error=unused-parameter -shared -o $@ $(LIB_SRC) $(GEN_C) \
	    -Wl,--version-script=shim/pyroshim.map -Wl,-e,ps_image_entry -Wl,-z,defs $(LIBS)

build/libpyroshim_core.a: $(CORE_OBJ)
	rm -f $@
	ar rcs $@ $^

build/test/check_%: test/check_%.c build/libpyroshim_core.a
	@mkdir -p build/test
	$(CC) $(CPPFLAGS) $(DEPFLAGS) -std=c11 -O1 -g -pthread $(WARN) -Wno-unused-parameter $< \
	    build/libpyroshim_core.a $(LIBS) $(CHECK_LIBS) -o $@

build/prog/%: test/prog/%.c
	@mkdir -p build/prog
	$(CC) -D_GNU_SOURCE -std=gnu11 -O1 -g -fno-omit-frame-pointer -fno-inline -pthread $(WARN) $< -o $@ -ldl -lm
build/prog/%: test/prog/%.cc
	@mkdir -p build/prog
	$(CXX) -std=c++17 -O1 -g -fno-inline -pthread $(WARN) $< -o $@ -ldl

# The source-line workload (test_lines.py): -O2 -g, with a shared library
# of its own found through $ORIGIN.
build/prog/liblines.so: test/prog/lines/lines_lib.c
	@mkdir -p build/prog
	$(CC) -std=gnu11 -O2 -g -fPIC -shared $(WARN) $< -o $@
build/prog/lines: test/prog/lines/lines_main.c build/prog/liblines.so
	$(CC) -D_GNU_SOURCE -std=gnu11 -O2 -g $(WARN) $< -o $@ -Lbuild/prog -llines \
	    -Wl,-rpath,'$$ORIGIN'

# The Go workload of the signal tests (test_go.py), when Go is installed:
# its caches stay inside build/, so a fresh clone builds as any user.
GO_ENV = GOCACHE=$(CURDIR)/build/go/cache GOPATH=$(CURDIR)/build/go/path \
	 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GO111MODULE=on
build/prog/gogen: test/prog/gogen/main.go test/prog/gogen/go.mod
	@mkdir -p build/prog
	if command -v go >/dev/null; then \
		cd test/prog/gogen && $(GO_ENV) go build -o $(CURDIR)/$@ . ; fi
# The same program without .symtab (-ldflags=-s): named from .gopclntab.
build/prog/gogen-stripped: test/prog/gogen/main.go test/prog/gogen/go.mod
	@mkdir -p build/prog
	if command -v go >/dev/null; then \
		cd test/prog/gogen && $(GO_ENV) go build -ldflags=-s -o $(CURDIR)/$@ . ; fi
# A hot frameless Go leaf (test_go.py: the leaf's samples keep its caller),
# with cgo code of its own (so linked by the C linker, which puts C start-up
# code at the start of .text) and stripped: its function table names it.
build/prog/goleaf: test/prog/goleaf/main.go test/prog/goleaf/clobber_amd64.s \
		   test/prog/goleaf/cspin/cspin.go test/prog/goleaf/go.mod
	@mkdir -p build/prog
	if command -v go >/dev/null; then \
		cd test/prog/goleaf && $(GO_ENV) go build -ldflags=-s -o $(CURDIR)/$@ . ; fi

examples/generator: examples/generator.c
	$(CC) -D_GNU_SOURCE -std=c11 -O2 -g $(WARN) $< -o $@ -lm
examples/loader: examples/loader.c
	$(CC) -D_GNU_SOURCE -std=c11 -O2 -g $(WARN) -I$(shell pg_config --includedir 2>/dev/null || echo /usr/include/postgresql) $< -o $@ -lpq

unit: $(TESTS)
	@sh test/run-unit.sh $(TESTS)

integration: $(SO) $(TP_TOOL) $(EXAMPLES) $(PROGS)
	@python3 test/integration/run.py

# Everything, one suite after the other, with one closing summary line.
check: $(TESTS) $(SO) $(TP_TOOL) $(EXAMPLES) $(PROGS)
	@sh test/run-all.sh $(TESTS)

lint: layers sigsafe
	@sh test/lint.sh

# PS_SIGSAFE marks exactly what a signal handler reaches (test/sigsafe.py).
.PHONY: sigsafe
sigsafe: $(INC_DIRS) $(GEN_H)
	@python3 test/sigsafe.py $(LIB_SRC)

# A wrong-way include must fail the build (test/layers.sh).
layers: $(INC_DIRS) $(GEN_H)
	@sh test/layers.sh $(foreach d,$(LAYERS),"$(d):$(LAYERS_$(d))")

# Benchmarks against the anchors (BENCHMARKS.md): bench/run.sh installs the
# anchor tools, builds bench/*.c and runs bench/bench.py (~12 minutes).
# bench-smoke runs every benchmark path once with tiny sizes (< 60 s) and
# installs nothing, so it can run inside make check.
bench: $(SO) $(BENCH_SO) $(EXAMPLES) $(PROGS)
	@sh bench/run.sh

.PHONY: bench-smoke
bench-smoke: $(SO) $(BENCH_SO) $(EXAMPLES) $(PROGS)
	@sh bench/run.sh --smoke

install: $(SO) $(TP_TOOL)
	install -d $(DESTDIR)$(PREFIX)/lib/pyroshim $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man7
	install -m 0755 $(SO) $(DESTDIR)$(PREFIX)/lib/libpyroshim.so
	install -m 0755 $(TP_TOOL) $(DESTDIR)$(PREFIX)/lib/pyroshim/pyroshim-traceparent
	sed 's|@LIBDIR@|$(PREFIX)/lib|; s|@VERSION@|$(VERSION)|' scripts/pyrorun > $(DESTDIR)$(PREFIX)/bin/pyrorun
	chmod 0755 $(DESTDIR)$(PREFIX)/bin/pyrorun
	sed 's|@VERSION@|$(VERSION)|' man/pyrorun.1 > $(DESTDIR)$(PREFIX)/share/man/man1/pyrorun.1
	sed 's|@VERSION@|$(VERSION)|' man/pyroshim.7 > $(DESTDIR)$(PREFIX)/share/man/man7/pyroshim.7
	chmod 0644 $(DESTDIR)$(PREFIX)/share/man/man1/pyrorun.1 $(DESTDIR)$(PREFIX)/share/man/man7/pyroshim.7

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libpyroshim.so $(DESTDIR)$(PREFIX)/bin/pyrorun \
	    $(DESTDIR)$(PREFIX)/lib/pyroshim/pyroshim-traceparent \
	    $(DESTDIR)$(PREFIX)/share/man/man1/pyrorun.1 $(DESTDIR)$(PREFIX)/share/man/man7/pyroshim.7
	-rmdir $(DESTDIR)$(PREFIX)/lib/pyroshim 2>/dev/null

clean:
	rm -rf build $(SO) $(BENCH_SO) $(EXAMPLES)

.SECONDARY:

# ---- Sanitizers and fuzzing (test/sanitize.sh, test/fuzz/) ------------------
# `make sanitize`: the unit tests rebuilt with ASan+UBSan into build/asan/,
# the plain unit tests under valgrind memcheck, and a ThreadSanitizer
# hammer of the lock-free tables (test/tsan_tables.c).  None of these links
# the hooks or the constructor (CORE_OBJ, as for the unit tests).
ASAN_FLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
ASAN_OBJ   = $(CORE_OBJ:build/%=build/asan/%)
# check_nomem defines malloc itself (the failing allocator): not with ASan's.
ASAN_TESTS = $(filter-out build/asan/test/check_nomem,$(TESTS:build/test/%=build/asan/test/%))
# check_upload too: its final-flush cases run a sending thread against it.
TSAN_BIN   = build/tsan/tsan_tables build/tsan/check_upload

build/asan/gen/%.o: build/gen/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(ASAN_FLAGS) -Wno-error -c $< -o $@

build/asan/%.o: %.c $(GEN_H) $(INC_DIRS)
	@mkdir -p $(dir $@)
	$(CC) $(call LAYER_CPPFLAGS,$*) $(DEPFLAGS) $(CFLAGS) $(ASAN_FLAGS) -c $< -o $@

build/asan/libpyroshim_core.a: $(ASAN_OBJ)
	rm -f $@
	ar rcs $@ $^

build/asan/test/check_%: test/check_%.c build/asan/libpyroshim_core.a
	@mkdir -p build/asan/test
	$(CC) $(CPPFLAGS) -std=c11 -O1 -g -pthread $(WARN) -Wno-unused-parameter $(ASAN_FLAGS) $< \
	    build/asan/libpyroshim_core.a $(LIBS) $(CHECK_LIBS) -o $@

UPLOAD_TSAN_SRC = uploader/upload.c uploader/http.c common/buf.c common/log.c common/guard.c \
		  common/text.c common/dl.c
build/tsan/check_upload: test/check_upload.c $(UPLOAD_TSAN_SRC) $(GEN_H) $(INC_DIRS)
	@mkdir -p build/tsan
	$(CC) $(CPPFLAGS) -std=c11 -O1 -g -pthread $(WARN) -Wno-unused-parameter -fsanitize=thread \
	    $< $(UPLOAD_TSAN_SRC) $(LIBS) $(CHECK_LIBS) -o $@

build/tsan/tsan_tables: test/tsan_tables.c shim/stacktab.c shim/livetab.c common/shmem.c shim/stacktab.h shim/livetab.h common/ps.h
	@mkdir -p build/tsan
	$(CC) $(CPPFLAGS) -std=c11 -O1 -g -pthread $(WARN) -fsanitize=thread $< \
	    shim/stacktab.c shim/livetab.c common/shmem.c -o $@

# Not under valgrind: check_nomem (valgrind replaces the executable's
# malloc too, and that one is what it tests) and check_worker (valgrind
# does not know pidfd_open, so no helper process can be made).  ASan runs
# both.
VALGRIND_TESTS = $(filter-out build/test/check_nomem build/test/check_worker,$(TESTS))
sanitize: $(ASAN_TESTS) $(TESTS) $(TSAN_BIN)
	@sh test/sanitize.sh --asan $(ASAN_TESTS) --valgrind $(VALGRIND_TESTS) --tsan $(TSAN_BIN)

# libFuzzer targets, one per parser of outside input, each linking only the
# sources it exercises (compiled by clang with ASan+UBSan).  `make fuzz`
# runs each for FUZZ_SECONDS; `make fuzz-smoke` for 5 s each (CI).
FUZZ_CC      = clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS   = -std=c11 -g -O1 -fno-omit-frame-pointer \
	       -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $(WARN)
FUZZ_NAMES   = traceparent span otlp_headers config_values config_env tags ingest_url headers \
	       gopclntab httpreq symcache
FUZZ_BINS    = $(FUZZ_NAMES:%=build/fuzz/fuzz_%)
FUZZ_SRC_traceparent   = trace/traceparent.c common/text.c
FUZZ_SRC_span          = trace/span.c trace/traceparent.c common/text.c
FUZZ_SRC_otlp_headers  = uploader/otlp.c trace/span.c trace/traceparent.c common/buf.c common/text.c \
			 build/gen/otlp.pb.c
FUZZ_LIBS_otlp_headers = -lprotobuf-nanopb
FUZZ_SRC_config_values = common/config.c common/log.c common/text.c
FUZZ_SRC_config_env    = common/config.c common/log.c common/text.c
FUZZ_SRC_tags          = uploader/tags.c common/text.c
FUZZ_SRC_ingest_url    = uploader/ingest.c common/buf.c common/text.c
FUZZ_SRC_headers       = uploader/headers.c common/text.c
FUZZ_SRC_gopclntab     = shim/gopclntab.c
FUZZ_SRC_httpreq       = uploader/httpreq.c
FUZZ_SRC_symcache      = symbolize/symcache.c common/buf.c common/log.c common/shared.c

fuzz: $(FUZZ_BINS)
	@sh test/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

fuzz-smoke: $(FUZZ_BINS)
	@sh test/fuzz/run.sh 5 $(FUZZ_BINS)

.PHONY: fuzz-smoke sanitize

# Second expansion lets each target list its own sources; it is enabled
# here, after every other rule, so no earlier rule is affected.
.SECONDEXPANSION:
build/fuzz/fuzz_%: test/fuzz/fuzz_%.c test/fuzz/fuzz.h $$(FUZZ_SRC_$$*) $(GEN_H) $(HEADERS)
	@mkdir -p build/fuzz
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_FLAGS) $< $(FUZZ_SRC_$*) $(FUZZ_LIBS_$*) -o $@

# Header dependencies from -MMD (a changed header rebuilds what uses it).
-include $(shell find build -name '*.d' 2>/dev/null)
