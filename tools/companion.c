/*
 * companion.c - where the tool finds the libraries installed beside
 * liboatomic (companion.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "companion.h"

#ifndef OA_LIBDIR
#define OA_LIBDIR "/usr/local/lib"
#endif

/* Whether PATH is a regular file; then made absolute into OUT. */
static bool file_at(const char *path, char *out)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
	       realpath(path, out) != NULL;
}

int oa_companion(const char *name, const char *env, char *out, char *tried,
		 size_t n)
{
	const char *e = env ? getenv(env) : NULL;
	char exe[PATH_MAX], beside[PATH_MAX + 64], inlib[PATH_MAX + 64];
	char libdir[PATH_MAX];
	struct stat st;
	ssize_t l;

	if (tried && n)
		tried[0] = '\0';
	if (e && *e) {
		if (tried)
			snprintf(tried, n, "$%s (%s)", env, e);
		if (e[0] != '/') {
			errno = EINVAL;
			return -1;
		}
		if (stat(e, &st) < 0)
			return -1;
		if (!S_ISREG(st.st_mode)) {
			errno = ENOENT;
			return -1;
		}
		return realpath(e, out) ? 0 : -1;
	}
	snprintf(libdir, sizeof(libdir), "%s/%s", OA_LIBDIR, name);
	l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (l > 0) {
		char *slash;
		exe[l] = '\0';
		slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
		snprintf(beside, sizeof(beside), "%s/%s", exe, name);
		snprintf(inlib, sizeof(inlib), "%s/../lib/%s", exe, name);
		if (file_at(beside, out) || file_at(inlib, out))
			return 0;
		if (tried)
			snprintf(tried, n, "%s, %s and %s", beside, inlib,
				 libdir);
	} else if (tried) {
		snprintf(tried, n, "%s (/proc/self/exe: %s)", libdir,
			 strerror(errno));
	}
	if (file_at(libdir, out))
		return 0;
	errno = ENOENT;
	return -1;
}
