/*
 * vk_mem: device memory.  A heap sub-allocates buffers from large blocks
 * (one VkDeviceMemory and one VkBuffer spanning it, 64 MiB by default;
 * larger requests get a block of their own) with a best-fit free list per
 * block, coalescing neighbours on free; a block other than the first is
 * given back to the driver when its last buffer goes.  Allocations are
 * aligned to the device's storage-buffer offset alignment, so any of them
 * can be bound as a descriptor.
 *
 * Staging: one host-visible, host-coherent buffer (host-cached when the
 * device offers it, which makes downloads fast) that grows on demand;
 * uploads and downloads pass through it with vkCmdCopyBuffer.
 */
#ifndef ORTMK_VK_MEM_H
#define ORTMK_VK_MEM_H

#include "dk_buf.h"
#include "vk_device.h"

#define VKX_BLOCK_SIZE ((VkDeviceSize)64 << 20)

/* A sub-allocation: the device kit's dk_buf (ptr: the block's VkBuffer,
 * NULL when there is none; off and size within it, size what was asked
 * for rounded up; block: its block). */
typedef dk_buf vk_buf;

typedef struct vk_range {
	VkDeviceSize off, size;
} vk_range;

typedef struct vk_block {
	VkDeviceMemory mem;     /* VK_NULL_HANDLE: slot unused */
	VkBuffer buf;
	VkDeviceSize size;
	vk_range *free;         /* sorted by offset, never adjacent */
	size_t n_free, cap_free;
	int live;               /* allocations in it */
} vk_block;

typedef struct vk_heap {
	vk_dev *d;
	vk_block *blocks;
	int n_blocks;
	VkDeviceSize block_size, align;
	VkDeviceSize used, peak, reserved;
} vk_heap;

void vk_heap_init(vk_heap *h, vk_dev *d, VkDeviceSize block_size);
/* A buffer of at least `size` bytes (size 0 gets the minimum). */
int vk_heap_alloc(vk_heap *h, VkDeviceSize size, vk_buf *out, char *err, size_t n);
/* Frees b (no-op when b->block < 0) and marks it empty. */
void vk_heap_free(vk_heap *h, vk_buf *b);
void vk_heap_fini(vk_heap *h);

typedef struct vk_staging {
	VkBuffer buf;
	VkDeviceMemory mem;
	uint8_t *map;
	VkDeviceSize size;
} vk_staging;

/* Makes the staging buffer at least `size` bytes (contents not kept). */
int vk_staging_reserve(vk_dev *d, vk_staging *s, VkDeviceSize size, char *err, size_t n);
void vk_staging_fini(vk_dev *d, vk_staging *s);

#endif
