/* cg_abi.c: the contract with the trainer (runtime/trainer/model_abi.h)
 * against what cg_print.c prints. model.c's CgParam and CgRank entries are
 * positional initializers: print_params prints CgParam's fields from name to
 * nready, then a 0 for each field its bind function sets; print_rank_entry
 * prints every field of CgRank, total and mem as rows of CG_NTYPES. A field
 * moved, added or removed in model_abi.h stops ptdc compiling here (fix
 * cg_print.c with it) instead of every generated program miscompiling. */
#include "cg.h"

#include <stddef.h>

#define FOLLOWS(T, a, b)                                                                      \
    _Static_assert(offsetof(T, a) < offsetof(T, b), #T "." #b " must follow " #a " (model_abi.h)")
#define LAST(T, a)                                                                            \
    _Static_assert(offsetof(T, a) + sizeof(((T *)0)->a) == sizeof(T),                        \
                   #T "." #a " must be the last field (model_abi.h)")

FOLLOWS(CgParam, name, hf_name);
FOLLOWS(CgParam, hf_name, hf_transposed);
FOLLOWS(CgParam, hf_transposed, hf_part);
FOLLOWS(CgParam, hf_part, hf_nparts);
FOLLOWS(CgParam, hf_nparts, hf_interleaved);
FOLLOWS(CgParam, hf_interleaved, rank);
FOLLOWS(CgParam, rank, global);
FOLLOWS(CgParam, global, split_axes);
FOLLOWS(CgParam, split_axes, hf_split);
FOLLOWS(CgParam, hf_split, init);
FOLLOWS(CgParam, init, std);
FOLLOWS(CgParam, std, decay);
FOLLOWS(CgParam, decay, numel);
FOLLOWS(CgParam, numel, pmask);
FOLLOWS(CgParam, pmask, zshard);
FOLLOWS(CgParam, zshard, shard);
FOLLOWS(CgParam, shard, norm_mask);
FOLLOWS(CgParam, norm_mask, tied);
FOLLOWS(CgParam, tied, primary);
FOLLOWS(CgParam, primary, bucket);
FOLLOWS(CgParam, bucket, nready);
/* the six fields bind sets, printed as 0 */
FOLLOWS(CgParam, nready, param);
FOLLOWS(CgParam, param, grad);
FOLLOWS(CgParam, grad, grad_shard);
FOLLOWS(CgParam, grad_shard, master);
FOLLOWS(CgParam, master, m);
FOLLOWS(CgParam, m, v);
LAST(CgParam, v);
_Static_assert(sizeof(((CgParam *)0)->global) == CG_MAX_RANK * sizeof(int64_t) &&
                   sizeof(((CgParam *)0)->split_axes) == CG_MAX_RANK * sizeof(int),
               "CgParam's dims are CG_MAX_RANK wide");

FOLLOWS(CgRank, nchunks, forward);
FOLLOWS(CgRank, forward, backward);
FOLLOWS(CgRank, backward, nslots);
FOLLOWS(CgRank, nslots, sched);
FOLLOWS(CgRank, sched, nsched);
FOLLOWS(CgRank, nsched, params);
FOLLOWS(CgRank, params, nparams);
FOLLOWS(CgRank, nparams, bucket_params);
FOLLOWS(CgRank, bucket_params, bucket_start);
FOLLOWS(CgRank, bucket_start, nbuckets);
FOLLOWS(CgRank, nbuckets, bind);
FOLLOWS(CgRank, bind, wait_sends);
FOLLOWS(CgRank, wait_sends, total);
FOLLOWS(CgRank, total, mem);
LAST(CgRank, mem);
_Static_assert(CG_NTYPES == 3, "print_rank_entry prints total and mem rows as {A, F, I}");
_Static_assert(sizeof(((CgRank *)0)->mem) == sizeof(((CgRankProg *)0)->mem),
               "the memory plan's rows are model_abi.h's CG_MEM_N");
/* A rank's chunks: codegen's tables and the printed arrays have one size. */
_Static_assert(sizeof(((CgRankProg *)0)->stage) == CG_MAX_CHUNKS * sizeof(int) &&
                   sizeof(((CgRankProg *)0)->nslots) == CG_MAX_CHUNKS * sizeof(int),
               "CgRankProg's chunk tables are CG_MAX_CHUNKS long");
_Static_assert(CG_MAX_CHUNKS == PLAN_PROG_MAX_CHUNKS, "plan.h's PLAN_PROG_MAX_CHUNKS is the programs' limit");
