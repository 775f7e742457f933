/* records.h: the calibration records, written once. ptdc-measure prints
 * them on stdout (rank 0, cal_out); `ptdc calibrate` reads them
 * (calibrate/cal_records.c, which includes this header). One record a line:
 * a keyword, then fields separated by spaces. For each record: its printf
 * format (keyword included) and its token count (keyword included); the
 * fields' meaning is docs/cost-model.md's "Calibration records".
 * Standalone: no rt.h (the compiler includes it). */
#ifndef PTDC_MEASURE_RECORDS_H
#define PTDC_MEASURE_RECORDS_H

/* The first record: `key value` pairs (backend, ranks, act_bytes, host, part;
 * a reader also takes threads). */
#define CAL_REC_META "meta"
#define CAL_FMT_META "meta backend %s ranks %d act_bytes %d host %s part %s"
/* M N K ta tb seconds */
#define CAL_REC_GEMM "gemm"
#define CAL_FMT_GEMM "gemm %lld %lld %lld %d %d %.9g"
enum { CAL_NTOK_GEMM = 7 };
/* kernel rows cols seconds */
#define CAL_REC_KERN "kern"
#define CAL_FMT_KERN "kern %s %lld %lld %.9g"
enum { CAL_NTOK_KERN = 5 };
/* fwd|bwd B S H KVH D causal seconds */
#define CAL_REC_ATTN "attn"
#define CAL_FMT_ATTN "attn %s %lld %lld %lld %lld %lld %d %.9g"
enum { CAL_NTOK_ATTN = 9 };
/* collective group nodes per_node bytes seconds (collective: CAL_COLL_NAMES) */
#define CAL_REC_COLL "coll"
#define CAL_FMT_COLL "coll %s %d %d %d %lld %.9g"
enum { CAL_NTOK_COLL = 7 };
/* rank node */
#define CAL_REC_NODE "node"
#define CAL_FMT_NODE "node %d %d"
enum { CAL_NTOK_NODE = 3 };
/* base|comm bytes */
#define CAL_REC_MEM "mem"
#define CAL_FMT_MEM_BASE "mem base %.0f"
#define CAL_FMT_MEM_COMM "mem comm %.0f"
enum { CAL_NTOK_MEM = 3 };
/* sequence seconds */
#define CAL_REC_HOST "host"
#define CAL_FMT_HOST "host %lld %.9g"
enum { CAL_NTOK_HOST = 3 };
/* ranks cpus t_all t_half */
#define CAL_REC_SHARE "share"
#define CAL_FMT_SHARE "share %d %d %.9g %.9g"
enum { CAL_NTOK_SHARE = 5 };
/* ranks cpus gemms t_all t_sync (reported, not fitted) */
#define CAL_REC_SHARE_SYNC "share_sync"
#define CAL_FMT_SHARE_SYNC "share_sync %d %d %d %.9g %.9g"
enum { CAL_NTOK_SHARE_SYNC = 6 };
/* ranks cpus gemm|mem segment_seconds wait_fraction */
#define CAL_REC_SYNC "sync"
#define CAL_FMT_SYNC "sync %d %d %s %.9g %.9g"
enum { CAL_NTOK_SYNC = 6 };
/* the last record: the measurement finished */
#define CAL_REC_END "end"
#define CAL_FMT_END "end"
enum { CAL_NTOK_END = 1 };

/* The collectives of `coll` records, in this order. */
enum { CAL_ALLREDUCE, CAL_REDUCESCATTER, CAL_ALLGATHER, CAL_ALLTOALL, CAL_SENDRECV, CAL_NCOLL };
#define CAL_COLL_NAMES {"allreduce", "reduce_scatter", "allgather", "alltoall", "sendrecv"}

#endif
