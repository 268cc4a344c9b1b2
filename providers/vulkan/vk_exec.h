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
 * uploaded; each node plans on the host (shapes, allocation, dispatches);
 * every dispatch is recorded into one command buffer with barriers only
 * where a dispatch touches what an earlier one wrote; the bound values the
 * step produced are copied back to shared memory (or, for dynamic ones, to
 * the run's dynamic region) after one submit-and-wait.  Values that are
 * not bound stay on the device.  The core binds every planned value of a
 * step, so every one the step produces is downloaded (see docs/VULKAN.md).
 */
#ifndef ORTMK_VK_EXEC_H
#define ORTMK_VK_EXEC_H

#include "vk_ops.h"

typedef struct vk_ep {
	vk_dev dev;
	int ok;                 /* a device is open */
	char why[256];          /* else why not */
	vk_heap heap;
	vk_staging staging;
	vk_pipes pipes;
} vk_ep;

typedef struct vk_dispatch {
	int pipe;
	int n_bufs;
	vk_buf bufs[VK_MAX_BINDINGS];
	uint32_t writes;
	uint32_t push[VK_PUSH_BYTES / 4];
	uint32_t groups[3];
} vk_dispatch;

/* A copy between host memory and the device through the staging buffer. */
typedef struct vk_xfer {
	vk_buf dev;
	void *host;             /* source (upload) or destination (download) */
	uint64_t nbytes;
	VkDeviceSize stage_off;
} vk_xfer;

typedef struct vk_list {
	void *v;
	size_t n, cap, size;
} vk_list;

typedef struct vk_exec {
	vk_ep *ep;
	const ep_subgraph *sg;
	size_t n_values, n_nodes;
	vk_node *nodes;
	vk_val *consts;         /* per value: weights, ready */
	vk_buf *own;            /* per value: device memory it owns across runs */
	int *producer;          /* per value: the node producing it, or -1 */
	/* per run */
	ep_run *run;
	vk_val *vals;
	int *bound;             /* per value: binding index, or -1 */
	const vk_val **in;      /* scratch for a node's inputs */
	vk_list disp, up, down;
	vk_list temps;          /* vk_buf: device memory of this run only */
	vk_list htemps;         /* void *: host copies the uploads read */
} vk_exec;

int vk_exec_load(vk_ep *ep, ep_subgraph *sg, char *err, size_t n);
int vk_exec_run(vk_ep *ep, ep_subgraph *sg, ep_run *r, char *err, size_t n);
void vk_exec_unload(vk_ep *ep, ep_subgraph *sg);

/* Appends an element of l->size bytes; NULL when out of memory. */
void *vk_list_push(vk_list *l);

/* Records the uploads, the dispatches and the downloads of ex into the
 * command buffer, submits, waits, and copies the downloads out (vk_record.c). */
int vk_record_and_run(vk_exec *ex, char *err, size_t n);
/* Copies host bytes to device buffers through staging in chunks, one
 * submission per full chunk; for weights at load (vk_record.c). */
typedef struct vk_uploader {
	vk_ep *ep;
	vk_list pending;        /* vk_xfer with stage_off set */
	VkDeviceSize used;
} vk_uploader;
int vk_upload_chunked(vk_uploader *u, const ep_weight *w, const vk_buf *dst, char *err, size_t n);
int vk_upload_flush(vk_uploader *u, char *err, size_t n);

#endif
