/*
 * core: the internal types and functions of libortmk, shared by the files
 * of core/.  Nothing here is public; the public surface is
 * include/ortmk/ortmk.h.
 *
 * Layers: who may call whom.  A file of the core calls (and includes) only
 * files of its own layer and of the layers below it, never one above, so
 * the core reads bottom to top and has no loop between layers.  Bottom
 * first:
 *
 *   graph      graph.c loader*.c shape*.c  the model: loading, IR, shape
 *                                          inference (a library of its own;
 *                                          knows nothing of processes)
 *   error      error.c                     the thread-local error
 *   process    env.c fence.c               provider processes: spawn,
 *                                          handshake, one request to one
 *                                          process; the fence words
 *   supervise  supervise.c                 restart and replay, hot swap,
 *                                          the core_ep_* requests
 *   device     device.c                    device values, streams, copies
 *   values     values.c                    every ortmk_value_*
 *   session    session.c partition.c       load, partition, plan, compile;
 *              plan.c info.c               what a session tells
 *   run        run.c run_device.c          ortmk_session_run, IO binding,
 *              binding.c copy.c            copies between values
 *   api        api.c                       the environment's life, options
 *
 * Below the core: ipc/, shm/ and proto/, which call nothing of it.  Where
 * a lower layer must act on a higher one's state it reads the state
 * instead of calling up: fence.c fails the fences of device.c's streams,
 * api.c (at the top) is where destroying an environment frees what every
 * layer keeps in it.  This file declares each layer's functions in that
 * order.  The same list for the whole tree is tools/check-layers/layers.txt,
 * which `meson test --suite lint` holds the code to (docs/ARCHITECTURE.md).
 */
#ifndef ORTMK_CORE_H
#define ORTMK_CORE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "channel.h"
#include "ring.h"
#include "graph.h"
#include "ortmk/ortmk.h"
#include "shm.h"

#define CORE_MAX_EPS 8
#define CORE_VALUE_POOL 32
#define CORE_VALUE_POOL_BYTES (256u << 20)
#define CORE_HANDSHAKE_MS 10000
#define CORE_CONTROL_MS 60000    /* deadline of control requests (load...) */
#define CORE_DEVICE_MS 10000     /* deadline of ALLOC, COPY (its ACK) and RELEASE of a buffer */
#define CORE_FENCE_SLOTS 1024    /* fence words in an environment's fence segment */
#define CORE_DEV_POOL 32         /* freed device buffers kept for reuse, per env */
#define CORE_DEV_POOL_BYTES (UINT64_C(512) << 20)

/* ---- types ---------------------------------------------------------------- */

/* A shared-memory ring to a provider process (docs/PROTOCOL.md, "Lanes"):
 * one request outstanding on it at a time; a process serves several, so
 * that runs on different lanes proceed at once. */
#define CORE_MAX_LANES 8
#define CORE_LANES 4              /* lanes per process unless ORTMK_LANES says */

typedef struct core_lane {
	shm_segment seg;
	ipc_ring_pair ring;
	int busy;                 /* taken (core_ep.lane_mu) */
	int home;                 /* its CPU when runs are bound (Run.bind_cpu) */
} core_lane;

/* One running provider process: what a restart or a swap replaces. */
typedef struct core_proc {
	pid_t pid;
	int pidfd;
	int fd_sock;              /* our end of the descriptor socketpair */
	int alive;
	char death[256];          /* how it died, once it has */
	char detail[256];         /* from HELLO */
	char unavailable[256];    /* from HELLO: "" or why it runs nothing */
	int device_memory;        /* from HELLO: serves ALLOC, COPY, buffer refs */
	ipc_chan chan;
	ipc_segtab segs;          /* segments this process has mapped */
	uint64_t next_fd_tag;
	uint64_t exec_id;         /* distinguishes socket paths of successive processes */
	/* fast path (ipc/ring.h): RUN and its reply, when negotiated */
	int ring_on;              /* n_lanes > 0 */
	int run_lanes;            /* from HELLO: lanes it serves (1 when absent) */
	core_lane lanes[CORE_MAX_LANES];
	int n_lanes;
	int reply_lane;           /* the last control reply lives in this lane, -1: none */
} core_proc;

/* State replayed into every new process of a provider. */
typedef struct core_file_rec {
	uint64_t id;
	int fd;                   /* owned by the session's graph */
	uint64_t size;
} core_file_rec;

typedef struct core_sg_rec {
	uint32_t id;
	uint64_t session;
	uint8_t *bytes;           /* packed LoadSubgraph */
	size_t len;
} core_sg_rec;

#define CORE_FAIL_HISTORY 64

/* One provider (by name) of an environment and its current process. */
typedef struct core_ep {
	int index;                /* in env->eps */
	char name[16];            /* "cpu" */
	char binary[4096];
	ortmk_env *env;
	core_proc p;
	/* Locks, taken in this order (docs/ARCHITECTURE.md, "Concurrent runs"):
	 *  lock    the control path: the nng channel (one request at a time),
	 *          what is replayed, the segment table, restarts and swaps;
	 *          held across a run only by runs with device values;
	 *  plock   the process's life: RUNs on lanes hold it for reading from
	 *          request to reply; replacing p (restart, swap) holds it for
	 *          writing, with lock;
	 *  lane_mu the lanes' busy flags (lane_cv: one came free);
	 *  fail_mu recording a failure of the process, once however many
	 *          runs in flight notice it;
	 *  segs_lock the processes' segment tables: changed (under lock) for
	 *          writing, read by a lane checking a RESULT. */
	pthread_mutex_t lock;
	pthread_rwlock_t plock;
	pthread_mutex_t lane_mu;
	pthread_cond_t lane_cv;
	pthread_mutex_t fail_mu;
	pthread_rwlock_t segs_lock;
	core_file_rec *files;
	size_t n_files;
	core_sg_rec *sgs;
	size_t n_sgs;
	/* supervision */
	unsigned restarts, swaps, failures;
	uint64_t fail_ns[CORE_FAIL_HISTORY];  /* ring of failure times */
	char last_failure[1100];
	double last_restart_ms;   /* death noticed -> ready again */
	uint64_t died_ns;         /* when the current death was noticed */
	unsigned backoff_ms;
	/* Its cancel word (ortmk_run_options): one page shared with every
	 * process of this provider, made on the first cancellable run. */
	shm_segment cancel_seg;
} core_ep;

/* Runs a run options object can cancel at once (several sessions). */
#define CORE_RO_ACTIVE 16

struct ortmk_run_options {
	pthread_mutex_t lock;     /* terminate and the active list */
	int terminate;
	int timeout_ms;
	char tag[128];
	struct {
		_Atomic uint64_t *word;   /* the provider's cancel word */
		uint64_t token;           /* the token of the step running there */
	} active[CORE_RO_ACTIVE];
};

struct ortmk_env {
	char dir[256];            /* private 0700 directory of the sockets */
	unsigned log_token;       /* its log sink (ortmk_env_options), 0: none */
	uint64_t mem_limit;       /* bytes; 0: MemAvailable (core_mem_check) */
	int no_sandbox;           /* ortmk_env_options.disable_sandbox */
	ortmk_log_fn log_fn;
	void *log_user;
	pthread_mutex_t lock;
	core_ep *eps[CORE_MAX_EPS];
	int n_eps;
	uint64_t next_id;         /* segments, files, subgraphs, sessions */
	/* RUN requests waiting for their reply, over every session: a wait
	 * spins only while the runs in flight leave a CPU free (run.c). */
	_Atomic int runs_waiting;
	/* Segments of destroyed values, kept for the next values: creating a
	 * memfd and mapping it costs more than a small run.  Providers keep
	 * them mapped, so a recycled input needs no ADD_SEGMENT either. */
	shm_segment pool[CORE_VALUE_POOL];
	int n_pool;
	uint64_t pool_bytes;
	/* Device memory: fence words and their reference counts (fence.c),
	 * the live streams (device.c).  dev_lock is taken after an ep's lock,
	 * never before. */
	pthread_mutex_t dev_lock;
	shm_segment fences;
	uint32_t fence_refs[CORE_FENCE_SLOTS];
	uint32_t next_stream;
	struct ortmk_stream *streams;
	/* Device values destroyed while their process lived: the buffers stay
	 * allocated there and back the next device values of a similar size
	 * (an ALLOC and a RELEASE saved per output of a bound loop). */
	struct ortmk_value *dev_pool[CORE_DEV_POOL];
	int n_dev_pool;
	uint64_t dev_pool_bytes;
};

/* A fence slot and a value to reach on it: a point of a stream's work. */
typedef struct core_pend {
	int slot;                 /* -1: nothing pending */
	uint64_t value;
	uint64_t exec;            /* the provider process doing the work */
	struct core_ep *ep;
} core_pend;

struct ortmk_value {
	ortmk_env *env;
	shm_segment seg;          /* host values; unused (id 0) for device ones */
	/* Device values: the provider, the process that holds the buffer. */
	core_ep *dev;             /* NULL: a host value */
	uint64_t dev_exec;        /* core_proc.exec_id of that process */
	int dev_pid;
	uint64_t buffer_id;
	uint64_t dev_capacity;    /* bytes of the buffer (>= nbytes) */
	core_pend pend;           /* the last copy into it, until waited for */
	ortmk_value_kind kind;    /* tensor, sequence or empty optional */
	int32_t dtype;            /* element type (of the elements, for a sequence) */
	size_t rank;
	int64_t dims[GRAPH_MAX_RANK];
	size_t nbytes;
};

/* A stream (device.c): an ordered queue of work on one provider. */
struct ortmk_stream {
	ortmk_env *env;
	core_ep *ep;
	uint32_t id;
	int slot;                 /* fence slot; re-taken after a failure */
	uint64_t issued;          /* value the last enqueued work signals */
	uint64_t exec;            /* the process the last work went to */
	int internal;             /* the env's own, for synchronous copies */
	struct ortmk_stream *next;
};

struct ortmk_fence {
	ortmk_env *env;
	core_ep *ep;
	uint64_t exec;
	int slot;
	uint64_t value;
};

/* What loading a subgraph reported (core_ep_load). */
typedef struct core_load_stats {
	uint64_t prepack_ns;
	unsigned prepack_hits, prepack_misses;
	int prepack_written;
} core_load_stats;

struct ortmk_session_options {
	char providers[256];
	int threads;
	int run_timeout_ms;
	int retry;
	int crash_loop_n;
	int crash_loop_window_ms;
	int save_prepacked;
	int opt_level;            /* 0, 1, 2 (2: the default) */
	int strict_placement;
	int profile;              /* "enable_profiling" */
	int max_concurrent_runs;  /* 0: CORE_RUN_SLOTS */
};

/* A run of consecutive nodes (topological order) on one provider. */
typedef struct core_step {
	int ep;                   /* index into session->eps */
	size_t first, last;       /* nodes [first, last) */
	uint32_t subgraph_id;
	int *values;              /* graph value index per subgraph value */
	size_t n_values;
	/* pre-pack cache files handed to the provider (0 / -1 when none) */
	uint64_t cache_in_id, cache_out_id;
	int cache_in_fd, cache_out_fd;
	/* how long its last two RUNs took, request to reply (core/run.c's
	 * placement of a single run) */
	_Atomic uint64_t last_ns, prev_ns;
} core_step;

/* Per input-shape signature: inferred shapes and arena offsets. */
#define PLAN_NONE UINT64_MAX
typedef struct core_plan {
	int64_t *sig;
	size_t n_sig;
	graph_tinfo *tinfo;       /* per value */
	uint64_t *offset;         /* arena offset per value, PLAN_NONE if not planned */
	uint64_t *nbytes;
	uint64_t arena_size;
	unsigned refs;            /* runs using it, + 1 while cached (session lock) */
	int64_t chunk;            /* batch.c: 0 undecided, -1 whole, else images a chunk */
} core_plan;

/* ---- batch chunks (batch.c) ------------------------------------------------ */

/* Below this much activation memory a batch runs whole. */
#define CORE_CHUNK_MIN_ARENA (32u << 20)
/* A chunk's activations per thread, about (core_batch_chunk_size). */
#define CORE_CHUNK_BYTES (8u << 20)
/* The chunk size worth trying for a batch of n run with plan pn, or 0
 * (ORTMK_BATCH_CHUNK overrides: 0 never, K chunks of K). */
int64_t core_batch_chunk_size(const ortmk_session *s, const core_plan *pn, int64_t n);
/* 1 when every node keeps the images of the batch apart, proved on the
 * plans of the whole batch (n) and of a chunk (b); else 0, the first
 * node that mixes them logged at debug level. */
int core_batch_separable(const graph *g, const core_plan *pn, const core_plan *pb,
			 int64_t n, int64_t b);

/* The memory of one run in flight: its arena (the plan's offsets) and its
 * dynamic region, kept for the next run that takes the slot. */
#define CORE_RUN_SLOTS 4          /* default "max_concurrent_runs" */
#define CORE_MAX_RUN_SLOTS 64
typedef struct core_slot {
	shm_segment *arena;
	shm_segment *dyn;
	int busy;
} core_slot;

struct ortmk_session {
	ortmk_env *env;
	uint64_t id;
	graph *g;
	core_ep *eps[CORE_MAX_EPS];
	int n_eps;
	size_t nodes_per_ep[CORE_MAX_EPS];
	int threads;
	int cpus;                 /* online when the session was created */
	int run_timeout_ms;
	int retry;
	int crash_loop_n;
	int crash_loop_window_ms;
	int disabled[CORE_MAX_EPS];   /* crash-looped: not used by this session */
	unsigned runs, failed_runs, retried_runs;
	int save_prepacked;
	int opt_level;            /* 0 none, 1 folding, 2 fusions too */
	int strict_placement;
	int profile;              /* RUN asks providers for node spans (docs/TRACE.md) */
	core_load_stats load;     /* summed over the steps */
	char *model_path;         /* NULL for a model from memory */
	char providers[256];      /* the list asked for */
	char broken[2048];        /* set when no provider is left: runs fail */
	graph_tinfo *tinfo0;      /* load-time (symbolic) inference */
	core_step *steps;
	size_t n_steps;
	shm_segment weights;      /* inline initializers, copied once */
	uint64_t *weight_off;     /* per value */
	uint64_t *file_ids;       /* per graph file */
	core_plan **plans;
	size_t n_plans;
	/* Runs in flight: each holds a slot (made on first use, up to
	 * n_slots); a run finding none free waits on slot_cv. */
	core_slot slots[CORE_MAX_RUN_SLOTS];
	int n_slots;
	pthread_cond_t slot_cv;
	uint64_t next_run;        /* atomic */
	int *last_step;           /* last step naming each value, -1 if none */
	/* lock: plans, slots, counters (short sections, never across a
	 * request).  steps_lock: runs read the steps and the providers'
	 * places for reading; re-partitioning writes them. */
	pthread_mutex_t lock;
	pthread_rwlock_t steps_lock;
	int64_t (*io_dims)[GRAPH_MAX_RANK];  /* inputs then outputs, -1 = dynamic */
	const char *(*io_dim_names)[GRAPH_MAX_RANK];  /* symbolic names, NULL: none */
	const char **meta_keys, **meta_values;       /* metadata_props */
};

/* One output of a run and where it goes (run.c, binding.c). */
enum core_out_mode {
	CORE_OUT_HOST_NEW,        /* a new host value (ortmk_session_run) */
	CORE_OUT_VALUE,           /* into the caller's value (host or device) */
	CORE_OUT_DEVICE,          /* a new value in dev's memory (host if it has none) */
};

typedef struct core_out {
	int v;                    /* graph value index */
	enum core_out_mode mode;
	ortmk_value *value;       /* CORE_OUT_VALUE */
	core_ep *dev;             /* CORE_OUT_DEVICE; NULL: host */
	ortmk_value *result;      /* after a successful run */
	uint64_t off;             /* CORE_OUT_VALUE: where in the value's segment
				   * (a chunk's rows of a batch) */
} core_out;

/* ---- error (error.c) ------------------------------------------------------ */

/* Sets the thread-local message and returns `st`. */
ortmk_status core_fail(ortmk_status st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void core_clear_error(void);

/* ---- process (env.c, fence.c) --------------------------------------------- */

uint64_t core_env_next_id(ortmk_env *env);
/* The running process for provider `name`, spawned on first use. */
/* Copies the part of a filled public struct that the caller's struct_size
 * covers (error.c). */
ortmk_status core_out_struct(void *out, const void *full, size_t full_size, const char *what);
ortmk_status core_env_get_ep(ortmk_env *env, const char *name, core_ep **out);
/* ORTMK_OK when `bytes` of shared memory for `what` fit the env's memory
 * limit, else ORTMK_ERR_NO_MEMORY with a message naming both (values.c). */
ortmk_status core_mem_check(const ortmk_env *env, uint64_t bytes, const char *what);
/* 1 for the providers ortmk ships ("cpu", "vulkan", "cuda"). */
int core_known_provider(const char *name);
/* Stops every provider process of env and frees its providers. */
void core_env_stop_eps(ortmk_env *env);
/* Spawns `binary` as a new process of ep and completes the handshake. */
ortmk_status core_proc_start(core_ep *ep, core_proc *p, const char *binary);
void core_proc_stop(core_ep *ep, core_proc *p);
/* Fixes a core_proc's self-pointers after it was copied. */
void core_proc_moved(core_proc *p);
/* 1 when the process is gone (a death noticed here is recorded). */
int core_proc_check_dead(core_ep *ep, core_proc *p);
/* A reply that passed the envelope check but broke the protocol in what it
 * says (run.c's RESULT checks, with the message set): ep's process is
 * killed and the failure counted, as for an invalid message. */
ortmk_status core_ep_broke_protocol(core_ep *ep);
/* Sends `req` to process p and waits for its reply (deadline in ms, -1
 * none).  Maps death, timeouts, protocol violations and ERROR replies to a
 * status with the message set.  *rep is freed with core_ep_reply_free. */
ortmk_status core_proc_request(core_ep *ep, core_proc *p, Ortmk__Envelope *req,
			       int timeout_ms, Ortmk__Envelope **rep);
/* Frees a reply of a request (replies from the ring are not malloc'ed). */
void core_ep_reply_free(core_ep *ep, Ortmk__Envelope *rep);
/* Makes a segment known to process p (ADD_SEGMENT with its fd); no-op when
 * it already is. */
ortmk_status core_proc_add_segment(core_ep *ep, core_proc *p, shm_segment *s);
ortmk_status core_proc_add_file(core_ep *ep, core_proc *p, uint64_t id, int fd, uint64_t size);
/* Tells ep's current process (if it lives) to drop a segment. */
ortmk_status core_ep_release_segment(core_ep *ep, uint64_t id);
/* fence.c: the fence word of a slot; a free slot with one reference, its
 * fence at 0 (-1 when none); references; failing the fences of the work
 * process p of ep had not completed (called when it failed). */
shm_fence *core_dev_fence(ortmk_env *env, int slot);
int core_dev_slot_new(ortmk_env *env);
void core_dev_slot_put(ortmk_env *env, int slot);
void core_dev_slot_get(ortmk_env *env, int slot);
void core_dev_proc_lost(core_ep *ep, const core_proc *p);

/* ---- supervise (supervise.c) ---------------------------------------------- */

/* Restarts a dead provider (with back-off) and replays its state. */
ortmk_status core_ep_ensure(core_ep *ep);
/* A run that completed: resets the back-off. */
void core_ep_healthy(core_ep *ep);
/* Failures of this provider within the last window_ms. */
unsigned core_ep_recent_failures(const core_ep *ep, unsigned window_ms);
/* A RUN on a lane (run.c): the reply and what to release once read. */
typedef struct core_call {
	core_ep *ep;
	Ortmk__Envelope *rep;
	int lane;                 /* -1: none taken */
	int rd;                   /* ep->plock held for reading */
	int locked_here;          /* ep->lock taken by the call (nng fallback) */
} core_call;

/* Sends a RUN to ep's current process (restarted first when it died) on a
 * free lane, waiting for one when all are taken, and waits for its reply
 * (timeout_ms -1: none; spin_ns: how long the wait spins first, 0:
 * IPC_RING_SPIN_NS).  `locked`: the caller holds ep->lock (runs with
 * device values).  Without lanes the request goes over nng under
 * ep->lock.  call->rep (may be set on failure too) stays valid until
 * core_ep_call_done, which every call needs.  near_cpu >= 0 (the caller's
 * CPU, with more runs in flight than CPUs): the RUN goes to the lane whose
 * home is that CPU if it is free, bound to its lane's home (Run.bind_cpu). */
ortmk_status core_ep_run_request(core_ep *ep, Ortmk__Envelope *req, int timeout_ms,
				 uint64_t spin_ns, int locked, int near_cpu, core_call *call);
void core_ep_call_done(core_call *call);
/* env.c: a free lane of ep's current process (-1: it has none), taken
 * until core_lane_put; waits while all are busy.  Prefers the lane whose
 * home is `cpu` (-1: any).  ep->plock or ep->lock held. */
int core_lane_take(core_ep *ep, int cpu);
void core_lane_put(core_ep *ep, int lane);
/* env.c: one request on a lane taken by the caller (ring_request). */
ortmk_status core_lane_request(core_ep *ep, core_proc *p, int lane, Ortmk__Envelope *req,
			       int timeout_ms, uint64_t spin_ns, Ortmk__Envelope **rep);

/* core_proc_request and core_proc_add_segment on ep's current process,
 * restarted first when it died. */
ortmk_status core_ep_request(core_ep *ep, Ortmk__Envelope *req, int timeout_ms,
			     Ortmk__Envelope **rep);
ortmk_status core_ep_add_segment(core_ep *ep, shm_segment *s);
/* Files and subgraphs handed to a provider, remembered for replay; forget
 * releases them. */
ortmk_status core_ep_add_file(core_ep *ep, uint64_t file_id, int fd, uint64_t size);
ortmk_status core_ep_forget_file(core_ep *ep, uint64_t file_id);
ortmk_status core_ep_load(core_ep *ep, uint64_t session, Ortmk__LoadSubgraph *l,
			  core_load_stats *stats);
ortmk_status core_ep_forget_subgraph(core_ep *ep, uint32_t id);

/* ---- device (device.c; docs/DEVICE.md) ------------------------------------ */

/* OK when v is a host value or its process still holds it; else
 * ORTMK_ERR_PROVIDER_DIED naming the provider (ep's lock held, after
 * core_ep_ensure). */
ortmk_status core_dev_value_check(const ortmk_value *v);
/* A device value for a buffer that now exists in ep's current process. */
ortmk_status core_dev_value_wrap(ortmk_env *env, core_ep *ep, uint64_t buffer_id, int32_t dtype,
				 const int64_t *dims, size_t rank, uint64_t nbytes, ortmk_value **out);
/* ALLOC on ep (its lock held) and wrap. */
ortmk_status core_dev_value_alloc(core_ep *ep, int32_t dtype, const int64_t *dims, size_t rank,
				  ortmk_value **out);
void core_dev_env_fini(ortmk_env *env);
/* ortmk_value_destroy of a device value. */
void core_dev_value_free(ortmk_value *v);
/* Waits for a pending point (deadline as shm_fence_wait's; the provider's
 * death is noticed within a few ms).  Clears *p when reached. */
ortmk_status core_dev_pend_wait(ortmk_env *env, core_pend *p, uint64_t deadline_ns);
/* The same with p->ep's lock held by the caller. */
ortmk_status core_dev_pend_wait_locked(ortmk_env *env, core_pend *p, uint64_t deadline_ns);
/* Enqueues `ops` on stream st (ep's lock held) with st's next fence value;
 * the ACK is awaited.  *done gets the point that signals completion. */
ortmk_status core_dev_copy_ops(ortmk_stream *st, Ortmk__CopyOp **ops, size_t n_ops,
			       core_pend *done);
/* The env's internal stream for ep (synchronous copies, staging). */
ortmk_status core_dev_sync_stream(ortmk_env *env, core_ep *ep, ortmk_stream **out);

/* ---- values (values.c) ---------------------------------------------------- */

void core_value_pool_drain(ortmk_env *env);
ortmk_status core_value_new(ortmk_env *env, int32_t dtype, const int64_t *dims,
			    size_t rank, ortmk_value **out);
/* A value of `nbytes` raw bytes whose layout is value_codec's (strings,
 * sequence, none); the caller fills it. */
ortmk_status core_value_new_blob(ortmk_env *env, ortmk_value_kind kind, int32_t dtype,
				 const int64_t *dims, size_t rank, uint64_t nbytes,
				 ortmk_value **out);
/* Checks a blob's layout against kind/dtype/dims (provider-written bytes). */
int core_value_blob_ok(ortmk_value_kind kind, int32_t dtype, const int64_t *dims, size_t rank,
		       const void *data, uint64_t nbytes);

/* ---- session (session.c, partition.c, plan.c, info.c) --------------------- */

/* session.c: after disabling a provider, partitions and loads again. */
ortmk_status core_session_repartition(ortmk_session *s);
/* partition.c: asks each provider which nodes it takes; fills steps. */
ortmk_status core_partition(ortmk_session *s);
/* partition.c: fills l->exported with the step's values read after it. */
ortmk_status core_step_exported(const ortmk_session *s, const core_step *st,
				Ortmk__LoadSubgraph *l);
/* plan.c */
ortmk_status core_plan_build(const ortmk_session *s, const int64_t *const *in_dims,
			     const size_t *in_rank, core_plan **out);
void core_plan_free(core_plan *p);
/* info.c: the inputs' and outputs' dims, once per session. */
ortmk_status core_session_fill_info(ortmk_session *s);

/* ---- run (run.c, run_device.c, binding.c, copy.c) ------------------------- */

/* Runs with inputs bound per graph input (host or device values) and the
 * outputs `outs` say; stream (may be NULL) orders the run on its provider. */
ortmk_status core_session_run_outs(ortmk_session *s, ortmk_run_options *ro,
				   const ortmk_value **bound, core_out *outs,
				   size_t n_out, ortmk_stream *stream);
/* Checks value v against graph input i (kind, dtype, shape). */
ortmk_status core_check_input(const ortmk_session *s, size_t i, const ortmk_value *v);

#endif
