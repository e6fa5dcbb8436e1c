#!/bin/bash
# sim_methods.sh - the power-loss simulator's exploration under every commit
# method: sim_explore runs with OATOMIC_METHOD forced to journal, clone,
# exchange and kernel (the simulator clones, exchanges ranges, takes
# RWF_ATOMIC writes and reports an atomic write unit, so each method is
# what the library really runs).  sim_explore itself runs AUTO with 10^6
# states; here 40,000 states per method (2,000 in the sanitizer build).
# timeout: 1200
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
x=$build/tests/sim_explore
[ -x "$x" ] || { echo "sim_methods: $x not built"; exit 1; }
work=${OA_TEST_DIR:-$(mktemp -d)}
# Under the sanitizers a recovery costs about 100 ms (sim_explore scales
# itself down there too): 2,000 states per method.
case $build in
*asan*) states=${SIM_METHOD_STATES:-2000} ;;
*) states=${SIM_METHOD_STATES:-40000} ;;
esac
rc=0
for m in journal clone exchange kernel; do
	d=$(mktemp -d "$work/$m.XXXXXX")
	if out=$(OATOMIC_METHOD=$m SIM_STATES=$states \
		 SIM_NO_KNOWN=1 OA_TEST_DIR=$d "$x" 2>&1); then
		echo "$m: $(echo "$out" | grep '^explored' | tail -1)"
	else
		echo "$m: FAILED"; echo "$out" | tail -15; rc=1
	fi
	rm -rf "$d"
done
exit $rc
