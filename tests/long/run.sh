#!/bin/bash
# tests/long/run.sh - the long versions of the crash tests, for nights
# (`make test-long`).  Not part of the suite (tests/run runs tests/*.sh
# only).  Prints each step's result; exits 1 if any failed.
#
# Environment: BUILD (build), LONG_STATES (20000000), LONG_FUZZ (3600 s),
# LONG_SEEDS (fault-injection seeds, 20), LONG_KILLS (10000, over the spans
# 64K 1M 4M 64M 256M, equal shares), LONG_PAIR_KILLS (5000 rounds of two
# writers on one file), LONG_CUTS (1000 per file system, over 64K 1M 4M 64M:
# 256M does not fit the smallest image),
# LONG_PAIR_CUTS (200 per file system), LONG_FSMATRIX_KILLS (2000 kills and a
# tenth as many pair rounds per entry), LONG_DAMAGE (5000 kill-and-damage
# trials per kind of damage, conf_damage).
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
spans=64K,1M,4M,64M,256M
step "kill torture, ${LONG_KILLS:-10000} kills over $spans" \
	env TORTURE_KILLS="${LONG_KILLS:-10000}" TORTURE_SPANS=$spans \
	OA_TEST_DIR="$scratch" "$B/tests/torture_kill"
step "damage after kills, ${LONG_DAMAGE:-5000} trials per kind" \
	env DAMAGE_TRIALS="${LONG_DAMAGE:-5000}" OA_TEST_DIR="$scratch" \
	"$B/tests/conf_damage"
step "two writers on one file, ${LONG_PAIR_KILLS:-5000} rounds" \
	env TORTURE_PAIR_KILLS="${LONG_PAIR_KILLS:-5000}" OA_TEST_DIR="$scratch" \
	"$B/tests/torture_pair"
step "power cuts, ${LONG_CUTS:-1000} per file system, ${LONG_PAIR_CUTS:-200} of two writers" \
	env POWERCUT_CUTS="${LONG_CUTS:-1000}" POWERCUT_SPANS="64K 1M 4M 64M" \
	POWERCUT_PAIR_CUTS="${LONG_PAIR_CUTS:-200}" \
	OA_TEST_DIR="$scratch" BUILD="$B" tests/powercut.sh
step "file-system matrix, ${LONG_FSMATRIX_KILLS:-2000} kills per entry" \
	env FSMATRIX_KILLS="${LONG_FSMATRIX_KILLS:-2000}" \
	FSMATRIX_PAIR_KILLS=$(( ${LONG_FSMATRIX_KILLS:-2000} / 10 )) \
	OA_TEST_DIR="$scratch" BUILD="$B" tests/fsmatrix.sh
step "planted bugs" env MUTANT_SIM_STATES=2000000 tests/mutants.sh
exit $fail
