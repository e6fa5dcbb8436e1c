/*
 * report.c - what `oatomic bench` prints: a table as it goes, or CSV or
 * JSON at the end.  A figure that does not apply, or that cannot be
 * counted for an alternative, is empty in CSV and null in JSON ("-" in the
 * table).
 *
 * CSV: '#' lines first (the machine, the alternatives and why any could
 * not run), then one header line and one line per (point, alternative).
 *
 * SPDX-License-Identifier: MIT
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oatomic-private.h"
#include "bench.h"

struct bench_row *bench_add_row(struct bench_report *r)
{
	if (r->nrows == r->cap) {
		int cap = r->cap ? r->cap * 2 : 64;
		struct bench_row *n = realloc(r->rows, sizeof(*n) * (size_t)cap);
		if (!n) {
			perror("oatomic: bench");
			exit(1);
		}
		r->rows = n;
		r->cap = cap;
	}
	struct bench_row *row = &r->rows[r->nrows++];
	memset(row, 0, sizeof(*row));
	/* every figure: not measured (-1) until a workload sets it */
	row->lat_med = row->lat_min = row->lat_max = row->lat_p99 = -1;
	row->cps = row->cps_min = row->cps_max = row->mbs = -1;
	row->flushes = row->wamp = row->io_wamp = -1;
	row->dev_flushes = row->dev_wamp = row->peak_kib = -1;
	row->vs_floor = row->lat_p90 = row->bytes_per_op = row->vs_base = -1;
	row->left_files = row->left_bytes = row->cpu_us = -1;
	return row;
}

static const char *const csv_cols =
	"workload,alternative,param,value,file_bytes,mode,status,reps,commits,"
	"txn_bytes,lat_med_us,lat_min_us,lat_max_us,lat_p99_us,commits_s,"
	"commits_s_min,commits_s_max,mb_s,flushes_per_commit,bytes_per_byte,"
	"io_bytes_per_byte,dev_flushes_per_commit,dev_bytes_per_byte,"
	"peak_rss_kib,lat_vs_inplace,lat_p90_us,bytes_per_op,lat_vs_baseline,"
	"left_files,left_bytes,cpu_us_per_commit,note";

static const char *human(uint64_t v, char *buf, size_t len)
{
	if (v >= (1ULL << 30) && v % (1ULL << 30) == 0)
		snprintf(buf, len, "%lu GiB", (unsigned long)(v >> 30));
	else if (v >= (1 << 20) && v % (1 << 20) == 0)
		snprintf(buf, len, "%lu MiB", (unsigned long)(v >> 20));
	else if (v >= 1024 && v % 1024 == 0)
		snprintf(buf, len, "%lu KiB", (unsigned long)(v >> 10));
	else
		snprintf(buf, len, "%lu", (unsigned long)v);
	return buf;
}

static void csv_num(FILE *f, double v, const char *fmt)
{
	fputc(',', f);
	if (v >= 0)
		fprintf(f, fmt, v);
}

static void csv_text(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void print_csv_row(FILE *f, const struct bench_row *r)
{
	fprintf(f, "%s,%s,%s,%lu,%lu,%s,%s,%d,%lu,%lu", r->workload, r->alt,
		r->param, (unsigned long)r->value, (unsigned long)r->file_size,
		r->mode, r->status, r->reps, (unsigned long)r->commits,
		(unsigned long)r->txn_bytes);
	csv_num(f, r->lat_med, "%.1f");
	csv_num(f, r->lat_min, "%.1f");
	csv_num(f, r->lat_max, "%.1f");
	csv_num(f, r->lat_p99, "%.1f");
	csv_num(f, r->cps, "%.1f");
	csv_num(f, r->cps_min, "%.1f");
	csv_num(f, r->cps_max, "%.1f");
	csv_num(f, r->mbs, "%.3f");
	csv_num(f, r->flushes, "%.3f");
	csv_num(f, r->wamp, "%.3f");
	csv_num(f, r->io_wamp, "%.3f");
	csv_num(f, r->dev_flushes, "%.3f");
	csv_num(f, r->dev_wamp, "%.3f");
	csv_num(f, r->peak_kib, "%.0f");
	csv_num(f, r->vs_floor, "%.3f");
	csv_num(f, r->lat_p90, "%.1f");
	csv_num(f, r->bytes_per_op, "%.0f");
	csv_num(f, r->vs_base, "%.3f");
	csv_num(f, r->left_files, "%.0f");
	csv_num(f, r->left_bytes, "%.0f");
	csv_num(f, r->cpu_us, "%.1f");
	fputc(',', f);
	csv_text(f, r->note);
	fputc('\n', f);
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, const char *key, double v, const char *fmt)
{
	fprintf(f, ", \"%s\": ", key);
	if (v >= 0)
		fprintf(f, fmt, v);
	else
		fputs("null", f);
}

static void print_json_row(FILE *f, const struct bench_row *r)
{
	fputs("    {\"workload\": ", f);
	json_str(f, r->workload);
	fputs(", \"alternative\": ", f);
	json_str(f, r->alt);
	fputs(", \"param\": ", f);
	json_str(f, r->param);
	fprintf(f, ", \"value\": %lu, \"file_bytes\": %lu, \"mode\": ",
		(unsigned long)r->value, (unsigned long)r->file_size);
	json_str(f, r->mode);
	fputs(", \"status\": ", f);
	json_str(f, r->status);
	fprintf(f, ", \"reps\": %d, \"commits\": %lu, \"txn_bytes\": %lu",
		r->reps, (unsigned long)r->commits,
		(unsigned long)r->txn_bytes);
	json_num(f, "lat_med_us", r->lat_med, "%.1f");
	json_num(f, "lat_min_us", r->lat_min, "%.1f");
	json_num(f, "lat_max_us", r->lat_max, "%.1f");
	json_num(f, "lat_p99_us", r->lat_p99, "%.1f");
	json_num(f, "commits_s", r->cps, "%.1f");
	json_num(f, "commits_s_min", r->cps_min, "%.1f");
	json_num(f, "commits_s_max", r->cps_max, "%.1f");
	json_num(f, "mb_s", r->mbs, "%.3f");
	json_num(f, "flushes_per_commit", r->flushes, "%.3f");
	json_num(f, "bytes_per_byte", r->wamp, "%.3f");
	json_num(f, "io_bytes_per_byte", r->io_wamp, "%.3f");
	json_num(f, "dev_flushes_per_commit", r->dev_flushes, "%.3f");
	json_num(f, "dev_bytes_per_byte", r->dev_wamp, "%.3f");
	json_num(f, "peak_rss_kib", r->peak_kib, "%.0f");
	json_num(f, "lat_vs_inplace", r->vs_floor, "%.3f");
	json_num(f, "lat_p90_us", r->lat_p90, "%.1f");
	json_num(f, "bytes_per_op", r->bytes_per_op, "%.0f");
	json_num(f, "lat_vs_baseline", r->vs_base, "%.3f");
	json_num(f, "left_files", r->left_files, "%.0f");
	json_num(f, "left_bytes", r->left_bytes, "%.0f");
	json_num(f, "cpu_us_per_commit", r->cpu_us, "%.1f");
	fputs(", \"note\": ", f);
	json_str(f, r->note);
	fputc('}', f);
}

static void env_lines(const struct bench_report *r, const char *pfx)
{
	const struct bench_env *e = &r->env;

	printf("%smachine:  %s, %d CPUs (%s), %.1f GiB RAM\n", pfx, e->kernel,
	       e->ncpu, e->cpu, e->mem_gib);
	if (e->page_order >= 0)
		printf("%smemory:   free page reporting to the host, order %d%s"
		       "\n", pfx, e->page_order,
		       e->page_order > 10 ? " (off in effect)" : "");
	printf("%sdir:      %s: %s on %s (mounted at %s)\n", pfx, e->dir, e->fs,
	       e->dev, e->mount);
	printf("%sstarted:  %s, load %s\n", pfx, e->started, e->load_start);
	printf("%sruns:     %d repetitions of each alternative, alternating; "
	       "median [min-max]%s\n", pfx, e->reps,
	       e->quick ? "; --quick sizes" : "");
	for (int i = 0; i < r->nalts; i++) {
		const struct bench_alt *a = r->alts[i];
		const char *m = oa__method_name(a->actual_method);
		printf("%salt:      %-17s %s", pfx, a->name,
		       a->usable ? a->desc : a->why);
		/* what oa_ioinfo said the handle uses */
		if (a->usable && a->method >= 0)
			printf(" [commits with: %s]", m ? m : "?");
		putchar('\n');
	}
}

void bench_print_head(const struct bench_report *r, enum bench_format f)
{
	if (f == BF_TABLE) {
		env_lines(r, "");
		printf("columns:  latency per commit median [min-max] and p99 "
		       "(us); commits/s; MB/s committed;\n"
		       "          flushes and bytes written per commit / per "
		       "byte as the alternative counts\n"
		       "          them (oatomic: its I/O seam; SQLite, LMDB: "
		       "-), io = /proc/self/io write_bytes,\n"
		       "          dev = the block device's flushes and "
		       "sectors; peak RSS; latency / inplace's;\n"
		       "          CPU time (user+sys) per commit, us\n");
	}
}

static char last_key[256];

/* A size in bytes for a table cell: 512, 8.5 KiB, 4.0 MiB. */
static const char *bytes_short(double v, char *buf, size_t len)
{
	if (v < 0)
		snprintf(buf, len, "-");
	else if (v < 1024)
		snprintf(buf, len, "%.0f", v);
	else if (v < 1024 * 1024)
		snprintf(buf, len, "%.1f KiB", v / 1024);
	else
		snprintf(buf, len, "%.1f MiB", v / (1024 * 1024));
	return buf;
}

/* What both kinds of table row begin with: a row that did not run is one
 * line saying why (returns 1); otherwise LAT gets "median [min-max]" and
 * each of the N values V its cell C[i], "-" where it does not apply, whole
 * for those in the bit mask WHOLE, with two decimals for the others. */
static int row_cells(const struct bench_row *row, char lat[64],
		     const double *v, int n, unsigned whole, char c[][24])
{
	if (strcmp(row->status, "ok") != 0) {
		printf("  %-17s %s: %s\n", row->alt, row->status, row->note);
		fflush(stdout);
		return 1;
	}
	snprintf(lat, 64, "%.0f [%.0f-%.0f]", row->lat_med, row->lat_min,
		 row->lat_max);
	for (int i = 0; i < n; i++) {
		if (v[i] < 0)
			snprintf(c[i], 24, "-");
		else if (whole & (1u << i))
			snprintf(c[i], 24, "%.0f", v[i]);
		else
			snprintf(c[i], 24, "%.2f", v[i]);
	}
	return 0;
}

/* An everyday row: figures per operation, the ratio to the workload's
 * baseline, and what the run left beside the file. */
static void print_op_row(const struct bench_row *row, int head)
{
	char lat[64], left[64], b[24];
	char c[8][24];
	const double v[8] = { row->flushes, row->bytes_per_op, row->io_wamp,
			      row->dev_flushes, row->dev_wamp, row->vs_base,
			      row->cps, row->cpu_us };

	if (head)
		printf("  %-17s %-26s %9s %9s %7s %8s %6s %6s %6s %7s %6s %7s  "
		       "%s\n", "alternative", "op us med [min-max]", "p90 us",
		       "ops/s", "flush/o", "B/op", "io B/B", "dev fl",
		       "dev B/B", "peakMiB", "CPU us", "x base",
		       "left beside the file");
	/* bytes per operation, operations/s and CPU us: whole */
	if (row_cells(row, lat, v, 8, 1u << 1 | 1u << 6 | 1u << 7, c))
		return;
	if (row->left_files < 0)
		snprintf(left, sizeof(left), "-");
	else
		snprintf(left, sizeof(left), "%.0f file%s, %s", row->left_files,
			 row->left_files == 1 ? "" : "s",
			 bytes_short(row->left_bytes, b, sizeof(b)));
	/* a note on an ok row says more about the point (frag: extents) */
	printf("  %-17s %-26s %9.0f %9s %7s %8s %6s %6s %6s %7.1f %6s %7s  "
	       "%s%s%s\n", row->alt, lat, row->lat_p90, c[6], c[0], c[1], c[2],
	       c[3], c[4], row->peak_kib / 1024, c[7], c[5], left,
	       row->note[0] ? "; " : "", row->note);
	fflush(stdout);
}

void bench_print_row_live(const struct bench_report *r,
			  const struct bench_row *row, enum bench_format f)
{
	char key[256], b1[32], b2[32], lat[64];
	char c[7][24];
	const double v[7] = { row->flushes, row->wamp, row->io_wamp,
			      row->dev_flushes, row->dev_wamp, row->vs_floor,
			      row->cpu_us };

	if (f != BF_TABLE)
		return;
	snprintf(key, sizeof(key), "%s/%s/%lu/%lu", row->workload, row->mode,
		 (unsigned long)row->value, (unsigned long)row->file_size);
	if (strcmp(key, last_key) != 0) {
		snprintf(last_key, sizeof(last_key), "%s", key);
		if (!strcmp(row->param, "update_bytes") ||
		    !strcmp(row->param, "txn_bytes") ||
		    !strcmp(row->param, "journal_bytes") ||
		    !strcmp(row->param, "read_bytes") ||
		    !strcmp(row->param, "content_bytes"))
			human(row->value, b1, sizeof(b1));
		else
			snprintf(b1, sizeof(b1), "%lu",
				 (unsigned long)row->value);
		printf("\n  %s %s, file %s%s%s\n", row->param, b1,
		       human(row->file_size, b2, sizeof(b2)),
		       strcmp(row->mode, "-") ? ", " : "",
		       strcmp(row->mode, "-") ? row->mode : "");
		if (row->per_op) {
			print_op_row(row, 1);
			return;
		}
		printf("  %-17s %-26s %9s %9s %8s %7s %6s %6s %6s %6s %7s "
		       "%6s %6s\n", "alternative",
		       strcmp(row->workload, "recovery") ?
		       "latency us med [min-max]" : "recovery us med [min-max]",
		       "p99 us", "commit/s", "MB/s", "flush/c", "B/B", "io B/B",
		       "dev fl", "dev B/B", "peakMiB",
		       strcmp(row->workload, "mmap") ? "x inpl" : "x msync",
		       "CPU us");
	}
	if (row->per_op) {
		print_op_row(row, 0);
		return;
	}
	/* CPU us: whole */
	if (row_cells(row, lat, v, 7, 1u << 6, c))
		return;
	printf("  %-17s %-26s %9.0f ", row->alt, lat, row->lat_p99);
	if (row->cps >= 0)
		printf("%9.1f %8.1f ", row->cps, row->mbs);
	else
		printf("%9s %8s ", "-", "-");
	printf("%7s %6s %6s %6s %6s %7.1f %6s %6s", c[0], c[1], c[2], c[3],
	       c[4], row->peak_kib / 1024, c[5], c[6]);
	/* the mmap rows' note: per dirty page, first against last */
	if (!strcmp(row->workload, "mmap") && row->note[0])
		printf("  %s", row->note);
	printf("\n");
	fflush(stdout);
}

void bench_print_tail(const struct bench_report *r, enum bench_format f)
{
	switch (f) {
	case BF_TABLE:
		printf("\nload at the end: %s; %.0f s\n", r->env.load_end,
		       r->env.seconds);
		break;
	case BF_CSV:
		env_lines(r, "# ");
		printf("# load at the end: %s; %.0f s\n", r->env.load_end,
		       r->env.seconds);
		printf("%s\n", csv_cols);
		for (int i = 0; i < r->nrows; i++)
			print_csv_row(stdout, &r->rows[i]);
		break;
	case BF_JSON: {
		const struct bench_env *e = &r->env;
		printf("{\n  \"machine\": {\"kernel\": ");
		json_str(stdout, e->kernel);
		printf(", \"cpu\": ");
		json_str(stdout, e->cpu);
		printf(", \"cpus\": %d, \"mem_gib\": %.1f", e->ncpu,
		       e->mem_gib);
		if (e->page_order >= 0)
			printf(", \"page_reporting_order\": %d", e->page_order);
		printf("},\n");
		printf("  \"dir\": ");
		json_str(stdout, e->dir);
		printf(", \"fs\": ");
		json_str(stdout, e->fs);
		printf(", \"device\": ");
		json_str(stdout, e->dev);
		printf(", \"started\": ");
		json_str(stdout, e->started);
		printf(", \"load_start\": ");
		json_str(stdout, e->load_start);
		printf(", \"load_end\": ");
		json_str(stdout, e->load_end);
		printf(",\n  \"quick\": %s, \"reps\": %d, \"seconds\": %.1f,\n",
		       e->quick ? "true" : "false", e->reps, e->seconds);
		printf("  \"alternatives\": [\n");
		for (int i = 0; i < r->nalts; i++) {
			const struct bench_alt *a = r->alts[i];
			printf("    {\"name\": ");
			json_str(stdout, a->name);
			printf(", \"usable\": %s, \"what\": ",
			       a->usable ? "true" : "false");
			json_str(stdout, a->usable ? a->desc : a->why);
			printf("}%s\n", i + 1 < r->nalts ? "," : "");
		}
		printf("  ],\n  \"rows\": [\n");
		for (int i = 0; i < r->nrows; i++) {
			print_json_row(stdout, &r->rows[i]);
			printf("%s\n", i + 1 < r->nrows ? "," : "");
		}
		printf("  ]\n}\n");
		break;
	}
	}
}

void bench_print(const struct bench_report *r, enum bench_format f)
{
	bench_print_tail(r, f);
}
