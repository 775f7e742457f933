/* common.h: private declarations shared by runtime/common (host code both
 * backends compile). Not part of the rt.h contract. */
#ifndef PTDRT_COMMON_H
#define PTDRT_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "rt.h"

#ifdef __cplusplus
extern "C" { /* runtime/cuda's C++ files use a few of these */
#endif

/* util.c */
/* rt_matmul_batch's rule, both backends: the batch's GEMMs run together on
 * CUDA, so no C may overlap another GEMM's C, A or B (each cs, as, bs
 * bytes). rt_fatal naming fn and the two GEMMs otherwise. */
void rtc_check_batch(const char *fn, int count, void *const c[], size_t cs, const void *const a[],
                     size_t as, const void *const b[], size_t bs);
/* route_rules.c: the routers' arguments (rt_fatal naming fn otherwise), and
 * the choices an expert keeps per sequence (INT64_MAX when dropless). */
void rtc_check_route(const char *fn, int64_t seqs, int64_t seq_len, int64_t E, const RtRoute *r);
int64_t rtc_route_capacity(const RtRoute *r, int64_t seq_len, int64_t E);
/* moe_wslot.c: each ZB-H1 MoE W slot's rows per local expert, left by B
 * (rt_moe_act_bwd_b) for W (rt_moe_act_bwd_w) on the host, with the layer's
 * key (its dW_down accumulator) and whether W still has to run (pending) or
 * B ran the weight gradients (the slot overflowed). take: the counts of a
 * pending slot, marked run (in_w: by its W; else by an overflowing B's
 * flush), NULL to W when a B ran them; dies naming fn when B has not
 * filled the slot since its last W. oldest: the pending slot of key filled first (its rows_max), NULL
 * when none is. */
void rtc_moe_wslot_put(const void *slot, const void *key, const int64_t *cnt, int64_t el, int64_t rows_max,
                       bool pending);
const int64_t *rtc_moe_wslot_take(const char *fn, const void *slot, int64_t el, int64_t rows_max, bool in_w);
const void *rtc_moe_wslot_oldest(const void *key, int64_t *rows_max);
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
/* Open an existing file read-only, refusing anything but a regular file
 * without blocking on it (a FIFO, a device, a directory): O_NONBLOCK, fstat,
 * then O_NONBLOCK cleared. `what` names the file's role ("checkpoint").
 * Returns the descriptor (st filled when non-NULL), or -1 with err. */
int rtc_open_regular(const char *path, const char *what, struct stat *st, char *err,
                     size_t errlen);
int rtc_mkdirs(const char *dir, char *err, size_t errlen); /* mkdir -p */
int rtc_fsync_dir(const char *dir, char *err, size_t errlen);
/* Write a whole line (a '\n' is appended) to fd with one write(), so lines
 * of several processes sharing a stream never run together. */
void rtc_vwrite_line(int fd, const char *prefix, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
void rtc_write_line(int fd, const char *prefix, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* devpick.c: the visible index of the GPU local rank `me` takes. ids holds,
 * per local rank, maxvis identifiers (PCI bus ids) of RTC_DEVID_LEN bytes,
 * nvis[r] of them used, in the rank's visible order. -1 with err when the
 * rank's GPUs are all taken by other ranks. */
enum { RTC_DEVID_LEN = 32 };
int rtc_pick_device(int me, int nlocal, const int *nvis, const char *ids, int maxvis, char *err,
                    size_t errlen);

/* A growable NUL-terminated byte string (JSON headers, read and written). */
typedef struct {
    char *s;
    size_t len, cap;
} RtcStr;
void rtc_str_add(RtcStr *b, const void *src, size_t n); /* rt_fatal when out of memory */
void rtc_str_fmt(RtcStr *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rtc_str_json(RtcStr *b, const char *s); /* a JSON string literal, escaped */

/* Little-endian stores and loads (files are little-endian on every host). */
void rtc_put_u32(unsigned char *p, uint32_t v);
void rtc_put_u64(unsigned char *p, uint64_t v);
uint32_t rtc_get_u32(const unsigned char *p);
uint64_t rtc_get_u64(const unsigned char *p);

/* ckpt_file.c, ckpt_manifest.c, ckpt_dir.c: version-2 checkpoints (rt.h). */
#define RTC_CK_HEADER 96
#define RTC_CK_TRAILER 8
#define RTC_CK_MAX_NAME 4095
#define RTC_CK_STAGE ((size_t)16 << 20) /* host staging buffer, at most */
#define RTC_CK_MAX_INDEX ((uint64_t)1 << 30) /* a larger index is a corrupted one */
#define RTC_MF_NAME "manifest.json"
size_t rtc_dtype_size(RtDtype t);       /* 0: not a dtype */
const char *rtc_dtype_name(RtDtype t);  /* "F32" ...; "?" */
RtDtype rtc_dtype_parse(const char *s); /* 0: unknown */
/* "[8, 8, 64]" into buf. */
const char *rtc_shape_str(int ndim, const int64_t *shape, char *buf, size_t len);
/* One blob as a rank file's index records it. */
typedef struct {
    char *name;
    RtDtype dtype;
    int ndim;
    int64_t global[RT_CKPT_MAXDIM], offset[RT_CKPT_MAXDIM], local[RT_CKPT_MAXDIM];
    int64_t flat_start, flat_count;
    uint64_t pos, bytes; /* in the payload */
} RtcCkEntry;
/* The fixed header of a rank file (the first RTC_CK_HEADER bytes). */
typedef struct {
    uint32_t version, count, rank, world, hash_len;
    int64_t step, data_pos;
    uint64_t index_bytes, payload_bytes, file_bytes;
    uint8_t run_id[RT_RUN_ID_BYTES];
} RtcCkHeader;
/* Check a save's description and its blobs (names, dtypes, blocks, sizes). */
int rtc_ck_check_meta(const char *path, const RtCkptMeta *m, char *err, size_t errlen);
int rtc_ck_check_blobs(const char *path, const RtCkptBlob *b, int n, char *err, size_t errlen);
/* Write one rank file atomically at path; *crc and *bytes describe it. The
 * blobs' data is backend memory, or host memory when `host` (written as it
 * is, with no backend call: rt_ckpt_write_host). */
int rtc_ck_write_file(const char *path, const RtCkptMeta *m, const RtCkptBlob *b, int n,
                      bool host, uint32_t *crc, uint64_t *bytes, char *err, size_t errlen);
/* Decode the fixed header of a version-2 file (magic and version checked). */
int rtc_ck_decode_header(const unsigned char *h, const char *path, RtcCkHeader *out, char *err,
                         size_t errlen);
/* Read and check the plan hash and index of a file of `size` bytes whose
 * header is hd; on success *hash (NUL-terminated), *entries (hd->count) and
 * *raw (header, plan hash and index as stored: what the CRC starts with,
 * RTC_CK_HEADER + hd->index_bytes bytes) belong to the caller (free
 * rtc_ck_entries_free, free). */
int rtc_ck_read_index(int fd, const char *path, const RtcCkHeader *hd, char **hash,
                      RtcCkEntry **entries, unsigned char **raw, char *err, size_t errlen);
/* The same from raw (RTC_CK_HEADER + hd->index_bytes bytes as stored, the
 * caller's): what a member of a group that shares the reading received. */
int rtc_ck_parse_index(const unsigned char *raw, const char *path, const RtcCkHeader *hd,
                       char **hash, RtcCkEntry **entries, char *err, size_t errlen);
void rtc_ck_entries_free(RtcCkEntry *e, uint32_t n);
/* A step's manifest, read and checked (ckpt_manifest.c). */
typedef struct {
    uint64_t bytes;
    uint32_t crc;
} RtcMfFile;
struct RtCkpt {
    char *dir; /* the step directory */
    int64_t step, data_pos;
    int world;
    uint8_t run_id[RT_RUN_ID_BYTES];
    uint8_t lineage[RT_RUN_ID_BYTES], parent_lineage[RT_RUN_ID_BYTES];
    int64_t parent_step; /* -1: none */
    char *plan_hash;
    char *optimizer;
    RtcMfFile *files; /* by rank: rank%05d.ckpt */
    RtCkptTensor *tensors; /* the model; names owned */
    int ntensors;
};
/* Read DIR/manifest.json (regular file, CRC line, strict JSON, fields). */
RtCkpt *rtc_mf_read(const char *stepdir, char *err, size_t errlen);
/* Write DIR/manifest.json atomically (temporary, fsync, rename, fsync). */
int rtc_mf_write(const char *stepdir, const RtCkptMeta *m, const RtCkptRecord *recs,
                 const RtCkptTensor *model, int nmodel, char *err, size_t errlen);
/* Rank r's file against the manifest, from its header and trailer only
 * (ckpt_dir.c): whose it is, its size and stored CRC. On success *fd is the
 * open file (when fd is non-NULL) and *hd its header. */
int rtc_ck_rank_file_problem(const RtCkpt *c, int r, int *fd, RtcCkHeader *hd, char *err,
                             size_t errlen);
/* meta's lineage (its run id when the lineage is all zero); whether it
 * names a parent (ckpt_manifest.c). */
const uint8_t *rtc_ck_lineage(const RtCkptMeta *m);
bool rtc_ck_has_parent(const RtCkptMeta *m);
/* "DIR/rank00003.ckpt" (malloc'd). */
char *rtc_ck_rank_path(const char *stepdir, int rank);

/* Defined by each backend (runtime/cpu/attention_merge.c,
 * runtime/cuda/attention_merge.cu): sizeof(rt_act) there. The common objects
 * are compiled once, without PTDC_CUDA, so code here that lays out rt_act
 * buffers (attention_ring.c) asks. */
size_t rtc_act_bytes(void);

/* launcher.c: has this rank's launcher died? (watchdog threads ask) */
void rtc_launcher_init(void); /* at start-up, before the watchdog thread */
bool rtc_launcher_gone(char *what, size_t len);

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
/* fp8.c: one FP8 code from a float (round to nearest even, saturating to
 * +-max, NaN -> 0x7F) and its value (exact; NaN for NaN codes). */
uint8_t rtc_fp8_encode(float x, RtFp8Format f);
float rtc_fp8_decode(uint8_t c, RtFp8Format f);
/* rt_matmul_fp8's rules (cuBLASLt's for FP8: K and N multiples of 16, not
 * both operands E5M2), checked on both backends so that a program the CPU
 * runs also runs on a GPU; rt_fatal naming fn otherwise. */
void rtc_check_matmul_fp8(const char *fn, RtFp8Format fa, RtFp8Format fb, int64_t M, int64_t N, int64_t K);
void rtc_check_fp8_format(const char *fn, RtFp8Format f); /* rt_fatal unless E4M3 or E5M2 */
uint16_t rtc_f32_to_f16(float f); /* round to nearest even; overflow to infinity */

/* shape.c: iterate a block of a row-major tensor. */
int64_t rtc_numel(int rank, const int64_t *shape);
/* Check a block lies inside global; returns 0 or -1 with err. */
int rtc_check_block(int rank, const int64_t *global, const int64_t *offset, const int64_t *local,
                    const char *what, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
