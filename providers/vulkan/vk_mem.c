/*
 * vk_mem: block sub-allocation and staging (see vk_mem.h).
 */
#include "vk_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUFFER_USAGE (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | \
		      VK_BUFFER_USAGE_TRANSFER_DST_BIT)

/* One buffer bound to its own memory of a type with `want` (and `prefer`
 * when available). */
static int make_buffer(vk_dev *d, VkDeviceSize size, VkMemoryPropertyFlags want,
		       VkMemoryPropertyFlags prefer, VkBuffer *buf, VkDeviceMemory *mem,
		       char *err, size_t n)
{
	VkBufferCreateInfo bi = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = size,
		.usage = BUFFER_USAGE,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkMemoryRequirements req;
	VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
	VkResult r = vkCreateBuffer(d->dev, &bi, NULL, buf);
	int type;

	if (r != VK_SUCCESS) {
		snprintf(err, n, "vkCreateBuffer(%llu bytes): %s", (unsigned long long)size,
			 vk_result_name(r));
		return -1;
	}
	vkGetBufferMemoryRequirements(d->dev, *buf, &req);
	type = vk_dev_memory_type(d, req.memoryTypeBits, want, prefer);
	ai.allocationSize = req.size;
	ai.memoryTypeIndex = (uint32_t)type;
	r = type < 0 ? VK_ERROR_FEATURE_NOT_PRESENT : vkAllocateMemory(d->dev, &ai, NULL, mem);
	if (r == VK_SUCCESS)
		r = vkBindBufferMemory(d->dev, *buf, *mem, 0);
	else
		*mem = VK_NULL_HANDLE;
	if (r != VK_SUCCESS) {
		if (*mem)
			vkFreeMemory(d->dev, *mem, NULL);
		vkDestroyBuffer(d->dev, *buf, NULL);
		*buf = VK_NULL_HANDLE;
		*mem = VK_NULL_HANDLE;
		snprintf(err, n, "device memory (%llu bytes): %s", (unsigned long long)size,
			 type < 0 ? "no suitable memory type" : vk_result_name(r));
		return -1;
	}
	return 0;
}

void vk_heap_init(vk_heap *h, vk_dev *d, VkDeviceSize block_size)
{
	VkDeviceSize a = d->props.limits.minStorageBufferOffsetAlignment;

	memset(h, 0, sizeof(*h));
	h->d = d;
	h->block_size = block_size;
	h->align = a > 64 ? a : 64;
}

static int range_push(vk_block *b, size_t at, vk_range r)
{
	if (b->n_free == b->cap_free) {
		size_t cap = b->cap_free ? 2 * b->cap_free : 16;
		vk_range *nf = realloc(b->free, cap * sizeof(*nf));

		if (!nf)
			return -1;
		b->free = nf;
		b->cap_free = cap;
	}
	memmove(b->free + at + 1, b->free + at, (b->n_free - at) * sizeof(*b->free));
	b->free[at] = r;
	b->n_free++;
	return 0;
}

static void range_drop(vk_block *b, size_t at)
{
	memmove(b->free + at, b->free + at + 1, (b->n_free - at - 1) * sizeof(*b->free));
	b->n_free--;
}

static int add_block(vk_heap *h, VkDeviceSize size, char *err, size_t n)
{
	int slot = -1;
	vk_block *b;

	for (int i = 0; i < h->n_blocks; i++)
		if (!h->blocks[i].mem)
			slot = i;
	if (slot < 0) {
		vk_block *nb = realloc(h->blocks, (size_t)(h->n_blocks + 1) * sizeof(*nb));

		if (!nb)
			return snprintf(err, n, "out of memory"), -1;
		h->blocks = nb;
		slot = h->n_blocks++;
		memset(&h->blocks[slot], 0, sizeof(*b));
	}
	b = &h->blocks[slot];
	if (make_buffer(h->d, size, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, &b->buf, &b->mem, err, n))
		return -1;
	b->size = size;
	b->n_free = 0;
	b->live = 0;
	if (range_push(b, 0, (vk_range){0, size}))
		return snprintf(err, n, "out of memory"), -1;
	h->reserved += size;
	return slot;
}

/* The smallest free range of at least `size` bytes: block and index. */
static int best_fit(vk_heap *h, VkDeviceSize size, size_t *at)
{
	int best = -1;
	VkDeviceSize best_size = 0;

	for (int i = 0; i < h->n_blocks; i++) {
		vk_block *b = &h->blocks[i];

		for (size_t k = 0; b->mem && k < b->n_free; k++)
			if (b->free[k].size >= size && (best < 0 || b->free[k].size < best_size)) {
				best = i;
				*at = k;
				best_size = b->free[k].size;
			}
	}
	return best;
}

int vk_heap_alloc(vk_heap *h, VkDeviceSize size, vk_buf *out, char *err, size_t n)
{
	VkDeviceSize need = ((size ? size : 4) + h->align - 1) / h->align * h->align;
	size_t at = 0;
	int bi = best_fit(h, need, &at);
	vk_block *b;

	out->block = -1;
	out->ptr = NULL;
	if (size > h->d->props.limits.maxStorageBufferRange)
		return snprintf(err, n, "a tensor of %llu bytes exceeds the device's storage buffer range (%u)",
				(unsigned long long)size, h->d->props.limits.maxStorageBufferRange), -1;
	if (bi < 0) {
		bi = add_block(h, need > h->block_size ? need : h->block_size, err, n);
		if (bi < 0)
			return -1;
		at = 0;
	}
	b = &h->blocks[bi];
	out->ptr = b->buf;
	out->off = b->free[at].off;
	out->size = need;
	out->block = bi;
	b->free[at].off += need;
	b->free[at].size -= need;
	if (b->free[at].size == 0)
		range_drop(b, at);
	b->live++;
	h->used += need;
	if (h->used > h->peak)
		h->peak = h->used;
	return 0;
}

static void release_block(vk_heap *h, vk_block *b)
{
	vkDestroyBuffer(h->d->dev, b->buf, NULL);
	vkFreeMemory(h->d->dev, b->mem, NULL);
	h->reserved -= b->size;
	free(b->free);
	memset(b, 0, sizeof(*b));
}

void vk_heap_free(vk_heap *h, vk_buf *buf)
{
	vk_block *b;
	size_t at = 0;

	if (!buf->ptr || buf->block < 0 || buf->block >= h->n_blocks)
		return;
	b = &h->blocks[buf->block];
	while (at < b->n_free && b->free[at].off < buf->off)
		at++;
	/* Merge with the free range after, then before; else insert. */
	if (at < b->n_free && buf->off + buf->size == b->free[at].off) {
		b->free[at].off = buf->off;
		b->free[at].size += buf->size;
	} else if (range_push(b, at, (vk_range){buf->off, buf->size})) {
		return;   /* out of host memory: the range leaks until the block goes */
	}
	if (at > 0 && b->free[at - 1].off + b->free[at - 1].size == b->free[at].off) {
		b->free[at - 1].size += b->free[at].size;
		range_drop(b, at);
	}
	h->used -= buf->size;
	if (--b->live == 0 && buf->block > 0)
		release_block(h, b);
	buf->block = -1;
	buf->ptr = NULL;
}

void vk_heap_fini(vk_heap *h)
{
	for (int i = 0; i < h->n_blocks; i++)
		if (h->blocks[i].mem)
			release_block(h, &h->blocks[i]);
	free(h->blocks);
	h->blocks = NULL;
	h->n_blocks = 0;
}

int vk_staging_reserve(vk_dev *d, vk_staging *s, VkDeviceSize size, char *err, size_t n)
{
	VkDeviceSize want = (VkDeviceSize)1 << 20;
	VkResult r;
	void *p;

	if (s->buf && s->size >= size)
		return 0;
	while (want < size)
		want *= 2;
	vk_staging_fini(d, s);
	if (make_buffer(d, want, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
			VK_MEMORY_PROPERTY_HOST_CACHED_BIT, &s->buf, &s->mem, err, n))
		return -1;
	r = vkMapMemory(d->dev, s->mem, 0, VK_WHOLE_SIZE, 0, &p);
	if (r != VK_SUCCESS) {
		vk_staging_fini(d, s);
		return snprintf(err, n, "vkMapMemory: %s", vk_result_name(r)), -1;
	}
	s->map = p;
	s->size = want;
	return 0;
}

void vk_staging_fini(vk_dev *d, vk_staging *s)
{
	if (s->mem && s->map)
		vkUnmapMemory(d->dev, s->mem);
	if (s->buf)
		vkDestroyBuffer(d->dev, s->buf, NULL);
	if (s->mem)
		vkFreeMemory(d->dev, s->mem, NULL);
	memset(s, 0, sizeof(*s));
}
