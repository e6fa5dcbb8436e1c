/*
 * conf_clean.c - nothing left behind ("Everyday use", 1; GUARANTEES.md
 * §12; FORMAT.md I14, I15).
 *
 *  - after a one-shot update (open, 4 KiB write, commit, close), a whole
 *    replacement (write, truncate, commit, close), and two handles writing
 *    at once (an extra journal while they are open), the only file beside
 *    the data file is its control file, 512 bytes long;
 *  - a read-only open of a clean file leaves it so, and so does a writer's
 *    open that changes nothing;
 *  - oa_recover of a file a killed writer left leaves it clean too;
 *  - an extra journal of an earlier era put back beside a clean file (a
 *    removal a crash undid) is ignored: a later commit and a kill, then
 *    recovery, give that commit, not the old journal's contents
 *    (make crash-mutants: mutant 28 replays it).
 *
 * Failed on main before format 2 (690dc6f..8f744a8): two files, 4 MiB.
 */
#include <sys/wait.h>

#include "testutil.h"
#include "internal.h"

#define LEN (64 << 10)

static const char *path;

static void check_clean(const char *when)
{
	int n = tu_count_journals(path);
	off_t sz = tu_file_size(tu_control_path(path));
	CHECKF(n == 1, "%s: %d library files beside the file, not 1", when, n);
	CHECKF(sz == OA_CLEAN_SIZE, "%s: control file of %lld bytes, not %d",
	       when, (long long)sz, OA_CLEAN_SIZE);
}

static int killed_writer(void *arg)
{
	const unsigned char *b = arg;
	oa_file *f = tu_oa_open(path, O_RDWR, 0);
	tu_oa_pwrite(f, b, 4096, 8192);
	CHECK_OK(oa_commit(f));
	raise(SIGKILL);
	return 1;
}

int main(void)
{
	unsigned char *model = tu_malloc(LEN), *b = tu_malloc(LEN);
	oa_file *f, *g;

	path = tu_path("f");
	tu_fill(model, LEN, 1, 0);
	tu_write_file(path, model, LEN, 0644);

	/* One-shot update. */
	f = tu_oa_open(path, O_RDWR, 0);
	tu_fill(b, 4096, 2, 0);
	tu_oa_pwrite(f, b, 4096, 4096);
	memcpy(model + 4096, b, 4096);
	CHECK_OK(oa_commit(f));
	CHECK(tu_file_size(tu_control_path(path)) > OA_CLEAN_SIZE);
	CHECK_OK(oa_close(f));
	check_clean("one-shot update");
	CHECK_FILE(path, model, LEN, LEN);

	/* Opens that change nothing. */
	f = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OA_VIEW(f, model, LEN);
	CHECK_OK(oa_close(f));
	f = tu_oa_open(path, O_RDWR, 0);
	CHECK_OA_VIEW(f, model, LEN);
	CHECK_OK(oa_close(f));
	check_clean("opens that only read");

	/* Replacement of the whole content. */
	f = tu_oa_open(path, O_RDWR, 0);
	tu_oa_pwrite(f, "{\"a\":1}\n", 8, 0);
	CHECK_OK(oa_ftruncate(f, 8));
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	check_clean("replacement");
	CHECK_FILE(path, "{\"a\":1}\n", 8, 8);

	/* Two handles at once: the second gets an extra journal. */
	tu_write_file(path, model, LEN, 0644);
	f = tu_oa_open(path, O_RDWR, 0);
	g = tu_oa_open(path, O_RDWR, 0);
	tu_fill(b, LEN, 3, 0);
	tu_oa_pwrite(f, b, 4096, 0);
	tu_oa_pwrite(g, b + 4096, 4096, 4096);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_commit(g));
	memcpy(model, b, 8192);
	CHECK(access(tu_journal_path(path, 1), F_OK) == 0);
	/* Keep a copy of the extra journal with its commit in it. */
	size_t jn;
	void *old = tu_read_file(tu_journal_path(path, 1), &jn);
	CHECK_OK(oa_close(g));
	CHECK_OK(oa_close(f));
	check_clean("two writers");
	CHECK_FILE(path, model, LEN, LEN);
	/* What the old journal wrote is overwritten since. */
	tu_fill(b, 4096, 7, 0);
	tu_oa_update(path, b, 4096, 4096);
	memcpy(model + 4096, b, 4096);

	/* A killed writer, then oa_recover. */
	tu_fill(b, 4096, 4, 0);
	CHECK(tu_run_child(killed_writer, b) != 0);
	memcpy(model + 8192, b, 4096);
	CHECK(tu_file_size(tu_control_path(path)) > OA_CLEAN_SIZE);
	CHECK_OK(oa_recover(path));
	check_clean("oa_recover alone");
	CHECK_FILE(path, model, LEN, LEN);

	/* I15: the old extra journal comes back (a crash undid its removal),
	 * then a new commit, a kill, and recovery.  Its commit must not be
	 * replayed over the new one (its seq is reused in the new era). */
	tu_write_file(tu_journal_path(path, 1), old, jn, 0644);
	tu_fill(b, 4096, 5, 0);
	CHECK(tu_run_child(killed_writer, b) != 0);
	memcpy(model + 8192, b, 4096);
	tu_fill(b, 4096, 6, 0);
	CHECK(tu_run_child(killed_writer, b) != 0);
	memcpy(model + 8192, b, 4096);
	CHECK_OK(oa_recover(path));
	CHECK_FILE(path, model, LEN, LEN);
	f = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OA_VIEW(f, model, LEN);
	CHECK_OK(oa_close(f));
	check_clean("an old journal put back");
	free(old);
	free(model);
	free(b);
	return 0;
}
