/*
 * internal.h - the handle and the functions the layers share.
 *
 * The layers are listed below, before their calls (docs/ARCHITECTURE.md).
 */
#ifndef OA_INTERNAL_H
#define OA_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "oatomic.h"
#include "format.h"
#include "index.h"
#include "sys.h"
#include "oatomic-private.h"

#define OA_BUF_BYTES (1u << 20)   /* bounce buffer for copies and scans */
/* A commit that remaps blocks into the file (the exchange; the clone
 * method's apply) leaves those ranges out of the page cache: the kernel
 * drops the file's pages there, and the new blocks' pages were the
 * shadow's or the journal's.  A plain write would have left them cached,
 * and programs read what they just wrote: SQLite reads a page before it
 * changes it, and after a 64 MiB load placed by cloning on XFS its small
 * transactions went 1.04-1.05x WAL's latency (the load through the
 * journal) -> 1.28-1.38x, most reads going to the disk.  So the first
 * OA_REFILL_MAX bytes of what a commit remapped are read back in the
 * background (POSIX_FADV_WILLNEED), after APPLY is let go - when it
 * remapped at least OA_REFILL_MIN: reading back a small replacement costs
 * about what it saves (a 1 MiB file replaced whole, one-shot, on XFS:
 * 2.6-3.1 -> 3.1-3.4 ms), where a big load's later misses are many. */
#define OA_REFILL_MAX (64ull << 20)
#define OA_REFILL_MIN (4ull << 20)

/* The read-back of LEN bytes at OFF of FD a commit remapped (above). */
static inline void oa_refill(int fd, uint64_t off, uint64_t len)
{
	if (len >= OA_REFILL_MIN)
		oa_xprefetch(fd, off, len < OA_REFILL_MAX ? len : OA_REFILL_MAX);
}

struct oa_gref;

struct oa_file {
	/* descriptors */
	int tfd;            /* the file itself */
	int dfd;            /* directory of the control and journal files */
	int tdirfd;         /* directory of the file (for fsync after create) */
	int cfd;            /* control file, -1 if none (read-only, never used) */
	int jfd;            /* this handle's journal, -1 until the first change */
	int acc;            /* O_RDONLY, O_WRONLY or O_RDWR as asked */
	bool tfd_rw;        /* tfd open for writing */
	unsigned forkgen;   /* oa_fork_gen() at open: another one means the
			     * handle was inherited through fork (file.c) */
	bool latched;       /* a flush failed: every call but close is EIO */
	bool cfd_rw;
	bool ctl_unsafe;    /* the control file is writable by others than the
			     * file's writers: journal 0 is not replayed */
	int cfd_err;        /* why the control file is read-only (EACCES, EROFS) */
	/* the locks this handle holds on f->cfd (oa_ctl_lock): two bits per
	 * lock byte, 1 shared, 2 exclusive; 0 when oa_ctl_open sets cfd */
	unsigned held;
	bool unmarked;           /* the clean mark removed in this hold of
				  * COMMIT (oa_unmark): only a holder of
				  * COMMIT sets it, so once is enough */
	unsigned char *live;  /* the live area, mapped shared (NULL: use I/O) */
	bool live_tried;      /* a reader mapped it once it found it in use
			       * (file.c, read_lock), or tried to */

	char *prefix;       /* ".NAME" or ".NAME.<ino>" (journal_dir given) */
	uint64_t ino, igen; /* identity of the file, kept in every header */
	dev_t dev;          /* its file system (st_dev) */
	uint64_t cino, cigen; /* ... and as the control file's slot has it */
	unsigned rflags;    /* recovery: OA__RECOVER_* (oatomic-private.h) */
	FILE *rout;         /* recovery: findings go here (may be NULL) */
	const char *rpath;  /* recovery: the path the findings name */
	uid_t uid;
	gid_t gid;
	mode_t mode;
	struct oa_options opt;

	/* journal state: journal 0 lives in the control file (its slots at
	 * OA_J0_SLOT, records from OA_J0_DATA, owner lock OA_LOCK_J0 of the
	 * control file); extra journals K >= 1 are files of their own */
	int jidx;
	uint64_t jbase;     /* where the journal's header slots are */
	uint64_t jdata;     /* its first LSN */
	int jlock;          /* its owner lock byte */
	uint64_t era;       /* the control file's era (format.h) */
	bool ctl_synced;    /* this handle flushed the control file while it
			     * was clean (its clean state is durable) */
	unsigned ncommit;   /* commits into its journal since it was taken */
	bool jhdr;          /* journal 0's header pages allocated since it
			     * was taken (oa_journal_grow) */
	bool jgrow_fail;    /* its room ahead could not be made: not tried
			     * again at every commit */
	uint64_t fsize_max; /* RLIMIT_FSIZE at acquire (journal writes stop
			     * below it: EFBIG, never SIGXFSZ) */
	uint64_t jroom_max; /* the most room ahead the file system's free
			     * space allows it: an eighth at acquire, a
			     * quarter at each growth (journal.c) */
	uint64_t gen;       /* generation (random) of the journal's records */
	uint64_t jslot_seq; /* newest header slot written */
	uint64_t pos;       /* next free LSN */
	uint64_t tx_id;     /* current transaction number in this generation */
	uint64_t tx_start;  /* LSN of the current transaction's first record */
	uint64_t jcommit_end; /* end of the newest commit record written (or
			     * tried) in this generation: beyond it the
			     * journal holds only data of transactions never
			     * committed; UINT64_MAX: not known (a journal not
			     * yet reset by this handle) */

	/* open data record: sequential writes extend it */
	bool rec_open;
	bool rec_big;       /* placed for cloning (pad, beyond the ring) */
	bool jplaced;       /* this generation placed one: recycling cuts the
			     * journal back to its ring (I12) ... */
	bool jcow;          /* ... unless the journal's data is never
			     * overwritten in place (oa_journal_cow) */
	bool rec_shut;      /* takes no more writes (a failed one) */
	uint32_t rec_pad;
	uint64_t rec_lsn, rec_len, rec_next_off;
	uint64_t rec_stream; /* bytes of the contiguous run ending at
			      * rec_next_off (a stream grown big is placed) */
	/* writeback started behind big writes (sys.h): journal, file, shadow */
	struct oa_wb jwb, twb, swb;

	/* methods (method.c): what this handle may use, resolved at open */
	int method;         /* enum oa_method in use (AUTO resolved) */
	bool may_clone;     /* clone whole blocks of big records at apply */
	bool may_kernel;    /* single aligned writes go down as RWF_ATOMIC */
	bool may_exchange;  /* big block runs go to the shadow, XFS exchange */
	bool xchg_all;      /* forced: every whole block goes to the shadow */
	/* [0, hole_free) of the file had no hole when the live area's last
	 * commit was hole_seq (commit.c reserve_holes); hole_known: that was
	 * looked up */
	uint64_t hole_free, hole_seq;
	bool hole_known;
	bool shadow_big;    /* the transaction put a run of OA_XCHG_AUTO or
			     * more into the shadow */
	bool xchg_first;    /* AUTO: the handle's first transaction, whole
			     * blocks of it to the shadow while the control
			     * file is clean (oa_xchg_wants) */
	uint32_t clone_min; /* smallest data record placed for cloning */
	bool fs_cow;        /* Btrfs: datacow files never overwrite in place */
	bool blk_lazy;      /* blk and may_clone not looked up yet */
	bool method_lazy;   /* oa_method_resolve not run yet (AUTO) */
	bool home_refresh;  /* oa_home_refresh due at the first change */
	/* The clean mark (control.c, M1-M3): FAST, opened on a valid mark
	 * (MARK, its value), with no control file, directory or lock yet:
	 * the rest of the open is done by the first call that needs it
	 * (file.c), from FAST_PATH and FAST_FLAGS. */
	bool fast;
	int fast_flags;
	char *fast_path;
	unsigned char mark[OA_MARK_LEN];
	int sfd;            /* exchange: shadow (O_TMPFILE), or -1 */
	bool shadowed;      /* the transaction has bytes in the shadow */
	bool shadow_dirty;  /* the shadow holds blocks (emptied after use) */
	bool shadow_bad;    /* a write into the shadow failed part way: it may
			     * hold bytes no pending extent names, so the
			     * transaction commits through the journal */
	uint32_t blk;       /* file-system block size (clone alignment) */
	uint32_t awu_min, awu_max;  /* the file's atomic write unit */
	int dio_fd;         /* the file opened O_DIRECT (kernel method), or -1 */
	/* kernel method: a transaction that is so far one eligible write is
	 * staged here (at most OA_STAGE_MAX bytes) instead of the journal */
	bool staged;
	uint64_t st_off, st_len;
	void *st_buf;
	uint32_t rec_crc;

	/* the pending transaction */
	struct oa_index *ix;
	bool pending;       /* anything at all to commit */
	bool has_trunc;
	uint64_t t_min;     /* smallest length truncated to */
	uint64_t t_last;    /* last length truncated to */
	uint64_t txn_bytes; /* bytes written into the journal by this txn */
	uint64_t size_ok;   /* file sizes up to this are known to be allowed */
	bool rec_hdr_ok;    /* the open record's header on disk is current */

	unsigned char *buf; /* OA_BUF_BYTES */

	struct oa_map *map; /* oa_mmap's mappings (map.c), NULL: none */

	/* groups: handed down from file.c to recovery (recover.c), which
	 * cannot open another file itself.  group_decided: does the
	 * coordinator R hold group GID's commit point?  1 yes (durable), 0
	 * no, -1 error (ESTALE: R names another file now).  group_settle:
	 * recover member R of group GID.  0, or -1 with errno. */
	int (*group_decided)(struct oa_file *f, const struct oa_gref *r,
			     uint64_t gid);
	int (*group_settle)(struct oa_file *f, const struct oa_gref *r,
			    uint64_t gid);
	bool jdir;          /* opened with oa_options.journal_dir */
	bool blkdev;        /* a block device: ino is its identity (home.c),
			     * its journal in jdir, no truncate, no group */
	/* coordinators of groups this handle's recovery found decided (their
	 * strings malloc'd): recovered in turn once its locks are released,
	 * so that recovery through a member settles the whole group */
	struct oa_gref *gco;
	size_t ngco;
	struct oa_gc *gc;   /* group commit (gcommit.c): the file's entry in
			     * this process, once the handle committed */
	bool gc_off;        /* never batched: a combiner itself */
	/* recovery's answer for oa_heal_locked: was commit xp_probe among
	 * the complete ones it found (xcommit.c) */
	uint64_t xp_probe;
	bool xp_found;
};

/*
 * Debug builds (-DOA_DEBUG, the sanitizer build) check the preconditions
 * that the comments state: which locks a *_locked function's caller holds,
 * what state the handle's transaction is in.  Other builds compile the
 * checks away.
 */
#ifdef OA_DEBUG
#define OA_ASSERT(c) \
	((c) ? (void)0 : oa_assert_fail(#c, __FILE__, __LINE__, __func__))
#else
#define OA_ASSERT(c) ((void)0)
#endif

/* Planted bugs (tests/mutants.sh; the list at the end of this file). */
#ifndef OA_MUTANT
#define OA_MUTANT 0
#endif
#define MUTANT(n) (OA_MUTANT == (n))

/* Lock or unlock BYTE of the control file (oa_lock), keeping f->held. */
static inline int oa_ctl_lock(struct oa_file *f, int byte, short type,
			      int wait)
{
	int r;
	if (byte == OA_LOCK_COMMIT && !MUTANT(65))
		f->unmarked = false;
	r = oa_lock(f->cfd, byte, type, wait);
	if (r == 0 || type == F_UNLCK) {
		f->held &= ~(3u << (2 * byte));
		if (r == 0 && type != F_UNLCK)
			f->held |= (type == F_WRLCK ? 2u : 1u) << (2 * byte);
	}
	return r;
}

/* Where a journal is checkpointed and started over after a commit: at
 * OA_JRNL_CKPT, or at half the process's file size limit (RLIMIT_FSIZE),
 * or at 3/4 of the room the free space allowed it, where that is lower,
 * so that the next transactions fit below it and do not take the space
 * other journals need. */
static inline uint64_t oa_jrnl_ckpt(const struct oa_file *f)
{
	uint64_t c = f->fsize_max / 2 < OA_JRNL_CKPT ? f->fsize_max / 2
						     : OA_JRNL_CKPT;
	return f->jroom_max / 4 * 3 < c ? f->jroom_max / 4 * 3 : c;
}

/* Does F hold BYTE of its control file exclusively? */
static inline bool oa_holds_excl(const struct oa_file *f, int byte)
{
	return f->cfd >= 0 && ((f->held >> (2 * byte)) & 2u);
}

/*
 * The handle's pending transaction is in one of these states (derived from
 * its fields, so that no state is stored twice):
 *   OA_TXN_EMPTY    nothing pending;
 *   OA_TXN_STAGED   one write held in memory for the kernel method
 *                   (f->st_*), nothing in the journal or the shadow;
 *   OA_TXN_JOURNAL  changes in the journal's records and the index, maybe
 *                   truncates;
 *   OA_TXN_SHADOW   as JOURNAL, and whole blocks in the exchange method's
 *                   shadow.
 * oa_txn_state checks, in debug builds, that the fields agree.
 */
enum oa_txn_state { OA_TXN_EMPTY, OA_TXN_STAGED, OA_TXN_JOURNAL,
		    OA_TXN_SHADOW };
static inline enum oa_txn_state oa_txn_state(const struct oa_file *f)
{
	if (!f->pending) {
		OA_ASSERT(!f->staged && !f->shadowed && !f->has_trunc);
		return OA_TXN_EMPTY;
	}
	if (f->staged) {
		OA_ASSERT(!f->shadowed && !f->has_trunc &&
			  oa_index_count(f->ix) == 0);
		return OA_TXN_STAGED;
	}
	return f->shadowed ? OA_TXN_SHADOW : OA_TXN_JOURNAL;
}

/* f->buf, the bounce buffer, is allocated on first need: a handle that
 * only opens, reads and closes a clean file never pays for it. */
static inline int oa_need_buf(struct oa_file *f)
{
	if (!f->buf && !(f->buf = malloc(OA_BUF_BYTES))) {
		errno = ENOMEM;
		return -1;
	}
	return 0;
}

/*
 * The layers, from the bottom (docs/ARCHITECTURE.md; tests/layers.sh
 * checks that every call between files goes down this list):
 *
 *   sys.c, crc32c.c, index.c   the seam, checksums, the pending index
 *   record.c      on-disk encodings: header slots, records, commit bodies
 *   ioinfo.c      what the file system can do (probed, cached)
 *   control.c     the control file: identity, checkpoint, live area, names
 *   method.c      which method a handle uses
 *   clone.c       the clone method's primitives (used by apply)
 *   apply.c       writing a commit into the file
 *   checkpoint.c  checkpoint, and the last close's clean state
 *   recover.c     scanning journals, replay, healing, check; the
 *                 opening and closing step of every commit
 *   home.c        where a file's control file lives
 *   journal.c     a handle's journal: acquire, append, recycle; its
 *                 pending transaction
 *   commit.c      what the bypassing methods must check first, and the
 *                 journal method's commit
 *   kernel.c, exchange.c   the methods that bypass the journal
 *   map.c         the handle's view: writes into the transaction, and
 *                 the mappings whose stores are pending like them
 *   file.c        the public calls
 */

/* ---- record.c: on-disk encodings ---- */
void oa_slot_encode(unsigned char out[OA_SLOT_BYTES], const char *magic,
		    const struct oa_slot *s);
/* 0 valid, -1 invalid (bad magic, version or crc), 1 all zeros. */
int oa_slot_decode(const unsigned char in[OA_SLOT_BYTES], const char *magic,
		   struct oa_slot *s);
/* Read both slots of FD at BASE (+0, +4096); pick the valid one with the
 * newest slot_seq.  Returns 0, 1 (neither slot ever written: all zeros or
 * file too short), 2 (one zero, one unreadable: a first slot write that
 * never became durable, or damage), or -1 with EUCLEAN (both unreadable:
 * damaged) or the read error. */
int oa_slots_read(int fd, uint64_t base, const char *magic, struct oa_slot *s);
/* One slot at OFF (the control's identity): 0, 1 (zeros), -1 (EUCLEAN or
 * the read error). */
int oa_slot_read1(int fd, uint64_t off, const char *magic, struct oa_slot *s);
/* How many of FD's two slots at BASE are written but unreadable (0..2). */
int oa_slots_damaged(int fd, uint64_t base, const char *magic);
/* Write S into the slot at BASE that does not hold the newest copy (by
 * slot_seq parity) so a torn write can only ever damage the older one. */
int oa_slot_write(int fd, uint64_t base, const char *magic,
		  const struct oa_slot *s);

void oa_rec_encode(unsigned char out[OA_REC_HDR], const struct oa_rec *r);
/* 0 if the header is well formed with a good crc, -1 otherwise. */
int oa_rec_decode(const unsigned char in[OA_REC_HDR], struct oa_rec *r);

/* The commit record's body (format.h): the fixed part, then NOPS ops.
 * oa_commit_body_len is its length; oa_commit_encode writes the fixed part
 * and oa_op_put op I.  oa_commit_decode reads the fixed part of a body of
 * LEN bytes: 0, or -1 when LEN does not fit its op count and a well-formed
 * group tail; oa_op_get reads op I of a body so checked. */
struct oa_op {
	uint64_t off, len, joff;
};
static inline uint64_t oa_commit_body_len(uint64_t nops)
{
	return OA_COMMIT_FIXED + nops * OA_OP_BYTES;
}
void oa_commit_encode(unsigned char *body, const struct oa_commit_hdr *ch);
void oa_op_put(unsigned char *body, uint64_t i, const struct oa_op *op);
int oa_commit_decode(const unsigned char *body, uint64_t len,
		     struct oa_commit_hdr *ch);
void oa_op_get(const unsigned char *body, uint64_t i, struct oa_op *op);
/* A commit body's group tail (format.h).  A reference names a member (or
 * the coordinator) by inode and by the path it was committed through;
 * path and jdir point into the body and are not NUL-terminated. */
struct oa_gref {
	uint64_t ino, igen;
	const char *path, *jdir;
	uint16_t plen, dlen;
};
struct oa_group {
	uint64_t gid;
	uint32_t role, nref;
	const unsigned char *refs;   /* the first reference */
	uint64_t rlen;               /* bytes of references */
};
static inline uint64_t oa_gref_len(const struct oa_gref *r)
{
	return OA_GREF_FIXED + (uint64_t)r->plen + r->dlen;
}
/* Write the tail (OA_GRP_FIXED + the refs' lengths bytes) at OUT. */
void oa_group_encode(unsigned char *out, uint64_t gid, uint32_t role,
		     const struct oa_gref *refs, uint32_t nref);
/* Decode the group tail of a body decoded by oa_commit_decode (ch->glen
 * bytes after its ops): 0, or 1 when it has none. */
int oa_group_get(const unsigned char *body, const struct oa_commit_hdr *ch,
		 struct oa_group *g);
/* Reference I (< g->nref) of a tail oa_group_get returned. */
void oa_gref_get(const struct oa_group *g, uint32_t i, struct oa_gref *r);
uint64_t oa_random64(void);

/* ---- ioinfo.c: what the file system can do ---- */
/* What the file system of F can do (probed with real calls, cached per file
 * system; see ioinfo.c). */
struct oa_caps {
	unsigned long fs_magic;
	uint32_t blk;                 /* statfs f_bsize */
	uint32_t dio_mem, dio_off;    /* STATX_DIOALIGN, 0 none */
	uint32_t awu_min, awu_max, awu_segs;  /* STATX_WRITE_ATOMIC, 0 none */
	/* largest atomic write the device does itself (ioinfo.c,
	 * dev_atomic_max); beyond it the file system writes out of place */
	uint32_t awu_hw;
	bool reflink, exchange, rwf_atomic;
	/* the file system can clone or exchange, but the journal directory
	 * is on another one: reflink and exchange were cleared (ioinfo.c) */
	bool xdev;
};
int oa_caps_get(struct oa_file *f, struct oa_caps *c);

/* ---- control.c: the control file ---- */
int oa_ctl_open(struct oa_file *f, bool create);
/* Make the control file leave the clean state (OA_CLEAN_SIZE bytes):
 * identity, header slot with a new era, live area, all unflushed (the
 * first commit flush carries them; OA_LIVE_SYNCED says when it has).
 * Reads f->era of a control already in use.  Caller holds COMMIT. */
int oa_ctl_init_locked(struct oa_file *f);
/* The control file's state since it left the clean one (or its clean
 * state) is durable: flush it unless the live area (or the handle, for a
 * clean one) says that was done.  For writes that do not go through
 * journal 0 (extra journals, the kernel and exchange methods), which
 * recovery must not undo with commits an undurable truncation or
 * initialisation left behind.  Caller holds COMMIT. */
int oa_ctl_sync_locked(struct oa_file *f);
/* A flush of the control file returned 0 (journal 0's commit flush, one
 * of its own): L, the live area as the caller will write it, says so, and
 * the identity gets this boot's id.  Caller holds COMMIT. */
void oa_ctl_mark_synced(struct oa_file *f, struct oa_live *l);
/* Write the control file's identity (F's inode); IN_USE: with this boot's
 * id (it left the clean state in this boot), else without (clean). */
int oa_ctl_identity(struct oa_file *f, bool in_use);
/* Does identity S carry this boot's id (a, era)? */
bool oa_id_this_boot(const struct oa_slot *s);
int oa_live_read(struct oa_file *f, struct oa_live *l);
/* Map the live area, once the handle holds OPEN (the last handle cuts the
 * control file back under the mapping otherwise) and the file is in use. */
void oa_ctl_map(struct oa_file *f);
void oa_ctl_unmap(struct oa_file *f);
/* I17 (control.c): APPLY exclusive with the apply generation odd, for a
 * change of the file in place; and back.  oa_apply_unlock keeps errno. */
int oa_apply_lock(struct oa_file *f);
void oa_apply_unlock(struct oa_file *f);
/* A read without APPLY: true (and *GEN) where it may start - the
 * generation even, no commit in flight, the live area mapped; after the
 * read, oa_agen_same says whether it stands. */
bool oa_agen_peek(struct oa_file *f, uint64_t *gen);
bool oa_agen_same(struct oa_file *f, uint64_t gen);
int oa_live_write(struct oa_file *f, const struct oa_live *l);
/* A slot of the live area (format.h, OA_XP_*; xcommit.c).  state is the
 * futex word its owner sleeps on. */
struct oa_xslot {
	_Atomic uint32_t state;  /* OA_XS_* */
	uint16_t nops, jidx;     /* its extents; the owner's journal */
	_Atomic uint64_t seq;    /* the batch's seq, set before its marker */
	uint64_t jino;           /* its journal's inode (journal 0: 0) */
	struct { uint64_t off, len, joff; } op[OA_XP_OPS];
};
struct oa_xhdr {
	_Atomic uint32_t arrivals, gathering, last, batches;
};
_Static_assert(sizeof(struct oa_xslot) <= OA_XP_SLOT, "xp slot");
_Static_assert(OA_XP_HDR_OFF >= OA_LIVE_AGEN_OFF + 8 &&
	       OA_XP_HDR_OFF + sizeof(struct oa_xhdr) <= OA_XP_OFF, "xp hdr");
_Static_assert(OA_XP_OFF + OA_XP_SLOTS * OA_XP_SLOT <= 4096, "xp slots");
_Static_assert(OA_XP_OFF >= OA_LIVE_AGEN_OFF + 8 &&
	       OA_XP_OFF >= OA_LIVE_BYTES, "xp slots overlap");
/* Slot I of F's live area (F maps it writable), NULL otherwise. */
struct oa_xslot *oa_xp_slot(struct oa_file *f, int i);
struct oa_xhdr *oa_xp_hdr(struct oa_file *f);
void oa_xp_wake(struct oa_xslot *s);
/* A futex word in the shared page: wake one waiter; wait while it holds V,
 * at most NS nanoseconds (a signal or a spurious wake-up returns early). */
void oa_futex_wake(_Atomic uint32_t *w);
void oa_futex_wait(_Atomic uint32_t *w, uint32_t v, long ns);
/* Under COMMIT, after a dead committer's recovery (or finding one gone
 * before its marker): every slot a dead leader took is settled - OK if
 * its batch was commit SEQ and COMMITTED says recovery found it complete,
 * SELF otherwise - and its owner woken. */
void oa_xp_orphans(struct oa_file *f, uint64_t seq, bool committed);
/* After COMMIT is let go: wake one owner waiting to lead. */
void oa_xp_kick(struct oa_file *f);
/* This boot's id (the live area's seal); false where it cannot be known. */
bool oa_boot_id(unsigned char out[16]);
/* Durable checkpoint record: every commit with seq <= CKPT is durable in the
 * file.  Flushes the control file.  0; -1 error; -2 (ENOSPC, EDQUOT) the
 * header slot's write got no block: nothing was flushed, it may be tried
 * again once space is freed. */
int oa_ctl_write_ckpt(struct oa_file *f, uint64_t ckpt);
/* 0 with the checkpoint; 1: the header slots are all zero (the control
 * file's initialisation never became durable: nothing was committed in
 * it), *CKPT 0; -1 error (EUCLEAN: damaged).  Sets f->cino, f->cigen and
 * f->era from the slot. */
int oa_ctl_read_ckpt(struct oa_file *f, uint64_t *ckpt, bool *foreign);
int oa_name(struct oa_file *f, char *out, size_t n, int kind, int idx);
#define OA_NAME_CTL 0
#define OA_NAME_JNL 1
/* The mode of the library's files: the file's read/write bits, and the
 * owner's own (oa_check_safe). */
mode_t oa_aux_mode(const struct oa_file *f);
/* Check an opened control or journal file: a regular file owned by the
 * file's owner, root, us or another user who may write the file, with no
 * write permission the file lacks; read permission it lacks is taken away on
 * the way where we may (ours, or root).  EPERM. */
int oa_check_safe(struct oa_file *f, int fd);
/* More than one name: a sidecar the library did not make so (a hard link
 * planted at its name), never written through (control.c ctl_shared). */
bool oa_multi_linked(int fd);
bool oa_xchg_scattered(const struct oa_file *f);
/* Narrow a library file of ours (or any, as root) to oa_aux_mode(), then
 * oa_check_safe() it: for one whose write bits came from the file's mode of
 * before, and whose contents are trusted by other means. */
int oa_narrow(struct oa_file *f, int fd);
/* Create a file in f->dfd atomically: written by FILL in a temporary, then
 * linked under NAME (fails with EEXIST if it appeared meanwhile), and the
 * directory flushed (I8). */
int oa_create_atomic(struct oa_file *f, const char *name,
		     int (*fill)(struct oa_file *f, int fd, void *arg),
		     void *arg);
/* The same in steps: oa_create_prep makes the unnamed file (O_TMPFILE, or
 * a unique temporary name left in TMP where that is not supported), with
 * the file's owner and no wider mode, filled by FILL and flushed (I8: its
 * contents are durable before it has a name): its descriptor, or -1.
 * oa_create_link gives it NAME (-1 with EEXIST where NAME exists: it stays
 * unnamed, for another name); the caller flushes the directory before
 * anything relies on the name.  oa_create_drop closes one never named. */
#define OA_TMP_NAME 32
int oa_create_prep(struct oa_file *f,
		   int (*fill)(struct oa_file *f, int fd, void *arg),
		   void *arg, char tmp[OA_TMP_NAME]);
int oa_create_link(struct oa_file *f, int fd, char tmp[OA_TMP_NAME],
		   const char *name);
void oa_create_drop(struct oa_file *f, int fd, char tmp[OA_TMP_NAME]);

/* ---- method.c: which method a handle uses ---- */
#define OA_STAGE_MAX (1u << 20)
/* Resolve f->opt.method into what the handle may use.  EOPNOTSUPP for a
 * forced method the file system cannot do. */
int oa_method_resolve(struct oa_file *f);
/* AUTO, not forced by OATOMIC_METHOD: a writer's handle resolves it at its
 * first change (f->method_lazy), not at open. */
bool oa_method_deferred(const struct oa_file *f);
/* A handle that only recovers (or reads): replaying a clone record clones
 * where the file system lets it, else copies; what the file system can do
 * is looked up only once there is something to replay (oa_method_replay),
 * not at every open. */
void oa_method_recovery(struct oa_file *f);
void oa_method_replay(struct oa_file *f);
/* The method AUTO uses on a file system that can do C. */
int oa_method_auto(const struct oa_file *f, const struct oa_caps *c);
/* What oa_ioinfo reports: the handle's method, or what a writer would use. */
int oa_method_of(const struct oa_file *f, const struct oa_caps *c);
/* ---- clone.c: the clone method's primitives ---- */
/* The clone part of an op [OFF, OFF+LEN) whose bytes are at JOFF in a
 * journal: whole blocks [*A, *B) that may be cloned.  False: copy it all. */
bool oa_clone_span(const struct oa_file *f, uint64_t off, uint64_t len,
		   uint64_t joff, uint64_t *a, uint64_t *b);
/* Is JFD's data always written out of place (Btrfs, not nodatacow)?  Then
 * the journal cannot write over a block the file still maps (I12). */
bool oa_journal_cow(const struct oa_file *f, int jfd);
/* Clone [A, B) of the file from JOFF of JFD.  0; 1 cloning does not work
 * here (the caller copies; the handle stops trying); -1 error. */
int oa_clone_in(struct oa_file *f, int jfd, uint64_t a, uint64_t b,
		uint64_t joff);
/* ---- apply.c: a commit into the file ---- */
/* Apply one commit (already validated), whose BODY is in journal JFD, into
 * f->tfd, under APPLY. */
int oa_apply(struct oa_file *f, int jfd, const struct oa_commit_hdr *ch,
	     const unsigned char *body);
/* Make f->tfd writable (a reader that recovers reopens the inode). */
int oa_target_writable(struct oa_file *f);

/* ---- checkpoint.c ---- */
/* Every applied commit durable in the file, then the checkpoint record
 * (I5).  Caller holds COMMIT and has healed. */
int oa_checkpoint_locked(struct oa_file *f);
/* The two halves: the file's flush (a failure sets the dirty marker, I9),
 * and the checkpoint record of a file whose every applied commit a flush
 * that returned 0 made durable. */
int oa_flush_target_locked(struct oa_file *f);
int oa_checkpoint_flushed_locked(struct oa_file *f);
/* The last handle closes (or recovery ends alone): the file holds every
 * commit durably, extra journals go, the control file is cut back to its
 * clean length.  Caller holds OPEN exclusive and COMMIT, and has healed. */
int oa_clean_locked(struct oa_file *f);

/* ---- xcommit.c: commits of several processes share a flush ---- */
/* The members a leader took (X1-X6 there), on the leader's stack. */
struct oa_xp_batch {
	int n;
	unsigned char slot[OA_XP_SLOTS];
	struct oa_index *saved;   /* the leader's own extents, to restore */
	uint64_t saved_bytes;
};
/* COMMIT for F's journal commit (its record staged: no open record),
 * healed, L and FSIZE as oa_commit_begin gives them; other processes'
 * waiting commits merged into F's transaction (B).  0: COMMIT held, the
 * caller commits and ends with oa_xp_end then oa_commit_end; 1: a batch
 * committed F's transaction (dropped); -1 with errno. */
int oa_xp_begin(struct oa_file *f, struct oa_live *l, uint64_t *fsize,
		struct oa_xp_batch *b);
/* The batch's seq, before the commit's dirty marker (X4). */
void oa_xp_seq(struct oa_file *f, struct oa_xp_batch *b, uint64_t seq);
/* The members' outcome (OA_XS_OK, SELF or EIO), before COMMIT is let go;
 * unless OK, F's own transaction is as it was before the merge. */
void oa_xp_end(struct oa_file *f, struct oa_xp_batch *b, uint32_t st);
/* Commits of several processes may share flushes (not turned off by
 * OATOMIC_GROUP_COMMIT=0). */
bool oa_xp_on(void);

/* ---- recover.c ---- */
/* Finish or discard what crashed commits left behind: replay, in sequence
 * order, every committed transaction newer than the checkpoint, from every
 * journal; then checkpoint.  Caller holds COMMIT and the file open for
 * writing.  Returns 0 or -1 (EUCLEAN, EPERM, EIO...). */
int oa_recover_locked(struct oa_file *f);
int oa_needs_recovery(struct oa_file *f);
/* Does F (a coordinator, opened for checking) hold a complete record of
 * group GID newer than its checkpoint?  1 yes (and its journal flushed: the
 * decision durable), 0 no, -1 error.  Takes no lock (file.c,
 * group_decided, says why none is needed). */
int oa_group_find(struct oa_file *f, uint64_t gid);
/* If the live area says a committer died mid-commit, recover.  Caller holds
 * COMMIT.  LP (may be NULL) receives the live area as it is afterwards. */
int oa_heal_locked(struct oa_file *f, struct oa_live *lp);
/* Every commit, and whatever else needs the file as committed (a journal
 * taken, a reader meeting a dead committer), opens alike: take COMMIT,
 * finish a dead committer's work (I10), read the live area into L and the
 * file's size into FSIZE (each NULL: not needed).  0 with COMMIT held; -1
 * without. */
int oa_commit_begin(struct oa_file *f, struct oa_live *l, uint64_t *fsize);
/* The same, with COMMIT taken already; on failure it is let go. */
int oa_commit_begin_locked(struct oa_file *f, struct oa_live *l,
			   uint64_t *fsize);
/* ... and ends by releasing COMMIT. */
void oa_commit_end(struct oa_file *f);
/* oatomic check on an open handle F of PATH: findings to OUT; 0 clean, 1
 * pending, 2 damaged or foreign, -1 error (oa__check). */
int oa_check_handle(struct oa_file *f, const char *path, FILE *out);

/* ---- home.c: where the control file and journals live ---- */
/* Set f->dfd and f->prefix to F's home (home.c, H1-H4): the one its home
 * attribute names, else beside BASE, the last component of the name it was
 * opened by, in f->tdirfd.  WRITER: F will write; a home it makes is
 * recorded on the file first (H2).  ESTALE: the recorded home is not
 * reachable; EXDEV: a writer's name is on another file system than the
 * file (a bind-mounted file) and it has no home yet. */
int oa_home_find(struct oa_file *f, const char *base, bool writer);
/* The home's control file is not one F may trust, and F's opener owns the
 * file (or is root): make a new home beside BASE (".NAME.<ino>", or with a
 * random tail if that is the one being left) and record it.  Whatever the
 * old home holds stays there, untrusted and never replayed. */
int oa_home_leave(struct oa_file *f, const char *base);
/* At a writer's first change: the home's recorded path follows a renamed
 * directory (best effort). */
void oa_home_refresh(struct oa_file *f);
/* The clean mark (control.c, M1-M3).  oa_mount_id: the unique id of the
 * mount FD is on (false: none, Linux before 6.8).  oa_mark_get: 1 and the
 * value in OUT when F's file carries a mark valid here (MNT its mount);
 * else 0.  oa_mark_same: the file carries exactly MARK.  oa_unmark: M2,
 * before a commit point or an apply; -1 only when the mark may still be
 * there.  oa_mark_clean: M1, best effort; the caller holds COMMIT
 * exclusive and has found no commit in flight. */
bool oa_mount_id(int fd, uint64_t *id);
int oa_mark_get(struct oa_file *f, uint64_t mnt, unsigned char *out);
bool oa_mark_same(struct oa_file *f, const unsigned char *mark);
int oa_unmark(struct oa_file *f);
void oa_mark_clean(struct oa_file *f);
/* The stable identity of block device RDEV (home.c says from what), as the
 * "inode" its sidecars record: 0, or -1 with ENODEV (none to be had). */
int oa_blkdev_identity(dev_t rdev, uint64_t *id);

/* ---- gcommit.c: concurrent commits of one file in a process batched ---- */
/* Largest transaction a batch takes (B4): bigger ones commit alone. */
#define OA_GC_MAX (1u << 20)
enum {
	OA_GC_ALONE_FREE = 0,  /* not for batching: commit alone */
	OA_GC_ALONE = 1,       /* commit alone, then oa_gc_done */
	OA_GC_MERGED = 2,      /* a batch committed it: durable and applied */
	OA_GC_SELF = 3,        /* a batch failed before its commit point: the
				* transaction is pending; commit alone */
	OA_GC_EIO = 4,         /* a batch's flush failed: latch (I9) */
};
/* What the batches need of the layer above (file.c hands them down, as
 * the seam's table is handed down: gcommit.c calls nothing above it):
 * a new handle on F's file, with F's journal directory, that commits with
 * the journal method (the combiner); and the public calls on it. */
struct oa_gc_ops {
	struct oa_file *(*open_sibling)(struct oa_file *f);
	ssize_t (*pwrite)(struct oa_file *f, const void *buf, size_t n,
			  off_t off);
	int (*commit)(struct oa_file *f);
	int (*abort)(struct oa_file *f);
	int (*close)(struct oa_file *f);
};
int oa_gc_enter(struct oa_file *f, const struct oa_gc_ops *ops);
void oa_gc_done(struct oa_file *f);
/* The handle leaves its file's entry (oa_close); the last closes the
 * combiner. */
void oa_gc_leave(struct oa_file *f);

/* ---- journal.c: a handle's journal and its pending transaction ---- */
/* Exchange method.  Index extents whose joff has OA_SHADOW set hold their
 * bytes in the shadow file (at joff & ~OA_SHADOW), not in the journal. */
#define OA_SHADOW (1ull << 63)
/* The descriptor and offset that hold the pending bytes of extent E. */
static inline int oa_ext_fd(const struct oa_file *f, const struct oa_ext *e,
			    uint64_t *joff)
{
	*joff = e->joff & ~OA_SHADOW;
	return (e->joff & OA_SHADOW) ? f->sfd : f->jfd;
}
int oa_journal_acquire(struct oa_file *f);
/* Let the handle's journal go (its OWNER lock, its descriptor), if any. */
void oa_journal_release(struct oa_file *f);
int oa_journal_reset(struct oa_file *f);
/* Start the handle's journal over (I6, I12).  Caller holds COMMIT and has
 * healed. */
int oa_journal_recycle_locked(struct oa_file *f, uint64_t keep);
/* Room ahead in journal 0 for a handle that commits again. */
void oa_journal_grow(struct oa_file *f);
int oa_rec_close(struct oa_file *f);
int oa_journal_append(struct oa_file *f, const struct iovec *iov, int cnt,
		      size_t total, uint64_t off);
/* The pending transaction is gone (committed or dropped): the index, the
 * stage, the shadow's blocks, the open record. */
void oa_txn_drop(struct oa_file *f);
/* Empty the shadow (its blocks are dead). */
void oa_shadow_reset(struct oa_file *f);

/* ---- commit.c: the commit protocol ---- */
/* A method that writes the file without the journal (kernel, exchange)
 * leaves nothing to replay, so nothing may be replayed over it: every
 * journal commit checkpointed (I11), the control file's state durable
 * (I14).  Under COMMIT, after oa_commit_begin filled L; a failure with EIO
 * latches the handle. */
int oa_commit_bypass_ready(struct oa_file *f, struct oa_live *l);
int oa_commit_journal(struct oa_file *f);
/* The journal commit of FS[0..N) as one unit (commit.c, G1-G5): FS in
 * COMMIT order, the coordinator first, each with a pending transaction in
 * its journal; REFS[i] names FS[i] for recovery.  0, or -1 with errno. */
int oa_commit_group_journal(struct oa_file *const *fs, size_t n,
			    const struct oa_gref *refs);

/* ---- kernel.c: the kernel method ---- */
/* Kernel method: is this write (into an empty transaction) one to stage? */
bool oa_stage_fits(struct oa_file *f, uint64_t off, uint64_t len);
int oa_stage(struct oa_file *f, const struct iovec *iov, int cnt,
	     uint64_t off, uint64_t len);
/* Move a staged write into the journal (before any other change, read, or
 * a journal commit).  0 or -1 (the transaction stays staged). */
int oa_unstage(struct oa_file *f);
/* Commit the staged write with RWF_ATOMIC.  0 done; 1 not possible now
 * (the caller commits through the journal); -1 error (errno, maybe
 * latched). */
int oa_commit_kernel(struct oa_file *f);

/* ---- exchange.c: the exchange method ---- */
/* Does a write of TOTAL bytes at OFF go to the shadow: no (the journal),
 * its whole blocks (the edges to the journal), or all of it (a whole
 * replace, exchange.c W1)? */
enum { OA_XCHG_NO, OA_XCHG_BLOCKS, OA_XCHG_WHOLE };
int oa_xchg_wants(const struct oa_file *f, uint64_t off, uint64_t total);
/* Such a write, HOW as oa_xchg_wants said.  Returns TOTAL, or how many
 * bytes from OFF on are pending after a failure (-1 for none, errno
 * set). */
ssize_t oa_xchg_put(struct oa_file *f, const struct iovec *iov, int cnt,
		    size_t total, uint64_t off, int how);
/* Move the shadow's pending bytes into the journal (before a journal
 * commit).  0 or -1. */
int oa_unshadow(struct oa_file *f);
/* A truncate of the transaction to LEN: the shadow keeps nothing past it. */
int oa_shadow_cut(struct oa_file *f, uint64_t len);
/* Commit by XFS range exchange.  0 done; 1 not possible (the caller moves
 * the shadow into the journal and commits there); -1 error. */
int oa_commit_exchange(struct oa_file *f);

/* ---- map.c: the handle's view and its mappings ---- */
/* Add TOTAL bytes at OFF to the transaction, by whichever method takes
 * them (the stage, the shadow, the journal).  Returns TOTAL, or how many
 * bytes from OFF on are pending after a failure (-1 for none). */
ssize_t oa_txn_write(struct oa_file *f, const struct iovec *iov, int iovcnt,
		     uint64_t total, uint64_t off);
/* The file's size as the handle sees it, given the committed size SC. */
uint64_t oa_view_size(struct oa_file *f, uint64_t sc);
/* oa_mmap and oa_munmap's work (arguments checked by file.c). */
void *oa_map_add(struct oa_file *f, size_t length, int prot, uint64_t off);
int oa_map_remove(struct oa_file *f, void *addr, size_t length);
/* Stores waiting in mapped pages over [a, b) into the transaction, before
 * a call that reads, writes or truncates there. */
int oa_map_flush(struct oa_file *f, uint64_t a, uint64_t b);
/* The handle wrote IOV at OFF, truncated to LEN from a view OLDV long:
 * its mappings show it. */
int oa_map_wrote(struct oa_file *f, const struct iovec *iov, int iovcnt,
		 uint64_t off);
int oa_map_truncated(struct oa_file *f, uint64_t len, uint64_t oldv);
/* Around a commit (COMMIT: stores join it) or an abort: oa_map_begin
 * freezes the pages that hold pending bytes; oa_map_end (DONE: the
 * transaction is over) gives them back the file's contents. */
int oa_map_begin(struct oa_file *f, bool commit);
void oa_map_end(struct oa_file *f, bool done);
void oa_map_free(struct oa_file *f);
/* How stores are tracked, for oa_ioinfo. */
const char *oa_map_tracking(void);

/*
 * Planted protocol bugs, for `make crash-mutants` only: a build with
 * -DOA_MUTANT=N breaks the protocol in one place, and the crash tests must
 * catch it.  Normal builds have OA_MUTANT 0 and none of this code.
 *   1  skip the commit flush (I2)
 *   2  apply in place before the commit record is written (I3)
 *   3  replay in reverse seq order (I7)
 *   4  recovery ignores data checksums (I1)
 *   5  checkpoint record before the file's flush (I5)
 *   6  ignore the dirty marker: no healing of a dead committer (I10)
 *   7  report a failed commit flush as success (I9)
 *   8  no directory flush after linking a new control or journal file (I8)
 *   9  recovery trusts a commit record whose data did not all arrive, as
 *      if the record had been made durable before its data (I1)
 *  10  a checkpoint passes a failed flush of the file (I9, I5)
 *  20  kernel method: RWF_ATOMIC write while a journal commit is newer than
 *      the checkpoint (recovery then replays it over the write)
 *  22  exchange method: exchange while a journal commit is newer than the
 *      checkpoint (I11)
 *  23  a journal found by name is used without flushing its directory (I8)
 *  21  recycle a journal (new generation; clone records cut off) before the
 *      checkpoint covers its commits (I6)
 *  24  clone method: keep the journal's blocks beyond the ring for the next
 *      generation, though the file may still map them on disk (I12)
 *  26  last close: the control file cut back to clean before the file's
 *      flush (I14)
 *  27  last close: extra journals holding commits newer than the durable
 *      checkpoint removed without writing it first (I14)
 *  28  recovery replays journals of an earlier era (I15)
 *  30  mappings: a page stored to is missed (the last of each flush)
 *  31  mappings: the stores join the transaction after its commit point
 *      (they go with the next commit)
 *  32  mappings: an abort leaves the aborted stores in the mapping (they
 *      go with the next commit)
 */

#endif
