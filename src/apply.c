/*
 * apply.c - writing a commit into the file: the truncation, every op copied
 * from the journal (or its whole blocks cloned, clone.c), the final size.
 * The same apply serves the committer (after its commit flush, I3) and
 * recovery's replay (I7: applying twice gives the same file).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* Copy LEN bytes at JOFF of the journal JFD to OFF of the file. */
static int copy_range(struct oa_file *f, int jfd, uint64_t off, uint64_t len,
		      uint64_t joff)
{
	while (len > 0) {
		size_t n = len < OA_BUF_BYTES ? (size_t)len : OA_BUF_BYTES;
		if (oa_pread_full(jfd, f->buf, n, (off_t)joff) < 0)
			return -1;
		/* Beyond the ring the journal's pages are not read again:
		 * give them back now, for the file's pages the next line
		 * needs.  A hint: after the commit flush they are clean and
		 * go; a dirty one (recovery's) is only queued for writeback;
		 * the ring's stay, as the next small commit rewrites them. */
		if (joff >= OA_JRNL_INITIAL)
			oa_xdrop(jfd, joff, n);
		if (oa_pwrite_full(f->tfd, f->buf, n, (off_t)off) < 0)
			return -1;
		oa_wb_note(&f->twb, f->tfd, off, n);
		off += n;
		joff += n;
		len -= n;
	}
	return 0;
}

int oa_apply(struct oa_file *f, int jfd, const struct oa_commit_hdr *ch,
	     const unsigned char *body)
{
	uint64_t size, rlo = UINT64_MAX, rhi = 0;
	int r = -1;

	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	if (oa_need_buf(f) < 0 || oa_apply_lock(f) < 0)
		return -1;
	/* M2 (control.c): a commit removed the clean mark before its commit
	 * point; a replay by another handle does it here. */
	if (oa_unmark(f) < 0)
		goto out;
	if (oa_xfsize(f->tfd, &size) < 0)
		goto out;
	if (ch->trunc_min != OA_NO_TRUNC && size > ch->trunc_min &&
	    oa_xftruncate(f->tfd, (off_t)ch->trunc_min) < 0)
		goto out;
	for (uint64_t i = 0; i < ch->nops; i++) {
		struct oa_op op;
		oa_op_get(body, i, &op);
		uint64_t off = op.off, len = op.len, joff = op.joff, ca, cb;
		if (oa_clone_span(f, off, len, joff, &ca, &cb)) {
			/* The whole blocks by reference, the edges by copy. */
			int c = oa_clone_in(f, jfd, ca, cb, joff + (ca - off));
			if (c < 0)
				goto out;
			if (c == 0) {
				uint64_t tail = off + len - cb;
				rlo = ca < rlo ? ca : rlo;
				rhi = cb > rhi ? cb : rhi;
				if (copy_range(f, jfd, cb, tail,
					       joff + (cb - off)) < 0)
					goto out;
				len = ca - off;
			}
		}
		if (copy_range(f, jfd, off, len, joff) < 0)
			goto out;
		if (i == 0)
			oa_killpoint(OA_KP_HALF_APPLIED);
	}
	/* Truncated to trunc_min (or not), then written up to the end of the
	 * last op: the size is known without asking. */
	if (ch->trunc_min != OA_NO_TRUNC && size > ch->trunc_min)
		size = ch->trunc_min;
	if (ch->nops) {
		struct oa_op last;
		oa_op_get(body, ch->nops - 1, &last);
		uint64_t e = last.off + last.len;
		if (e > size)
			size = e;
	}
	if (size != ch->final_size &&
	    oa_xftruncate(f->tfd, (off_t)ch->final_size) < 0)
		goto out;
	r = 0;
out:
	oa_apply_unlock(f);
	if (r == 0 && rhi > rlo)
		oa_refill(f->tfd, rlo, rhi - rlo);   /* after APPLY */
	return r;
}

int oa_target_writable(struct oa_file *f)
{
	char proc[64];
	int fd;
	if (f->tfd_rw)
		return 0;
	/* Reopen the same inode for writing (recovery by a reader). */
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", f->tfd);
	fd = oa_xopenat(AT_FDCWD, proc, O_RDWR, 0);
	if (fd < 0)
		return -1;
	oa_xclose(f->tfd);
	f->tfd = fd;
	f->tfd_rw = true;
	return 0;
}
