/*
 * clone.c - the clone method's primitives, used by the apply (apply.c) and
 * the journal (journal.c, which places the records).
 *
 * The clone method keeps the journal method's records and commit record,
 * but a big data record (>= f->clone_min: OA_CLONE_MIN forced,
 * OA_CLONE_AUTO under AUTO) is placed with its payload block-congruent to
 * its file offset, beyond the journal's pre-zeroed ring; the apply clones
 * its whole blocks into the file (FICLONERANGE) and copies only the
 * unaligned edges.  The data is written once; the file shares the
 * journal's blocks.
 *
 * Why it is safe: recovery replays a commit by the same apply, and a clone
 * is a redo from the journal's bytes, which I4 keeps intact until a
 * checkpoint covers the commit; a clone that the crash cut half-way (XFS
 * remaps extent by extent) is simply done again.  The file's later
 * in-place writes cannot reach the journal's copy (reflink is copy-on-write
 * on both sides).  I5 holds as before: the checkpoint's fdatasync of the
 * file makes the remaps durable (they are metadata of the file).  Placed
 * records lie beyond the ring and only they are cloned (oa_clone_span), so
 * the ring is never shared and a small commit never copies on write; the
 * shared blocks beyond it are never written again by the journal: the
 * generation's recycle cuts them off (I12), since the disk may map them
 * into the file until the file system's log is flushed (Btrfs, which never
 * writes them in place, keeps them).
 */
#include <errno.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

bool oa_clone_span(const struct oa_file *f, uint64_t off, uint64_t len,
		   uint64_t joff, uint64_t *a, uint64_t *b)
{
	uint64_t bs = f->blk;
	if (!f->may_clone || !bs || joff % bs != off % bs)
		return false;
	*a = oa_align_up(off, bs);
	*b = (off + len) & ~(bs - 1);
	/* Placed records only (beyond the ring, which is never shared):
	 * whoever applies, a record a writer placed is cloned. */
	return joff >= OA_JRNL_INITIAL && *b > *a && *b - *a >= OA_CLONE_MIN;
}

/* Btrfs writes every block of a datacow file out of place and reuses a
 * freed extent only after the transaction that freed it has committed, so
 * no write of the journal can reach a block the file maps on disk; a
 * nodatacow file (chattr +C) may be overwritten in place once unshared.
 * Unknown (the flags cannot be read, any other file system): no. */
bool oa_journal_cow(const struct oa_file *f, int jfd)
{
	int flags = 0;
	if (!f->fs_cow || oa_xioctl(jfd, FS_IOC_GETFLAGS, &flags) < 0)
		return false;
	return !(flags & FS_NOCOW_FL);
}

int oa_clone_in(struct oa_file *f, int jfd, uint64_t a, uint64_t b,
		uint64_t joff)
{
	struct file_clone_range fcr = {
		.src_fd = jfd,
		.src_offset = joff,
		.src_length = b - a,
		.dest_offset = a,
	};
	if (oa_xioctl(f->tfd, FICLONERANGE, &fcr) == 0)
		return 0;
	switch (errno) {
	case EOPNOTSUPP: case ENOTTY: case EXDEV: case EINVAL: case ENOSYS:
	case EBADF: case EPERM: case ETXTBSY:
		/* Checked before anything is remapped: this file system, this
		 * pair of files, cannot clone.  Copy instead, from now on. */
		f->may_clone = false;
		return 1;
	default:
		return -1;
	}
}
