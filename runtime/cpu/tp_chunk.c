/* tp_chunk.c: the CPU backend's chunked tensor-parallel pairs, from the
 * body both backends share (common/tp_chunk_impl.h). They overlap because
 * rt_iallgather and rt_ireduce_scatter run on the communication thread
 * (comm_async.c) while this thread runs the GEMM pieces. */
#include "cpu.h"

#include "common/tp_chunk_impl.h"
