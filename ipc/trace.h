/*
 * trace: the tap at the IPC choke point.  When tracing is on, ipc_send()
 * and ipc_recv() (channel.c) hand every message to this file, which writes
 * one record (proto/ortmk_trace.proto, format in docs/TRACE.md) per message
 * with a single write(2), so a crash of either side loses nothing already
 * sent.  Tracing is on only in the core process: ipc_trace_init_from_env()
 * is called from ortmk_env_create() and reads ORTMK_TRACE=FILE or
 * ORTMK_TRACE_FD=N.  Provider processes share this code but never call it,
 * so their tap stays inert.
 *
 * When off, the whole cost at the choke point is one load of a global and a
 * branch predicted not taken (ipc_trace_on()).
 */
#ifndef ORTMK_TRACE_H
#define ORTMK_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "ortmk_ipc.pb-c.h"

#define IPC_TRACE_FORMAT_VERSION 1u
#define IPC_TRACE_MAGIC "ortmk-trace"
#define IPC_TRACE_MAX_RECORD (16u << 20)  /* readers refuse longer records */
#define IPC_TRACE_PENDING 8               /* requests remembered per channel */

struct ipc_chan;

/* Per-channel tap state, embedded in ipc_chan (zeroed by ipc_chan_init). */
typedef struct ipc_trace_chan {
	char provider[16];        /* "" until set: then derived from ipc_chan.peer */
	int pid;
	int identity_set;
	int lost_logged;          /* the death of this peer is in the trace */
	struct {
		uint64_t seq, t_ns;
		uint32_t kind;
	} pending[IPC_TRACE_PENDING];  /* recent requests, for reply latency */
	unsigned next_pending;
} ipc_trace_chan;

enum ipc_trace_dir { IPC_TRACE_SEND = 1, IPC_TRACE_RECV = 2 };

/* Hidden: a direct load, not through the GOT, in libortmk.so's PIC code. */
extern int ipc_trace_flag __attribute__((visibility("hidden")));

/* The one test on the hot path. */
static inline int ipc_trace_on(void)
{
	return __builtin_expect(__atomic_load_n(&ipc_trace_flag, __ATOMIC_RELAXED), 0);
}

/* Core only, once per process (later calls do nothing): turns tracing on
 * when ORTMK_TRACE=FILE (created or truncated) or ORTMK_TRACE_FD=N (an open
 * descriptor, written as is; ort-trace passes one) is set, and writes the
 * header.  0 when on or not asked for; a negative errno when asked for but
 * impossible (logged; tracing stays off). */
int ipc_trace_init_from_env(void);
/* Starts tracing to fd (not owned unless `own`), writing a header.  For
 * tests and ipc_trace_init_from_env(). */
int ipc_trace_start_fd(int fd, int own);
/* Stops tracing and closes an owned descriptor. */
void ipc_trace_stop(void);

/* Names the provider and its pid on a channel's trace records.  Without it,
 * both come from ipc_chan.peer ("ort-ep-cpu[1234]"). */
void ipc_chan_set_trace_identity(struct ipc_chan *c, const char *provider, int pid);

/* An event about a provider ("spawn", "died", "restart", "swap",
 * "disabled"); detail may be NULL.  Does nothing when tracing is off. */
void ipc_trace_event(const char *provider, int pid, const char *event, const char *detail);

/* The tap itself, called by channel.c only when ipc_trace_on(). */
void ipc_trace_message(struct ipc_chan *c, enum ipc_trace_dir dir,
		       const Ortmk__Envelope *e, size_t size);
void ipc_trace_invalid(struct ipc_chan *c, size_t size, const char *reason);
/* The shared-memory fast path (ring.c) bypasses ipc_send/ipc_recv and
 * reports each message itself, naming the provider's channel: when sending,
 * after packing and before publishing (IPC_TRACE_SEND); when receiving,
 * after validation (IPC_TRACE_RECV), or ipc_trace_invalid() for a message
 * it refused.  size 0: the packed size is computed here.  Call only when
 * ipc_trace_on(). */
void ipc_trace_ring_message(struct ipc_chan *c, enum ipc_trace_dir dir,
			    const Ortmk__Envelope *e, size_t size);
/* Profiling: one ortmk_session_run of a profiled session, timed on the
 * calling thread (CLOCK_MONOTONIC start and duration), with its status.
 * Does nothing when tracing is off. */
void ipc_trace_session_run(uint64_t session, uint64_t start_ns, uint64_t dur_ns, int status);
/* ipc_recv failed with rc: records a "died" event once per peer when the
 * peer exited (-ECHILD) or the connection broke (-EPIPE), and a "timeout"
 * event when a wait of timeout_ms > 0 ran out. */
void ipc_trace_recv_failed(struct ipc_chan *c, int rc, int timeout_ms);

#endif
