/*
 * vk_device: instance, device choice, queue, command buffer, fence and
 * descriptor pool (see vk_device.h).  The pipeline cache lives in
 * vk_cache.c.
 */
#include "vk_device.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "vk_cache.h"

#define MAX_DEVICES 16
#define DEFAULT_TIMEOUT_MS 60000

const char *vk_result_name(VkResult r)
{
	switch (r) {
	case VK_SUCCESS: return "VK_SUCCESS";
	case VK_NOT_READY: return "VK_NOT_READY";
	case VK_TIMEOUT: return "VK_TIMEOUT";
	case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
	case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
	case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
	case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
	case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
	case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER";
	case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
	case VK_ERROR_TOO_MANY_OBJECTS: return "VK_ERROR_TOO_MANY_OBJECTS";
	case VK_ERROR_OUT_OF_POOL_MEMORY: return "VK_ERROR_OUT_OF_POOL_MEMORY";
	default: return "VK_ERROR (other)";
	}
}

static const char *type_name(VkPhysicalDeviceType t)
{
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
	default: return "other";
	}
}

/* Lower is better: discrete, integrated, virtual, CPU, other. */
static int type_rank(VkPhysicalDeviceType t)
{
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
	default: return 4;
	}
}

static int compute_family(VkPhysicalDevice p, uint32_t *fam)
{
	VkQueueFamilyProperties q[16];
	uint32_t n = 16;

	vkGetPhysicalDeviceQueueFamilyProperties(p, &n, q);
	/* A compute-only family is often the dedicated async-compute engine;
	 * any family with compute does. */
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < n; i++)
			if ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && q[i].queueCount &&
			    (pass || !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))) {
				*fam = i;
				return 0;
			}
	return -1;
}

static int name_matches(const char *name, const char *want)
{
	size_t nl = strlen(name), wl = strlen(want);

	for (size_t i = 0; wl && i + wl <= nl; i++) {
		size_t k = 0;

		while (k < wl && tolower((unsigned char)name[i + k]) == tolower((unsigned char)want[k]))
			k++;
		if (k == wl)
			return 1;
	}
	return 0;
}

static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return 0;
	return 1;
}

/* Index of the device to use among `n`, or -1 with the reason in err. */
static int choose(VkPhysicalDevice *devs, uint32_t n, char *err, size_t errlen)
{
	const char *want = getenv("ORTMK_VULKAN_DEVICE");
	int best = -1, best_rank = 99;

	for (uint32_t i = 0; i < n; i++) {
		VkPhysicalDeviceProperties p;
		uint32_t fam;

		vkGetPhysicalDeviceProperties(devs[i], &p);
		if (compute_family(devs[i], &fam))
			continue;
		if (want && want[0]) {
			if (all_digits(want) ? (uint32_t)atoi(want) == i : name_matches(p.deviceName, want))
				return (int)i;
			continue;
		}
		if (type_rank(p.deviceType) < best_rank) {
			best = (int)i;
			best_rank = type_rank(p.deviceType);
		}
	}
	if (best < 0)
		snprintf(err, errlen, want && want[0] ? "ORTMK_VULKAN_DEVICE=%s matches no device with a compute queue"
			 : "no Vulkan device with a compute queue%s", want && want[0] ? want : "");
	return best;
}

static int make_instance(vk_dev *d, char *err, size_t n)
{
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "ort-ep-vulkan",
		.pEngineName = "ortmk",
		/* 1.2 for timeline semaphores (vk_stream.c); a 1.0 or 1.1
		 * device still opens (with VK_KHR_timeline_semaphore, or
		 * without streams). */
		.apiVersion = VK_API_VERSION_1_2,
	};
	VkInstanceCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
	};
	VkResult r = vkCreateInstance(&ci, NULL, &d->inst);

	if (r != VK_SUCCESS) {
		d->inst = VK_NULL_HANDLE;
		snprintf(err, n, "vkCreateInstance: %s (is a Vulkan driver installed?)", vk_result_name(r));
		return -1;
	}
	return 0;
}

static int pick_physical(vk_dev *d, char *err, size_t n)
{
	VkPhysicalDevice devs[MAX_DEVICES];
	uint32_t count = MAX_DEVICES;
	VkResult r = vkEnumeratePhysicalDevices(d->inst, &count, devs);
	int i;

	if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || count == 0) {
		snprintf(err, n, "no Vulkan device (%s)", vk_result_name(r));
		return -1;
	}
	i = choose(devs, count, err, n);
	if (i < 0)
		return -1;
	d->phys = devs[i];
	vkGetPhysicalDeviceProperties(d->phys, &d->props);
	vkGetPhysicalDeviceMemoryProperties(d->phys, &d->mem);
	compute_family(d->phys, &d->qfam);
	return 0;
}

static int has_extension(VkPhysicalDevice p, const char *name)
{
	VkExtensionProperties *e;
	uint32_t cnt = 0;
	int found = 0;

	if (vkEnumerateDeviceExtensionProperties(p, NULL, &cnt, NULL) != VK_SUCCESS || !cnt)
		return 0;
	e = calloc(cnt, sizeof(*e));
	if (e && vkEnumerateDeviceExtensionProperties(p, NULL, &cnt, e) == VK_SUCCESS)
		for (uint32_t i = 0; i < cnt && !found; i++)
			found = strcmp(e[i].extensionName, name) == 0;
	free(e);
	return found;
}

/* Timeline semaphores: core in 1.2, else VK_KHR_timeline_semaphore.  Fills
 * *tl (chained into the device's pNext) and *ext when they are there. */
static int want_timeline(vk_dev *d, VkPhysicalDeviceTimelineSemaphoreFeatures *tl,
			 const char **ext)
{
	VkPhysicalDeviceFeatures2 f2 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
		.pNext = tl,
	};
	int core = d->props.apiVersion >= VK_API_VERSION_1_2;

	*ext = NULL;
	tl->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
	tl->pNext = NULL;
	tl->timelineSemaphore = VK_FALSE;
	if (!core && !has_extension(d->phys, VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME))
		return 0;
	if (d->props.apiVersion < VK_API_VERSION_1_1)
		return 0;       /* no vkGetPhysicalDeviceFeatures2 to ask */
	vkGetPhysicalDeviceFeatures2(d->phys, &f2);
	if (!core)
		*ext = VK_KHR_TIMELINE_SEMAPHORE_EXTENSION_NAME;
	return tl->timelineSemaphore == VK_TRUE;
}

static void load_timeline(vk_dev *d, int core)
{
	d->wait_semaphores = (PFN_vkWaitSemaphores)vkGetDeviceProcAddr(d->dev,
		core ? "vkWaitSemaphores" : "vkWaitSemaphoresKHR");
	d->semaphore_value = (PFN_vkGetSemaphoreCounterValue)vkGetDeviceProcAddr(d->dev,
		core ? "vkGetSemaphoreCounterValue" : "vkGetSemaphoreCounterValueKHR");
	d->timeline = d->wait_semaphores && d->semaphore_value;
}

/* 16-bit storage (core in 1.1): chains *s into the device's features when
 * the device has storageBuffer16BitAccess and ORTMK_VULKAN_FP16 is not 0. */
static void want_f16(vk_dev *d, VkDeviceCreateInfo *ci, VkPhysicalDevice16BitStorageFeatures *s)
{
	VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
	const char *env = getenv("ORTMK_VULKAN_FP16");

	memset(s, 0, sizeof(*s));
	s->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
	f2.pNext = s;
	d->f16 = 0;
	if (d->props.apiVersion < VK_API_VERSION_1_1 || (env && strcmp(env, "0") == 0))
		return;
	vkGetPhysicalDeviceFeatures2(d->phys, &f2);
	if (!s->storageBuffer16BitAccess)
		return;
	memset(s, 0, sizeof(*s));
	s->sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
	s->storageBuffer16BitAccess = VK_TRUE;
	s->pNext = (void *)ci->pNext;
	ci->pNext = s;
	d->f16 = 1;
}

static int make_device(vk_dev *d, char *err, size_t n)
{
	VkPhysicalDevice16BitStorageFeatures s16;
	float prio = 1.0f;
	VkPhysicalDeviceTimelineSemaphoreFeatures tl;
	const char *tl_ext;
	int timeline = want_timeline(d, &tl, &tl_ext);
	VkDeviceQueueCreateInfo q = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = d->qfam,
		.queueCount = 1,
		.pQueuePriorities = &prio,
	};
	VkDeviceCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.queueCreateInfoCount = 1,
		.pQueueCreateInfos = &q,
		.pNext = timeline ? &tl : NULL,
		.enabledExtensionCount = timeline && tl_ext ? 1 : 0,
		.ppEnabledExtensionNames = timeline && tl_ext ? &tl_ext : NULL,
	};
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = d->qfam,
	};
	VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	VkResult r;

	want_f16(d, &ci, &s16);
	r = vkCreateDevice(d->phys, &ci, NULL, &d->dev);

	if (r != VK_SUCCESS) {
		d->dev = VK_NULL_HANDLE;
		snprintf(err, n, "vkCreateDevice: %s", vk_result_name(r));
		return -1;
	}
	vkGetDeviceQueue(d->dev, d->qfam, 0, &d->queue);
	if (timeline)
		load_timeline(d, tl_ext == NULL);
	r = vkCreateCommandPool(d->dev, &pci, NULL, &d->cmd_pool);
	if (r == VK_SUCCESS) {
		VkCommandBufferAllocateInfo ai = {
			.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
			.commandPool = d->cmd_pool,
			.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
			.commandBufferCount = 1,
		};

		r = vkAllocateCommandBuffers(d->dev, &ai, &d->cmd);
	}
	if (r == VK_SUCCESS)
		r = vkCreateFence(d->dev, &fci, NULL, &d->fence);
	if (r != VK_SUCCESS) {
		snprintf(err, n, "command buffer setup: %s", vk_result_name(r));
		return -1;
	}
	return 0;
}

int vk_dev_open(vk_dev *d, char *err, size_t n)
{
	const char *t = getenv("ORTMK_VULKAN_TIMEOUT_MS");
	long ms = t ? atol(t) : 0;

	memset(d, 0, sizeof(*d));
	d->timeout_ns = (uint64_t)(ms > 0 ? ms : DEFAULT_TIMEOUT_MS) * 1000000u;
	if (make_instance(d, err, n) || pick_physical(d, err, n) || make_device(d, err, n)) {
		vk_dev_close(d);
		return -1;
	}
	vk_cache_open(d);
	return 0;
}

void vk_dev_close(vk_dev *d)
{
	if (d->dev) {
		vkDeviceWaitIdle(d->dev);
		vk_cache_close(d);
		if (d->dpool)
			vkDestroyDescriptorPool(d->dev, d->dpool, NULL);
		if (d->fence)
			vkDestroyFence(d->dev, d->fence, NULL);
		if (d->cmd_pool)
			vkDestroyCommandPool(d->dev, d->cmd_pool, NULL);
		vkDestroyDevice(d->dev, NULL);
	}
	if (d->inst)
		vkDestroyInstance(d->inst, NULL);
	memset(d, 0, sizeof(*d));
}

void vk_dev_describe(const vk_dev *d, char *out, size_t n)
{
	uint32_t v = d->props.apiVersion;

	snprintf(out, n, "%s, %s, Vulkan %u.%u.%u", d->props.deviceName,
		 type_name(d->props.deviceType), VK_VERSION_MAJOR(v), VK_VERSION_MINOR(v),
		 VK_VERSION_PATCH(v));
}

_Noreturn void vk_dev_probe(void)
{
	vk_dev d = {0};
	VkPhysicalDevice devs[MAX_DEVICES];
	uint32_t count = MAX_DEVICES;
	char err[256] = "", desc[512];
	int chosen;

	if (make_instance(&d, err, sizeof(err))) {
		printf("no Vulkan: %s\n", err);
		fflush(stdout);
		_exit(77);
	}
	if (vkEnumeratePhysicalDevices(d.inst, &count, devs) < 0)
		count = 0;
	chosen = choose(devs, count, err, sizeof(err));
	for (uint32_t i = 0; i < count; i++) {
		d.phys = devs[i];
		vkGetPhysicalDeviceProperties(devs[i], &d.props);
		vk_dev_describe(&d, desc, sizeof(desc));
		printf("%c %u: %s\n", (int)i == chosen ? '*' : ' ', i, desc);
	}
	if (chosen < 0)
		printf("no usable device: %s\n", err);
	vkDestroyInstance(d.inst, NULL);
	/* Skip exit handlers: some ICDs leave allocations behind when the
	 * loader unloads them, which LeakSanitizer builds would turn into a
	 * failing exit status. */
	fflush(stdout);
	_exit(chosen < 0 ? 77 : 0);
}

int vk_dev_begin(vk_dev *d, char *err, size_t n)
{
	VkCommandBufferBeginInfo bi = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
	};
	VkResult r = vkResetCommandBuffer(d->cmd, 0);

	if (r == VK_SUCCESS)
		r = vkBeginCommandBuffer(d->cmd, &bi);
	if (r != VK_SUCCESS) {
		snprintf(err, n, "vkBeginCommandBuffer: %s", vk_result_name(r));
		return -1;
	}
	return 0;
}

int vk_dev_submit_wait(vk_dev *d, char *err, size_t n)
{
	return vk_dev_submit_wait_on(d, VK_NULL_HANDLE, 0, err, n);
}

int vk_dev_submit_wait_on(vk_dev *d, VkSemaphore sem, uint64_t value, char *err, size_t n)
{
	VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
	VkTimelineSemaphoreSubmitInfo ts = {
		.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
		.waitSemaphoreValueCount = 1,
		.pWaitSemaphoreValues = &value,
	};
	VkSubmitInfo si = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
		.pNext = sem ? &ts : NULL,
		.waitSemaphoreCount = sem ? 1 : 0,
		.pWaitSemaphores = &sem,
		.pWaitDstStageMask = &stage,
		.commandBufferCount = 1,
		.pCommandBuffers = &d->cmd,
	};
	VkResult r = vkEndCommandBuffer(d->cmd);

	if (r == VK_SUCCESS)
		r = vkResetFences(d->dev, 1, &d->fence);
	if (r == VK_SUCCESS)
		r = vkQueueSubmit(d->queue, 1, &si, d->fence);
	if (r == VK_SUCCESS)
		r = vkWaitForFences(d->dev, 1, &d->fence, VK_TRUE, d->timeout_ns);
	if (r == VK_TIMEOUT || r == VK_ERROR_DEVICE_LOST) {
		/* The command buffer may still be running (or the device is
		 * gone): nothing here can be reused safely.  Exit, so that the
		 * supervisor restarts a clean process (and retries the run when
		 * the session asks for it). */
		ipc_log(IPC_LOG_ERROR, "%s; exiting for a restart", r == VK_TIMEOUT ?
			"the device did not finish a submission within ORTMK_VULKAN_TIMEOUT_MS" :
			"the device was lost");
		_exit(VKX_EXIT_DEVICE);
	}
	if (r != VK_SUCCESS) {
		snprintf(err, n, "submit: %s", vk_result_name(r));
		return -1;
	}
	return 0;
}

int vk_dev_reset_descriptors(vk_dev *d, uint32_t sets, char *err, size_t n)
{
	VkResult r;

	if (sets == 0)
		sets = 1;
	if (d->dpool && sets <= d->dpool_sets)
		return vkResetDescriptorPool(d->dev, d->dpool, 0) == VK_SUCCESS ? 0 : -1;
	if (d->dpool)
		vkDestroyDescriptorPool(d->dev, d->dpool, NULL);
	d->dpool = VK_NULL_HANDLE;
	sets = sets < 256 ? 256 : sets * 2;
	{
		VkDescriptorPoolSize ps = {
			.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.descriptorCount = sets * VKX_MAX_BINDINGS,
		};
		VkDescriptorPoolCreateInfo ci = {
			.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
			.maxSets = sets,
			.poolSizeCount = 1,
			.pPoolSizes = &ps,
		};

		r = vkCreateDescriptorPool(d->dev, &ci, NULL, &d->dpool);
	}
	if (r != VK_SUCCESS) {
		d->dpool = VK_NULL_HANDLE;
		snprintf(err, n, "vkCreateDescriptorPool: %s", vk_result_name(r));
		return -1;
	}
	d->dpool_sets = sets;
	return 0;
}

int vk_dev_memory_type(const vk_dev *d, uint32_t bits, VkMemoryPropertyFlags want,
		       VkMemoryPropertyFlags prefer)
{
	int fallback = -1;

	for (uint32_t i = 0; i < d->mem.memoryTypeCount; i++) {
		VkMemoryPropertyFlags f = d->mem.memoryTypes[i].propertyFlags;

		if (!(bits & (1u << i)) || (f & want) != want)
			continue;
		if ((f & prefer) == prefer)
			return (int)i;
		if (fallback < 0)
			fallback = (int)i;
	}
	return fallback;
}
