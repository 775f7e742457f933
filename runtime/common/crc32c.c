/* crc32c.c: CRC-32C (Castagnoli polynomial 0x1EDC6F41, reflected 0x82F63B78,
 * initial and final xor 0xFFFFFFFF), the checksum of checkpoint files.
 * Portable slicing-by-8 (eight table lookups per 8 bytes, ~1-2 GB/s), with
 * tables built on first use; the check value CRC("123456789") = 0xE3069283
 * is tested in tests/runtime. */
#include "common.h"

static uint32_t table[8][256];
static bool ready;

static void build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
        table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xFF];
    ready = true;
}

uint32_t rtc_crc32c(uint32_t crc, const void *data, size_t n)
{
    if (!ready)
        build();
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo = c ^ rtc_get_u32(p);
        uint32_t hi = rtc_get_u32(p + 4);
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
            table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
            table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
    return ~c;
}
