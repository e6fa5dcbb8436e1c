/*
 * record.c - the on-disk encodings (format.h): header slots, record
 * headers, commit bodies.  Nothing else packs or unpacks them.
 */
#include <errno.h>
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
	if (ch->nops > (len - OA_COMMIT_FIXED) / OA_OP_BYTES ||
	    oa_commit_body_len(ch->nops) != len)
		return -1;
	return 0;
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
