/*
 * map.c - the handle's view: writes into the pending transaction, and
 * oa_mmap's mappings, whose stores are pending like writes.
 *
 * A handle's mappings live in one window of address space reserved at its
 * first oa_mmap: the byte at file offset O is at win + O in every mapping
 * of the handle, so that mappings of the same range are the same memory
 * and see each other.  The window maps the file MAP_PRIVATE: a store
 * copies the page (the kernel's copy-on-write) and never reaches the
 * file's page cache, so neither writeback nor anyone's sync(2) can write
 * it into the file.
 *
 * Tracking (docs/ARCHITECTURE.md, "map.c"): every page of a writable
 * mapping is kept read-only until the program stores to it.  The store
 * faults; the library's SIGSEGV handler copies the page as it is, the
 * page's BASE, and makes it writable.  A commit (and a read, a write or a
 * truncate over the page) compares each such page with its base and adds
 * only the bytes that differ to the transaction, through the same path as
 * oa_pwrite: a commit carries exactly the bytes the program changed, and a
 * byte another handle committed to the same page meanwhile is not written
 * back over.  Cost: one fault per page and transaction, and a compare of
 * the pages stored to; nothing follows the size of the mapping.
 *
 * Why not the kernel's dirty tracking (measured on Linux 6.18; the
 * alternatives and figures are in docs/ARCHITECTURE.md): the copied pages
 * of a private mapping (PAGEMAP_SCAN) and userfaultfd's asynchronous
 * write-protection (the only mode the kernel accepts on a file mapping)
 * find the pages stored to, but never see the first store: the page's
 * contents before it are gone, and the commit could only write whole pages
 * or what differs from the file now - undoing another handle's commit to
 * the same page.  Only a fault at the first store keeps the base.
 *
 * Page states (m->st, one byte per page, changed with compare-and-swap
 * because other threads store while the handle's thread runs a call):
 *   CLEAN      read-only; a store faults (or the page is not in a writable
 *              mapping, and the fault is the program's);
 *   CAPTURING  a fault is copying the base;
 *   CAPTURED   writable, base kept, listed in m->dirty;
 *   FROZEN     read-only while a call of the handle moves the page's stores
 *              into the transaction or resets it: a store waits in the
 *              handler until the call is done, and belongs to what comes
 *              after it.
 * and flags: TOUCHED, the page in the window is memory holding pending
 * bytes (a private copy, ANON or SPILLED; never the file's page), until
 * the transaction ends or oa_munmap unmaps the page; LISTED, the page is
 * in m->touched (set with the first TOUCHED of the transaction, kept
 * across an unmap so that the page is listed once, reset when the
 * transaction ends); ANON, the page is anonymous memory standing in for a
 * page beyond the committed end of the file (a private file mapping has
 * no page there).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"

enum {
	PG_CLEAN = 0, PG_CAPTURING = 1, PG_CAPTURED = 2, PG_FROZEN = 3,
	PG_STATE = 3,
	PG_TOUCHED = 4, PG_ANON = 8,
	PG_SPILLED = 16,  /* the page is the spill file's (MAP_SHARED) */
	PG_BSPILL = 32,   /* its base is in the spill file */
	PG_LISTED = 64,   /* in m->touched */
};

struct oa_map {
	char *win;               /* file offset O at win + O */
	uint64_t npages;         /* window length in pages */
	char *bases;             /* page I's base at bases + I * page */
	_Atomic unsigned char *st;
	uint32_t *refs;          /* mappings over each page: low 16 bits all,
				  * high 16 bits writable ones */
	struct oa_range {        /* each mapping oa_map_add made: pages */
		uint64_t p0, p1; /* [p0, p1), and whether it is writable */
		bool w;          /* (oa_map_remove counts down by it) */
	} *ranges;
	size_t nranges, cranges;
	uint32_t *dirty;         /* pages CAPTURED, in capture order */
	_Atomic uint32_t ndirty;
	atomic_flag lk;          /* guards dirty/ndirty (faults append) */
	uint32_t *touched;       /* pages with PG_TOUCHED */
	_Atomic uint32_t ntouched;
	_Atomic uint64_t safe;   /* pages below this one are in the file
				  * (at the last call); a capture's
				  * neighbours are taken only there */
	int slot;                /* in g_maps */
	uint64_t backed;         /* mapped pages from the committed end's
				  * page up to here are ANON (back_view) */
	/* spilling (spill_some): pages of memory the transaction holds
	 * (copies and bases), the most it may, the spill file (-1 none
	 * yet, -2 none possible) and the journal's directory to make it in */
	_Atomic long resident;
	long limit;
	_Atomic int sfd;
	int dfd;
	_Atomic bool nospill;
	unsigned char *tmp;      /* a page: a spilled base, read back */
	_Atomic long frags;      /* this window's part of g_frags */
};

#define OA_MAP_SLOTS 1024
#define OA_MAP_MINWIN (16ull << 30)       /* smallest window reserved */

static size_t g_pg;                        /* page size */
static struct oa_map *_Atomic g_maps[OA_MAP_SLOTS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction g_prev;            /* the handler ours replaced */
static _Atomic long g_captured;            /* pages made writable, all maps */
static int g_memfd = -1;                   /* /proc/self/mem */
static pid_t g_mempid;                     /* ... of this process */

/* ---- the fault handler ---- */

/* Is page P in a mapping of the handle? */
static bool mapped(const struct oa_map *m, uint64_t p)
{
	return p < m->npages && m->refs[p] != 0;
}

/* The end of the run from page P, below END, of pages that are mapped
 * (MAPPED) or not. */
static uint64_t run_end(const struct oa_map *m, uint64_t p, uint64_t end,
			bool is_mapped)
{
	while (p < end && (m->refs[p] != 0) == is_mapped)
		p++;
	return p;
}

static _Atomic int g_nslots;               /* slots ever used */

static struct oa_map *map_at(uintptr_t a)
{
	int n = atomic_load(&g_nslots);
	for (int i = 0; i < n; i++) {
		struct oa_map *m = atomic_load(&g_maps[i]);
		if (m && a >= (uintptr_t)m->win &&
		    a - (uintptr_t)m->win < m->npages * g_pg)
			return m;
	}
	return NULL;
}

/* Copy page I into its base without faulting: a page the process cannot
 * read (beyond the end of the file) fails here instead of raising
 * SIGBUS in the handler. */
static bool copy_base(struct oa_map *m, uint64_t i)
{
	char *pa = m->win + i * g_pg;
	bool own = atomic_load(&m->st[i]) & (PG_ANON | PG_SPILLED | PG_TOUCHED);
	/* a file page beyond the end of the file (at the last call, a
	 * page may lie there) would raise SIGBUS here: read one byte the
	 * kernel's way first */
	if (!own && i >= atomic_load(&m->safe)) {
		unsigned char b;
		struct iovec l = { &b, 1 }, r = { pa, 1 };
		if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != 1 &&
		    errno != ENOSYS)
			return false;
	}
	memcpy(m->bases + i * g_pg, pa, g_pg);
	return true;
}

static void lk_take(struct oa_map *m)
{
	while (atomic_flag_test_and_set_explicit(&m->lk, memory_order_acquire))
		sched_yield();
}

static void lk_drop(struct oa_map *m)
{
	atomic_flag_clear_explicit(&m->lk, memory_order_release);
}

/* List page P as captured (before its state says so). */
static void list_add(struct oa_map *m, uint64_t p)
{
	lk_take(m);
	uint32_t d = atomic_load(&m->ndirty);
	m->dirty[d] = (uint32_t)p;
	atomic_store(&m->ndirty, d + 1);
	lk_drop(m);
}

/* How many pages a capture takes at once: one, until so many pages are
 * writable that the process's count of mappings (vm.max_map_count, 65530
 * by default) comes near; then aligned runs of 16 and 512 pages, which
 * the kernel merges into fewer areas. */
static long g_single = 4096, g_sixteen = 32768;   /* map_limits() */
/* Areas the captures split off since each window was last mapped anew:
 * the kernel cannot merge back a piece that had copied pages (each has
 * its own anon_vma) even when it is read-only again, so they add up
 * across transactions until oa_map_end maps the window anew. */
static _Atomic long g_frags;

static unsigned chunk_shift(void)
{
	long c = atomic_load(&g_captured), fr = atomic_load(&g_frags);
	if (fr > c)
		c = fr;
	return c < g_single ? 0 : c < g_sixteen ? 4 : 9;
}

/* The thresholds from the kernel's limit: single pages up to a quarter
 * of it (each isolated page is up to two areas), runs of 16 to half. */
static void map_limits(void)
{
	FILE *fp = fopen("/proc/sys/vm/max_map_count", "re");
	long v = 0;
	if (fp) {
		if (fscanf(fp, "%ld", &v) != 1)
			v = 0;
		fclose(fp);
	}
	if (v >= 16384) {
		/* each isolated page is up to two areas; room kept for the
		 * program's own */
		g_single = v * 2 / 5;
		g_sixteen = v * 9 / 20;
	}
	/* the tests make them small, to run the runs of pages */
	const char *e = getenv("OATOMIC_MAP_CHUNKS");
	long a, b;
	if (e && sscanf(e, "%ld,%ld", &a, &b) == 2 && a >= 0 && b >= a) {
		g_single = a;
		g_sixteen = b;
	}
}

static void chain(int sig, siginfo_t *si, void *uc)
{
	struct sigaction d;
	if (g_prev.sa_flags & SA_SIGINFO) {
		g_prev.sa_sigaction(sig, si, uc);
		return;
	}
	if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN) {
		g_prev.sa_handler(sig);
		return;
	}
	/* The default action: a fault repeats when the handler returns and
	 * kills as it would have; a signal sent by kill(2) is raised again. */
	memset(&d, 0, sizeof(d));
	d.sa_handler = SIG_DFL;
	sigaction(sig, &d, NULL);
	if (si->si_code <= 0)
		raise(sig);
}

/* Capture the pages around page P (P itself first): claim the CLEAN ones
 * of writable mappings, copy their bases, make them writable.  Returns
 * false if P cannot be captured. */
static bool capture(struct oa_map *m, uint64_t p)
{
	unsigned k = chunk_shift();
	uint64_t lo = p, hi = p + 1;
	if (k) {
		uint64_t safe = atomic_load(&m->safe);
		lo = p & ~((1ull << k) - 1);
		hi = lo + (1ull << k);
		if (hi > m->npages)
			hi = m->npages;
		if (p < safe && hi > safe)
			hi = safe;
		if (p >= safe)
			lo = p, hi = p + 1;
	}
	bool got_p = false;
	uint64_t run = UINT64_MAX;
	for (uint64_t i = lo; i <= hi; i++) {
		bool take = false;
		if (i < hi && (m->refs[i] >> 16)) {
			unsigned char s = atomic_load(&m->st[i]);
			if ((s & PG_STATE) == PG_CLEAN &&
			    atomic_compare_exchange_strong(&m->st[i], &s,
				(unsigned char)((s & ~PG_STATE) | PG_CAPTURING))) {
				if (copy_base(m, i))
					take = true;
				else
					atomic_store(&m->st[i], s);
			}
		}
		if (take) {
			if (run == UINT64_MAX)
				run = i;
			continue;
		}
		if (run != UINT64_MAX) {
			/* Pages [run, i) claimed.  A file page not copied yet
			 * still shows the page cache, which another handle's
			 * commit may change before the store copies it: copy
			 * them now, writing their bases back into them through
			 * /proc/self/mem (read-only pages; one call), so that
			 * each page is exactly its base until a store. */
			int mfd = g_memfd;
			if (mfd >= 0 && g_mempid == getpid())
				(void)!pwrite(mfd, m->bases + run * g_pg,
					      (i - run) * g_pg, (off_t)(uintptr_t)
					      (m->win + run * g_pg));
			/* writable, listed */
			int r = mprotect(m->win + run * g_pg, (i - run) * g_pg,
					 PROT_READ | PROT_WRITE);
			for (uint64_t j = run; j < i; j++) {
				unsigned char s = atomic_load(&m->st[j]);
				if (r == 0) {
					list_add(m, j);
					/* a copy and a base, or (spilled) a base */
					atomic_fetch_add(&m->resident,
							 (s & PG_SPILLED) ? 1 : 2);
					atomic_store(&m->st[j], (unsigned char)
						     ((s & ~PG_STATE & ~PG_BSPILL) |
						      PG_CAPTURED));
					if (j == p)
						got_p = true;
				} else {
					atomic_store(&m->st[j], (unsigned char)
						     (s & ~PG_STATE));
				}
			}
			if (r == 0) {
				atomic_fetch_add(&g_captured, (long)(i - run));
				atomic_fetch_add(&g_frags, 1);
				atomic_fetch_add(&m->frags, 1);
			}
			run = UINT64_MAX;
		}
	}
	return got_p;
}

/*
 * Spilling (disk-bounded stores).  A transaction's stores live in memory:
 * each page stored to is a private copy, and its base another page.  Past
 * m->limit pages, the fault that captures a page moves others out of
 * memory into the spill file, an unlinked file (O_TMPFILE) in the
 * journal's directory: the page's contents at its file offset, mapped
 * shared in its place (the kernel writes it back and frees the memory as
 * it needs), its base at the window's length plus the offset.  The compare
 * at the commit reads the base from there.  Only system calls and atomics:
 * this runs in the handler.  A spill that fails (a full disk) stops
 * spilling until the transaction ends; the stores stay in memory.
 */
static int spill_file(struct oa_map *m)
{
	int fd = atomic_load(&m->sfd);
	if (fd >= 0 || fd == -2)
		return fd;
	fd = openat(m->dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	int exp = -1;
	if (!atomic_compare_exchange_strong(&m->sfd, &exp, fd < 0 ? -2 : fd)) {
		if (fd >= 0)
			close(fd);   /* another thread made one first */
		return atomic_load(&m->sfd);
	}
	return fd < 0 ? -2 : fd;
}

static bool put_all(int fd, const void *buf, size_t n, off_t off)
{
	while (n) {
		ssize_t r = pwrite(fd, buf, n, off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		buf = (const char *)buf + r;
		n -= (size_t)r;
		off += r;
	}
	return true;
}

/* Move page P's copy and base out of memory, as far as they are in it.
 * False when the spill file cannot take them. */
static bool spill_page(struct oa_map *m, uint64_t p, int fd)
{
	unsigned char s = atomic_load(&m->st[p]);
	unsigned c = s & PG_STATE;
	bool cap = c == PG_CAPTURED;
	if (!(cap || (c == PG_CLEAN && (s & PG_TOUCHED))) ||
	    ((s & PG_SPILLED) && (!cap || (s & PG_BSPILL))))
		return true;   /* nothing of it in memory, or not ours now */
	if (!atomic_compare_exchange_strong(&m->st[p], &s, (unsigned char)
					    ((s & ~PG_STATE) | PG_CAPTURING)))
		return true;
	char *pa = m->win + p * g_pg;
	unsigned char ns = s;
	long freed = 0;
	if (cap && mprotect(pa, g_pg, PROT_READ) < 0)
		goto back;
	if (cap && !(s & PG_BSPILL)) {
		if (!put_all(fd, m->bases + p * g_pg, g_pg,
			     (off_t)((m->npages + p) * g_pg)))
			goto back_rw;
		madvise(m->bases + p * g_pg, g_pg, MADV_DONTNEED);
		ns |= PG_BSPILL;
		freed++;
	}
	if (!(s & PG_SPILLED)) {
		if (!put_all(fd, pa, g_pg, (off_t)(p * g_pg)) ||
		    mmap(pa, g_pg, cap ? PROT_READ | PROT_WRITE : PROT_READ,
			 MAP_SHARED | MAP_FIXED, fd, (off_t)(p * g_pg)) ==
		    MAP_FAILED) {
			atomic_fetch_sub(&m->resident, freed);
			goto back_rw_ns;
		}
		ns |= PG_SPILLED;
		freed++;
	} else if (cap) {
		mprotect(pa, g_pg, PROT_READ | PROT_WRITE);
	}
	atomic_fetch_sub(&m->resident, freed);
	atomic_store(&m->st[p], ns);
	return true;
back_rw_ns:
	s = ns;
back_rw:
	if (cap)
		mprotect(pa, g_pg, PROT_READ | PROT_WRITE);
back:
	atomic_store(&m->st[p], s);
	return false;
}

/* Spill pages until the transaction holds an eighth under its limit:
 * pages that only hold pending bytes first, then captured ones. */
static void spill_some(struct oa_map *m)
{
	int fd = spill_file(m);
	if (fd < 0) {
		atomic_store(&m->nospill, true);
		return;
	}
	long target = m->limit - m->limit / 8;
	for (int pass = 0; pass < 2; pass++) {
		uint32_t *list = pass ? m->dirty : m->touched;
		uint32_t n = pass ? atomic_load(&m->ndirty)
				  : atomic_load(&m->ntouched);
		for (uint32_t i = 0; i < n; i++) {
			if (atomic_load(&m->resident) <= target)
				return;
			if (!spill_page(m, list[i], fd)) {
				atomic_store(&m->nospill, true);
				return;
			}
		}
	}
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	int e = errno;
	struct oa_map *m;
	if (si->si_code == SEGV_ACCERR &&
	    (m = map_at((uintptr_t)si->si_addr)) != NULL) {
		uint64_t p = ((uintptr_t)si->si_addr - (uintptr_t)m->win) / g_pg;
		if (m->refs[p] >> 16) {
			for (;;) {
				unsigned char full = atomic_load(&m->st[p]);
				unsigned char s = full & PG_STATE;
				if (s == PG_CAPTURED) {
					/* another thread took it, and a span
					 * made it read-only (protect_span):
					 * writable again, holding it as a
					 * capture does, so that no freeze
					 * can come between */
					if (!atomic_compare_exchange_strong(
						    &m->st[p], &full, (unsigned char)
						    ((full & ~PG_STATE) |
						     PG_CAPTURING)))
						continue;
					mprotect(m->win + p * g_pg, g_pg,
						 PROT_READ | PROT_WRITE);
					atomic_store(&m->st[p], full);
					errno = e;
					return;
				}
				if (s == PG_CLEAN) {
					if (capture(m, p)) {
						if (atomic_load(&m->resident) >
						    m->limit &&
						    !atomic_load(&m->nospill))
							spill_some(m);
						errno = e;
						return;
					}
					if ((atomic_load(&m->st[p]) & PG_STATE) ==
					    PG_CLEAN) {
						static const char msg[] =
							"oatomic: a store through a "
							"mapping could not be tracked\n";
						if (write(2, msg, sizeof(msg) - 1))
							{}
						break;
					}
					continue;
				}
				/* CAPTURING (another thread) or FROZEN (a call
				 * of the handle): wait for it */
				sched_yield();
			}
		}
	}
	errno = e;
	chain(sig, si, uc);
}

/* Install the handler at a new window, chaining to the one in place.
 * Not where ours is in place already, nor where a handler the program set
 * after ours is: oa_mmap(3) has that one chain to ours, and it stays in
 * front - ours put in front of it again would chain to it (g_prev) and it
 * back to ours, and a fault that is nobody's would go round the two for
 * ever.  Ours goes in again only where the program has set SIG_DFL or
 * SIG_IGN since: no handler, nothing to chain back. */
static bool g_installed;   /* ours went in once (under g_lock) */

static int install(void)
{
	struct sigaction sa, cur;
	if (sigaction(SIGSEGV, NULL, &cur) < 0)
		return -1;
	if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_segv)
		return 0;
	if (g_installed && ((cur.sa_flags & SA_SIGINFO) ||
			    (cur.sa_handler != SIG_DFL &&
			     cur.sa_handler != SIG_IGN)))
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	g_prev = cur;
	if (sigaction(SIGSEGV, &sa, NULL) < 0)
		return -1;
	g_installed = true;
	return 0;
}

/* ---- writes into the transaction ---- */

/* Largest piece of one journal append: keeps each record's CRC pass and
 * each pwritev bounded. */
#define OA_APPEND_CHUNK (64u << 20)

ssize_t oa_txn_write(struct oa_file *f, const struct iovec *iov, int iovcnt,
		     uint64_t total, uint64_t off)
{
	struct iovec v[64];
	uint64_t done = 0;
	int i = 0;
	size_t inner = 0;

	/* Kernel method: a first write the kernel can take untorn waits in
	 * memory; anything more and it joins the journal. */
	if (f->staged && oa_unstage(f) < 0)
		return -1;
	if (oa_stage_fits(f, off, total)) {
		if (oa_stage(f, iov, iovcnt, off, total) < 0)
			return -1;
		return (ssize_t)total;
	}
	while (done < total) {
		int nv = 0;
		size_t chunk = 0;
		while (i < iovcnt && nv < 64 && chunk < OA_APPEND_CHUNK) {
			size_t left = iov[i].iov_len - inner;
			size_t take = left < OA_APPEND_CHUNK - chunk
					      ? left : OA_APPEND_CHUNK - chunk;
			if (take) {
				v[nv].iov_base = (char *)iov[i].iov_base + inner;
				v[nv].iov_len = take;
				nv++;
				chunk += take;
			}
			inner += take;
			if (inner == iov[i].iov_len) {
				i++;
				inner = 0;
			}
		}
		uint64_t at = off + done;
		ssize_t put;
		int how = oa_xchg_wants(f, at, chunk);
		if (how != OA_XCHG_NO)
			put = oa_xchg_put(f, v, nv, chunk, at, how);
		else
			put = oa_journal_append(f, v, nv, chunk, at) < 0
			      ? -1 : (ssize_t)chunk;
		if (put < (ssize_t)chunk) {
			if (put > 0)
				done += (uint64_t)put;
			return done ? (ssize_t)done : -1;
		}
		done += chunk;
	}
	return (ssize_t)total;
}

uint64_t oa_view_size(struct oa_file *f, uint64_t sc)
{
	uint64_t v = f->has_trunc ? f->t_last : sc;
	uint64_t e = oa_index_end(f->ix);
	if (f->staged && f->st_off + f->st_len > e)
		e = f->st_off + f->st_len;
	return e > v ? e : v;
}

/* ---- page lists and runs ---- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static void touch(struct oa_map *m, uint64_t p)
{
	unsigned char s = atomic_load(&m->st[p]);
	while (!(s & PG_TOUCHED)) {
		if (atomic_compare_exchange_weak(&m->st[p], &s, (unsigned char)
						 (s | PG_TOUCHED | PG_LISTED))) {
			/* listed once a transaction, though unmapped and
			 * touched again (oa_map_remove) */
			if (!(s & PG_LISTED)) {
				uint32_t t = atomic_load(&m->ntouched);
				m->touched[t] = (uint32_t)p;
				atomic_store(&m->ntouched, t + 1);
			}
			/* a clean page copied by the library's own write
			 * (a captured one was counted at its capture) */
			if (!(s & PG_SPILLED) && (s & PG_STATE) == PG_CLEAN)
				atomic_fetch_add(&m->resident, 1);
			return;
		}
	}
}

/* Page P's base is no longer needed. */
static void free_base(struct oa_map *m, uint64_t p)
{
	unsigned char s = atomic_load(&m->st[p]);
	if (!(s & PG_BSPILL)) {
		madvise(m->bases + p * g_pg, g_pg, MADV_DONTNEED);
		atomic_fetch_sub(&m->resident, 1);
	}
}

/* Freeze page P: its state to FROZEN from CLEAN, or (unless CLEAN_ONLY)
 * from CAPTURED, once a capture in progress has ended.  *WAS gets the
 * state it had; false if it was not one to freeze. */
static bool freeze_from(struct oa_map *m, uint64_t p, bool clean_only,
			unsigned char *was)
{
	for (;;) {
		unsigned char s = atomic_load(&m->st[p]);
		unsigned c = s & PG_STATE;
		*was = s;
		if (c == PG_CAPTURING) {
			sched_yield();
			continue;
		}
		if (clean_only && c != PG_CLEAN)
			return false;
		if (c == PG_FROZEN)
			return true;   /* frozen already, by this call */
		if (atomic_compare_exchange_weak(&m->st[p], &s,
				(unsigned char)((s & ~PG_STATE) | PG_FROZEN)))
			return true;
	}
}

/* Freeze page P from CLEAN or CAPTURED; returns the state it had. */
static unsigned char freeze(struct oa_map *m, uint64_t p)
{
	unsigned char was;
	freeze_from(m, p, false, &was);
	return was;
}

/* Freeze page P if it is CLEAN; false if it is not. */
static bool freeze_clean(struct oa_map *m, uint64_t p)
{
	unsigned char was;
	return freeze_from(m, p, true, &was);
}

static void unfreeze(struct oa_map *m, uint64_t p, unsigned char set,
		     unsigned char clear)
{
	unsigned char s = atomic_load(&m->st[p]);
	OA_ASSERT((s & PG_STATE) == PG_FROZEN);
	atomic_store(&m->st[p], (unsigned char)(((s & ~PG_STATE & ~clear) |
						 set) | PG_CLEAN));
}

/* mprotect the sorted pages LIST[0..N) read-only, run by run. */
static int protect_ro(struct oa_map *m, const uint32_t *list, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && list[j] == list[j - 1] + 1)
			j++;
		if (mprotect(m->win + (uint64_t)list[i] * g_pg,
			     (j - i) * g_pg, PROT_READ) < 0)
			return -1;
		i = j;
	}
	return 0;
}

/* For a commit or an abort, which take every captured page: every mapped
 * page from the first of LIST to its last goes read-only, run of mapped
 * pages by run - the pages between are read-only already, and one call
 * over them costs less than one per page. */
static int protect_span(struct oa_map *m, const uint32_t *list, size_t n)
{
	if (n < 32)
		return protect_ro(m, list, n);
	for (uint64_t p = list[0], end = (uint64_t)list[n - 1] + 1; p < end;) {
		if (!m->refs[p]) {
			p++;
			continue;
		}
		uint64_t q = run_end(m, p, end, true);
		if (mprotect(m->win + p * g_pg, (q - p) * g_pg, PROT_READ) < 0)
			return -1;
		p = q;
	}
	return 0;
}

/* ---- writing into the mapped pages (the handle's own changes) ---- */

static int self_mem(void)
{
	pid_t me = getpid();
	if (g_memfd >= 0 && g_mempid == me)
		return g_memfd;
	if (g_memfd >= 0)
		close(g_memfd);   /* the parent's memory: never write there */
	g_memfd = -1;
	g_mempid = me;
	g_memfd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	return g_memfd;
}

/* Put LEN bytes (BUF, or zeros if BUF is NULL) at window address A, whose
 * pages are FROZEN or CAPTURED (writable): through /proc/self/mem, which
 * writes a read-only private page without opening it to other threads'
 * stores, else with the pages briefly writable. */
static int poke(struct oa_map *m, char *a, const void *buf, size_t len)
{
	static const char zeros[4096];
	int fd = self_mem();
	while (len) {
		size_t n = len;
		const void *src = buf;
		if (!buf) {
			n = len < sizeof(zeros) ? len : sizeof(zeros);
			src = zeros;
		}
		ssize_t r = fd >= 0 ? pwrite(fd, src, n, (off_t)(uintptr_t)a) : -1;
		if (r <= 0) {
			char *pa = (char *)((uintptr_t)a & ~(g_pg - 1));
			size_t pl = ((uintptr_t)a + n + g_pg - 1 -
				     (uintptr_t)pa) & ~(g_pg - 1);
			if (mprotect(pa, pl, PROT_READ | PROT_WRITE) < 0)
				return -1;
			memcpy(a, src, n);
			/* pages that were CAPTURED stay writable */
			for (char *q = pa; q < pa + pl; q += g_pg) {
				uint64_t p = (uint64_t)(q - m->win) / g_pg;
				if ((atomic_load(&m->st[p]) & PG_STATE) !=
				    PG_CAPTURED)
					mprotect(q, g_pg, PROT_READ);
			}
			r = (ssize_t)n;
		}
		a += r;
		if (buf)
			buf = (const char *)buf + r;
		len -= (size_t)r;
	}
	return 0;
}



/* Pages [p0, p1) wholly beyond the committed end of the file have no file
 * page to show: anonymous zeroed memory takes their place (ANON). */
static int back_anon(struct oa_map *m, uint64_t p0, uint64_t p1)
{
	/* (a page holding pending bytes is memory already) */
	const unsigned keep = PG_ANON | PG_TOUCHED | PG_SPILLED | PG_STATE;
	for (uint64_t p = p0; p < p1;) {
		if (!mapped(m, p) || (atomic_load(&m->st[p]) & keep)) {
			p++;
			continue;
		}
		uint64_t q = p;
		while (q < p1 && mapped(m, q) &&
		       !(atomic_load(&m->st[q]) & keep))
			q++;
		for (uint64_t i = p; i < q; i++)
			freeze(m, i);
		void *r = mmap(m->win + p * g_pg, (q - p) * g_pg, PROT_READ,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		for (uint64_t i = p; i < q; i++) {
			unfreeze(m, i, r == MAP_FAILED ? 0 : PG_ANON, 0);
			touch(m, i);
		}
		if (r == MAP_FAILED)
			return -1;
		p = q;
	}
	return 0;
}

/*
 * Where the seam has no mmap (the power-loss simulator's disk is not a
 * kernel file), the window is memory of the library's own: the file's
 * committed bytes are read into pages [p0, p1) (frozen or new) where a
 * real window maps them, and again where a real one drops its copies.
 * Slower (a read per page mapped), the same protocol otherwise.
 */
static bool nofile(void)
{
	return oa_sys->mmap == NULL;
}

static int load_file(struct oa_file *f, uint64_t p0, uint64_t p1)
{
	struct oa_map *m = f->map;
	uint64_t sc, a = p0 * g_pg, b = p1 * g_pg;
	char *w = m->win + a;
	if (oa_xfsize(f->tfd, &sc) < 0 ||
	    mprotect(w, (size_t)(b - a), PROT_READ | PROT_WRITE) < 0)
		return -1;
	uint64_t e = sc < b ? (sc > a ? sc : a) : b;
	int r = e > a ? oa_pread_full(f->tfd, w, (size_t)(e - a), (off_t)a) : 0;
	memset(w + (e - a), 0, (size_t)(b - e));
	mprotect(w, (size_t)(b - a), PROT_READ);
	return r;
}

/* Every mapped page of the view that lies wholly beyond the committed
 * end of the file is backed by memory (a file page there would raise
 * SIGBUS): done incrementally, up to m->backed. */
static int back_view(struct oa_file *f)
{
	struct oa_map *m = f->map;
	uint64_t sc;
	if (oa_xfsize(f->tfd, &sc) < 0)
		return -1;
	uint64_t sp = (sc + g_pg - 1) / g_pg;
	uint64_t vp = (oa_view_size(f, sc) + g_pg - 1) / g_pg;
	if (vp > m->npages)
		vp = m->npages;
	if (m->backed < sp)
		m->backed = sp;
	if (vp > m->backed) {
		if (back_anon(m, m->backed, vp) < 0)
			return -1;
		m->backed = vp;
	}
	return 0;
}

/* Give the window's mapped bytes [a, b) the contents BUF (or zeros):
 * the handle's own pending change, shown in its mappings. */
static int show(struct oa_file *f, uint64_t a, uint64_t b, const char *buf)
{
	struct oa_map *m = f->map;
	uint64_t sc;
	if (b > m->npages * g_pg)
		b = m->npages * g_pg;
	if (a >= b)
		return 0;
	/* no file page beyond the committed end: memory of our own there */
	if (oa_xfsize(f->tfd, &sc) < 0)
		return -1;
	uint64_t sp = (sc + g_pg - 1) / g_pg;
	if (b > sp * g_pg &&
	    back_anon(m, a / g_pg > sp ? a / g_pg : sp, (b + g_pg - 1) / g_pg) < 0)
		return -1;
	while (a < b) {
		uint64_t p = a / g_pg;
		uint64_t e = (p + 1) * g_pg < b ? (p + 1) * g_pg : b;
		if (mapped(m, p)) {
			unsigned char s = freeze(m, p);
			int r;
			if ((s & PG_STATE) == PG_CAPTURED) {
				/* the program's stores wait in the page: the
				 * change goes into page and base alike, so
				 * that the compare finds only the stores */
				static const char zeros[65536];
				const char *src = buf ? buf : zeros;
				r = 0;
				if (!(s & PG_BSPILL))
					memcpy(m->bases + a, src, e - a);
				else if (e - a > sizeof(zeros) ||
					 !put_all(atomic_load(&m->sfd), src,
						  (size_t)(e - a), (off_t)
						  (m->npages * g_pg + a)))
					r = -1;
				atomic_store(&m->st[p], s);  /* still writable */
				if (r == 0)
					r = poke(m, m->win + a, buf,
						 (size_t)(e - a));
			} else {
				r = poke(m, m->win + a, buf, (size_t)(e - a));
				unfreeze(m, p, 0, 0);
				touch(m, p);
			}
			if (r < 0)
				return -1;
		}
		if (buf)
			buf += e - a;
		a = e;
	}
	return 0;
}

/* The mapped whole pages [p0, p1) read as zeros, as a shrink leaves them:
 * zeroed memory in their place (ANON), which costs no copy per page. */
static int zero_pages(struct oa_map *m, uint64_t p0, uint64_t p1)
{
	if (p1 > m->npages)
		p1 = m->npages;
	for (uint64_t p = p0; p < p1;) {
		if (!mapped(m, p)) {
			p++;
			continue;
		}
		uint64_t q = run_end(m, p, p1, true);
		for (uint64_t r = p; r < q; r++)
			freeze(m, r);
		void *x = mmap(m->win + p * g_pg, (q - p) * g_pg, PROT_READ,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		for (uint64_t r = p; r < q; r++) {
			if (x == MAP_FAILED)
				unfreeze(m, r, 0, 0);
			else
				unfreeze(m, r, PG_ANON, PG_SPILLED | PG_BSPILL);
			touch(m, r);
		}
		if (x == MAP_FAILED)
			return -1;
		p = q;
	}
	return 0;
}

/* Show the handle's pending changes over the mapped bytes [a, b). */
static int show_pending(struct oa_file *f, uint64_t a, uint64_t b)
{
	uint64_t sc;
	if (!f->pending)
		return 0;
	if (oa_xfsize(f->tfd, &sc) < 0)
		return -1;
	/* Committed bytes a shrink cut off read as zeros wherever they are
	 * mapped, past the pending end too: what the mapping shows there is
	 * what a store is compared with (oa_map_truncated does the same for
	 * a mapping made before the shrink). */
	if (f->has_trunc && f->t_min < sc) {
		uint64_t za = f->t_min > a ? f->t_min : a;
		uint64_t zb = sc < b ? sc : b;
		uint64_t pa = (za + g_pg - 1) / g_pg, pb = zb / g_pg;
		if (za < zb && pa >= pb) {
			if (show(f, za, zb, NULL) < 0)
				return -1;
		} else if (za < zb) {
			if ((za < pa * g_pg && show(f, za, pa * g_pg, NULL) < 0) ||
			    zero_pages(f->map, pa, pb) < 0 ||
			    (pb * g_pg < zb && show(f, pb * g_pg, zb, NULL) < 0))
				return -1;
		}
	}
	/* the pending bytes end at the view's end */
	uint64_t v = oa_view_size(f, sc);
	if (b > v)
		b = v;
	if (a >= b)
		return 0;
	if (f->staged) {
		uint64_t x = f->st_off > a ? f->st_off : a;
		uint64_t y = f->st_off + f->st_len < b ? f->st_off + f->st_len : b;
		if (x < y && show(f, x, y, (char *)f->st_buf + (x - f->st_off)) < 0)
			return -1;
		return 0;
	}
	if (oa_need_buf(f) < 0)
		return -1;
	for (void *c = oa_index_seek(f->ix, a); c; c = oa_index_next(f->ix, c)) {
		struct oa_ext e;
		uint64_t jo;
		oa_index_get(c, &e);
		if (e.off >= b)
			break;
		uint64_t x = e.off > a ? e.off : a;
		uint64_t y = e.off + e.len < b ? e.off + e.len : b;
		int fd = oa_ext_fd(f, &e, &jo);
		while (x < y) {
			size_t n = y - x < OA_BUF_BYTES ? (size_t)(y - x)
							: OA_BUF_BYTES;
			if (oa_pread_full(fd, f->buf, n,
					  (off_t)(jo + (x - e.off))) < 0 ||
			    show(f, x, x + n, (char *)f->buf) < 0)
				return -1;
			x += n;
		}
	}
	return 0;
}

/* ---- moving stores into the transaction ---- */

/* Add page P's stores (the bytes that differ from its base) to the
 * transaction, up to the view's end V. */
static int page_stores(struct oa_file *f, uint64_t p, uint64_t v)
{
	struct oa_map *m = f->map;
	const unsigned char *pg = (unsigned char *)m->win + p * g_pg;
	const unsigned char *bs = (unsigned char *)m->bases + p * g_pg;
	uint64_t o0 = p * g_pg;
	if (atomic_load(&m->st[p]) & PG_BSPILL) {
		/* the base is in the spill file */
		if (oa_pread_full(atomic_load(&m->sfd), m->tmp, g_pg,
				  (off_t)((m->npages + p) * g_pg)) < 0)
			return -1;
		bs = m->tmp;
	}
	size_t lim = g_pg;
	if (o0 >= v)
		return 0;
	if (v - o0 < lim)
		lim = (size_t)(v - o0);
	for (size_t i = 0; i < lim;) {
		/* skip equal words, then bytes */
		while (i + 8 <= lim && !memcmp(pg + i, bs + i, 8))
			i += 8;
		while (i < lim && pg[i] == bs[i])
			i++;
		if (i >= lim)
			break;
		size_t j = i + 1;
		while (j < lim && pg[j] != bs[j])
			j++;
		struct iovec io = { (void *)(pg + i), j - i };
		if (f->opt.max_txn_bytes &&
		    f->txn_bytes + (j - i) > f->opt.max_txn_bytes) {
			errno = EFBIG;
			return -1;
		}
		if (oa_txn_write(f, &io, 1, j - i, o0 + i) != (ssize_t)(j - i))
			return -1;
		i = j;
	}
	return 0;
}

/*
 * Move the stores waiting in captured pages that overlap [a, b) into the
 * transaction (WRITE; an abort only drops them).  The pages are frozen and
 * read-only first, so a store made meanwhile waits and lands after; they
 * end TOUCHED (their contents are now pending bytes) and CLEAN, so the
 * next store takes a new base - or, with KEEP_FROZEN (a commit, an abort),
 * frozen until oa_map_end.
 */
static int flush_pages(struct oa_file *f, uint64_t a, uint64_t b,
		       bool keep_frozen, bool write)
{
	struct oa_map *m = f->map;
	uint32_t k = 0, w = 0, i;
	uint64_t sc, v = 0;
	int ret = 0;

	if (atomic_load(&m->ndirty) == 0)
		return 0;
	uint64_t p0 = a / g_pg, p1 = b / g_pg + 1;
	if (b == UINT64_MAX)
		p1 = m->npages;
	lk_take(m);
	uint32_t n = atomic_load(&m->ndirty);
	uint32_t *sel = malloc((size_t)n * sizeof(*sel) + 1);
	if (!sel) {
		lk_drop(m);
		errno = ENOMEM;
		return -1;
	}
	/* take the pages in range off the list (a page is listed before it
	 * is CAPTURED, so freeze() below may wait for its fault to end) */
	for (i = 0; i < n; i++) {
		uint32_t p = m->dirty[i];
		if (p >= p0 && p < p1 && (uint64_t)p * g_pg < b)
			sel[k++] = p;
		else
			m->dirty[w++] = p;
	}
	atomic_store(&m->ndirty, w);
	lk_drop(m);
	if (k == 0) {
		free(sel);
		return 0;
	}
	for (i = 0; i < k; i++)
		freeze(m, sel[i]);
	qsort(sel, k, sizeof(*sel), cmp_u32);
	if ((keep_frozen ? protect_span(m, sel, k) : protect_ro(m, sel, k)) < 0)
		goto relist_all;
	atomic_fetch_sub(&g_captured, (long)k);
	if (write) {
		if (oa_xfsize(f->tfd, &sc) < 0)
			goto relist_all_ro;
		v = oa_view_size(f, sc);
	}
	for (i = 0; i < k; i++) {
		if (MUTANT(30) && write && k > 1 && i == k - 1) {
			touch(m, sel[i]);   /* its stores never reach the txn */
			if (!keep_frozen)
				unfreeze(m, sel[i], 0, 0);
			continue;
		}
		if (write && page_stores(f, sel[i], v) < 0) {
			ret = -1;
			break;
		}
		touch(m, sel[i]);
		if (!keep_frozen) {
			free_base(m, sel[i]);
			unfreeze(m, sel[i], 0, 0);
		}   /* (else oa_map_end frees the bases, span by span) */
	}
	if (ret == 0) {
		free(sel);
		return 0;
	}
	/* a write failed at page I: the pages before it are pending (and
	 * thaw), the rest keep their stores and bases */
	if (keep_frozen)
		for (uint32_t j = 0; j < i; j++)
			unfreeze(m, sel[j], 0, 0);
	k -= i;
	memmove(sel, sel + i, (size_t)k * sizeof(*sel));
relist_all_ro:
	atomic_fetch_add(&g_captured, (long)k);
relist_all:
	{
		int e = errno;
		for (uint32_t j = 0; j < k; j++) {
			uint32_t p = sel[j];
			unsigned char s = atomic_load(&m->st[p]);
			mprotect(m->win + (uint64_t)p * g_pg, g_pg,
				 PROT_READ | PROT_WRITE);
			list_add(m, p);
			atomic_store(&m->st[p], (unsigned char)
				     ((s & ~PG_STATE) | PG_CAPTURED));
		}
		free(sel);
		errno = e;
	}
	return -1;
}

int oa_map_flush(struct oa_file *f, uint64_t a, uint64_t b)
{
	if (!f->map)
		return 0;
	return flush_pages(f, a, b, false, true);
}

/*
 * A commit or an abort begins: every store into the transaction (COMMIT;
 * an abort drops them), and every page that holds pending bytes frozen, so
 * that no store lands between the transaction's end and oa_map_end.
 */
int oa_map_begin(struct oa_file *f, bool commit)
{
	struct oa_map *m = f->map;
	if (!m)
		return 0;
	/* touched pages first: once frozen, none can be captured again
	 * before the end (a captured one is listed, and flushed next) */
	for (uint32_t i = 0; i < m->ntouched; i++)
		freeze(m, m->touched[i]);
	if (flush_pages(f, 0, UINT64_MAX, true, commit) < 0) {
		for (uint32_t i = 0; i < m->ntouched; i++)
			if ((atomic_load(&m->st[m->touched[i]]) & PG_STATE) ==
			    PG_FROZEN)
				unfreeze(m, m->touched[i], 0, 0);
		return -1;
	}
	return 0;
}

/*
 * ... and ends.  DONE: the transaction is over (committed or dropped):
 * every touched page goes back to the file's page (MADV_DONTNEED on the
 * private copy), an anonymous one is mapped from the file again.  Else
 * (the commit failed and its transaction is still pending) the pages keep
 * the pending bytes.  Either way they thaw.
 */
static void remap_all(struct oa_file *f)
{
	struct oa_map *m = f->map;
	for (uint64_t p = 0; p < m->npages;) {
		if (!m->refs[p]) {
			p++;
			continue;
		}
		uint64_t q = run_end(m, p, m->npages, true);
		/* clean pages frozen while it goes (a store waits in the
		 * handler); a page another thread captured meanwhile keeps
		 * the run as it is */
		uint64_t i = p;
		while (i < q && freeze_clean(m, i))
			i++;
		if (i == q)
			oa_sys->mmap(m->win + p * g_pg, (q - p) * g_pg,
				     PROT_READ, MAP_PRIVATE | MAP_FIXED, f->tfd,
				     (off_t)(p * g_pg));
		for (uint64_t k = p; k < i; k++)
			unfreeze(m, k, 0, 0);
		p = q;
	}
	atomic_fetch_sub(&g_frags, atomic_load(&m->frags));
	atomic_store(&m->frags, 0);
}

void oa_map_end(struct oa_file *f, bool done)
{
	struct oa_map *m = f->map;
	uint64_t sc = 0;
	if (!m)
		return;
	uint32_t n = atomic_load(&m->ntouched);
	if (!done) {
		for (uint32_t i = 0; i < n; i++)
			unfreeze(m, m->touched[i], 0, 0);
		return;
	}
	oa_xfsize(f->tfd, &sc);
	atomic_store(&m->safe, (sc + g_pg - 1) / g_pg);
	m->backed = 0;
	qsort(m->touched, n, sizeof(*m->touched), cmp_u32);
	/* a page of our own memory or of the spill file gets the file's page
	 * again; a private copy of the file's page is dropped */
	const unsigned other = PG_ANON | PG_SPILLED;
	for (uint32_t i = 0; i < n;) {
		uint32_t j = i + 1;
		uint32_t p = m->touched[i];
		bool remap = atomic_load(&m->st[p]) & other;
		while (j < n && m->touched[j] == m->touched[j - 1] + 1 &&
		       !(atomic_load(&m->st[m->touched[j]]) & other) == !remap)
			j++;
		char *a = m->win + (uint64_t)p * g_pg;
		size_t len = (size_t)(j - i) * g_pg;
		if (nofile()) {
			if (remap)
				mmap(a, len, PROT_READ, MAP_PRIVATE |
				     MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			load_file(f, p, (uint64_t)p + (j - i));
		} else if (remap) {
			oa_sys->mmap(a, len, PROT_READ, MAP_PRIVATE | MAP_FIXED,
				     f->tfd, (off_t)((uint64_t)p * g_pg));
		} else {
			madvise(a, len, MADV_DONTNEED);
		}
		/* their bases (frozen pages: no fault is copying one; a
		 * page captured meanwhile has its own, outside the run) */
		madvise(m->bases + (uint64_t)p * g_pg, len, MADV_DONTNEED);
		for (uint32_t q = i; q < j; q++)
			unfreeze(m, m->touched[q], 0, PG_TOUCHED | PG_LISTED |
				 PG_ANON | PG_SPILLED | PG_BSPILL);
		i = j;
	}
	atomic_store(&m->ntouched, 0);
	/* Many pieces split off: with nothing captured (no store is pending
	 * anywhere in the window), the file is mapped anew over every mapped
	 * run, which makes each run one area again.  (Pages read since are
	 * faulted in again from the page cache: not done every time.) */
	if (!nofile() && atomic_load(&m->frags) > g_single / 4 &&
	    atomic_load(&m->ndirty) == 0)
		remap_all(f);
	atomic_store(&m->resident, 2 * (long)atomic_load(&m->ndirty));
	int sfd = atomic_load(&m->sfd);
	if (sfd >= 0 && atomic_load(&m->ndirty) == 0)
		if (ftruncate(sfd, 0) < 0)   /* its blocks go back */
			{}
	atomic_store(&m->nospill, false);
}

/* ---- mapping and unmapping ---- */

static void *anon(uint64_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS |
		       MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void map_unalloc(struct oa_map *m);

static void map_free(struct oa_map *m)
{
	if (!m)
		return;
	if (m->slot >= 0)
		atomic_store(&g_maps[m->slot], NULL);
	atomic_fetch_sub(&g_captured, (long)atomic_load(&m->ndirty));
	atomic_fetch_sub(&g_frags, atomic_load(&m->frags));
	map_unalloc(m);
	if (atomic_load(&m->sfd) >= 0)
		close(atomic_load(&m->sfd));
	free(m->ranges);
	free(m->tmp);
	free(m);
}

/* The arrays of a window of NPAGES pages; false when out of memory or
 * address space. */
static bool map_alloc(struct oa_map *m, uint64_t npages)
{
	m->npages = npages;
	m->win = anon(npages * g_pg, PROT_NONE);
	m->bases = anon(npages * g_pg, PROT_READ | PROT_WRITE);
	m->st = anon(npages, PROT_READ | PROT_WRITE);
	m->refs = anon(npages * 4, PROT_READ | PROT_WRITE);
	m->dirty = anon(npages * 4, PROT_READ | PROT_WRITE);
	m->touched = anon(npages * 4, PROT_READ | PROT_WRITE);
	return m->win && m->bases && m->st && m->refs && m->dirty && m->touched;
}

static void map_unalloc(struct oa_map *m)
{
	uint64_t np = m->npages;
	if (m->win)
		munmap(m->win, np * g_pg);
	if (m->bases)
		munmap(m->bases, np * g_pg);
	if (m->st)
		munmap((void *)m->st, np);
	if (m->refs)
		munmap(m->refs, np * 4);
	if (m->dirty)
		munmap(m->dirty, np * 4);
	if (m->touched)
		munmap(m->touched, np * 4);
	m->win = m->bases = NULL;
	m->st = NULL;
	m->refs = m->dirty = m->touched = NULL;
}

/* How many pages of memory a transaction's stores may hold before they
 * spill: a sixteenth of the machine's memory, at most 1 GiB;
 * OATOMIC_MAP_MEM (bytes) says otherwise (the tests make it small). */
static long spill_limit(void)
{
	const char *e = getenv("OATOMIC_MAP_MEM");
	long pages = sysconf(_SC_PHYS_PAGES);
	uint64_t bytes = pages > 0 ? (uint64_t)pages * g_pg / 16 : (256u << 20);
	if (bytes > (1ull << 30))
		bytes = 1ull << 30;
	if (e && *e) {
		char *end;
		unsigned long long v = strtoull(e, &end, 10);
		if (!*end)
			bytes = v;
	}
	long l = (long)(bytes / g_pg);
	return l < 16 ? 16 : l;
}

/* In a child of fork: the spill file is the parent's - the parent maps
 * its pages shared in its window and reads its bases at the commit - and
 * the child's copy of the window must never write into it.  The pages
 * spilled before the fork become private copies in the child; and the
 * child lets go of the file itself, the parent's open file description:
 * its faults would spill into it (spill_some writes each page at the
 * offset the parent maps it from).  A child that spills makes a file of
 * its own (spill_file). */
static void atfork_child(void)
{
	for (int i = 0; i < OA_MAP_SLOTS; i++) {
		struct oa_map *m = atomic_load(&g_maps[i]);
		int fd;
		if (!m || (fd = atomic_load(&m->sfd)) < 0)
			continue;
		for (uint64_t p = 0; p < m->npages; p++)
			if (atomic_load(&m->st[p]) & PG_SPILLED)
				mmap(m->win + p * g_pg, g_pg,
				     (atomic_load(&m->st[p]) & PG_STATE) ==
				     PG_CAPTURED ? PROT_READ | PROT_WRITE
						 : PROT_READ,
				     MAP_PRIVATE | MAP_FIXED, fd,
				     (off_t)(p * g_pg));
		/* (the mappings keep the file; bases spilled there are read
		 * only by the handle's calls, which the child may not make) */
		atomic_store(&m->sfd, -1);
		close(fd);
	}
}

/*
 * A handle's window: address space (and as much again for the bases)
 * reserved, not memory - nothing is touched until used.  Mappings made
 * later must end inside it, so it is generous: 16 GiB or four times the
 * first mapping's end; where the process may not have that much address
 * space (ulimit -v, vm.overcommit_memory=2), twice the end, then the end.
 */
static struct oa_map *map_new(struct oa_file *f, uint64_t end)
{
	struct oa_map *m = calloc(1, sizeof(*m));
	if (!m || !(m->tmp = malloc(g_pg))) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	m->slot = -1;
	m->sfd = -1;
	m->dfd = f->dfd;
	m->limit = spill_limit();
	uint64_t want[3] = { OA_MAP_MINWIN, 2 * end, end };
	while (want[0] < 4 * end && want[0] < (1ull << 46))
		want[0] <<= 1;
	bool ok = false;
	for (int i = 0; i < 3 && !ok; i++) {
		uint64_t np = (want[i] + g_pg - 1) / g_pg;
		if (np < (end + g_pg - 1) / g_pg || np > UINT32_MAX)
			continue;
		ok = map_alloc(m, np);
		if (!ok)
			map_unalloc(m);
	}
	if (!ok) {
		free(m);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < OA_MAP_SLOTS; i++)
		if (!atomic_load(&g_maps[i])) {
			m->slot = i;
			atomic_store(&g_maps[i], m);
			if (i >= atomic_load(&g_nslots))
				atomic_store(&g_nslots, i + 1);
			break;
		}
	self_mem();   /* before any fault needs it (copy_base) */
	map_limits();
	static bool atfork;
	if (!atfork && pthread_atfork(NULL, NULL, atfork_child) == 0)
		atfork = true;
	int r = m->slot >= 0 ? install() : -1;
	pthread_mutex_unlock(&g_lock);
	if (r < 0) {
		map_free(m);
		errno = ENOMEM;
		return NULL;
	}
	return m;
}

/* Room in m->ranges for one more. */
static int reserve_range(struct oa_map *m)
{
	if (m->nranges < m->cranges)
		return 0;
	size_t c = m->cranges ? 2 * m->cranges : 16;
	struct oa_range *r = realloc(m->ranges, c * sizeof(*r));
	if (!r) {
		errno = ENOMEM;
		return -1;
	}
	m->ranges = r;
	m->cranges = c;
	return 0;
}

/* The mapping that oa_munmap of pages [p0, p1) removes: one made over
 * exactly those pages, else one they lie within (a part of it unmapped);
 * of these, a read-only one first - the range mapped both ways is the
 * same address, and the program may still store through what is left.
 * -1 if none. */
static long find_range(const struct oa_map *m, uint64_t p0, uint64_t p1)
{
	long best = -1;
	int bs = 0;
	for (size_t i = 0; i < m->nranges; i++) {
		const struct oa_range *r = &m->ranges[i];
		if (r->p0 > p0 || r->p1 < p1)
			continue;
		int sc = 1 + (r->p0 == p0 && r->p1 == p1) * 2 + !r->w;
		if (sc > bs) {
			bs = sc;
			best = (long)i;
		}
	}
	return best;
}

void *oa_map_add(struct oa_file *f, size_t length, int prot, uint64_t off)
{
	struct oa_map *m;
	uint64_t sc;
	if (!g_pg)
		g_pg = (size_t)sysconf(_SC_PAGESIZE);
	if (length == 0 || (off & (g_pg - 1)) || (prot & ~(PROT_READ | PROT_WRITE)) ||
	    length > (uint64_t)INT64_MAX - off) {
		errno = EINVAL;
		return NULL;
	}
	uint64_t end = off + length;
	if (!f->map && !(f->map = map_new(f, end)))
		return NULL;
	m = f->map;
	uint64_t p0 = off / g_pg, p1 = (end + g_pg - 1) / g_pg;
	if (p1 > m->npages) {
		errno = ENOMEM;   /* beyond the window reserved at the first */
		return NULL;
	}
	if (reserve_range(m) < 0)
		return NULL;
	if (oa_xfsize(f->tfd, &sc) < 0)
		return NULL;
	atomic_store(&m->safe, (sc + g_pg - 1) / g_pg);
	/* map the file where nothing maps it yet, run by run */
	for (uint64_t p = p0; p < p1;) {
		if (m->refs[p]) {
			p++;
			continue;
		}
		uint64_t q = run_end(m, p, p1, false);
		void *x = nofile()
			? mmap(m->win + p * g_pg, (q - p) * g_pg, PROT_READ,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0)
			: oa_sys->mmap(m->win + p * g_pg, (q - p) * g_pg,
				       PROT_READ, MAP_PRIVATE | MAP_FIXED,
				       f->tfd, (off_t)(p * g_pg));
		if (x == MAP_FAILED || (nofile() && load_file(f, p, q) < 0)) {
			int e = errno;
			/* undo the runs this call mapped */
			for (uint64_t r = p0; r < p; r++)
				if (!m->refs[r])
					mmap(m->win + r * g_pg, g_pg, PROT_NONE,
					     MAP_PRIVATE | MAP_ANONYMOUS |
					     MAP_FIXED | MAP_NORESERVE, -1, 0);
			errno = e;
			return NULL;
		}
		/* pending bytes over the new pages: refs first, so that
		 * show() sees them mapped */
		for (uint64_t r = p; r < q; r++)
			m->refs[r] = 1;   /* seen as mapped by show() */
		/* new file pages where back_view put memory before */
		uint64_t sp = (sc + g_pg - 1) / g_pg;
		uint64_t bl = p > sp ? p : sp, bh = q < m->backed ? q : m->backed;
		if (bl < bh && back_anon(m, bl, bh) < 0) {
			for (uint64_t r = p; r < q; r++)
				m->refs[r] = 0;
			return NULL;
		}
		if (show_pending(f, p * g_pg, q * g_pg) < 0) {
			int e = errno;
			for (uint64_t r = p; r < q; r++)
				m->refs[r] = 0;
			mmap(m->win + p * g_pg, (q - p) * g_pg, PROT_NONE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
			     MAP_NORESERVE, -1, 0);
			errno = e;
			return NULL;
		}
		for (uint64_t r = p; r < q; r++)
			m->refs[r] = 0;
		p = q;
	}
	for (uint64_t p = p0; p < p1; p++)
		m->refs[p] += 1u + ((prot & PROT_WRITE) ? 1u << 16 : 0);
	m->ranges[m->nranges++] = (struct oa_range){ p0, p1,
						     (prot & PROT_WRITE) != 0 };
	if (f->pending && back_view(f) < 0)
		return NULL;   /* (mapped: oa_munmap or oa_close undoes it) */
	return m->win + off;
}

int oa_map_remove(struct oa_file *f, void *addr, size_t length)
{
	struct oa_map *m = f->map;
	if (!m || (uintptr_t)addr < (uintptr_t)m->win ||
	    ((uintptr_t)addr & (g_pg - 1)) || length == 0) {
		errno = EINVAL;
		return -1;
	}
	uint64_t off = (uint64_t)((char *)addr - m->win);
	uint64_t p0 = off / g_pg, p1 = (off + length + g_pg - 1) / g_pg;
	if (p1 > m->npages) {
		errno = EINVAL;
		return -1;
	}
	long ri = find_range(m, p0, p1);
	if (ri < 0) {
		errno = EINVAL;   /* not (within) a mapping of the handle */
		return -1;
	}
	/* room for the part of it left after the pages, if any */
	if (reserve_range(m) < 0)
		return -1;
	/* the stores of pages about to go stay pending (and the pages are
	 * read-only again: where no writable mapping is left, a store
	 * faults as the program's) */
	if (flush_pages(f, p0 * g_pg, p1 * g_pg, false, true) < 0)
		return -1;
	/* Count down, the writable count too if the mapping was writable:
	 * a page left only in read-only mappings is never captured. */
	struct oa_range *rg = &m->ranges[ri];
	uint32_t dec = 1u + (rg->w ? 1u << 16 : 0);
	for (uint64_t p = p0; p < p1; p++)
		m->refs[p] -= dec;
	if (rg->p0 == p0 && rg->p1 == p1)
		*rg = m->ranges[--m->nranges];
	else if (rg->p0 == p0)
		rg->p0 = p1;
	else if (rg->p1 == p1)
		rg->p1 = p0;
	else {
		m->ranges[m->nranges++] = (struct oa_range){ p1, rg->p1,
							     rg->w };
		rg->p1 = p0;
	}
	for (uint64_t p = p0; p < p1;) {
		if (m->refs[p]) {
			p++;
			continue;
		}
		uint64_t q = run_end(m, p, p1, false);
		for (uint64_t r = p; r < q; r++)
			freeze(m, r);
		mmap(m->win + p * g_pg, (q - p) * g_pg, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		     -1, 0);
		/* The pages' memory is gone, and with it what made them
		 * TOUCHED: mapped again, a page is the file's page until the
		 * pending bytes are shown in it again (show_pending), and
		 * one wholly beyond the committed end needs memory again
		 * (back_anon).  LISTED stays: the page is in m->touched. */
		for (uint64_t r = p; r < q; r++) {
			unsigned char s = atomic_load(&m->st[r]);
			if ((s & PG_TOUCHED) && !(s & PG_SPILLED))
				atomic_fetch_sub(&m->resident, 1);
			unfreeze(m, r, 0, PG_TOUCHED | PG_ANON | PG_SPILLED |
				 PG_BSPILL);
		}
		p = q;
	}
	return 0;
}

/* The handle wrote [off, off + total) into the transaction: its mappings
 * show it. */
int oa_map_wrote(struct oa_file *f, const struct iovec *iov, int iovcnt,
		 uint64_t off)
{
	if (!f->map)
		return 0;
	uint64_t at = off;
	if (back_view(f) < 0)
		return -1;
	for (int i = 0; i < iovcnt; i++) {
		uint64_t a = at, b = at + iov[i].iov_len;
		if (show(f, a, b, iov[i].iov_base) < 0)
			return -1;
		at = b;
	}
	return 0;
}

/* The handle truncated to LEN (the view was OLDV long): the mapped bytes
 * between read as zeros, as the file does. */
int oa_map_truncated(struct oa_file *f, uint64_t len, uint64_t oldv)
{
	struct oa_map *m = f->map;
	if (!m)
		return 0;
	uint64_t a = len < oldv ? len : oldv, b = len < oldv ? oldv : len;
	uint64_t wend = m->npages * g_pg;
	if (b > wend)
		b = wend;
	if (a >= b)
		return 0;
	if (back_view(f) < 0)
		return -1;
	uint64_t pa = (a + g_pg - 1) / g_pg;   /* first whole page */
	uint64_t pb = (b + g_pg - 1) / g_pg;
	if (a < pa * g_pg && show(f, a, pa * g_pg < b ? pa * g_pg : b, NULL) < 0)
		return -1;
	/* whole pages: zeroed memory in their place */
	return zero_pages(m, pa, pb);
}

void oa_map_free(struct oa_file *f)
{
	map_free(f->map);
	f->map = NULL;
}

const char *oa_map_tracking(void)
{
	return "fault";
}
