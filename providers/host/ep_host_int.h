/*
 * ep_host internals shared by ep_host.c (the message loop, capability
 * queries, runs, release), ep_load.c (segments, files, loads),
 * ep_device.c (device buffers, COPY, fences and the device-memory
 * emulation tests use), ep_reply.c (the replies all of them send),
 * ep_fault.c (fault injection) and ep_sandbox.c (the system-call filter).
 * Not for providers: they see ep_host.h only.
 */
#ifndef ORTMK_EP_HOST_INT_H
#define ORTMK_EP_HOST_INT_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "channel.h"
#include "ep_host.h"
#include "ring.h"

typedef struct host_file {
	uint64_t id;
	int fd;
	uint64_t size;
} host_file;

typedef struct host_map {
	void *addr;
	size_t len;
} host_map;

/*
 * Fault injection for tests, inert unless ORTMK_EP_FAULT is set:
 *   crash-after:KIND:N    the Nth request of KIND raises SIGSEGV
 *   hang-after:KIND:N     ... sleeps forever instead of answering
 *   exit-after:KIND:N     ... exits with status 3
 *   garbage-after:KIND:N  ... is answered with random bytes
 *   badseq-after:KIND:N   ... is answered with a reply to another request
 *   badref-after:KIND:N   ... is answered by a RESULT naming bytes outside
 *                         every segment
 *   nosignal-after:KIND:N ... (copy) is acknowledged but its fence is never
 *                         signalled: a stuck device, for deadline tests
 *   open-after:KIND:N     ... first tries open("/etc/passwd"), socket-after
 *   socket-after:KIND:N   socket(AF_INET), exec-after execve: the sandbox
 *   exec-after:KIND:N     kills the process (SIGSYS); unconfined, an error
 *                         line and the request is served
 * KIND is a message kind in lower case (run, load_subgraph, copy, ...).  A
 * "PROVIDER/" prefix (vulkan/crash-after:run:1) limits it to one provider.
 */
enum fault_action {
	FAULT_NONE, FAULT_CRASH, FAULT_HANG, FAULT_EXIT, FAULT_GARBAGE, FAULT_BADSEQ, FAULT_BADREF,
	FAULT_NOSIGNAL, FAULT_OPEN, FAULT_SOCKET, FAULT_EXEC, FAULT_AFFINITY,
};

typedef struct fault {
	enum fault_action action;
	int kind;
	long after;
	_Atomic long seen;         /* lanes count from their own threads */
} fault;

/* A device buffer the core allocated (ALLOC) or a run produced (a dynamic
 * output bound to the device).  `emu` is its memory when ep_host emulates
 * device memory for a provider that has none (ORTMK_EP_EMULATE_DEVICE). */
typedef struct host_buf {
	uint64_t id, nbytes;
	void *emu;
} host_buf;

typedef struct host_dev {
	host_buf *bufs;
	size_t n, cap;
	int emulate;
} host_dev;

/* Lanes (docs/PROTOCOL.md, "Lanes"): each RING_SETUP adds a shared-memory
 * ring served by a thread of its own, so runs that came on different lanes
 * execute at once when the provider allows it (ep_vtable.concurrent_runs). */
#define EP_MAX_LANES 8

typedef struct host_lane {
	struct host *h;
	ipc_ring_pair ring;
	pthread_t thread;
	ep_span *spans;           /* profiled runs on this lane: on the first */
	/* Placement (Run.bind_cpu, lane_place): the CPU this thread is
	 * bound to (-1: none), the CPUs it may use otherwise, and whether
	 * binding works here at all. */
	int cpu;
	cpu_set_t all;
	int can_bind;
} host_lane;

typedef struct host {
	const ep_vtable *vt;
	fault fault;
	void *self;
	int inited;               /* vt->init succeeded: vt->fini owes a call */
	ipc_chan chan;
	ipc_segtab segs;
	host_file *files;
	size_t n_files;
	ep_subgraph **sgs;
	size_t n_sgs;
	host_dev dev;
	char err[1024];           /* the requests served under the write lock */
	/* A RUN the provider may run concurrently is served under the read
	 * lock, every other request (and every RUN of a provider that may
	 * not) under the write lock: a load, a release or a new segment waits
	 * for the runs in flight, and no run sees the tables change. */
	pthread_rwlock_t mu;
	host_lane *lanes[EP_MAX_LANES];
	int n_lanes;
	host_lane *cur_lane;      /* under the write lock: the request's lane, NULL: nng */
	atomic_int stopping;
	/* Lanes serving a request now: a lane that finished one spins for
	 * the next only when no other lane computes (lane_main). */
	atomic_int busy_lanes;
	ep_span *spans;           /* profiled runs over nng: EP_PROFILE_MAX_SPANS, on the first */
} host;

/* ep_reply.c: replies to `req`, on the lane it came by (h->cur_lane, or
 * `lane` for the _lane forms; NULL: nng) */
int ep_host_reply(host *h, const Ortmk__Envelope *req, Ortmk__Envelope *e);
int ep_host_reply_lane(host *h, host_lane *lane, const Ortmk__Envelope *req, Ortmk__Envelope *e);
int ep_host_reply_error_lane(host *h, host_lane *lane, const Ortmk__Envelope *req, int code,
			     const char *msg);
int ep_host_reply_error(host *h, const Ortmk__Envelope *req, int code, const char *msg);
int ep_host_reply_ack(host *h, const Ortmk__Envelope *req);
/* RESULT of a run that took ns since t0 (ipc_now_ns()): its dynamic
 * outputs, transfers and, when profiled, its spans (as many as fit the
 * ring's largest message when the request came by ring). */
int ep_host_reply_result(host *h, host_lane *lane, const Ortmk__Envelope *req, const ep_run *run,
			 uint64_t t0, uint64_t ns);
/* EP_E_* -> Ortmk__ErrorCode */
int ep_host_code(int st);

/* ep_load.c: ADD_SEGMENT, ADD_FILE, LOAD_SUBGRAPH (kept: the request's
 * envelope now belongs to the subgraph) */
int ep_host_on_add_segment(host *h, const Ortmk__Envelope *req);
int ep_host_on_add_file(host *h, const Ortmk__Envelope *req);
int ep_host_on_load(host *h, Ortmk__Envelope *req, int *kept);
void ep_host_subgraph_free(host *h, ep_subgraph *sg);

/* ep_fault.c: ORTMK_EP_FAULT for this provider; 1 when the fault replaced
 * the normal handling of `req` (which came by `lane`, NULL: nng) */
void ep_fault_parse(fault *f, const char *provider);
int ep_fault_fire(host *h, host_lane *lane, const Ortmk__Envelope *req);

/* ep_sandbox.c: the system-call filter (docs/SECURITY.md) */
enum { EP_SANDBOX_OFF, EP_SANDBOX_ON, EP_SANDBOX_REPORT };
/* ORTMK_SANDBOX: unset or 1 on, 0 off, report (log and fail with ENOSYS). */
int ep_sandbox_mode(void);
/* What must happen before any thread starts: one malloc arena (glibc's
 * per-thread arenas open a /proc file the first time they shrink). */
void ep_sandbox_prepare(void);
/* Closes every descriptor above 2 but `keep`. */
void ep_sandbox_close_fds(int keep);
/* Core dumps off, not dumpable, no new privileges, then the filter on every
 * thread.  0, or <0 with err (the process is not confined). */
int ep_sandbox_enter(const ep_sandbox_policy *p, int mode, char *err, size_t n);

/* ep_device.c */
/* Reads ORTMK_EP_EMULATE_DEVICE (a provider name, or "1" for any) for a
 * provider without device memory. */
void ep_dev_init(host *h);
void ep_dev_fini(host *h);
/* What HELLO announces as device_memory. */
int ep_dev_has_memory(const host *h);
int ep_dev_on_alloc(host *h, const Ortmk__Envelope *req);
int ep_dev_on_copy(host *h, const Ortmk__Envelope *req, int never_signal);
void ep_dev_release_buffer(host *h, uint64_t id);
void ep_dev_release_stream(host *h, uint32_t stream);
/* A RUN binding naming a device buffer: checks it (err, -EINVAL) and
 * fills b's buffer fields (data too, when emulated). */
int ep_dev_bind(host *h, const Ortmk__TensorRef *t, ep_tensor *b, char *err, size_t n);
/* After a successful run: records the buffers dynamic device outputs got
 * (copying them out of the dynamic region when emulated).  0, or -ENOMEM /
 * -EINVAL with h->err.  Runs of a provider with device memory are served
 * under the write lock, so h->err and the buffer table are theirs. */
int ep_dev_after_run(host *h, ep_run *run);

#endif
