/*
 * format.h - oatomic's on-disk formats (docs/FORMAT.md is the prose).
 *
 * All integers are little-endian.  Every structure carries a CRC-32C.
 *
 * Control file ".NAME.oa" (format 2), which also holds journal 0:
 *   0      identity (a slot with magic OATOMIDN: the inode it belongs to),
 *          written when the file is made; a control file exactly
 *          OA_CLEAN_SIZE (512) bytes long is CLEAN: nothing to recover
 *   4096   control header slot A, 8192 slot B (checkpoint, era)
 *   12288  live area (volatile state shared by the processes that have the
 *          file open; meaningless after a reboot, rebuilt by recovery)
 *   16384  journal 0's header slot A, 20480 slot B
 *   24576  journal 0's records, each at a 512-byte aligned offset (its LSN)
 *   lock bytes 0 (COMMIT), 1 (APPLY), 2 (OPEN), 3 (OWNER of journal 0):
 *   OFD locks, no data.
 *
 * Extra journal file ".NAME.oaj-K", K >= 1 (handles writing at once):
 *   0      header slot A, 4096 header slot B
 *   8192   records, each at a 512-byte aligned offset (its LSN)
 *   lock byte 0 (OWNER): held by the one handle that writes the journal.
 */
#ifndef OA_FORMAT_H
#define OA_FORMAT_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

#define OA_VERSION        2u
#define OA_SLOT_A         0      /* slots, from their base */
#define OA_SLOT_B         4096
#define OA_SLOT_BYTES     512
#define OA_ID_OFF         0      /* control: identity */
#define OA_ID_CLEAN_SYNCED 2     /* identity's slot_seq: a clean control
				  * file flushed in boot {a, era} (even:
				  * the identity has slot A only) */
#define OA_CLEAN_SIZE     512    /* control: the length that means clean */
#define OA_MARK_LEN       72     /* the file's clean mark (control.c) */
#define OA_CSLOT          4096   /* control: base of its header slots */
#define OA_LIVE_OFF       12288
#define OA_J0_SLOT        16384  /* control: base of journal 0's slots */
#define OA_J0_DATA        24576  /* control: journal 0's first record */
#define OA_CTL_INIT       OA_J0_DATA  /* a control file in use is at least
				       * this long */
#define OA_DATA_START     8192   /* extra journal: first record */
#define OA_REC_ALIGN      512
#define OA_TX_ALIGN       4096   /* each transaction's first record */
#define OA_REC_HDR        64
#define OA_COMMIT_FIXED   32     /* commit body before the ops */
#define OA_OP_BYTES       24

#define OA_ID_MAGIC       "OATOMIDN"
#define OA_CTL_MAGIC      "OATOMCTL"
#define OA_JNL_MAGIC      "OATOMJNL"
#define OA_LIVE_MAGIC     0x31564c414f41ull  /* "OALV1" */
#define OA_REC_MAGIC      0x3152414fu        /* "OAR1" */

#define OA_REC_DATA       1
#define OA_REC_COMMIT     2

#define OA_NO_TRUNC       UINT64_MAX

/* Lock bytes of the control and journal files. */
#define OA_LOCK_COMMIT    0
#define OA_LOCK_APPLY     1
#define OA_LOCK_OPEN      2
#define OA_LOCK_J0        3      /* control: owner of journal 0 */
#define OA_LOCK_JMAKE     4      /* control: making an extra journal */
#define OA_LOCK_OWNER     0      /* extra journal: its owner */

/* Journal sizing: created zero-filled at OA_JRNL_INITIAL so that the commit
 * flush never has to allocate blocks or change the size; a checkpoint runs
 * when the tail passes OA_JRNL_CKPT.  A journal a big transaction grew keeps
 * its size, up to OA_JRNL_RETAIN, while the handle is open, as SQLite keeps
 * its WAL: the next big transaction overwrites blocks and page cache that
 * exist instead of allocating them anew, and this one does not truncate.
 * Beyond OA_JRNL_RETAIN it is cut back after its checkpoint; closing the
 * handle, and a handle taking the journal over, cut it back to
 * OA_JRNL_INITIAL.  Not under the clone method: a generation that placed a
 * record for cloning is always cut back (I12, journal.c), except on Btrfs. */
#define OA_JRNL_INITIAL   (4u << 20)
/* An extra journal is made at OA_XJ_INITIAL (its header pages and the
 * first records' room, zero-filled and flushed before its name exists: I8)
 * and grown as it is used, like journal 0 (oa_journal_grow), up to
 * OA_JRNL_INITIAL: a second writer of a file on a nearly full disk, or
 * under a small file size limit, then needs 64 KiB, not 4 MiB, and writers
 * that start together do not each write and flush 4 MiB first.  Recovery
 * takes an extra journal shorter than this for damage. */
#define OA_XJ_INITIAL     (64u << 10)
#define OA_JRNL_CKPT      (3u << 20)
#define OA_JRNL_RETAIN    (1ull << 30)
#define OA_REC_MAX        (256ull << 20)  /* payload of one data record */
/* Clone method: a data record of at least this many bytes is placed with
 * its payload block-congruent to the file (pad), at or beyond
 * OA_JRNL_INITIAL, so that the apply can clone its whole blocks into the
 * file instead of copying them. */
#define OA_CLONE_MIN      (64u << 10)
/* AUTO's thresholds, where an out-of-place method starts to cost less than
 * the journal (measured with forced methods on loop-mounted XFS and Btrfs,
 * 2026-12-04, docs/BENCHMARKS.md): the clone method pays a flush of the
 * grown journal and an immediate checkpoint (three flushes) and costs 2-5x
 * the journal at 64 KiB, the same at 1 MiB; the exchange of a shadow costs
 * 1.3x the journal at 64 KiB, 0.9x at 256 KiB.  A forced method uses its
 * smallest size (OA_CLONE_MIN, any whole block for exchange). */
#define OA_CLONE_AUTO     (1u << 20)
#define OA_XCHG_AUTO      (256u << 10)
#define OA_XCHG_FIRST     8      /* AUTO: at most this many runs exchanged
				  * as a first transaction (exchange.c) */
#define OA_XCHG_WHOLE_EXT 64     /* a whole replace of more extents than
				  * this is not looked for (exchange.c) */
#define OA_PAD_MAX        (1u << 16)     /* largest block size cloned */

/* Live area: how many journals have a per-journal "newest commit" slot. */
#define OA_LIVE_JMAX      64

static inline void oa_put64(unsigned char *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}
static inline void oa_put32(unsigned char *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, 4);
}
static inline void oa_put16(unsigned char *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, 2);
}
static inline uint64_t oa_get64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return le64toh(v);
}
static inline uint32_t oa_get32(const unsigned char *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return le32toh(v);
}
static inline uint16_t oa_get16(const unsigned char *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return le16toh(v);
}

static inline bool oa_pow2(uint64_t v)
{
	return v && (v & (v - 1)) == 0;
}

static inline uint64_t oa_align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/* A header slot (control or journal; also the control's identity),
 * decoded.
 *   0  magic[8]   8 version u32   12 kind-specific u32 (0)
 *  16  slot_seq   24 a (control: ckpt_seq; journal: gen; identity: the
 *                       first half of the boot id, below)
 *  32  ino        40 igen
 *  48  era (control: chosen when the control file leaves the clean state;
 *      journal: the era its generation was started in; identity: the
 *      boot id's second half)
 * The identity's a and era hold this boot's id (/proc/sys/kernel/random/
 * boot_id) once a flush of the control file in use has returned, and are 0
 * while it is clean (oa_ctl_identity).
 *  56..507 zero
 * 508  crc32c of bytes 0..507 */
struct oa_slot {
	uint64_t slot_seq;
	uint64_t a;
	uint64_t ino;
	uint64_t igen;
	uint64_t era;
};

/* A record header, decoded.
 *   0 magic u32   4 type u16   6 hdr_len u16 (64)
 *   8 gen        16 lsn       24 tx         32 len (payload/body bytes)
 *  40 body_crc u32  44 pad u32 (data: bytes between the header and the
 *  payload, so that a clone-able payload lies block-congruent to its file
 *  offset; 0 in commit records)  48 seq (commit; 0 for data)
 *  56 0 u32      60 hdr_crc u32 = crc32c of bytes 0..59 */
struct oa_rec {
	uint16_t type;
	uint64_t gen, lsn, tx, len, seq;
	uint32_t body_crc;
	uint32_t pad;
};

/* Where a record's payload (data) or body (commit) starts, and where the
 * next record may start. */
static inline uint64_t oa_rec_payload(const struct oa_rec *r)
{
	return r->lsn + 64 + r->pad;
}

/* Commit body:  0 tx_start  8 trunc_min  16 final_size  24 nops
 *              32 ops: { file_off, len, joff } x nops */
struct oa_commit_hdr {
	uint64_t tx_start, trunc_min, final_size, nops;
	uint64_t glen;      /* bytes of the group tail after the ops (0: none) */
};

/* Group tail (oa_commit_group; FORMAT.md, "Several files in one commit"),
 * after the ops of a commit body, covered by its CRC:
 *   0 magic "OAGRP1"  8 gid (random, non-zero)  16 role (1 the
 *   coordinator's record: the group's commit point; 2 a member's record:
 *   committed iff the coordinator holds a complete record of this gid)
 *  20 nref  24 refs, each: 0 ino  8 igen  16 P  18 D  20 the file's path
 *     (P bytes), the journal directory's (D bytes, 0: its home)
 * A coordinator's refs are the other members; a member's, the coordinator.
 * A reader without groups takes the longer body for damage: it refuses,
 * never half-applies a group. */
#define OA_GRP_MAGIC      0x315052474f41ull    /* "OAGRP1" */
#define OA_GRP_COORD      1u
#define OA_GRP_MEMBER     2u
#define OA_GRP_FIXED      24
#define OA_GREF_FIXED     20

/* Live area (control file at OA_LIVE_OFF), in-memory only between
 * processes through the page cache:
 *   0 magic  8 last_seq  16 dirty_seq  24 ckpt_seq
 *  32 jmax[OA_LIVE_JMAX]: newest commit seq in journal K's generation
 * 544 jnamed
 * 552 the seal, 48 bytes, and again at 1024 (two copies in two 512-byte
 *     sectors, both written every time: a write torn by a power cut can
 *     garble one sector, never both):
 *     0 magic "OSEAL1"  8 boot id (16 bytes, /proc/sys/kernel/random/
 *     boot_id)  24 ack_seq: the newest commit whose flush returned (I13)
 *     32 gap_seq: the newest seq handed out to a commit that failed (its
 *     record never became durable, or was revoked): no commit has it
 *     40 0 u32  44 crc32c of bytes 0..43.
 * 600 flags: OA_LIVE_SYNCED once a flush of the control file returned 0
 *     after it left the clean state (its initialisation is durable; bypass
 *     writes and extra journals rely on it); OA_LIVE_XHIGH; OA_LIVE_CTLERR
 *     and OA_LIVE_J0ERR (a flush of the control file failed: what was in
 *     its page cache, header and journal 0's records, may be lost behind
 *     pages that look clean, I9)
 * A SIGKILL keeps the page cache, so a seal of this boot is evidence of
 * what was acknowledged; after a reboot it is stale (FORMAT.md, rule 6). */
struct oa_live {
	uint64_t magic, last_seq, dirty_seq, ckpt_seq;
	uint64_t jmax[OA_LIVE_JMAX];
	/* 544: bit K set: journal K's name was made durable by a directory
	 * flush that returned 0 (I8); journals >= 64 are flushed at every
	 * acquire */
	uint64_t jnamed;
	/* 600: OA_LIVE_SYNCED: the control file's initialisation is durable;
	 * OA_LIVE_XHIGH: a journal numbered 64 or more was used in this era
	 * (no jmax slot: the last close checkpoints durably) */
	uint64_t flags;
	/* 552: the seal, decoded.  ack_seq is 0 unless the seal is valid and
	 * of this boot (seal == OA_SEAL_THIS_BOOT). */
	uint64_t ack_seq, gap_seq;
	int seal;
};
#define OA_SEAL_OFF       552
#define OA_SEAL2_OFF      1024
#define OA_SEAL_BYTES     48
#define OA_SEAL_MAGIC     0x314c4145534fULL    /* "OSEAL1" */
#define OA_SEAL_NONE      0    /* all zero: no evidence (older writer) */
#define OA_SEAL_THIS_BOOT 1    /* valid, written during this boot */
#define OA_SEAL_OLD_BOOT  2    /* valid, from another boot: stale */
#define OA_SEAL_DAMAGED   (-1) /* both copies garbled (not zero) */
#define OA_LIVE_BYTES (OA_SEAL2_OFF + OA_SEAL_BYTES)
#define OA_LIVE_FLAGS_OFF 600
/* The apply generation (I17): a 64-bit word in host byte order at this
 * offset of the live area's page, outside the bytes oa_live_write writes;
 * odd while the library changes the file in place. */
#define OA_LIVE_AGEN_OFF  2048
/* Commits of several processes that share one flush (xcommit.c): slots
 * in the live area's page, beyond the apply generation and outside the
 * bytes oa_live_write writes.  Not durable state, like the rest of the
 * page: a slot is its owner's while the owner holds the control file's
 * lock byte OA_LOCK_XP0 + i, and nobody's otherwise, whatever it holds. */
#define OA_XP_HDR_OFF     2112   /* u32 arrivals (a futex word), u32 a
				  * leader waits for arrivals, u32 how many
				  * the next leader waits for, u32 batches */
#define OA_XP_OFF         2176
#define OA_XP_SLOTS       8
#define OA_XP_SLOT        240
#define OA_XP_OPS         9
#define OA_LOCK_XP0       8      /* control: slot i's owner, byte 8 + i */
/* A slot's state, the 32-bit word at its offset 0 (host byte order):
 * free; published (its owner waits); taken by a leader; and the outcomes
 * the leader (or whoever finds the leader dead) writes. */
enum { OA_XS_FREE, OA_XS_PUB, OA_XS_TAKEN, OA_XS_OK, OA_XS_SELF, OA_XS_EIO };
#define OA_LIVE_SYNCED    1ull
#define OA_LIVE_XHIGH     2ull
#define OA_LIVE_CTLERR    4ull   /* a flush of the control file failed:
				  * its header may be missing on disk */
#define OA_LIVE_J0ERR     8ull   /* ... and journal 0's records written
				  * before it, until journal 0's next
				  * generation */

#endif
