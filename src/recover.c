/*
 * recover.c - find every committed transaction the journals hold, decide
 * what is committed, replay, check.
 *
 * The rule (docs/FORMAT.md, "What is committed"):
 *  - A journal is read under the generation of its newest valid header slot.
 *    Records are looked for at every 512-byte offset from 8192; a record is
 *    one whose header has the magic, that generation, LSN = its offset and a
 *    good CRC.  Anything else is skipped 512 bytes at a time (garbage left by
 *    a failed write, or an older generation).
 *  - A data record is intact if its payload CRC matches.
 *  - A commit record with a good body CRC is *complete* if every op lies
 *    inside one intact data record of the same transaction (tx) at or after
 *    tx_start.  Complete commits are committed (I1).
 *  - An incomplete commit newer than the checkpoint is a torn last commit
 *    (the crash hit its flush) only if no complete commit anywhere has a
 *    higher seq; otherwise a commit that had been acknowledged lost its data:
 *    the journal is damaged (EUCLEAN) and nothing is applied.
 *  - Structurally impossible records with good CRCs, two commits with one
 *    seq, or two unreadable header slots are damage too.
 *  - Replay: complete commits with seq > checkpoint, from all journals, in
 *    seq order (I7); then the file is flushed and the checkpoint advanced.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "crc32c.h"
#include "internal.h"
#include "oatomic-private.h"

struct jrn {
	int fd;
	int idx;
	uint64_t gen;
};

struct acc {
	uint64_t seq, lsn;
	int j;
};

struct scan {
	struct jrn *j;
	size_t nj, jcap;
	struct acc *acc;
	size_t nacc, acap;
	uint64_t *inc;          /* incomplete commits newer than ckpt */
	size_t ninc, icap;
	uint64_t max_acc, max_seen, ckpt;
	int damaged, unsafe, foreign;
	FILE *out;              /* findings, for oatomic check (may be NULL) */
	const char *path;
	unsigned char *pbuf;
};

struct drange {
	uint64_t start, end;
	bool ok;
};

static void note(struct scan *S, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void note(struct scan *S, const char *fmt, ...)
{
	va_list ap;
	if (!S->out)
		return;
	fprintf(S->out, "%s: ", S->path);
	va_start(ap, fmt);
	vfprintf(S->out, fmt, ap);
	va_end(ap);
	fputc('\n', S->out);
}

static int grow(void **v, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 16;
	void *p = realloc(*v, nc * elem);
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	*v = p;
	*cap = nc;
	return 0;
}

static int payload_crc(int fd, unsigned char *buf, uint64_t off, uint64_t len,
		       uint32_t *crc)
{
	uint32_t c = 0;
	while (len > 0) {
		size_t n = len < OA_BUF_BYTES ? (size_t)len : OA_BUF_BYTES;
		if (oa_pread_full(fd, buf, n, (off_t)off) < 0)
			return -1;
		c = oa_crc32c(c, buf, n);
		off += n;
		len -= n;
	}
	*crc = c;
	return 0;
}

static const struct drange *find_range(const struct drange *d, size_t n,
				       uint64_t off)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (d[mid].end <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && d[lo].start <= off ? &d[lo] : NULL;
}

/* Classify one commit record whose body CRC is good.  0 complete, 1
 * incomplete, 2 structurally impossible. */
static int check_commit(const struct oa_rec *r, const unsigned char *body,
			const struct drange *d, size_t nd, bool same_tx)
{
	struct oa_commit_hdr ch;
	int incomplete = 0;
	if (r->len < OA_COMMIT_FIXED)
		return 2;
	ch.tx_start = oa_get64(body);
	ch.trunc_min = oa_get64(body + 8);
	ch.final_size = oa_get64(body + 16);
	ch.nops = oa_get64(body + 24);
	if (ch.nops > (r->len - OA_COMMIT_FIXED) / OA_OP_BYTES ||
	    OA_COMMIT_FIXED + ch.nops * OA_OP_BYTES != r->len ||
	    ch.tx_start > r->lsn || ch.final_size > (uint64_t)INT64_MAX ||
	    (ch.trunc_min != OA_NO_TRUNC && ch.trunc_min > ch.final_size))
		return 2;
	uint64_t prev_end = 0;
	for (uint64_t i = 0; i < ch.nops; i++) {
		const unsigned char *op = body + OA_COMMIT_FIXED + i * OA_OP_BYTES;
		uint64_t off = oa_get64(op), len = oa_get64(op + 8),
			 joff = oa_get64(op + 16);
		if (len == 0 || off + len < off || off + len > ch.final_size ||
		    off < prev_end || joff < ch.tx_start || joff + len < joff ||
		    joff + len > r->lsn)
			return 2;
		prev_end = off + len;
		const struct drange *dr = same_tx ? find_range(d, nd, joff) : NULL;
		if (!dr || !dr->ok || joff + len > dr->end)
			incomplete = !MUTANT(9);
	}
	return incomplete;
}

/* Scan one journal (see the rule at the top). */
static int scan_journal(struct oa_file *f, struct scan *S, int ji)
{
	struct jrn *J = &S->j[ji];
	struct drange *d = NULL;
	size_t nd = 0, dcap = 0;
	uint64_t cur_tx = 0, bstart = 0, blen = 0, size;
	unsigned char *body = NULL;
	int ret = -1;

	if (oa_xfsize(J->fd, &size) < 0)
		return -1;
	for (uint64_t p = OA_DATA_START; p + OA_REC_HDR <= size;) {
		struct oa_rec r;
		if (p < bstart || p + OA_REC_HDR > bstart + blen) {
			uint64_t n = size - p < OA_BUF_BYTES ? size - p : OA_BUF_BYTES;
			if (oa_pread_full(J->fd, f->buf, (size_t)n, (off_t)p) < 0)
				goto out;
			bstart = p;
			blen = n;
		}
		if (oa_rec_decode(f->buf + (p - bstart), &r) < 0 ||
		    r.gen != J->gen || r.lsn != p ||
		    (r.type != OA_REC_DATA && r.type != OA_REC_COMMIT) ||
		    r.len + r.pad > size - p - OA_REC_HDR) {
			p += OA_REC_ALIGN;
			continue;
		}
		if (r.type == OA_REC_DATA) {
			uint32_t crc;
			uint64_t pl = oa_rec_payload(&r);
			if (payload_crc(J->fd, S->pbuf, pl, r.len, &crc) < 0)
				goto out;
			if (r.tx != cur_tx) {
				nd = 0;
				cur_tx = r.tx;
			}
			if (grow((void **)&d, &dcap, nd, sizeof(*d)) < 0)
				goto out;
			d[nd++] = (struct drange){ pl, pl + r.len,
						   crc == r.body_crc || MUTANT(4) };
			p = oa_align_up(pl + r.len, OA_REC_ALIGN);
			continue;
		}
		/* A commit record. */
		free(body);
		body = malloc(r.len ? r.len : 1);
		if (!body) {
			errno = ENOMEM;
			goto out;
		}
		if (oa_pread_full(J->fd, body, r.len, (off_t)(p + OA_REC_HDR)) < 0)
			goto out;
		if (oa_crc32c(0, body, r.len) != r.body_crc) {
			p += OA_REC_ALIGN;    /* torn commit record */
			continue;
		}
		if (r.seq > S->max_seen)
			S->max_seen = r.seq;
		int c = check_commit(&r, body, d, nd, r.tx == cur_tx);
		if (c == 2) {
			note(S, "journal %d: commit %llu at %llu is malformed",
			     J->idx, (unsigned long long)r.seq,
			     (unsigned long long)p);
			S->damaged++;
		} else if (c == 1) {
			if (r.seq > S->ckpt) {
				if (grow((void **)&S->inc, &S->icap, S->ninc,
					 sizeof(*S->inc)) < 0)
					goto out;
				S->inc[S->ninc++] = r.seq;
			}
		} else {
			if (r.seq > S->max_acc)
				S->max_acc = r.seq;
			if (r.seq > S->ckpt) {
				if (grow((void **)&S->acc, &S->acap, S->nacc,
					 sizeof(*S->acc)) < 0)
					goto out;
				S->acc[S->nacc++] = (struct acc){ r.seq, p, ji };
			}
		}
		if (r.tx == cur_tx) {
			nd = 0;
			cur_tx = 0;
		}
		p = oa_align_up(p + OA_REC_HDR + r.len, OA_REC_ALIGN);
	}
	ret = 0;
out:
	free(d);
	free(body);
	return ret;
}

static int acc_cmp(const void *a, const void *b)
{
	const struct acc *x = a, *y = b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Indices of the journal files of F in its journal directory. */
static int list_journals(struct oa_file *f, int **out, size_t *n)
{
	char pfx[NAME_MAX + 1];
	size_t plen, cap = 0;
	char buf[8192];
	int dfd;

	*out = NULL;
	*n = 0;
	if (snprintf(pfx, sizeof(pfx), "%s.oaj-", f->prefix) >= (int)sizeof(pfx))
		return 0;
	plen = strlen(pfx);
	dfd = oa_xopenat(f->dfd, ".", O_RDONLY | O_DIRECTORY, 0);
	if (dfd < 0 && errno == EACCES) {
		/* Searchable, not readable: probe the names.  Journals are
		 * numbered from 0 and removed from the top, so a run of
		 * missing numbers ends the list. */
		char name[NAME_MAX + 1];
		struct stat st;
		for (int k = 0, miss = 0; miss < 16 && k < 1 << 20; k++) {
			if (oa_name(f, name, sizeof(name), OA_NAME_JNL, k) < 0)
				break;
			if (oa_sys->fstatat(f->dfd, name, &st,
					    AT_SYMLINK_NOFOLLOW) < 0) {
				if (errno != ENOENT)
					return -1;
				miss++;
				continue;
			}
			miss = 0;
			if (grow((void **)out, &cap, *n, sizeof(int)) < 0)
				return -1;
			(*out)[(*n)++] = k;
		}
		return 0;
	}
	if (dfd < 0)
		return -1;
	for (;;) {
		ssize_t got = oa_sys->getdents64(dfd, buf, sizeof(buf));
		if (got < 0) {
			oa_xclose(dfd);
			free(*out);
			*out = NULL;
			return -1;
		}
		if (got == 0)
			break;
		for (ssize_t o = 0; o < got;) {
			unsigned short reclen;
			memcpy(&reclen, buf + o + 16, 2);
			const char *name = buf + o + 19;
			o += reclen;
			if (strncmp(name, pfx, plen))
				continue;
			char *endp;
			const char *num = name + plen;
			if (*num < '0' || *num > '9')
				continue;
			long k = strtol(num, &endp, 10);
			if (*endp || k < 0 || k > INT_MAX)
				continue;
			if (grow((void **)out, &cap, *n, sizeof(int)) < 0) {
				oa_xclose(dfd);
				free(*out);
				*out = NULL;
				return -1;
			}
			(*out)[(*n)++] = (int)k;
		}
	}
	oa_xclose(dfd);
	return 0;
}

static void scan_free(struct scan *S)
{
	for (size_t i = 0; i < S->nj; i++)
		oa_xclose(S->j[i].fd);
	free(S->j);
	free(S->acc);
	free(S->inc);
	free(S->pbuf);
}

/* Open and scan every journal; apply the rule.  Returns 0 (the scan is
 * sound: S->acc holds what to replay, sorted) or -1 (errno: EUCLEAN damage,
 * EPERM unsafe, or an I/O error). */
static int scan_all(struct oa_file *f, struct scan *S)
{
	int *idx;
	size_t n;
	char name[NAME_MAX + 1];

	S->pbuf = malloc(OA_BUF_BYTES);
	if (!S->pbuf) {
		errno = ENOMEM;
		return -1;
	}
	if (list_journals(f, &idx, &n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		struct oa_slot s;
		int fd, r;
		if (oa_name(f, name, sizeof(name), OA_NAME_JNL, idx[i]) < 0)
			continue;
		fd = oa_xopenat(f->dfd, name, O_RDONLY | O_NOFOLLOW, 0);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			if (errno == ELOOP) {
				note(S, "journal %s is a symbolic link: refused", name);
				S->unsafe++;
				continue;
			}
			goto fail;
		}
		bool unsafe = oa_check_safe(f, fd) < 0;
		if (unsafe && errno != EPERM) {
			oa_xclose(fd);
			goto fail;
		}
		r = oa_slots_read(fd, OA_JNL_MAGIC, &s);
		if (r < 0) {
			if (errno == EUCLEAN) {
				note(S, "journal %s: both header slots damaged", name);
				S->damaged++;
				oa_xclose(fd);
				continue;
			}
			oa_xclose(fd);
			goto fail;
		}
		if (r == 0 && S->out && oa_slots_damaged(fd, OA_JNL_MAGIC))
			note(S, "journal %s: one header slot is unreadable (a "
			     "reset torn by a crash, or corruption); the other "
			     "is used", name);
		if (r == 1 || s.ino != f->ino || s.igen != f->igen) {
			if (r == 0) {
				note(S, "journal %s belongs to another file (inode "
				     "%llu): ignored", name,
				     (unsigned long long)s.ino);
				S->foreign++;
			}
			oa_xclose(fd);
			continue;
		}
		if (grow((void **)&S->j, &S->jcap, S->nj, sizeof(*S->j)) < 0) {
			oa_xclose(fd);
			goto fail;
		}
		S->j[S->nj] = (struct jrn){ fd, idx[i], s.a };
		S->nj++;
		size_t nacc = S->nacc, ninc = S->ninc;
		if (scan_journal(f, S, (int)S->nj - 1) < 0)
			goto fail;
		/* GUARANTEES.md §10: a journal others could write is never
		 * replayed.  One that holds nothing newer than the checkpoint
		 * (say, the file was chmod-ed since) is harmless. */
		if (unsafe && (S->nacc > nacc || S->ninc > ninc)) {
			note(S, "journal %s is not owned by the file's owner or "
			     "is writable by others: not replayed", name);
			S->unsafe++;
			S->nacc = nacc;
			S->ninc = ninc;
		}
	}
	free(idx);
	if (S->nacc > 1)
		qsort(S->acc, S->nacc, sizeof(*S->acc), acc_cmp);
	if (MUTANT(3))
		for (size_t i = 0; i < S->nacc / 2; i++) {
			struct acc t = S->acc[i];
			S->acc[i] = S->acc[S->nacc - 1 - i];
			S->acc[S->nacc - 1 - i] = t;
		}
	for (size_t i = 1; i < S->nacc; i++)
		if (S->acc[i].seq == S->acc[i - 1].seq) {
			note(S, "two commits carry sequence %llu",
			     (unsigned long long)S->acc[i].seq);
			S->damaged++;
		}
	for (size_t i = 0; i < S->ninc; i++)
		if (S->inc[i] < S->max_acc) {
			note(S, "commit %llu lost data although later commits "
			     "exist (up to %llu): journal damaged",
			     (unsigned long long)S->inc[i],
			     (unsigned long long)S->max_acc);
			S->damaged++;
		}
	if (S->unsafe) {
		errno = EPERM;
		return -1;
	}
	if (S->damaged) {
		errno = EUCLEAN;
		return -1;
	}
	return 0;
fail:
	free(idx);
	return -1;
}

/* Read the checkpoint into S (a control file of another inode counts as no
 * checkpoint: *FOREIGN) and scan every journal.  -2 (errno) when the
 * checkpoint cannot be read; else what scan_all returns. */
static int scan_from_ckpt(struct oa_file *f, struct scan *S, bool *foreign)
{
	if (oa_ctl_read_ckpt(f, &S->ckpt, foreign) < 0)
		return -2;
	if (*foreign) {
		note(S, "control file belongs to another file: ignored");
		S->ckpt = 0;
	}
	return scan_all(f, S);
}

static int replay_one(struct oa_file *f, struct scan *S, const struct acc *a)
{
	struct jrn *J = &S->j[a->j];
	unsigned char h[OA_REC_HDR];
	struct oa_commit_hdr ch;
	struct oa_rec r;
	unsigned char *body;
	int ret;

	if (oa_pread_full(J->fd, h, sizeof(h), (off_t)a->lsn) < 0)
		return -1;
	if (oa_rec_decode(h, &r) < 0) {
		errno = EUCLEAN;
		return -1;
	}
	body = malloc(r.len);
	if (!body) {
		errno = ENOMEM;
		return -1;
	}
	if (oa_pread_full(J->fd, body, r.len, (off_t)(a->lsn + OA_REC_HDR)) < 0 ||
	    oa_crc32c(0, body, r.len) != r.body_crc) {
		free(body);
		if (errno != EIO)
			errno = EUCLEAN;
		return -1;
	}
	ch.tx_start = oa_get64(body);
	ch.trunc_min = oa_get64(body + 8);
	ch.final_size = oa_get64(body + 16);
	ch.nops = oa_get64(body + 24);
	ret = oa_apply(f, J->fd, &ch, body + OA_COMMIT_FIXED);
	free(body);
	return ret;
}

int oa_recover_locked(struct oa_file *f)
{
	struct scan S = { .path = "" };
	struct oa_live l;
	bool foreign_ctl;
	uint64_t top;
	int ret = -1;

	if (oa_live_read(f, &l) < 0)
		return -1;
	if (scan_from_ckpt(f, &S, &foreign_ctl) < 0)
		goto out;
	if (S.nacc && oa_target_writable(f) < 0)
		goto out;
	for (size_t i = 0; i < S.nacc; i++)
		if (replay_one(f, &S, &S.acc[i]) < 0)
			goto out;
	top = S.ckpt;
	if (S.max_seen > top)
		top = S.max_seen;
	if (!foreign_ctl && l.last_seq > top)
		top = l.last_seq;
	/* I5: flush what was replayed before the checkpoint says so. */
	if (top > S.ckpt || foreign_ctl) {
		if (S.nacc && oa_xfdatasync(f->tfd) < 0)
			goto out;
		if (oa_ctl_write_ckpt(f, top) < 0)
			goto out;
	}
	/* Rebuilt; jnamed stays: a set bit records a directory flush that
	 * returned 0, which no crash undoes (only drop_extra_journals removes
	 * journals, and it clears their bits). */
	uint64_t named = l.jnamed;
	memset(&l, 0, sizeof(l));
	l.magic = OA_LIVE_MAGIC;
	l.last_seq = l.ckpt_seq = top;
	l.jnamed = named;
	ret = oa_live_write(f, &l);
out:
	scan_free(&S);
	return ret;
}

int oa_heal_locked(struct oa_file *f, struct oa_live *lp)
{
	struct oa_live l;
	if (!lp)
		lp = &l;
	if (oa_live_read(f, lp) < 0)
		return -1;
	if (lp->dirty_seq == 0 || MUTANT(6))
		return 0;
	/* We hold COMMIT, so whoever set the marker is gone (I10). */
	if (oa_target_writable(f) < 0 || oa_recover_locked(f) < 0)
		return -1;
	return oa_live_read(f, lp);
}

/* For a reader that may not write: is there a committed transaction the
 * file may not hold yet?  1 yes, 0 no, -1 error (EUCLEAN, EPERM, ...). */
int oa_needs_recovery(struct oa_file *f)
{
	struct scan S = { .path = "" };
	bool foreign_ctl;
	int r = scan_from_ckpt(f, &S, &foreign_ctl);
	if (r == -2)
		return -1;
	if (r == 0)
		r = S.nacc > 0;
	scan_free(&S);
	return r;
}

/* ---- oatomic check ---- */

int oa__check(const char *path, const char *jdir, FILE *out)
{
	struct scan S = { .out = out, .path = path };
	struct oa_file *f;
	bool foreign_ctl;
	int ret = 0, r;

	f = oa_handle_for(AT_FDCWD, path, OA_PURPOSE_CHECK, jdir);
	if (!f) {
		if (errno != EPERM)
			return -1;
		/* oa_ctl_open refused the control file (GUARANTEES.md §10). */
		if (out)
			fprintf(out, "%s: control file is not a regular file owned "
				"by the file's owner, root or you, or is writable "
				"by others: not trusted\n", path);
		return 2;
	}
	if (f->cfd < 0) {
		if (out)
			fprintf(out, "%s: clean (no journal)\n", path);
		oa_handle_free(f);
		return 0;
	}
	if (oa_lock(f->cfd, OA_LOCK_COMMIT, F_RDLCK, 1) < 0) {
		oa_handle_free(f);
		return -1;
	}
	r = scan_from_ckpt(f, &S, &foreign_ctl);
	if (r == -2) {
		int e = errno;
		if (e == EUCLEAN && out)
			fprintf(out, "%s: control file damaged\n", path);
		scan_free(&S);
		oa_handle_free(f);
		errno = e;
		return e == EUCLEAN ? 2 : -1;
	}
	if (r < 0 && errno != EUCLEAN && errno != EPERM) {
		int e = errno;
		scan_free(&S);
		oa_handle_free(f);
		errno = e;
		return -1;
	}
	if (r < 0 || S.foreign) {
		ret = 2;
	} else if (S.nacc) {
		note(&S, "%zu committed transaction(s) (seq %llu..%llu) not yet "
		     "checkpointed: oatomic recover finishes them", S.nacc,
		     (unsigned long long)S.acc[0].seq,
		     (unsigned long long)S.acc[S.nacc - 1].seq);
		ret = 1;
	}
	if (S.ninc && ret < 2)
		note(&S, "a torn last commit (seq %llu) will be dropped",
		     (unsigned long long)S.inc[0]);
	if (ret == 0)
		note(&S, "clean");
	scan_free(&S);
	oa_handle_free(f);
	return ret;
}
