/*
 * shm: shared memory for ortmk.
 *
 * Segments are memfds sealed against shrink and grow (so a peer can never
 * make the other side SIGBUS), mapped read-write by the core and by the
 * providers.  The arena is an offset allocator used by the memory planner to
 * lay activations out inside one segment.  Fences are 64-bit timeline
 * counters in shared memory that any process mapping them can signal or wait
 * on with a deadline.
 *
 * Called by core/ (creates segments, plans, waits on fences) and by
 * providers/host (maps segments, signals fences).  Errors are negative errno
 * values.
 */
#ifndef ORTMK_SHM_H
#define ORTMK_SHM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define SHM_ALIGN 64

typedef struct shm_segment {
	int fd;         /* memfd, close-on-exec; -1 when not open */
	void *base;     /* mapping of the whole segment */
	size_t size;
	uint64_t id;    /* env-wide id the core assigns; 0 = none */
} shm_segment;

/* Creates a sealed memfd of `size` bytes (rounded up to a page), backs
 * every page (fallocate) and maps it.  0, -ENOMEM when the memory cannot be
 * had (instead of a SIGBUS at first touch later), or another -errno. */
int shm_segment_create(const char *name, size_t size, uint64_t id, shm_segment *out);
/* Maps a segment received from a peer.  Refuses (-EINVAL) a descriptor that
 * is not a memfd sealed against shrinking and growing, or that is smaller
 * than `size`; maps the file's whole (page-rounded) size.  Takes ownership
 * of `fd` (closed on failure too). */
int shm_segment_map_fd_take(int fd, size_t size, uint64_t id, shm_segment *out);
void shm_segment_destroy(shm_segment *s);
/* Is [off, off+len) inside the segment?  Overflow-safe. */
int shm_segment_contains(const shm_segment *s, uint64_t off, uint64_t len);

/*
 * Arena: best-fit offset allocator over [0, capacity), 64-byte aligned
 * blocks, coalescing free neighbours.  Holds no memory itself: the planner
 * allocates offsets and the high-water mark sizes the segment.
 */
typedef struct shm_arena_block {
	uint64_t off, size;
	int used;
} shm_arena_block;

typedef struct shm_arena {
	shm_arena_block *blocks;  /* sorted by offset, covering [0, capacity) */
	size_t n, cap_blocks;
	uint64_t capacity;
	uint64_t high_water;      /* largest end offset ever allocated */
} shm_arena;

int shm_arena_init(shm_arena *a, uint64_t capacity);
void shm_arena_fini(shm_arena *a);
/* 0 and *off on success; -ENOMEM when no free block fits. nbytes 0 allocates
 * one aligned unit so every value has a distinct offset. */
int shm_arena_alloc(shm_arena *a, uint64_t nbytes, uint64_t *off);
/* -EINVAL for an offset that is not the start of a used block. */
int shm_arena_free(shm_arena *a, uint64_t off);

/*
 * Fences.  The fence word lives in shared memory.  The top bit marks a fence
 * that will never be signalled (its signaller died): waiters wake with
 * -EPIPE.  `wake` is the futex word: bumped on every signal or failure.
 */
#define SHM_FENCE_FAILED (UINT64_C(1) << 63)

typedef struct shm_fence {
	_Atomic uint64_t value;
	_Atomic uint32_t wake;
	uint32_t pad;
} shm_fence;

void shm_fence_init(shm_fence *f, uint64_t value);
/* Stores `value` (release) and wakes every waiter; values only grow. */
void shm_fence_signal(shm_fence *f, uint64_t value);
/* Marks the fence failed and wakes every waiter. */
void shm_fence_fail(shm_fence *f);
uint64_t shm_fence_read(const shm_fence *f);
/* Waits until value >= `target`.  0 when reached, -ETIMEDOUT past the
 * deadline (CLOCK_MONOTONIC, ns; 0 = no wait beyond a check, UINT64_MAX =
 * forever), -EPIPE when the fence failed (even if the value had reached
 * `target`).  Spins briefly, then sleeps. */
int shm_fence_wait(shm_fence *f, uint64_t target, uint64_t deadline_ns);

uint64_t shm_now_ns(void);

#endif
