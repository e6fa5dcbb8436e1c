/*
 * simcheck.c - workloads on the simulated disk and their oracle (see
 * simcheck.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <malloc.h>

#include "simcheck.h"

#include <sys/mman.h>

unsigned long sc_recoveries;
int sc_verbose = 3;      /* violations described in full */

/* ---- states ---- */

void sc_state_free(struct sc_state *st)
{
	free(st->b);
	st->b = NULL;
	st->n = 0;
}

void sc_state_copy(struct sc_state *dst, const struct sc_state *src)
{
	dst->n = src->n;
	dst->absent = src->absent;
	dst->b = tu_malloc(src->n ? src->n : 1);
	if (src->n)
		memcpy(dst->b, src->b, src->n);
}

static void state_resize(struct sc_state *st, size_t n)
{
	if (n > st->n) {
		st->b = realloc(st->b, n);
		CHECK(st->b);
		memset(st->b + st->n, 0, n - st->n);
	}
	st->n = n;
}

void sc_apply(struct sc_state *st, const struct sc_handle *h)
{
	st->absent = false;
	for (int k = 0; k < h->nops; k++) {
		const struct sc_op *o = &h->ops[k];
		if (o->trunc) {
			state_resize(st, (size_t)o->len);
			continue;
		}
		if (o->off + o->len > st->n)
			state_resize(st, (size_t)(o->off + o->len));
		tu_fill(st->b + o->off, (size_t)o->len, o->seed, o->off);
	}
}

static uint64_t state_hash(const struct sc_state *st)
{
	return tu_hash(st->absent ? 0xabc : 0xdef, st->b, st->n) ^ st->n;
}

/* ---- memo of states already checked ---- */

static uint64_t *memo;
static size_t memo_n, memo_cap;

void sc_memo_clear(void)
{
	free(memo);
	memo = NULL;
	memo_n = memo_cap = 0;
}

static bool memo_has(uint64_t k)
{
	if (!memo_cap)
		return false;
	k |= 1;
	for (size_t i = k & (memo_cap - 1);; i = (i + 1) & (memo_cap - 1)) {
		if (memo[i] == k)
			return true;
		if (!memo[i])
			return false;
	}
}

static void memo_add(uint64_t k)
{
	k |= 1;
	if ((memo_n + 1) * 2 > memo_cap) {
		size_t nc = memo_cap ? memo_cap * 2 : 1u << 16;
		uint64_t *nm = tu_zalloc(nc * sizeof(*nm));
		for (size_t i = 0; i < memo_cap; i++)
			if (memo[i])
				for (size_t j = memo[i] & (nc - 1);; j = (j + 1) & (nc - 1))
					if (!nm[j]) {
						nm[j] = memo[i];
						break;
					}
		free(memo);
		memo = nm;
		memo_cap = nc;
	}
	for (size_t i = k & (memo_cap - 1);; i = (i + 1) & (memo_cap - 1)) {
		if (memo[i] == k)
			return;
		if (!memo[i]) {
			memo[i] = k;
			memo_n++;
			return;
		}
	}
}

/* ---- the harness ---- */

static void copy_files(struct sc_file *dst, const struct sc_file *src, int n)
{
	for (int i = 0; i < n; i++) {
		dst[i] = src[i];
		sc_state_copy(&dst[i].acked, &src[i].acked);
		if (src[i].has_infl)
			sc_state_copy(&dst[i].infl, &src[i].infl);
		else
			dst[i].infl.b = NULL;
	}
}

static void free_files(struct sc_file *f, int n)
{
	for (int i = 0; i < n; i++) {
		sc_state_free(&f[i].acked);
		if (f[i].has_infl)
			sc_state_free(&f[i].infl);
	}
}

static int nfiles_of(const struct sc_snap *sn)
{
	int n = 0;
	while (n < SC_MAXF && sn->file[n].path)
		n++;
	return n;
}

static void push_snap(struct sc *s, const char *what)
{
	if (s->nsnaps == s->scap) {
		s->scap = s->scap ? s->scap * 2 : 64;
		s->snaps = realloc(s->snaps, s->scap * sizeof(*s->snaps));
		CHECK(s->snaps);
	}
	struct sc_snap *sn = &s->snaps[s->nsnaps++];
	memset(sn, 0, sizeof(*sn));
	sn->fs = sim_snapshot(s->fs);
	copy_files(sn->file, s->file, s->nfiles);
	sn->call = sim_ncalls;
	sn->what = what;
}

static void hook(void *arg, const char *call, bool mutating)
{
	struct sc *s = arg;
	if (s->snapshotting && mutating && sim_current() == s->fs)
		push_snap(s, call);
}

void sc_init(struct sc *s, int nfiles, const char *const *paths,
	     const long *sizes)
{
	memset(s, 0, sizeof(*s));
	/* Every handle and every recovery allocates 1 MiB buffers: keep them
	 * in the heap, not mapped and unmapped (page faults) each time. */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	s->fs = sim_fs_new();
	sim_use(s->fs);
	sim_install();
	CHECK_OK(sim_mkdir("/d"));
	s->nfiles = nfiles;
	for (int i = 0; i < nfiles; i++) {
		struct sc_file *f = &s->file[i];
		f->path = paths[i];
		if (sizes[i] < 0) {
			f->acked.absent = true;
			f->acked.b = tu_malloc(1);
			f->acked.n = 0;
			continue;
		}
		f->acked.n = (size_t)sizes[i];
		f->acked.b = tu_malloc(f->acked.n + 1);
		tu_fill(f->acked.b, f->acked.n, 1000 + (uint64_t)i, 0);
		CHECK_OK(sim_put_file(paths[i], f->acked.b, f->acked.n));
	}
	sim_hook = hook;
	sim_hook_arg = s;
}

void sc_fini(struct sc *s)
{
	sim_hook = NULL;
	for (int h = 0; h < SC_MAXH; h++)
		if (s->h[h].f) {
			oa_close(s->h[h].f);
			s->h[h].f = NULL;
			s->h[h].map = NULL;
		}
	for (size_t i = 0; i < s->nsnaps; i++) {
		sim_fs_free(s->snaps[i].fs);
		free_files(s->snaps[i].file, nfiles_of(&s->snaps[i]));
	}
	free(s->snaps);
	free_files(s->file, s->nfiles);
	sim_fs_free(s->fs);
	sim_use(NULL);
	memset(s, 0, sizeof(*s));
}

void sc_record(struct sc *s, bool on)
{
	s->snapshotting = on;
}

void sc_snap_now(struct sc *s, const char *what)
{
	push_snap(s, what);
}

int sc_open(struct sc *s, int fi, int flags)
{
	struct sc_file *F = &s->file[fi];
	int h = 0;
	while (h < SC_MAXH && s->h[h].f)
		h++;
	CHECK(h < SC_MAXH);
	if (F->acked.absent && (flags & O_CREAT)) {
		F->infl.b = tu_malloc(1);
		F->infl.n = 0;
		F->infl.absent = false;
		F->has_infl = true;
	}
	oa_file *f = oa_open(F->path, flags, 0644);
	if (F->acked.absent && (flags & O_CREAT) && f) {
		sc_state_free(&F->infl);
		F->has_infl = false;
		F->acked.absent = false;
		F->acked.n = 0;
	}
	/* A failed oa_open(O_CREAT) may leave the file created, empty (as
	 * open(2) may): both stay allowed. */
	if (!f) {
		s->fails++;
		return -1;
	}
	s->h[h].f = f;
	s->h[h].fi = fi;
	s->h[h].nops = 0;
	return h;
}

int sc_write(struct sc *s, int h, uint64_t off, uint64_t len, uint64_t seed)
{
	struct sc_handle *H = &s->h[h];
	unsigned char *b = tu_malloc(len);
	tu_fill(b, len, seed, off);
	ssize_t r = oa_pwrite(H->f, b, len, (off_t)off);
	free(b);
	if (r != (ssize_t)len) {
		s->fails++;
		return -1;
	}
	CHECK(H->nops < SC_MAXOPS);
	H->ops[H->nops++] = (struct sc_op){ false, off, len, seed };
	return 0;
}

int sc_store(struct sc *s, int h, uint64_t off, uint64_t len, uint64_t seed)
{
	struct sc_handle *H = &s->h[h];
	struct stat st;
	CHECK(off + len <= SC_MAPLEN);
	if (!H->map) {
		H->map = oa_mmap(H->f, SC_MAPLEN, PROT_READ | PROT_WRITE, 0);
		if (!H->map) {
			s->fails++;
			return -1;
		}
	}
	if (oa_fstat(H->f, &st) < 0 ||
	    (off + len > (uint64_t)st.st_size &&
	     oa_ftruncate(H->f, (off_t)(off + len)) < 0)) {
		s->fails++;
		return -1;
	}
	tu_fill(H->map + off, len, seed, off);
	CHECK(H->nops < SC_MAXOPS);
	H->ops[H->nops++] = (struct sc_op){ false, off, len, seed };
	return 0;
}

int sc_trunc(struct sc *s, int h, uint64_t len)
{
	struct sc_handle *H = &s->h[h];
	if (oa_ftruncate(H->f, (off_t)len) < 0) {
		s->fails++;
		return -1;
	}
	CHECK(H->nops < SC_MAXOPS);
	H->ops[H->nops++] = (struct sc_op){ true, 0, len, 0 };
	return 0;
}

int sc_commit(struct sc *s, int h)
{
	struct sc_handle *H = &s->h[h];
	struct sc_file *F = &s->file[H->fi];
	struct stat st;
	sc_state_copy(&F->infl, &F->acked);
	sc_apply(&F->infl, H);
	F->has_infl = true;
	F->grp = 0;
	int r = oa_commit(H->f);
	int e = errno;
	s->last_commit_ok = r == 0;
	if (r == 0) {
		sc_state_free(&F->acked);
		F->acked = F->infl;
		F->infl.b = NULL;
		F->has_infl = false;
		H->nops = 0;
	} else if (oa_fstat(H->f, &st) < 0 && errno == EIO) {
		/* latched: either state may be the durable one */
		s->latched = true;
	} else {
		sc_state_free(&F->infl);
		F->has_infl = false;
	}
	errno = e;
	return r;
}

int sc_commit_group(struct sc *s, const int *hs, int n)
{
	CHECK(n >= 1 && n <= SC_MAXH);
	static int next_grp;
	oa_file *fs[SC_MAXH] = { 0 };
	struct stat st;
	int g = ++next_grp, r, e;
	for (int i = 0; i < n; i++) {
		struct sc_handle *H = &s->h[hs[i]];
		struct sc_file *F = &s->file[H->fi];
		sc_state_copy(&F->infl, &F->acked);
		sc_apply(&F->infl, H);
		F->has_infl = true;
		F->grp = g;
		fs[i] = H->f;
	}
	r = oa_commit_group(fs, (size_t)n);
	e = errno;
	s->last_commit_ok = r == 0;
	bool latched = false;
	for (int i = 0; i < n; i++)
		if (oa_fstat(fs[i], &st) < 0 && errno == EIO)
			latched = true;
	for (int i = 0; i < n; i++) {
		struct sc_handle *H = &s->h[hs[i]];
		struct sc_file *F = &s->file[H->fi];
		if (r == 0) {
			sc_state_free(&F->acked);
			F->acked = F->infl;
			F->infl.b = NULL;
			F->has_infl = false;
			F->grp = 0;
			H->nops = 0;
		} else if (latched) {
			s->latched = true;   /* either state, all alike */
		} else {
			sc_state_free(&F->infl);
			F->has_infl = false;
			F->grp = 0;
		}
	}
	errno = e;
	return r;
}

int sc_abort(struct sc *s, int h)
{
	int r = oa_abort(s->h[h].f);
	if (r < 0)
		s->fails++;
	/* dropped also where the give-back of the journal's space latched
	 * the handle with EIO after (oa_abort(3)) */
	if (r == 0 || errno == EIO)
		s->h[h].nops = 0;
	return r;
}

int sc_close(struct sc *s, int h)
{
	int r = oa_close(s->h[h].f);
	s->h[h].f = NULL;
	s->h[h].map = NULL;
	s->h[h].nops = 0;
	return r;
}

/* Which allowed state does the file hold?  0 acked, 1 in flight, -1 none. */
static int which_state(const struct sc_file *F, const unsigned char *b,
		       size_t n, bool present)
{
	const struct sc_state *c[2] = { &F->acked, F->has_infl ? &F->infl : NULL };
	for (int k = 0; k < 2; k++) {
		if (!c[k])
			continue;
		if (!present) {
			if (c[k]->absent)
				return k;
			continue;
		}
		if (!c[k]->absent && c[k]->n == n && !memcmp(c[k]->b, b, n))
			return k;
	}
	return -1;
}

static void describe(const struct sc_file *F, const unsigned char *b, size_t n,
		     bool present)
{
	const struct sc_state *c[2] = { &F->acked, F->has_infl ? &F->infl : NULL };
	fprintf(stderr, "    %s: %s, %zu bytes\n", F->path,
		present ? "present" : "absent", n);
	for (int k = 0; k < 2; k++) {
		if (!c[k])
			continue;
		size_t d = 0, m = c[k]->n < n ? c[k]->n : n;
		while (d < m && c[k]->b[d] == b[d])
			d++;
		fprintf(stderr, "      allowed %s: %s %zu bytes; first difference "
			"at %zu\n", k ? "in-flight" : "acknowledged",
			c[k]->absent ? "absent" : "present", c[k]->n, d);
	}
}

void sc_reboot(struct sc *s, const unsigned char *choice,
	       const struct sim_cfg *cfg)
{
	bool rec = s->snapshotting;
	s->snapshotting = false;
	struct sim_fs *snap = sim_snapshot(s->fs);
	struct sim_fs *c = sim_crash(snap, cfg, choice);
	sim_fs_free(snap);
	sim_fs_free(s->fs);
	s->fs = c;
	sim_use(c);
	/* The processes died: their handles are gone (every call fails with
	 * EBADF on the new disk; nothing is open there yet). */
	for (int h = 0; h < SC_MAXH; h++)
		if (s->h[h].f) {
			oa_close(s->h[h].f);
			s->h[h].f = NULL;
			s->h[h].map = NULL;
		}
	s->snapshotting = rec;
	/* Recover (recorded: a cut during recovery is a crash point too), then
	 * learn which state each file settled on. */
	int gk[SC_MAXF], gg[SC_MAXF];
	for (int i = 0; i < s->nfiles; i++)
		gg[i] = s->file[i].has_infl ? s->file[i].grp : 0;
	for (int i = 0; i < s->nfiles; i++) {
		struct sc_file *F = &s->file[i];
		unsigned char *b = NULL;
		size_t n = 0;
		int r = oa_recover(F->path);
		if (r < 0 && errno != ENOENT) {
			fprintf(stderr, "reboot: oa_recover(%s): %s\n", F->path,
				strerror(errno));
			s->fails++;
		}
		bool present = sim_get_file(F->path, &b, &n) == 0;
		int k = which_state(F, b, n, present);
		gk[i] = k;
		for (int j = 0; j < i; j++)
			if (k >= 0 && gg[i] && gg[j] == gg[i] && gk[j] >= 0 &&
			    gk[j] != k) {
				fprintf(stderr, "reboot: group split (%s, %s)\n",
					s->file[j].path, F->path);
				s->fails++;
			}
		F->grp = 0;
		if (k < 0) {
			fprintf(stderr, "reboot: %s holds no allowed state\n",
				F->path);
			describe(F, b, n, present);
			s->fails++;
		} else if (k == 1) {
			sc_state_free(&F->acked);
			F->acked = F->infl;
			F->infl.b = NULL;
		} else if (F->has_infl) {
			sc_state_free(&F->infl);
		}
		F->has_infl = false;
		free(b);
	}
	s->latched = false;
}

static uint64_t allowed_hash(const struct sc_snap *sn)
{
	uint64_t h = 99;
	for (int i = 0; i < nfiles_of(sn); i++) {
		h = h * 31 + state_hash(&sn->file[i].acked);
		if (sn->file[i].has_infl)
			h = h * 31 + state_hash(&sn->file[i].infl) + 7 +
			    (sn->file[i].grp ? 1000003 : 0);
	}
	return h;
}

static int check_files(const struct sc_file *files, int nf, const char *when)
{
	int gk[SC_MAXF];
	for (int i = 0; i < nf; i++) {
		const struct sc_file *F = &files[i];
		unsigned char *b = NULL;
		size_t n = 0;
		bool present = sim_get_file(F->path, &b, &n) == 0;
		int k = which_state(F, b, n, present);
		gk[i] = k;
		for (int j = 0; j < i && k >= 0; j++)
			if (F->has_infl && F->grp && files[j].has_infl &&
			    files[j].grp == F->grp && gk[j] != k &&
			    /* equal states cannot tell */
			    !(F->acked.n == F->infl.n &&
			      !memcmp(F->acked.b, F->infl.b, F->acked.n))) {
				if (sc_verbose > 0)
					fprintf(stderr, "  VIOLATION %s: group "
						"split: %s holds its %s state, "
						"%s its %s\n", when,
						files[j].path,
						gk[j] ? "new" : "old", F->path,
						k ? "new" : "old");
				free(b);
				return 1;
			}
		if (k < 0) {
			if (sc_verbose > 0) {
				fprintf(stderr, "  VIOLATION %s: %s holds neither "
					"allowed state\n", when, F->path);
				describe(F, b, n, present);
			}
			free(b);
			return 1;
		}
		free(b);
	}
	return 0;
}

int sc_check_live(struct sc *s)
{
	/* As a reader through the library sees them: a new handle (which
	 * finishes what a dead committer left), not counted or failed. */
	int bad = 0;
	sim_pause(true);
	for (int i = 0; i < s->nfiles && !bad; i++) {
		const struct sc_file *F = &s->file[i];
		oa_file *f = oa_open(F->path, O_RDONLY, 0);
		unsigned char *b = NULL;
		size_t n = 0;
		bool present = f != NULL;
		if (!f && errno != ENOENT) {
			fprintf(stderr, "  VIOLATION live: oa_open(%s): %s\n",
				F->path, strerror(errno));
			bad = 1;
			break;
		}
		if (f) {
			b = tu_oa_read_all(f, &n);
			oa_close(f);
		}
		if (which_state(F, b, n, present) < 0) {
			fprintf(stderr, "  VIOLATION live: %s holds neither "
				"allowed state\n", F->path);
			describe(F, b, n, present);
			bad = 1;
		}
		free(b);
	}
	sim_pause(false);
	return bad;
}

static int recover_all(const struct sc_file *files, int nf, const char *when)
{
	for (int i = 0; i < nf; i++) {
		const struct sc_file *F = &files[i];
		if (oa_recover(F->path) < 0) {
			bool absent_ok = F->acked.absent ||
					 (F->has_infl && F->infl.absent);
			if (errno == ENOENT && absent_ok)
				continue;
			if (sc_verbose > 0)
				fprintf(stderr, "  VIOLATION %s: oa_recover(%s) "
					"failed: %s\n", when, F->path,
					strerror(errno));
			return 1;
		}
	}
	return 0;
}

int sc_check(struct sc_snap *sn, const struct sim_cfg *cfg,
	     const unsigned char *choice, bool reopen)
{
	struct sim_fs *c = sim_crash(sn->fs, cfg, choice);
	uint64_t key = sim_fs_hash(c) * 0x9e3779b97f4a7c15ull ^ allowed_hash(sn) ^
		       (reopen ? 0x5555 : 0);
	int nf = nfiles_of(sn), bad = 0;
	if (memo_has(key)) {
		sim_fs_free(c);
		return 2;
	}
	struct sim_fs *prev = sim_current();
	void (*h)(void *, const char *, bool) = sim_hook;
	sim_hook = NULL;
	sim_use(c);
	sc_recoveries++;

	/* A group in flight: recovery through one file settles it all (its
	 * first file, or its second, by turns); the files are read before
	 * the others are recovered. */
	bool grp = false;
	for (int i = 0; i < nf; i++)
		grp |= sn->file[i].has_infl && sn->file[i].grp;
	if (grp) {
		int first = (int)((key >> 7) % (uint64_t)nf);
		bad = recover_all(sn->file + first, 1, "recovery of one file");
		if (!bad)
			bad = check_files(sn->file, nf,
					  "after recovering one file");
	}
	if (!bad)
		bad = recover_all(sn->file, nf, "after recovery");
	if (!bad)
		bad = check_files(sn->file, nf, "after recovery");
	if (!bad) {
		uint64_t h1 = sim_fs_hash(c);
		bad = recover_all(sn->file, nf, "second recovery");
		if (!bad && sim_fs_hash(c) != h1) {
			if (sc_verbose > 0)
				fprintf(stderr, "  VIOLATION: a second recovery "
					"changed the disk\n");
			bad = 1;
		}
	}
	if (!bad && reopen) {
		/* The recovered file takes one more transaction. */
		for (int i = 0; i < nf && !bad; i++) {
			unsigned char *b = NULL, w[100];
			size_t n = 0;
			if (sim_get_file(sn->file[i].path, &b, &n) < 0)
				continue;
			oa_file *f = oa_open(sn->file[i].path, O_RDWR, 0);
			tu_fill(w, sizeof(w), 4242, 10);
			if (!f || oa_pwrite(f, w, sizeof(w), 10) != sizeof(w) ||
			    oa_commit(f) < 0 || oa_close(f) < 0) {
				if (sc_verbose > 0)
					fprintf(stderr, "  VIOLATION: a transaction "
						"after recovery failed: %s\n",
						strerror(errno));
				bad = 1;
				free(b);
				break;
			}
			if (n < 110) {
				b = realloc(b, 110);
				memset(b + n, 0, 110 - n);
				n = 110;
			}
			memcpy(b + 10, w, sizeof(w));
			unsigned char *g = NULL;
			size_t gn = 0;
			if (sim_get_file(sn->file[i].path, &g, &gn) < 0 || gn != n ||
			    memcmp(g, b, n)) {
				if (sc_verbose > 0)
					fprintf(stderr, "  VIOLATION: the transaction "
						"after recovery is not in the file\n");
				bad = 1;
			}
			free(g);
			free(b);
		}
	}
	if (!bad && sim_open_fds() != 0) {
		if (sc_verbose > 0)
			fprintf(stderr, "  VIOLATION: %d simulated descriptors "
				"left open\n", sim_open_fds());
		bad = 1;
	}
	sim_use(prev);
	sim_hook = h;
	sim_fs_free(c);
	if (bad) {
		if (sc_verbose > 0) {
			fprintf(stderr, "    crash point: before seam call %ld (%s)\n",
				sn->call, sn->what ? sn->what : "end");
			sc_verbose--;
		}
		return 1;
	}
	memo_add(key);
	return 0;
}
