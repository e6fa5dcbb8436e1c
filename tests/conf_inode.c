/*
 * conf_inode.c - the journal belongs to the inode, not to a name
 * (docs/FORMAT.md, "The home").
 *
 * A writer commits through one name and dies with its commit durable in the
 * journal but not yet in the file (kill point 2).  Then, through another
 * name of the same inode:
 *   - a hard link in the same directory, and one in another directory: an
 *     oa_open recovers the commit first, a new commit through that name
 *     lands, and oa_recover through the first name does not roll it back;
 *   - the file renamed, in its directory and into another one: oatomic
 *     check says "pending" (not "clean") and oa_recover replays the commit;
 *   - a bind mount of the file (root): a commit through the mount survives
 *     a recovery through the file's own name, and a file that has no home
 *     yet is refused (EXDEV) rather than given sidecars on the mount
 *     point's file system;
 *   - a moved file keeps its home, and a new file made under its old name
 *     gets another: both recover their own commits (while the moved file
 *     has commits to recover, the new file is refused, never given its
 *     home);
 *   - a home no name reaches any more is ESTALE, never "clean".
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <sys/mount.h>
#include <sys/stat.h>

#define LEN 8

static void put(oa_file *f, void *arg)
{
	tu_oa_pwrite(f, arg, LEN, 0);
}

/* A commit of STAMP through PATH that is durable in the journal, not in
 * the file: the writer dies right after the commit flush. */
static void crash_commit(const char *path, const char *stamp)
{
	CHECK_EQ(tu_crash_commit(path, 2, put, (void *)stamp), 1);
}

/* What oatomic check says: 0 clean, 1 pending, 2 bad. */
static int check(const char *path)
{
	FILE *out = fopen("/dev/null", "w");
	int r = oa__check(path, NULL, out);
	fclose(out);
	return r;
}

static void links(const char *f, const char *g)
{
	tu_write_file(f, "00000000", LEN, 0644);
	CHECK_OK(link(f, g));
	crash_commit(f, "AAAAAAAA");
	CHECK_FILE(f, "00000000", LEN, LEN);   /* durable in the journal only */

	/* The other name finds the pending commit... */
	oa_file *h = tu_oa_open(g, O_RDWR, 0);
	CHECK_OA_VIEW(h, "AAAAAAAA", LEN);
	tu_oa_pwrite(h, "BBBBBBBB", LEN, 0);
	CHECK_OK(oa_commit(h));
	CHECK_OK(oa_close(h));
	/* ...and a recovery through the first name keeps what it did. */
	CHECK_OK(oa_recover(f));
	CHECK_FILE(f, "BBBBBBBB", LEN, LEN);
	CHECK_FILE(g, "BBBBBBBB", LEN, LEN);
	CHECK_EQ(check(f), 0);
	CHECK_EQ(check(g), 0);
}

static void renamed(const char *f, const char *to)
{
	tu_write_file(f, "00000000", LEN, 0644);
	tu_oa_update(f, "11111111", LEN, 0);  /* the file has its home */
	crash_commit(f, "AAAAAAAA");
	CHECK_OK(rename(f, to));
	CHECK_EQ(check(to), 1);
	CHECK_OK(oa_recover(to));
	CHECK_FILE(to, "AAAAAAAA", LEN, LEN);
	CHECK_EQ(check(to), 0);
	/* A crash first, then the rename: the same through oa_open. */
	crash_commit(to, "CCCCCCCC");
	CHECK_OK(rename(to, f));
	oa_file *h = tu_oa_open(f, O_RDONLY, 0);
	CHECK_OA_VIEW(h, "CCCCCCCC", LEN);
	CHECK_OK(oa_close(h));
	CHECK_FILE(f, "CCCCCCCC", LEN, LEN);
}

/* A moved file keeps its home; a new file under the old name has its own
 * (it must not take over a home another inode may still need). */
static void name_reused(void)
{
	const char *f = tu_path("reuse"), *moved = tu_path("reuse-moved");
	tu_write_file(f, "00000000", LEN, 0644);
	tu_oa_update(f, "11111111", LEN, 0);
	CHECK_OK(rename(f, moved));
	tu_write_file(f, "22222222", LEN, 0644);
	crash_commit(moved, "MMMMMMMM");
	CHECK_EQ(check(moved), 1);
	/* The new file may not take over a home with commits to recover: it
	 * is refused (it could be a copy of a crashed directory), not given
	 * a home over them. */
	CHECK_NULL_ERR(oa_open(f, O_RDWR, 0), EUCLEAN);
	CHECK_OK(oa_recover(moved));
	crash_commit(f, "NNNNNNNN");
	crash_commit(moved, "OOOOOOOO");
	CHECK_EQ(check(moved), 1);
	CHECK_EQ(check(f), 1);
	CHECK_OK(oa_recover(moved));
	CHECK_OK(oa_recover(f));
	CHECK_FILE(moved, "OOOOOOOO", LEN, LEN);
	CHECK_FILE(f, "NNNNNNNN", LEN, LEN);
	/* And again the other way round, with both open at once. */
	oa_file *a = tu_oa_open(f, O_RDWR, 0), *b = tu_oa_open(moved, O_RDWR, 0);
	tu_oa_pwrite(a, "aaaaaaaa", LEN, 0);
	tu_oa_pwrite(b, "bbbbbbbb", LEN, 0);
	CHECK_OK(oa_commit(b));
	CHECK_OK(oa_commit(a));
	CHECK_OK(oa_close(a));
	CHECK_OK(oa_close(b));
	CHECK_FILE(f, "aaaaaaaa", LEN, LEN);
	CHECK_FILE(moved, "bbbbbbbb", LEN, LEN);
}

/* The file moved out of its home's directory, and that directory renamed:
 * nothing leads to the home any more. */
static void unreachable(void)
{
	const char *d = tu_path("gone"), *d2 = tu_path("gone2");
	const char *f = tu_path("gone/f"), *to = tu_path("stray");
	CHECK_OK(mkdir(d, 0755));
	tu_write_file(f, "00000000", LEN, 0644);
	tu_oa_update(f, "11111111", LEN, 0);
	crash_commit(f, "AAAAAAAA");
	CHECK_OK(rename(f, to));
	CHECK_OK(rename(d, d2));
	CHECK_NULL_ERR(oa_open(to, O_RDWR, 0), ESTALE);
	CHECK_NULL_ERR(oa_open(to, O_RDONLY, 0), ESTALE);
	CHECK_ERR(oa_recover(to), ESTALE);
	CHECK(check(to) != 0);
	/* Put back, everything is found again. */
	CHECK_OK(rename(d2, d));
	CHECK_OK(oa_recover(to));
	CHECK_FILE(to, "AAAAAAAA", LEN, LEN);
}

static void bind_mount(void)
{
	const char *f = tu_path("bound"), *f2 = tu_path("bound2");
	const char *mnt = tu_path("mnt"), *x = tu_path("mnt/x");

	if (!tu_is_root()) {
		tu_note("bind mounts need root: not tried");
		return;
	}
	CHECK_OK(mkdir(mnt, 0755));
	if (mount("oatomic-test", mnt, "tmpfs", 0, "size=1m") < 0) {
		tu_note("no tmpfs mount (%s): bind mounts not tried",
			strerror(errno));
		return;
	}
	tu_write_file(x, "", 0, 0644);
	tu_write_file(f, "00000000", LEN, 0644);
	tu_write_file(f2, "00000000", LEN, 0644);

	/* A file with no home yet: its sidecars would go to the tmpfs. */
	CHECK_OK(mount(f2, x, NULL, MS_BIND, NULL));
	CHECK_NULL_ERR(oa_open(x, O_RDWR, 0), EXDEV);
	oa_file *r = tu_oa_open(x, O_RDONLY, 0);   /* reading is fine */
	CHECK_OA_VIEW(r, "00000000", LEN);
	CHECK_OK(oa_close(r));
	CHECK_OK(umount(x));

	/* A file with a home: every name finds it. */
	tu_oa_update(f, "11111111", LEN, 0);
	CHECK_OK(mount(f, x, NULL, MS_BIND, NULL));
	crash_commit(x, "AAAAAAAA");
	CHECK_OK(umount(x));
	CHECK_EQ(check(f), 1);
	CHECK_OK(oa_recover(f));
	CHECK_FILE(f, "AAAAAAAA", LEN, LEN);
	CHECK_OK(umount(mnt));
}

/* Two writers that first open a fresh file at once, through two names,
 * end up in one home (the second must not record over the first). */
static int go_fd;

static int first_open(void *name)
{
	char c;
	CHECK_EQ(read(go_fd, &c, 1), 1);
	oa_file *f = tu_oa_open(name, O_RDWR, 0);
	tu_oa_pwrite(f, "RRRRRRRR", LEN, 0);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	return 0;
}

static void first_open_race(void)
{
	for (int i = 0; i < 40; i++) {
		const char *a = tu_path("race%d-a", i), *b = tu_path("race%d-b", i);
		int pfd[2];
		tu_write_file(a, "00000000", LEN, 0644);
		CHECK_OK(link(a, b));
		CHECK_OK(pipe(pfd));
		go_fd = pfd[0];
		pid_t p1 = tu_fork(first_open, (void *)a);
		pid_t p2 = tu_fork(first_open, (void *)b);
		CHECK_EQ(write(pfd[1], "gg", 2), 2);
		CHECK_CHILD_OK(tu_wait(p1));
		CHECK_CHILD_OK(tu_wait(p2));
		close(pfd[0]);
		close(pfd[1]);
		int homes = (access(tu_path(".race%d-a.oa", i), F_OK) == 0) +
			    (access(tu_path(".race%d-b.oa", i), F_OK) == 0);
		CHECKF(homes == 1, "round %d: %d homes", i, homes);
	}
}

int main(void)
{
	tu_alarm(120);
	tu_pin_journal();
	CHECK_OK(mkdir(tu_path("d1"), 0755));
	CHECK_OK(mkdir(tu_path("d2"), 0755));

	links(tu_path("same"), tu_path("same-link"));
	links(tu_path("d1/across"), tu_path("d2/across-link"));
	renamed(tu_path("ren"), tu_path("ren-new"));
	renamed(tu_path("d1/mv"), tu_path("d2/mv-new"));
	name_reused();
	unreachable();
	bind_mount();
	first_open_race();
	return 0;
}
