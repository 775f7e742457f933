/* tp_chunk.cu: the CUDA backend's chunked tensor-parallel pairs, from the
 * body both backends share (common/tp_chunk_impl.h): the non-blocking
 * collectives run on the communicator's stream after an event on compute,
 * the GEMM pieces on compute, and rt_wait makes compute wait for the
 * collective's event (comm.cu), so pieces and transfers overlap. */
#include "cu.h"

#include "common/tp_chunk_impl.h"
