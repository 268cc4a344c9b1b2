/*
 * cuda_exec: one loaded subgraph (a step of the core's partition) on the
 * GPU, and how a RUN of it goes.
 *
 * Load: nodes are matched to ops and prepared; every float32/float16
 * weight is copied once to device memory by the weight loader
 * (cuda_load.c: pread into double-buffered pinned chunks overlapped with
 * cudaMemcpyAsync); int64 weights (shapes, axes, indices) stay on the host.
 *
 * Run (cuda_run.c), on the CUDA stream of the run's ortmk stream: the
 * step's float inputs are uploaded through a pinned staging buffer (or,
 * bound to a device buffer, used in place); each node's op enqueues its
 * work; every bound value the step produced is copied back (to shared
 * memory through pinned staging, to the run's dynamic region, or to the
 * device buffer it is bound to); then one cudaStreamSynchronize.
 */
#ifndef ORTMK_CUDA_EXEC_H
#define ORTMK_CUDA_EXEC_H

#include "cuda_dev.h"
#include "ep_exec.h"
#include "cuda_ops.h"

/* A device buffer the core allocated (ALLOC) or a dynamic output made. */
typedef struct cuda_dbuf {
	uint64_t id;
	cuda_block blk;
	uint64_t nbytes;
} cuda_dbuf;

typedef struct cuda_ep {
	cuda_dev dev;
	int ok;                 /* a device is open */
	char why[256];          /* else why not */
	cuda_heap heap;
	cuda_pinned pinned;
	cuda_dbuf *bufs;
	size_t n_bufs, cap_bufs;
} cuda_ep;

/* A host<->device transfer of a run, staged at stage_off. */
typedef struct cu_xfer {
	void *dev;
	void *host;
	uint64_t nbytes, stage_off;
} cu_xfer;

typedef struct cu_exec {
	cuda_ep *ep;
	const ep_subgraph *sg;
	size_t n_values, n_nodes;
	cu_node *nodes;
	cu_val *consts;         /* per value: weights, ready */
	cuda_block *own;        /* per value: device memory it owns across runs */
	ep_wiring w;            /* producers, production order, bindings */
	/* per run */
	ep_run *run;
	cudaStream_t stream;
	cu_val *vals;
	const cu_val **in;      /* scratch for a node's inputs */
	ep_list up, down;       /* cu_xfer */
	ep_list d2d;            /* cu_xfer: host = device destination */
	ep_list temps;          /* cuda_block: device memory of this run only */
	ep_list stage;          /* cuda_pinned_buf *: staging of this run */
	ep_list htemps;         /* void *: host copies of device int tensors */
	ep_list made;           /* uint64_t: buffer ids dynamic outputs got */
} cu_exec;

int cuda_exec_load(cuda_ep *ep, ep_subgraph *sg, char *err, size_t n);
int cuda_exec_run(cuda_ep *ep, ep_subgraph *sg, ep_run *r, char *err, size_t n);
void cuda_exec_unload(cuda_ep *ep, ep_subgraph *sg);

/* Copies the float weights of sg to device memory (cuda_load.c); dst[i]
 * is the block for weight i (ptr NULL: not a device weight). */
int cuda_load_weights(cuda_ep *ep, const ep_subgraph *sg, cuda_block *dst, char *err, size_t n);

/* A pinned staging buffer of at least nbytes; when the pool is exhausted
 * by copies in flight, waits for them to complete and tries again. */
cuda_pinned_buf *cuda_stage_get(cuda_ep *ep, uint64_t nbytes, char *err, size_t n);

/* Device buffers by id (cuda_buf.c). */
cuda_dbuf *cuda_buf_find(cuda_ep *ep, uint64_t id);
/* Buffer id of `nbytes` (a dynamic device output), replacing an old one. */
int cuda_buf_make(cuda_ep *ep, uint64_t id, uint64_t nbytes, char *err, size_t n);

#endif
