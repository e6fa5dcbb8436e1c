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
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "internal.h"
#include "oatomic-private.h"

struct jrn {
	int fd;
	int idx;                /* K of .NAME.oaj-K; 0: journal 0, in the
				 * control file (ctl) */
	bool ctl;
	uint64_t base, data;    /* its header slots; its first LSN */
	uint64_t gen;
	bool bad;               /* damage found in it */
	bool pend;              /* holds a commit newer than the checkpoint */
	bool copy;              /* names the inode the control file names, not
				 * the file's: copied with it */
	char name[NAME_MAX + 1];
};

struct acc {
	uint64_t seq, lsn;
	int j;
	uint32_t role;          /* OA_GRP_*: a record of a group, or 0 */
};

struct scan {
	struct jrn *j;
	size_t nj, jcap;
	struct acc *acc;
	size_t nacc, acap;
	struct acc *inc;        /* incomplete commits newer than ckpt */
	size_t ninc, icap;
	uint64_t max_acc, max_seen, ckpt;
	uint64_t cckpt;         /* the control file's checkpoint as written */
	bool fctl;              /* the control file names another inode */
	bool ctl_bad;           /* the control file itself is damaged */
	bool lost_ack;          /* an acknowledged commit is nowhere */
	int seal;               /* the live area's seal (OA_SEAL_*) */
	uint64_t ack;           /* ... and its ack_seq (this boot only) */
	uint64_t gap;           /* ... and its gap_seq */
	unsigned flags;         /* OA__RECOVER_* */
	int damaged, unsafe, foreign, copied, obsolete;
	bool clean;             /* the control file is clean, or its
				 * initialisation never became durable:
				 * nothing to recover, no journal read */
	bool j0_disc;           /* discard journal 0 */
	bool this_boot;         /* the control file was initialised in this
				 * boot: what it lacks, damage took */
	uint64_t era;           /* the control file's era (I15) */
	int *disc;              /* journals (by number) to discard: damaged
				 * or foreign ones not in j[] */
	size_t ndisc, dcap;
	FILE *out;              /* findings, for oatomic check (may be NULL) */
	const char *path;
	char cname[NAME_MAX + 1];   /* the control file's name */
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
	if (!S->out || (S->flags & OA__RECOVER_QUIET))
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
	if (oa_commit_decode(body, r->len, &ch) < 0 ||
	    ch.tx_start > r->lsn || ch.final_size > (uint64_t)INT64_MAX ||
	    (ch.trunc_min != OA_NO_TRUNC && ch.trunc_min > ch.final_size))
		return 2;
	uint64_t prev_end = 0;
	for (uint64_t i = 0; i < ch.nops; i++) {
		struct oa_op op;
		oa_op_get(body, i, &op);
		uint64_t off = op.off, len = op.len, joff = op.joff;
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

	if (oa_xfsize(J->fd, &size) < 0 || oa_need_buf(f) < 0)
		return -1;
	for (uint64_t p = J->data; p + OA_REC_HDR <= size;) {
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
			note(S, "journal %s: commit %llu at LSN %llu is "
			     "malformed (good checksum, impossible contents): "
			     "damaged", J->name, (unsigned long long)r.seq,
			     (unsigned long long)p);
			S->damaged++;
			J->bad = true;
		} else if (c == 1) {
			if (r.seq > S->ckpt) {
				if (grow((void **)&S->inc, &S->icap, S->ninc,
					 sizeof(*S->inc)) < 0)
					goto out;
				S->inc[S->ninc++] = (struct acc){ r.seq, p, ji, 0 };
				J->pend = true;
			}
		} else {
			struct oa_commit_hdr ch;
			struct oa_group g;
			uint32_t role = 0;
			if (oa_commit_decode(body, r.len, &ch) == 0 &&
			    oa_group_get(body, &ch, &g) == 0)
				role = g.role;
			if (r.seq > S->max_acc)
				S->max_acc = r.seq;
			if (r.seq > S->ckpt) {
				if (grow((void **)&S->acc, &S->acap, S->nacc,
					 sizeof(*S->acc)) < 0)
					goto out;
				S->acc[S->nacc++] =
					(struct acc){ r.seq, p, ji, role };
				J->pend = true;
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
	free(S->disc);
	free(S->pbuf);
	S->j = NULL;
	S->acc = S->inc = NULL;
	S->disc = NULL;
	S->pbuf = NULL;
	S->nj = S->nacc = S->ninc = S->ndisc = 0;
	S->jcap = S->acap = S->icap = S->dcap = 0;
}

static void discard_add(struct scan *S, int idx)
{
	for (size_t i = 0; i < S->ndisc; i++)
		if (S->disc[i] == idx)
			return;
	if (grow((void **)&S->disc, &S->dcap, S->ndisc, sizeof(int)) == 0)
		S->disc[S->ndisc++] = idx;
}

/* "inode N", with the generation where the numbers alone are equal (the
 * inode number was reused). */
static const char *ino_str(char *b, size_t n, uint64_t ino, uint64_t igen,
			   uint64_t other)
{
	if (ino == other)
		snprintf(b, n, "inode %llu generation %llu",
			 (unsigned long long)ino, (unsigned long long)igen);
	else
		snprintf(b, n, "inode %llu", (unsigned long long)ino);
	return b;
}

static const char *jname_of(const struct scan *S, int j)
{
	return S->j[j].name;
}

/*
 * The evidence of the live area (I13, FORMAT.md rule 6).  In the boot that
 * wrote it, the seal's ack_seq is a commit whose flush returned and whose
 * apply may have begun: it must be found complete, and so must every
 * commit before it; one that is not is damage, never a torn flush.  A seal
 * that is damaged cannot say whether the newest incomplete commit was
 * acknowledged: refuse rather than guess.  A seal of another boot (a power
 * cut may have torn the last flush) or none (an older writer) leaves the
 * rule as it was.
 */
static void check_evidence(struct scan *S)
{
	if (MUTANT(25) || (S->flags & OA__RECOVER_NOEVIDENCE) ||
	    (S->fctl && !(S->flags & OA__RECOVER_ADOPT)))
		return;
	if (S->seal == OA_SEAL_THIS_BOOT && S->ack > S->ckpt) {
		/* Seqs are handed out one by one under COMMIT, and the seal
		 * knows the last one that went to a failed commit (gap_seq):
		 * every seq after it up to ack_seq is an acknowledged commit,
		 * and ack_seq itself always is.  A replay that missed one
		 * would write the older commits over its bytes (I7). */
		uint64_t lo = S->ckpt > S->gap ? S->ckpt : S->gap;
		size_t i = 0;
		int told = 0;
		if (lo >= S->ack)
			lo = S->ack - 1;
		for (uint64_t q = lo + 1; q <= S->ack; q++) {
			const struct acc *c = NULL;
			while (i < S->nacc && S->acc[i].seq < q)
				i++;
			if (i < S->nacc && S->acc[i].seq == q)
				continue;
			for (size_t k = 0; k < S->ninc && !c; k++)
				if (S->inc[k].seq == q)
					c = &S->inc[k];
			if (c && c->seq < S->max_acc)
				continue;   /* reported by rule 6 already */
			S->damaged++;
			if (c)
				S->j[c->j].bad = true;
			else
				S->lost_ack = true;
			if (++told > 8)
				continue;
			if (c)
				note(S, "journal %s: commit %llu at LSN %llu was "
				     "acknowledged (live area of %s, this boot) "
				     "but its records are damaged",
				     jname_of(S, c->j), (unsigned long long)q,
				     (unsigned long long)c->lsn, S->cname);
			else
				note(S, "commit %llu was acknowledged (live area "
				     "of %s, this boot) but no journal holds it: "
				     "a journal damaged, truncated or removed",
				     (unsigned long long)q, S->cname);
		}
		if (told > 8)
			note(S, "... and %d more acknowledged commits lost",
			     told - 8);
	} else if (S->seal == OA_SEAL_DAMAGED) {
		for (size_t i = 0; i < S->ninc; i++) {
			const struct acc *c = &S->inc[i];
			if (c->seq < S->max_acc)
				continue;   /* damage by rule 6 anyway */
			note(S, "live area of control file %s is damaged and "
			     "commit %llu (journal %s, LSN %llu) is incomplete: "
			     "cannot tell a torn flush from lost data",
			     S->cname, (unsigned long long)c->seq,
			     jname_of(S, c->j), (unsigned long long)c->lsn);
			S->j[c->j].bad = true;
			S->damaged++;
		}
	}
}

/* Scan one journal, opened as FD (taken over: closed with the scan) under
 * NAME: journal IDX, its slots at BASE, records from DATA; CTL: journal 0,
 * in the control file.  UNSAFE: not one the file's owner could have
 * written alone (GUARANTEES.md §10).  0, or -1 on an I/O error. */
static int add_journal(struct oa_file *f, struct scan *S, int fd,
		       const char *name, int idx, uint64_t base, uint64_t data,
		       bool ctl, bool unsafe)
{
	struct oa_slot s;
	int r = oa_slots_read(fd, base, OA_JNL_MAGIC, &s);
	if (r < 0) {
		if (errno == EUCLEAN) {
			note(S, "journal %s: both header slots damaged", name);
			S->damaged++;
			if (ctl)
				S->j0_disc = true;
			else
				discard_add(S, idx);
			oa_xclose(fd);
			return 0;
		}
		oa_xclose(fd);
		return -1;
	}
	if (r == 0 && S->out && oa_slots_damaged(fd, base, OA_JNL_MAGIC))
		note(S, "journal %s: one header slot is unreadable (a "
		     "reset torn by a crash, or corruption); the other "
		     "is used", name);
	if (r == 2 && ctl && S->this_boot) {
		/* Journal 0's first slot write, in the boot that made the
		 * control file: the page cache keeps it, only damage tears
		 * it. */
		note(S, "journal %s: its header slot is damaged", name);
		S->damaged++;
		S->j0_disc = true;
		oa_xclose(fd);
		return 0;
	}
	if (r == 1 || r == 2) {
		/* Both slots zero, or the first one written torn: no
		 * generation was ever made durable in it (a commit flush
		 * carries its slot), hence no record counts. */
		oa_xclose(fd);
		return 0;
	}
	/* I15: a journal of an earlier era was left behind by a last close
	 * whose removal a crash undid; the control file was clean since, and
	 * all it holds is in the file.  Journal 0 is part of the control
	 * file, of its era by construction. */
	if (!ctl && s.era != S->era && !MUTANT(28)) {
		note(S, "journal %s is left from an earlier use of the file "
		     "(era %016llx, now %016llx): ignored", name,
		     (unsigned long long)s.era, (unsigned long long)S->era);
		S->obsolete++;
		oa_xclose(fd);
		return 0;
	}
	/* Another inode's journal.  If the control file names that same
	 * inode, the two were copied together (cp -a, rsync, tar: new inode
	 * numbers): what the journal holds beyond the control's checkpoint
	 * may be missing from the file. */
	bool copy = false;
	if (s.ino != f->ino || s.igen != f->igen) {
		copy = S->fctl && s.ino == f->cino && s.igen == f->cigen;
		if (!copy) {
			note(S, "journal %s belongs to another file (inode "
			     "%llu): ignored", name, (unsigned long long)s.ino);
			S->foreign++;
			oa_xclose(fd);
			return 0;
		}
	}
	if (grow((void **)&S->j, &S->jcap, S->nj, sizeof(*S->j)) < 0) {
		oa_xclose(fd);
		return -1;
	}
	S->j[S->nj] = (struct jrn){ .fd = fd, .idx = idx, .ctl = ctl,
				    .base = base, .data = data,
				    .gen = s.a, .copy = copy };
	snprintf(S->j[S->nj].name, sizeof(S->j[S->nj].name), "%s", name);
	S->nj++;
	size_t nacc = S->nacc, ninc = S->ninc;
	uint64_t max_acc = S->max_acc, ckpt = S->ckpt;
	bool adopt = copy && (S->flags & OA__RECOVER_ADOPT);
	if (copy && !adopt)
		S->ckpt = S->cckpt;  /* its own control's checkpoint */
	if (scan_journal(f, S, (int)S->nj - 1) < 0)
		return -1;
	S->ckpt = ckpt;
	if (copy && !adopt) {
		if (S->nacc > nacc) {
			char b1[64], b2[64];
			note(S, "journal %s was written for %s, not this "
			     "file (%s): a copy of the directory? It "
			     "holds committed transactions (seq %llu..) "
			     "newer than its control file's checkpoint "
			     "%llu that the file may lack: not applied "
			     "(oatomic recover --adopt replays them, "
			     "--discard drops them)", name,
			     ino_str(b1, sizeof(b1), s.ino, s.igen, f->ino),
			     ino_str(b2, sizeof(b2), f->ino, f->igen, s.ino),
			     (unsigned long long)S->acc[nacc].seq,
			     (unsigned long long)S->cckpt);
			S->damaged++;
			S->copied++;
			if (ctl)
				S->j0_disc = true;
			else
				discard_add(S, idx);
		} else {
			note(S, "journal %s was written for inode %llu "
			     "(a copy of the directory): nothing newer "
			     "than its checkpoint, ignored", name,
			     (unsigned long long)s.ino);
		}
		/* Nothing of it is replayed. */
		S->nacc = nacc;
		S->ninc = ninc;
		S->max_acc = max_acc;
		S->j[S->nj - 1].pend = false;
		S->j[S->nj - 1].bad = false;
		return 0;
	}
	if (adopt)
		note(S, "journal %s was written for inode %llu: adopted",
		     name, (unsigned long long)s.ino);
	/* GUARANTEES.md §10: a journal someone else could have written is
	 * never replayed.  One that holds nothing newer than the checkpoint
	 * (say, the file was chmod-ed since) is harmless. */
	if (unsafe && (S->nacc > nacc || S->ninc > ninc)) {
		note(S, "journal %s is not owned by the file's owner or "
		     "is writable by others: not replayed", name);
		S->unsafe++;
		S->nacc = nacc;
		S->ninc = ninc;
	}
	return 0;
}

/* Open and scan every journal; apply the rule.  Returns 0 (the scan is
 * sound: S->acc holds what to replay, sorted) or -1 (errno: EUCLEAN damage,
 * EPERM unsafe, or an I/O error). */
static int scan_all(struct oa_file *f, struct scan *S)
{
	int *idx = NULL;
	size_t n;
	char name[NAME_MAX + 1];
	uint64_t csize;

	S->pbuf = malloc(OA_BUF_BYTES);
	if (!S->pbuf) {
		errno = ENOMEM;
		return -1;
	}
	/* Journal 0, in the control file. */
	if (oa_xfsize(f->cfd, &csize) < 0)
		return -1;
	if (csize > OA_J0_SLOT) {
		int fd = oa_xopenat(f->dfd, S->cname, O_RDONLY | O_NOFOLLOW, 0);
		if (fd < 0)
			return -1;
		if (add_journal(f, S, fd, S->cname, 0, OA_J0_SLOT, OA_J0_DATA,
				true, f->ctl_unsafe) < 0)
			goto fail;
	}
	if (list_journals(f, &idx, &n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		uint64_t size;
		int fd;
		if (idx[i] < 1 ||
		    oa_name(f, name, sizeof(name), OA_NAME_JNL, idx[i]) < 0)
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
		if (!unsafe && oa_multi_linked(fd)) {
			/* a second name: not one the library made */
			note(S, "journal %s has other hard links: not trusted",
			     name);
			unsafe = true;
		}
		/* Extra journals are created complete at OA_XJ_INITIAL and
		 * flushed before their name exists (I8); they grow from there
		 * and are only ever cut back to OA_JRNL_INITIAL: a shorter one
		 * lost its tail, records included. */
		if (oa_xfsize(fd, &size) < 0) {
			oa_xclose(fd);
			goto fail;
		}
		if (size < OA_XJ_INITIAL) {
			note(S, "journal %s is %llu bytes, shorter than any the "
			     "library writes (%u): truncated, damaged", name,
			     (unsigned long long)size, OA_XJ_INITIAL);
			S->damaged++;
			discard_add(S, idx[i]);
			oa_xclose(fd);
			continue;
		}
		if (add_journal(f, S, fd, name, idx[i], 0, OA_DATA_START,
				false, unsafe) < 0)
			goto fail;
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
			note(S, "two commits carry sequence %llu (journal %s, "
			     "LSN %llu; journal %s, LSN %llu)",
			     (unsigned long long)S->acc[i].seq,
			     jname_of(S, S->acc[i - 1].j),
			     (unsigned long long)S->acc[i - 1].lsn,
			     jname_of(S, S->acc[i].j),
			     (unsigned long long)S->acc[i].lsn);
			S->j[S->acc[i].j].bad = S->j[S->acc[i - 1].j].bad = true;
			S->damaged++;
		}
	for (size_t i = 0; i < S->ninc; i++)
		if (S->inc[i].seq < S->max_acc) {
			note(S, "journal %s: commit %llu at LSN %llu lost data "
			     "although later commits exist (up to %llu): "
			     "damaged", jname_of(S, S->inc[i].j),
			     (unsigned long long)S->inc[i].seq,
			     (unsigned long long)S->inc[i].lsn,
			     (unsigned long long)S->max_acc);
			S->j[S->inc[i].j].bad = true;
			S->damaged++;
		}
	check_evidence(S);
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

/* Read the live area's seal and the checkpoint into S (a control file of
 * another inode counts as no checkpoint, unless adopted: S->fctl), and scan
 * every journal.  -2 (errno) when the control file cannot be read; else
 * what scan_all returns.  Damage of the control file itself is reported
 * (S->ctl_bad) after the journals were scanned. */
static int scan_from_ckpt(struct oa_file *f, struct scan *S)
{
	struct oa_live l;
	struct oa_slot id;
	uint64_t size;
	bool this_boot = false;
	int r;

	if (oa_name(f, S->cname, sizeof(S->cname), OA_NAME_CTL, 0) < 0)
		return -2;
	if (oa_xfsize(f->cfd, &size) < 0)
		return -2;
	/* I14: a control file cut back to its clean length is clean: every
	 * commit is in the file, and journals left beside it are of an
	 * earlier era (I15). */
	if (size == OA_CLEAN_SIZE) {
		S->clean = true;
		return 0;
	}
	if (oa_live_read(f, &l) < 0)
		return -2;
	S->seal = l.seal;
	S->ack = l.ack_seq;
	S->gap = l.gap_seq;
	if (size < OA_CLEAN_SIZE) {
		note(S, "control file %s is %llu bytes, shorter than any the "
		     "library writes (%u): truncated, damaged", S->cname,
		     (unsigned long long)size, (unsigned)OA_CLEAN_SIZE);
		S->ctl_bad = true;
		S->seal = OA_SEAL_DAMAGED;
	}
	r = oa_slot_read1(f->cfd, OA_ID_OFF, OA_ID_MAGIC, &id);
	if (r < 0 && errno != EUCLEAN)
		return -2;
	bool id_bad = r != 0;
	if (r != 0 && size >= OA_CLEAN_SIZE) {
		unsigned char m[12];
		if (oa_xpread(f->cfd, m, sizeof(m), 0) == (ssize_t)sizeof(m) &&
		    !memcmp(m, OA_CTL_MAGIC, 8) && oa_get32(m + 8) == 1) {
			note(S, "control file %s is of format 1, written by a "
			     "development version of oatomic before 0.1.0: "
			     "not read (recover the file with that version, "
			     "then remove its .oa and .oaj-* files)", S->cname);
			errno = EPROTO;
			return -1;
		}
		/* Torn (the identity is rewritten without a flush when the
		 * file leaves and enters the clean state) or damaged: it holds
		 * nothing committed, only the evidence below, which is then
		 * missing. */
	} else if (r == 0) {
		/* The boot in which a flush made its initialisation durable
		 * (identity a, era: its boot id).  In that boot nothing of it
		 * can be missing but by damage: the disk has it, and so does
		 * the page cache a kill leaves. */
		this_boot = id.slot_seq != OA_ID_CLEAN_SYNCED &&
			    oa_id_this_boot(&id);
	}
	r = oa_ctl_read_ckpt(f, &S->cckpt, &S->fctl);
	if (r < 0) {
		if (errno != EUCLEAN)
			return -2;
		note(S, "control file %s: no readable header slot (both "
		     "damaged): the checkpoint is unknown", S->cname);
		S->ctl_bad = true;
		S->cckpt = 0;
		S->fctl = false;
	} else if ((r == 1 || size < OA_CTL_INIT) && !S->ctl_bad) {
		/* (r == 1: both slots zero, or one zero and one torn)
		 * Whether its initialisation was ever flushed: the identity
		 * says so in the boot that flushed it; where the identity is
		 * unreadable, the seal does.  A seal of this boot with an
		 * acknowledged commit means a flush of the control file
		 * returned since its header slot was written (a commit's
		 * flush, or the flush that precedes a commit through another
		 * journal or method), and that commit's apply may have begun:
		 * its header cannot be missing but by damage, in the page
		 * cache a kill leaves or on the disk a cut leaves.  A damaged
		 * seal beside a damaged identity leaves no evidence either
		 * way: refused, never taken for clean. */
		bool acked = S->seal == OA_SEAL_THIS_BOOT && S->ack > 0;
		bool blind = id_bad && S->seal == OA_SEAL_DAMAGED;
		if (!this_boot && !acked && !blind) {
			/* Its initialisation was cut short (a power cut before
			 * its first commit flush, or a kill inside its first
			 * write): nothing was committed in it. */
			S->clean = true;
			return 0;
		}
		/* Flushed in this boot: nothing of it can be missing but by
		 * damage. */
		if (this_boot || acked)
			note(S, "control file %s is %llu bytes%s, though it "
			     "was flushed whole in this boot%s: truncated or "
			     "overwritten, damaged", S->cname,
			     (unsigned long long)size,
			     r == 1 ? " and its header is gone" : "",
			     this_boot ? "" : " (its live area holds an "
			     "acknowledged commit)");
		else
			note(S, "control file %s: its header is gone and its "
			     "identity and live area are damaged: whether "
			     "commits were made in it cannot be told, damaged",
			     S->cname);
		S->ctl_bad = true;
	}
	S->era = f->era;
	S->this_boot = this_boot;
	S->ckpt = S->cckpt;
	if (S->fctl && !(S->flags & OA__RECOVER_ADOPT)) {
		char b1[64], b2[64];
		note(S, "control file %s was written for %s, not this file "
		     "(%s): its checkpoint is not this file's", S->cname,
		     ino_str(b1, sizeof(b1), f->cino, f->cigen, f->ino),
		     ino_str(b2, sizeof(b2), f->ino, f->igen, f->cino));
		S->ckpt = 0;
	}
	r = scan_all(f, S);
	if (r < 0 && errno != EUCLEAN && errno != EPERM)
		return -1;
	if (S->ctl_bad) {
		S->damaged++;
		errno = EUCLEAN;
		return -1;
	}
	return r;
}
/* Read the body of the commit record A found (checked when it was found):
 * a malloc'd body in *BODY, its fixed part in CH. */
static int read_commit(struct scan *S, const struct acc *a,
		       unsigned char **bodyp, struct oa_commit_hdr *ch)
{
	struct jrn *J = &S->j[a->j];
	unsigned char h[OA_REC_HDR];
	struct oa_rec r;
	unsigned char *body;

	if (oa_pread_full(J->fd, h, sizeof(h), (off_t)a->lsn) < 0)
		return -1;
	if (oa_rec_decode(h, &r) < 0) {
		errno = EUCLEAN;
		return -1;
	}
	body = malloc(r.len ? r.len : 1);
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
	if (oa_commit_decode(body, r.len, ch) < 0) {
		free(body);
		errno = EUCLEAN;   /* checked when it was found */
		return -1;
	}
	*bodyp = body;
	return 0;
}

static int replay_one(struct oa_file *f, struct scan *S, const struct acc *a)
{
	struct oa_commit_hdr ch;
	unsigned char *body;
	int ret;

	if (read_commit(S, a, &body, &ch) < 0)
		return -1;
	ret = oa_apply(f, S->j[a->j].fd, &ch, body);
	free(body);
	return ret;
}

/* Remember coordinator C for the handle's opener to recover (best effort:
 * the group is safe without it, G4). */
static void keep_coordinator(struct oa_file *f, const struct oa_gref *c)
{
	for (size_t i = 0; i < f->ngco; i++)
		if (f->gco[i].ino == c->ino && f->gco[i].plen == c->plen &&
		    !memcmp(f->gco[i].path, c->path, c->plen))
			return;
	struct oa_gref *n = realloc(f->gco, (f->ngco + 1) * sizeof(*n));
	if (!n)
		return;
	f->gco = n;
	char *p = strndup(c->path, c->plen);
	char *d = c->dlen ? strndup(c->jdir, c->dlen) : NULL;
	if (!p || (c->dlen && !d)) {
		free(p);
		free(d);
		return;
	}
	n[f->ngco++] = (struct oa_gref){ .ino = c->ino, .igen = c->igen,
					 .path = p, .jdir = d,
					 .plen = c->plen, .dlen = c->dlen };
}

/*
 * Groups (oa_commit_group; FORMAT.md, "Several files in one commit").  A
 * member's record is committed iff the group's coordinator holds a
 * complete record of the group: ask it (f->group_decided, from file.c,
 * which makes a decision it finds durable before saying yes).  Records of
 * undecided groups leave S->acc: never committed, and nobody will decide
 * them now (their committer held this file's COMMIT, which we hold).  A
 * coordinator that cannot be reached, or read, is refused (EUCLEAN), never
 * guessed; with --discard the member's record is dropped.
 */
static int resolve_members(struct oa_file *f, struct scan *S)
{
	size_t k = 0;
	for (size_t i = 0; i < S->nacc; i++) {
		struct acc *a = &S->acc[i];
		int d = 1;
		if (a->role == OA_GRP_MEMBER && !MUTANT(46)) {
			struct oa_commit_hdr ch;
			struct oa_group g;
			struct oa_gref c;
			unsigned char *body;
			if (read_commit(S, a, &body, &ch) < 0)
				return -1;
			oa_group_get(body, &ch, &g);
			oa_gref_get(&g, 0, &c);
			d = f->group_decided ? f->group_decided(f, &c, g.gid)
					     : (errno = ENOTSUP, -1);
			if (d > 0)
				keep_coordinator(f, &c);
			if (d < 0) {
				int e = errno;
				note(S, "commit %llu (journal %s, LSN %llu) is part "
				     "of group %016llx, whose coordinator %.*s "
				     "cannot be read (%s)%s",
				     (unsigned long long)a->seq, jname_of(S, a->j),
				     (unsigned long long)a->lsn,
				     (unsigned long long)g.gid, (int)c.plen,
				     c.path, strerror(e),
				     (S->flags & OA__RECOVER_DISCARD)
					     ? ": dropped" : ": refused");
				if (!(S->flags & OA__RECOVER_DISCARD)) {
					free(body);
					errno = e == ENOMEM || e == EIO ? e
									: EUCLEAN;
					return -1;
				}
				d = 0;
			}
			free(body);
		}
		if (d)
			S->acc[k++] = *a;
	}
	S->nacc = k;
	return 0;
}

/* A coordinator's record replayed: every member holds the group too
 * before this file's checkpoint lets the record go (f->group_settle
 * recovers each member, which asks this file and finds the decision). */
static int settle_members(struct oa_file *f, struct scan *S)
{
	for (size_t i = 0; i < S->nacc; i++) {
		const struct acc *a = &S->acc[i];
		struct oa_commit_hdr ch;
		struct oa_group g;
		unsigned char *body;
		if (a->role != OA_GRP_COORD || MUTANT(47))
			continue;
		if (read_commit(S, a, &body, &ch) < 0)
			return -1;
		oa_group_get(body, &ch, &g);
		for (uint32_t m = 0; m < g.nref; m++) {
			struct oa_gref r;
			oa_gref_get(&g, m, &r);
			if (f->group_settle && f->group_settle(f, &r, g.gid) == 0)
				continue;
			int e = f->group_settle ? errno : ENOTSUP;
			note(S, "commit %llu (journal %s) is group %016llx's "
			     "commit point; its member %.*s cannot be recovered "
			     "(%s)%s", (unsigned long long)a->seq,
			     jname_of(S, a->j), (unsigned long long)g.gid,
			     (int)r.plen, r.path, strerror(e),
			     (S->flags & OA__RECOVER_DISCARD)
				     ? ": left as it is" : ": refused");
			if (!(S->flags & OA__RECOVER_DISCARD)) {
				free(body);
				errno = e == ENOMEM || e == EIO ? e : EUCLEAN;
				return -1;
			}
		}
		free(body);
	}
	return 0;
}

int oa_group_find(struct oa_file *f, uint64_t gid)
{
	struct scan S = { .path = "",
			  .flags = OA__RECOVER_NOEVIDENCE | OA__RECOVER_QUIET };
	int r = scan_from_ckpt(f, &S);
	if (r == -2)
		r = -1;
	if (r == 0 && !S.clean) {
		for (size_t i = 0; i < S.nacc && r == 0; i++) {
			const struct acc *a = &S.acc[i];
			struct oa_commit_hdr ch;
			struct oa_group g;
			unsigned char *body;
			if (a->role != OA_GRP_COORD)
				continue;
			if (read_commit(&S, a, &body, &ch) < 0) {
				r = -1;
				break;
			}
			oa_group_get(body, &ch, &g);
			free(body);
			/* Found in the page cache: durable before anyone acts
			 * on it (the committer may have died before its
			 * flush). */
			if (g.gid == gid)
				r = oa_xfdatasync(S.j[a->j].fd) < 0 ? -1 : 1;
		}
	}
	scan_free(&S);
	return r;
}

/*
 * --discard (OA__RECOVER_DISCARD): throw away what recovery refused — the
 * damaged journals, a copy's journals, and, when an acknowledged commit is
 * nowhere or the control file is damaged, every journal holding anything
 * newer than the checkpoint — leaving the file as it is.  A journal a live
 * handle owns (OWNER) is not touched: EBUSY.  One line per journal to OUT.
 */
static int discard(struct oa_file *f, struct scan *S)
{
	char name[NAME_MAX + 1];
	int *v = NULL;
	size_t nv = 0, cap = 0;
	int ret = 0;

	for (size_t i = 0; i < S->ndisc; i++) {
		if (grow((void **)&v, &cap, nv, sizeof(int)) < 0)
			return -1;
		v[nv++] = S->disc[i];
	}
	/* An acknowledged commit that no journal holds: journal 0, where the
	 * live area that acknowledged it lives, is thrown away with the
	 * others that hold anything newer than the checkpoint. */
	if (S->lost_ack)
		S->j0_disc = true;
	for (size_t i = 0; i < S->nj; i++) {
		const struct jrn *J = &S->j[i];
		if (!J->bad && !(J->pend && (S->lost_ack || S->ctl_bad)))
			continue;
		if (J->ctl) {
			S->j0_disc = true;
			continue;
		}
		if (grow((void **)&v, &cap, nv, sizeof(int)) < 0) {
			free(v);
			return -1;
		}
		v[nv++] = J->idx;
	}
	for (size_t i = 0; i < nv; i++) {
		bool dup = false;
		for (size_t k = 0; k < i; k++)
			dup = dup || v[k] == v[i];
		if (dup || oa_name(f, name, sizeof(name), OA_NAME_JNL, v[i]) < 0)
			continue;
		int fd = oa_xopenat(f->dfd, name, O_RDWR | O_NOFOLLOW, 0);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			ret = -1;
			break;
		}
		/* Held until the name is gone: no handle can take it over
		 * meanwhile, and one that owns it is alive: not ours. */
		if (oa_lock(fd, OA_LOCK_OWNER, F_WRLCK, 0) < 0) {
			oa_xclose(fd);
			if (errno == EAGAIN)
				errno = EBUSY;
			ret = -1;
			break;
		}
		if (oa_sys->unlinkat(f->dfd, name, 0) < 0) {
			oa_xclose(fd);
			ret = -1;
			break;
		}
		oa_xclose(fd);
		if (f->rout)
			fprintf(f->rout, "%s: journal %s discarded: nothing in it "
				"was applied, the file is left as it is\n",
				S->path, name);
	}
	free(v);
	/* The removal is durable before a checkpoint makes recovery forget
	 * what the journals held (I8's order, backwards). */
	if (ret == 0 && nv && oa_xfsync(f->dfd) < 0)
		ret = -1;
	if (ret == 0 && S->j0_disc &&
	    oa_ctl_lock(f, OA_LOCK_J0, F_WRLCK, 0) < 0) {
		if (errno == EAGAIN)
			errno = EBUSY;   /* a live handle writes it */
		ret = -1;
	}
	if (ret == 0 && (S->j0_disc || S->ctl_bad)) {
		/* Journal 0 is emptied in place: its slots zeroed (no
		 * generation, no record counts), records cut off.  A damaged
		 * control file gets its identity and length back; the
		 * checkpoint is rewritten by the caller. */
		unsigned char z[OA_SLOT_BYTES] = { 0 };
		struct oa_slot id = { .ino = f->ino, .igen = f->igen };
		unsigned char ib[OA_SLOT_BYTES];
		oa_slot_encode(ib, OA_ID_MAGIC, &id);
		if (oa_pwrite_full(f->cfd, z, sizeof(z),
				   OA_J0_SLOT + OA_SLOT_A) < 0 ||
		    oa_pwrite_full(f->cfd, z, sizeof(z),
				   OA_J0_SLOT + OA_SLOT_B) < 0 ||
		    oa_xftruncate(f->cfd, OA_CTL_INIT) < 0 ||
		    (S->ctl_bad && oa_pwrite_full(f->cfd, ib, sizeof(ib),
						  OA_ID_OFF) < 0) ||
		    oa_xfdatasync(f->cfd) < 0)
			ret = -1;
		else if (f->rout && S->j0_disc)
			fprintf(f->rout, "%s: journal 0 in %s discarded: nothing "
				"in it was applied, the file is left as it is\n",
				S->path, S->cname);
		if (ret == 0 && S->ctl_bad && f->rout)
			fprintf(f->rout, "%s: control file %s rewritten\n",
				S->path, S->cname);
		if (S->j0_disc)
			oa_ctl_lock(f, OA_LOCK_J0, F_UNLCK, 0);
	}
	return ret;
}

/*
 * After the checkpoint of a copied directory (clean, adopted) is written
 * for this file: its journals, which name the old inode, get a new
 * generation under this one, so that they are this file's again (not
 * "another file's").  I6: every commit they hold is covered by the durable
 * checkpoint just written.  Flushed, once: losing it only leaves a journal
 * that is reported as another file's and reset before reuse.  A journal a
 * live handle owns is left alone.
 */
static void restamp(struct oa_file *f, struct scan *S)
{
	for (size_t i = 0; i < S->nj; i++) {
		struct oa_slot s;
		const struct jrn *J = &S->j[i];
		if (!J->copy)
			continue;
		int fd = oa_xopenat(f->dfd, J->name, O_RDWR | O_NOFOLLOW, 0);
		if (fd < 0)
			continue;
		if (oa_lock(fd, J->ctl ? OA_LOCK_J0 : OA_LOCK_OWNER, F_WRLCK,
			    0) == 0 &&
		    oa_slots_read(fd, J->base, OA_JNL_MAGIC, &s) == 0) {
			s.slot_seq++;
			s.a = oa_random64();
			s.ino = f->ino;
			s.igen = f->igen;
			if (oa_slot_write(fd, J->base, OA_JNL_MAGIC, &s) == 0)
				oa_xfdatasync(fd);
		}
		oa_xclose(fd);
	}
}

int oa_recover_locked(struct oa_file *f)
{
	struct scan S = { .path = f->rpath ? f->rpath : "", .out = f->rout,
			  .flags = f->rflags };
	struct oa_live l;
	uint64_t top, seen = 0;
	int ret = -1, r;

	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	/* Findings are said only when they matter: when recovery refuses (or
	 * throws away, or adopts); a clean copy recovers silently. */
	char *nbuf = NULL;
	size_t nlen = 0, said = 0;
	if (f->rout)
		S.out = open_memstream(&nbuf, &nlen);
	if (oa_live_read(f, &l) < 0)
		goto out;
	r = scan_from_ckpt(f, &S);
	if (S.out && (r < 0 || (f->rflags & OA__RECOVER_ADOPT))) {
		int e = errno;
		fflush(S.out);
		fwrite(nbuf, 1, nlen, f->rout);
		fflush(f->rout);
		said = nlen;
		errno = e;
	}
	if (r < 0 && errno == EUCLEAN && (f->rflags & OA__RECOVER_DISCARD)) {
		/* Throw the refused part away, then recover the rest with the
		 * evidence waived: what it spoke of is gone on request. */
		if (discard(f, &S) < 0)
			goto out;
		seen = S.max_seen > S.ack ? S.max_seen : S.ack;
		scan_free(&S);
		S = (struct scan){ .path = S.path, .out = S.out,
				   .flags = (f->rflags & ~OA__RECOVER_DISCARD) |
					    OA__RECOVER_NOEVIDENCE |
					    OA__RECOVER_QUIET };
		r = scan_from_ckpt(f, &S);
		if (r < 0 && errno == EUCLEAN && S.ctl_bad) {
			/* Only the control file's header: rewritten below. */
			r = S.damaged == 1 ? 0 : -1;
			errno = EUCLEAN;
		}
	}
	if (r < 0)
		goto out;
	if (S.clean) {
		ret = 0;   /* nothing to recover, nothing to rebuild */
		goto out;
	}
	if (resolve_members(f, &S) < 0)
		goto out_say;
	if (S.nacc && oa_target_writable(f) < 0)
		goto out;
	for (size_t i = 0; f->xp_probe && i < S.nacc; i++)
		if (S.acc[i].seq == f->xp_probe)
			f->xp_found = true;   /* oa_heal_locked */
	if (S.nacc)
		oa_method_replay(f);
	for (size_t i = 0; i < S.nacc; i++)
		if (replay_one(f, &S, &S.acc[i]) < 0)
			goto out;
	if (settle_members(f, &S) < 0)
		goto out_say;
	top = S.ckpt;
	if (S.max_seen > top)
		top = S.max_seen;
	if (seen > top)
		top = seen;
	bool own = !S.fctl || (f->rflags & OA__RECOVER_ADOPT);
	if (own && l.last_seq > top)
		top = l.last_seq;
	/* I5: flush what was replayed before the checkpoint says so.  After a
	 * failed flush of the control file (I9) its header is written and
	 * flushed again: the disk may lack it behind a page that looks
	 * clean. */
	if (top > S.cckpt || S.fctl || S.ctl_bad ||
	    (l.flags & OA_LIVE_CTLERR)) {
		if (S.nacc && oa_xfdatasync(f->tfd) < 0)
			goto out;
		if (oa_ctl_write_ckpt(f, top) < 0)
			goto out;
		if (S.fctl && !S.copied)
			restamp(f, &S);
	}
	/* Rebuilt; jnamed stays: a set bit records a directory flush that
	 * returned 0, which no crash undoes (only drop_extra_journals removes
	 * journals, and it clears their bits).  ack_seq = top: everything
	 * acknowledged is now covered by the checkpoint (I13). */
	uint64_t named = l.jnamed;
	memset(&l, 0, sizeof(l));
	l.magic = OA_LIVE_MAGIC;
	l.last_seq = l.ckpt_seq = l.ack_seq = top;
	l.jnamed = named;
	ret = oa_live_write(f, &l);
	if (!(f->rflags & OA__RECOVER_DISCARD))
		goto out;
out_say:
	/* what a group's refusal (or, with --discard, what it dropped) says */
	if (S.out && f->rout) {
		int e = errno;
		fflush(S.out);
		fwrite(nbuf + said, 1, nlen - said, f->rout);
		fflush(f->rout);
		errno = e;
	}
out:
	scan_free(&S);
	if (S.out) {
		int e = errno;
		fclose(S.out);
		errno = e;
	}
	free(nbuf);
	return ret;
}

int oa_heal_locked(struct oa_file *f, struct oa_live *lp)
{
	struct oa_live l;
	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	if (!lp)
		lp = &l;
	if (oa_live_read(f, lp) < 0)
		return -1;
	if (lp->dirty_seq == 0 || MUTANT(6))
		return 0;
	/* We hold COMMIT, so whoever set the marker is gone (I10).  If it
	 * led a batch of other processes' commits, recovery says whether the
	 * batch is in, and its members learn it (xcommit.c, X5). */
	uint64_t d = lp->dirty_seq;
	f->xp_probe = d;
	f->xp_found = false;
	if (oa_target_writable(f) < 0 || oa_recover_locked(f) < 0) {
		f->xp_probe = 0;
		return -1;
	}
	f->xp_probe = 0;
	oa_xp_orphans(f, d, f->xp_found);
	return oa_live_read(f, lp);
}

/* For a reader that may not write: is there a committed transaction the
 * file may not hold yet?  1 yes, 0 no, -1 error (EUCLEAN, EPERM, ...). */
int oa_commit_begin(struct oa_file *f, struct oa_live *l, uint64_t *fsize)
{
	if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_WRLCK, 1) < 0)
		return -1;
	return oa_commit_begin_locked(f, l, fsize);
}

int oa_commit_begin_locked(struct oa_file *f, struct oa_live *l,
			   uint64_t *fsize)
{
	if (oa_heal_locked(f, l) < 0 ||
	    (fsize && oa_xfsize(f->tfd, fsize) < 0)) {
		int e = errno;
		oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
		errno = e;
		return -1;
	}
	return 0;
}

void oa_commit_end(struct oa_file *f)
{
	oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
	oa_xp_kick(f);   /* a commit waiting to lead the next batch */
}

int oa_needs_recovery(struct oa_file *f)
{
	struct scan S = { .path = "" };
	int r = scan_from_ckpt(f, &S);
	if (r == -2)
		r = -1;
	if (r == 0)
		r = S.nacc > 0;
	scan_free(&S);
	return r;
}

/* ---- oatomic check ---- */

int oa_check_handle(struct oa_file *f, const char *path, FILE *out)
{
	struct scan S = { .out = out, .path = path };
	int ret = 0, r;

	if (f->cfd < 0) {
		if (out)
			fprintf(out, "%s: clean (no journal)\n", path);
		return 0;
	}
	if (oa_ctl_lock(f, OA_LOCK_COMMIT, F_RDLCK, 1) < 0)
		return -1;
	r = scan_from_ckpt(f, &S);
	if (r < 0 && errno != EUCLEAN && errno != EPERM) {
		int e = errno;
		scan_free(&S);
		oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
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
		/* records of groups: which file decides them, or settles */
		for (size_t i = 0, told = 0; i < S.nacc && told < 8; i++) {
			const struct acc *a = &S.acc[i];
			struct oa_commit_hdr ch;
			struct oa_group g;
			struct oa_gref c;
			unsigned char *body;
			if (!a->role || read_commit(&S, a, &body, &ch) < 0)
				continue;
			oa_group_get(body, &ch, &g);
			oa_gref_get(&g, 0, &c);
			if (a->role == OA_GRP_MEMBER)
				note(&S, "commit %llu is part of group %016llx, "
				     "committed if its coordinator %.*s holds "
				     "the group's commit point",
				     (unsigned long long)a->seq,
				     (unsigned long long)g.gid, (int)c.plen,
				     c.path);
			else
				note(&S, "commit %llu is the commit point of group "
				     "%016llx (%u other file(s), the first %.*s)",
				     (unsigned long long)a->seq,
				     (unsigned long long)g.gid, g.nref,
				     (int)c.plen, c.path);
			free(body);
			told++;
		}
	}
	if (S.ninc && ret < 2)
		note(&S, "a torn last commit (journal %s, seq %llu, LSN %llu) "
		     "will be dropped", jname_of(&S, S.inc[0].j),
		     (unsigned long long)S.inc[0].seq,
		     (unsigned long long)S.inc[0].lsn);
	if (ret == 0)
		note(&S, "clean");
	scan_free(&S);
	oa_ctl_lock(f, OA_LOCK_COMMIT, F_UNLCK, 0);
	return ret;
}
