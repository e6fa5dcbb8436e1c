#!/bin/bash
# fuzz.sh - libFuzzer on recovery: arbitrary control-file and journal bytes
# (tests/fuzz/fuzz_recover.c) fed to oa__check and oa_recover on the
# power-loss simulator, built with clang -fsanitize=fuzzer,address,undefined.
# First every input of tests/fuzz/regress/ (crashes found before) and of the
# seed corpus tests/fuzz/corpus/ runs once, then a bounded fuzzing run.
# Skipped where clang or its libFuzzer runtime is missing (Debian: clang,
# libclang-rt-14-dev or the llvm runtime clang ships).
# timeout: 400
#
# Environment:
#   FUZZ_SECONDS   length of the fuzzing run (default 60)
#   FUZZ_OUT       keep the build and the grown corpus there (default: the
#                  scratch directory)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root" || exit 2
case ${BUILD:-build} in
*asan*|*san*) echo "SKIP: the fuzz target has its own sanitizers; run in the normal pass"
	exit 77 ;;
esac
CLANG=${FUZZ_CC:-clang}
if ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "SKIP: no clang"
	exit 77
fi
out=${FUZZ_OUT:-${OA_TEST_DIR:-$(mktemp -d)}}
mkdir -p "$out" || exit 2
probe=$out/probe.c
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$probe"
if ! "$CLANG" -fsanitize=fuzzer "$probe" -o "$out/probe" >/dev/null 2>&1; then
	echo "SKIP: clang has no libFuzzer runtime (-fsanitize=fuzzer)"
	exit 77
fi
bin=$out/fuzz_recover
echo "== building $bin"
# shellcheck disable=SC2046
"$CLANG" -D_GNU_SOURCE -Iinclude -Isrc -Itests/util -std=gnu11 -O1 -g \
	-Wall -Wextra -Wno-unused-parameter -Werror \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	src/*.c tests/util/sim.c tests/fuzz/fuzz_recover.c \
	-o "$bin" -lisal -lpthread -lm || exit 1

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
inputs=()
for f in tests/fuzz/regress/* tests/fuzz/corpus/*; do
	[ -f "$f" ] && [ "${f##*/}" != README ] && inputs+=("$f")
done
echo "== ${#inputs[@]} regression and seed inputs"
if [ ${#inputs[@]} -gt 0 ]; then
	"$bin" -runs=0 "${inputs[@]}" >"$out/replay.log" 2>&1 || {
		tail -n 40 "$out/replay.log"
		echo "FAIL: a regression or seed input fails"
		exit 1
	}
fi
corpus=$out/corpus
mkdir -p "$corpus"
cp tests/fuzz/corpus/* "$corpus/" 2>/dev/null
secs=${FUZZ_SECONDS:-60}
echo "== fuzzing for ${secs}s"
"$bin" -max_total_time="$secs" -max_len=65536 -timeout=20 -rss_limit_mb=2048 \
	-artifact_prefix="$out/" -print_final_stats=1 "$corpus" \
	>"$out/fuzz.log" 2>&1
rc=$?
grep -E '^(#[0-9]+.*DONE|stat::number_of_executed_units|stat::new_units_added)' "$out/fuzz.log"
if [ $rc -ne 0 ]; then
	tail -n 60 "$out/fuzz.log"
	ls "$out"/crash-* "$out"/leak-* "$out"/timeout-* 2>/dev/null
	echo "FAIL: the fuzzer found a crash (copy it into tests/fuzz/regress/)"
	exit 1
fi
echo "corpus: $(ls "$corpus" | wc -l) inputs"
exit 0
