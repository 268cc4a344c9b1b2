/*
 * test_vk_stream: ort-ep-vulkan's device buffers, streams and copy engine
 * on the real device (vk_copy.c, vk_stream.c): buffer ids (bad, duplicate,
 * unknown, too large), host -> device -> device -> host round trips
 * bit-exact (small, unaligned, and larger than a staging chunk), the
 * completion bridged from the timeline semaphore to a shared-memory fence
 * (shm_fence, waited with a deadline), ordering of many submissions on one
 * stream (more than the slot ring holds), two streams at once (freed and
 * made again), copy
 * validation errors, and a buffer freed while a copy still reads it.
 * Exit 77 when there is no Vulkan device.  `--bench N` measures instead
 * the latency of a small COPY to its fence.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm.h"
#include "vk_copy.h"

#include "../check.h"

#define WAIT_NS (UINT64_C(30) * 1000000000)

/* The signal the provider gives through ep_fence_signal, here straight
 * to the shm fence. */
static void fence_signal(void *f, uint64_t value, int ok)
{
	if (ok)
		shm_fence_signal(f, value);
	else
		shm_fence_fail(f);
}

static vk_signal sig(shm_fence *f, uint64_t value)
{
	return (vk_signal){fence_signal, f, value};
}

static int fence_wait(shm_fence *f, uint64_t value)
{
	return shm_fence_wait(f, value, shm_now_ns() + WAIT_NS);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		p[i] = (uint8_t)(seed >> 24);
	}
}

static void test_ids(vk_devmem *m)
{
	char err[256];
	VkDeviceSize used = m->heap->used;

	CHECK(vk_dm_alloc(m, 0, 16, err, sizeof(err)) == -EINVAL, "id 0 accepted");
	CHECK(vk_dm_alloc(m, 7, 16, err, sizeof(err)) == 0, "alloc 7: %s", err);
	CHECK(vk_dm_alloc(m, 7, 16, err, sizeof(err)) == -EINVAL && strstr(err, "already exists"),
	      "duplicate id: %s", err);
	CHECK(vk_dm_alloc(m, 8, (uint64_t)1 << 40, err, sizeof(err)) == -ENOMEM, "1 TiB accepted");
	CHECK(vk_dm_find(m, 8) == NULL, "a failed alloc left id 8");
	CHECK(vk_dm_free(m, 9) == -ENOENT, "freeing an unknown id");
	/* Enough ids to grow the table several times, freed in another order. */
	for (uint64_t id = 100; id < 400; id++)
		CHECK(vk_dm_alloc(m, id, 64, err, sizeof(err)) == 0, "alloc %llu: %s",
		      (unsigned long long)id, err);
	for (uint64_t id = 100; id < 400; id += 2)
		CHECK(vk_dm_free(m, id) == 0, "free %llu", (unsigned long long)id);
	for (uint64_t id = 101; id < 400; id += 2)
		CHECK(vk_dm_find(m, id) && vk_dm_find(m, id)->nbytes == 64, "id %llu lost",
		      (unsigned long long)id);
	for (uint64_t id = 101; id < 400; id += 2)
		CHECK(vk_dm_free(m, id) == 0, "free %llu", (unsigned long long)id);
	CHECK(vk_dm_free(m, 7) == 0, "free 7");
	CHECK(m->n == 0 && m->heap->used == used, "%zu ids, %llu bytes left", m->n,
	      (unsigned long long)(m->heap->used - used));
}

/* host -> buffer 1 -> buffer 2 (at an offset) -> host, one COPY. */
static void round_trip(vk_devmem *m, shm_fence *f, uint64_t *fv, size_t nbytes, uint32_t stream)
{
	uint8_t *a = malloc(nbytes), *b = calloc(1, nbytes);
	char err[256];
	vk_copy_op ops[3] = {
		{.src_host = a, .dst_buf = 1, .nbytes = nbytes},
		{.src_buf = 1, .dst_buf = 2, .dst_off = 256, .nbytes = nbytes},
		{.src_buf = 2, .src_off = 256, .dst_host = b, .nbytes = nbytes},
	};
	vk_signal s = sig(f, ++*fv);

	fill(a, nbytes, (uint32_t)nbytes);
	CHECK(vk_dm_alloc(m, 1, nbytes, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_dm_alloc(m, 2, nbytes + 256, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_dm_copy(m, stream, ops, 3, &s, err, sizeof(err)) == 0, "copy: %s", err);
	CHECK(fence_wait(f, *fv) == 0, "fence %llu not reached", (unsigned long long)*fv);
	CHECK(memcmp(a, b, nbytes) == 0, "%zu bytes came back different", nbytes);
	vk_dm_free(m, 1);
	vk_dm_free(m, 2);
	free(a);
	free(b);
}

/* Each COPY writes k into the buffer and reads it back to out[k]: in
 * stream order, every out[k] is k. */
static void test_order(vk_devmem *m, shm_fence *f, uint64_t *fv)
{
	enum { N = 200 };
	uint32_t in[N], out[N];
	char err[256];
	int bad = 0;

	memset(out, 0xff, sizeof(out));
	CHECK(vk_dm_alloc(m, 3, 4, err, sizeof(err)) == 0, "%s", err);
	for (uint32_t k = 0; k < N; k++) {
		vk_copy_op ops[2] = {
			{.src_host = &in[k], .dst_buf = 3, .nbytes = 4},
			{.src_buf = 3, .dst_host = &out[k], .nbytes = 4},
		};
		vk_signal s = sig(f, ++*fv);

		in[k] = k;
		CHECK(vk_dm_copy(m, 0, ops, 2, &s, err, sizeof(err)) == 0, "copy %u: %s", k, err);
	}
	CHECK(fence_wait(f, *fv) == 0, "fence not reached");
	for (uint32_t k = 0; k < N; k++)
		bad += out[k] != k;
	CHECK(bad == 0, "%d of %d reads out of order", bad, N);
	vk_dm_free(m, 3);
}

static void test_two_streams(vk_devmem *m)
{
	enum { N = 1 << 20 };
	uint8_t *a = malloc(N), *b = malloc(N), *ra = calloc(1, N), *rb = calloc(1, N);
	shm_fence fa, fb;
	char err[256];
	vk_copy_op ua = {.src_host = a, .dst_buf = 10, .nbytes = N};
	vk_copy_op ub = {.src_host = b, .dst_buf = 11, .nbytes = N};
	vk_copy_op da = {.src_buf = 10, .dst_host = ra, .nbytes = N};
	vk_copy_op db = {.src_buf = 11, .dst_host = rb, .nbytes = N};
	vk_signal sa = sig(&fa, 1), sb = sig(&fb, 1), sa2 = sig(&fa, 2), sb2 = sig(&fb, 2);

	shm_fence_init(&fa, 0);
	shm_fence_init(&fb, 0);
	fill(a, N, 1);
	fill(b, N, 2);
	CHECK(vk_dm_alloc(m, 10, N, err, sizeof(err)) == 0 && vk_dm_alloc(m, 11, N, err, sizeof(err)) == 0,
	      "%s", err);
	CHECK(vk_dm_copy(m, 1, &ua, 1, &sa, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_dm_copy(m, 2, &ub, 1, &sb, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_dm_copy(m, 1, &da, 1, &sa2, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_dm_copy(m, 2, &db, 1, &sb2, err, sizeof(err)) == 0, "%s", err);
	CHECK(fence_wait(&fa, 2) == 0 && fence_wait(&fb, 2) == 0, "fences not reached");
	CHECK(memcmp(a, ra, N) == 0 && memcmp(b, rb, N) == 0, "two streams mixed up their data");
	CHECK(vk_stream_get(&m->streams, 1, 0, err, sizeof(err)) &&
	      vk_stream_get(&m->streams, 2, 0, err, sizeof(err)), "streams 1 and 2 not made");
	/* Freed streams go (after their work); an id used again gets a new
	 * one that works. */
	vk_dm_stream_free(m, 1);
	vk_dm_stream_free(m, 2);
	CHECK(!vk_stream_get(&m->streams, 1, 0, err, sizeof(err)) &&
	      !vk_stream_get(&m->streams, 2, 0, err, sizeof(err)) && m->last == NULL,
	      "freed streams still there");
	memset(ra, 0, N);
	sa = sig(&fa, 3);
	CHECK(vk_dm_copy(m, 1, &da, 1, &sa, err, sizeof(err)) == 0, "%s", err);
	CHECK(fence_wait(&fa, 3) == 0 && memcmp(a, ra, N) == 0, "stream 1 made again does not work");
	vk_dm_stream_free(m, 1);
	vk_dm_free(m, 10);
	vk_dm_free(m, 11);
	free(a);
	free(b);
	free(ra);
	free(rb);
}

static void test_errors(vk_devmem *m)
{
	uint8_t host[64];
	char err[256];
	shm_fence f;
	vk_signal s = sig(&f, 1);
	vk_copy_op unknown = {.src_host = host, .dst_buf = 99, .nbytes = 64};
	vk_copy_op outside = {.src_host = host, .dst_buf = 20, .dst_off = 32, .nbytes = 64};
	vk_copy_op wrap = {.src_buf = 20, .src_off = UINT64_MAX - 8, .dst_host = host, .nbytes = 16};
	vk_copy_op overlap = {.src_buf = 20, .dst_buf = 20, .dst_off = 8, .nbytes = 16};
	vk_copy_op ok = {.src_host = host, .dst_buf = 20, .nbytes = 64};
	vk_copy_op two[2] = {ok, unknown};

	shm_fence_init(&f, 0);
	CHECK(vk_dm_alloc(m, 20, 64, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_dm_copy(m, 0, &unknown, 1, &s, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "buffer 99 is unknown"), "unknown buffer: %s", err);
	CHECK(vk_dm_copy(m, 0, &outside, 1, &s, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "outside device buffer 20"), "outside: %s", err);
	CHECK(vk_dm_copy(m, 0, &wrap, 1, &s, err, sizeof(err)) == -EINVAL, "wrap-around accepted");
	CHECK(vk_dm_copy(m, 0, &overlap, 1, &s, err, sizeof(err)) == -EINVAL &&
	      strstr(err, "overlap"), "overlap: %s", err);
	/* A bad op anywhere rejects the whole COPY before anything runs. */
	CHECK(vk_dm_copy(m, 0, two, 2, &s, err, sizeof(err)) == -EINVAL && strstr(err, "copy 1"),
	      "second op: %s", err);
	CHECK(shm_fence_read(&f) == 0, "a rejected copy signalled its fence");
	vk_dm_free(m, 20);
}

/* A buffer freed while a copy still reads it is kept until the copy is
 * done: the copy's data is right and nothing leaks. */
static void test_free_in_flight(vk_devmem *m)
{
	enum { N = 8 << 20 };
	uint8_t *a = malloc(N), *b = calloc(1, N), *junk = malloc(N);
	VkDeviceSize used;
	shm_fence f;
	char err[256];
	vk_copy_op up = {.src_host = a, .dst_buf = 30, .nbytes = N};
	vk_copy_op down = {.src_buf = 30, .dst_host = b, .nbytes = N};
	vk_copy_op over = {.src_host = junk, .dst_buf = 31, .nbytes = N};
	vk_signal s1 = sig(&f, 1), s2 = sig(&f, 2), s3 = sig(&f, 3);

	/* A fence is signalled just before its stream counts the slot done:
	 * buffers freed by the tests before may still be deferred. */
	for (int i = 0; i < m->streams.n; i++)
		vk_stream_sync(m->streams.s[i]);
	vk_dm_collect(m);
	used = m->heap->used;
	shm_fence_init(&f, 0);
	fill(a, N, 3);
	memset(junk, 0x5a, N);
	CHECK(vk_dm_alloc(m, 30, N, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_dm_copy(m, 0, &up, 1, &s1, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_dm_copy(m, 0, &down, 1, &s2, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_dm_free(m, 30) == 0, "free 30");
	CHECK(vk_dm_alloc(m, 31, N, err, sizeof(err)) == 0, "%s", err);
	CHECK(vk_dm_copy(m, 0, &over, 1, &s3, err, sizeof(err)) == 0, "%s", err);
	CHECK(fence_wait(&f, 3) == 0, "fence not reached");
	CHECK(memcmp(a, b, N) == 0, "the freed buffer's copy was overwritten");
	vk_dm_free(m, 31);
	vk_stream_sync(vk_stream_get(&m->streams, 0, 0, err, sizeof(err)));
	vk_dm_collect(m);
	CHECK(m->n_def == 0 && m->heap->used == used, "%zu deferred, %llu bytes left", m->n_def,
	      (unsigned long long)(m->heap->used - used));
	free(a);
	free(b);
	free(junk);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* --bench N: latency of one small COPY from enqueue to its shm fence
 * (host -> device -> host of 256 bytes, waited each time): the cost of a
 * submission plus the bridge's semaphore wait and fence signal. */
static void bench(vk_devmem *m, shm_fence *f, uint64_t *fv, int n)
{
	uint8_t a[256], b[256];
	uint64_t *t = calloc((size_t)n, sizeof(*t));
	char err[256];
	vk_copy_op ops[2] = {
		{.src_host = a, .dst_buf = 40, .nbytes = sizeof(a)},
		{.src_buf = 40, .dst_host = b, .nbytes = sizeof(b)},
	};

	if (!t || vk_dm_alloc(m, 40, sizeof(a), err, sizeof(err)))
		return;
	fill(a, sizeof(a), 7);
	for (int i = 0; i < n; i++) {
		vk_signal s = sig(f, ++*fv);
		uint64_t t0 = shm_now_ns();

		if (vk_dm_copy(m, 0, ops, 2, &s, err, sizeof(err)) || fence_wait(f, *fv))
			break;
		t[i] = shm_now_ns() - t0;
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_u64);
	printf("COPY 256 B h2d+d2h, enqueue to shm fence: median %.1f us, p90 %.1f us (%d)\n",
	       t[n / 2] / 1e3, t[n * 9 / 10] / 1e3, n);
	vk_dm_free(m, 40);
	free(t);
}

int main(int argc, char **argv)
{
	vk_dev d;
	vk_heap h;
	vk_devmem m;
	shm_fence f;
	uint64_t fv = 0;
	char err[256];

	if (vk_dev_open(&d, err, sizeof(err))) {
		printf("SKIP: %s\n", err);
		return 77;
	}
	if (!d.timeline) {
		printf("SKIP: the device has no timeline semaphores\n");
		return 77;
	}
	vk_heap_init(&h, &d, VKX_BLOCK_SIZE);
	vk_dm_init(&m, &d, &h);
	shm_fence_init(&f, 0);
	if (argc == 3 && strcmp(argv[1], "--bench") == 0) {
		bench(&m, &f, &fv, atoi(argv[2]) > 0 ? atoi(argv[2]) : 1000);
		vk_dm_fini(&m);
		vk_heap_fini(&h);
		vk_dev_close(&d);
		fflush(stdout);
		_exit(0);
	}
	test_ids(&m);
	round_trip(&m, &f, &fv, 4, 0);
	round_trip(&m, &f, &fv, 1001, 0);     /* not a multiple of 4 */
	round_trip(&m, &f, &fv, 3 << 20, 5);
	round_trip(&m, &f, &fv, VKX_COPY_CHUNK * 2 + 12345, 0);   /* three chunks */
	test_order(&m, &f, &fv);
	test_two_streams(&m);
	test_errors(&m);
	test_free_in_flight(&m);
	vk_dm_fini(&m);
	vk_heap_fini(&h);
	vk_dev_close(&d);
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("ok\n");
	fflush(stdout);
	_exit(0);
}
