/*
 * ep_host: the process side shared by every execution provider.  It owns
 * the message loop (handshake, segments, files, capability queries, loads,
 * runs, release, shutdown), maps shared memory and external-data files, and
 * validates what the core asks before a provider sees it.  A provider is one
 * ep_vtable (ggml-backend style): ort-ep-cpu, ort-ep-vulkan and ort-ep-cuda
 * each fill the table and call ep_host_main().
 */
#ifndef ORTMK_EP_HOST_H
#define ORTMK_EP_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "onnx.pb-c.h"
#include "ortmk_ipc.pb-c.h"
#include "shm.h"

#define EP_MAX_RANK 16

/* A constant input, already mapped: inline weights point into a shm
 * segment, external ones into a read-only mapping of their file. */
typedef struct ep_weight {
	uint32_t value;
	int32_t dtype;
	int rank;
	int64_t dims[EP_MAX_RANK];
	const void *data;
	uint64_t nbytes;
	int fd;                 /* external: the file (not owned), else -1 */
	uint64_t file_offset;
} ep_weight;

typedef struct ep_value {
	const char *name;
	int32_t dtype;
} ep_value;

typedef struct ep_subgraph {
	uint32_t id;
	Onnx__GraphProto *graph;        /* nodes to run, in order */
	const Ortmk__LoadSubgraph *msg; /* opsets and the rest, as received */
	ep_value *values;
	size_t n_values;
	ep_weight *weights;
	size_t n_weights;
	int threads;
	/* pre-pack cache files (-1 when none): read in place / write fresh */
	int prepack_in_fd, prepack_out_fd;
	uint64_t prepack_in_size;
	/* filled by load */
	unsigned prepack_hits, prepack_misses;
	uint64_t prepack_ns;
	int prepack_written;
	void *impl;                     /* the provider's compiled form */
	/* host-private */
	void *priv;
} ep_subgraph;

int64_t ep_subgraph_opset(const ep_subgraph *sg, const char *domain);
/* Gives back the memory of the weight whose data holds `data` (its private
 * copy, or its mapping of the file) once the provider has what it needs
 * from it (every reader packed it at load): the weight's data pointer
 * dangles from here.  0, or -ENOENT when no mapping of sg's holds data
 * (weights in a shared-memory segment stay). */
int ep_subgraph_drop_weight(ep_subgraph *sg, const void *data);

/* A tensor bound for one run.  `dynamic` ones have no data yet: the
 * provider sets dims and data (from ep_run_dyn_alloc) before returning.
 *
 * Device memory (docs/DEVICE.md): buffer_id != 0 means the tensor is in the
 * provider's device buffer buffer_id at buffer_offset, and data is NULL.
 * ep_host has checked that the buffer exists and [buffer_offset, +nbytes)
 * lies inside it.  A dynamic tensor with buffer_id != 0 is an output bound
 * to the device whose shape is unknown: the provider allocates buffer
 * buffer_id itself (any size it needs, offset 0), and sets dims and nbytes.
 * If the run fails, the provider frees any buffer it allocated for it (the
 * core may repeat the run with the same ids, e.g. after E_DYN_OVERFLOW).
 * A provider without device memory (no buf_alloc) never receives one.
 * RESULT means: shared-memory outputs are written; device outputs are done
 * or ordered before any later request that names their buffer. */
typedef struct ep_tensor {
	uint32_t value;
	int32_t dtype;
	int rank;
	int64_t dims[EP_MAX_RANK];
	void *data;
	uint64_t nbytes;
	int dynamic;
	int kind;               /* Ortmk__ValueKind: tensor, sequence, none */
	uint64_t buffer_id;     /* 0: host memory at data */
	uint64_t buffer_offset;
} ep_tensor;

/* Profiling (Run.profile): one node as the provider ran it.  Times are
 * CLOCK_MONOTONIC ns (ipc_now_ns()), the clock of the core's trace. */
typedef struct ep_span {
	const char *name, *op_type;     /* borrowed: valid until the run returns */
	uint64_t start_ns, dur_ns;
	uint32_t node;                  /* index in its graph */
	uint32_t tid;                   /* the thread that ran it */
	uint32_t depth;                 /* 0: a node of the subgraph, 1: of a body, ... */
	int32_t parent;                 /* the enclosing span (an earlier index), -1: none */
	uint32_t fused;                 /* nodes fused into this one */
} ep_span;

#define EP_PROFILE_MAX_SPANS 4096   /* IPC_MAX_SPANS */

/* Where a provider puts a profiled run's spans: at most cap (in the order
 * the nodes began); n_dropped counts those past it. */
typedef struct ep_profile {
	ep_span *spans;
	size_t cap, n;
	uint32_t n_dropped;
} ep_profile;

typedef struct ep_run {
	uint64_t run_id;
	ep_tensor *bindings;
	size_t n_bindings;
	uint8_t *dyn_base;
	uint64_t dyn_size, dyn_used;
	uint64_t dyn_needed;    /* bytes the dynamic outputs needed in all */
	/* The stream the run is ordered on (0 = default): it starts after the
	 * work the provider received earlier on that stream (COPY, RUN). */
	uint32_t stream;
	/* Filled by the provider: host<->device transfers it made for this
	 * run's shared-memory bindings; ep_host reports them in RESULT. */
	uint32_t uploads, downloads;
	uint64_t upload_bytes, download_bytes;
	/* Cancellation: the run stops between nodes (EP_E_CANCELLED) once
	 * *cancel == cancel_token.  NULL: the run cannot be cancelled. */
	const _Atomic uint64_t *cancel;
	uint64_t cancel_token;
	/* Run.profile: the provider records its node spans here (n and
	 * n_dropped start at 0).  NULL: the run is not profiled; a provider
	 * that does not profile leaves it alone (RESULT then has no spans). */
	ep_profile *profile;
} ep_run;

/* 1 once the core asked for run r to stop (between nodes: cheap). */
static inline int ep_run_cancelled(const _Atomic uint64_t *cancel, uint64_t token)
{
	return cancel && __atomic_load_n((const uint64_t *)cancel, __ATOMIC_RELAXED) == token;
}

/* A fence to signal when asynchronous work completes: a shm_fence word in
 * a segment the core shared, and the value to signal.  f NULL: none. */
typedef struct ep_fence {
	shm_fence *f;
	uint64_t value;
} ep_fence;

/* Signals (value reached) or fails the fence.  NULL-safe (f or f->f) and
 * thread-safe: a provider may call them from its completion thread. */
void ep_fence_signal(const ep_fence *f);
void ep_fence_fail(const ep_fence *f);

/* One copy of a COPY request.  A host side has a pointer (ep_host resolved
 * segment + offset and checked the range); a device side has src_host (or
 * dst_host) NULL and names (buffer, offset), a range ep_host checked
 * against the buffer's size.  Never host to host. */
typedef struct ep_copy {
	const void *src_host;
	uint64_t src_buf, src_off;
	void *dst_host;
	uint64_t dst_buf, dst_off;
	uint64_t nbytes;
} ep_copy;

/* 64-byte aligned space in the run's dynamic region; NULL when it does not
 * fit (dyn_needed still grows, so the core can retry with enough). */
void *ep_run_dyn_alloc(ep_run *r, uint64_t nbytes);

/* Errors a provider returns: negative, with a message. */
enum ep_status {
	EP_OK = 0,
	EP_E_INVALID = -1,
	EP_E_UNSUPPORTED = -2,
	EP_E_SHAPE = -3,
	EP_E_NOMEM = -4,
	EP_E_INTERNAL = -5,
	EP_E_DYN_OVERFLOW = -6,
	EP_E_CANCELLED = -7,      /* the run's cancel word was set */
};

/*
 * What a provider's driver needs beyond the system calls every provider
 * may make (providers/host/ep_sandbox.c, docs/SECURITY.md).  A vtable
 * without one gets the common list alone (cpu).
 */
typedef struct ep_sandbox_policy {
	/* 1: the driver filter.  A GPU driver opens device nodes, caches and
	 * its own files lazily, drives the device with ioctl and may compile
	 * into executable memory, so the filter allows every call but the
	 * ones no driver needs: programs run, forks, ptrace, network sockets,
	 * kernel administration (ep_sandbox.c's denied list). */
	int driver;
	/* mmap/mprotect with PROT_EXEC (allow-list filter only): a driver
	 * that compiles code at load. */
	int exec_memory;
	/* More system calls by name (ioctl for a device node), NULL-terminated
	 * (allow-list filter only). */
	const char *const *extra;
} ep_sandbox_policy;

typedef struct ep_vtable {
	const char *name;        /* "cpu" */
	const ep_sandbox_policy *sandbox;   /* NULL: the common filter */
	/* 1: `run` may be called from several threads at once (each run on
	 * the thread of the lane it came by, docs/PROTOCOL.md), on one
	 * subgraph or several; load, unload and everything else never
	 * overlap a run.  0: one request at a time. */
	int concurrent_runs;
	/* Once at start; writes a description (ISA, device) into detail.  A
	 * provider that finds no device calls ep_host_unavailable() here. */
	int (*init)(void **self, char *detail, size_t n);
	/* 1 when the provider runs this node, else 0 with the reason. */
	int (*supported)(void *self, const Onnx__NodeProto *node, int64_t opset,
			 const int32_t *in_dtypes, int n_in, char *why, size_t n);
	/* Optional, after `supported` said 1: the same with the whole query
	 * (the core's inferred input and output shapes, NodeQuery's *_ranks
	 * and *_dims, unchecked), to refuse by rank or size. */
	int (*supported_shapes)(void *self, const Onnx__NodeProto *node,
				const Ortmk__NodeQuery *q, char *why, size_t n);
	int (*load)(void *self, ep_subgraph *sg, char *err, size_t n);
	int (*run)(void *self, ep_subgraph *sg, ep_run *run, char *err, size_t n);
	void (*unload)(void *self, ep_subgraph *sg);
	void (*fini)(void *self);
	/*
	 * Device memory (docs/DEVICE.md); all NULL for a provider whose memory
	 * is the host's (cpu).  buf_alloc != NULL is what HELLO announces as
	 * device_memory.  ep_host keeps the table of buffer ids and sizes, so
	 * ids reaching the provider are known (alloc: new) and ranges inside.
	 */
	/* Allocates buffer `id` of nbytes (EP_E_NOMEM when it cannot). */
	int (*buf_alloc)(void *self, uint64_t id, uint64_t nbytes, char *err, size_t n);
	/* Frees buffer `id` once the work already enqueued on it is done. */
	void (*buf_free)(void *self, uint64_t id);
	/* Enqueues the copies on `stream`, ordered after that stream's earlier
	 * work, and returns (ep_host then ACKs).  When all are done the
	 * provider calls ep_fence_signal(&signal), maybe from another thread,
	 * or ep_fence_fail(&signal) if one failed (keep a copy: the struct is
	 * passed by value).  A non-zero return (nothing enqueued) is answered
	 * with ERROR and ep_host fails the fence. */
	int (*copy)(void *self, uint32_t stream, const ep_copy *ops, size_t n_ops,
		    ep_fence signal, char *err, size_t n);
	/* Optional: the core will not name this stream again (its pending
	 * work still completes). */
	void (*stream_free)(void *self, uint32_t stream);
} ep_vtable;

/* The provider process's main(): handshake with the core named in the
 * environment (ORTMK_EP_URL, ORTMK_EP_FD), then serve until SHUTDOWN or the
 * core goes away.  Returns the process exit status. */
int ep_host_main(const ep_vtable *vt, int argc, char **argv);

/* Called from init: this process can run nothing (no device), because of
 * `why`; HELLO says so and the core places no node here. */
void ep_host_unavailable(const char *why);

#endif
