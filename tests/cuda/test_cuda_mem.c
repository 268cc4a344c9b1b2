/*
 * test_cuda_mem: ort-ep-cuda's memory and device plumbing (cuda_mem.c,
 * cuda_dev.c).  The size-class rounding is checked on any machine; the
 * rest needs a GPU (exit 77 without one): a freed block is reused for a
 * request of its class and not for a larger one, large blocks within 1.25x
 * are reused, trim returns the cache, pinned buffers are reused by size and
 * round-trip bytes through the device, the pool refuses a 65th buffer in
 * flight, one CUDA stream per ortmk stream id, and the completion thread
 * runs callbacks in order after the work (cuda_dev_drain waits for them).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_dev.h"
#include "cuda_mem.h"

#include "../check.h"

#define MIB ((uint64_t)1 << 20)

static void rounding(void)
{
	static const uint64_t cases[][2] = {
		{0, 256}, {1, 256}, {256, 256}, {257, 512}, {4096, 4096}, {4097, 8192},
		{MIB, MIB}, {MIB + 1, 2 * MIB}, {5 * MIB + MIB / 2, 6 * MIB}, {64 * MIB, 64 * MIB},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK(cuda_heap_round(cases[i][0] ? cases[i][0] : 1) == cases[i][1],
		      "round(%llu) = %llu, want %llu", (unsigned long long)cases[i][0],
		      (unsigned long long)cuda_heap_round(cases[i][0] ? cases[i][0] : 1),
		      (unsigned long long)cases[i][1]);
}

static void heap(void)
{
	cuda_heap h = {0};
	cuda_block a = {0}, b = {0}, c = {0};
	char err[256];
	void *p;

	CHECK(cuda_heap_alloc(&h, 1000, &a, err, sizeof(err)) == 0, "alloc: %s", err);
	CHECK(a.size == 1024 && h.in_use == 1024 && h.mallocs == 1, "size %llu",
	      (unsigned long long)a.size);
	p = a.ptr;
	cuda_heap_free(&h, &a);
	CHECK(!a.ptr && h.in_use == 0 && h.cached == 1024, "free: in use %llu cached %llu",
	      (unsigned long long)h.in_use, (unsigned long long)h.cached);
	CHECK(cuda_heap_alloc(&h, 2000, &b, err, sizeof(err)) == 0 && b.ptr != p,
	      "a larger class reused a smaller block");
	CHECK(cuda_heap_alloc(&h, 900, &a, err, sizeof(err)) == 0 && a.ptr == p && h.hits == 1,
	      "the cached block was not reused");
	cuda_heap_free(&h, &a);
	cuda_heap_free(&h, &b);
	CHECK(cuda_heap_alloc(&h, 3 * MIB, &c, err, sizeof(err)) == 0, "large: %s", err);
	p = c.ptr;
	cuda_heap_free(&h, &c);
	CHECK(cuda_heap_alloc(&h, 4 * MIB, &c, err, sizeof(err)) == 0 && c.ptr != p,
	      "a 3 MiB block served 4 MiB");
	CHECK(cuda_heap_alloc(&h, 3 * MIB - 5, &a, err, sizeof(err)) == 0 && a.ptr == p,
	      "the cached 3 MiB block was not reused");
	cuda_heap_free(&h, &a);
	cuda_heap_free(&h, &c);
	cuda_heap_trim(&h);
	CHECK(h.cached == 0 && h.in_use == 0, "trim left %llu cached", (unsigned long long)h.cached);
	CHECK(cuda_heap_alloc(&h, (uint64_t)1 << 50, &a, err, sizeof(err)) != 0 && !a.ptr &&
	      strstr(err, "cudaMalloc"), "a 1 PiB allocation: '%s'", err);
	cuda_heap_fini(&h);
}

static void pinned(void)
{
	cuda_pinned p;
	cuda_pinned_buf *a, *b;
	cuda_block d = {0};
	cuda_heap h = {0};
	char err[256];

	cuda_pinned_init(&p);
	a = cuda_pinned_get(&p, 100, err, sizeof(err));
	CHECK(a && a->size == 65536, "pinned get: %s", a ? "wrong size" : err);
	b = cuda_pinned_get(&p, 100, err, sizeof(err));
	CHECK(b && b != a, "a busy buffer was handed out twice");
	cuda_pinned_put(&p, a);
	CHECK(cuda_pinned_get(&p, 50000, err, sizeof(err)) == a, "a free buffer was not reused");
	if (a && b && cuda_heap_alloc(&h, 65536, &d, err, sizeof(err)) == 0) {
		for (int i = 0; i < 65536; i++)
			((unsigned char *)a->ptr)[i] = (unsigned char)(i * 7);
		CHECK(cudaMemcpy(d.ptr, a->ptr, 65536, cudaMemcpyHostToDevice) == cudaSuccess &&
		      cudaMemcpy(b->ptr, d.ptr, 65536, cudaMemcpyDeviceToHost) == cudaSuccess &&
		      !memcmp(a->ptr, b->ptr, 65536), "pinned round trip");
		cuda_heap_free(&h, &d);
	}
	/* The pool holds 64 buffers: the 65th in flight is refused with a
	 * message, and one coming back makes room. */
	{
		cuda_pinned_buf *held[64];
		int got = 0;

		cuda_pinned_put(&p, a);
		cuda_pinned_put(&p, b);
		for (int i = 0; i < 64; i++)
			if ((held[i] = cuda_pinned_get(&p, 1000, err, sizeof(err))))
				got++;
		CHECK(got == 64, "%d of 64 pinned buffers", got);
		CHECK(!cuda_pinned_get(&p, 1000, err, sizeof(err)) && strstr(err, "in flight"),
		      "a 65th pinned buffer: '%s'", err);
		cuda_pinned_put(&p, held[10]);
		CHECK(cuda_pinned_get(&p, 1000, err, sizeof(err)) == held[10],
		      "the returned buffer was not handed out again");
	}
	cuda_pinned_fini(&p);
	cuda_heap_fini(&h);
}

typedef struct order {
	pthread_mutex_t mu;
	int seen[8], n, bad;
} order;

static order ord = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void done(void *arg, int ok)
{
	pthread_mutex_lock(&ord.mu);
	if (!ok)
		ord.bad++;
	ord.seen[ord.n++] = (int)(intptr_t)arg;
	pthread_mutex_unlock(&ord.mu);
}

static void streams(void)
{
	cuda_dev d;
	cudaStream_t s1, s1b, s2;
	cuda_block blk = {0};
	cuda_heap h = {0};
	char err[256];
	int n;

	CHECK(cuda_dev_open(&d, err, sizeof(err)) == 0, "open: %s", err);
	CHECK(cuda_dev_stream(&d, 1, &s1, err, sizeof(err)) == 0 &&
	      cuda_dev_stream(&d, 1, &s1b, err, sizeof(err)) == 0 && s1 == s1b,
	      "one CUDA stream per ortmk stream");
	CHECK(cuda_dev_stream(&d, 2, &s2, err, sizeof(err)) == 0 && s2 != s1, "stream 2");
	CHECK(cuda_heap_alloc(&h, 64 * MIB, &blk, err, sizeof(err)) == 0, "alloc: %s", err);
	for (int i = 0; i < 4 && blk.ptr; i++) {
		cudaMemsetAsync(blk.ptr, i, 64 * MIB, s1);
		CHECK(cuda_dev_when_done(&d, s1, done, (void *)(intptr_t)i, err, sizeof(err)) == 0,
		      "when_done: %s", err);
	}
	/* drain returns once every callback queued so far has run. */
	cuda_dev_drain(&d);
	pthread_mutex_lock(&ord.mu);
	n = ord.n;
	pthread_mutex_unlock(&ord.mu);
	CHECK(n == 4 && !ord.bad, "%d callbacks (%d failed) after drain, want 4", n, ord.bad);
	for (int i = 0; i < ord.n; i++)
		CHECK(ord.seen[i] == i, "callback %d ran as %d", i, ord.seen[i]);
	cuda_dev_stream_free(&d, 2);
	CHECK(cuda_dev_stream(&d, 2, &s2, err, sizeof(err)) == 0, "stream 2 again");
	cuda_heap_free(&h, &blk);
	cuda_heap_fini(&h);
	cuda_dev_close(&d);
}

int main(void)
{
	int count = 0;

	rounding();
	if (failures)
		return 1;
	if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
		printf("skip: no CUDA device (size-class rounding checked)\n");
		return 77;
	}
	heap();
	pinned();
	streams();
	printf("%s\n", failures ? "failed" : "ok");
	return failures ? 1 : 0;
}
