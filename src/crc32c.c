/*
 * crc32c.c - CRC-32C through ISA-L (Intel's storage acceleration library,
 * Debian's libisal), which picks the fastest code the CPU has at run time
 * (PCLMULQDQ/VPCLMULQDQ folding; a table on CPUs without them).  A 256 MiB
 * transaction checksums every byte it writes, so this is on the big-write
 * path: ISA-L takes ~10 ms for 256 MiB here where one stream of the SSE4.2
 * crc32 instruction took ~30 ms (docs/BENCHMARKS.md).
 *
 * ISA-L's crc32_iscsi() is the bare reflected CRC (no inversions) with an
 * int length: the standard pre- and post-inversion are done here, and long
 * buffers go in pieces.
 */
#include <limits.h>
#include <isa-l/crc.h>
#include "crc32c.h"

uint32_t oa_crc32c(uint32_t crc, const void *p, size_t n)
{
	unsigned char *b = (unsigned char *)p;   /* ISA-L does not write it */
	unsigned c = ~crc;
	while (n > 0) {
		size_t k = n < (1u << 30) ? n : (1u << 30);
		c = crc32_iscsi(b, (int)k, c);
		b += k;
		n -= k;
	}
	return ~c;
}
