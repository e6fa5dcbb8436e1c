#!/bin/bash
# tests/long/run.sh - the long versions of the crash tests, for nights
# (`make test-long`).  Not part of the suite (tests/run runs tests/*.sh
# only).  Prints each step's result; exits 1 if any failed.
#
# Environment: BUILD (build), LONG_STATES (20000000), LONG_FUZZ (3600 s),
# LONG_SEEDS (fault-injection seeds, 20), LONG_KILLS (10000), LONG_CUTS
# (1000 per file system).
set -u
cd "$(dirname "$0")/../.." || exit 2
B=${BUILD:-build}
fail=0
step() {
	local name=$1; shift
	local t0=$SECONDS
	echo "== $name"
	if "$@"; then
		echo "== $name: PASS ($((SECONDS - t0))s)"
	else
		echo "== $name: FAIL ($((SECONDS - t0))s)"
		fail=1
	fi
}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/oalong.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
step "sim_explore, ${LONG_STATES:-20000000} crash states" \
	env SIM_STATES="${LONG_STATES:-20000000}" OA_TEST_DIR="$scratch" "$B/tests/sim_explore"
for s in $(seq 1 "${LONG_SEEDS:-20}"); do
	step "sim_faults, seed $s" env OA_TEST_SEED="$s" OA_TEST_DIR="$scratch" "$B/tests/sim_faults"
done
step "fuzzing, ${LONG_FUZZ:-3600}s" env FUZZ_SECONDS="${LONG_FUZZ:-3600}" \
	FUZZ_OUT="$B-fuzz" BUILD="$B" tests/fuzz.sh
step "kill torture, ${LONG_KILLS:-10000} kills" \
	env TORTURE_KILLS="${LONG_KILLS:-10000}" OA_TEST_DIR="$scratch" "$B/tests/torture" kill
step "power cuts, ${LONG_CUTS:-1000} per file system" \
	env POWERCUT_CUTS="${LONG_CUTS:-1000}" OA_TEST_DIR="$scratch" BUILD="$B" tests/powercut.sh
step "planted bugs" env MUTANT_SIM_STATES=2000000 tests/mutants.sh
exit $fail
