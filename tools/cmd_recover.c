/*
 * cmd_recover.c - `oatomic recover` and `oatomic check`: the journals a
 * crash left behind, finished (recover) or only reported (check).
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "oatomic.h"
#include "oatomic-private.h"
#include "tool.h"

/* What `oatomic check` exits with: the worst finding over all paths. */
#define CHECK_CLEAN	0	/* nothing pending */
#define CHECK_PENDING	1	/* committed transactions wait for recovery */
#define CHECK_BAD	2	/* damaged, foreign or unsafe; or not checked */

static const struct option jdir_longopts[] = {
	{ "journal-dir", required_argument, NULL, 'J' },
	{ "all", no_argument, NULL, 'a' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static const struct option recover_longopts[] = {
	{ "journal-dir", required_argument, NULL, 'J' },
	{ "all", no_argument, NULL, 'a' },
	{ "adopt", no_argument, NULL, 'A' },
	{ "discard", no_argument, NULL, 'D' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/*
 * Parse the options of recover (FLAGS not NULL: --adopt and --discard too)
 * and check.  Returns -1 to go on (with *JDIR, *ALL and *FLAGS set and
 * optind at the first PATH), or the exit status to return.
 */
static int parse_jdir(const struct tool_cmd *cmd, int argc, char **argv,
		      const char **jdir, int *all, unsigned *flags)
{
	int opt;

	*jdir = NULL;
	*all = 0;
	while ((opt = getopt_long(argc, argv, ":J:ah", flags ? recover_longopts
							       : jdir_longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'J':
			*jdir = optarg;
			break;
		case 'a':
			*all = 1;
			break;
		case 'A':
			*flags |= OA__RECOVER_ADOPT;
			break;
		case 'D':
			*flags |= OA__RECOVER_DISCARD;
			break;
		case 'h':
			return tool_help(cmd);
		default:
			return tool_badopt(cmd, opt, argv);
		}
	}
	if (optind == argc)
		return tool_usage(cmd, *all ? "missing DIR" : "missing PATH");
	return -1;
}

/* Recover PATH with FLAGS (OA__RECOVER_*).  The findings (which file,
 * which record) go to standard error before the error line, and so does
 * what --discard threw away.  Returns 0 or TOOL_EXIT_ERR. */
static int recover_one(const char *path, const char *jdir, unsigned flags)
{
	if (oa__recover_ex(path, jdir, flags, stderr) == 0)
		return 0;
	if (errno == EUCLEAN)
		return tool_errorf(path, "not recovered: damaged or copied "
				   "journal or control file (see above; "
				   "nothing was applied)");
	return tool_error_jdir(path, jdir, NULL, errno);
}

/*
 * Check PATH: its findings to OUT, a failure to check it on standard error.
 * Returns the CHECK_* status.
 */
static int check_one(const char *path, const char *jdir, FILE *out)
{
	int ret = oa__check(path, jdir, out);

	fflush(out);	/* keep findings and errors in order */
	if (ret < 0) {
		/* A file that could not be checked cannot be called safe:
		 * count it with the worst. */
		if (errno == EPERM)
			tool_errorf(path, "control file or journal owned by "
				    "another user or writable by others: not "
				    "replayed");
		else if (errno == EUCLEAN)
			tool_errorf(path, "damaged journal");
		else
			tool_error_jdir(path, jdir, NULL, errno);
		return CHECK_BAD;
	}
	return ret > CHECK_BAD ? CHECK_BAD : ret;
}

/* --all: one file found under a tree.  Settles it (RECOVER) or reports on
 * it; prints a line only for a file that had something to settle or
 * report.  Returns TOOL_EXIT_* (recover) or CHECK_* (check). */
static int all_one(const struct tool_ctl *c, const char *jdir, int recover,
		   unsigned flags)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m;
	int ret;

	if (!c->path) {
		tool_errorf(NULL, "%s", c->why);
		return recover ? TOOL_EXIT_ERR : CHECK_BAD;
	}
	if (recover) {
		/* Recovery settles every file (a torn last commit too); a
		 * line says which ones had committed work waiting. */
		int pending = oa__check(c->path, jdir, NULL);

		if (recover_one(c->path, jdir, flags))
			return TOOL_EXIT_ERR;
		if (pending > 0)
			printf("%s: recovered\n", c->path);
		return TOOL_EXIT_OK;
	}
	/* Only files with a finding are listed: hold the lines until the
	 * status is known. */
	m = open_memstream(&buf, &len);
	if (!m) {
		tool_error(c->path, NULL, errno);
		return CHECK_BAD;
	}
	ret = check_one(c->path, jdir, m);
	fclose(m);
	if (ret != CHECK_CLEAN)
		fputs(buf, stdout);
	fflush(stdout);
	free(buf);
	return ret;
}

/* recover --all / check --all over the trees ARGV[optind..]. */
static int all_f(int argc, char **argv, const char *jdir, int recover,
		 unsigned flags)
{
	int worst = 0;

	for (int i = optind; i < argc; i++) {
		struct tool_ctl *c;
		size_t n;
		int errors = 0;

		if (tool_find_ctls(argv[i], jdir, &c, &n, &errors) < 0) {
			worst = recover ? TOOL_EXIT_ERR : CHECK_BAD;
			continue;
		}
		if (errors)	/* a directory unread: not all settled */
			worst = recover ? TOOL_EXIT_ERR : CHECK_BAD;
		for (size_t k = 0; k < n; k++) {
			int ret = all_one(&c[k], jdir, recover, flags);

			if (ret > worst)
				worst = ret;
		}
		tool_ctls_free(c, n);
	}
	return worst;
}

static int recover_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	const char *jdir;
	unsigned flags = 0;
	int all, ret, status = TOOL_EXIT_OK;

	ret = parse_jdir(cmd, argc, argv, &jdir, &all, &flags);
	if (ret >= 0)
		return ret;
	if (all)
		return all_f(argc, argv, jdir, 1, flags);
	/* Each path on its own: one that fails does not stop the rest. */
	for (int i = optind; i < argc; i++)
		if (recover_one(argv[i], jdir, flags))
			status = TOOL_EXIT_ERR;
	return status;
}

static int check_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	const char *jdir;
	int all, ret, worst = CHECK_CLEAN;

	ret = parse_jdir(cmd, argc, argv, &jdir, &all, NULL);
	if (ret >= 0)
		return ret;
	if (all)
		return all_f(argc, argv, jdir, 0, 0);
	for (int i = optind; i < argc; i++) {
		ret = check_one(argv[i], jdir, stdout);
		if (ret > worst)
			worst = ret;
	}
	return worst;
}

const struct tool_cmd recover_cmd = {
	.name = "recover",
	.func = recover_f,
	.args = "[--journal-dir DIR] [--adopt | --discard] PATH... | "
		"--all [--journal-dir JDIR] [--adopt | --discard] DIR...",
	.oneline = "finish or discard what a crash left behind for each PATH",
	.help =
" For each PATH, applies the transactions a crash left committed in its\n"
" journal and makes them durable in PATH, and drops the uncommitted rest,\n"
" without opening PATH for work (oa_recover(3)).  Run it at boot, before\n"
" programs that read the files with plain read(2) start.  It is\n"
" idempotent, leaves files without a journal alone, and is safe while\n"
" other processes use the files.  A PATH that fails is reported on one\n"
" line and the others are still recovered; the exit status is 1 if any\n"
" failed.  A damaged journal is never applied: recover refuses, naming the\n"
" damaged file (control file or journal) and record (seq, LSN), and leaves\n"
" PATH untouched.  So does a copy of a crashed directory (cp -a, rsync,\n"
" tar: new inode numbers) whose journals hold committed transactions.\n"
"\n"
" With --all, the operands are directories: every file under each DIR that\n"
" has a control file (.NAME.oa) is recovered, without naming the files.\n"
" The walk stays on DIR's file system and follows no symbolic link; a\n"
" control file belongs to NAME beside it if that is the inode its header\n"
" records, else to the file of that inode under DIR.  One line is printed\n"
" per file that had committed work to apply (\"PATH: recovered\") or that\n"
" failed, among them a control file whose file is not found under DIR or\n"
" uses another one; the exit status is 1 if any failed.  Control files of\n"
" a journal directory (.NAME.INO.oa) are skipped, unless --journal-dir\n"
" JDIR is given: then those in JDIR are the ones used, and their files\n"
" are looked up under DIR by inode.\n"
"\n"
" Options:\n"
"   -a, --all              the operands are directory trees (see above)\n"
"   -J, --journal-dir DIR  the journals are in DIR, not beside each PATH\n"
"       --adopt            replay the journals of a copied directory: they\n"
"                          and the control file name the same old inode\n"
"       --discard          throw away the damaged or copied journals that\n"
"                          recovery refuses, leaving PATH as it is, and say\n"
"                          so (one line per journal); the rest is recovered\n"
"\n"
" Example:\n"
"   oatomic recover /var/lib/app/*.db\n"
"   oatomic recover --all /var/lib/app\n"
"   cp -a /crashed/dir /copy && oatomic recover --adopt /copy/state.db\n",
};

const struct tool_cmd check_cmd = {
	.name = "check",
	.func = check_f,
	.args = "[--journal-dir DIR] PATH... | --all [--journal-dir JDIR] DIR...",
	.oneline = "report pending or damaged journals of each PATH, "
		   "changing nothing",
	.help =
" Reads the journals of each PATH and prints one line per finding,\n"
" starting with the path; it changes nothing.  The exit status is the\n"
" worst over all paths:\n"
"   0  clean: nothing pending\n"
"   1  committed transactions wait to be applied (normal after a crash;\n"
"      oatomic recover, or the next open, finishes them)\n"
"   2  the control file or a journal is damaged, a journal is foreign\n"
"      (a copied directory's: see oatomic recover --adopt) or unsafe (not\n"
"      replayed: the message names the file and the record), or PATH\n"
"      could not be checked at all\n"
"\n"
" With --all, the operands are directories, walked and matched with their\n"
" files as oatomic recover --all does; only the files with something\n"
" pending or wrong are listed, with their findings.  A control file whose\n"
" file is not found under DIR (or uses another one), or a directory that\n"
" cannot be read, counts as 2.\n"
"\n"
" Options:\n"
"   -a, --all              the operands are directory trees (see above)\n"
"   -J, --journal-dir DIR  the journals are in DIR, not beside each PATH\n"
"\n"
" Example:\n"
"   oatomic check /var/lib/app/*.db\n"
"   oatomic check --all /var/lib/app || oatomic recover --all /var/lib/app\n"
"   oatomic check state.db; [ $? -eq 1 ] && oatomic recover state.db\n",
};
