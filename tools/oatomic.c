/*
 * oatomic.c - the oatomic command: main(), the table of commands, help and
 * the helpers every command uses (errors, usage, number parsing).
 *
 *   oatomic [--help | --version]
 *   oatomic COMMAND [ARGS...]
 *   oatomic help [COMMAND]
 *
 * SPDX-License-Identifier: MIT
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oatomic.h"
#include "oatomic-private.h"
#include "tool.h"

static const char *progname = "oatomic";

static int help_f(const struct tool_cmd *cmd, int argc, char **argv);

static const struct tool_cmd help_cmd = {
	.name = "help",
	.func = help_f,
	.args = "[COMMAND]",
	.oneline = "list the commands, or show the help of one",
	.help =
" Without COMMAND, lists the commands; with it, shows how to use COMMAND.\n"
" `oatomic COMMAND --help` does the same.\n"
"\n"
" Example:\n"
"   oatomic help write\n",
};

/* The table of commands, in the order `oatomic help` lists them. */
static const struct tool_cmd *const cmdtab[] = {
	&info_cmd,
	&write_cmd,
	&replace_cmd,
	&recover_cmd,
	&check_cmd,
	&run_cmd,
	&demo_cmd,
	&bench_cmd,
	&help_cmd,
};

#define NCMDS (sizeof(cmdtab) / sizeof(cmdtab[0]))

static const struct tool_cmd *find_cmd(const char *name)
{
	for (size_t i = 0; i < NCMDS; i++)
		if (strcmp(cmdtab[i]->name, name) == 0)
			return cmdtab[i];
	return NULL;
}

const char *tool_strerror(int err)
{
	if (err == EUCLEAN)
		return "damaged journal (run oatomic check)";
	/* Besides what open(2) means by it (an immutable file, ...), the
	 * library refuses with EPERM to replay a journal someone else could
	 * have written. */
	if (err == EPERM)
		return "Operation not permitted (is a journal owned by another "
		       "user or writable by others? run oatomic check)";
	/* The home recorded on the file (docs/FORMAT.md, "The home"). */
	if (err == ESTALE)
		return "its journals live in a directory no name of it reaches "
		       "any more (moved out of a renamed directory?): move it "
		       "back, then recover it";
	return strerror(err);
}

int tool_error(const char *path, const char *what, int err)
{
	fprintf(stderr, "%s: ", progname);
	if (path)
		fprintf(stderr, "%s: ", path);
	if (what)
		fprintf(stderr, "%s: ", what);
	fprintf(stderr, "%s\n", tool_strerror(err));
	return TOOL_EXIT_ERR;
}

int tool_error_jdir(const char *path, const char *jdir, const char *what,
		    int err)
{
	struct stat st;

	if (jdir && (err == ENOENT || err == ENOTDIR || err == EACCES)) {
		if (stat(jdir, &st) < 0)
			return tool_error(jdir, "journal directory", errno);
		if (!S_ISDIR(st.st_mode))
			return tool_error(jdir, "journal directory", ENOTDIR);
	}
	/* oa_open's EINVAL for a path that is no regular file */
	if (err == EINVAL && !what && stat(path, &st) == 0 &&
	    S_ISBLK(st.st_mode) && !jdir)
		return tool_errorf(path, "a block device: its journal needs a "
				   "directory of its own (--journal-dir DIR)");
	if (err == ENODEV && !what && stat(path, &st) == 0 &&
	    S_ISBLK(st.st_mode))
		return tool_errorf(path, "a block device with no stable "
				   "identity (no loop backing file, device "
				   "mapper UUID, WWID or serial number): a "
				   "journal could be replayed onto another disk");
	if (err == EINVAL && !what && stat(path, &st) == 0 &&
	    !S_ISREG(st.st_mode))
		return tool_errorf(path, "not a regular file");
	/* the library's control file has a second name (a hard link planted
	 * at ".NAME.oa"): refused, never written through */
	if (err == EMLINK && !what)
		return tool_errorf(path, "%s (its control file .NAME.oa has "
				   "another name, a hard link: not oatomic's "
				   "own, left untouched; remove that name)",
				   strerror(err));
	return tool_error(path, what, err);
}

int tool_errorf(const char *path, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", progname);
	if (path)
		fprintf(stderr, "%s: ", path);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return TOOL_EXIT_ERR;
}

int tool_usage(const struct tool_cmd *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: %s: ", progname, cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (usage: %s %s %s)\n", progname, cmd->name, cmd->args);
	return TOOL_EXIT_USAGE;
}

int tool_badopt(const struct tool_cmd *cmd, int c, char **argv)
{
	/* With a leading ':' in the optstring, getopt_long returns ':' for a
	 * missing argument and '?' for an unknown option; argv[optind - 1] is
	 * the word it was looking at (the short option itself is in optopt). */
	const char *word = argv[optind - 1];

	if (c == ':')
		return tool_usage(cmd, "option '%s' needs an argument", word);
	if (optopt && word[0] == '-' && word[1] != '-')
		return tool_usage(cmd, "unknown option '-%c'", optopt);
	return tool_usage(cmd, "unknown option '%s'", word);
}

int tool_one_path(const struct tool_cmd *cmd, int argc, char **argv,
		  const char **path)
{
	if (argc - optind != 1)
		return tool_usage(cmd, optind == argc ? "missing PATH"
						      : "too many arguments");
	*path = argv[optind];
	return 0;
}

int tool_help(const struct tool_cmd *cmd)
{
	printf("usage: %s %s %s\n\n%s\n", progname, cmd->name, cmd->args,
	       cmd->oneline);
	if (cmd->help)
		printf("\n%s", cmd->help);
	return TOOL_EXIT_OK;
}

int tool_parse_u64(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	int base = 10;
	char *end;

	/* Decimal unless it says 0x: "0100" is one hundred, as a user of dd
	 * or head means it, not octal 64.  strtoull would also skip blanks
	 * and take a sign (negating): only a digit may start the number. */
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
		if (!isxdigit((unsigned char)*s))
			return -1;
	} else if (!isdigit((unsigned char)*s)) {
		return -1;
	}
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end != '\0')
		return -1;
	if (shift && v > (UINT64_MAX >> shift))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}

int tool_parse_range(const struct tool_cmd *cmd, const char *opt,
		     const char *arg, uint64_t min, uint64_t max,
		     const char *what, uint64_t *out)
{
	uint64_t v;

	if (tool_parse_u64(arg, &v) < 0 || v < min || v > max)
		return tool_usage(cmd, "%s: %s, not '%s'", opt, what, arg);
	*out = v;
	return 0;
}

int tool_parse_seconds(const char *s, double *out)
{
	size_t digits = strspn(s, "0123456789");
	const char *p = s + digits;
	char *end;

	/* Digits with an optional fraction: strtod alone would also take
	 * blanks, a sign, hex, exponents, "inf" and "nan". */
	if (*p == '.') {
		size_t frac = strspn(p + 1, "0123456789");

		digits += frac;
		p += 1 + frac;
	}
	if (!digits || *p != '\0')
		return -1;
	errno = 0;
	*out = strtod(s, &end);
	if (errno || *end != '\0')
		return -1;
	return 0;
}

static void list_cmds(FILE *out)
{
	fprintf(out,
		"usage: %s COMMAND [ARGS...]   (%s help COMMAND for more)\n\n"
		"failure-atomic file updates: liboatomic from the shell\n\n"
		"commands:\n", progname, progname);
	for (size_t i = 0; i < NCMDS; i++)
		fprintf(out, "  %-8s %s\n", cmdtab[i]->name,
			cmdtab[i]->oneline);
}

static int help_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const struct tool_cmd *c;
	int opt;

	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'h':
			return tool_help(cmd);
		default:
			return tool_badopt(cmd, opt, argv);
		}
	}
	if (optind == argc) {
		list_cmds(stdout);
		return TOOL_EXIT_OK;
	}
	if (argc - optind > 1)
		return tool_usage(cmd, "too many arguments");
	c = find_cmd(argv[optind]);
	if (!c)
		return tool_usage(cmd, "no command '%s'", argv[optind]);
	return tool_help(c);
}

/*
 * Make sure descriptors 0, 1 and 2 are open, each closed one on /dev/null.
 * Cron jobs and daemons may start us with some closed: the library's first
 * open would then get one, and the target file would be read as our input,
 * or get our messages written into it, past the journal.  Returns 0, or -1
 * if a hole cannot be filled.
 */
static int std_fds_open(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		int nfd;

		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		/* The lower ones are open: open(2) takes this very number. */
		nfd = open("/dev/null", O_RDWR | O_NOCTTY);
		if (nfd != fd) {
			if (nfd >= 0)
				close(nfd);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct tool_cmd *cmd;

	/* First, before anything can open a file or print. */
	if (std_fds_open() < 0) {
		/* Only if standard error is ours to write to. */
		if (fcntl(STDERR_FILENO, F_GETFD) >= 0)
			dprintf(STDERR_FILENO, "%s: cannot open /dev/null for "
				"a closed standard descriptor\n", progname);
		return TOOL_EXIT_USAGE;
	}
	if (argc < 2) {
		list_cmds(stderr);
		return TOOL_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		list_cmds(stdout);
		return TOOL_EXIT_OK;
	}
	if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
		printf("%s %d.%d.%d\n", progname, OATOMIC_VERSION_MAJOR,
		       OATOMIC_VERSION_MINOR, OATOMIC_VERSION_PATCH);
		return TOOL_EXIT_OK;
	}
	cmd = find_cmd(argv[1]);
	if (!cmd) {
		fprintf(stderr, "%s: no command '%s' (see '%s help')\n",
			progname, argv[1], progname);
		return TOOL_EXIT_USAGE;
	}
	/* Each command parses its own options: start getopt afresh (0, not 1,
	 * also resets glibc's internal state) and keep its messages quiet, so
	 * that every error stays one line of ours. */
	optind = 0;
	opterr = 0;
	return cmd->func(cmd, argc - 1, argv + 1);
}
