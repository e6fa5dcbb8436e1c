#!/bin/bash
# install.sh - `make install` into a scratch prefix, then use the installed
# library the way a user would.
#
#  - the install has the header, liboatomic.so with a SONAME and its
#    symlinks, liboatomic.a, oatomic.pc (pointing at the prefix), the tool
#    and the man pages (section 3 for every exported function, oatomic(1));
#  - liboatomic.so exports only the public oa_* functions;
#  - liboatomic_sqlite.so (with its header, archive and man page) exports
#    its two entry points only, and sqlite3 loads it from the install;
#  - liboatomic-preload.so is installed, exports none of them, and the
#    installed `oatomic run` finds it and works (its man page, section 7);
#  - a program compiled outside the tree with
#    `pkg-config --cflags --libs oatomic` links against the installed shared
#    library, runs (open, write, commit, read back), and really loaded the
#    installed copy; the same program links statically too.
#
# timeout: 600
#
# SPDX-License-Identifier: MIT
set -u

SRCDIR=${OA_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
BUILD=${BUILD:-build}
WORK=${OA_TEST_DIR:-$(mktemp -d)}
PREFIX=$WORK/prefix
fails=0
mkdir -p "$WORK" || exit 1

fail() {
	echo "FAIL: $*"
	fails=$((fails + 1))
}

cd "$SRCDIR" || exit 1
for tool in pkg-config readelf nm; do
	command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done

# An instrumented build (SANITIZE=1) makes an instrumented library: programs
# linked against it need the sanitizer runtime too.
SAN_FLAGS=
make_vars=(BUILD="$BUILD")
if [ "${SANITIZE:-0}" = 1 ] ||
   { [ -e "$BUILD/liboatomic.so" ] && readelf -d "$BUILD/liboatomic.so" | grep -q 'libasan'; }; then
	SAN_FLAGS="-fsanitize=address,undefined"
	make_vars+=(SANITIZE=1)
fi

echo "== make install PREFIX=$PREFIX"
if ! make -s --no-print-directory "${make_vars[@]}" install PREFIX="$PREFIX" >"$WORK/install.log" 2>&1; then
	cat "$WORK/install.log"
	echo "FAIL: make install"
	exit 1
fi

# ---- what was installed ------------------------------------------------------

LIB=$PREFIX/lib
for f in include/oatomic.h lib/liboatomic.a lib/liboatomic.so lib/pkgconfig/oatomic.pc bin/oatomic; do
	[ -e "$PREFIX/$f" ] || fail "$f not installed"
done
SO=$(readlink -f "$LIB/liboatomic.so")
[ -f "$SO" ] || { echo "FAIL: $LIB/liboatomic.so is not a file or a link to one"; exit 1; }

soname=$(readelf -d "$SO" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
if [ -z "$soname" ]; then
	fail "liboatomic.so has no SONAME"
else
	echo "SONAME $soname"
	[ -e "$LIB/$soname" ] || fail "no $LIB/$soname (the name programs load)"
	case $soname in
	liboatomic.so.[0-9]*) ;;
	*) fail "SONAME $soname is not liboatomic.so.N" ;;
	esac
fi

# The preload library of `oatomic run`: installed beside the library,
# exporting none of the library's functions (its copy is private), found by
# the installed tool without help, and it works.
PRE=$LIB/liboatomic-preload.so
if [ ! -f "$PRE" ]; then
	fail "lib/liboatomic-preload.so not installed"
else
	pexp=$(nm -D --defined-only "$PRE" | awk '$2 != "A" { print $3 }' | sed 's/@.*//')
	echo "$pexp" | grep -q '^oa_' && fail "liboatomic-preload.so exports oa_ functions"
	echo "$pexp" | grep -qx open || fail "liboatomic-preload.so does not define open"
	printf 'old\n' > "$WORK/pre.txt"
	if [ "${SANITIZE:-0}" != 1 ] && [ -z "$SAN_FLAGS" ]; then
		(unset OATOMIC_PRELOAD; cd "$WORK" &&
		 "$PREFIX/bin/oatomic" run -- sh -c 'echo new > pre.txt') ||
			fail "the installed oatomic run failed"
		[ "$(cat "$WORK/pre.txt")" = new ] || fail "the installed oatomic run: $(cat "$WORK/pre.txt")"
	fi
fi
[ -f "$PREFIX/share/man/man7/liboatomic-preload.7" ] ||
	fail "man7/liboatomic-preload.7 not installed"

# The SQLite extension: installed beside the library with its header and
# archive, exporting its two entry points and nothing else (its copy of
# the library is private), and Debian's sqlite3 shell loads it from there.
EXTSO=$LIB/liboatomic_sqlite.so
for f in "$EXTSO" "$LIB/liboatomic_sqlite.a" "$PREFIX/include/oatomic_sqlite.h" \
	 "$PREFIX/share/man/man3/liboatomic_sqlite.3"; do
	[ -f "$f" ] || fail "${f#$PREFIX/} not installed"
done
if [ -f "$EXTSO" ]; then
	sexp=$(nm -D --defined-only "$EXTSO" | awk '$2 != "A" { print $3 }' | sed 's/@.*//' | sort | tr '\n' ' ')
	[ "$sexp" = "sqlite3_oatomicsqlite_default_init sqlite3_oatomicsqlite_init " ] ||
		fail "liboatomic_sqlite.so exports [$sexp], want its two entry points"
	if command -v sqlite3 >/dev/null; then
		out=$(cd "$WORK" && printf 'PRAGMA journal_mode=MEMORY;\nCREATE TABLE t(a);\nINSERT INTO t VALUES(7);\nSELECT a FROM t;\n' |
		      sqlite3 -batch -cmd ".load $LIB/liboatomic_sqlite" \
			      -cmd ".open file:ext.db?vfs=oatomic" 2>&1)
		[ "$out" = "$(printf 'memory\n7')" ] ||
			fail "the installed extension in sqlite3: [$out]"
	fi
fi

# Exported symbols: oa_* only, and none of the internals (oa__*, oa_x*).
# Version nodes (OATOMIC_0.1) show up as absolute symbols: not ours to judge.
exports=$(nm -D --defined-only "$SO" | awk '$2 != "A" { print $3 }' | sed 's/@.*//' | sort -u)
bad=$(echo "$exports" | grep -v '^oa_[a-z]' ; echo "$exports" | grep -E '^oa_(_|x)')
if [ -n "$bad" ]; then
	fail "liboatomic.so exports more than the oa_* API:"
	echo "$bad" | sed 's/^/    /' | head -n 30
fi
echo "exports: $(echo "$exports" | tr '\n' ' ')"
# Every function the header declares is exported.
for fn in $(sed -n 's/^[a-z_ ]*[ *]\(oa_[a-z_]*\)(.*/\1/p' include/oatomic.h | sort -u); do
	echo "$exports" | grep -qx "$fn" || fail "$fn is declared in oatomic.h but not exported"
done

# Man pages: one per exported function (or a page that names it), oatomic(1).
MAN=$PREFIX/share/man
[ -f "$MAN/man1/oatomic.1" ] || fail "man1/oatomic.1 not installed"
for fn in $exports; do
	[ -f "$MAN/man3/$fn.3" ] || fail "man3/$fn.3 not installed"
done
for m in man/man3/*.3 man/man1/*.1 man/man7/*.7; do
	[ -e "$m" ] || continue
	[ -f "$MAN/$(basename "$(dirname "$m")")/$(basename "$m")" ] || fail "$m not installed"
done

# ---- the pkg-config file ---------------------------------------------------------

export PKG_CONFIG_PATH=$LIB/pkgconfig
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
if ! flags=$(pkg-config --cflags --libs oatomic); then
	echo "FAIL: pkg-config --cflags --libs oatomic"
	exit 1
fi
echo "pkg-config: $flags"
case " $flags " in
*" -I$PREFIX/include "*|*" -I$PREFIX/include"*) ;;
*) fail "pkg-config --cflags does not point at $PREFIX/include (oatomic.pc has prefix $(pkg-config --variable=prefix oatomic))" ;;
esac
case " $flags " in
*" -L$LIB "*) ;;
*) fail "pkg-config --libs does not point at $LIB" ;;
esac
[ "$(pkg-config --modversion oatomic)" = "$(sed -n 's/^VERSION *:= *//p' Makefile)" ] ||
	fail "oatomic.pc version $(pkg-config --modversion oatomic) is not the Makefile's"

# ---- a program outside the tree -------------------------------------------------------

APP=$WORK/app
mkdir -p "$APP"
cat >"$APP/app.c" <<'EOF'
#include <oatomic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static const char msg[] = "hello, atomic world\n";
	char buf[64] = {0};
	struct oa_ioinfo io = { .size = sizeof(io) };
	oa_file *f;
	int fd;

	if (argc != 2)
		return 2;
	f = oa_open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (!f) {
		perror("oa_open");
		return 1;
	}
	if (oa_pwrite(f, msg, sizeof(msg) - 1, 0) != (ssize_t)sizeof(msg) - 1 ||
	    oa_pread(f, buf, sizeof(buf), 0) != (ssize_t)sizeof(msg) - 1 ||
	    memcmp(buf, msg, sizeof(msg) - 1)) {
		perror("write/read back");
		return 1;
	}
	if (oa_ioinfo(f, &io) != 0) {
		perror("oa_ioinfo");
		return 1;
	}
	if (oa_commit(f) != 0 || oa_close(f) != 0) {
		perror("oa_commit/oa_close");
		return 1;
	}
	memset(buf, 0, sizeof(buf));
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf)) != (ssize_t)sizeof(msg) - 1 ||
	    memcmp(buf, msg, sizeof(msg) - 1)) {
		fprintf(stderr, "the file does not hold the commit\n");
		return 1;
	}
	close(fd);
	if (oa_recover(argv[1]) != 0) {
		perror("oa_recover");
		return 1;
	}
	printf("ok (%s, method %d)\n", io.fs_name, io.method);
	return 0;
}
EOF

CC=${CC:-cc}
command -v "$CC" >/dev/null || CC=gcc
# shellcheck disable=SC2086
if ! (cd "$APP" && $CC -std=c11 -Wall -Wextra -Werror $SAN_FLAGS -o app app.c $flags -Wl,-rpath,"$LIB"); then
	echo "FAIL: building a program against the installed library"
	exit 1
fi
readelf -d "$APP/app" | grep -q "NEEDED.*\[$soname\]" || fail "app does not need $soname"
out=$(cd "$APP" && ./app "$APP/data" 2>&1) || fail "app against the shared library: $out"
echo "app (shared): $out"
# It used the installed copy, not the build tree's.
if command -v ldd >/dev/null; then
	loaded=$(ldd "$APP/app" | awk -v s="$soname" '$1 == s { print $3 }')
	[ "$(readlink -f "$loaded")" = "$SO" ] || fail "app loads $loaded, not $SO"
fi
# With LD_LIBRARY_PATH instead of an rpath.
# shellcheck disable=SC2086
(cd "$APP" && $CC -std=c11 $SAN_FLAGS -o app-nrp app.c $flags) || fail "build without rpath"
out=$(cd "$APP" && LD_LIBRARY_PATH=$LIB ./app-nrp "$APP/data2" 2>&1) || fail "app with LD_LIBRARY_PATH: $out"

# Static linking with the installed archive.
cflags=$(pkg-config --cflags oatomic)
slibs=$(pkg-config --static --libs-only-l oatomic | sed 's/-loatomic//')
# shellcheck disable=SC2086
if (cd "$APP" && $CC -std=c11 $SAN_FLAGS $cflags -o app-static app.c "$LIB/liboatomic.a" $slibs 2>"$WORK/static.log"); then
	out=$(cd "$APP" && ./app-static "$APP/data3" 2>&1) || fail "static app: $out"
else
	cat "$WORK/static.log"
	fail "linking a program with the installed liboatomic.a"
fi

# The installed tool runs.
"$PREFIX/bin/oatomic" info "$APP/data" >"$WORK/info.out" 2>&1 ||
	fail "installed oatomic info: $(head -n 5 "$WORK/info.out")"

if [ $fails -gt 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "install ok"
exit 0
