/*
 * cmd_bench.c - `oatomic bench`: oatomic against what programs do today,
 * side by side.  The options are parsed here; the workloads, the
 * alternatives and the reports are the engine in bench/engine/ (bench.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "oatomic-private.h"
#include "tool.h"
#include "../bench/engine/bench.h"	/* the engine */

static int check_list(const struct tool_cmd *cmd, const char *opt,
		      const char *list, const char *known)
{
	char *copy = strdup(list), *save = NULL;

	if (!copy)
		return tool_errorf(NULL, "out of memory");
	for (char *w = strtok_r(copy, ",", &save); w;
	     w = strtok_r(NULL, ",", &save)) {
		const char *k = known;
		size_t n = strlen(w);
		int found = 0;
		while (k && *k) {
			if (strncmp(k, w, n) == 0 &&
			    (k[n] == ',' || k[n] == '\0'))
				found = 1;
			k = strchr(k, ',');
			if (k)
				k++;
		}
		if (!found) {
			int rc = tool_usage(cmd, "%s: no '%s' (one of %s)",
					    opt, w, known);
			free(copy);
			return rc;
		}
	}
	free(copy);
	return 0;
}

/* "auto,journal,...": the method names, from the library's one table
 * (enum oa_method counts up from 0). */
static const char *method_list(void)
{
	static char list[128];
	const char *n;

	if (!list[0])
		for (int m = 0; (n = oa__method_name(m)); m++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list),
				 "%s%s", m ? "," : "", n);
	return list;
}

/* Each comma-separated item of LIST (option OPT) to TAKE; a usage error
 * where LIST holds none. */
static int each_item(const struct tool_cmd *cmd, const char *opt,
		     const char *list, struct bench_opts *o,
		     int (*take)(const struct tool_cmd *, const char *,
				 struct bench_opts *))
{
	char *copy = strdup(list), *save = NULL;
	int rc = 0, n = 0;

	if (!copy)
		return tool_errorf(NULL, "out of memory");
	for (char *w = strtok_r(copy, ",", &save); w && !rc;
	     w = strtok_r(NULL, ",", &save), n++)
		rc = take(cmd, w, o);
	free(copy);
	if (!rc && n == 0)
		rc = tool_usage(cmd, "%s: nothing in '%s'", opt, list);
	return rc;
}

/* --sizes 64,64k,1m: one of the replace workload's content sizes. */
static int take_size(const struct tool_cmd *cmd, const char *w,
		     struct bench_opts *o)
{
	uint64_t v;
	int rc = tool_parse_range(cmd, "--sizes", w, 1, 1 << 20,
				  "sizes of 1 to 1m", &v);
	if (rc)
		return rc;
	if (o->nsizes == (int)(sizeof(o->sizes) / sizeof(o->sizes[0])))
		return tool_usage(cmd, "--sizes: at most %d sizes", o->nsizes);
	o->sizes[o->nsizes++] = v;
	return 0;
}

/* --dirty 1,10,100,ramp: one of the mmap workload's points. */
static int take_dirty(const struct tool_cmd *cmd, const char *w,
		      struct bench_opts *o)
{
	static const char *const names[] = { "1", "10", "100", "ramp" };
	size_t i = 0;
	while (i < 4 && strcmp(w, names[i]) != 0)
		i++;
	if (i == 4)
		return tool_usage(cmd, "--dirty: '%s' is not one of 1, 10, "
				  "100, ramp", w);
	o->dirty |= 1u << i;
	return 0;
}

static int bench_f(const struct tool_cmd *cmd, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "quick", no_argument, NULL, 'q' },
		{ "format", required_argument, NULL, 'f' },
		{ "method", required_argument, NULL, 'm' },
		{ "baseline", required_argument, NULL, 'b' },
		{ "workload", required_argument, NULL, 'w' },
		{ "reps", required_argument, NULL, 'r' },
		{ "max-size", required_argument, NULL, 's' },
		{ "budget", required_argument, NULL, 't' },
		{ "keep", no_argument, NULL, 'k' },
		{ "ops", required_argument, NULL, 'n' },
		{ "sizes", required_argument, NULL, 'z' },
		{ "dirty", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_opts o = { .format = BF_TABLE };
	uint64_t v;
	int opt, rc;

	/* the run workload's worker: this binary again (runbench.c) */
	if (argc >= 2 && strcmp(argv[1], "--run-worker") == 0)
		return bench_run_worker(argc - 2, argv + 2);

	while ((opt = getopt_long(argc, argv, ":d:qf:m:b:w:r:s:t:kn:z:D:h", longopts,
				  NULL)) != -1) {
		switch (opt) {
		case 'd':
			o.dir = optarg;
			break;
		case 'q':
			o.quick = 1;
			break;
		case 'f':
			if (strcmp(optarg, "table") == 0)
				o.format = BF_TABLE;
			else if (strcmp(optarg, "csv") == 0)
				o.format = BF_CSV;
			else if (strcmp(optarg, "json") == 0)
				o.format = BF_JSON;
			else
				return tool_usage(cmd, "--format: table, csv "
						  "or json, not '%s'", optarg);
			break;
		case 'm':
			if ((rc = check_list(cmd, "--method", optarg,
					     method_list())))
				return rc;
			o.methods = optarg;
			break;
		case 'b':
			if (strcmp(optarg, "none") == 0) {
				o.baselines = "";
				break;
			}
			if ((rc = check_list(cmd, "--baseline", optarg,
					     "inplace,copy-rename,"
					     "sqlite-rollback,sqlite-wal,"
					     "sqlite-oatomic,lmdb,rwf-atomic")))
				return rc;
			o.baselines = optarg;
			break;
		case 'w':
			if ((rc = check_list(cmd, "--workload", optarg,
					     BENCH_WORKLOADS)))
				return rc;
			o.workloads = optarg;
			break;
		case 'r':
			if ((rc = tool_parse_range(cmd, "--reps", optarg, 1,
						   32, "1 to 32", &v)))
				return rc;
			o.reps = (int)v;
			break;
		case 's':
			if ((rc = tool_parse_range(cmd, "--max-size", optarg,
						   1 << 20, UINT64_MAX,
						   "a size of 1m or more", &v)))
				return rc;
			o.max_size = v;
			break;
		case 't':
			if (tool_parse_seconds(optarg, &o.budget) < 0 ||
			    !(o.budget > 0))
				return tool_usage(cmd, "--budget: seconds, not "
						  "'%s'", optarg);
			break;
		case 'k':
			o.keep = 1;
			break;
		case 'n':
			if ((rc = tool_parse_range(cmd, "--ops", optarg, 1,
						   1000000, "1 to 1000000", &v)))
				return rc;
			o.ops = (int)v;
			break;
		case 'z':
			o.nsizes = 0;
			if ((rc = each_item(cmd, "--sizes", optarg, &o,
					    take_size)))
				return rc;
			break;
		case 'D':
			o.dirty = 0;
			if ((rc = each_item(cmd, "--dirty", optarg, &o,
					    take_dirty)))
				return rc;
			break;
		case 'h':
			return tool_help(cmd);
		default:
			return tool_badopt(cmd, opt, argv);
		}
	}
	if (optind != argc)
		return tool_usage(cmd, "unexpected argument '%s'",
				  argv[optind]);
	o.progress = 1;	/* csv, json: a line per point on stderr */
	return bench_main(&o);
}

const struct tool_cmd bench_cmd = {
	.name = "bench",
	.func = bench_f,
	.args = "[--dir DIR] [--quick] [--format table|csv|json] "
		"[--method M,...] [--baseline B,...] [--workload W,...] "
		"[--reps N] [--max-size SIZE] [--budget SECONDS] [--ops N] "
		"[--sizes SIZE,...] [--dirty PCT,...] [--keep]",
	.oneline = "measure oatomic against the usual ways, side by side",
	.help =
" Runs each workload with oatomic and with the baselines doing the same\n"
" logical update, in the same run, taking turns (forward, then backward) so\n"
" that drift hits all alike; several repetitions; prints the median and the\n"
" min-max.  Works in a scratch directory made in DIR (default $TMPDIR or\n"
" /tmp) and removed at the end (--keep leaves it).  Nothing is asserted:\n"
" the exit status is 1 only when an alternative failed (an I/O error, a\n"
" recovery that lost a commit).\n"
"\n"
" Workloads (--workload, default all):\n"
"   small       one 4-64 KiB update per commit, files of 1 MiB to 4 GiB;\n"
"               and 4 KiB at an unaligned offset (mode \"unaligned\", a\n"
"               64 MiB file; SQLite, LMDB and rwf-atomic sit it out)\n"
"   large       1 MiB to 1 GiB per commit, in 1 MiB writes\n"
"   many        10 to 10,000 4 KiB writes per commit\n"
"   concurrent  1 to 8 committers, threads or processes, one file or each\n"
"               its own; 200 commits each (--ops N)\n"
"   recovery    recovery time after a crash at the commit point, against\n"
"               journal size\n"
"   bulk        a new data set of 256 MiB (--quick 4 MiB) loaded in one\n"
"               transaction, timed until durable: oatomic a new file in\n"
"               1 MiB oa_pwrites and one commit, inplace its pwrites and\n"
"               fsync, SQLite 4 KiB rows inserted into a new database in\n"
"               one transaction (WAL: its checkpoint after, not timed)\n"
" Everyday use, one whole operation (open .. close) at a time, each against\n"
" its plain way, N operations per alternative (--ops, default 200, --quick\n"
" 20; change 20, frag 15, fill 5, --quick 3) in alternating turns of 10\n"
" (of N/4 when N < 40; fill: of 1):\n"
"   open        a clean file: oa_open, one 4 KiB oa_pread, oa_close, with\n"
"               O_RDONLY and with O_RDWR (a writer's open that changes\n"
"               nothing); baseline plain: open + pread + close\n"
"   oneshot     oa_open O_RDWR, one 4 KiB oa_pwrite, oa_commit, oa_close;\n"
"               baseline inplace: open + pwrite + fdatasync + close\n"
"   replace     a small file's whole content replaced: oa_open O_RDWR,\n"
"               oa_pwrite at 0, oa_ftruncate, oa_commit, oa_close; baseline\n"
"               copy-rename: a temporary written, fsync, rename over,\n"
"               directory fsync; content sizes --sizes (default 64,64k,1m)\n"
"   change      one 4 KiB change to a big file (256 MiB, --quick 4 MiB,\n"
"               at most --max-size): oa_open O_RDWR, oa_pwrite, oa_commit,\n"
"               oa_close; baseline copy-rename: the whole file copied with\n"
"               the change to a temporary, fsync, rename over, directory\n"
"               fsync\n"
"   fill        a new, empty file (the same size) written whole: oa_open\n"
"               O_RDWR, 1 MiB oa_pwrites, oa_commit, oa_close; baseline\n"
"               inplace: open + pwrite... + fdatasync + close; the file\n"
"               (and the library's files beside it) made anew, untimed,\n"
"               before each operation\n"
"   frag        (XFS with range exchange; n/a elsewhere) one 64 KiB change\n"
"               to a 64 MiB file (--quick 4 MiB) after 0, 2000, 8000\n"
"               (--quick 0, 100) 4 KiB commits of the exchange method\n"
"               have fragmented it (made before, not timed); baseline\n"
"               clone-exchange: the whole file cloned to an O_TMPFILE, the\n"
"               change written, the whole file exchanged back (DSYNC), as\n"
"               xfs_io's atomic update does; the note says the extents\n"
"   read        a 4 KiB oa_pread on a handle kept open beside a writer's\n"
"               open handle that has committed (the control file in use),\n"
"               20,000 reads (--quick 200) in turns of 1,000; baseline\n"
"               plain: pread on a descriptor kept open\n"
" A mapping (stores and commit timed together):\n"
"   mmap        one commit of 64-byte stores into 1 %, 10 % and 100 % of\n"
"               the 4 KiB pages of a mapping of 64 MiB, 1 GiB and 4 GiB\n"
"               (1 % only; --quick 64 MiB; at most --max-size), 20 commits\n"
"               a point\n"
"               (100 %: 5; --ops N); then 500 commits of 1 % (--quick 100,\n"
"               1 GiB, --quick 64 MiB), the first ten against the last ten;\n"
"               --dirty 1,10,100,ramp picks the points (default all);\n"
"               baselines msync (MAP_SHARED + msync: not atomic, the\n"
"               floor), snapshot (msync, the whole file cloned and fsync'd,\n"
"               as famus_snap; n/a without reflink), writeback (the whole\n"
"               copy written + fdatasync)\n"
" An unmodified program (a worker: this binary, plain pwrite and fsync):\n"
"   run         4 KiB pwrite + fsync of random pages of a 1 MiB and a\n"
"               64 MiB file (--quick 1 MiB), 1000 a run (--quick 200;\n"
"               --ops N), then 4 KiB pwrite alone (20000, --quick 5000):\n"
"               under `oatomic run` (run), through oa_pwrite + oa_commit in\n"
"               this process (oatomic), without the preload (plain), and\n"
"               under it with the file not matching (run-unmatched); --reps\n"
"               runs alternated (default 5, --quick 2); also the update\n"
"               through an fopen'd stream (run-stdio, plain-stdio) and with\n"
"               a forked child holding the descriptor (run-shared); x base:\n"
"               run / oatomic, run-unmatched / plain, run-stdio /\n"
"               plain-stdio, run-shared / oatomic\n"

"   These print median, p90 and p99 per operation, operations/s, flushes\n"
"   and bytes written per operation, the ratio of medians to the baseline\n"
"   (x base), and the files left beside the data file after the run with\n"
"   their disk usage (left; oatomic: .NAME.oa*).  --baseline, --budget and\n"
"   --reps do not apply to them.\n"
" --quick cuts every range to a couple of small points (well under a\n"
" minute); --max-size caps file and transaction sizes; --budget caps the\n"
" seconds of one run of one alternative (it stops early, after a few\n"
" commits, and the per-commit figures stay comparable).  Numbers are\n"
" decimal (0x for hex; SIZE may end in k, m, g, t); SECONDS is decimal\n"
" with an optional fraction.\n"
"\n"
" Alternatives: oatomic once per method (--method auto,journal,clone,\n"
" exchange,kernel; default all, a method the file system cannot do prints\n"
" \"not supported here: REASON\"), and the baselines (--baseline, default\n"
" all, or none): inplace (pwrite + fdatasync, not atomic: the floor),\n"
" copy-rename (temporary copy, fsync, rename, directory fsync),\n"
" sqlite-rollback and sqlite-wal (synchronous=FULL, a 4 KiB blob per page),\n"
" sqlite-oatomic (the same through oatomic's SQLite VFS, journal_mode=MEMORY:\n"
" liboatomic_sqlite.so, found beside this binary, in ../lib or the library\n"
" directory, or at $OATOMIC_SQLITE_EXT), lmdb, rwf-atomic (pwritev2 RWF_ATOMIC|RWF_DSYNC where the file system has\n"
" an atomic write unit).  SQLite and LMDB are loaded at run time\n"
" (libsqlite3.so.0, liblmdb.so.0): when missing they are reported as not\n"
" installed.\n"
"\n"
" Figures: latency per commit (median, p99), commits/s, MB/s, flushes per\n"
" commit and bytes written per byte committed (as the alternative counts\n"
" them, as /proc/self/io counts them, as the block device counts them),\n"
" peak RSS, the latency as a multiple of inplace's, and the CPU time (user\n"
" + system) per commit.  --format csv or json for scripts and plots\n"
" (bench/plot.sh).\n"
"\n"
" Examples:\n"
"   oatomic bench --quick\n"
"   oatomic bench --dir /mnt/xfs --workload small,concurrent --format csv\n"
"   oatomic bench --workload open,oneshot,replace --method auto\n"
"   oatomic bench --workload replace --sizes 64,4k --ops 500\n"
"   oatomic bench --workload change,fill --max-size 64m\n",
};
