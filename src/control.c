/*
 * control.c - the control file ".NAME.oa": checkpoint record, live area,
 * locks; names and safe creation of the library's files.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "crc32c.h"
#include "internal.h"

/*
 * The boot id, the live area's proof of being from this boot (its seal,
 * format.h).  Read from the real /proc, and only while the files are the
 * kernel's (the seam's openat is the real one; a test may wrap a flush or
 * a write around them): under the power-loss simulator, whose files are
 * its own, a crash is a reboot the library cannot see, so there is no boot
 * id, no seal is written and recovery uses the rule for a power cut.
 */
static pthread_once_t boot_once = PTHREAD_ONCE_INIT;
static unsigned char boot_id[16];
static bool boot_ok;

static void boot_read(void)
{
	char t[64];
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	int k = 0;

	if (fd < 0)
		return;
	n = read(fd, t, sizeof(t) - 1);
	close(fd);
	if (n <= 0)
		return;
	t[n] = 0;
	for (ssize_t i = 0; i < n && k < 32; i++) {
		int c = t[i], v;
		if (c >= '0' && c <= '9')
			v = c - '0';
		else if (c >= 'a' && c <= 'f')
			v = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v = c - 'A' + 10;
		else
			continue;
		boot_id[k / 2] = (unsigned char)(boot_id[k / 2] << 4 | v);
		k++;
	}
	boot_ok = k == 32;
}

bool oa_boot_id(unsigned char out[16])
{
	if (oa_sys->openat != oa_sys_linux.openat)
		return false;
	pthread_once(&boot_once, boot_read);
	if (boot_ok)
		memcpy(out, boot_id, 16);
	return boot_ok;
}

int oa_name(struct oa_file *f, char *out, size_t n, int kind, int idx)
{
	int r = kind == OA_NAME_CTL ? snprintf(out, n, "%s.oa", f->prefix)
				    : snprintf(out, n, "%s.oaj-%d", f->prefix, idx);
	if (r < 0 || (size_t)r >= n || r > NAME_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

mode_t oa_aux_mode(const struct oa_file *f)
{
	/* No wider than the file; the library itself must be able to read
	 * and write them (a write-only file, 0200, still gets 0600 files:
	 * its owner may chmod the file at will, so owner bits give away
	 * nothing). */
	return (f->mode & 0666) | 0600;
}

/* Could user UID have written the file, and so a sidecar's bytes give it
 * nothing it did not have?  Only by the file's group or other write bits
 * (the owner, root and we are trusted already). */
static bool could_write(const struct oa_file *f, uid_t uid)
{
	if (f->mode & 0002)
		return true;
	if (!(f->mode & 0020))
		return false;
	struct passwd pw, *p = NULL;
	char buf[4096];
	gid_t groups[256];
	int n = 256;
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &p) != 0 || !p)
		return false;
	if (p->pw_gid == f->gid)
		return true;
	if (getgrouplist(p->pw_name, p->pw_gid, groups, &n) < 0)
		return false;
	for (int i = 0; i < n; i++)
		if (groups[i] == f->gid)
			return true;
	return false;
}

int oa_check_safe(struct oa_file *f, int fd)
{
	struct stat st;
	uid_t me = geteuid();
	if (oa_xfstat(fd, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode)) {
		errno = EPERM;
		return -1;
	}
	/* GUARANTEES.md §10: a journal another user could have written is
	 * not trusted: its owner must be the file's owner, root, us, or
	 * someone who may write the file itself anyway (a shared file in a
	 * shared directory, written first by another user of it). */
	if (st.st_uid != f->uid && st.st_uid != 0 && st.st_uid != me &&
	    !could_write(f, st.st_uid)) {
		errno = EPERM;
		return -1;
	}
	/* No wider than the file, also after the file's mode was narrowed:
	 * read bits the file lacks are taken away here, by its owner (or
	 * root), at once.  Write bits it lacks make the file untrusted: who
	 * knows who wrote it since (oa_narrow, for a caller that does not
	 * need to trust what it holds). */
	mode_t extra = st.st_mode & 0777 & ~oa_aux_mode(f);
	if ((extra & 0044) && (st.st_uid == me || me == 0))
		oa_sys->fchmod(fd, st.st_mode & 07777 & ~(extra & 0044));
	if (extra & 0022) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

int oa_narrow(struct oa_file *f, int fd)
{
	struct stat st;
	uid_t me = geteuid();
	if (oa_xfstat(fd, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode) || (st.st_uid != me && me != 0)) {
		errno = EPERM;
		return -1;
	}
	if (oa_sys->fchmod(fd, st.st_mode & 0777 & oa_aux_mode(f)) < 0)
		return -1;
	return oa_check_safe(f, fd);
}

int oa_create_prep(struct oa_file *f,
		   int (*fill)(struct oa_file *f, int fd, void *arg),
		   void *arg, char tmp[OA_TMP_NAME])
{
	int fd;

	/* An unnamed file first: a crash while it is being filled leaves
	 * nothing behind.  Where O_TMPFILE is not supported, a unique
	 * temporary name. */
	tmp[0] = '\0';
	fd = oa_xopenat(f->dfd, ".", O_TMPFILE | O_RDWR, 0600);
	if (fd < 0) {
		snprintf(tmp, OA_TMP_NAME, ".oatmp.%016llx",
			 (unsigned long long)oa_random64());
		fd = oa_xopenat(f->dfd, tmp, O_RDWR | O_CREAT | O_EXCL |
				O_NOFOLLOW, 0600);
		if (fd < 0) {
			tmp[0] = '\0';
			return -1;
		}
	}
	/* GUARANTEES.md §10: the file's owner, no wider mode than it has. */
	if ((oa_sys->fchown(fd, f->uid, f->gid) < 0 && errno != EPERM) ||
	    oa_sys->fchmod(fd, oa_aux_mode(f)) < 0 || fill(f, fd, arg) < 0 ||
	    /* I8: the new file's contents are durable before its name is. */
	    oa_xfsync(fd) < 0) {
		oa_create_drop(f, fd, tmp);
		return -1;
	}
	return fd;
}

int oa_create_link(struct oa_file *f, int fd, char tmp[OA_TMP_NAME],
		   const char *name)
{
	char proc[64];
	int r;

	if (tmp[0]) {
		r = oa_sys->linkat(f->dfd, tmp, f->dfd, name, 0);
		if (r == 0) {
			oa_sys->unlinkat(f->dfd, tmp, 0);
			tmp[0] = '\0';
		}
	} else {
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		r = oa_sys->linkat(AT_FDCWD, proc, f->dfd, name,
				   AT_SYMLINK_FOLLOW);
	}
	return r;
}

void oa_create_drop(struct oa_file *f, int fd, char tmp[OA_TMP_NAME])
{
	int e = errno;
	if (tmp[0])
		oa_sys->unlinkat(f->dfd, tmp, 0);
	tmp[0] = '\0';
	oa_xclose(fd);
	errno = e;
}

int oa_create_atomic(struct oa_file *f, const char *name,
		     int (*fill)(struct oa_file *f, int fd, void *arg),
		     void *arg)
{
	char tmp[OA_TMP_NAME];
	int fd = oa_create_prep(f, fill, arg, tmp);

	if (fd < 0)
		return -1;
	if (oa_create_link(f, fd, tmp, name) < 0) {
		oa_create_drop(f, fd, tmp);
		return -1;
	}
	/* I8: ...and the name is durable before anything relies on it. */
	if (!MUTANT(8) && oa_xfsync(f->dfd) < 0) {
		oa_xclose(fd);
		return -1;
	}
	return fd;
}

/* A new control file is clean: its identity, nothing else. */
static int fill_ctl(struct oa_file *f, int fd, void *arg)
{
	struct oa_slot s = { .ino = f->ino, .igen = f->igen };
	(void)arg;
	return oa_slot_write(fd, OA_ID_OFF, OA_ID_MAGIC, &s);
}

/*
 * The live area is state shared between the processes that have the file
 * open, never durable: a shared mapping makes reading and updating it plain
 * memory accesses (no system call, no timestamp update, no file-system
 * transaction), as SQLite does with its -shm file.  The page holding it is
 * inside the file (a control file in use is OA_CTL_INIT long), so no access
 * can fault: the file is cut back to its clean length only by the last
 * handle, which unmaps first.  A clean control file has no live area: a
 * handle that opened it clean uses pread/pwrite, also once another handle
 * has initialised it, as where mapping fails.
 */
static void map_live(struct oa_file *f)
{
	struct stat st;
	void *p;
	unsigned char m[8];
	f->live = NULL;
	if (!oa_sys->mmap || oa_xfstat(f->cfd, &st) < 0 ||
	    st.st_size < OA_LIVE_OFF + OA_LIVE_BYTES)
		return;
	/* Only a live area that was written: an initialisation that a full
	 * disk stopped after the file grew leaves a hole there, and a store
	 * into a mapped hole that the file system cannot fill is SIGBUS (a
	 * full tmpfs), not an error. */
	if (oa_pread_full(f->cfd, m, sizeof(m), OA_LIVE_OFF) < 0 ||
	    oa_get64(m) != OA_LIVE_MAGIC)
		return;
	p = oa_sys->mmap(NULL, 4096, f->cfd_rw ? PROT_READ | PROT_WRITE
					       : PROT_READ,
			 MAP_SHARED, f->cfd, OA_LIVE_OFF);
	if (p != MAP_FAILED)
		f->live = p;
}

void oa_ctl_map(struct oa_file *f)
{
	if (!f->live)
		map_live(f);
}

void oa_ctl_unmap(struct oa_file *f)
{
	if (f->live && oa_sys->munmap)
		oa_sys->munmap(f->live, 4096);
	f->live = NULL;
	f->live_tried = false;
}

/*
 * Slots of commits waiting to share a flush (xcommit.c, X1-X6).  Here only
 * what recovery and the end of a commit need, below them: settling the
 * slots a dead leader took, and waking the next owner to lead.
 */
struct oa_xslot *oa_xp_slot(struct oa_file *f, int i)
{
	if (!f->live || !f->cfd_rw || i < 0 || i >= OA_XP_SLOTS)
		return NULL;
	return (struct oa_xslot *)(void *)((char *)f->live + OA_XP_OFF +
					   (size_t)i * OA_XP_SLOT);
}

struct oa_xhdr *oa_xp_hdr(struct oa_file *f)
{
	if (!f->live || !f->cfd_rw)
		return NULL;
	return (struct oa_xhdr *)(void *)((char *)f->live + OA_XP_HDR_OFF);
}

/* Shared futexes (not FUTEX_PRIVATE_FLAG): the waiter may be another
 * process mapping the same page of the control file. */
void oa_futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, 1, NULL, NULL, 0);
}

void oa_futex_wait(_Atomic uint32_t *w, uint32_t v, long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, v, &ts, NULL, 0);
}

void oa_xp_wake(struct oa_xslot *s)
{
	oa_futex_wake(&s->state);
}

void oa_xp_orphans(struct oa_file *f, uint64_t seq, bool committed)
{
	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	for (int i = 0; i < OA_XP_SLOTS; i++) {
		struct oa_xslot *s = oa_xp_slot(f, i);
		if (!s || atomic_load(&s->state) != OA_XS_TAKEN)
			continue;
		/* X5: taken by a leader that is gone (whoever holds COMMIT
		 * sees no live leader's slots) */
		bool ok = MUTANT(59) ||
			  (committed && seq && atomic_load(&s->seq) == seq);
		atomic_store(&s->state, ok ? OA_XS_OK : OA_XS_SELF);
		oa_xp_wake(s);
	}
}

void oa_xp_kick(struct oa_file *f)
{
	for (int i = 0; i < OA_XP_SLOTS; i++) {
		struct oa_xslot *s = oa_xp_slot(f, i);
		if (!s)
			return;
		if (atomic_load(&s->state) == OA_XS_PUB) {
			oa_xp_wake(s);
			return;
		}
	}
}

/*
 * The apply generation (FORMAT.md, I17): reads of committed bytes without
 * the APPLY lock.
 *
 * Every change the library makes to the file's bytes or size (an apply,
 * recovery's replay, the exchange, the kernel method's write) is made
 * under APPLY exclusive, between two stores to the live area's apply
 * generation: odd from before the change begins until after it ends.  A
 * reader that finds the generation even and no commit in flight (the
 * dirty marker clear), reads, and finds the same generation after, read
 * bytes that no change overlapped: what it would have read holding APPLY
 * shared, which is one system call less on each side of every read (a
 * SQLite transaction reads a few pages, each once).  Anything else (a
 * change under way, a commit in flight, a dead applier's odd generation,
 * no mapping) takes the lock, which also heals a dead committer.
 *
 * Where the applier has no mapping (it opened the control file clean, or
 * mapping failed) it stores through pwrite into the same page; where no
 * process can map (the simulator's system calls) no reader ever skips the
 * lock and nothing is stored.  A generation left odd by a killed applier
 * moves on to the next odd value at the next change, so that a reader
 * never takes an old value for the same.
 */
static _Atomic uint64_t *agen_word(struct oa_file *f)
{
	return (_Atomic uint64_t *)(void *)((char *)f->live + OA_LIVE_AGEN_OFF);
}

bool oa_agen_peek(struct oa_file *f, uint64_t *gen)
{
	if (!f->live)
		return false;
	uint64_t g = atomic_load(agen_word(f));
	uint64_t dirty = atomic_load((_Atomic uint64_t *)(void *)
				     ((char *)f->live + 16));
	*gen = g;
	return !(g & 1) && dirty == 0;
}

bool oa_agen_same(struct oa_file *f, uint64_t gen)
{
	atomic_thread_fence(memory_order_seq_cst);
	return MUTANT(57) || atomic_load(agen_word(f)) == gen;
}

/* Odd (BEGIN) or even again; 0, or -1 where it could not be stored. */
static int agen_store(struct oa_file *f, bool begin)
{
	bool mapped = f->live && f->cfd_rw;
	unsigned char b[8];
	uint64_t g;
	if (mapped) {
		g = atomic_load(agen_word(f));
	} else {
		if (!oa_sys->mmap)
			return 0;    /* nobody maps: nobody reads without the lock */
		ssize_t r = oa_xpread(f->cfd, b, sizeof(b),
				      OA_LIVE_OFF + OA_LIVE_AGEN_OFF);
		if (r == 0)
			return 0;    /* no live area: nobody has it mapped */
		if (r != (ssize_t)sizeof(b)) {
			if (r >= 0)
				errno = EIO;
			return -1;
		}
		memcpy(&g, b, sizeof(g));
	}
	g = begin ? (g + 1) | 1 : (g | 1) + 1;
	if (mapped) {
		atomic_store(agen_word(f), g);
		return 0;
	}
	memcpy(b, &g, sizeof(g));
	return oa_pwrite_full(f->cfd, b, sizeof(b),
			      OA_LIVE_OFF + OA_LIVE_AGEN_OFF);
}

int oa_apply_lock(struct oa_file *f)
{
	if (oa_ctl_lock(f, OA_LOCK_APPLY, F_WRLCK, 1) < 0)
		return -1;
	if (!MUTANT(58) && agen_store(f, true) < 0) {
		int e = errno;
		oa_ctl_lock(f, OA_LOCK_APPLY, F_UNLCK, 0);
		errno = e;
		return -1;
	}
	return 0;
}

void oa_apply_unlock(struct oa_file *f)
{
	int e = errno;
	/* A failure leaves it odd: readers take the lock until the next
	 * change stores it again. */
	if (!MUTANT(58))
		agen_store(f, false);
	oa_ctl_lock(f, OA_LOCK_APPLY, F_UNLCK, 0);
	errno = e;
}

/* A control file with more than one name is not the library's own: it
 * makes each one under its one name, never links it.  A hard link planted
 * at ".NAME.oa" (by mistake or by someone who may write the directory) to
 * another file would have that file cut to 512 bytes and written over; a
 * link to another file's control file would have two files share one.  One
 * that still names this very inode is let through: a copy of the directory
 * made with hard links (cp -al, rsync --link-dest) shares the data file as
 * well, which the commits write in place anyway; so is one just made by
 * a link from a temporary name, before that name is removed (where the
 * file system has no O_TMPFILE: oa_create_link). */
bool oa_multi_linked(int fd)
{
	struct stat st;
	return oa_xfstat(fd, &st) == 0 && st.st_nlink > 1;
}

static bool ctl_shared(struct oa_file *f, int fd)
{
	struct oa_slot s;
	if (!oa_multi_linked(fd))
		return false;
	return oa_slot_read1(fd, OA_ID_OFF, OA_ID_MAGIC, &s) != 0 ||
	       s.ino != f->ino || s.igen != f->igen;
}

/* A control file of ours (or any, as root) with write permission the file
 * lacks (the file's mode was narrowed since): clean, it holds nothing but
 * the identity and is narrowed now; in use, journal 0 in it may hold
 * records someone else wrote, so it is kept as it is, marked unsafe:
 * recovery refuses to replay it (EPERM), and the last clean close leaves it
 * clean, to be narrowed by the next opener. */
static int ctl_widened(struct oa_file *f, int fd)
{
	struct stat st;
	uid_t me = geteuid();
	if (oa_xfstat(fd, &st) < 0)
		return -1;
	if (st.st_size == OA_CLEAN_SIZE)
		return oa_narrow(f, fd);
	if (!S_ISREG(st.st_mode) || (st.st_uid != me && me != 0)) {
		errno = EPERM;
		return -1;
	}
	f->ctl_unsafe = true;
	return 0;
}

int oa_ctl_open(struct oa_file *f, bool create)
{
	char name[NAME_MAX + 1];
	int fd;

	if (oa_name(f, name, sizeof(name), OA_NAME_CTL, 0) < 0)
		return -1;
	for (int tries = 0; tries < 8; tries++) {
		/* Read-write even for a reader: a reader that can must be
		 * able to finish what a crash left (GUARANTEES.md §7). */
		bool rw = true;
		fd = oa_xopenat(f->dfd, name, O_RDWR | O_NOFOLLOW, 0);
		if (fd < 0 && (errno == EACCES || errno == EROFS)) {
			rw = false;
			f->cfd_err = errno;
			fd = oa_xopenat(f->dfd, name, O_RDONLY | O_NOFOLLOW, 0);
		}
		if (fd >= 0) {
			/* A control file wider than the file (the file's mode
			 * was narrowed since) is narrowed by its owner and
			 * trusted: it was rightly that wide while the file
			 * was, and it holds a checkpoint number and volatile
			 * state, no data.  Journals are judged one by one
			 * (recover.c). */
			if (oa_check_safe(f, fd) < 0 &&
			    (errno != EPERM || ctl_widened(f, fd) < 0)) {
				oa_xclose(fd);
				return -1;
			}
			if (ctl_shared(f, fd)) {
				oa_xclose(fd);
				errno = EMLINK;
				return -1;
			}
			/* The file's owner, writing, may not write a clean
			 * control file another user (root, before a chown)
			 * made: rather than be locked out, it moves to a home
			 * of its own, as from one it may not trust (file.c).
			 * One that holds commits stays, to be recovered. */
			uint64_t csize;
			if (!rw && create && f->cfd_err == EACCES &&
			    geteuid() == f->uid && oa_xfsize(fd, &csize) == 0 &&
			    csize == OA_CLEAN_SIZE) {
				oa_xclose(fd);
				errno = EPERM;
				return -1;
			}
			f->cfd = fd;
			f->cfd_rw = rw;
			f->held = 0;
			return 0;
		}
		if (errno != ENOENT || !create)
			return -1;
		fd = oa_create_atomic(f, name, fill_ctl, NULL);
		if (fd >= 0) {
			f->cfd = fd;
			f->cfd_rw = true;
			f->held = 0;
			return 0;
		}
		f->cfd = -1;
		if (errno != EEXIST)
			return -1;
		/* Another process created it first: open theirs. */
	}
	errno = EAGAIN;
	return -1;
}

/* One copy of the seal at B: OA_SEAL_NONE (all zero), OA_SEAL_DAMAGED, or
 * valid (OA_SEAL_THIS_BOOT / OA_SEAL_OLD_BOOT, *ACK set). */
static int seal_decode1(const unsigned char *b, uint64_t *ack, uint64_t *gap)
{
	unsigned char me[16];
	bool zero = true;

	*ack = *gap = 0;
	for (int i = 0; i < OA_SEAL_BYTES && zero; i++)
		zero = b[i] == 0;
	if (zero)
		return OA_SEAL_NONE;
	if (oa_get64(b) != OA_SEAL_MAGIC || oa_get32(b + 40) != 0 ||
	    oa_get32(b + 44) != oa_crc32c(0, b, 44))
		return OA_SEAL_DAMAGED;
	/* From another boot (or a boot we cannot tell): a power cut may
	 * have torn the flush it speaks of. */
	if (!oa_boot_id(me) || memcmp(me, b + 8, 16))
		return OA_SEAL_OLD_BOOT;
	*ack = oa_get64(b + 24);
	*gap = oa_get64(b + 32);
	return OA_SEAL_THIS_BOOT;
}

/* The seal's two copies into L->seal, L->ack_seq.  A valid copy of this
 * boot is evidence (the larger ack_seq of two: a copy one write behind is
 * only a lower bound); one garbled copy beside a zero or valid one is what
 * a torn write leaves; two garbled copies are damage. */
static void seal_decode(const unsigned char *live, struct oa_live *l)
{
	unsigned char me[16];
	uint64_t a1, a2, g1, g2;
	int s1 = seal_decode1(live + OA_SEAL_OFF, &a1, &g1);
	int s2 = seal_decode1(live + OA_SEAL2_OFF, &a2, &g2);

	l->ack_seq = l->gap_seq = 0;
	if (s1 == OA_SEAL_THIS_BOOT || s2 == OA_SEAL_THIS_BOOT) {
		l->seal = OA_SEAL_THIS_BOOT;
		l->ack_seq = a1 > a2 ? a1 : a2;
		l->gap_seq = g1 > g2 ? g1 : g2;
	} else if (s1 == OA_SEAL_OLD_BOOT || s2 == OA_SEAL_OLD_BOOT) {
		l->seal = OA_SEAL_OLD_BOOT;
	} else if (s1 == OA_SEAL_DAMAGED && s2 == OA_SEAL_DAMAGED &&
		   oa_boot_id(me)) {
		/* Where no boot id can be had (the simulator: every crash a
		 * reboot), no seal is ever written and garbage there is what
		 * a cut tore: no evidence, the rule for a power cut. */
		l->seal = OA_SEAL_DAMAGED;
	} else {
		l->seal = OA_SEAL_NONE;
	}
}

static void seal_encode(unsigned char *b, const struct oa_live *l)
{
	unsigned char me[16];

	memset(b, 0, OA_SEAL_BYTES);
	if (!oa_boot_id(me))
		return;    /* no evidence rather than evidence we cannot date */
	oa_put64(b, OA_SEAL_MAGIC);
	memcpy(b + 8, me, 16);
	oa_put64(b + 24, l->ack_seq);
	oa_put64(b + 32, l->gap_seq);
	oa_put32(b + 44, oa_crc32c(0, b, 44));
}

int oa_live_read(struct oa_file *f, struct oa_live *l)
{
	unsigned char b[OA_LIVE_BYTES];

	if (f->live) {
		/* Written only under COMMIT; the fences order our accesses
		 * with the file I/O around them. */
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		memcpy(b, f->live, sizeof(b));
	} else {
		ssize_t r = oa_xpread(f->cfd, b, sizeof(b), OA_LIVE_OFF);
		if (r < 0)
			return -1;
		if (r < (ssize_t)sizeof(b))
			memset(b + r, 0, sizeof(b) - (size_t)r);
	}
	l->magic = oa_get64(b);
	l->last_seq = oa_get64(b + 8);
	l->dirty_seq = oa_get64(b + 16);
	l->ckpt_seq = oa_get64(b + 24);
	for (int i = 0; i < OA_LIVE_JMAX; i++)
		l->jmax[i] = oa_get64(b + 32 + 8 * i);
	l->jnamed = oa_get64(b + 32 + 8 * OA_LIVE_JMAX);
	l->flags = oa_get64(b + OA_LIVE_FLAGS_OFF);
	if (l->magic != OA_LIVE_MAGIC) {
		/* Never initialised (or torn by a power cut): treat as
		 * "nothing known"; the opener that recovers rewrites it.  The
		 * seal has its own checksums and is decoded on its own. */
		memset(l, 0, sizeof(*l));
		l->magic = OA_LIVE_MAGIC;
	}
	seal_decode(b, l);
	return 0;
}

int oa_live_write(struct oa_file *f, const struct oa_live *l)
{
	unsigned char b[OA_LIVE_BYTES];
	oa_put64(b, OA_LIVE_MAGIC);
	oa_put64(b + 8, l->last_seq);
	oa_put64(b + 16, l->dirty_seq);
	oa_put64(b + 24, l->ckpt_seq);
	for (int i = 0; i < OA_LIVE_JMAX; i++)
		oa_put64(b + 32 + 8 * i, l->jmax[i]);
	oa_put64(b + 32 + 8 * OA_LIVE_JMAX, l->jnamed);
	memset(b + OA_SEAL_OFF + OA_SEAL_BYTES, 0,
	       OA_SEAL2_OFF - OA_SEAL_OFF - OA_SEAL_BYTES);
	oa_put64(b + OA_LIVE_FLAGS_OFF, l->flags);
	seal_encode(b + OA_SEAL_OFF, l);
	memcpy(b + OA_SEAL2_OFF, b + OA_SEAL_OFF, OA_SEAL_BYTES);
	if (f->live && f->cfd_rw) {
		memcpy(f->live, b, sizeof(b));
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		return 0;
	}
	return oa_pwrite_full(f->cfd, b, sizeof(b), OA_LIVE_OFF);
}

static int ctl_synced(struct oa_file *f, struct oa_live *known);

/* Flush the control file.  I9: a failure may have dropped what its page
 * cache held, journal 0's records of a transaction in progress included,
 * while the pages now look clean and the next flush returns 0: the live
 * area says so (OA_LIVE_CTLERR), and journal 0's commits and writes that
 * rely on the control file fail until recovery or the last close. */
static int ctl_flush(struct oa_file *f)
{
	struct oa_live l;
	if (oa_xfdatasync(f->cfd) == 0)
		return 0;
	int e = errno;
	if (oa_live_read(f, &l) == 0) {
		l.flags |= OA_LIVE_CTLERR | OA_LIVE_J0ERR;
		oa_live_write(f, &l);
	}
	/* This handle's pending transaction has records in journal 0, written
	 * before the flush: they may be among its lost pages, and the journal
	 * is all that holds them, so the transaction can never commit
	 * (OA_LIVE_J0ERR fails it): the handle latches now, as a failed
	 * commit flush latches it, rather than report a space error whose
	 * retry can only fail. */
	if (f->jfd >= 0 && f->jidx == 0 && f->txn_bytes > 0) {
		f->latched = true;
		e = EIO;
	}
	errno = e;
	return -1;
}

int oa_ctl_read_ckpt(struct oa_file *f, uint64_t *ckpt, bool *foreign)
{
	struct oa_slot s;
	int r = oa_slots_read(f->cfd, OA_CSLOT, OA_CTL_MAGIC, &s);
	if (r < 0)
		return -1;
	if (r == 1 || r == 2) {
		/* Initialised and never flushed (the caller judges whether
		 * that can be): nothing was committed. */
		*ckpt = 0;
		*foreign = false;
		f->cino = f->ino;
		f->cigen = f->igen;
		f->era = 0;
		return 1;
	}
	*ckpt = s.a;
	*foreign = s.ino != f->ino || s.igen != f->igen;
	f->cino = s.ino;
	f->cigen = s.igen;
	f->era = s.era;
	return 0;
}

int oa_ctl_write_ckpt(struct oa_file *f, uint64_t ckpt)
{
	struct oa_slot s;
	int r = oa_slots_read(f->cfd, OA_CSLOT, OA_CTL_MAGIC, &s);
	if (r < 0 && errno != EUCLEAN)
		return -1;
	if (r != 0) {
		s.slot_seq = 0;
		s.era = f->era;
	}
	s.slot_seq++;
	s.a = ckpt;
	s.ino = f->ino;
	s.igen = f->igen;
	if (oa_slot_write(f->cfd, OA_CSLOT, OA_CTL_MAGIC, &s) < 0)
		return errno == ENOSPC || errno == EDQUOT ? -2 : -1;
	oa_killpoint(OA_KP_CKPT_WRITTEN);
	/* I4/I5: the checkpoint record is durable before any journal record it
	 * makes obsolete is overwritten. */
	if (ctl_flush(f) < 0)
		return -1;
	return ctl_synced(f, NULL);
}

int oa_ctl_init_locked(struct oa_file *f)
{
	unsigned char b[OA_LIVE_BYTES] = { 0 };
	struct oa_slot s;
	uint64_t size;
	int r;

	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	if (oa_xfsize(f->cfd, &size) < 0)
		return -1;
	if (size >= OA_CTL_INIT) {
		r = oa_slots_read(f->cfd, OA_CSLOT, OA_CTL_MAGIC, &s);
		if (r < 0)
			return -1;
		if (r == 0) {
			f->era = s.era;
			return 0;
		}
		/* Its initialisation never became durable: again. */
	}
	/* Clean, or an initialisation that was cut short (oa_open recovered
	 * already: recovery judged it).  In steps whose every prefix, as a
	 * kill may leave it, reads as "never initialised" (recover.c): the
	 * length, the header slot with a new era (journals of earlier eras
	 * are obsolete: I15), the live area; journal 0's slot is its owner's
	 * (oa_journal_reset).  Last the identity (ours, also where the clean
	 * file was another inode's that home.c let us take over).  Nothing is
	 * flushed: the first commit flush of journal 0 carries it all, and
	 * writes that do not go through journal 0 flush it first
	 * (oa_ctl_sync_locked).  Once a flush has, the identity gets this
	 * boot's id (oa_ctl_mark_synced): from then on, in this boot, a header
	 * found missing is damage, even after a cut of the file system
	 * (FS_IOC_SHUTDOWN) that did not reboot. */
	if (size < OA_CTL_INIT && oa_xftruncate(f->cfd, OA_CTL_INIT) < 0)
		return -1;
	f->era = oa_random64();
	s = (struct oa_slot){ .ino = f->ino, .igen = f->igen, .era = f->era };
	if (oa_slot_write(f->cfd, OA_CSLOT, OA_CTL_MAGIC, &s) < 0)
		return -1;
	oa_put64(b, OA_LIVE_MAGIC);
	if (oa_pwrite_full(f->cfd, b, sizeof(b), OA_LIVE_OFF) < 0)
		return -1;
	if (oa_ctl_identity(f, false) < 0)
		return -1;
	oa_ctl_map(f);
	return 0;
}

/* The identity of KIND (slot_seq: 0, or OA_ID_CLEAN_SYNCED), with this
 * boot's id in a, era where BOOT asks for it and it can be read. */
static int identity_write(struct oa_file *f, uint64_t kind, bool boot)
{
	struct oa_slot s = { .slot_seq = kind, .ino = f->ino,
			     .igen = f->igen };
	unsigned char me[16];
	if (boot && oa_boot_id(me)) {
		s.a = oa_get64(me);
		s.era = oa_get64(me + 8);
	}
	return oa_slot_write(f->cfd, OA_ID_OFF, OA_ID_MAGIC, &s);
}

int oa_ctl_identity(struct oa_file *f, bool in_use)
{
	return identity_write(f, 0, in_use);
}

bool oa_id_this_boot(const struct oa_slot *s)
{
	unsigned char me[16];
	return oa_boot_id(me) && s->a == oa_get64(me) &&
	       s->era == oa_get64(me + 8);
}

/* The live area records that the control file's state is durable, and
 * the identity that it was so in this boot.  KNOWN: the live area of a
 * control file in use, as the caller read it under COMMIT (NULL: look). */
static int ctl_synced(struct oa_file *f, struct oa_live *known)
{
	struct oa_live l;
	uint64_t size;
	if (!known) {
		if (oa_xfsize(f->cfd, &size) < 0)
			return -1;
		if (size < OA_CTL_INIT) {
			f->ctl_synced = true;
			return 0;
		}
		if (oa_live_read(f, &l) < 0)
			return -1;
		known = &l;
	}
	if (known->flags & OA_LIVE_SYNCED)
		return 0;
	oa_ctl_mark_synced(f, known);
	return oa_live_write(f, known);
}

void oa_ctl_mark_synced(struct oa_file *f, struct oa_live *l)
{
	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	if (l->flags & OA_LIVE_SYNCED)
		return;
	l->flags |= OA_LIVE_SYNCED;
	oa_ctl_identity(f, true);   /* evidence only: best effort */
}

/* The identity of a clean control file says its state was made durable in
 * this boot (OA_ID_CLEAN_SYNCED)?  Written only by oa_ctl_sync_locked,
 * after the flush, under COMMIT, when the file is exactly OA_CLEAN_SIZE;
 * every cut back to clean rewrites the identity without it first
 * (checkpoint.c), and leaving the clean state rewrites it too: so while it
 * is read at OA_CLEAN_SIZE, no cut since that flush can be undone by a
 * crash, and no older commit brought back (I14).  Its own kind, never
 * read as recovery's evidence that a control file in use was flushed
 * (recover.c): a grow whose length reaches the disk before the identity's
 * rewrite must not look like a header lost in this boot. */
static bool clean_synced(struct oa_file *f)
{
	struct oa_slot s;
	return oa_slot_read1(f->cfd, OA_ID_OFF, OA_ID_MAGIC, &s) == 0 &&
	       s.slot_seq == OA_ID_CLEAN_SYNCED && s.ino == f->ino &&
	       s.igen == f->igen && oa_id_this_boot(&s);
}

int oa_ctl_sync_locked(struct oa_file *f)
{
	struct oa_live l;
	uint64_t size;

	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	if (oa_xfsize(f->cfd, &size) < 0)
		return -1;
	bool in_use = size >= OA_CTL_INIT;
	if (!in_use) {
		if (f->ctl_synced)
			return 0;
		if (size == OA_CLEAN_SIZE &&
		    (MUTANT(62) || (f->cfd_rw && clean_synced(f)))) {
			f->ctl_synced = true;
			return 0;
		}
	} else {
		if (oa_live_read(f, &l) < 0)
			return -1;
		if (l.flags & OA_LIVE_CTLERR) {
			/* I9: after a failed flush its header may be missing
			 * on disk behind a page that looks clean: written
			 * again (a new slot, so a new page write) and flushed,
			 * never taken as flushed already. */
			uint64_t ckpt;
			bool foreign;
			if (oa_ctl_read_ckpt(f, &ckpt, &foreign) < 0 ||
			    oa_ctl_write_ckpt(f, ckpt) < 0)
				return -1;
			if (oa_live_read(f, &l) < 0)
				return -1;
			l.flags &= ~OA_LIVE_CTLERR;
			return oa_live_write(f, &l);
		}
		if (l.flags & OA_LIVE_SYNCED)
			return 0;
	}
	if (ctl_flush(f) < 0)
		return -1;
	if (!in_use) {
		f->ctl_synced = true;
		/* evidence only: a failure leaves the next handle a flush
		 * (without a boot id it is never taken for evidence) */
		if (size == OA_CLEAN_SIZE && f->cfd_rw)
			identity_write(f, OA_ID_CLEAN_SYNCED, true);
		return 0;
	}
	/* Under COMMIT, the live area is as read above (a flush that
	 * returned 0 changed nothing in it). */
	return ctl_synced(f, &l);
}

/*
 * The clean mark (FORMAT.md, "The clean mark"; I16): the extended attribute
 * "user.oatomic.clean" on the file says that, in the mount it was written
 * through and the boot that wrote it, the library has nothing in flight
 * and nothing to recover for the file, so that a reader can open and read
 * it without its control file and without a lock.
 *   M1  It is set only under COMMIT exclusive with no commit in flight
 *       (the control file clean, or its live area's dirty marker clear),
 *       by a handle that closes, each time with a new random nonce.
 *   M2  It is removed by every commit before its commit point, and by
 *       every apply (recovery's replay included) before it changes the
 *       file's bytes or size: an attribute's removal is seen at once by
 *       every process.  Never taken as gone on a handle's word: any
 *       close may have set it again since.
 *   M3  It counts only for its inode (number and generation), in the boot
 *       (boot id) and the mount instance (the unique mount id, which no
 *       other mount of the boot ever gets) that wrote it: a power cut
 *       reboots, a cut of the file system (FS_IOC_SHUTDOWN) needs a new
 *       mount, and either may have lost the removal of M2; a copy is
 *       another inode.  And only while the file's mode and owner are those
 *       it records: after a chmod or chown the next opener takes the long
 *       way, which makes the sidecars follow them (oa_check_safe).
 * A reader that found a valid mark reads the file, then the mark again:
 * the same bytes (nonce included) mean no change began before its read
 * ended (M2), nor since the mark was found (a new mark has a new nonce).
 *
 * The value (little-endian):
 *   0  8  magic "OACLEAN1"
 *   8  8  inode number
 *  16  8  inode generation
 *  24  8  unique mount id (statx STATX_MNT_ID_UNIQUE)
 *  32 16  boot id
 *  48  8  nonce
 *  56  4  the file's mode (st_mode & 07777)
 *  60  4  its owner (uid)
 *  64  4  its group (gid)
 *  68  4  CRC-32C of bytes 0-67
 */
#define OA_MARK_XATTR	"user.oatomic.clean"
#define OA_MARK_MAGIC	"OACLEAN1"

/* The unique id of the mount FD is reached through; false where the
 * kernel has none (before Linux 6.8): then no mark is made or trusted. */
bool oa_mount_id(int fd, uint64_t *id)
{
	struct oa_statx sx;
	if (oa_xstatx(fd, OA_STATX_MNT_ID_UNIQUE, &sx) < 0 ||
	    !(sx.stx_mask & OA_STATX_MNT_ID_UNIQUE))
		return false;
	*id = sx.stx_mnt_id;
	return true;
}

static void mark_encode(unsigned char *b, const struct oa_file *f,
			uint64_t mnt, const unsigned char boot[16],
			uint64_t nonce)
{
	memcpy(b, OA_MARK_MAGIC, 8);
	oa_put64(b + 8, f->ino);
	oa_put64(b + 16, f->igen);
	oa_put64(b + 24, mnt);
	memcpy(b + 32, boot, 16);
	oa_put64(b + 48, nonce);
	oa_put32(b + 56, f->mode);
	oa_put32(b + 60, f->uid);
	oa_put32(b + 64, f->gid);
	oa_put32(b + 68, oa_crc32c(0, b, 68));
}

int oa_mark_get(struct oa_file *f, uint64_t mnt, unsigned char *out)
{
	unsigned char b[OA_MARK_LEN + 1], boot[16];
	ssize_t n = oa_xfgetxattr(f->tfd, OA_MARK_XATTR, b, sizeof(b));
	if (n != OA_MARK_LEN || memcmp(b, OA_MARK_MAGIC, 8) != 0 ||
	    oa_get32(b + 68) != oa_crc32c(0, b, 68) ||
	    oa_get64(b + 8) != f->ino || oa_get64(b + 16) != f->igen ||
	    oa_get32(b + 56) != f->mode || oa_get32(b + 60) != f->uid ||
	    oa_get32(b + 64) != f->gid ||
	    oa_get64(b + 24) != mnt || !oa_boot_id(boot) ||
	    memcmp(b + 32, boot, 16) != 0)
		return 0;
	memcpy(out, b, OA_MARK_LEN);
	return 1;
}

bool oa_mark_same(struct oa_file *f, const unsigned char *mark)
{
	unsigned char b[OA_MARK_LEN + 1];
	ssize_t n = oa_xfgetxattr(f->tfd, OA_MARK_XATTR, b, sizeof(b));
	return n == OA_MARK_LEN && memcmp(b, mark, OA_MARK_LEN) == 0;
}

int oa_unmark(struct oa_file *f)
{
	if (f->blkdev || MUTANT(55))
		return 0;
	/* The commit removes it, then its apply would again: once per hold
	 * of COMMIT is enough, since only a holder of COMMIT sets it. */
	if (f->unmarked && oa_holds_excl(f, OA_LOCK_COMMIT))
		return 0;
	/* (ENODATA, no mark: a system call that changes nothing) */
	if (oa_xfremovexattr(f->tfd, OA_MARK_XATTR) < 0 && errno != ENODATA &&
	    errno != ENOTSUP && errno != ENOSYS)
		return -1;
	f->unmarked = oa_holds_excl(f, OA_LOCK_COMMIT);
	return 0;
}

void oa_mark_clean(struct oa_file *f)
{
	unsigned char b[OA_MARK_LEN], boot[16];
	uint64_t mnt;

	OA_ASSERT(oa_holds_excl(f, OA_LOCK_COMMIT));
	if (f->blkdev || !oa_sys->fsetxattr ||
	    !oa_mount_id(f->tfd, &mnt) || !oa_boot_id(boot))
		return;
	/* A valid mark was set since the last change (M2): left as it is
	 * (no new change time for a close that changes nothing). */
	if (oa_mark_get(f, mnt, b) == 1)
		return;
	/* Only where every process that may change the file is on this
	 * machine, and sees an attribute's removal at once: not over a
	 * network (NFS, SMB, Ceph, 9p, FUSE) nor on a cluster file system,
	 * whose other nodes' commits this mark could not see go. */
	static const char *const local[] = { "ext4", "xfs", "btrfs", "tmpfs",
					     "f2fs", "bcachefs", "zfs",
					     "ramfs", "overlayfs" };
	struct statfs sfs;
	const char *fsn;
	bool ok = false;
	if (oa_sys->fstatfs(f->tfd, &sfs) < 0 ||
	    !(fsn = oa__fs_name((unsigned long)sfs.f_type)))
		return;
	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++)
		ok = ok || strcmp(fsn, local[i]) == 0;
	if (!ok)
		return;
	/* The mode and owner as they are now (a chmod since the open). */
	struct oa_statx sx;
	if (oa_xstatx(f->tfd, OA_STATX_OWNER, &sx) < 0 ||
	    (sx.stx_mask & OA_STATX_OWNER) != OA_STATX_OWNER)
		return;
	f->mode = sx.stx_mode & 07777;
	f->uid = sx.stx_uid;
	f->gid = sx.stx_gid;
	mark_encode(b, f, mnt, boot, oa_random64());
	/* Best effort: no mark only means readers take the long way.  A
	 * reader's handle may set it too where its user may write the
	 * file's attributes (write permission, or the owner). */
	oa_xfsetxattr(f->tfd, OA_MARK_XATTR, b, sizeof(b), 0);
}
