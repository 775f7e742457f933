/* train_state.c: the state every part of the trainer reads: the globals
 * generated code uses (trainer.h), the flags and this rank's place in the
 * world (train.h). Set up by trainer.c's main. */
#include "train.h"

RtComm *g_comm[8];
int g_coord[3];
float *g_loss;
rt_act *g_scratch, *g_ws_act;
float *g_ws_f32;
int32_t *g_ws_i32;

Flags tr_fl;
const CgRank *tr_prog;           /* what this rank's pipeline rank runs */
int tr_pp_rank, tr_mesh_index, tr_world_rank;
RtComm *tr_world, *tr_tied[64];
int64_t tr_step;                 /* steps done */
int64_t tr_data_pos;             /* sequences consumed */

int tr_mesh_size(int a) { return a == 0 ? CG_MESH0 : a == 1 ? CG_MESH1 : CG_MESH2; }

void tr_block(const CgParam *p, int64_t *off, int64_t *loc)
{
    for (int i = 0; i < p->rank; i++) {
        /* Nested in axis order: the block index is outer-major. */
        int64_t ways = 1, index = 0;
        for (int a = 0; a < CG_NAXES; a++)
            if (p->split_axes[i] >> a & 1) {
                ways *= tr_mesh_size(a);
                index = index * tr_mesh_size(a) + g_coord[a];
            }
        loc[i] = p->global[i] / ways;
        off[i] = index * loc[i];
    }
}
