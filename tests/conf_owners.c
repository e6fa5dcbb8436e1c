/*
 * conf_owners.c - permissions follow the file (GUARANTEES.md §10), and
 * nothing to recover is success (§7).
 *
 *  - chmod 600 after 0644: the next open by the owner takes the group and
 *    other read bits off every library file of the file;
 *  - a file narrowed from 0666 to 0644: its owner is not locked out by a
 *    control file that is still 0666;
 *  - a shared file (0666) in a sticky shared directory (1777), written first
 *    by another user: its owner and root still work on it, also after the
 *    owner narrows the file so that the other user's files are no longer
 *    trusted (root);
 *  - chown after the fact: the new owner works on the file (root), also one
 *    whose clean control file root made (readable, not writable by it);
 *  - a write-only file (0200): its owner's commits work, and the library's
 *    files are 0600 (root, to be someone else than the owner);
 *  - oa_recover of a clean file on a read-only mount, or by a user who may
 *    only read it, returns 0; with something to recover, EROFS/EACCES.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <dirent.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/wait.h>

#define LEN 8
#define ALICE 1001
#define BOB 1002

/* Every library file of PATH (".NAME.oa*" beside it): mode within MAXMODE. */
static void check_aux_modes(const char *path, mode_t maxmode)
{
	const char *name = strrchr(path, '/') + 1;
	char prefix[NAME_MAX + 8], dir[PATH_MAX], p[PATH_MAX + NAME_MAX + 8];
	struct dirent *de;
	struct stat st;
	int n = 0;

	snprintf(dir, sizeof(dir), "%.*s", (int)(name - 1 - path), path);
	snprintf(prefix, sizeof(prefix), ".%s.", name);
	DIR *d = opendir(dir);
	CHECK(d);
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		CHECK_OK(lstat(p, &st));
		CHECKF((st.st_mode & 0777 & ~maxmode) == 0,
		       "%s has mode %o, more than %o", p,
		       (unsigned)(st.st_mode & 0777), (unsigned)maxmode);
		n++;
	}
	closedir(d);
	CHECKF(n >= 1, "%d library files beside %s", n, path);
}

struct as {
	uid_t uid;
	const char *path, *stamp;
};

static int commit_as(void *arg)
{
	struct as *a = arg;
	CHECK_OK(setgid(a->uid));
	CHECK_OK(setuid(a->uid));
	oa_file *f = tu_oa_open(a->path, O_WRONLY, 0);
	tu_oa_pwrite(f, a->stamp, LEN, 0);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	return 0;
}

static void commit_by(uid_t uid, const char *path, const char *stamp)
{
	struct as a = { uid, path, stamp };
	CHECK_CHILD_OK(tu_run_child(commit_as, &a));
	CHECK_FILE(path, stamp, LEN, LEN);
}

static void narrowed(void)
{
	const char *path = tu_path("secret");
	tu_write_file(path, "00000000", LEN, 0644);
	tu_oa_update(path, "11111111", LEN, 0);
	CHECK_OK(chmod(path, 0600));
	oa_file *f = tu_oa_open(path, O_RDONLY, 0);
	CHECK_OK(oa_close(f));
	check_aux_modes(path, 0600);

	path = tu_path("was-shared");
	tu_write_file(path, "00000000", LEN, 0666);
	CHECK_OK(chmod(path, 0666));   /* past the umask */
	tu_oa_update(path, "11111111", LEN, 0);
	CHECK_OK(chmod(path, 0644));
	tu_oa_update(path, "22222222", LEN, 0);       /* not EPERM */
	check_aux_modes(path, 0644);
	CHECK_FILE(path, "22222222", LEN, LEN);
}

static void sticky(void)
{
	const char *dir = tu_path("shared"), *path = tu_path("shared/f");
	CHECK_OK(mkdir(dir, 0777));
	CHECK_OK(chmod(dir, 01777));
	tu_write_file(path, "00000000", LEN, 0666);
	CHECK_OK(chmod(path, 0666));
	CHECK_OK(chown(path, ALICE, ALICE));
	commit_by(BOB, path, "BBBBBBBB");     /* Bob's library files */
	commit_by(ALICE, path, "AAAAAAAA");   /* the owner is not locked out */
	tu_oa_update(path, "RRRRRRRR", LEN, 0);             /* nor root */
	commit_by(BOB, path, "bbbbbbbb");
	/* Alice narrows her file: Bob's files are no longer to be trusted,
	 * and Alice must not need Bob (or root) to go on. */
	CHECK_OK(chmod(path, 0644));
	commit_by(ALICE, path, "aaaaaaaa");
	tu_oa_update(path, "rrrrrrrr", LEN, 0);
}

static void chowned(void)
{
	const char *path = tu_path("open/given");
	tu_write_file(path, "00000000", LEN, 0644);
	CHECK_OK(chown(path, ALICE, ALICE));
	commit_by(ALICE, path, "AAAAAAAA");
	CHECK_OK(chown(path, BOB, BOB));
	commit_by(BOB, path, "BBBBBBBB");
	tu_oa_update(path, "RRRRRRRR", LEN, 0);
	/* Made by root, then given away: root's control file, which the
	 * new owner may read but not write, does not lock it out. */
	path = tu_path("open/from-root");
	tu_write_file(path, "00000000", LEN, 0644);
	tu_oa_update(path, "RRRRRRRR", LEN, 0);
	CHECK_OK(chown(path, ALICE, ALICE));
	commit_by(ALICE, path, "AAAAAAAA");
	tu_oa_update(path, "rrrrrrrr", LEN, 0);
	commit_by(ALICE, path, "aaaaaaaa");
}

static void write_only(void)
{
	const char *path = tu_path("open/drop");
	tu_write_file(path, "00000000", LEN, 0200);
	CHECK_OK(chown(path, ALICE, ALICE));
	commit_by(ALICE, path, "AAAAAAAA");
	commit_by(ALICE, path, "BBBBBBBB");
	check_aux_modes(path, 0600);
}

static void put(oa_file *f, void *arg)
{
	tu_oa_pwrite(f, arg, LEN, 0);
}

static int recover_as(void *arg)
{
	struct as *a = arg;
	CHECK_OK(setgid(a->uid));
	CHECK_OK(setuid(a->uid));
	if (a->stamp)
		CHECK_ERR(oa_recover(a->path), EACCES);
	else
		CHECK_OK(oa_recover(a->path));
	return 0;
}

static void recover_read_only(void)
{
	const char *mnt = tu_path("ro"), *path = tu_path("ro/f");
	const char *pending = tu_path("ro/g");
	struct as a = { ALICE, tu_path("readable"), NULL };

	/* A user who may only read the file. */
	tu_write_file(a.path, "00000000", LEN, 0644);
	tu_oa_update(a.path, "11111111", LEN, 0);
	CHECK_CHILD_OK(tu_run_child(recover_as, &a));
	CHECK_EQ(tu_crash_commit(a.path, 2, put, "22222222"), 1);
	a.stamp = "x";
	CHECK_CHILD_OK(tu_run_child(recover_as, &a));
	CHECK_OK(oa_recover(a.path));
	CHECK_FILE(a.path, "22222222", LEN, LEN);

	/* A read-only mount. */
	CHECK_OK(mkdir(mnt, 0755));
	if (mount("oatomic-test", mnt, "tmpfs", 0, "size=16m") < 0) {
		tu_note("no tmpfs (%s): read-only mount not tried",
			strerror(errno));
		return;
	}
	tu_write_file(path, "00000000", LEN, 0644);
	tu_write_file(pending, "00000000", LEN, 0644);
	tu_oa_update(path, "11111111", LEN, 0);
	tu_oa_update(pending, "11111111", LEN, 0);
	CHECK_EQ(tu_crash_commit(pending, 2, put, "22222222"), 1);
	CHECK_OK(mount(NULL, mnt, NULL, MS_REMOUNT | MS_RDONLY, NULL));
	CHECK_OK(oa_recover(path));
	CHECK_ERR(oa_recover(pending), EROFS);
	CHECK_OK(mount(NULL, mnt, NULL, MS_REMOUNT, NULL));
	CHECK_OK(oa_recover(pending));
	CHECK_FILE(pending, "22222222", LEN, LEN);
	CHECK_OK(umount(mnt));
}

int main(void)
{
	tu_alarm(120);
	umask(022);
	tu_pin_journal();
	narrowed();
	if (!tu_is_root()) {
		tu_note("not root: other users' cases not tried");
		return 0;
	}
	CHECK_OK(chmod(tu_dir(), 0755));
	sticky();
	CHECK_OK(mkdir(tu_path("open"), 0777));
	CHECK_OK(chmod(tu_path("open"), 0777));
	chowned();
	write_only();
	recover_read_only();
	return 0;
}
