/*
 * fuzz_recover.c - libFuzzer target: arbitrary control and journal bytes
 * fed to recovery, on the simulated disk (no real I/O).
 *
 * Input (format 2): five 512-byte slots (the control file's identity at 0,
 * its header slots A at 4096 and B at 8192, journal 0's slots A at 16384
 * and B at 20480; short input is padded with zeros), then journal 0's
 * records from offset 24576; the live area (12288) is zeros.  The file
 * /d/a holds 8 KiB of a known pattern; the control file is the input.
 *
 * Checked for every input (besides ASan and UBSan):
 *   - oa__check and oa_recover return, with 0 or -1 and EUCLEAN, EPERM,
 *     EPROTO (a format-1 control file) or EIO (never another errno);
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
#define NSLOT 5
#define HDRS (NSLOT * SLOT)
#define FSIZE 8192
#define DATA 24576                  /* journal 0's first record */
/* where slot K of the input goes in the control file */
static const size_t slot_off[NSLOT] = { 0, 4096, 8192, 16384, 20480 };

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

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	unsigned char hdr[HDRS] = { 0 };
	memcpy(hdr, data, size < HDRS ? size : HDRS);
	const unsigned char *rest = size > HDRS ? data + HDRS : NULL;
	size_t nrest = size > HDRS ? size - HDRS : 0;

	struct sim_fs *fs = setup();
	{
		size_t n = DATA + nrest;
		unsigned char *buf = calloc(1, n);
		if (!buf)
			die("calloc");
		for (int k = 0; k < NSLOT; k++)
			memcpy(buf + slot_off[k], hdr + k * SLOT, SLOT);
		if (nrest)
			memcpy(buf + DATA, rest, nrest);
		if (sim_put_file("/d/.a.oa", buf, n) < 0)
			die("put");
		free(buf);
	}

	FILE *devnull = fopen("/dev/null", "w");
	int c = oa__check("/d/a", NULL, devnull);
	if (devnull)
		fclose(devnull);
	if (c < -1 || c > 2)
		die("oa__check result");
	if (c == -1 && errno != EIO && errno != EUCLEAN && errno != EPERM &&
	    errno != EPROTO)
		die("oa__check errno");

	uint64_t h0 = sim_fs_hash(fs);
	int r = oa_recover("/d/a");
	if (r < 0) {
		if (errno != EUCLEAN && errno != EPERM && errno != EIO &&
		    errno != EPROTO)
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
	unsigned char *c = NULL;
	size_t nc = 0;
	if (sim_get_file("/d/.a.oa", &c, &nc) < 0)
		die("no control file");
	/* journal 0's records up to the last non-zero byte */
	size_t end = nc;
	while (end > DATA && !c[end - 1])
		end--;
	end = (end + 511) / 512 * 512;
	if (end > nc)
		end = nc;
	unsigned char hdr[HDRS] = { 0 };
	for (int k = 0; k < NSLOT; k++)
		if (nc >= slot_off[k] + SLOT)
			memcpy(hdr + k * SLOT, c + slot_off[k], SLOT);
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f)
		die(path);
	fwrite(hdr, 1, HDRS, f);
	if (end > DATA)
		fwrite(c + DATA, 1, end - DATA, f);
	fclose(f);
	free(c);
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
