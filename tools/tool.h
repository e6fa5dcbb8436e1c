/*
 * tool.h - what the files of the oatomic command-line tool share.
 *
 * The tool is a thin layer over liboatomic, laid out as xfs_io's io/: one
 * file per family of commands (cmd_*.c), each exporting its struct tool_cmd
 * entries, and oatomic.c holding main(), the table of commands and the
 * helpers below.
 *
 * Exit statuses: 0 success, 1 an operation failed, 2 bad usage (`oatomic
 * check` uses 1 and 2 for what it found, see cmd_recover.c).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OATOMIC_TOOL_H
#define OATOMIC_TOOL_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#define TOOL_EXIT_OK	0
#define TOOL_EXIT_ERR	1
#define TOOL_EXIT_USAGE	2

struct tool_cmd {
	const char *name;
	/* ARGV[0] is the command's name; getopt is reset before the call. */
	int (*func)(const struct tool_cmd *cmd, int argc, char **argv);
	const char *args;	/* synopsis after the name */
	const char *oneline;	/* one line for `oatomic help` */
	const char *help;	/* the long help, ending with an example */
};

/* The commands, one family per file. */
extern const struct tool_cmd info_cmd;		/* cmd_info.c */
extern const struct tool_cmd write_cmd;		/* cmd_write.c */
extern const struct tool_cmd replace_cmd;	/* cmd_write.c */
extern const struct tool_cmd recover_cmd;	/* cmd_recover.c */
extern const struct tool_cmd check_cmd;		/* cmd_recover.c */
extern const struct tool_cmd run_cmd;		/* cmd_run.c */
extern const struct tool_cmd demo_cmd;		/* cmd_demo.c */
extern const struct tool_cmd bench_cmd;		/* cmd_bench.c */

/*
 * Report an error as the one line `oatomic: PATH: [WHAT: ]reason` on
 * standard error, where the reason is strerror(ERR) (EUCLEAN: "damaged
 * journal (run oatomic check)").  PATH or WHAT may be NULL.  Returns
 * TOOL_EXIT_ERR.
 */
int tool_error(const char *path, const char *what, int err);

/* tool_error() for a library call on PATH with the journal in JDIR (NULL:
 * beside PATH): blames JDIR when it is JDIR that is missing or not a
 * directory, as the library's errno alone cannot say which, and says "not
 * a regular file" for oa_open's EINVAL on one. */
int tool_error_jdir(const char *path, const char *jdir, const char *what,
		    int err);

/* Report an error with a free-form reason (printf FMT) on one line, as
 * tool_error().  Returns TOOL_EXIT_ERR. */
int tool_errorf(const char *path, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* The reason tool_error() prints for ERR. */
const char *tool_strerror(int err);

/* Report bad usage of CMD on one line (REASON, then the synopsis).
 * Returns TOOL_EXIT_USAGE. */
int tool_usage(const struct tool_cmd *cmd, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Report what getopt_long returned for a bad option (C is '?' or ':', with
 * optind/optopt as getopt left them; the optstring must begin with ':').
 * Returns TOOL_EXIT_USAGE. */
int tool_badopt(const struct tool_cmd *cmd, int c, char **argv);

/* After getopt: the one PATH operand left in ARGV (at optind) into *PATH.
 * Returns 0, or reports "missing PATH" / "too many arguments" and returns
 * TOOL_EXIT_USAGE. */
int tool_one_path(const struct tool_cmd *cmd, int argc, char **argv,
		  const char **path);

/* Print the help of CMD on standard output.  Returns TOOL_EXIT_OK. */
int tool_help(const struct tool_cmd *cmd);

/* Parse a byte count or offset, the one way every numeric option of the
 * tool is read: decimal, or hex with a 0x prefix (a leading 0 is not
 * octal), optionally followed by k, m, g, t (binary multiples; upper case
 * too).  Returns 0, or -1 for anything else (blanks, a sign, junk,
 * trailing garbage, overflow). */
int tool_parse_u64(const char *s, uint64_t *out);

/* A numeric option's argument ARG (as tool_parse_u64 reads it) into *OUT,
 * which must be MIN..MAX; otherwise the usage error "OPT: WHAT, not 'ARG'"
 * of CMD (WHAT says what the option takes: "1 to 32").  Returns 0, or
 * TOOL_EXIT_USAGE: every numeric option is checked and reported one way. */
int tool_parse_range(const struct tool_cmd *cmd, const char *opt,
		     const char *arg, uint64_t min, uint64_t max,
		     const char *what, uint64_t *out);

/* Parse a duration in seconds: decimal digits with an optional fraction
 * ("2", "0.5").  Returns 0, or -1 for anything else. */
int tool_parse_seconds(const char *s, double *out);

/* How a usage error describes what tool_parse_u64 takes. */
#define TOOL_NUM_HINT "decimal, 0x for hex, suffix k, m, g or t"

/* A control file found under a tree (tree.c) and the file it belongs to. */
struct tool_ctl {
	char *ctl;	/* the control file's path */
	char *path;	/* its file's path; NULL: see why */
	char *why;	/* a one-line reason the file cannot be settled */
	uint64_t ino;	/* the inode number its header records */
};

/*
 * Find the library's control files under DIR (beside their files, a walk
 * that stays on DIR's file system and follows no symbolic link), or, with
 * JDIR, those in the journal directory JDIR, and match each with its file
 * under DIR.  Control files of a journal directory met in the walk are
 * skipped without JDIR.  Returns 0 with *OUT (*N entries, sorted by control
 * file; tool_ctls_free them) and *ERRORS the directories that could not be
 * read (reported), or -1 after reporting why nothing could be walked.
 */
int tool_find_ctls(const char *dir, const char *jdir, struct tool_ctl **out,
		   size_t *n, int *errors);
void tool_ctls_free(struct tool_ctl *c, size_t n);

#endif /* OATOMIC_TOOL_H */
