/* cpu.h: private declarations of the CPU backend (fp32, OpenBLAS, MPI). */
#ifndef PTDRT_CPU_H
#define PTDRT_CPU_H

#include <mpi.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "rt.h"

struct RtComm {
    MPI_Comm comm;
    MPI_Comm acomm;      /* its twin for the non-blocking collectives (comm_async.c) */
    int rank, size;
    int id;              /* creation order (the world 0): the same on every member */
    int *wranks;         /* world rank of each member, by rank in comm */
    int64_t seq;         /* waits entered on it: the same count on every member */
    _Atomic int64_t aseq; /* non-blocking collectives issued on it (read by the watchdog) */
    struct RtComm *next; /* every communicator made, freed by rt_finalize */
};

/* A request: a point-to-point transfer (MPI_Request), a non-blocking
 * collective run by the communication thread, or a finished copy. */
enum { RTREQ_P2P, RTREQ_COLL, RTREQ_DONE };
struct RtReq {
    int kind;
    MPI_Request req;     /* RTREQ_P2P */
    RtComm *comm;
    int op, peer, tag;   /* the watchdog's description of the wait (RTW_*) */
    /* RTREQ_COLL */
    void *out;
    const void *in;
    int64_t n;
    RtType t;
    int64_t seq;         /* its number among comm's non-blocking collectives (from 1) */
    _Atomic int done;
    bool quiet;          /* the thread sleeps until every member has issued it (below) */
    struct RtReq *next;  /* the communication thread's queue */
};

/* Check an MPI call (communicators use MPI_ERRORS_RETURN): on failure print
 * "file:line: MPI: <error string>" and abort every rank. */
#define RT_MPI(call) rtcpu_mpi_check((call), #call, __FILE__, __LINE__)
void rtcpu_mpi_check(int code, const char *what, const char *file, int line);

void *rtcpu_xmalloc(size_t bytes); /* host scratch; rt_fatal on failure */
/* This thread's scratch buffer `slot` of at least `bytes`, 64-byte aligned,
 * valid until the next call for the same slot on this thread (memory.c).
 * Slots: 0 attention, 1 partial sums, 2 cross-entropy. */
enum { RTCPU_SCRATCH_SLOTS = 4 };
void *rtcpu_scratch(int slot, size_t bytes);
/* Counts passed to MPI are ints: abort with a clear message beyond that. */
int rtcpu_mpi_count(int64_t n, const char *what);
MPI_Datatype rtcpu_mpi_type(RtType t);
size_t rtcpu_type_size(RtType t);
void rtcpu_comm_free_all(void);
RtComm *rtcpu_comm_by_id(int id); /* this rank's communicator of that id, or NULL */
void rtcpu_comm_twin(RtComm *c);  /* make c->acomm: collective over c */

/* comm_async.c: the communication thread (non-blocking collectives). */
void rtcpu_async_start(bool thread_multiple); /* after MPI is up */
void rtcpu_async_stop(void);                  /* every collective issued must be waited for */
void rtcpu_async_wait(RtReq *r);              /* rt_wait of a collective */
/* rt_iallgather and rt_ireduce_scatter whose thread waits for the other
 * members asleep, not in MPI's spinning progress loop: the chunked
 * tensor-parallel pairs (tp_chunk.c), whose GEMMs need the core. */
RtReq *rtcpu_iallgather_quiet(RtComm *c, void *out, const void *in, int64_t n_in, RtType t);
RtReq *rtcpu_ireduce_scatter_quiet(RtComm *c, void *out, const void *in, int64_t n_out, RtType t);

/* threads.c, called by rt_init: the libraries' environment (may exec the
 * program again), and the thread count. */
void rtcpu_library_env(char **argv);
void rtcpu_threads_init(void);
int rtcpu_gemm_threads(void); /* threads rt_matmul splits a GEMM over */

/* watch.c: the watchdog thread. It ends the rank when its launcher dies and
 * aborts every rank when a wait outlasts the timeout, after asking the
 * other ranks' watchdogs where they are (so the message names who did not
 * arrive). Every blocking MPI call of the main thread is bracketed by
 * rtcpu_wait_begin/end, which only publish (op, communicator, peer). */
enum {
    RTW_NONE,
    RTW_BARRIER,
    RTW_ALLREDUCE,
    RTW_REDUCE_SCATTER,
    RTW_ALLGATHER,
    RTW_ALLTOALL,
    RTW_BCAST,
    RTW_WAIT_SEND,
    RTW_WAIT_RECV,
    RTW_SPLIT,
    RTW_HOST,
    RTW_IALLREDUCE, /* rt_wait for a non-blocking collective */
    RTW_IREDUCE_SCATTER,
    RTW_IALLGATHER,
    RTW_NOPS
};
void rtcpu_watch_start(bool thread_multiple); /* after MPI is up */
void rtcpu_watch_stop(void);                 /* before MPI_Finalize */
void rtcpu_wait_begin(int op, RtComm *c, int peer_world, int tag);
/* rt_wait of non-blocking collective number seq of c (RTW_I* op). */
void rtcpu_wait_begin_async(int op, RtComm *c, int64_t seq);
void rtcpu_wait_end(void);
/* A blocking MPI call the watchdog watches. */
#define RT_MPI_WAIT(op, c, peer, tag, call)                                                  \
    do {                                                                                     \
        rtcpu_wait_begin((op), (c), (peer), (tag));                                          \
        RT_MPI(call);                                                                        \
        rtcpu_wait_end();                                                                    \
    } while (0)

#endif
