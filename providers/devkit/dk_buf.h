/*
 * dk_buf: device memory as the device kit sees it, whatever the device:
 * an allocation of a provider's heap or part of one.  Its own header so
 * the providers' memory layers (vk_mem.h) use it without the executor.
 */
#ifndef ORTMK_DK_BUF_H
#define ORTMK_DK_BUF_H

#include <stdint.h>

/* ptr NULL: no memory. */
typedef struct dk_buf {
	void *ptr;              /* CUDA: the address; Vulkan: the block's VkBuffer */
	uint64_t off;           /* Vulkan: offset in that buffer; CUDA: 0 */
	uint64_t size;          /* bytes reserved */
	int block;              /* the provider heap's own bookkeeping */
} dk_buf;

#endif
