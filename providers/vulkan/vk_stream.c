/*
 * vk_stream: streams, submission slots and the timeline-semaphore bridge
 * thread (see vk_stream.h).
 */
#include "vk_stream.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* A slot's staging buffer above this is given back when the slot is
 * reused, so one large copy does not pin its staging for good. */
#define STAGE_KEEP ((VkDeviceSize)4 << 20)

static void full_barrier(VkCommandBuffer cmd)
{
	VkMemoryBarrier mb = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT,
	};

	vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
			     VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

/* The device did not finish or was lost: the same policy as a run's
 * submission (vk_dev_submit_wait): exit for a restart; the core fails
 * every fence this process owed. */
static _Noreturn void device_gone(VkResult r, uint32_t stream)
{
	ipc_log(IPC_LOG_ERROR, "stream %u: %s; exiting for a restart", stream,
		r == VK_TIMEOUT ? "a submission did not finish within ORTMK_VULKAN_TIMEOUT_MS"
				: vk_result_name(r));
	_exit(VKX_EXIT_DEVICE);
}

static void finish_slot(vk_slot *sl)
{
	for (size_t i = 0; i < sl->n_host; i++)
		memcpy(sl->host[i].dst, sl->host[i].src, sl->host[i].n);
	if (sl->sig.fn && sl->sig.f)
		sl->sig.fn(sl->sig.f, sl->sig.value, 1);
}

/* The bridge: waits for each submitted slot in order, does its host work
 * and gives its signal. */
static void *bridge_main(void *arg)
{
	vk_stream *s = arg;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		vk_slot *sl;
		VkSemaphoreWaitInfo wi = {
			.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
			.semaphoreCount = 1,
			.pSemaphores = &s->sem,
		};
		VkResult r;

		while (!s->stop && s->n_done == s->n_sub)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->n_done == s->n_sub)
			break;
		sl = &s->slots[s->n_done % VKX_STREAM_SLOTS];
		wi.pValues = &sl->value;
		pthread_mutex_unlock(&s->mu);
		r = s->d->wait_semaphores(s->d->dev, &wi, s->d->timeout_ns);
		if (r != VK_SUCCESS)
			device_gone(r, s->id);
		finish_slot(sl);
		pthread_mutex_lock(&s->mu);
		s->done = sl->value;
		s->n_done++;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

void vk_streams_init(vk_streams *ss, vk_dev *d)
{
	memset(ss, 0, sizeof(*ss));
	ss->d = d;
}

static void stream_free(vk_stream *s)
{
	if (s->thread) {
		pthread_mutex_lock(&s->mu);
		s->stop = 1;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->thread, NULL);
	}
	for (int i = 0; i < VKX_STREAM_SLOTS; i++) {
		vk_staging_fini(s->d, &s->slots[i].stage);
		free(s->slots[i].host);
	}
	if (s->pool)
		vkDestroyCommandPool(s->d->dev, s->pool, NULL);
	if (s->sem)
		vkDestroySemaphore(s->d->dev, s->sem, NULL);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void vk_streams_fini(vk_streams *ss)
{
	for (int i = 0; i < ss->n; i++) {
		vk_stream_sync(ss->s[i]);
		stream_free(ss->s[i]);
	}
	ss->n = 0;
}

void vk_streams_drop(vk_streams *ss, uint32_t id)
{
	for (int i = 0; i < ss->n; i++) {
		if (ss->s[i]->id != id)
			continue;
		vk_stream_sync(ss->s[i]);
		stream_free(ss->s[i]);
		ss->s[i] = ss->s[--ss->n];
		return;
	}
}

static vk_stream *stream_new(vk_dev *d, uint32_t id, char *err, size_t n)
{
	VkSemaphoreTypeCreateInfo ti = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
		.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
	};
	VkSemaphoreCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
	VkCommandPoolCreateInfo pci = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = d->qfam,
	};
	vk_stream *s = calloc(1, sizeof(*s));
	VkResult r;

	if (!s)
		return snprintf(err, n, "out of memory"), NULL;
	s->d = d;
	s->id = id;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	r = vkCreateSemaphore(d->dev, &si, NULL, &s->sem);
	if (r == VK_SUCCESS)
		r = vkCreateCommandPool(d->dev, &pci, NULL, &s->pool);
	if (r != VK_SUCCESS) {
		snprintf(err, n, "stream %u: %s", id, vk_result_name(r));
		stream_free(s);
		return NULL;
	}
	if (pthread_create(&s->thread, NULL, bridge_main, s)) {
		s->thread = 0;
		snprintf(err, n, "stream %u: cannot start its bridge thread", id);
		stream_free(s);
		return NULL;
	}
	return s;
}

vk_stream *vk_stream_get(vk_streams *ss, uint32_t id, int create, char *err, size_t n)
{
	vk_stream *s;

	for (int i = 0; i < ss->n; i++)
		if (ss->s[i]->id == id)
			return ss->s[i];
	if (!create)
		return NULL;
	if (!ss->d->timeline)
		return snprintf(err, n, "the Vulkan device has no timeline semaphores (Vulkan 1.2 or "
				"VK_KHR_timeline_semaphore): no streams or copies"), NULL;
	if (ss->n == VKX_MAX_STREAMS)
		return snprintf(err, n, "stream %u: more than %d streams in use", id, VKX_MAX_STREAMS),
		       NULL;
	s = stream_new(ss->d, id, err, n);
	if (s)
		ss->s[ss->n++] = s;
	return s;
}

vk_slot *vk_stream_begin(vk_stream *s, char *err, size_t n)
{
	VkCommandBufferBeginInfo bi = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
	};
	vk_slot *sl;
	VkResult r = VK_SUCCESS;

	/* Every slot in flight: wait for the oldest (the bridge exits the
	 * process if the device never finishes it). */
	pthread_mutex_lock(&s->mu);
	while (s->n_sub - s->n_done >= VKX_STREAM_SLOTS)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
	sl = &s->slots[s->n_sub % VKX_STREAM_SLOTS];
	if (sl->stage.size > STAGE_KEEP)
		vk_staging_fini(s->d, &sl->stage);
	sl->n_host = 0;
	sl->stage_used = 0;
	memset(&sl->sig, 0, sizeof(sl->sig));
	if (!sl->cmd) {
		VkCommandBufferAllocateInfo ai = {
			.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
			.commandPool = s->pool,
			.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
			.commandBufferCount = 1,
		};

		r = vkAllocateCommandBuffers(s->d->dev, &ai, &sl->cmd);
		if (r != VK_SUCCESS)
			sl->cmd = VK_NULL_HANDLE;
	}
	if (r == VK_SUCCESS)
		r = vkBeginCommandBuffer(sl->cmd, &bi);
	if (r != VK_SUCCESS)
		return snprintf(err, n, "stream %u: command buffer: %s", s->id, vk_result_name(r)), NULL;
	full_barrier(sl->cmd);
	s->recording = 1;
	return sl;
}

int vk_slot_stage(vk_stream *s, vk_slot *sl, VkDeviceSize size, char *err, size_t n)
{
	return vk_staging_reserve(s->d, &sl->stage, size, err, n);
}

int vk_slot_host(vk_slot *sl, void *dst, const void *src, uint64_t nbytes)
{
	if (sl->n_host == sl->cap_host) {
		size_t cap = sl->cap_host ? 2 * sl->cap_host : 8;
		vk_hostcopy *nh = realloc(sl->host, cap * sizeof(*nh));

		if (!nh)
			return -1;
		sl->host = nh;
		sl->cap_host = cap;
	}
	sl->host[sl->n_host++] = (vk_hostcopy){dst, src, nbytes};
	return 0;
}

void vk_stream_abort(vk_stream *s, vk_slot *sl)
{
	if (s->recording)
		vkEndCommandBuffer(sl->cmd);
	s->recording = 0;
	sl->n_host = 0;
}

int vk_stream_submit(vk_stream *s, vk_slot *sl, const vk_signal *sig, char *err, size_t n)
{
	uint64_t wait = s->value, signal = s->value + 1;
	VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
	VkTimelineSemaphoreSubmitInfo ts = {
		.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
		.waitSemaphoreValueCount = 1,
		.pWaitSemaphoreValues = &wait,
		.signalSemaphoreValueCount = 1,
		.pSignalSemaphoreValues = &signal,
	};
	VkSubmitInfo si = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
		.pNext = &ts,
		.waitSemaphoreCount = 1,
		.pWaitSemaphores = &s->sem,
		.pWaitDstStageMask = &stage,
		.commandBufferCount = 1,
		.pCommandBuffers = &sl->cmd,
		.signalSemaphoreCount = 1,
		.pSignalSemaphores = &s->sem,
	};
	VkResult r;

	if (sl->n_host) {
		/* Device writes to the staging buffer become visible to the
		 * host once the bridge's wait returns. */
		VkMemoryBarrier mb = {
			.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
			.dstAccessMask = VK_ACCESS_HOST_READ_BIT,
		};

		vkCmdPipelineBarrier(sl->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
				     0, 1, &mb, 0, NULL, 0, NULL);
	}
	s->recording = 0;
	r = vkEndCommandBuffer(sl->cmd);
	if (r == VK_SUCCESS)
		r = vkQueueSubmit(s->d->queue, 1, &si, VK_NULL_HANDLE);
	if (r == VK_ERROR_DEVICE_LOST)
		device_gone(r, s->id);
	if (r != VK_SUCCESS) {
		sl->n_host = 0;
		return snprintf(err, n, "stream %u: submit: %s", s->id, vk_result_name(r)), -1;
	}
	s->value = signal;
	sl->value = signal;
	if (sl->n_host)
		s->host_value = signal;
	if (sig)
		sl->sig = *sig;
	pthread_mutex_lock(&s->mu);
	s->n_sub++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

void vk_stream_host_wait(vk_stream *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->done < s->host_value)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

void vk_stream_order(vk_stream *s, VkSemaphore *sem, uint64_t *value)
{
	int idle;

	vk_stream_host_wait(s);
	pthread_mutex_lock(&s->mu);
	idle = s->n_done == s->n_sub;
	pthread_mutex_unlock(&s->mu);
	/* Nothing in flight: no semaphore to wait on (a wait costs a little
	 * on every submission, and most runs follow no copy). */
	*sem = idle ? VK_NULL_HANDLE : s->sem;
	*value = s->value;
}

void vk_stream_sync(vk_stream *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->n_done < s->n_sub)
		pthread_cond_wait(&s->cv, &s->mu);
	pthread_mutex_unlock(&s->mu);
}

int vk_stream_done(vk_stream *s, uint64_t value)
{
	int done;

	pthread_mutex_lock(&s->mu);
	done = s->done >= value;
	pthread_mutex_unlock(&s->mu);
	return done;
}
