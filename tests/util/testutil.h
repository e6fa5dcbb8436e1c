/*
 * testutil.h - helpers for the oatomic tests.
 *
 * Every test is one program: exit 0 = pass, 1 = fail, 77 = skip (after a line
 * "SKIP: reason").  tests/run gives each test a fresh scratch directory in
 * $OA_TEST_DIR; run by hand, a test makes its own under $TMPDIR and removes
 * it at exit.
 *
 * The CHECK macros print file:line, the failing expression and errno, then
 * exit(1).  They work in threads and in forked children (a child's exit
 * status carries the failure to the parent, see tu_run_child).
 *
 * File helpers use plain system calls, never the library, so a test can
 * compare what the library claims with what is really in the file.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OA_TESTUTIL_H
#define OA_TESTUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "oatomic.h"
#include "oatomic-private.h"

#define TU_SKIP 77

#if defined(__SANITIZE_ADDRESS__)
#define TU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TU_ASAN 1
#endif
#endif
#ifndef TU_ASAN
#define TU_ASAN 0
#endif

/* ---- failing and skipping ---------------------------------------------- */

/* Print "FILE:LINE: WHAT" (and errno ERR when ERR != 0), exit(1). */
void tu_fail(const char *file, int line, int err, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 4, 5)));
/* Print "SKIP: reason", exit(77). */
void tu_skip(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));
/* Print "NOTE: ..." to stdout (shown by tests/run on failure only). */
void tu_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* COND must hold. */
#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			int e_ = errno;					\
			tu_fail(__FILE__, __LINE__, e_,			\
				"CHECK(%s) failed", #cond);		\
		}							\
	} while (0)

/* COND must hold; on failure also print a message. */
#define CHECKF(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			int e_ = errno;					\
			fprintf(stderr, "  ");				\
			fprintf(stderr, __VA_ARGS__);			\
			fprintf(stderr, "\n");				\
			tu_fail(__FILE__, __LINE__, e_,			\
				"CHECK(%s) failed", #cond);		\
		}							\
	} while (0)

/* Integers A and B must be equal (compared as long long). */
#define CHECK_EQ(a, b)							\
	do {								\
		long long a_ = (long long)(a), b_ = (long long)(b);	\
		if (a_ != b_) {						\
			int e_ = errno;					\
			tu_fail(__FILE__, __LINE__, e_,			\
				"CHECK_EQ(%s, %s) failed: %lld != %lld",	\
				#a, #b, a_, b_);			\
		}							\
	} while (0)

/* A call returning int/ssize_t must return 0. */
#define CHECK_OK(expr)							\
	do {								\
		long long r_ = (long long)(expr);			\
		if (r_ != 0) {						\
			int e_ = errno;					\
			tu_fail(__FILE__, __LINE__, e_,			\
				"CHECK_OK(%s) failed: returned %lld",	\
				#expr, r_);				\
		}							\
	} while (0)

/* A call returning int/ssize_t must fail with -1 and errno ERR. */
#define CHECK_ERR(expr, err)						\
	do {								\
		errno = 0;						\
		long long r_ = (long long)(expr);			\
		int e_ = errno;						\
		if (r_ != -1 || e_ != (err)) {				\
			tu_fail(__FILE__, __LINE__, e_,			\
				"CHECK_ERR(%s, %s) failed: returned %lld, " \
				"wanted -1 with %s", #expr, #err, r_,	\
				tu_errname(err));			\
		}							\
	} while (0)

/* A call returning a pointer must return NULL with errno ERR. */
#define CHECK_NULL_ERR(expr, err)					\
	do {								\
		errno = 0;						\
		const void *p_ = (const void *)(expr);			\
		int e_ = errno;						\
		if (p_ != NULL || e_ != (err)) {			\
			tu_fail(__FILE__, __LINE__, e_,			\
				"CHECK_NULL_ERR(%s, %s) failed: returned %p, " \
				"wanted NULL with %s", #expr, #err, p_,	\
				tu_errname(err));			\
		}							\
	} while (0)

/* N bytes at GOT must equal those at WANT; prints the first difference. */
#define CHECK_MEM(got, want, n)						\
	tu_check_mem(__FILE__, __LINE__, #got, (got), (want), (n), 0)
/* Same, with BASE (a file offset) added to the offsets printed. */
#define CHECK_MEM_AT(got, want, n, base)				\
	tu_check_mem(__FILE__, __LINE__, #got, (got), (want), (n), (base))
void tu_check_mem(const char *file, int line, const char *what,
		  const void *got, const void *want, size_t n, uint64_t base);

/* "EBADF" for EBADF, ... ("E?" plus the number for others). */
const char *tu_errname(int err);

/* ---- the scratch directory and paths ----------------------------------- */

/* The scratch directory: $OA_TEST_DIR, else a fresh mkdtemp() directory that
 * is removed at exit of the process that made it. */
const char *tu_dir(void);
/* tu_dir()/NAME (printf format).  The string lives until exit. */
const char *tu_path(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The library's files beside PATH: ".NAME.oa" and ".NAME.oaj-K". */
const char *tu_control_path(const char *path);
const char *tu_journal_path(const char *path, int k);
/* Remove PATH's control and journal files (all ".NAME.oa*"). */
void tu_remove_journals(const char *path);
/* Number of files ".NAME.oa*" beside PATH. */
int tu_count_journals(const char *path);

/* ---- whole files through plain system calls ---------------------------- */

/* Create or truncate PATH with MODE, write N bytes, fsync, close. */
void tu_write_file(const char *path, const void *buf, size_t n, mode_t mode);
/* Read all of PATH; returns malloc'd memory (free it), size in *N (a zero
 * size still returns a valid pointer).  Fails the test if PATH is missing. */
void *tu_read_file(const char *path, size_t *n);
/* Size of PATH (stat), or -1 if it does not exist. */
off_t tu_file_size(const char *path);
/* PATH's N bytes at OFF equal WANT and its size equals SIZE (if SIZE >= 0). */
#define CHECK_FILE(path, want, n, size)					\
	tu_check_file(__FILE__, __LINE__, (path), (want), (n), (size))
void tu_check_file(const char *file, int line, const char *path,
		   const void *want, size_t n, off_t size);
/* pread/pwrite the whole buffer or fail the test. */
void tu_pread_full(int fd, void *buf, size_t n, off_t off);
void tu_pwrite_full(int fd, const void *buf, size_t n, off_t off);

/* ---- the library, checked ---------------------------------------------- */

/* oa_open that fails the test on NULL. */
#define tu_oa_open(path, flags, mode)					\
	tu_oa_open_at(__FILE__, __LINE__, (path), (flags), (mode))
oa_file *tu_oa_open_at(const char *file, int line, const char *path,
		       int flags, mode_t mode);
/* oa_pwrite/oa_pread of exactly N bytes, or fail. */
#define tu_oa_pwrite(f, buf, n, off)					\
	tu_oa_pwrite_at(__FILE__, __LINE__, (f), (buf), (n), (off))
#define tu_oa_pread(f, buf, n, off)					\
	tu_oa_pread_at(__FILE__, __LINE__, (f), (buf), (n), (off))
void tu_oa_pwrite_at(const char *file, int line, oa_file *f, const void *buf,
		     size_t n, off_t off);
void tu_oa_pread_at(const char *file, int line, oa_file *f, void *buf,
		    size_t n, off_t off);
/* One transaction through a handle of its own: oa_open(PATH, O_RDWR), N
 * bytes of BUF at OFF, oa_commit, oa_close; or fail. */
#define tu_oa_update(path, buf, n, off)					\
	tu_oa_update_at(__FILE__, __LINE__, (path), (buf), (n), (off))
void tu_oa_update_at(const char *file, int line, const char *path,
		     const void *buf, size_t n, off_t off);
/* Read the whole file through the handle (oa_fstat size); malloc'd. */
void *tu_oa_read_all(oa_file *f, size_t *n);
/* The handle's view (size and bytes) equals WANT of N bytes. */
#define CHECK_OA_VIEW(f, want, n)					\
	tu_check_oa_view(__FILE__, __LINE__, (f), (want), (n))
void tu_check_oa_view(const char *file, int line, oa_file *f,
		      const void *want, size_t n);

/*
 * Crash a commit: in a child, oa_open(PATH, O_RDWR | O_CREAT), call
 * WRITE(f, ARG) to make the transaction, oa__set_killpoint(POINT), then
 * oa_commit and oa_close (kill points 5 and 6 are in the checkpoint, which the
 * last close runs).  Returns 1 if the child died by SIGKILL at the kill point,
 * 0 if it ran to the end without hitting it; fails the test on anything else
 * (the child's own CHECKs included).  No handle on PATH may be open in the
 * caller when POINT is a checkpoint point.
 */
int tu_crash_commit(const char *path, int point,
		    void (*write)(oa_file *f, void *arg), void *arg);

/* ---- data patterns ----------------------------------------------------- */

/* Fill BUF with N bytes of pattern SEED as it lies at file offset OFF: the
 * byte at file offset X depends only on (SEED, X), so any slice can be
 * regenerated and checked.  SEED 0 is all zeros. */
void tu_fill(void *buf, size_t n, uint64_t seed, uint64_t off);
/* Offset in BUF of the first byte that differs from the pattern, or -1. */
long long tu_find_mismatch(const void *buf, size_t n, uint64_t seed,
			   uint64_t off);
/* Fill with a repeated 64-bit STAMP (for "one transaction throughout"). */
void tu_fill_stamp(void *buf, size_t n, uint64_t stamp);
/* The stamp found at the start of BUF (N >= 8). */
uint64_t tu_get_stamp(const void *buf);
/* 1 if every 8-byte word of BUF (N a multiple of 8) equals STAMP. */
int tu_is_stamp(const void *buf, size_t n, uint64_t stamp);
/* 64-bit FNV-1a of BUF, continued from H (start with TU_HASH_INIT). */
#define TU_HASH_INIT 0xcbf29ce484222325ULL
uint64_t tu_hash(uint64_t h, const void *buf, size_t n);
/* A small fast PRNG (xorshift64*); *STATE must not be 0. */
uint64_t tu_rand(uint64_t *state);
/* Seed from $OA_TEST_SEED or the clock; printed once as NOTE. */
uint64_t tu_seed(void);

/* ---- processes ----------------------------------------------------------- */

/* Run FN(ARG) in a forked child that exits with FN's return value (stdio is
 * flushed first).  Returns the child's pid. */
pid_t tu_fork(int (*fn)(void *), void *arg);
/* Wait for PID; returns the raw wait status. */
int tu_wait(pid_t pid);
/* In a child that loops until its parent tells it to stop: die with the
 * parent PARENT (getpid() before the fork), so that a test that fails
 * leaves no reader spinning behind it. */
void tu_die_with_parent(pid_t parent);
/* Run FN(ARG) in a child and wait: returns the raw wait status. */
int tu_run_child(int (*fn)(void *), void *arg);
/* Fail unless STATUS says "exited with 0". */
#define CHECK_CHILD_OK(status)						\
	tu_check_child_ok(__FILE__, __LINE__, (status))
void tu_check_child_ok(const char *file, int line, int status);
/* Describe a wait status ("exit 1", "signal 9", ...), static buffer. */
const char *tu_status_str(int status);
/* Kill the test after SECONDS (default message names the test). */
void tu_alarm(unsigned seconds);

/* ---- misc ---------------------------------------------------------------- */

double tu_now(void);                  /* CLOCK_MONOTONIC seconds */
void *tu_malloc(size_t n);            /* or fail */
void *tu_zalloc(size_t n);            /* zeroed, or fail */
int tu_is_root(void);
/* A tmpfs of SIZE ("8m") mounted at tu_path(NAME), unmounted at exit (by
 * the process that mounted it) or by tu_tmpfs_done; NULL, with a note
 * saying why, where it cannot be (not root, no mount). */
const char *tu_tmpfs(const char *name, const char *size);
void tu_tmpfs_done(const char *mnt);
/* statfs f_type name of PATH ("ext4", "tmpfs", "xfs", "btrfs", ...). */
const char *tu_fs_name(const char *path);
/* Free bytes for an unprivileged user on PATH's file system. */
uint64_t tu_free_bytes(const char *path);
/* For tests that aim kill points and damage at the journal's commit protocol:
 * handles opened with OA_METHOD_AUTO use that protocol (the journal, or the
 * clone method where OATOMIC_METHOD asks for it), never the kernel method,
 * whose commits do not go through the journal at all. */
void tu_pin_journal(void);
/* Back to the method the environment asked for. */
void tu_unpin_journal(void);

#endif /* OA_TESTUTIL_H */
