/* crc32c.h - CRC-32C (Castagnoli), the checksum of every oatomic record. */
#ifndef OA_CRC32C_H
#define OA_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* Continue CRC (start with 0) over N bytes of P.  Standard CRC-32C:
 * oa_crc32c(0, "123456789", 9) == 0xe3069283. */
uint32_t oa_crc32c(uint32_t crc, const void *p, size_t n);

#endif
