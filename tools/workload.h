/*
 * workload.h - the deterministic generator of the crash workloads, shared
 * by `oatomic demo` (tools/cmd_demo.c) and the crash tortures
 * (tests/torture_*.c, through tests/util/torture.h).
 *
 * A workload whose every transaction is a pure function of (seed, number)
 * can be checked after a crash by replaying it: the writer and the verifier
 * draw the same numbers from the same generator, and no state has to be
 * saved beside the file.  Both the demo and the tortures are built that
 * way, so they draw from this one generator (splitmix64: a counter stepped
 * by the golden ratio and a mixing finaliser) and fill data with its stream
 * the same way, plus the few I/O loops a writer and a verifier need.  Each
 * keeps its own seeding (how a (seed, number) pair becomes a generator) and
 * its own model of the file: those are what differ between them, and they
 * must not change, or a seed would give another sequence than it always
 * gave.
 *
 * It lives in tools/ because the demo ships in the tool; the tests link its
 * object too (the Makefile's TWL_OBJ).  It uses neither the tool nor the
 * tests, only libc, so the layers stay one way: library <- workload <-
 * demo and tests.
 *
 * The mixer and the stepping are static inline: the tortures' plans draw
 * them by the thousand and fill megabytes with them.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef OA_WORKLOAD_H
#define OA_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* splitmix64's finaliser: a bijection of 64-bit numbers that mixes well. */
static inline uint64_t wl_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* The generator: its state is a counter; each number is the counter,
 * stepped, mixed.  Seeded by setting s. */
struct wl_rng {
	uint64_t s;
};

static inline uint64_t wl_next(struct wl_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ULL;
	return wl_mix(r->s);
}

/* Uniform in [0, n); n > 0.  (The modulo bias is irrelevant here.) */
static inline uint64_t wl_below(struct wl_rng *r, uint64_t n)
{
	return wl_next(r) % n;
}

/* LEN bytes of data from DSEED: the numbers of the generator whose state is
 * DSEED, each stored in host byte order (the last one cut short). */
void wl_fill(uint8_t *buf, uint64_t len, uint64_t dseed);

/* All N bytes to FD, at its offset (write) or at OFF (pwrite), retrying
 * short writes and EINTR.  0, or -1 with errno. */
int wl_write_all(int fd, const void *buf, size_t n);
int wl_pwrite_all(int fd, const void *buf, size_t n, off_t off);

/* Up to N bytes of FD at OFF, retrying short reads and EINTR: the number
 * read (less at end of file), or -1 with errno. */
ssize_t wl_pread_all(int fd, void *buf, size_t n, off_t off);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t wl_now_us(void);

/* Sleep US microseconds, through signals. */
void wl_sleep_us(uint64_t us);

#endif
