/*
 * companion.h - where the tool finds the libraries installed beside
 * liboatomic (the preload library of `oatomic run`, the SQLite extension).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OA_COMPANION_H
#define OA_COMPANION_H

#include <stddef.h>

/*
 * The file NAME (say "liboatomic-preload.so") into OUT (PATH_MAX bytes),
 * absolute and without symbolic links: $ENV if set (it must then be an
 * absolute path to a regular file: nothing else is tried), else NAME beside
 * this executable (a build tree), in ../lib from it, or in the LIBDIR the
 * tool was built for.  Returns 0, or -1 with errno (ENOENT: nowhere; EINVAL:
 * $ENV not absolute; the errors of stat(2) for $ENV) and, in TRIED (N bytes,
 * may be NULL), the places tried.
 */
int oa_companion(const char *name, const char *env, char *out, char *tried,
		 size_t n);

#endif
