/*
 * cmd_run.c - `oatomic run`: run a program with liboatomic's preload
 * library, so that the files it writes are updated atomically.
 *
 * The command itself only prepares: it finds PROGRAM as execvp(3) would,
 * refuses it if the library cannot reach it (progcheck.c: a static or
 * set-ID program ignores LD_PRELOAD, and would silently write its files
 * the usual way), finds the library, sets the variables the library reads
 * and executes PROGRAM in its own place.  The atomicity is all the
 * library's (preload/).
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tool.h"
#include "companion.h"
#include "../preload/progcheck.h"

/* Where `make install` puts the library; the build may say otherwise. */
#ifndef OA_LIBDIR
#define OA_LIBDIR	"/usr/local/lib"
#endif

#define PRELOAD_NAME	"liboatomic-preload.so"

/* The search path when PATH is unset (progcheck.c's too). */
#define DEFAULT_PATH	"/usr/local/bin:/usr/bin:/bin"

/* Exit statuses for PROGRAM, as a shell gives them. */
#define RUN_EXIT_NOEXEC		126
#define RUN_EXIT_NOTFOUND	127

/* The one line `oatomic run: PROGRAM: REASON` (printf FMT) on standard
 * error. */
static void run_error(const char *prog, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void run_error(const char *prog, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "oatomic run: %s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/*
 * PROG as execvp(3) finds it, into BUF (PATH_MAX bytes): as is if it holds
 * a '/', else the first regular file we may execute in the colon list
 * SEARCH (an empty entry is the current directory), or failing that the
 * first file of that name (which execvp would fail on, and the check
 * refuses).  Returns 0, or -1 with errno ENOENT (ENOTDIR) if there is
 * none.
 */
static int find_program(const char *prog, const char *search, char *buf)
{
	size_t nlen = strlen(prog);
	struct stat st;

	if (strchr(prog, '/')) {
		if (nlen >= PATH_MAX) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(buf, prog, nlen + 1);
		/* other failures are the check's to report */
		if (stat(buf, &st) < 0 && (errno == ENOENT || errno == ENOTDIR))
			return -1;
		return 0;
	}
	if (nlen == 0) {
		errno = ENOENT;
		return -1;
	}
	for (int pass = 0; pass < 2; pass++) {
		const char *p = search;

		for (;;) {
			size_t dlen = strcspn(p, ":");

			if (dlen + 1 + nlen < PATH_MAX) {
				snprintf(buf, PATH_MAX, "%.*s%s%s", (int)dlen,
					 p, dlen ? "/" : "", prog);
				if (stat(buf, &st) == 0 &&
				    (pass == 1 || (S_ISREG(st.st_mode) &&
						   access(buf, X_OK) == 0)))
					return 0;
			}
			if (p[dlen] == '\0')
				break;
			p += dlen + 1;
		}
	}
	errno = ENOENT;
	return -1;
}

/*
 * The preload library into OUT (PATH_MAX bytes): $OATOMIC_PRELOAD, or
 * PRELOAD_NAME beside this binary, in ../lib from it, or in the library
 * directory (companion.c).  Returns 0, or reports why not and returns
 * TOOL_EXIT_ERR.
 */
static int find_library(char *out)
{
	char tried[3 * PATH_MAX + 256];

	if (oa_companion(PRELOAD_NAME, "OATOMIC_PRELOAD", out, tried,
			 sizeof(tried)) == 0)
		return 0;
	if (errno == EINVAL)
		return tool_errorf(PRELOAD_NAME, "OATOMIC_PRELOAD must be an "
				   "absolute path");
	if (errno != ENOENT || getenv("OATOMIC_PRELOAD"))
		return tool_error(PRELOAD_NAME, tried, errno);
	return tool_errorf(PRELOAD_NAME, "not found (tried %s; set "
			   "OATOMIC_PRELOAD to its path)", tried);
}

/*
 * LD_PRELOAD for PROGRAM: LIB first, then the entries of OLD (the loader
 * separates them with colons or blanks) other than LIB itself.  Returns a
 * malloc'ed string, or NULL for ENOMEM.
 */
static char *preload_list(const char *lib, const char *old)
{
	size_t llen = strlen(lib);
	char *list = malloc(llen + (old ? strlen(old) : 0) + 2);
	size_t len = llen;

	if (!list)
		return NULL;
	memcpy(list, lib, llen);
	while (old && *old) {
		size_t n = strcspn(old, ": \t");

		if (n && !(n == llen && memcmp(old, lib, n) == 0)) {
			list[len++] = ':';
			memcpy(list + len, old, n);
			len += n;
		}
		old += n;
		if (*old)
			old++;
	}
	list[len] = '\0';
	return list;
}

/* The environment PROGRAM runs with.  Returns 0, or reports the failure
 * and returns TOOL_EXIT_ERR. */
static int set_environment(const char *lib, const char *match,
			   const char *on_close)
{
	char *list = preload_list(lib, getenv("LD_PRELOAD"));
	int err;

	if (!list)
		return tool_error(NULL, "LD_PRELOAD", ENOMEM);
	if (setenv("LD_PRELOAD", list, 1) < 0 ||
	    setenv("OATOMIC_PRELOAD", lib, 1) < 0 ||
	    setenv("OATOMIC_ON_CLOSE", on_close, 1) < 0 ||
	    (match ? setenv("OATOMIC_MATCH", match, 1)
		   : unsetenv("OATOMIC_MATCH")) < 0) {
		err = errno;
		free(list);
		return tool_error(NULL, "setting the environment", err);
	}
	free(list);
	return 0;
}

/* Append GLOB to the colon list *MATCH (malloc'ed).  Returns 0, or
 * TOOL_EXIT_USAGE / TOOL_EXIT_ERR after reporting why not. */
static int add_match(const struct tool_cmd *cmd, char **match,
		     const char *glob)
{
	size_t old = *match ? strlen(*match) : 0;
	char *m;

	if (!*glob)
		return tool_usage(cmd, "--match: an empty GLOB");
	/* the library splits OATOMIC_MATCH at colons */
	if (strchr(glob, ':'))
		return tool_usage(cmd, "--match: a GLOB may not contain ':', "
				  "not '%s'", glob);
	m = realloc(*match, old + strlen(glob) + 2);
	if (!m)
		return tool_error(NULL, "--match", ENOMEM);
	if (old)
		m[old++] = ':';
	strcpy(m + old, glob);
	*match = m;
	return 0;
}

static const char *reach_name(enum oa_reach r)
{
	return r == OA_REACH_OK ? "reachable" : "not reachable";
}

static int run_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	enum {
		OPT_ON_CLOSE = 256,
	};
	static const struct option longopts[] = {
		{ "match", required_argument, NULL, 'm' },
		{ "on-close", required_argument, NULL, OPT_ON_CLOSE },
		{ "check", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char path[PATH_MAX], lib[PATH_MAX], why[PATH_MAX + 512];
	const char *on_close = "commit", *prog, *search;
	char *match = NULL;
	bool check = false;
	enum oa_reach r;
	int opt, ret, err;

	/* '+': the first operand is PROGRAM, and what follows it is its own
	 * (`oatomic run ls -l`). */
	while ((opt = getopt_long(argc, argv, "+:m:ch", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'm':
			if ((ret = add_match(cmd, &match, optarg))) {
				free(match);
				return ret;
			}
			break;
		case OPT_ON_CLOSE:
			if (strcmp(optarg, "commit") != 0 &&
			    strcmp(optarg, "discard") != 0) {
				free(match);
				return tool_usage(cmd, "--on-close: commit or "
						  "discard, not '%s'", optarg);
			}
			on_close = optarg;
			break;
		case 'c':
			check = true;
			break;
		case 'h':
			free(match);
			return tool_help(cmd);
		default:
			free(match);
			return tool_badopt(cmd, opt, argv);
		}
	}
	if (optind == argc) {
		free(match);
		return tool_usage(cmd, "missing PROGRAM");
	}
	prog = argv[optind];

	search = getenv("PATH");
	if (find_program(prog, search ? search : DEFAULT_PATH, path) < 0) {
		if (errno == ENOENT && !strchr(prog, '/'))
			run_error(prog, "command not found");
		else
			run_error(prog, "%s", strerror(errno));
		free(match);
		return RUN_EXIT_NOTFOUND;
	}

	/* The program's environment has the same PATH, which an
	 * "#!/usr/bin/env NAME" script searches. */
	r = oa_reach_check(path, search, why, sizeof(why), &err);
	if (check) {
		free(match);
		printf("%s: %s: %s\n", prog, reach_name(r), why);
		return r == OA_REACH_OK ? TOOL_EXIT_OK : TOOL_EXIT_ERR;
	}
	if (r != OA_REACH_OK) {
		run_error(prog, "%s: preloading cannot reach it; refusing to "
			  "run it without atomicity", why);
		free(match);
		return RUN_EXIT_NOEXEC;
	}

	ret = find_library(lib);
	if (ret == 0)
		ret = set_environment(lib, match, on_close);
	free(match);
	if (ret)
		return ret;

	fflush(stdout);
	execv(path, argv + optind);
	run_error(prog, "%s", strerror(errno));
	return RUN_EXIT_NOEXEC;
}

const struct tool_cmd run_cmd = {
	.name = "run",
	.func = run_f,
	.args = "[--match GLOB]... [--on-close commit|discard] [--check] "
		"[--] PROGRAM [ARGS...]",
	.oneline = "run a program with the files it writes updated atomically",
	.help =
" Runs PROGRAM with ARGS with liboatomic's preload library in LD_PRELOAD:\n"
" each regular file that PROGRAM, or a program it starts, opens for writing\n"
" and that matches becomes atomic.  Its changes stay pending until fsync,\n"
" fdatasync or msync, or the last close of the file, which commits them as\n"
" one transaction (with --on-close discard, the last close throws them\n"
" away instead).  After a crash the file holds what its last commit left,\n"
" never a mix.\n"
"\n"
" By default every regular file opened for writing matches, except opens\n"
" with O_APPEND, paths under /dev, /proc, /sys and /run, names ending in\n"
" .lock, .lck or .pid, and oatomic's own control and journal files.  With\n"
" --match, the files that match one of the GLOBs do instead (all but\n"
" oatomic's own files).\n"
"\n"
" The library only reaches a dynamically linked program that gains no\n"
" privileges: a statically linked one has no dynamic loader to load it,\n"
" and the loader ignores LD_PRELOAD for a set-user-ID, set-group-ID or\n"
" file capability program.  So PROGRAM is checked first (a #! script\n"
" through its interpreter, and through the command of an #!/usr/bin/env\n"
" line), and one the library cannot reach is not run: oatomic run fails\n"
" with exit status 126 rather than run it without atomicity.  --check\n"
" only says which it is.  The programs PROGRAM executes are checked the\n"
" same way, by the library.\n"
"\n"
" PROGRAM is searched in PATH unless it holds a '/'.  The library is\n"
" $OATOMIC_PRELOAD if that is set, else " PRELOAD_NAME " beside the\n"
" oatomic binary, in ../lib from it, or in " OA_LIBDIR ".  PROGRAM gets\n"
" LD_PRELOAD (the library first, then the entries there were),\n"
" OATOMIC_PRELOAD, OATOMIC_MATCH and OATOMIC_ON_CLOSE.\n"
"\n"
" Options:\n"
"   -m, --match GLOB       make the files that match GLOB atomic: a shell\n"
"                          pattern (fnmatch(3)) without ':', matched\n"
"                          against the absolute path if it holds a '/',\n"
"                          else against the file name; repeat it for more\n"
"       --on-close commit|discard\n"
"                          what the last close does with pending changes\n"
"                          (default: commit)\n"
"   -c, --check            run nothing: print whether the library reaches\n"
"                          PROGRAM, and exit 0 if it does, 1 if not\n"
"\n"
" Exit status: PROGRAM's own; 127 if it is not found, 126 if it is refused\n"
" or cannot be executed, 1 if the library is not found, 2 for bad usage.\n"
"\n"
" Example:\n"
"   oatomic run -- sh -c 'generate > state.json'\n"
"   oatomic run --check python3\n",
};
