/*
 * conf_fork.c - a handle across fork and exec (oatomic(3), FORK AND EXEC).
 *
 *  - In a child, an inherited handle refuses every call but oa_close
 *    (EBADF): the child can neither read through it nor commit the parent's
 *    pending changes; its oa_close (and its exit) frees its copy and
 *    touches nothing shared, so other openers never wait on it and the
 *    parent's handle works on.
 *  - The parent closing its handle while a forked child still holds the
 *    inherited descriptors leaves no lock behind: the next opener is
 *    "alone" (checkpoints at its close) and nobody waits.
 *  - An exec'd program inherits none of the library's descriptors.
 * Every opener that could hang runs in a child under an alarm.
 *
 * SPDX-License-Identifier: MIT
 */
#include "testutil.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#define LEN 8

static const char *path;

/* Another process opens, commits STAMP and closes, within 10 s. */
static int other_opener(void *stamp)
{
	alarm(10);
	oa_file *f = tu_oa_open(path, O_RDWR, 0);
	tu_oa_pwrite(f, stamp, LEN, 0);
	CHECK_OK(oa_commit(f));
	CHECK_OK(oa_close(f));
	return 0;
}

static int child_uses(void *arg)
{
	oa_file *f = arg;
	char buf[LEN];
	struct stat st;
	CHECK_ERR(oa_pread(f, buf, LEN, 0), EBADF);
	CHECK_ERR(oa_pwrite(f, "cccccccc", LEN, 0), EBADF);
	CHECK_ERR(oa_ftruncate(f, 0), EBADF);
	CHECK_ERR(oa_fstat(f, &st), EBADF);
	off_t sz;
	CHECK_ERR(oa_fsize(f, &sz), EBADF);
	CHECK_ERR(oa_commit(f), EBADF);
	CHECK_ERR(oa_abort(f), EBADF);
	CHECK_OK(oa_close(f));
	return 0;
}

static int child_exits(void *arg)
{
	(void)arg;
	return 0;   /* the inherited handle is simply left behind */
}

static int child_sleeps(void *arg)
{
	(void)arg;
	pause();
	return 0;
}

/* Does process PID hold a descriptor of one of the library's files? */
static int holds_sidecar(pid_t pid)
{
	char dir[64], fd[PATH_MAX], target[PATH_MAX];
	struct dirent *de;
	int found = 0;
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(dir);
	CHECK(d);
	while ((de = readdir(d)) != NULL) {
		snprintf(fd, sizeof(fd), "%s/%s", dir, de->d_name);
		ssize_t n = readlink(fd, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (strstr(target, "/.forked.oa") || strstr(target, "/forked"))
			found = 1;
	}
	closedir(d);
	return found;
}

int main(void)
{
	tu_alarm(60);
	tu_pin_journal();
	path = tu_path("forked");
	tu_write_file(path, "00000000", LEN, 0644);

	/* 1. The child may only close; the parent's pending write stays
	 * the parent's. */
	oa_file *f = tu_oa_open(path, O_RDWR, 0);
	tu_oa_pwrite(f, "PPPPPPPP", LEN, 0);
	CHECK_CHILD_OK(tu_run_child(child_uses, f));
	CHECK_FILE(path, "00000000", LEN, LEN);
	CHECK_CHILD_OK(tu_run_child(other_opener, "OOOOOOOO"));
	CHECK_FILE(path, "OOOOOOOO", LEN, LEN);
	CHECK_CHILD_OK(tu_run_child(child_exits, f));
	CHECK_CHILD_OK(tu_run_child(other_opener, "QQQQQQQQ"));
	CHECK_OK(oa_commit(f));   /* the parent's handle works on */
	CHECK_FILE(path, "PPPPPPPP", LEN, LEN);
	CHECK_OK(oa_close(f));

	/* 2. The parent closes while a child holds the descriptors. */
	f = tu_oa_open(path, O_RDWR, 0);
	tu_oa_pwrite(f, "RRRRRRRR", LEN, 0);
	CHECK_OK(oa_commit(f));
	pid_t sleeper = tu_fork(child_sleeps, NULL);
	CHECK_OK(oa_close(f));
	CHECK_CHILD_OK(tu_run_child(other_opener, "SSSSSSSS"));
	CHECK_FILE(path, "SSSSSSSS", LEN, LEN);
	/* The opener was alone at its close: it checkpointed, nothing is
	 * left to recover. */
	FILE *out = fopen("/dev/null", "w");
	CHECK_EQ(oa__check(path, NULL, out), 0);
	fclose(out);
	/* A second handle, kept open, sees the sleeper hold nothing. */
	f = tu_oa_open(path, O_RDWR, 0);
	CHECK_CHILD_OK(tu_run_child(other_opener, "TTTTTTTT"));
	CHECK_OK(oa_close(f));
	kill(sleeper, SIGKILL);
	tu_wait(sleeper);

	/* 3. exec: the program gets none of the library's descriptors. */
	f = tu_oa_open(path, O_RDWR, 0);
	tu_oa_pwrite(f, "UUUUUUUU", LEN, 0);
	CHECK_OK(oa_commit(f));
	pid_t p = fork();
	CHECK(p >= 0);
	if (p == 0) {
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	/* Once it runs sleep (not our copy before the exec), look. */
	for (int i = 0; i < 1000; i++) {
		char comm[64] = "", pp[64];
		snprintf(pp, sizeof(pp), "/proc/%d/comm", (int)p);
		FILE *c = fopen(pp, "r");
		if (c) {
			if (!fgets(comm, sizeof(comm), c))
				comm[0] = 0;
			fclose(c);
		}
		if (strncmp(comm, "sleep", 5) == 0)
			break;
		usleep(10 * 1000);
	}
	CHECK(!holds_sidecar(p));
	CHECK_OK(oa_close(f));
	CHECK_CHILD_OK(tu_run_child(other_opener, "VVVVVVVV"));
	kill(p, SIGKILL);
	tu_wait(p);
	CHECK_FILE(path, "VVVVVVVV", LEN, LEN);
	return 0;
}
