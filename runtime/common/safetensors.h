/* safetensors.h: private helpers shared by the safetensors reader and writer. */
#ifndef PTDRT_SAFETENSORS_H
#define PTDRT_SAFETENSORS_H

/* The longest array a safetensors header or shard index holds (a shape,
 * two offsets): the JSON parser refuses a longer one at once, so a hostile
 * header costs its tensors' entries, not 46 bytes of memory per byte. */
#define ST_MAX_ARRAY 64

#include "common.h"

/* Bytes per element of a safetensors dtype name, 0 if unknown. */
int rtc_st_dtype_size(const char *name);

/* A parameter block in file coordinates (see rt.h: part, then transpose). */
typedef struct {
    int ndim;
    int64_t shape[RT_ST_MAXDIM];  /* the file tensor's shape the model expects */
    int64_t offset[RT_ST_MAXDIM]; /* block offset in file coordinates */
    int64_t local[RT_ST_MAXDIM];  /* block extent in file coordinates */
    bool transposed;
    /* The last dim's file index of block coordinate i is (offset + i) x
     * stride + phase: stride 1, phase 0 for a whole tensor or a slice (the
     * slice's start is in offset), stride nparts and phase part for parts
     * interleaved (rt.h, RT_ST_INTERLEAVED). */
    int64_t stride, phase;
} RtcStBlock;

/* Check the mapping of a parameter block onto the file tensor `name` of
 * shape file_shape and compute the block in file coordinates. */
int rtc_st_map(const char *path, const char *name, int file_ndim, const int64_t *file_shape,
               bool transposed, int part, int nparts, int rank, const int64_t *global,
               const int64_t *offset, const int64_t *local, RtcStBlock *blk, char *err,
               size_t errlen);

/* One safetensors file (safetensors.c); rt_st_* (safetensors_index.c) opens
 * a file, a Hugging Face directory or a shard index through these. */
typedef struct RtcStFile RtcStFile;
RtcStFile *rtc_stf_open(const char *path, char *err, size_t errlen);
void rtc_stf_close(RtcStFile *st);
int rtc_stf_count(const RtcStFile *st);
const char *rtc_stf_name(const RtcStFile *st, int i);
int rtc_stf_find(const RtcStFile *st, const char *name, int *ndim, int64_t *shape,
                 const char **dtype);
const char *rtc_stf_metadata(const RtcStFile *st, const char *key);
const char *rtc_stf_path(const RtcStFile *st); /* as opened */
/* Not const: it counts the bytes it reads (rtc_stf_bytes_read). */
int rtc_stf_read(RtcStFile *st, const char *name, bool transposed, int part, int nparts,
                 int rank, const int64_t *global, const int64_t *offset, const int64_t *local,
                 float *dst, char *err, size_t errlen);
int64_t rtc_stf_bytes_read(const RtcStFile *st);

/* One file written (safetensors_write.c); rt_st_writer_* (safetensors_shard.c)
 * spreads tensors over several. */
typedef struct RtcStFileWriter RtcStFileWriter;
RtcStFileWriter *rtc_stfw_open(const char *path, const RtStTensor *tensors, int n,
                               const char *dtype, char *err, size_t errlen);
int rtc_stfw_put(RtcStFileWriter *w, const char *name, bool transposed, int part, int nparts,
                 int rank, const int64_t *global, const int64_t *offset, const int64_t *local,
                 const float *src, char *err, size_t errlen);
int rtc_stfw_close(RtcStFileWriter *w, char *err, size_t errlen);
void rtc_stfw_abort(RtcStFileWriter *w);

#endif
