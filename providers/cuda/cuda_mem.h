/*
 * cuda_mem: device and pinned host memory of ort-ep-cuda.
 *
 * The device heap caches what it frees: sizes up to 1 MiB are rounded to a
 * power of two (from 256 bytes) and kept in a free list per size class;
 * larger ones are rounded to whole MiB and kept in one list, reused when
 * a request fits within 1.25x.  cudaMalloc is called only on a miss, and
 * when it fails the cache is given back to the driver and the request
 * retried.  Single-threaded (the request thread).
 *
 * The pinned pool hands out page-locked host buffers for staging
 * (cudaHostAlloc); `put` is thread-safe (the completion thread returns the
 * buffers of asynchronous copies).
 */
#ifndef ORTMK_CUDA_MEM_H
#define ORTMK_CUDA_MEM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define CUDA_SMALL_CLASSES 13   /* 256 B .. 1 MiB */
#define CUDA_LARGE_UNIT ((uint64_t)1 << 20)

typedef struct cuda_block {
	void *ptr;              /* NULL: none */
	uint64_t size;          /* rounded size it was allocated with */
} cuda_block;

typedef struct cuda_list {
	cuda_block *v;
	size_t n, cap;
} cuda_list;

typedef struct cuda_heap {
	cuda_list small[CUDA_SMALL_CLASSES];
	cuda_list large;
	uint64_t in_use, cached, peak;
	uint64_t mallocs, hits;
} cuda_heap;

int cuda_heap_alloc(cuda_heap *h, uint64_t nbytes, cuda_block *out, char *err, size_t n);
/* Back to the cache; b->ptr becomes NULL.  NULL-safe.  The caller makes
 * sure no enqueued work still uses it. */
void cuda_heap_free(cuda_heap *h, cuda_block *b);
/* Gives every cached block back to the driver. */
void cuda_heap_trim(cuda_heap *h);
void cuda_heap_fini(cuda_heap *h);
/* The rounded size a request gets (tests and logs). */
uint64_t cuda_heap_round(uint64_t nbytes);

typedef struct cuda_pinned_buf {
	void *ptr;
	uint64_t size;
	int busy;
} cuda_pinned_buf;

typedef struct cuda_pinned {
	pthread_mutex_t mu;
	cuda_pinned_buf *v;
	size_t n, cap;
} cuda_pinned;

void cuda_pinned_init(cuda_pinned *p);
/* A free pinned buffer of at least nbytes (the smallest that fits, else a
 * new one); NULL with the reason. */
cuda_pinned_buf *cuda_pinned_get(cuda_pinned *p, uint64_t nbytes, char *err, size_t n);
void cuda_pinned_put(cuda_pinned *p, cuda_pinned_buf *b);
void cuda_pinned_fini(cuda_pinned *p);

#endif
