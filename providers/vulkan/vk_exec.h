/*
 * vk_exec: one loaded subgraph (a step of the core's partition) on the
 * device, and how a RUN of it goes.
 *
 * Load: the nodes are matched to ops and prepared, the pipelines they need
 * are created (and the pipeline cache saved), and every float32 weight is
 * uploaded once to device memory through the staging buffer in chunks
 * (external data is read with pread from the descriptor the core handed
 * over, so its bytes are never mapped here).
 *
 * Run: the bindings that are not produced in the step (its inputs) are
 * uploaded, unless bound as device buffers (used in place); each node
 * plans on the host (shapes, allocation, dispatches); an output bound to a
 * device buffer is written in place (a dynamic one is allocated under its
 * id with the shape it turns out to have); every dispatch is recorded into
 * one command buffer with barriers only where a dispatch touches what an
 * earlier one wrote; the bound shared-memory values the step produced are
 * copied back (or, for dynamic ones, to the run's dynamic region) after one
 * submit-and-wait, which waits first for the run's stream (vk_stream.c).
 * Values that are not bound stay on the device.
 */
#ifndef ORTMK_VK_EXEC_H
#define ORTMK_VK_EXEC_H

#include "ep_exec.h"
#include "vk_copy.h"
#include "vk_ops.h"

typedef struct vk_ep {
	vk_dev dev;
	int ok;                 /* a device is open */
	char why[256];          /* else why not */
	vk_heap heap;
	vk_staging staging;
	vk_pipes pipes;
	vk_devmem dm;           /* buffers by id, streams, copies */
} vk_ep;

typedef struct vk_dispatch {
	int pipe;
	int n_bufs;
	vk_buf bufs[VKX_MAX_BINDINGS];
	uint32_t writes;
	uint32_t push[VKX_PUSH_BYTES / 4];
	uint32_t groups[3];
} vk_dispatch;

/* A copy between host memory and the device through the staging buffer. */
typedef struct vk_xfer {
	vk_buf dev;
	void *host;             /* source (upload) or destination (download) */
	uint64_t nbytes;        /* on the host */
	VkDeviceSize stage_off;
	int f16;                /* host float16, device float32 (twice the bytes) */
} vk_xfer;

/* A device-to-device copy recorded after the dispatches: a bound device
 * output whose value the step did not write in place (a view). */
typedef struct vk_d2d {
	vk_buf src, dst;
	uint64_t nbytes;
} vk_d2d;

/* A buffer a run allocated for a dynamic device output: added to the
 * buffer table when the run succeeds, freed when it fails. */
typedef struct vk_dynbuf {
	uint64_t id, nbytes;
	vk_buf b;
} vk_dynbuf;

typedef struct vk_exec {
	vk_ep *ep;
	const ep_subgraph *sg;
	size_t n_values, n_nodes;
	vk_node *nodes;
	vk_val *consts;         /* per value: weights, ready */
	vk_buf *own;            /* per value: device memory it owns across runs */
	ep_wiring w;            /* producers, production order, bindings */
	/* per run */
	ep_run *run;
	vk_val *vals;
	const vk_val **in;      /* scratch for a node's inputs */
	ep_list disp, up, down;
	ep_list temps;          /* vk_buf: device memory of this run only */
	ep_list htemps;         /* void *: host copies the uploads read */
	ep_list d2d;            /* vk_d2d */
	ep_list dynbufs;        /* vk_dynbuf */
	VkSemaphore wait_sem;   /* the run's stream: wait for its earlier work */
	uint64_t wait_value;
} vk_exec;

int vk_exec_load(vk_ep *ep, ep_subgraph *sg, char *err, size_t n);
int vk_exec_run(vk_ep *ep, ep_subgraph *sg, ep_run *r, char *err, size_t n);
void vk_exec_unload(vk_ep *ep, ep_subgraph *sg);

/* The device buffer a device-bound output binding b gets for a value of
 * this shape and size: its range of buffer_id, or for a dynamic binding a
 * new allocation (dims and nbytes set in b) kept in ex->dynbufs
 * (vk_run.c).  0 or an EP_E_* code with the reason. */
int vk_run_device_output(vk_exec *ex, ep_tensor *b, int rank, const int64_t *dims,
			 uint64_t nbytes, vk_buf *out, char *err, size_t n);

/* Records the uploads, the dispatches and the downloads of ex into the
 * command buffer, submits, waits, and copies the downloads out (vk_record.c). */
int vk_record_and_run(vk_exec *ex, char *err, size_t n);
/* Copies host bytes to device buffers through staging in chunks, one
 * submission per full chunk; for weights at load (vk_record.c). */
typedef struct vk_uploader {
	vk_ep *ep;
	ep_list pending;        /* vk_xfer with stage_off set */
	VkDeviceSize used;
} vk_uploader;
int vk_upload_chunked(vk_uploader *u, const ep_weight *w, const vk_buf *dst, char *err, size_t n);
int vk_upload_flush(vk_uploader *u, char *err, size_t n);

#endif
