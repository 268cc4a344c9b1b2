/*
 * vk_stream: the provider's streams (issue #9) and the bridge from Vulkan
 * timeline semaphores to the shared-memory fences (issue #8).
 *
 * A stream is an ordering domain on the device's one queue: a timeline
 * semaphore whose value counts the stream's submissions, a command pool,
 * and a ring of VKX_STREAM_SLOTS submission slots (command buffer, a
 * host-visible staging buffer, the host-side work to do when the
 * submission completes, the signal to give).  Each submission waits on the
 * stream's previous value and signals the next, so the stream's work runs
 * in the order it was enqueued; it also starts with a full memory barrier,
 * so it sees what every earlier submission on the queue wrote.
 *
 * One bridge thread per stream waits (vkWaitSemaphores) for each submitted
 * slot in order, copies the downloaded bytes from its staging buffer to
 * their host destination (shared memory), then calls the slot's signal
 * (for a COPY: shm_fence_signal through ep_fence_signal) and marks the
 * slot done.  The request thread (every call here except the bridge's)
 * reuses done slots; it alone records, submits and frees.
 *
 * Streams are made on first use by their id (0 is the default stream).
 */
#ifndef ORTMK_VK_STREAM_H
#define ORTMK_VK_STREAM_H

#include <pthread.h>

#include "vk_mem.h"

#define VKX_STREAM_SLOTS 16
#define VKX_MAX_STREAMS 64

/* Called by the bridge thread when a submission is complete (ok 1) or can
 * never complete (ok 0). */
typedef struct vk_signal {
	void (*fn)(void *f, uint64_t value, int ok);
	void *f;                /* NULL: nothing to signal */
	uint64_t value;
} vk_signal;

/* Host-side work after completion: memcpy(dst, src, n). */
typedef struct vk_hostcopy {
	void *dst;
	const void *src;
	uint64_t n;
} vk_hostcopy;

typedef struct vk_slot {
	VkCommandBuffer cmd;
	vk_staging stage;
	VkDeviceSize stage_used;
	vk_hostcopy *host;
	size_t n_host, cap_host;
	vk_signal sig;
	uint64_t value;         /* the stream's value it signals */
} vk_slot;

typedef struct vk_stream {
	vk_dev *d;
	uint32_t id;
	VkSemaphore sem;
	VkCommandPool pool;
	vk_slot slots[VKX_STREAM_SLOTS];
	/* request thread only */
	uint64_t value;         /* last value submitted */
	uint64_t host_value;    /* last value submitted with host-side work */
	uint64_t n_sub, n_rec;  /* slots submitted, reused (slot = count % SLOTS) */
	int recording;          /* slots[n_sub % SLOTS] is being recorded */
	/* shared with the bridge, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t n_done;        /* slots the bridge finished */
	uint64_t done;          /* value of the last finished slot */
	int stop;
	pthread_t thread;
} vk_stream;

typedef struct vk_streams {
	vk_dev *d;
	vk_stream *s[VKX_MAX_STREAMS];
	int n;
} vk_streams;

void vk_streams_init(vk_streams *ss, vk_dev *d);
/* Waits for every stream to finish, stops the bridges, frees. */
void vk_streams_fini(vk_streams *ss);
/* Waits for stream `id` to finish and frees it (the core will not name
 * it again). */
void vk_streams_drop(vk_streams *ss, uint32_t id);
/* The stream with this id, made when `create`; NULL when absent (or with
 * the reason in err when it cannot be made). */
vk_stream *vk_stream_get(vk_streams *ss, uint32_t id, int create, char *err, size_t n);

/* Starts recording a slot (waiting for a free one); its command buffer
 * begins with a full barrier.  NULL with the reason in err. */
vk_slot *vk_stream_begin(vk_stream *s, char *err, size_t n);
/* Makes slot's staging buffer at least `size` bytes (contents not kept:
 * call before writing into it); -1 with the reason. */
int vk_slot_stage(vk_stream *s, vk_slot *sl, VkDeviceSize size, char *err, size_t n);
/* Appends host work for after completion. */
int vk_slot_host(vk_slot *sl, void *dst, const void *src, uint64_t nbytes);
/* Ends, submits (waiting for the stream's previous value, signalling the
 * next) and hands the slot to the bridge, which gives `sig` when done. */
int vk_stream_submit(vk_stream *s, vk_slot *sl, const vk_signal *sig, char *err, size_t n);
/* Drops a slot begun but not submitted (its signal is not given). */
void vk_stream_abort(vk_stream *s, vk_slot *sl);

/* Waits until the host-side work (downloads to host memory) of every
 * submission so far is done: before reading host memory in stream order. */
void vk_stream_host_wait(vk_stream *s);
/* Before a synchronous submission ordered after the stream's work: waits
 * until the host-side work of its earlier submissions is done, then gives
 * the semaphore and value the submission must wait for. */
void vk_stream_order(vk_stream *s, VkSemaphore *sem, uint64_t *value);
/* Waits until every submission of the stream is finished (bridge too). */
void vk_stream_sync(vk_stream *s);
/* 1 when the stream's submissions up to `value` are finished. */
int vk_stream_done(vk_stream *s, uint64_t value);

#endif
