/* safetensors.h: private helpers shared by the safetensors reader and writer. */
#ifndef PTDRT_SAFETENSORS_H
#define PTDRT_SAFETENSORS_H

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
} RtcStBlock;

/* Check the mapping of a parameter block onto the file tensor `name` of
 * shape file_shape and compute the block in file coordinates. */
int rtc_st_map(const char *path, const char *name, int file_ndim, const int64_t *file_shape,
               bool transposed, int part, int nparts, int rank, const int64_t *global,
               const int64_t *offset, const int64_t *local, RtcStBlock *blk, char *err,
               size_t errlen);

#endif
