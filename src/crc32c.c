/*
 * crc32c.c - CRC-32C with the SSE4.2 instruction where the CPU has it (chosen
 * once, at first use) and a slicing-by-one table otherwise.
 */
#include <string.h>
#include "crc32c.h"

static uint32_t table[256];

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
		table[i] = c;
	}
}

static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t n)
{
	while (n--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t n)
{
	uint64_t c = crc;
	while (n && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
		n--;
	}
	while (n >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}
#endif

static int mode; /* 0 unknown, 1 software, 2 hardware */

uint32_t oa_crc32c(uint32_t crc, const void *p, size_t n)
{
	if (__builtin_expect(mode == 0, 0)) {
		table_init();
#if defined(__x86_64__)
		__builtin_cpu_init();
		mode = __builtin_cpu_supports("sse4.2") ? 2 : 1;
#else
		mode = 1;
#endif
	}
	crc = ~crc;
#if defined(__x86_64__)
	if (mode == 2)
		return ~crc_hw(crc, p, n);
#endif
	return ~crc_sw(crc, p, n);
}
