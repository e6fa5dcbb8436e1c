#!/bin/bash
# conf_tool.sh - the oatomic tool against hostile or careless surroundings.
#
#  - standard descriptors closed (cron, daemons): with 0, 2, or all three
#    closed the target keeps its content and inode unless the command
#    legitimately writes it; no input is read from it and no message lands
#    in it;
#
# timeout: 300
#
# SPDX-License-Identifier: MIT
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=${BUILD:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
OA=$build/oatomic
W=${OA_TEST_DIR:-$(mktemp -d)}
. "$here/util/fs.sh"

[ -x "$OA" ] || { echo "conf_tool: $OA not built"; exit 1; }
cd "$W" || exit 1
# The kill points aim at the journal protocol; AUTO might pick another
# method on the file system of $W.
export OATOMIC_METHOD=journal
fails=0

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

ino() { stat -c %i "$1"; }

# expect_file PATH CONTENT WHAT: PATH holds exactly CONTENT.
expect_file() {
	local got
	got=$(cat "$1" 2>/dev/null; echo .)
	[ "${got%.}" = "$2" ] || fail "$3: $1 holds '$(cat "$1" 2>/dev/null)', not '$2'"
}

# ---- 1. standard descriptors closed ----------------------------------------

# std_case WHAT CONTENT: std holds CONTENT and is still the inode it was;
# then it is made what it was again (same inode), for the next case.
std_case() {
	expect_file std "$2" "$1"
	[ "$(ino std)" = "$i0" ] || fail "$1: std changed inode"
	printf 'hello world\n' >std
}

printf 'hello world\n' >std
i0=$(ino std)
"$OA" write --offset 4 std <&-
std_case "write, stdin closed" $'hello world\n'
"$OA" write std </ 2>&-
[ $? -ne 0 ] || fail "write from a directory, stderr closed: exit 0"
std_case "failing write, stderr closed" $'hello world\n'
"$OA" write --offset 4 std <&- >&- 2>&-
std_case "write, all three closed" $'hello world\n'
"$OA" write std </ <&- >&- 2>&-
std_case "failing write, all three closed" $'hello world\n'
"$OA" write --offset 44 std </ >&- 2>&-
std_case "failing write, stdout and stderr closed" $'hello world\n'
"$OA" check std >&-
"$OA" info std >&- 2>&-
"$OA" recover std >&- 2>&-
std_case "check, info, recover, stdout closed" $'hello world\n'
# ... and a legitimate write still is one.
printf XY | "$OA" write --offset 2 std 2>&- >&-
std_case "write with stdout and stderr closed" $'heXYo world\n'
printf 'hello world\n' | "$OA" replace std 2>&-
std_case "replace, stderr closed" $'hello world\n'

[ $fails = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all passed"
