/*
 * tree.c - the control files under a tree and the files they belong to,
 * for `oatomic recover --all` and `oatomic check --all`.
 *
 * After a crash a boot script must settle every file without knowing
 * their names.  Every file the library ever wrote to has a control file in
 * its home, usually `.NAME.oa` beside it (`.NAME.INO.oa`, INO the inode
 * number in hex, in a journal directory, or where another file had taken
 * the name), whose header slot records the file's inode number
 * (docs/FORMAT.md).  So: walk the tree (one file system, symbolic links
 * not followed), note every regular file's inode number, and match each
 * control file with NAME beside it if that is the recorded inode, else
 * with the file of that inode anywhere under the tree.  The library finds
 * a file's journals in the home recorded on the file (oa__ctl_path); a
 * match whose home is another control file (a leftover, a copy) is
 * reported, not recovered.
 *
 * SPDX-License-Identifier: MIT
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oatomic-private.h"
#include "tool.h"

struct ino_path {
	uint64_t ino;
	char *path;
};

/* What a walk collects.  nftw(3) passes no argument to its callback,
 * hence the one static instance. */
static struct {
	struct ino_path *files;
	size_t nfiles, files_cap;
	char **ctls;
	size_t nctls, ctls_cap;
	int errors;
	int nomem;
	int want_ctls;	/* collect the control files met (no JDIR) */
} W;

static int push(void *arrp, size_t *n, size_t *cap, size_t size,
		const void *item)
{
	char **arr = arrp;

	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		void *p = realloc(*arr, c * size);

		if (!p)
			return -1;
		*arr = p;
		*cap = c;
	}
	memcpy(*arr + *n * size, item, size);
	(*n)++;
	return 0;
}

/* ".X.oa", X not empty: a control file's name. */
static bool ctl_name(const char *base)
{
	size_t n = strlen(base);

	return n > 4 && base[0] == '.' && strcmp(base + n - 3, ".oa") == 0;
}

static int walk_cb(const char *path, const struct stat *st, int type,
		   struct FTW *ftw)
{
	struct ino_path f;
	char *p;

	if (type == FTW_DNR || type == FTW_NS) {
		tool_error(path, type == FTW_DNR ? "cannot read directory"
						 : "cannot stat", errno);
		W.errors++;
		return 0;
	}
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	p = strdup(path);
	f.ino = st->st_ino;
	f.path = p;
	if (!p || push(&W.files, &W.nfiles, &W.files_cap, sizeof(f), &f) < 0)
		goto nomem;
	if (W.want_ctls && ctl_name(path + ftw->base) &&
	    (!(p = strdup(path)) ||
	     push(&W.ctls, &W.nctls, &W.ctls_cap, sizeof(p), &p) < 0))
		goto nomem;
	return 0;
nomem:
	W.nomem = 1;
	return 1;	/* stops the walk */
}

static int by_ino(const void *a, const void *b)
{
	const struct ino_path *x = a, *y = b;

	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static int by_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The file of inode INO under the tree, preferring one named NAME (of a
 * hard-linked file); NULL if none. */
static const char *find_ino(uint64_t ino, const char *name)
{
	struct ino_path key = { .ino = ino };
	struct ino_path *hit = bsearch(&key, W.files, W.nfiles,
				       sizeof(key), by_ino);
	const char *best;

	if (!hit)
		return NULL;
	while (hit > W.files && hit[-1].ino == ino)
		hit--;
	best = hit->path;
	for (; hit < W.files + W.nfiles && hit->ino == ino; hit++) {
		const char *b = strrchr(hit->path, '/');

		if (strcmp(b ? b + 1 : hit->path, name) == 0)
			return hit->path;
	}
	return best;
}

static bool same_file(const char *a, const struct stat *st)
{
	struct stat s;

	return lstat(a, &s) == 0 && s.st_dev == st->st_dev &&
	       s.st_ino == st->st_ino;
}

/*
 * Match control file CTL (of directory DIR, the tree's root TOP) with its
 * file into C.  JDIR: CTL is in that journal directory.  Returns 0 (C
 * filled: a file, or a reason), 1 to skip CTL (a journal directory's,
 * without JDIR), -1 out of memory.
 */
static int match(const char *ctl, const char *top, const char *jdir,
		 struct tool_ctl *c)
{
	const char *base = strrchr(ctl, '/');
	char *name, *beside = NULL, hex[24];
	struct stat cst, st;
	const char *path = NULL;
	size_t n, hn;
	int fd, r, ret = -1;

	base = base ? base + 1 : ctl;
	n = strlen(base);
	memset(c, 0, sizeof(*c));
	c->ctl = strdup(ctl);
	name = strndup(base + 1, n - 4);	/* ".NAME.oa" */
	if (!c->ctl || !name)
		goto out;
	fd = open(ctl, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &cst) < 0) {
		r = asprintf(&c->why, "control file %s: %s", ctl,
			     strerror(errno));
		if (fd >= 0)
			close(fd);
		ret = r < 0 ? -1 : 0;
		goto out;
	}
	r = oa__ctl_ino(fd, &c->ino);
	close(fd);
	hn = (size_t)snprintf(hex, sizeof(hex), ".%" PRIx64, c->ino);

	/* Beside it, under NAME: the usual case.  (With its header
	 * unreadable, still the file to check: the library says why.) */
	if (!jdir) {
		if (asprintf(&beside, "%.*s%s", (int)(base - ctl), ctl,
			     name) < 0) {
			beside = NULL;
			goto out;
		}
		if (lstat(beside, &st) == 0 && S_ISREG(st.st_mode) &&
		    st.st_dev == cst.st_dev && (r < 0 || st.st_ino == c->ino)) {
			c->path = beside;
			beside = NULL;
			ret = 0;
			goto out;
		}
	}
	if (r < 0) {
		ret = asprintf(&c->why, "control file %s: unreadable header "
			       "(%s)%s%s%s", ctl, tool_strerror(errno),
			       jdir ? "" : ", and no file ", jdir ? "" : name,
			       jdir ? "" : " beside it") < 0 ? -1 : 0;
		goto out;
	}
	/* ".NAME.INO.oa": a journal directory's, for the file NAME, or
	 * beside a file the home of one whose name NAME was taken. */
	bool inoform = n - 4 > hn && strcmp(name + n - 4 - hn, hex) == 0;
	if (inoform) {
		name[n - 4 - hn] = 0;
	} else if (jdir) {
		ret = 1;	/* not one of the library's names there */
		goto out;
	}
	path = find_ino(c->ino, name);
	if (!path) {
		ret = asprintf(&c->why, "control file %s: its file (inode %"
			       PRIu64 ") was not found under %s", ctl, c->ino,
			       top) < 0 ? -1 : 0;
		goto out;
	}
	/* Found elsewhere: only of use if the library, opening that name,
	 * finds this very control file (the home recorded on the file). */
	free(beside);
	beside = malloc(PATH_MAX);
	if (!beside)
		goto out;
	if (oa__ctl_path(path, jdir, beside, PATH_MAX) < 0) {
		ret = asprintf(&c->why, "control file %s: its file (inode %"
			       PRIu64 ") is %s: %s", ctl, c->ino, path,
			       tool_strerror(errno)) < 0 ? -1 : 0;
		goto out;
	}
	if (!same_file(beside, &cst) && inoform && !jdir) {
		ret = 1;	/* a journal directory's: given with -J only */
		goto out;
	}
	if (!same_file(beside, &cst)) {
		ret = asprintf(&c->why, "control file %s: its file (inode %"
			       PRIu64 ") is %s, whose control file the library "
			       "uses is %s (a leftover or a copy?): not "
			       "settled", ctl, c->ino, path, beside) < 0 ? -1 : 0;
		goto out;
	}
	c->path = strdup(path);
	ret = c->path ? 0 : -1;
out:
	free(beside);
	free(name);
	if (ret != 0) {
		free(c->ctl);
		free(c->why);
		c->ctl = c->why = NULL;
	}
	return ret;
}

/* The control files in JDIR (not below it): ".NAME.INO.oa". */
static int list_jdir(const char *jdir)
{
	DIR *d = opendir(jdir);
	struct dirent *e;

	if (!d) {
		tool_error(jdir, "journal directory", errno);
		W.errors++;
		return 0;
	}
	while ((e = readdir(d))) {
		char *p;

		if (!ctl_name(e->d_name))
			continue;
		if (asprintf(&p, "%s/%s", jdir, e->d_name) < 0 ||
		    push(&W.ctls, &W.nctls, &W.ctls_cap, sizeof(p), &p) < 0) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	return 0;
}

static void walk_free(void)
{
	for (size_t i = 0; i < W.nfiles; i++)
		free(W.files[i].path);
	for (size_t i = 0; i < W.nctls; i++)
		free(W.ctls[i]);
	free(W.files);
	free(W.ctls);
	memset(&W, 0, sizeof(W));
}

void tool_ctls_free(struct tool_ctl *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(c[i].ctl);
		free(c[i].path);
		free(c[i].why);
	}
	free(c);
}

int tool_find_ctls(const char *dir, const char *jdir, struct tool_ctl **out,
		   size_t *nout, int *errors)
{
	struct tool_ctl *res = NULL, c;
	size_t n = 0, cap = 0;
	struct stat st;
	char *top = NULL;

	*out = NULL;
	*nout = 0;
	errno = 0;
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		tool_error(dir, NULL, errno ? errno : ENOTDIR);
		return -1;
	}
	/* DIR itself may be a symbolic link to the tree: the walk does not
	 * follow links, so start it from where the link leads. */
	if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode)) {
		top = realpath(dir, NULL);
		if (!top) {
			tool_error(dir, NULL, errno);
			return -1;
		}
	}
	W.want_ctls = !jdir;
	/* One file system (inode numbers are per file system; a boot script
	 * names each mount point), links not followed. */
	if (nftw(top ? top : dir, walk_cb, 32, FTW_PHYS | FTW_MOUNT) < 0 &&
	    !W.nomem) {
		tool_error(dir, "walking", errno);
		W.errors++;
	}
	if (!W.nomem && jdir && list_jdir(jdir) < 0)
		W.nomem = 1;
	if (W.nomem)
		goto nomem;
	qsort(W.files, W.nfiles, sizeof(*W.files), by_ino);
	qsort(W.ctls, W.nctls, sizeof(*W.ctls), by_str);
	for (size_t i = 0; i < W.nctls; i++) {
		int r = match(W.ctls[i], dir, jdir, &c);

		if (r == 0 && push(&res, &n, &cap, sizeof(c), &c) < 0) {
			free(c.ctl);
			free(c.path);
			free(c.why);
			r = -1;
		}
		if (r < 0)
			goto nomem;
	}
	*errors = W.errors;
	walk_free();
	free(top);
	*out = res;
	*nout = n;
	return 0;
nomem:
	walk_free();
	free(top);
	tool_ctls_free(res, n);
	tool_error(dir, NULL, ENOMEM);
	return -1;
}
