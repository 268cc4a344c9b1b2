/*
 * vk_device: the Vulkan instance, the chosen physical device, its logical
 * device with one compute queue, and the one command buffer, fence and
 * descriptor pool a provider process records its steps into.  Requests
 * reach the provider one at a time (providers/host serialises them), so
 * one of each is enough.
 *
 * Device choice: ORTMK_VULKAN_DEVICE=INDEX or a case-insensitive substring
 * of the device name picks one; otherwise a discrete GPU, else an
 * integrated one, else a virtual one, else a CPU implementation
 * (lavapipe).
 */
#ifndef ORTMK_VK_DEVICE_H
#define ORTMK_VK_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

typedef struct vk_dev {
	VkInstance inst;
	VkPhysicalDevice phys;
	VkDevice dev;
	VkQueue queue;
	uint32_t qfam;
	VkPhysicalDeviceProperties props;
	VkPhysicalDeviceMemoryProperties mem;
	VkCommandPool cmd_pool;
	VkCommandBuffer cmd;
	VkFence fence;
	VkDescriptorPool dpool;
	uint32_t dpool_sets;    /* sets the pool holds */
	VkPipelineCache cache;
	int cache_dirty;        /* pipelines were created since the last save */
	char cache_path[512];   /* "" when the cache is off */
	uint64_t timeout_ns;    /* how long one submission may take */
	/* timeline semaphores (1.2 core or VK_KHR_timeline_semaphore) */
	int timeline;
	PFN_vkWaitSemaphores wait_semaphores;
	PFN_vkGetSemaphoreCounterValue semaphore_value;
	/* storageBuffer16BitAccess is on: float16 tensors stay float16 in
	 * device memory (ORTMK_VULKAN_FP16=0 turns it off) */
	int f16;
} vk_dev;

/* Opens the device chosen as above.  On failure returns < 0 with the reason
 * in err (no driver, no device, the requested one not found). */
int vk_dev_open(vk_dev *d, char *err, size_t n);
void vk_dev_close(vk_dev *d);

/* "llvmpipe (LLVM 15.0.6, 256 bits), cpu, Vulkan 1.3.230" */
void vk_dev_describe(const vk_dev *d, char *out, size_t n);

/* Prints every device and which one would be chosen (ort-ep-vulkan
 * --probe), then exits 0 when there is one, else 77 (the test "skip"
 * code). */
_Noreturn void vk_dev_probe(void);

/* Starts recording into the command buffer (resets it). */
int vk_dev_begin(vk_dev *d, char *err, size_t n);
/* Ends, submits and waits for the command buffer within d->timeout_ns.
 * A timeout or a lost device ends the process with VKX_EXIT_DEVICE: the
 * supervisor restarts it. */
int vk_dev_submit_wait(vk_dev *d, char *err, size_t n);
/* The same, the submission waiting first for timeline semaphore `sem` to
 * reach `value` (a stream's earlier work; VK_NULL_HANDLE: no wait). */
int vk_dev_submit_wait_on(vk_dev *d, VkSemaphore sem, uint64_t value, char *err, size_t n);

#define VKX_EXIT_DEVICE 70

/* A descriptor pool with room for `sets` sets of up to VKX_MAX_BINDINGS
 * storage buffers each, reset (all previous sets freed). */
int vk_dev_reset_descriptors(vk_dev *d, uint32_t sets, char *err, size_t n);

/* The memory type index with all of `want` among `bits`, preferring one
 * that also has `prefer`; -1 when none. */
int vk_dev_memory_type(const vk_dev *d, uint32_t bits, VkMemoryPropertyFlags want,
		       VkMemoryPropertyFlags prefer);

/* "VK_ERROR_OUT_OF_DEVICE_MEMORY" */
const char *vk_result_name(VkResult r);

#define VKX_MAX_BINDINGS 8

#endif
