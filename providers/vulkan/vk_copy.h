/*
 * vk_copy: device buffers by id and the copy engine (issue #9; the
 * contract is docs/DEVICE.md).
 *
 * The core names device memory by buffer id (ALLOC, RELEASE, TensorRef
 * buffer_id): a table maps each id to a sub-allocation of the provider's
 * heap (vk_mem.c).  COPY requests become submissions on a stream
 * (vk_stream.c): host to device through the slot's staging buffer (the
 * host bytes are read when the copy is enqueued, after the stream's earlier
 * host-side work), device to host into staging then, by the bridge thread
 * once the submission completed, to the host destination; device to device
 * with vkCmdCopyBuffer.  Large copies go in chunks of VKX_COPY_CHUNK bytes,
 * one submission each; the signal is given after the last.
 *
 * A buffer freed while a submission may still use it is kept until that
 * submission is done.
 *
 * Called from the provider's request thread only (vk_ep.c, vk_exec.c, the
 * test test_vk_stream.c).  Errors are negative errno values with a message.
 */
#ifndef ORTMK_VK_COPY_H
#define ORTMK_VK_COPY_H

#include "vk_stream.h"

#define VKX_COPY_CHUNK ((VkDeviceSize)16 << 20)

typedef struct vk_dbuf {
	uint64_t id;            /* 0: empty slot */
	uint64_t nbytes;        /* as the core asked */
	vk_buf b;
} vk_dbuf;

typedef struct vk_deferred {
	vk_buf b;
	vk_stream *s;
	uint64_t value;         /* free once s is done up to value */
} vk_deferred;

typedef struct vk_devmem {
	vk_dev *d;
	vk_heap *heap;
	vk_streams streams;
	vk_dbuf *tab;           /* open addressing, linear probing */
	size_t cap, n;
	vk_deferred *def;
	size_t n_def, cap_def;
	vk_stream *last;        /* the newest submission on any stream */
	uint64_t last_value;
	uint64_t bytes;         /* held by live buffers */
} vk_devmem;

/* One copy: a host side is a mapped pointer (src_host / dst_host not
 * NULL), a device side a buffer id and an offset. */
typedef struct vk_copy_op {
	const void *src_host;
	uint64_t src_buf, src_off;
	void *dst_host;
	uint64_t dst_buf, dst_off;
	uint64_t nbytes;
} vk_copy_op;

void vk_dm_init(vk_devmem *m, vk_dev *d, vk_heap *h);
/* Waits for every stream, frees every buffer. */
void vk_dm_fini(vk_devmem *m);

/* Buffer `id` (not 0, not in use) of `nbytes`. -EINVAL (bad or duplicate
 * id), -ENOMEM (device memory), with the reason. */
int vk_dm_alloc(vk_devmem *m, uint64_t id, uint64_t nbytes, char *err, size_t n);
/* Adds an allocation made elsewhere under `id` (a run's dynamic output). */
int vk_dm_adopt(vk_devmem *m, uint64_t id, uint64_t nbytes, const vk_buf *b, char *err,
		size_t n);
/* Frees buffer `id` (once the work in flight is done); -ENOENT. */
int vk_dm_free(vk_devmem *m, uint64_t id);
const vk_dbuf *vk_dm_find(const vk_devmem *m, uint64_t id);
/* Bytes [off, off + nbytes) of buffer `id` as a vk_buf; -EINVAL with the
 * reason when the id is unknown or the range is outside. */
int vk_dm_range(const vk_devmem *m, uint64_t id, uint64_t off, uint64_t nbytes, vk_buf *out,
		char *err, size_t n);

/* Validates the ops, then enqueues them on `stream` (made on first use),
 * after its earlier work; `sig` (may be NULL) is given when all are done.
 * Returns when enqueued. */
int vk_dm_copy(vk_devmem *m, uint32_t stream, const vk_copy_op *ops, size_t n_ops,
	       const vk_signal *sig, char *err, size_t n);

/* The core will not name `stream` again: waits for its work, frees it. */
void vk_dm_stream_free(vk_devmem *m, uint32_t stream);

/* Frees the deferred buffers whose work is done. */
void vk_dm_collect(vk_devmem *m);

#endif
