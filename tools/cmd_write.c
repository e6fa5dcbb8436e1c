/*
 * cmd_write.c - `oatomic write` and `oatomic replace`: one transaction made
 * of standard input; `oatomic replace --from` several files replaced as one
 * unit (oa_commit_group).
 *
 * Standard input is streamed into the transaction in chunks of STREAM_CHUNK
 * bytes: the library puts pending data on disk as it is written, so the
 * tool's memory stays one chunk whatever the size of the input.  Nothing
 * reaches the file before oa_commit(); any failure before it (a read error,
 * ENOSPC in the journal, a kill) leaves the file exactly as it was.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oatomic.h"
#include "tool.h"

#define STREAM_CHUNK	(1u << 20)

/* Fill BUF from FD as far as it goes (pipes return short reads).  Returns
 * the number of bytes read (less than N only at end of input), or -1. */
static ssize_t read_chunk(int fd, char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, buf + got, n - got);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/*
 * Copy standard input into F's transaction from OFF on.  On success sets
 * *END to the offset after the last byte written and returns 0; otherwise
 * reports the error for PATH and returns TOOL_EXIT_ERR.
 */
static int stream_fd(oa_file *f, const char *path, int fd, const char *src,
		     off_t off, off_t *end)
{
	char *buf = malloc(STREAM_CHUNK);
	int ret = 0;

	if (!buf)
		return tool_error(path, NULL, ENOMEM);
	for (;;) {
		ssize_t n = read_chunk(fd, buf, STREAM_CHUNK);
		size_t done = 0;

		if (n < 0) {
			char what[PATH_MAX + 16];
			snprintf(what, sizeof(what), "reading %s", src);
			ret = tool_error(path, what, errno);
			break;
		}
		if (n == 0)
			break;
		while (done < (size_t)n) {
			ssize_t w = oa_pwrite(f, buf + done, (size_t)n - done,
					      off);

			if (w <= 0) {
				if (w == 0)
					errno = EIO;	/* no progress */
				int e = errno;
				/* Pending bytes go into the journal
				 * beside the file, which grows with the
				 * transaction: a full disk or a file size
				 * limit stops it there. */
				bool room = e == ENOSPC || e == EDQUOT ||
					    e == EFBIG;
				ret = tool_errorf(path, "write at offset %jd: "
						  "%s%s (file unchanged)",
						  (intmax_t)off,
						  tool_strerror(e),
						  room ?
						  " (no room for the journal "
						  "beside it, which holds the "
						  "new bytes until the commit)" :
						  "");
				goto out;
			}
			done += (size_t)w;
			off += w;
		}
		if ((size_t)n < STREAM_CHUNK)
			break;
	}
out:
	free(buf);
	*end = off;
	return ret;
}

static int stream_stdin(oa_file *f, const char *path, off_t off, off_t *end)
{
	return stream_fd(f, path, STDIN_FILENO, "standard input", off, end);
}

/* Report that PATH could not be opened for writing.  The library also
 * needs to create its control and journal files beside PATH (or in JDIR):
 * say so when the file itself is writable but that is what failed. */
static int open_error(const char *path, const char *jdir, int err)
{
	if (err == EACCES && access(path, W_OK) == 0)
		return tool_errorf(path, "%s (cannot create the journal in %s; "
				   "see --journal-dir)", strerror(err),
				   jdir ? jdir : "its directory");
	/* the library's EXDEV: a forced clone or exchange method
	 * (OATOMIC_METHOD) with the journal on another file system */
	if (err == EXDEV && jdir)
		return tool_errorf(path, "%s (the journal directory %s is on "
				   "another file system: no clone or exchange "
				   "method)", strerror(err), jdir);
	/* ...or a bind-mounted file with no home yet (docs/FORMAT.md). */
	if (err == EXDEV)
		return tool_errorf(path, "%s (its directory is on another file "
				   "system than the file, a bind mount: its "
				   "journals cannot live there; use it once "
				   "through its own directory, or give "
				   "--journal-dir)", strerror(err));
	return tool_error_jdir(path, jdir, NULL, err);
}

/* Commit F and close it, reporting failures for PATH. */
static int commit_close(oa_file *f, const char *path)
{
	if (oa_commit(f) < 0) {
		int err = errno;

		oa_close(f);
		/* EIO can also mean the library cannot tell whether the commit
		 * is durable; recovery settles it on one of the two states,
		 * which is all this line may promise. */
		if (err == EIO)
			return tool_errorf(path, "commit failed: %s (the file "
					   "holds the old or the new content, "
					   "never a mix)", tool_strerror(err));
		return tool_errorf(path, "commit failed: %s (file unchanged)",
				   tool_strerror(err));
	}
	if (oa_close(f) < 0) {
		/* The commit is durable in the journal; only the checkpoint
		 * into the file failed, and recovery will redo it. */
		return tool_errorf(path, "committed, but close failed: %s "
				   "(the next oa_open or oatomic recover "
				   "finishes it)", tool_strerror(errno));
	}
	return TOOL_EXIT_OK;
}

static int write_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "offset", required_argument, NULL, 'o' },
		{ "truncate", no_argument, NULL, 't' },
		{ "create", no_argument, NULL, 'c' },
		{ "journal-dir", required_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct oa_options opts = { .size = sizeof(opts) };
	int flags = O_WRONLY, truncate = 0, opt, ret;
	uint64_t offset = 0;
	const char *path;
	oa_file *f;
	off_t end;

	while ((opt = getopt_long(argc, argv, ":o:tcJ:h", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'o':
			if ((ret = tool_parse_range(cmd, "--offset", optarg, 0,
						    (uint64_t)INT64_MAX,
						    "an offset below 2^63 ("
						    TOOL_NUM_HINT ")",
						    &offset)))
				return ret;
			break;
		case 't':
			truncate = 1;
			break;
		case 'c':
			flags |= O_CREAT;
			break;
		case 'J':
			opts.journal_dir = optarg;
			break;
		case 'h':
			return tool_help(cmd);
		default:
			return tool_badopt(cmd, opt, argv);
		}
	}
	if ((ret = tool_one_path(cmd, argc, argv, &path)))
		return ret;

	f = oa_open_opts(path, flags, 0666, &opts);
	if (!f)
		return open_error(path, opts.journal_dir, errno);
	ret = stream_stdin(f, path, (off_t)offset, &end);
	if (ret == 0 && truncate && oa_ftruncate(f, end) < 0)
		ret = tool_errorf(path, "truncate to %jd: %s (file unchanged)",
				  (intmax_t)end, tool_strerror(errno));
	if (ret) {
		oa_close(f);	/* drops the transaction */
		return ret;
	}
	return commit_close(f, path);
}

/* Open PATH for replacing: the same inode, emptied in the transaction. */
static oa_file *open_replace(const char *path, const struct oa_options *opts,
			     int *ret)
{
	/* The same inode, emptied and refilled in one transaction: unlike
	 * write-to-temporary-and-rename, the mode, owner, extended attributes
	 * and hard links stay, and descriptors other processes hold on the
	 * file see the new content.  A new file gets 0666 less the umask. */
	oa_file *f = oa_open_opts(path, O_RDWR | O_CREAT, 0666, opts);
	if (!f) {
		*ret = open_error(path, opts->journal_dir, errno);
		return NULL;
	}
	if (oa_ftruncate(f, 0) < 0) {
		*ret = tool_errorf(path, "truncate: %s (file unchanged)",
				   tool_strerror(errno));
		oa_close(f);
		return NULL;
	}
	return f;
}

/*
 * oatomic replace --from SOURCE PATH [--from SOURCE PATH]...: every PATH
 * gets the content of the SOURCE before it, all in one oa_commit_group.
 * Any failure before the commit leaves every PATH as it was.
 */
static int replace_group(const struct tool_cmd *cmd, char **src, char **dst,
			 int n, const struct oa_options *opts)
{
	oa_file **f = calloc((size_t)n, sizeof(*f));
	int ret = TOOL_EXIT_OK, i, stdin_used = 0;

	if (!f)
		return tool_error(dst[0], NULL, ENOMEM);
	for (i = 0; i < n && ret == TOOL_EXIT_OK; i++) {
		bool std = !strcmp(src[i], "-");
		int fd;
		off_t end;
		if (std && stdin_used++)
			ret = tool_usage(cmd, "standard input (-) can be the "
					 "source of one file only");
		if (ret)
			break;
		fd = std ? STDIN_FILENO : open(src[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			ret = tool_error(src[i], "opening the source", errno);
			break;
		}
		f[i] = open_replace(dst[i], opts, &ret);
		if (f[i])
			ret = stream_fd(f[i], dst[i], fd,
					std ? "standard input" : src[i], 0,
					&end);
		if (!std)
			close(fd);
	}
	if (ret == TOOL_EXIT_OK && oa_commit_group(f, (size_t)n) < 0) {
		int err = errno;
		if (err == EIO)
			ret = tool_errorf(dst[0], "group commit failed: %s "
					  "(every file holds its old content "
					  "or every file its new one, never a "
					  "mix)", tool_strerror(err));
		else if (err == EINVAL)
			ret = tool_errorf(dst[0], "group commit failed: a file "
					  "is named twice (files unchanged)");
		else
			ret = tool_errorf(dst[0], "group commit failed: %s "
					  "(files unchanged)",
					  tool_strerror(err));
	}
	/* With nothing committed, closing drops every transaction. */
	for (i = 0; i < n; i++)
		if (f[i] && oa_close(f[i]) < 0 && ret == TOOL_EXIT_OK)
			ret = tool_errorf(dst[i], "committed, but close "
					  "failed: %s (the next oa_open or "
					  "oatomic recover finishes it)",
					  tool_strerror(errno));
	free(f);
	return ret;
}

static int replace_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "journal-dir", required_argument, NULL, 'J' },
		{ "from", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct oa_options opts = { .size = sizeof(opts) };
	const char *path;
	oa_file *f;
	off_t end;
	int opt, ret, n = 0;
	char **src = calloc((size_t)argc + 1, sizeof(*src));
	char **dst = calloc((size_t)argc + 1, sizeof(*dst));

	if (!src || !dst) {
		free(src);
		free(dst);
		return tool_error("replace", NULL, ENOMEM);
	}
	/* "+": in order, so that each --from pairs with the PATH after it */
	while (optind < argc) {
		opt = getopt_long(argc, argv, "+:J:f:h", longopts, NULL);
		if (opt == -1) {
			if (!n)
				break;   /* one PATH, from standard input */
			if (!src[n - 1] || dst[n - 1]) {
				ret = tool_usage(cmd, "each --from SOURCE is "
						 "followed by its PATH");
				goto out;
			}
			dst[n - 1] = argv[optind++];
			continue;
		}
		switch (opt) {
		case 'J':
			opts.journal_dir = optarg;
			break;
		case 'f':
			if (n && !dst[n - 1]) {
				ret = tool_usage(cmd, "--from %s has no PATH "
						 "after it", src[n - 1]);
				goto out;
			}
			src[n++] = optarg;
			break;
		case 'h':
			ret = tool_help(cmd);
			goto out;
		default:
			ret = tool_badopt(cmd, opt, argv);
			goto out;
		}
	}
	if (n) {
		if (!dst[n - 1]) {
			ret = tool_usage(cmd, "--from %s has no PATH after it",
					 src[n - 1]);
			goto out;
		}
		ret = replace_group(cmd, src, dst, n, &opts);
		goto out;
	}
	if ((ret = tool_one_path(cmd, argc, argv, &path)))
		goto out;
	f = open_replace(path, &opts, &ret);
	if (!f)
		goto out;
	ret = stream_stdin(f, path, 0, &end);
	if (ret)
		oa_close(f);
	else
		ret = commit_close(f, path);
out:
	free(src);
	free(dst);
	return ret;
}

const struct tool_cmd write_cmd = {
	.name = "write",
	.func = write_f,
	.args = "PATH [--offset N] [--truncate] [--create] "
		"[--journal-dir DIR] < data",
	.oneline = "write standard input into PATH as one atomic transaction",
	.help =
" Reads standard input to its end and writes it into PATH from offset N on\n"
" (0 by default), as one transaction: after a crash at any moment PATH\n"
" holds either none of the data or all of it.  Input of any size is\n"
" streamed in 1 MiB chunks; the pending data goes to the journal on disk,\n"
" not to memory.  The tool exits 0 only once the commit is durable.\n"
"\n"
" Options:\n"
"   -o, --offset N         start writing at byte N: decimal (0x for hex;\n"
"                          suffixes k, m, g, t: binary multiples)\n"
"   -t, --truncate         also set the size of PATH to the end of the\n"
"                          written data, in the same transaction\n"
"   -c, --create           create PATH (mode 0666 less the umask) if it\n"
"                          does not exist (through a dangling symbolic\n"
"                          link: the file it names, the link stays)\n"
"   -J, --journal-dir DIR  keep the journal in DIR, not beside PATH (give\n"
"                          the same DIR to oatomic recover and check);\n"
"                          PATH's name may then be 228 bytes at most\n"
"\n"
" Example:\n"
"   printf 'new record' | oatomic write --offset 4k db.bin\n"
"   seq 1000000 | oatomic write --create --truncate numbers.txt\n",
};

const struct tool_cmd replace_cmd = {
	.name = "replace",
	.func = replace_f,
	.args = "PATH [--journal-dir DIR] < data\n"
		"       oatomic replace [--journal-dir DIR] --from SOURCE PATH "
		"[--from SOURCE PATH]...",
	.oneline = "replace the whole content of PATH (or of several files, "
		   "as one unit) atomically, keeping the inodes",
	.help =
" Replaces the content of PATH with standard input as one transaction\n"
" (the file is emptied and refilled, then committed).  PATH keeps its\n"
" inode, so its mode, owner, extended attributes and hard links stay, and\n"
" programs that hold it open see the new content.  PATH is created (mode\n"
" 0666 less the umask) if it does not exist; through a dangling symbolic\n"
" link, the file it names is, and the link stays.  After a crash PATH\n"
" holds the old content or the new, never a mix.\n"
"\n"
" With --from, each PATH gets the content of the SOURCE named before it\n"
" (- is standard input, for one of them), and all of them change as one\n"
" unit (oa_commit_group): after a crash every PATH holds its old content\n"
" or every PATH its new one, also across directories and file systems.\n"
"\n"
" Options:\n"
"   -f, --from SOURCE      the content of the PATH that follows\n"
"   -J, --journal-dir DIR  keep the journals in DIR, not beside the files\n"
"\n"
" Examples:\n"
"   generate-config | oatomic replace /etc/app/app.conf\n"
"   oatomic replace --from new.db data/app.db --from new.idx idx/app.idx\n",
};
