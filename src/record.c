/*
 * record.c - the on-disk encodings (format.h): header slots, record
 * headers, commit bodies.  Nothing else packs or unpacks them.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "crc32c.h"
#include "internal.h"
#include "oatomic-private.h"

void oa_slot_encode(unsigned char out[OA_SLOT_BYTES], const char *magic,
		    const struct oa_slot *s)
{
	memset(out, 0, OA_SLOT_BYTES);
	memcpy(out, magic, 8);
	oa_put32(out + 8, OA_VERSION);
	oa_put64(out + 16, s->slot_seq);
	oa_put64(out + 24, s->a);
	oa_put64(out + 32, s->ino);
	oa_put64(out + 40, s->igen);
	oa_put64(out + 48, s->era);
	oa_put32(out + 508, oa_crc32c(0, out, 508));
}

int oa_slot_decode(const unsigned char in[OA_SLOT_BYTES], const char *magic,
		   struct oa_slot *s)
{
	bool zero = true;
	for (int i = 0; i < OA_SLOT_BYTES && zero; i++)
		zero = in[i] == 0;
	if (zero)
		return 1;
	if (memcmp(in, magic, 8) || oa_get32(in + 8) != OA_VERSION ||
	    oa_get32(in + 508) != oa_crc32c(0, in, 508))
		return -1;
	s->slot_seq = oa_get64(in + 16);
	s->a = oa_get64(in + 24);
	s->ino = oa_get64(in + 32);
	s->igen = oa_get64(in + 40);
	s->era = oa_get64(in + 48);
	return 0;
}

static int slot_read1(int fd, off_t off, const char *magic, struct oa_slot *s)
{
	unsigned char b[OA_SLOT_BYTES];
	ssize_t r = oa_xpread(fd, b, sizeof(b), off);
	if (r < 0)
		return -2;
	if (r < (ssize_t)sizeof(b))
		memset(b + r, 0, sizeof(b) - (size_t)r);
	return oa_slot_decode(b, magic, s);
}

int oa_slot_read1(int fd, uint64_t off, const char *magic, struct oa_slot *s)
{
	int r = slot_read1(fd, (off_t)off, magic, s);
	if (r == -2)
		return -1;
	if (r == -1)
		errno = EUCLEAN;
	return r;
}

int oa_slots_read(int fd, uint64_t base, const char *magic, struct oa_slot *s)
{
	struct oa_slot a, b;
	int ra = slot_read1(fd, (off_t)(base + OA_SLOT_A), magic, &a);
	int rb = slot_read1(fd, (off_t)(base + OA_SLOT_B), magic, &b);
	if (ra == -2 || rb == -2)
		return -1;
	if (ra == 0 && rb == 0) {
		*s = a.slot_seq >= b.slot_seq ? a : b;
		return 0;
	}
	if (ra == 0 || rb == 0) {
		*s = ra == 0 ? a : b;
		return 0;
	}
	if (ra == 1 && rb == 1)
		return 1;
	/* One never written, the other torn: the first write of a slot
	 * never made durable (a power cut, or garbage on a disk that is not
	 * power safe); the caller tells whether that can be (2). */
	if ((ra == 1 && rb == -1) || (ra == -1 && rb == 1))
		return 2;
	/* A torn slot write damages only the slot being written, never both:
	 * two unreadable slots are corruption, not a crash. */
	errno = EUCLEAN;
	return -1;
}

int oa_slots_damaged(int fd, uint64_t base, const char *magic)
{
	struct oa_slot s;
	return (slot_read1(fd, (off_t)(base + OA_SLOT_A), magic, &s) == -1) +
	       (slot_read1(fd, (off_t)(base + OA_SLOT_B), magic, &s) == -1);
}

int oa_slot_write(int fd, uint64_t base, const char *magic,
		  const struct oa_slot *s)
{
	unsigned char b[OA_SLOT_BYTES];
	oa_slot_encode(b, magic, s);
	/* slot_seq parity picks the slot: consecutive writes alternate, so the
	 * newest good copy is never the one overwritten. */
	return oa_pwrite_full(fd, b, sizeof(b), (off_t)(base +
			      ((s->slot_seq & 1) ? OA_SLOT_B : OA_SLOT_A)));
}

void oa_rec_encode(unsigned char out[OA_REC_HDR], const struct oa_rec *r)
{
	memset(out, 0, OA_REC_HDR);
	oa_put32(out, OA_REC_MAGIC);
	oa_put16(out + 4, r->type);
	oa_put16(out + 6, OA_REC_HDR);
	oa_put64(out + 8, r->gen);
	oa_put64(out + 16, r->lsn);
	oa_put64(out + 24, r->tx);
	oa_put64(out + 32, r->len);
	oa_put32(out + 40, r->body_crc);
	oa_put32(out + 44, r->type == OA_REC_DATA ? r->pad : 0);
	oa_put64(out + 48, r->seq);
	oa_put32(out + 60, oa_crc32c(0, out, 60));
}

int oa_rec_decode(const unsigned char in[OA_REC_HDR], struct oa_rec *r)
{
	if (oa_get32(in) != OA_REC_MAGIC || oa_get16(in + 6) != OA_REC_HDR ||
	    oa_get32(in + 60) != oa_crc32c(0, in, 60))
		return -1;
	r->type = oa_get16(in + 4);
	r->gen = oa_get64(in + 8);
	r->lsn = oa_get64(in + 16);
	r->tx = oa_get64(in + 24);
	r->len = oa_get64(in + 32);
	r->body_crc = oa_get32(in + 40);
	r->pad = oa_get32(in + 44);
	if (r->pad >= OA_PAD_MAX || (r->type != OA_REC_DATA && r->pad))
		return -1;
	r->seq = oa_get64(in + 48);
	return 0;
}

void oa_commit_encode(unsigned char *body, const struct oa_commit_hdr *ch)
{
	oa_put64(body, ch->tx_start);
	oa_put64(body + 8, ch->trunc_min);
	oa_put64(body + 16, ch->final_size);
	oa_put64(body + 24, ch->nops);
}

void oa_op_put(unsigned char *body, uint64_t i, const struct oa_op *op)
{
	unsigned char *p = body + OA_COMMIT_FIXED + i * OA_OP_BYTES;
	oa_put64(p, op->off);
	oa_put64(p + 8, op->len);
	oa_put64(p + 16, op->joff);
}

int oa_commit_decode(const unsigned char *body, uint64_t len,
		     struct oa_commit_hdr *ch)
{
	if (len < OA_COMMIT_FIXED)
		return -1;
	ch->tx_start = oa_get64(body);
	ch->trunc_min = oa_get64(body + 8);
	ch->final_size = oa_get64(body + 16);
	ch->nops = oa_get64(body + 24);
	ch->glen = 0;
	if (ch->nops > (len - OA_COMMIT_FIXED) / OA_OP_BYTES)
		return -1;
	uint64_t blen = oa_commit_body_len(ch->nops);
	if (blen == len)
		return 0;
	/* a group tail: its references must fill it exactly */
	const unsigned char *t = body + blen;
	uint64_t tl = len - blen, p = OA_GRP_FIXED;
	if (tl < OA_GRP_FIXED || oa_get64(t) != OA_GRP_MAGIC ||
	    oa_get64(t + 8) == 0 ||
	    (oa_get32(t + 16) != OA_GRP_COORD &&
	     oa_get32(t + 16) != OA_GRP_MEMBER))
		return -1;
	uint32_t n = oa_get32(t + 20);
	if (n == 0 || (oa_get32(t + 16) == OA_GRP_MEMBER && n != 1))
		return -1;
	for (uint32_t i = 0; i < n; i++) {
		if (tl - p < OA_GREF_FIXED)
			return -1;
		uint64_t pl = oa_get16(t + p + 16), dl = oa_get16(t + p + 18);
		if (pl == 0 || tl - p - OA_GREF_FIXED < pl + dl ||
		    memchr(t + p + OA_GREF_FIXED, 0, pl + dl))
			return -1;
		p += OA_GREF_FIXED + pl + dl;
	}
	if (p != tl)
		return -1;
	ch->glen = tl;
	return 0;
}

void oa_group_encode(unsigned char *out, uint64_t gid, uint32_t role,
		     const struct oa_gref *refs, uint32_t nref)
{
	unsigned char *p = out + OA_GRP_FIXED;
	oa_put64(out, OA_GRP_MAGIC);
	oa_put64(out + 8, gid);
	oa_put32(out + 16, role);
	oa_put32(out + 20, nref);
	for (uint32_t i = 0; i < nref; i++) {
		oa_put64(p, refs[i].ino);
		oa_put64(p + 8, refs[i].igen);
		oa_put16(p + 16, refs[i].plen);
		oa_put16(p + 18, refs[i].dlen);
		memcpy(p + OA_GREF_FIXED, refs[i].path, refs[i].plen);
		if (refs[i].dlen)
			memcpy(p + OA_GREF_FIXED + refs[i].plen, refs[i].jdir,
			       refs[i].dlen);
		p += oa_gref_len(&refs[i]);
	}
}

int oa_group_get(const unsigned char *body, const struct oa_commit_hdr *ch,
		 struct oa_group *g)
{
	if (!ch->glen)
		return 1;
	const unsigned char *t = body + oa_commit_body_len(ch->nops);
	g->gid = oa_get64(t + 8);
	g->role = oa_get32(t + 16);
	g->nref = oa_get32(t + 20);
	g->refs = t + OA_GRP_FIXED;
	g->rlen = ch->glen - OA_GRP_FIXED;
	return 0;
}

void oa_gref_get(const struct oa_group *g, uint32_t i, struct oa_gref *r)
{
	const unsigned char *p = g->refs;
	for (;;) {
		r->ino = oa_get64(p);
		r->igen = oa_get64(p + 8);
		r->plen = oa_get16(p + 16);
		r->dlen = oa_get16(p + 18);
		r->path = (const char *)p + OA_GREF_FIXED;
		r->jdir = r->dlen ? r->path + r->plen : NULL;
		if (i-- == 0)
			return;
		p += oa_gref_len(r);
	}
}

void oa_op_get(const unsigned char *body, uint64_t i, struct oa_op *op)
{
	const unsigned char *p = body + OA_COMMIT_FIXED + i * OA_OP_BYTES;
	op->off = oa_get64(p);
	op->len = oa_get64(p + 8);
	op->joff = oa_get64(p + 16);
}

uint64_t oa_random64(void)
{
	uint64_t v = 0;
	while (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
		;
	return v ? v : 1;
}

int oa__ctl_ino(int fd, uint64_t *ino)
{
	struct oa_slot s;
	int r = oa_slot_read1(fd, OA_ID_OFF, OA_ID_MAGIC, &s);

	if (r == 1)
		errno = EUCLEAN;   /* a control file is created written */
	if (r != 0)
		return -1;
	*ino = s.ino;
	return 0;
}
