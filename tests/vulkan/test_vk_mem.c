/*
 * test_vk_mem: ort-ep-vulkan's device layer on the real device: the
 * block allocator (alignment, best fit, coalescing, dedicated blocks for
 * large requests and their release, the storage-buffer range limit), the
 * staging buffer, a round trip of bytes through both, and every embedded
 * shader becoming a pipeline.  Exit 77 when there is no Vulkan device.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vk_mem.h"
#include "vk_pipe.h"

#include "../check.h"

#define KIB ((VkDeviceSize)1024)

static void test_best_fit(vk_dev *d)
{
	vk_heap h;
	vk_buf b[6], x;
	char err[256];

	vk_heap_init(&h, d, 64 * KIB);
	for (int i = 0; i < 6; i++) {
		CHECK(vk_heap_alloc(&h, (VkDeviceSize)(i + 1) * KIB, &b[i], err, sizeof(err)) == 0,
		      "alloc %d: %s", i, err);
		CHECK(b[i].block == 0 && b[i].off % h.align == 0, "alloc %d: block %d offset %llu", i,
		      b[i].block, (unsigned long long)b[i].off);
	}
	CHECK(h.n_blocks == 1, "%d blocks for 21 KiB", h.n_blocks);
	/* Holes of 2 KiB (b[1]) and 4 KiB (b[3]): a 2 KiB request takes the
	 * smaller hole, not the first that fits or the tail. */
	vk_heap_free(&h, &b[3]);
	vk_heap_free(&h, &b[1]);
	CHECK(vk_heap_alloc(&h, 2 * KIB, &x, err, sizeof(err)) == 0, "%s", err);
	CHECK(x.off == b[0].off + b[0].size, "best fit chose offset %llu, hole at %llu",
	      (unsigned long long)x.off, (unsigned long long)(b[0].off + b[0].size));
	vk_heap_free(&h, &x);
	for (int i = 0; i < 6; i++)
		if (i != 1 && i != 3)
			vk_heap_free(&h, &b[i]);
	CHECK(h.used == 0 && h.blocks[0].n_free == 1 && h.blocks[0].free[0].size == 64 * KIB,
	      "after freeing everything: used %llu, %zu free ranges", (unsigned long long)h.used,
	      h.blocks[0].n_free);
	vk_heap_fini(&h);
}

static void test_blocks(vk_dev *d)
{
	vk_heap h;
	vk_buf big, small, fill;
	char err[256];

	vk_heap_init(&h, d, 64 * KIB);
	CHECK(vk_heap_alloc(&h, 60 * KIB, &fill, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_heap_alloc(&h, 16 * KIB, &small, err, sizeof(err)) == 0 && small.block == 1,
	      "a full block gets a second one (block %d)", small.block);
	CHECK(vk_heap_alloc(&h, 200 * KIB, &big, err, sizeof(err)) == 0 && big.block == 2 &&
	      h.blocks[2].size >= 200 * KIB, "a large request gets its own block");
	vk_heap_free(&h, &big);
	CHECK(h.blocks[2].mem == VK_NULL_HANDLE && h.reserved == 128 * KIB,
	      "an empty block is released (reserved %llu)", (unsigned long long)h.reserved);
	vk_heap_free(&h, &small);
	vk_heap_free(&h, &fill);
	CHECK(h.blocks[0].mem != VK_NULL_HANDLE, "the first block stays");
	if (d->props.limits.maxStorageBufferRange < UINT32_MAX)
		CHECK(vk_heap_alloc(&h, (VkDeviceSize)d->props.limits.maxStorageBufferRange + 1, &big, err,
				    sizeof(err)) != 0 && strstr(err, "storage buffer range"),
		      "a tensor past the storage buffer range is refused: %s", err);
	vk_heap_fini(&h);
}

/* Host -> staging -> device -> staging -> host. */
static void test_round_trip(vk_dev *d)
{
	vk_heap h;
	vk_staging s = {0};
	vk_buf b;
	char err[256];
	const VkDeviceSize n = 300 * KIB;
	VkBufferCopy up = {.srcOffset = 0, .dstOffset = 0, .size = n};
	VkBufferCopy down = {.srcOffset = 0, .dstOffset = n, .size = n};
	int ok = 1;

	vk_heap_init(&h, d, VKX_BLOCK_SIZE);
	if (vk_heap_alloc(&h, n, &b, err, sizeof(err)) || vk_staging_reserve(d, &s, 2 * n, err, sizeof(err))) {
		CHECK(0, "setup: %s", err);
		return;
	}
	CHECK(s.size >= 2 * n, "staging of %llu bytes", (unsigned long long)s.size);
	for (VkDeviceSize i = 0; i < n; i++)
		s.map[i] = (uint8_t)(i * 7 + 3);
	up.dstOffset = b.off;
	down.srcOffset = b.off;
	vk_dev_begin(d, err, sizeof(err));
	vkCmdCopyBuffer(d->cmd, s.buf, b.ptr, 1, &up);
	{
		VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
				      .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
				      .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT};

		vkCmdPipelineBarrier(d->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
				     0, 1, &mb, 0, NULL, 0, NULL);
	}
	vkCmdCopyBuffer(d->cmd, b.ptr, s.buf, 1, &down);
	CHECK(vk_dev_submit_wait(d, err, sizeof(err)) == 0, "submit: %s", err);
	for (VkDeviceSize i = 0; i < n && ok; i++)
		ok = s.map[n + i] == (uint8_t)(i * 7 + 3);
	CHECK(ok, "bytes changed on the way through the device");
	vk_heap_free(&h, &b);
	vk_staging_fini(d, &s);
	vk_heap_fini(&h);
}

static void test_pipelines(vk_dev *d)
{
	vk_pipes ps;
	char err[256];

	memset(&ps, 0, sizeof(ps));
	for (int id = 0; id < VKP_ALL; id++)
		if (id < VKP_F16 || d->f16)
			CHECK(vk_pipe_get(d, &ps, id, err, sizeof(err)) != NULL, "pipeline %d: %s", id, err);
	vk_pipes_fini(d, &ps);
}

int main(void)
{
	vk_dev d;
	char err[256];

	setenv("ORTMK_VULKAN_PIPELINE_CACHE", "0", 1);
	if (vk_dev_open(&d, err, sizeof(err))) {
		printf("skip: %s\n", err);
		return 77;
	}
	test_best_fit(&d);
	test_blocks(&d);
	test_round_trip(&d);
	test_pipelines(&d);
	vk_dev_close(&d);
	printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
	/* No exit handlers: some ICDs leave allocations behind when the loader
	 * unloads them, which LeakSanitizer would count against this test. */
	fflush(stdout);
	_exit(failures ? 1 : 0);
}
