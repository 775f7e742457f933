/* common.h: private declarations shared by runtime/common (host code both
 * backends compile). Not part of the rt.h contract. */
#ifndef PTDRT_COMMON_H
#define PTDRT_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt.h"

/* util.c */
void *rtc_xmalloc(size_t bytes);           /* rt_fatal on failure; never NULL */
void *rtc_xcalloc(size_t n, size_t size);
char *rtc_xstrdup(const char *s);
/* Format a sentence into err (when non-NULL) and return -1. */
int rtc_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Atomic file replacement: open a unique temporary next to `path`. */
typedef struct {
    int fd;
    char *path;   /* final name */
    char *tmp;    /* temporary name */
} RtcAtomic;
int rtc_atomic_open(RtcAtomic *a, const char *path, char *err, size_t errlen);
int rtc_write_all(int fd, const void *buf, size_t n, int64_t offset, const char *path, char *err,
                  size_t errlen); /* pwrite at offset, or write when offset < 0 */
/* fsync the temporary, rename it over path, fsync the directory. Frees a. */
int rtc_atomic_commit(RtcAtomic *a, char *err, size_t errlen);
void rtc_atomic_abort(RtcAtomic *a); /* close and unlink the temporary; frees a */
int rtc_read_all(int fd, void *buf, size_t n, int64_t offset, const char *path, char *err,
                 size_t errlen); /* pread; a short read is an error ("truncated") */

/* A growable NUL-terminated byte string (JSON headers, read and written). */
typedef struct {
    char *s;
    size_t len, cap;
} RtcStr;
void rtc_str_add(RtcStr *b, const void *src, size_t n); /* rt_fatal when out of memory */

/* Little-endian stores and loads (files are little-endian on every host). */
void rtc_put_u32(unsigned char *p, uint32_t v);
void rtc_put_u64(unsigned char *p, uint64_t v);
uint32_t rtc_get_u32(const unsigned char *p);
uint64_t rtc_get_u64(const unsigned char *p);

/* crc32c.c: CRC-32C (Castagnoli, reflected, as in iSCSI/ext4). Start with
 * crc = 0; feed chunks; the result of one call is the CRC of the bytes so far. */
uint32_t rtc_crc32c(uint32_t crc, const void *data, size_t n);

/* rng.c: Philox-4x32-10 (Salmon et al., SC'11) and the platform-independent
 * maths behind the normal initialiser. */
void rtc_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
double rtc_log(double x);      /* x > 0, finite */
double rtc_cos2pi(double u);   /* cos(2 pi u) for u in [0, 1) */
/* Standard normal for element `index` of the stream `key` (Box-Muller). */
double rtc_normal(uint64_t key, uint64_t index);
uint64_t rtc_mix64(uint64_t x); /* splitmix64 finaliser */

/* half.c: fp16 / bf16 <-> fp32 */
float rtc_bf16_to_f32(uint16_t h);
uint16_t rtc_f32_to_bf16(float f); /* round to nearest even, NaN stays NaN */
float rtc_f16_to_f32(uint16_t h);
uint16_t rtc_f32_to_f16(float f); /* round to nearest even; overflow to infinity */

/* shape.c: iterate a block of a row-major tensor. */
int64_t rtc_numel(int rank, const int64_t *shape);
/* Check a block lies inside global; returns 0 or -1 with err. */
int rtc_check_block(int rank, const int64_t *global, const int64_t *offset, const int64_t *local,
                    const char *what, char *err, size_t errlen);

#endif
