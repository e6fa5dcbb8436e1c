#!/bin/bash
# layers.sh - the library's files call each other one way only.
#
# docs/ARCHITECTURE.md draws the layers; LAYERS below lists the files of
# src/ from the bottom up, and a file may call only files listed before it.
# The calls are read from the objects the build made ($BUILD/obj/lib): for
# each object, the symbols it leaves undefined that another object of the
# library defines.  A call through a function pointer (the seam's table)
# is not seen, and is not meant to be: the seam is the one interface where
# a lower layer is handed a function, and it is handed in from above.
# Fails on any call that runs up or sideways, and on a file of src/ that
# LAYERS does not place (a new file must be given its layer).
#
# timeout: 60
set -u

BUILD=${BUILD:-build}
SRC=${OA_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
OBJ=$BUILD/obj/lib
[[ $OBJ = /* ]] || OBJ=$SRC/$OBJ
command -v nm >/dev/null || { echo "SKIP: nm not installed"; exit 77; }
[ -d "$OBJ" ] || { echo "SKIP: $OBJ not built"; exit 77; }

LAYERS="sys crc32c index record ioinfo control method clone apply checkpoint
	recover home journal xcommit commit kernel exchange map gcommit file"

declare -A rank
i=0
for f in $LAYERS; do
	rank[$f]=$i
	i=$((i + 1))
done

fail=0
for c in "$SRC"/src/*.c; do
	f=$(basename "$c" .c)
	[ -n "${rank[$f]:-}" ] || { echo "FAIL: src/$f.c has no layer in tests/layers.sh"; fail=1; }
	[ -f "$OBJ/$f.o" ] || { echo "FAIL: $OBJ/$f.o not built"; fail=1; }
done
[ $fail -eq 0 ] || exit 1

# symbol -> defining file
declare -A def
for f in $LAYERS; do
	while read -r _ t s; do
		case $t in T|D|B|R) def[$s]=$f ;; esac
	done < <(nm --defined-only "$OBJ/$f.o")
done

edges=0
for f in $LAYERS; do
	while read -r _ s; do
		d=${def[$s]:-}
		[ -n "$d" ] && [ "$d" != "$f" ] || continue
		edges=$((edges + 1))
		if [ "${rank[$d]}" -ge "${rank[$f]}" ]; then
			echo "FAIL: src/$f.c calls $s in src/$d.c, a layer at or above its own"
			fail=1
		fi
	done < <(nm -u "$OBJ/$f.o")
done
[ $edges -gt 20 ] || { echo "FAIL: only $edges calls between files found: is $OBJ the library?"; exit 1; }
[ $fail -eq 0 ] && echo "layers: $edges calls between files, all downward"
exit $fail
