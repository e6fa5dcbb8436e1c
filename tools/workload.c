/*
 * workload.c - the generator's data stream and the I/O loops of the crash
 * workloads (see workload.h).
 *
 * SPDX-License-Identifier: MIT
 */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "workload.h"

void wl_fill(uint8_t *buf, uint64_t len, uint64_t dseed)
{
	struct wl_rng r = { dseed };
	uint64_t i = 0, v;

	for (; i + 8 <= len; i += 8) {
		v = wl_next(&r);
		memcpy(buf + i, &v, 8);
	}
	if (i < len) {
		v = wl_next(&r);
		memcpy(buf + i, &v, (size_t)(len - i));
	}
}

/* write (AT < 0) or pwrite at AT, through short writes and EINTR */
static int write_loop(int fd, const char *p, size_t n, off_t at)
{
	while (n) {
		ssize_t w = at < 0 ? write(fd, p, n) : pwrite(fd, p, n, at);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
		if (at >= 0)
			at += w;
	}
	return 0;
}

int wl_write_all(int fd, const void *buf, size_t n)
{
	return write_loop(fd, buf, n, -1);
}

int wl_pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
	if (off < 0) {
		errno = EINVAL;
		return -1;
	}
	return write_loop(fd, buf, n, off);
}

ssize_t wl_pread_all(int fd, void *buf, size_t n, off_t off)
{
	char *p = buf;
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, p + got, n - got, off + (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

uint64_t wl_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

void wl_sleep_us(uint64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000),
			       (long)(us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}
