/* tp_chunk.c: the CPU backend's chunked tensor-parallel pairs, from the
 * body both backends share (common/tp_chunk_impl.h). They overlap because
 * rt_iallgather and rt_ireduce_scatter run on the communication thread
 * (comm_async.c) while this thread runs the GEMM pieces; quietly (asleep
 * until the other members arrive), so that the thread's waiting does not
 * take the core from those GEMMs (bench/tp-overlap). */
#include "cpu.h"

#define TPC_IALLGATHER rtcpu_iallgather_quiet
#define TPC_IREDUCE_SCATTER rtcpu_ireduce_scatter_quiet

#include "common/tp_chunk_impl.h"
