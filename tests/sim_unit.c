/*
 * sim_unit.c - the power-loss simulator's own model, call by call (what a
 * cut may leave after each kind of operation), so that the methods to come
 * (clone, exchange, RWF_ATOMIC / RWF_DSYNC) find it right:
 *   - a created file without a directory flush may vanish; fsync of the
 *     file alone does not keep its name;
 *   - an unflushed write is lost or kept, torn per sector;
 *   - a failed flush loses its writes, and the next flush returns 0;
 *   - RWF_DSYNC is durable at once; RWF_ATOMIC is never torn;
 *   - a clone range and an exchange are all or nothing, durable after a
 *     flush (an exchange's two sides together); an exchange of file1's
 *     written blocks (FILE1_WRITTEN) leaves file2 alone where file1 has a
 *     hole; one to EOF exchanges the files' sizes too;
 *   - unknown ioctls fail with ENOTTY.
 */
#include <linux/fs.h>
#include <sys/ioctl.h>

#include "simcheck.h"

struct xchg {
	int32_t file1_fd;
	uint32_t pad;
	uint64_t file1_offset, file2_offset, length, flags;
};
#define XCHG_IOC _IOW('X', 129, struct xchg)

static const struct sim_cfg cfg = { .sector = 512 };

/* Every cut of the current disk: how many leave PATH with size N and the
 * byte at OFF equal to V (V < 0: any), and how many in all. */
static void cuts(const char *path, size_t n, long off, int v, int *hit,
		 int *all, int *absent)
{
	struct sim_fs *snap = sim_snapshot(sim_current());
	struct sim_fs *keep = sim_current();
	struct sim_unit *u;
	size_t nu = sim_units(snap, &cfg, &u);
	unsigned char *c = tu_zalloc(nu + 1);
	*hit = *all = *absent = 0;
	CHECK(nu <= 16);
	for (;;) {
		struct sim_fs *x = sim_crash(snap, &cfg, c);
		unsigned char *b;
		size_t bn;
		sim_use(x);
		if (sim_get_file(path, &b, &bn) < 0) {
			(*absent)++;
		} else {
			if (bn == n && (v < 0 || (off < (long)bn && b[off] == v)))
				(*hit)++;
			free(b);
		}
		(*all)++;
		sim_use(keep);
		sim_fs_free(x);
		size_t i = 0;
		while (i < nu && ++c[i] == u[i].nstates)
			c[i++] = 0;
		if (i == nu)
			break;
	}
	free(c);
	free(u);
	sim_fs_free(snap);
}

int main(void)
{
	const struct oa_sysops *S = &sim_ops;
	struct sim_fs *fs = sim_fs_new();
	unsigned char b[4096];
	int hit, all, absent;
	sim_use(fs);
	CHECK_OK(sim_mkdir("/d"));
	int d = S->openat(AT_FDCWD, "/d", O_RDONLY | O_DIRECTORY, 0);
	CHECK(d >= 0);

	/* create + write + fsync(file): the name may still vanish */
	int f = S->openat(d, "x", O_RDWR | O_CREAT | O_EXCL, 0644);
	CHECK(f >= 0);
	memset(b, 'a', sizeof(b));
	CHECK_EQ(S->pwrite(f, b, 1024, 0), 1024);
	CHECK_OK(S->fsync(f));
	cuts("/d/x", 1024, 0, 'a', &hit, &all, &absent);
	CHECKF(absent > 0 && hit > 0 && hit + absent == all,
	       "%d hit %d absent of %d", hit, absent, all);
	CHECK_OK(S->fsync(d));
	cuts("/d/x", 1024, 0, 'a', &hit, &all, &absent);
	CHECK(absent == 0 && hit == all);

	/* an unflushed overwrite of two sectors: 4 outcomes, torn ones too */
	memset(b, 'b', sizeof(b));
	CHECK_EQ(S->pwrite(f, b, 1024, 0), 1024);
	cuts("/d/x", 1024, -1, -1, &hit, &all, &absent);
	CHECK_EQ(all, 4);
	cuts("/d/x", 1024, 600, 'b', &hit, &all, &absent);
	CHECK_EQ(hit, 2);

	/* a failed flush loses the write; the next flush returns 0 */
	sim_set_fault(sim_ncalls, SIM_F_FLUSH, EIO);
	CHECK_ERR(S->fdatasync(f), EIO);
	sim_set_fault(-1, 0, 0);
	CHECK_OK(S->fdatasync(f));
	cuts("/d/x", 1024, 0, 'a', &hit, &all, &absent);
	CHECKF(hit == all, "the failed write persisted: %d of %d", all - hit, all);
	CHECK_EQ(S->pread(f, b, 1, 0), 1);
	CHECK_EQ(b[0], 'b');     /* the page cache keeps the new bytes */

	/* RWF_DSYNC: durable at once; RWF_ATOMIC: never torn */
	struct iovec v = { b, 1024 };
	memset(b, 'c', sizeof(b));
	CHECK_EQ(S->pwritev2(f, &v, 1, 0, RWF_DSYNC), 1024);
	cuts("/d/x", 1024, 1000, 'c', &hit, &all, &absent);
	CHECK(hit == all);
	memset(b, 'd', sizeof(b));
	CHECK_EQ(S->pwritev2(f, &v, 1, 0, RWF_ATOMIC), 1024);
	cuts("/d/x", 1024, -1, -1, &hit, &all, &absent);
	CHECK_EQ(all, 2);
	v.iov_len = 1000;
	CHECK_ERR(S->pwritev2(f, &v, 1, 0, RWF_ATOMIC), EINVAL);
	CHECK_OK(S->fsync(f));

	/* clone range: all or nothing, durable after the destination's flush */
	int g = S->openat(d, "y", O_RDWR | O_CREAT, 0644);
	CHECK(g >= 0);
	memset(b, 'e', sizeof(b));
	CHECK_EQ(S->pwrite(g, b, 4096, 0), 4096);
	CHECK_EQ(S->pwrite(f, b, 4096, 4096), 4096);
	CHECK_OK(S->fsync(g));
	CHECK_OK(S->fsync(f));
	CHECK_OK(S->fsync(d));
	memset(b, 'f', sizeof(b));
	CHECK_EQ(S->pwrite(g, b, 4096, 0), 4096);
	CHECK_OK(S->fsync(g));
	struct file_clone_range r = { .src_fd = g, .src_offset = 0,
				      .src_length = 4096, .dest_offset = 4096 };
	CHECK_OK(S->ioctl(f, FICLONERANGE, &r));
	cuts("/d/x", 8192, 4096 + 4095, 'f', &hit, &all, &absent);
	CHECK(all == 2 && hit == 1);
	CHECK_OK(S->fdatasync(f));
	cuts("/d/x", 8192, 4096, 'f', &hit, &all, &absent);
	CHECK(hit == all);
	r.dest_offset = 100;
	CHECK_ERR(S->ioctl(f, FICLONERANGE, &r), EINVAL);

	/* exchange: both sides or neither; one flush makes both durable */
	memset(b, 'g', sizeof(b));
	CHECK_EQ(S->pwrite(g, b, 4096, 0), 4096);
	CHECK_OK(S->fsync(g));
	struct xchg x = { .file1_fd = g, .file1_offset = 0, .file2_offset = 0,
			  .length = 4096 };
	CHECK_OK(S->ioctl(f, XCHG_IOC, &x));
	cuts("/d/x", 8192, 0, 'g', &hit, &all, &absent);
	CHECK(all == 2 && hit == 1);
	cuts("/d/y", 4096, 0, 'd', &hit, &all, &absent);
	CHECK(all == 2 && hit == 1);
	CHECK_OK(S->fsync(f));
	cuts("/d/y", 4096, 0, 'd', &hit, &all, &absent);
	CHECK(hit == all);

	/* an exchange of file1's written blocks (FILE1_WRITTEN): its holes
	 * leave file2 alone, its written blocks move, zeros too; all or
	 * nothing, durable after a flush */
	int t = S->openat(d, "t", O_RDWR | O_CREAT | O_EXCL, 0644);
	int z = S->openat(d, "z", O_RDWR | O_CREAT | O_EXCL, 0600);
	CHECK(t >= 0 && z >= 0);
	memset(b, 'o', sizeof(b));
	for (int k = 0; k < 3; k++)
		CHECK_EQ(S->pwrite(t, b, 4096, 4096 * k), 4096);
	CHECK_OK(S->ftruncate(z, 12288));
	memset(b, 0, sizeof(b));
	CHECK_EQ(S->pwrite(z, b, 4096, 4096), 4096);
	memset(b, 'w', sizeof(b));
	CHECK_EQ(S->pwrite(z, b, 4096, 8192), 4096);
	CHECK_OK(S->fsync(t));
	CHECK_OK(S->fsync(z));
	CHECK_OK(S->fsync(d));
	x = (struct xchg){ .file1_fd = z, .length = 12288,
			   .flags = 1ull << 3 /* FILE1_WRITTEN */ };
	CHECK_OK(S->ioctl(t, XCHG_IOC, &x));
	cuts("/d/t", 12288, 0, 'o', &hit, &all, &absent);
	CHECK(all == 2 && hit == 2);
	cuts("/d/t", 12288, 4096, 0, &hit, &all, &absent);
	CHECK(all == 2 && hit == 1);
	cuts("/d/t", 12288, 8192, 'w', &hit, &all, &absent);
	CHECK(all == 2 && hit == 1);
	cuts("/d/t", 12288, 4096, 'o', &hit, &all, &absent);
	CHECK(all == 2 && hit == 1);
	CHECK_OK(S->fsync(t));
	cuts("/d/t", 12288, 0, 'o', &hit, &all, &absent);
	CHECK(hit == all);
	cuts("/d/t", 12288, 4096, 0, &hit, &all, &absent);
	CHECK(hit == all);
	cuts("/d/t", 12288, 8192, 'w', &hit, &all, &absent);
	CHECK(hit == all);
	/* ... together with TO_EOF: not modelled, refused */
	x.flags = (1ull << 3) | 1;
	CHECK_ERR(S->ioctl(t, XCHG_IOC, &x), EINVAL);

	/* an exchange to EOF from offset 0: the two files' contents and
	 * sizes, whatever the lengths, all or nothing; DSYNC: durable */
	CHECK_OK(S->ftruncate(z, 0));
	memset(b, 'q', sizeof(b));
	CHECK_EQ(S->pwrite(z, b, 64, 0), 64);
	x = (struct xchg){ .file1_fd = z, .flags = 1 /* TO_EOF */ };
	CHECK_OK(S->ioctl(t, XCHG_IOC, &x));
	struct stat st;
	CHECK_OK(S->fstat(t, &st));
	CHECK_EQ(st.st_size, 64);
	CHECK_OK(S->fstat(z, &st));
	CHECK_EQ(st.st_size, 12288);
	cuts("/d/t", 64, 0, 'q', &hit, &all, &absent);
	CHECK(hit > 0 && hit < all);
	cuts("/d/t", 12288, 0, 'o', &hit, &all, &absent);
	CHECK(hit > 0 && hit < all);
	x.flags = 1 | 2;    /* TO_EOF | DSYNC: back, durable on return */
	CHECK_OK(S->ioctl(t, XCHG_IOC, &x));
	cuts("/d/t", 12288, 8192, 'w', &hit, &all, &absent);
	CHECK(hit == all);
	CHECK_OK(S->fstat(z, &st));
	CHECK_EQ(st.st_size, 64);
	CHECK_OK(S->close(z));
	CHECK_OK(S->close(t));

	/* unknown ioctls */
	CHECK_ERR(S->ioctl(f, _IO('Z', 1), NULL), ENOTTY);

	CHECK_OK(S->close(g));
	CHECK_OK(S->close(f));
	CHECK_OK(S->close(d));
	CHECK_EQ(sim_open_fds(), 0);
	sim_fs_free(fs);
	printf("simulator model: ok\n");
	return 0;
}
