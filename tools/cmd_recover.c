/*
 * cmd_recover.c - `oatomic recover` and `oatomic check`: the journals a
 * crash left behind, finished (recover) or only reported (check).
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <stdio.h>

#include "oatomic.h"
#include "oatomic-private.h"
#include "tool.h"

/* What `oatomic check` exits with: the worst finding over all paths. */
#define CHECK_CLEAN	0	/* nothing pending */
#define CHECK_PENDING	1	/* committed transactions wait for recovery */
#define CHECK_BAD	2	/* damaged, foreign or unsafe; or not checked */

static const struct option jdir_longopts[] = {
	{ "journal-dir", required_argument, NULL, 'J' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static const struct option recover_longopts[] = {
	{ "journal-dir", required_argument, NULL, 'J' },
	{ "adopt", no_argument, NULL, 'a' },
	{ "discard", no_argument, NULL, 'd' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/*
 * Parse the options recover and check share.  Returns -1 to go on (with
 * *JDIR set and optind at the first PATH), or the exit status to return.
 */
static int parse_jdir(const struct tool_cmd *cmd, int argc, char **argv,
		      const char **jdir)
{
	int opt;

	*jdir = NULL;
	while ((opt = getopt_long(argc, argv, ":J:h", jdir_longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'J':
			*jdir = optarg;
			break;
		case 'h':
			return tool_help(cmd);
		default:
			return tool_badopt(cmd, opt, argv);
		}
	}
	if (optind == argc)
		return tool_usage(cmd, "missing PATH");
	return -1;
}

static int recover_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	const char *jdir = NULL;
	unsigned flags = 0;
	int opt, ret, status = TOOL_EXIT_OK;

	while ((opt = getopt_long(argc, argv, ":J:h", recover_longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'J':
			jdir = optarg;
			break;
		case 'a':
			flags |= OA__RECOVER_ADOPT;
			break;
		case 'd':
			flags |= OA__RECOVER_DISCARD;
			break;
		case 'h':
			return tool_help(cmd);
		default:
			return tool_badopt(cmd, opt, argv);
		}
	}
	if (optind == argc)
		return tool_usage(cmd, "missing PATH");
	/* Each path on its own: one that fails does not stop the rest.  The
	 * findings (which file, which record) go to stderr before the error
	 * line; what --discard threw away is said there too. */
	for (int i = optind; i < argc; i++) {
		ret = oa__recover_ex(argv[i], jdir, flags, stderr);
		if (ret < 0) {
			int e = errno;
			if (e == EUCLEAN)
				tool_errorf(argv[i], "not recovered: damaged or "
					    "copied journal or control file "
					    "(see above; nothing was applied)");
			else
				tool_error_jdir(argv[i], jdir, NULL, e);
			status = TOOL_EXIT_ERR;
		}
	}
	return status;
}

static int check_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	const char *jdir;
	int ret, worst = CHECK_CLEAN;

	ret = parse_jdir(cmd, argc, argv, &jdir);
	if (ret >= 0)
		return ret;
	for (int i = optind; i < argc; i++) {
		ret = oa__check(argv[i], jdir, stdout);
		fflush(stdout);	/* keep findings and errors in order */
		if (ret < 0) {
			/* A file that could not be checked cannot be called
			 * safe: count it with the worst. */
			if (errno == EPERM)
				tool_errorf(argv[i], "control file or journal "
					    "owned by another user or writable "
					    "by others: not replayed");
			else if (errno == EUCLEAN)
				tool_errorf(argv[i], "damaged journal");
			else
				tool_error_jdir(argv[i], jdir, NULL, errno);
			ret = CHECK_BAD;
		} else if (ret > CHECK_BAD) {
			ret = CHECK_BAD;
		}
		if (ret > worst)
			worst = ret;
	}
	return worst;
}

const struct tool_cmd recover_cmd = {
	.name = "recover",
	.func = recover_f,
	.args = "[--journal-dir DIR] [--adopt | --discard] PATH...",
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
" Options:\n"
"   -J, --journal-dir DIR  the journals are in DIR, not beside each PATH\n"
"       --adopt            replay the journals of a copied directory: they\n"
"                          and the control file name the same old inode\n"
"       --discard          throw away the damaged or copied journals that\n"
"                          recovery refuses, leaving PATH as it is, and say\n"
"                          so (one line per journal); the rest is recovered\n"
"\n"
" Example:\n"
"   oatomic recover /var/lib/app/*.db\n"
"   cp -a /crashed/dir /copy && oatomic recover --adopt /copy/state.db\n",
};

const struct tool_cmd check_cmd = {
	.name = "check",
	.func = check_f,
	.args = "[--journal-dir DIR] PATH...",
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
" Options:\n"
"   -J, --journal-dir DIR  the journals are in DIR, not beside each PATH\n"
"\n"
" Example:\n"
"   oatomic check /var/lib/app/*.db\n"
"   oatomic check state.db; [ $? -eq 1 ] && oatomic recover state.db\n",
};
