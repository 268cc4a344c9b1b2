/*
 * cuda_exec: the CUDA device under the device kit's executor
 * (providers/devkit/dk_exec.h, which loads subgraphs and runs them).
 *
 * Load: every float32/float16 weight is copied once to device memory by
 * the weight loader (cuda_load.c: pread into double-buffered pinned chunks
 * overlapped with cudaMemcpyAsync); int64 weights (shapes, axes, indices)
 * stay on the host.
 *
 * Run, on the CUDA stream of the run's ortmk stream: the executor's queued
 * uploads go through a pinned staging buffer before the ops that read
 * them (flush); each op enqueues its kernels / cuBLAS / cuDNN calls as it
 * runs; at submit the device-to-device copies and the downloads (staged)
 * are enqueued, the stream synchronised once and the staged downloads
 * moved to shared memory.
 */
#ifndef ORTMK_CUDA_EXEC_H
#define ORTMK_CUDA_EXEC_H

#include "cuda_dev.h"
#include "cuda_ops.h"
#include "dk_exec.h"

/* A device buffer the core allocated (ALLOC) or a dynamic output made. */
typedef struct cuda_dbuf {
	uint64_t id;
	cuda_block blk;
	uint64_t nbytes;
} cuda_dbuf;

typedef struct cuda_ep {
	cuda_dev dev;
	cuda_heap heap;
	cuda_pinned pinned;
	cuda_dbuf *bufs;
	size_t n_bufs, cap_bufs;
	dk_device dk;           /* what the executor sees of it; dk.ok: a device is open */
} cuda_ep;

static inline cuda_ep *cuda_ep_of(const dk_exec *ex)
{
	return ex->dev->self;
}

/* Fills ep->dk but for ok and why (cuda_exec.c). */
void cuda_exec_device(cuda_ep *ep);

/* Copies the float weights of sg to device memory (cuda_load.c); dst[i]
 * is the block for weight i (ptr NULL: not a device weight). */
int cuda_load_weights(cuda_ep *ep, const ep_subgraph *sg, cuda_block *dst, char *err, size_t n);

/* A pinned staging buffer of at least nbytes; when the pool is exhausted
 * by copies in flight, waits for them to complete and tries again. */
cuda_pinned_buf *cuda_stage_get(cuda_ep *ep, uint64_t nbytes, char *err, size_t n);

/* Device buffers by id (cuda_buf.c). */
cuda_dbuf *cuda_buf_find(cuda_ep *ep, uint64_t id);
/* Adds an allocation made elsewhere (a run's dynamic output) under id,
 * replacing an old buffer of that id. */
int cuda_buf_adopt(cuda_ep *ep, uint64_t id, uint64_t nbytes, const cuda_block *blk, char *err,
		   size_t n);

#endif
