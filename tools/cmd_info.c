/*
 * cmd_info.c - `oatomic info`: what oatomic can do for a file (oa_ioinfo).
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "oatomic.h"
#include "oatomic-private.h"
#include "tool.h"

/* "79.7 GiB" for N bytes, in BUF. */
static const char *human_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *const unit[] = { "KiB", "MiB", "GiB", "TiB",
					    "PiB", "EiB" };
	double v = (double)n;
	int i = -1;

	while (v >= 1024.0 && i < 5) {
		v /= 1024.0;
		i++;
	}
	if (i < 0)
		snprintf(buf, len, "%" PRIu64 " bytes", n);
	else
		snprintf(buf, len, "%" PRIu64 " bytes (%.1f %s)", n, v, unit[i]);
	return buf;
}

/* A JSON string literal of S (control characters escaped; bytes >= 0x80
 * passed through, as a path is whatever bytes the file system holds). */
static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", out);
		else if (*p == '\t')
			fputs("\\t", out);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out);
	}
	fputc('"', out);
}

static void print_json(const char *path, const struct oa_ioinfo *io)
{
	const char *m = oa__method_name(io->method);

	printf("{\n  \"path\": ");
	json_string(stdout, path);
	printf(",\n  \"method\": ");
	if (m)
		json_string(stdout, m);
	else
		printf("\"%d\"", io->method);
	printf(",\n  \"method_id\": %d", io->method);
	printf(",\n  \"fs_magic\": %lu", io->fs_magic);
	printf(",\n  \"fs_name\": ");
	json_string(stdout, io->fs_name);
	printf(",\n  \"block_size\": %" PRIu32, io->block_size);
	printf(",\n  \"dio_mem_align\": %" PRIu32, io->dio_mem_align);
	printf(",\n  \"dio_offset_align\": %" PRIu32, io->dio_offset_align);
	printf(",\n  \"atomic_write_unit_min\": %" PRIu32,
	       io->atomic_write_unit_min);
	printf(",\n  \"atomic_write_unit_max\": %" PRIu32,
	       io->atomic_write_unit_max);
	printf(",\n  \"atomic_write_segments_max\": %" PRIu32,
	       io->atomic_write_segments_max);
	printf(",\n  \"atomic_write_unit_hw_max\": %" PRIu32,
	       io->atomic_write_unit_hw_max);
	printf(",\n  \"rwf_atomic\": %s", io->rwf_atomic ? "true" : "false");
	printf(",\n  \"reflink\": %s", io->reflink ? "true" : "false");
	printf(",\n  \"exchange\": %s", io->exchange ? "true" : "false");
	printf(",\n  \"max_txn_bytes\": %" PRIu64, io->max_txn_bytes);
	printf(",\n  \"map_tracking\": \"%s\"\n}\n", io->map_tracking);
}

static void row(const char *label, const char *value)
{
	printf("%-27s %s\n", label, value);
}

static void print_table(const char *path, const struct oa_ioinfo *io)
{
	const char *m = oa__method_name(io->method);
	char v[64];

	row("path", path);
	if (!m) {
		snprintf(v, sizeof(v), "unknown (%d)", io->method);
		m = v;
	}
	row("method", m);
	row("file system", io->fs_name);
	snprintf(v, sizeof(v), "0x%lx", io->fs_magic);
	row("file system magic", v);
	snprintf(v, sizeof(v), "%" PRIu32, io->block_size);
	row("block size", v);
	if (io->dio_mem_align || io->dio_offset_align) {
		snprintf(v, sizeof(v), "%" PRIu32, io->dio_mem_align);
		row("direct I/O memory align", v);
		snprintf(v, sizeof(v), "%" PRIu32, io->dio_offset_align);
		row("direct I/O offset align", v);
	} else {
		row("direct I/O memory align", "0 (no direct I/O)");
		row("direct I/O offset align", "0 (no direct I/O)");
	}
	if (io->atomic_write_unit_max) {
		snprintf(v, sizeof(v), "%" PRIu32, io->atomic_write_unit_min);
		row("atomic write unit min", v);
		snprintf(v, sizeof(v), "%" PRIu32, io->atomic_write_unit_max);
		row("atomic write unit max", v);
		snprintf(v, sizeof(v), "%" PRIu32,
			 io->atomic_write_segments_max);
		row("atomic write segments max", v);
		if (io->atomic_write_unit_hw_max)
			snprintf(v, sizeof(v), "%" PRIu32,
				 io->atomic_write_unit_hw_max);
		else
			snprintf(v, sizeof(v), "0 (all out of place)");
		row("atomic write in device", v);
	} else {
		row("atomic write unit min", "0 (none)");
		row("atomic write unit max", "0 (none)");
		row("atomic write segments max", "0 (none)");
		row("atomic write in device", "0 (none)");
	}
	row("RWF_ATOMIC works", io->rwf_atomic ? "yes" : "no");
	row("reflink works", io->reflink ? "yes" : "no");
	row("range exchange works", io->exchange ? "yes" : "no");
	row("mapping stores found by", io->map_tracking);
	row("largest transaction", human_bytes(io->max_txn_bytes, v, sizeof(v)));
}

static int info_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "journal-dir", required_argument, NULL, 'J' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct oa_options opts = { .size = sizeof(opts) };
	struct oa_ioinfo io;
	const char *path;
	oa_file *f;
	int json = 0, opt, ret;

	while ((opt = getopt_long(argc, argv, ":jJ:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'j':
			json = 1;
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

	f = oa_open_opts(path, O_RDONLY, 0, &opts);
	if (!f)
		return tool_error_jdir(path, opts.journal_dir, NULL, errno);
	memset(&io, 0, sizeof(io));
	io.size = sizeof(io);
	if (oa_ioinfo(f, &io) < 0) {
		int err = errno;

		oa_close(f);
		return tool_error(path, "ioinfo", err);
	}
	/* Nothing was changed, so a failing close has nothing to report that
	 * the user must act on; ignore it. */
	oa_close(f);

	if (json)
		print_json(path, &io);
	else
		print_table(path, &io);
	if (fflush(stdout) == EOF || ferror(stdout))
		return tool_error(NULL, "standard output", errno ? errno : EIO);
	return TOOL_EXIT_OK;
}

const struct tool_cmd info_cmd = {
	.name = "info",
	.func = info_f,
	.args = "PATH [--json] [--journal-dir DIR]",
	.oneline = "show how oatomic commits to PATH and what its file "
		   "system offers",
	.help =
" Opens PATH read-only in atomic mode (which first recovers what a crash\n"
" left behind, as every open does) and prints what oa_ioinfo(3) reports:\n"
" the commit method the library picks for the file, the file system, its\n"
" block size, the direct I/O alignment of memory and offsets, the kernel's\n"
" untorn write unit (RWF_ATOMIC, 0 where there is none), whether atomic\n"
" writes, reflink and XFS range exchange were seen to work there, and the\n"
" largest transaction the file can take now (bounded by free space).\n"
"\n"
" Options:\n"
"   -j, --json             print one JSON object, with the field names of\n"
"                          struct oa_ioinfo, instead of the table\n"
"   -J, --journal-dir DIR  the journal lives in DIR, not beside PATH (on\n"
"                          another file system than PATH: no reflink nor\n"
"                          exchange, so neither the clone nor the\n"
"                          exchange method)\n"
"\n"
" Example:\n"
"   oatomic info /var/lib/app/state.db\n"
"   oatomic info --json /var/lib/app/state.db | jq .max_txn_bytes\n",
};
