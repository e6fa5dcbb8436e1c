/*
 * method.c - which commit method a handle uses.
 *
 * Every method keeps the journal's commit protocol and its invariants
 * (docs/FORMAT.md); each only changes where bytes travel:
 *
 *  journal  pending data is logged in the journal; the commit record is the
 *           commit point; the apply copies each op into the file.
 *  clone    the same records, big ones placed so that the apply can
 *           clone their blocks (clone.c);
 *  kernel   one aligned write held in memory, down as RWF_ATOMIC at commit
 *           (kernel.c);
 *  exchange whole blocks written into a shadow file, exchanged into the
 *           file at commit (exchange.c).
 *
 * This file decides which of them a handle may use: from the options, the
 * environment (OATOMIC_METHOD) and what the file system can do (ioinfo.c);
 * and it holds the one table of method names.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>

#include "internal.h"

static const struct {
	const char *name;
	int method;
} names[] = {
	{ "auto", OA_METHOD_AUTO },       { "journal", OA_METHOD_JOURNAL },
	{ "clone", OA_METHOD_CLONE },     { "exchange", OA_METHOD_EXCHANGE },
	{ "kernel", OA_METHOD_KERNEL },
};

/* OATOMIC_METHOD=NAME makes AUTO handles behave as if NAME were forced: the
 * test suite runs the same tests under every method this way. */
static int env_method(void)
{
	const char *e = getenv("OATOMIC_METHOD");
	if (!e || !*e)
		return OA_METHOD_AUTO;
	int m = oa__method_parse(e);
	return m < 0 ? OA_METHOD_AUTO : m;
}

const char *oa__method_name(int method)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].method == method)
			return names[i].name;
	return NULL;
}

int oa__method_parse(const char *name)
{
	for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(name, names[i].name) == 0)
			return names[i].method;
	return -1;
}

static bool kernel_ok(const struct oa_caps *c)
{
	return c->rwf_atomic && oa_pow2(c->awu_min) && oa_pow2(c->awu_max) &&
	       c->awu_min <= c->awu_max;
}

int oa_method_auto(const struct oa_file *f, const struct oa_caps *c)
{
	(void)f;
	if (c->exchange && c->blk)
		return OA_METHOD_EXCHANGE;
	return c->reflink ? OA_METHOD_CLONE : OA_METHOD_JOURNAL;
}

bool oa_method_deferred(const struct oa_file *f)
{
	return f->opt.method == OA_METHOD_AUTO && env_method() == OA_METHOD_AUTO;
}

int oa_method_of(const struct oa_file *f, const struct oa_caps *c)
{
	int m = f->method ? f->method : f->opt.method;
	if (m == OA_METHOD_AUTO)
		m = env_method();
	return m == OA_METHOD_AUTO ? oa_method_auto(f, c) : m;
}

int oa_method_resolve(struct oa_file *f)
{
	struct oa_caps c;
	int m = f->opt.method;

	if (m == OA_METHOD_AUTO)
		m = env_method();
	f->may_clone = f->may_kernel = f->may_exchange = f->xchg_all = false;
	f->fs_cow = false;
	f->clone_min = OA_CLONE_MIN;
	f->method = OA_METHOD_JOURNAL;
	if (m == OA_METHOD_JOURNAL)
		return 0;             /* no probing needed */
	if (oa_caps_get(f, &c) < 0) {
		if (m != OA_METHOD_AUTO)
			return -1;
		return 0;             /* AUTO: the journal works anywhere */
	}
	f->blk = oa_pow2(c.blk) && c.blk >= 512 && c.blk <= OA_PAD_MAX / 2
		 ? c.blk : 0;
	f->fs_cow = c.fs_magic == OA_BTRFS_MAGIC;
	f->awu_min = c.awu_min;
	f->awu_max = c.awu_max;
	switch (m) {
	case OA_METHOD_AUTO:
		f->may_clone = c.reflink && f->blk;
		f->clone_min = OA_CLONE_AUTO;
		/* Only what the device writes untorn itself: an atomic
		 * write the file system emulates out of place costs more than
		 * the journal (oa_caps.awu_hw). */
		while (c.awu_hw & (c.awu_hw - 1))
			c.awu_hw &= c.awu_hw - 1;
		f->may_kernel = kernel_ok(&c) && c.awu_hw >= c.awu_min;
		if (f->may_kernel)
			f->awu_max = c.awu_hw;
		f->may_exchange = c.exchange && f->blk;
		f->method = oa_method_auto(f, &c);
		return 0;
	case OA_METHOD_CLONE:
		if (!c.reflink || !f->blk)
			break;
		f->may_clone = true;
		f->method = m;
		return 0;
	case OA_METHOD_KERNEL:
		if (!kernel_ok(&c))
			break;
		f->may_kernel = true;
		f->method = m;
		return 0;
	case OA_METHOD_EXCHANGE:
		if (!c.exchange || !f->blk)
			break;
		f->may_exchange = f->xchg_all = true;
		/* what the exchange cannot take goes through the journal,
		 * cloned where it can be */
		f->may_clone = c.reflink;
		f->method = m;
		return 0;
	default:
		break;
	}
	/* A forced clone or exchange that only the journal directory's being
	 * on another file system prevents: say that, not "unsupported". */
	errno = c.xdev && (m == OA_METHOD_CLONE || m == OA_METHOD_EXCHANGE)
		? EXDEV : EOPNOTSUPP;
	return -1;
}

void oa_method_recovery(struct oa_file *f)
{
	f->method = OA_METHOD_AUTO;   /* never commits; oa_ioinfo tells what a
				       * writer would use */
	f->may_kernel = false;
	f->blk = 0;
	f->may_clone = false;
	f->blk_lazy = true;           /* oa_method_replay, if it replays */
}

void oa_method_replay(struct oa_file *f)
{
	struct statfs sfs;
	if (!f->blk_lazy)
		return;
	f->blk_lazy = false;
	if (oa_sys->fstatfs(f->tfd, &sfs) == 0 && oa_pow2((uint64_t)sfs.f_bsize) &&
	    sfs.f_bsize >= 512 && (uint64_t)sfs.f_bsize <= OA_PAD_MAX / 2)
		f->blk = (uint32_t)sfs.f_bsize;
	f->may_clone = f->blk != 0;
}

/* ---- clone ---- */

/* ---- kernel ---- */
