# oatomic - build, test, install.
#
#   make                 build/liboatomic.so, build/liboatomic.a, build/oatomic,
#                        build/liboatomic-preload.so (`oatomic run`)
#   make test            the whole test suite (what README and .ci/run run)
#   make install PREFIX=/usr/local [DESTDIR=...]
#   make BUILD=build-asan SANITIZE=1 test    the suite under ASan + UBSan
#   make WERROR=1        warnings are errors (CI)
#   make crash-mutants   the planted protocol bugs, each must be caught
#   make fuzz            libFuzzer on recovery (clang; FUZZ_SECONDS=60)
#   make test-long       the long versions, for nights (tests/long/run.sh)

VERSION   := 0.1.0
SOMAJOR   := 0
PREFIX    ?= /usr/local
LIBDIR    ?= $(PREFIX)/lib
INCDIR    ?= $(PREFIX)/include
MANDIR    ?= $(PREFIX)/share/man
BINDIR    ?= $(PREFIX)/bin
PCDIR     ?= $(LIBDIR)/pkgconfig
BUILD     ?= build

CC        ?= cc
OPT       ?= -O2 -g
WARN      := -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
             -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN      += -Werror
endif
ifeq ($(SANITIZE),1)
OPT       := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
             -DOA_DEBUG \
             -fno-sanitize-recover=undefined
LDSAN     := -fsanitize=address,undefined
endif
CPPFLAGS  += -D_GNU_SOURCE -Iinclude -Isrc
ifdef MUTANT
CPPFLAGS  += -DOA_MUTANT=$(MUTANT)
endif
CFLAGS    += -std=gnu11 $(OPT) $(WARN)
# ISA-L (Debian libisal-dev) for CRC-32C: the checksum covers every byte a
# transaction writes, and ISA-L's folding code runs ~3x faster than one
# stream of the SSE4.2 instruction (docs/BENCHMARKS.md).
LIBS      := -lisal -lpthread
LDFLAGS   += $(LDSAN)

LIB_SRC   := $(sort $(wildcard src/*.c))
TOOL_SRC  := $(sort $(wildcard tools/*.c))
TEST_SRC  := $(sort $(wildcard tests/*.c))
TUTIL_SRC := $(sort $(wildcard tests/util/*.c))

LIB_PIC   := $(LIB_SRC:src/%.c=$(BUILD)/obj/pic/%.o)
LIB_OBJ   := $(LIB_SRC:src/%.c=$(BUILD)/obj/lib/%.o)
TOOL_OBJ  := $(TOOL_SRC:tools/%.c=$(BUILD)/obj/tools/%.o)
TUTIL_OBJ := $(TUTIL_SRC:tests/util/%.c=$(BUILD)/obj/tutil/%.o)
TESTS     := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)

SONAME    := liboatomic.so.$(SOMAJOR)
PRELOAD   := $(BUILD)/liboatomic-preload.so
SQLEXT    := $(BUILD)/liboatomic_sqlite.so
SQLARC    := $(BUILD)/liboatomic_sqlite.a
SHLIB     := $(BUILD)/liboatomic.so.$(VERSION)

all: $(BUILD)/liboatomic.so $(BUILD)/liboatomic.a $(BUILD)/oatomic $(TESTS) \
     $(BUILD)/oatomic.pc $(PRELOAD) $(SQLEXT) $(SQLARC)

# The engine of `oatomic bench` (bench/engine/), linked into the tool.
BENGINE_SRC := $(sort $(wildcard bench/engine/*.c))
BENGINE_OBJ := $(BENGINE_SRC:bench/engine/%.c=$(BUILD)/obj/bengine/%.o)
TOOL_OBJ    += $(BENGINE_OBJ)
$(BUILD)/obj/tools/cmd_bench.o: bench/engine/bench.h
$(BUILD)/obj/bengine/%.o: bench/engine/%.c bench/engine/bench.h $(wildcard src/*.h) include/oatomic.h tools/companion.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Ibench/engine -Itools $(CFLAGS) -c $< -o $@

$(BUILD)/obj/pic/%.o: src/%.c $(wildcard src/*.h) include/oatomic.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fPIC -c $< -o $@

$(BUILD)/obj/lib/%.o: src/%.c $(wildcard src/*.h) include/oatomic.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(SHLIB): $(LIB_PIC) src/liboatomic.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=src/liboatomic.map \
	  -Wl,--no-undefined $(LDFLAGS) -o $@ $(LIB_PIC) $(LIBS)

$(BUILD)/liboatomic.so: $(SHLIB)
	ln -sf liboatomic.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $@

$(BUILD)/liboatomic.a: $(LIB_OBJ)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/obj/tools/%.o: tools/%.c $(wildcard tools/*.h) $(wildcard src/*.h) include/oatomic.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itools $(CFLAGS) -c $< -o $@

# The preload library of `oatomic run` (preload/): the interposers and a
# private copy of the library, exporting nothing but the C library's names
# it stands in for.  Built without the sanitizers even in a SANITIZE build:
# it is loaded into programs (sh, python3, ...) that do not load their
# runtime first.
PRE_CFLAGS  := -std=gnu11 -O2 -g $(WARN) -fPIC -fvisibility=hidden
PRE_LIB_OBJ := $(LIB_SRC:src/%.c=$(BUILD)/obj/prepic/%.o)
PRE_OBJ     := $(BUILD)/obj/prepic/preload.o $(BUILD)/obj/prepic/progcheck.o
$(BUILD)/obj/prepic/%.o: src/%.c $(wildcard src/*.h) include/oatomic.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(PRE_CFLAGS) -c $< -o $@
$(BUILD)/obj/prepic/%.o: preload/%.c $(wildcard preload/*.h) include/oatomic.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Ipreload $(PRE_CFLAGS) -c $< -o $@
$(PRELOAD): $(PRE_OBJ) $(PRE_LIB_OBJ)
	$(CC) -shared -Wl,--no-undefined -o $@ $(PRE_OBJ) $(PRE_LIB_OBJ) $(LIBS) -ldl

# The SQLite VFS (sqlite/vfs.c): liboatomic_sqlite.so, the loadable
# extension, self-contained like the preload library (a private copy of the
# library, no sanitizers: the sqlite3 shell loads it); liboatomic_sqlite.a
# for programs that link SQLite and liboatomic themselves (and the tests,
# which then run it under the sanitizers).
$(BUILD)/obj/prepic/sqlite_vfs.o: sqlite/vfs.c include/oatomic.h include/oatomic_sqlite.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -DOA_SQLITE_LOADABLE $(PRE_CFLAGS) -c $< -o $@
$(SQLEXT): $(BUILD)/obj/prepic/sqlite_vfs.o $(PRE_LIB_OBJ)
	$(CC) -shared -Wl,--no-undefined -o $@ $^ $(LIBS)
$(BUILD)/obj/lib/sqlite_vfs.o: sqlite/vfs.c include/oatomic.h include/oatomic_sqlite.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -DSQLITE_CORE $(CFLAGS) -c $< -o $@
$(SQLARC): $(BUILD)/obj/lib/sqlite_vfs.o
	rm -f $@
	$(AR) rcs $@ $^

TOOL_OBJ    += $(BUILD)/obj/tools/progcheck.o
$(BUILD)/obj/tools/progcheck.o: preload/progcheck.c preload/progcheck.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Ipreload $(CFLAGS) -c $< -o $@
$(BUILD)/obj/tools/cmd_run.o: preload/progcheck.h
# Where `make install` puts the companion libraries (companion.c looks
# there; cmd_run.c's help names it).
$(BUILD)/obj/tools/cmd_run.o: CPPFLAGS += -Ipreload -DOA_LIBDIR='"$(LIBDIR)"'
$(BUILD)/obj/tools/companion.o: CPPFLAGS += -DOA_LIBDIR='"$(LIBDIR)"'

$(BUILD)/oatomic: $(TOOL_OBJ) $(BUILD)/liboatomic.a
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/liboatomic.a $(LIBS) -lm

# The crash workloads' generator (tools/workload.h), the tool's and the
# tests': `oatomic demo` runs the tortures' workload generator.
TWL_OBJ   := $(BUILD)/obj/tools/workload.o

$(BUILD)/obj/tutil/%.o: tests/util/%.c $(wildcard tests/util/*.h) tools/workload.h $(wildcard src/*.h) include/oatomic.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests/util -Itools $(CFLAGS) -c $< -o $@

$(BUILD)/tests/%: tests/%.c $(TUTIL_OBJ) $(TWL_OBJ) $(BUILD)/liboatomic.a $(wildcard tests/util/*.h) tools/workload.h $(wildcard src/*.h) include/oatomic.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests/util -Itools $(CFLAGS) $(LDFLAGS) -o $@ $< \
	  $(TUTIL_OBJ) $(TWL_OBJ) $(BUILD)/liboatomic.a $(LIBS) -lm

# The SQLite tests link the VFS and SQLite too.
$(BUILD)/tests/sqlite_%: tests/sqlite_%.c $(TUTIL_OBJ) $(TWL_OBJ) $(BUILD)/liboatomic.a $(SQLARC) $(wildcard tests/util/*.h) include/oatomic.h include/oatomic_sqlite.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests/util -Itools $(CFLAGS) $(LDFLAGS) -o $@ $< \
	  $(TUTIL_OBJ) $(TWL_OBJ) $(SQLARC) $(BUILD)/liboatomic.a -lsqlite3 $(LIBS) -lm

$(BUILD)/oatomic.pc: oatomic.pc.in Makefile
	@mkdir -p $(@D)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCDIR@|$(INCDIR)|g' -e 's|@VERSION@|$(VERSION)|g' $< > $@

test: all
	BUILD=$(BUILD) tests/run

# Build the library with each planted protocol bug and show that the crash
# tests catch every one (prints "caught N of N"; exits 0 only if all are).
crash-mutants:
	tests/mutants.sh

# libFuzzer on recovery through the power-loss simulator (clang with its
# fuzzer runtime); the build and the grown corpus stay in $(BUILD)-fuzz.
FUZZ_SECONDS ?= 60
fuzz:
	FUZZ_OUT=$(BUILD)-fuzz FUZZ_SECONDS=$(FUZZ_SECONDS) BUILD=$(BUILD) tests/fuzz.sh

# The long versions, for nights: 20 million crash states, fault injection
# with every seed, an hour of fuzzing, the kill torture and power cuts at
# ten times their CI counts, and every planted bug.
test-long: all
	BUILD=$(BUILD) tests/long/run.sh

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCDIR) $(DESTDIR)$(PCDIR) \
	  $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3 \
	  $(DESTDIR)$(MANDIR)/man7
	install -m 0755 $(SHLIB) $(DESTDIR)$(LIBDIR)/
	ln -sf liboatomic.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/liboatomic.so
	install -m 0644 $(BUILD)/liboatomic.a $(DESTDIR)$(LIBDIR)/
	install -m 0644 include/oatomic.h $(DESTDIR)$(INCDIR)/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCDIR@|$(INCDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    oatomic.pc.in > $(DESTDIR)$(PCDIR)/oatomic.pc
	chmod 0644 $(DESTDIR)$(PCDIR)/oatomic.pc
	install -m 0755 $(BUILD)/oatomic $(DESTDIR)$(BINDIR)/
	install -m 0755 $(PRELOAD) $(DESTDIR)$(LIBDIR)/
	install -m 0755 $(SQLEXT) $(DESTDIR)$(LIBDIR)/
	install -m 0644 $(SQLARC) $(DESTDIR)$(LIBDIR)/
	install -m 0644 include/oatomic_sqlite.h $(DESTDIR)$(INCDIR)/
	# dlopen finds a bare name (.load liboatomic_sqlite) through the cache
	if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi
	for m in man/man1/*.1; do [ -e "$$m" ] && install -m 0644 $$m $(DESTDIR)$(MANDIR)/man1/; done; true
	for m in man/man3/*.3; do [ -e "$$m" ] && install -m 0644 $$m $(DESTDIR)$(MANDIR)/man3/; done; true
	for m in man/man7/*.7; do [ -e "$$m" ] && install -m 0644 $$m $(DESTDIR)$(MANDIR)/man7/; done; true

clean:
	rm -rf build build-*

.PHONY: all test install clean crash-mutants fuzz test-long
.DELETE_ON_ERROR:
