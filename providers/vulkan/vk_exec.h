/*
 * vk_exec: the Vulkan device under the device kit's executor
 * (providers/devkit/dk_exec.h, which loads subgraphs and runs them).
 *
 * Load: the nodes' pipelines are created (and the pipeline cache saved),
 * every float weight is uploaded once to device memory through the
 * staging buffer in chunks (external data read with pread from the
 * descriptor the core handed over), float16 widened to float32 through
 * the pre-pack cache on a device without 16-bit storage, and the ops'
 * pack hooks re-lay out what they keep.
 *
 * Run: the executor's queued uploads, the ops' dispatches (recorded, with
 * barriers only where a dispatch touches what an earlier one wrote), the
 * device-to-device copies and the downloads become one command buffer,
 * submitted once after the run's stream's earlier work (vk_stream.c) and
 * waited for (vk_record.c).
 */
#ifndef ORTMK_VK_EXEC_H
#define ORTMK_VK_EXEC_H

#include "dk_exec.h"
#include "vk_copy.h"
#include "vk_ops.h"

typedef struct vk_ep {
	vk_dev dev;
	vk_heap heap;
	vk_staging staging;
	vk_pipes pipes;
	vk_devmem dm;           /* buffers by id, streams, copies */
	dk_device dk;           /* what the executor sees of it; dk.ok: a device is open */
} vk_ep;

/* One recorded dispatch: ex->work's element. */
typedef struct vk_dispatch {
	int pipe;
	int n_bufs;
	vk_buf bufs[VKX_MAX_BINDINGS];
	uint32_t writes;
	uint32_t push[VKX_PUSH_BYTES / 4];
	uint32_t groups[3];
} vk_dispatch;

static inline vk_ep *vk_ep_of(const dk_exec *ex)
{
	return ex->dev->self;
}

/* Fills ep->dk but for ok and why, once the device was tried (vk_exec.c). */
void vk_exec_device(vk_ep *ep);

/* Records the uploads, the dispatches, the device copies and the
 * downloads of ex into one command buffer, submits, waits, and copies the
 * downloads out (vk_record.c). */
int vk_record_and_run(dk_exec *ex, char *err, size_t n);
/* Copies host bytes to device buffers through staging in chunks, one
 * submission per full chunk; for weights at load (vk_record.c). */
typedef struct vk_uploader {
	vk_ep *ep;
	dk_list pending;        /* dk_xfer with stage_off set */
	VkDeviceSize used;
} vk_uploader;
int vk_upload_chunked(vk_uploader *u, const ep_weight *w, const vk_buf *dst, char *err, size_t n);
int vk_upload_flush(vk_uploader *u, char *err, size_t n);

/* What an op's pack hook gets as `load`. */
struct vk_prepack;
typedef struct vk_loader {
	struct vk_prepack *pk;
	vk_uploader *u;
} vk_loader;

#endif
