/* train_state.c: the state every part of the trainer reads: the globals
 * generated code uses (trainer.h), the flags and this rank's place in the
 * world (train.h). Set up by trainer.c's main. */
#include "train.h"

RtComm *g_comm[4];
int g_coord[2];
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
