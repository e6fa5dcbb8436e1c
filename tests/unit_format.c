/*
 * unit_format.c - CRC-32C test vectors, header slot and record encoding
 * round trips, and that every single-bit flip of an encoded slot or record
 * header is rejected.
 */
#include "testutil.h"
#include "crc32c.h"
#include "internal.h"

int main(void)
{
	unsigned char slot[OA_SLOT_BYTES], hdr[OA_REC_HDR];
	struct oa_slot s = { .slot_seq = 7, .a = 0x1122334455667788ull,
			     .ino = 42, .igen = 9 }, t;
	struct oa_rec r = { .type = OA_REC_COMMIT, .gen = 0xabcdef, .lsn = 8192,
			    .tx = 3, .len = 56, .seq = 99, .body_crc = 0xdeadbeef },
		      q;
	unsigned char big[100000];

	/* Standard check value, and hardware == software on odd splits. */
	CHECK_EQ(oa_crc32c(0, "123456789", 9), 0xe3069283u);
	CHECK_EQ(oa_crc32c(0, "", 0), 0u);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (unsigned char)(i * 31 + 7);
	uint32_t whole = oa_crc32c(0, big, sizeof(big));
	for (size_t cut = 0; cut < 64; cut++) {
		uint32_t c = oa_crc32c(0, big, cut);
		c = oa_crc32c(c, big + cut, sizeof(big) - cut);
		CHECK_EQ(c, whole);
	}

	oa_slot_encode(slot, OA_JNL_MAGIC, &s);
	CHECK_EQ(oa_slot_decode(slot, OA_JNL_MAGIC, &t), 0);
	CHECK(t.slot_seq == 7 && t.a == s.a && t.ino == 42 && t.igen == 9);
	CHECK_EQ(oa_slot_decode(slot, OA_CTL_MAGIC, &t), -1);  /* other magic */
	for (int bit = 0; bit < OA_SLOT_BYTES * 8; bit++) {
		slot[bit / 8] ^= (unsigned char)(1 << (bit % 8));
		CHECKF(oa_slot_decode(slot, OA_JNL_MAGIC, &t) != 0, "bit %d", bit);
		slot[bit / 8] ^= (unsigned char)(1 << (bit % 8));
	}
	memset(slot, 0, sizeof(slot));
	CHECK_EQ(oa_slot_decode(slot, OA_JNL_MAGIC, &t), 1);   /* never written */

	oa_rec_encode(hdr, &r);
	CHECK_EQ(oa_rec_decode(hdr, &q), 0);
	CHECK(q.type == r.type && q.gen == r.gen && q.lsn == r.lsn &&
	      q.tx == r.tx && q.len == r.len && q.seq == r.seq &&
	      q.body_crc == r.body_crc);
	for (int bit = 0; bit < 60 * 8; bit++) {
		hdr[bit / 8] ^= (unsigned char)(1 << (bit % 8));
		CHECKF(oa_rec_decode(hdr, &q) != 0, "bit %d", bit);
		hdr[bit / 8] ^= (unsigned char)(1 << (bit % 8));
	}

	/* Slot files: a torn newest slot falls back to the older one; two bad
	 * slots are damage. */
	const char *p = tu_path("slots");
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0);
	s.slot_seq = 4;
	CHECK_OK(oa_slot_write(fd, 0, OA_JNL_MAGIC, &s));      /* slot A */
	s.slot_seq = 5;
	s.a = 555;
	CHECK_OK(oa_slot_write(fd, 0, OA_JNL_MAGIC, &s));      /* slot B */
	CHECK_EQ(oa_slots_read(fd, 0, OA_JNL_MAGIC, &t), 0);
	CHECK(t.slot_seq == 5 && t.a == 555);
	CHECK(pwrite(fd, "garbage", 7, OA_SLOT_B + 100) == 7);
	CHECK_EQ(oa_slots_read(fd, 0, OA_JNL_MAGIC, &t), 0);
	CHECK(t.slot_seq == 4);
	CHECK(pwrite(fd, "garbage", 7, OA_SLOT_A + 100) == 7);
	errno = 0;
	CHECK_EQ(oa_slots_read(fd, 0, OA_JNL_MAGIC, &t), -1);
	CHECK_EQ(errno, EUCLEAN);
	close(fd);
	printf("format: crc vectors, slot and record round trips, bit flips\n");
	return 0;
}
