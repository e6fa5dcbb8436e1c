/*
 * fuzz_recover.c - libFuzzer target: arbitrary control and journal bytes
 * fed to recovery, on the simulated disk (no real I/O).
 *
 * Input: four 512-byte header slots (control A at 0, control B at 4096,
 * journal A at 0, journal B at 4096; short input is padded with zeros),
 * then the journal's records from offset 8192.  The file /d/a holds 8 KiB
 * of a known pattern; the control file and journal 0 are the input.
 *
 * Checked for every input (besides ASan and UBSan):
 *   - oa__check and oa_recover return, with 0 or -1 and EUCLEAN, EPERM or
 *     EIO (never another errno);
 *   - when recovery fails, the file is unchanged (bad input is never
 *     applied, GUARANTEES.md §9);
 *   - when it succeeds, a second recovery changes nothing on the disk;
 *   - no simulated descriptor is left open.
 *
 * Build and run: `make fuzz` (clang, -fsanitize=fuzzer,address,undefined).
 * FUZZ_MKCORPUS=DIR ./fuzz_recover writes the seed corpus (journals the
 * library itself wrote, on the simulator) into DIR and exits.
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "oatomic.h"
#include "oatomic-private.h"
#include "sim.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define SLOT 512
#define HDRS (4 * SLOT)
#define FSIZE 8192

static unsigned char orig[FSIZE];

static void die(const char *what)
{
	fprintf(stderr, "fuzz_recover: %s (errno %d: %s)\n", what, errno,
		strerror(errno));
	abort();
}

static struct sim_fs *setup(void)
{
	struct sim_fs *fs = sim_fs_new();
	sim_use(fs);
	if (sim_mkdir("/d") < 0 || sim_put_file("/d/a", orig, FSIZE) < 0)
		die("setup");
	return fs;
}

static void put_pair(const char *path, const unsigned char *a,
		     const unsigned char *b, const unsigned char *rest,
		     size_t nrest)
{
	size_t n = 8192 + nrest;
	unsigned char *buf = calloc(1, n);
	if (!buf)
		die("calloc");
	memcpy(buf, a, SLOT);
	memcpy(buf + 4096, b, SLOT);
	if (nrest)
		memcpy(buf + 8192, rest, nrest);
	if (sim_put_file(path, buf, n) < 0)
		die("put");
	free(buf);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	unsigned char hdr[HDRS] = { 0 };
	memcpy(hdr, data, size < HDRS ? size : HDRS);
	const unsigned char *rest = size > HDRS ? data + HDRS : NULL;
	size_t nrest = size > HDRS ? size - HDRS : 0;

	struct sim_fs *fs = setup();
	/* control: slots plus a live area of zeros up to 8192 + 4096 */
	{
		static const unsigned char live[4096];
		put_pair("/d/.a.oa", hdr, hdr + SLOT, live, sizeof(live));
	}
	put_pair("/d/.a.oaj-0", hdr + 2 * SLOT, hdr + 3 * SLOT, rest, nrest);

	FILE *devnull = fopen("/dev/null", "w");
	int c = oa__check("/d/a", NULL, devnull);
	if (devnull)
		fclose(devnull);
	if (c < -1 || c > 2)
		die("oa__check result");
	if (c == -1 && errno != EIO && errno != EUCLEAN && errno != EPERM)
		die("oa__check errno");

	uint64_t h0 = sim_fs_hash(fs);
	int r = oa_recover("/d/a");
	if (r < 0) {
		if (errno != EUCLEAN && errno != EPERM && errno != EIO)
			die("oa_recover errno");
		unsigned char *b = NULL;
		size_t n = 0;
		if (sim_get_file("/d/a", &b, &n) < 0 || n != FSIZE ||
		    memcmp(b, orig, FSIZE))
			die("a failed recovery changed the file");
		free(b);
		(void)h0;
	} else {
		uint64_t h1 = sim_fs_hash(fs);
		if (oa_recover("/d/a") < 0)
			die("second recovery failed");
		if (sim_fs_hash(fs) != h1)
			die("second recovery changed the disk");
	}
	if (sim_open_fds() != 0)
		die("descriptor leak");
	sim_fs_free(fs);
	return 0;
}

/* ---- the seed corpus: what the library writes ---- */

static void dump(const char *dir, const char *name)
{
	unsigned char *c = NULL, *j = NULL;
	size_t nc = 0, nj = 0;
	if (sim_get_file("/d/.a.oa", &c, &nc) < 0)
		die("no control file");
	if (sim_get_file("/d/.a.oaj-0", &j, &nj) < 0) {
		j = calloc(1, 8192);
		nj = 8192;
	}
	/* journal records up to the last non-zero byte */
	size_t end = nj;
	while (end > 8192 && !j[end - 1])
		end--;
	end = (end + 511) / 512 * 512;
	if (end > nj)
		end = nj;
	unsigned char hdr[HDRS] = { 0 };
	memcpy(hdr, c, SLOT);
	if (nc >= 4096 + SLOT)
		memcpy(hdr + SLOT, c + 4096, SLOT);
	memcpy(hdr + 2 * SLOT, j, SLOT);
	memcpy(hdr + 3 * SLOT, j + 4096, SLOT);
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f)
		die(path);
	fwrite(hdr, 1, HDRS, f);
	if (end > 8192)
		fwrite(j + 8192, 1, end - 8192, f);
	fclose(f);
	free(c);
	free(j);
}

static void wr(oa_file *f, size_t off, size_t n, int v)
{
	unsigned char *b = malloc(n);
	if (!b)
		die("malloc");
	memset(b, v, n);
	if (oa_pwrite(f, b, n, (off_t)off) != (ssize_t)n)
		die("oa_pwrite");
	free(b);
}

static void mkcorpus(const char *dir)
{
	struct sim_fs *fs = setup();
	oa_file *f = oa_open("/d/a", O_RDWR, 0);
	if (!f)
		die("oa_open");
	dump(dir, "seed-fresh");
	wr(f, 100, 3000, 'x');
	dump(dir, "seed-pending");
	if (oa_commit(f))
		die("commit");
	dump(dir, "seed-one-commit");
	wr(f, 5000, 100, 'y');
	if (oa_ftruncate(f, 6000) || oa_commit(f))
		die("commit 2");
	wr(f, 0, 10, 'z');
	wr(f, 20, 10, 'w');
	if (oa_commit(f))
		die("commit 3");
	dump(dir, "seed-three-commits");
	wr(f, 7000, 2000, 'q');
	if (oa_abort(f))
		die("abort");
	wr(f, 64, 64, 'r');
	if (oa_commit(f))
		die("commit 4");
	dump(dir, "seed-aborted-then-commit");
	if (oa_close(f))
		die("close");
	dump(dir, "seed-checkpointed");
	sim_fs_free(fs);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	for (size_t i = 0; i < FSIZE; i++)
		orig[i] = (unsigned char)(i * 7 + 3);
	sim_install();
	const char *d = getenv("FUZZ_MKCORPUS");
	if (d && *d) {
		mkcorpus(d);
		exit(0);
	}
	return 0;
}
