/*
 * cuda_mem: the caching device allocator and the pinned staging pool
 * (see cuda_mem.h).
 */
#include "cuda_mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_dev.h"

#define SMALL_MIN_SHIFT 8       /* 256 B: cudaMalloc's alignment anyway */

uint64_t cuda_heap_round(uint64_t nbytes)
{
	uint64_t s = (uint64_t)1 << SMALL_MIN_SHIFT;

	if (nbytes > ((uint64_t)1 << (SMALL_MIN_SHIFT + CUDA_SMALL_CLASSES - 1)))
		return (nbytes + CUDA_LARGE_UNIT - 1) / CUDA_LARGE_UNIT * CUDA_LARGE_UNIT;
	while (s < nbytes)
		s <<= 1;
	return s;
}

static int small_class(uint64_t size)
{
	int c = 0;

	while (((uint64_t)1 << (SMALL_MIN_SHIFT + c)) < size)
		c++;
	return c < CUDA_SMALL_CLASSES ? c : -1;
}

static int list_push(cuda_list *l, cuda_block b)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 16;
		cuda_block *nv = realloc(l->v, cap * sizeof(*nv));

		if (!nv)
			return -1;
		l->v = nv;
		l->cap = cap;
	}
	l->v[l->n++] = b;
	return 0;
}

/* A cached block for `size` (rounded), removed from its list. */
static int take_cached(cuda_heap *h, uint64_t size, cuda_block *out)
{
	int c = small_class(size);
	cuda_list *l = c >= 0 ? &h->small[c] : &h->large;
	size_t best = l->n;

	for (size_t i = 0; i < l->n; i++) {
		uint64_t s = l->v[i].size;

		if (s < size || (c < 0 && s > size + size / 4))
			continue;
		if (best == l->n || s < l->v[best].size)
			best = i;
		if (s == size)
			break;
	}
	if (best == l->n)
		return -1;
	*out = l->v[best];
	l->v[best] = l->v[--l->n];
	h->cached -= out->size;
	return 0;
}

int cuda_heap_alloc(cuda_heap *h, uint64_t nbytes, cuda_block *out, char *err, size_t n)
{
	uint64_t size = cuda_heap_round(nbytes ? nbytes : 1);
	cudaError_t e;

	if (take_cached(h, size, out) == 0) {
		h->hits++;
	} else {
		out->size = size;
		e = cudaMalloc(&out->ptr, size);
		if (e == cudaErrorMemoryAllocation) {
			cudaGetLastError();
			cuda_heap_trim(h);
			e = cudaMalloc(&out->ptr, size);
		}
		if (e != cudaSuccess) {
			cudaGetLastError();
			out->ptr = NULL;
			snprintf(err, n, "cudaMalloc of %llu bytes: %s (%llu in use)",
				 (unsigned long long)size, cudaGetErrorString(e),
				 (unsigned long long)h->in_use);
			return -1;
		}
		h->mallocs++;
	}
	h->in_use += out->size;
	if (h->in_use > h->peak)
		h->peak = h->in_use;
	return 0;
}

void cuda_heap_free(cuda_heap *h, cuda_block *b)
{
	int c;

	if (!b || !b->ptr)
		return;
	c = small_class(b->size);
	h->in_use -= b->size;
	if (list_push(c >= 0 ? &h->small[c] : &h->large, *b) == 0)
		h->cached += b->size;
	else
		cudaFree(b->ptr);
	b->ptr = NULL;
	b->size = 0;
}

static void drain(cuda_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		cudaFree(l->v[i].ptr);
	l->n = 0;
}

void cuda_heap_trim(cuda_heap *h)
{
	for (int c = 0; c < CUDA_SMALL_CLASSES; c++)
		drain(&h->small[c]);
	drain(&h->large);
	h->cached = 0;
}

void cuda_heap_fini(cuda_heap *h)
{
	cuda_heap_trim(h);
	for (int c = 0; c < CUDA_SMALL_CLASSES; c++)
		free(h->small[c].v);
	free(h->large.v);
	memset(h, 0, sizeof(*h));
}

/* ---- pinned staging ----------------------------------------------------- */

void cuda_pinned_init(cuda_pinned *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
}

cuda_pinned_buf *cuda_pinned_get(cuda_pinned *p, uint64_t nbytes, char *err, size_t n)
{
	cuda_pinned_buf *b = NULL;
	uint64_t size = nbytes < 65536 ? 65536 : (nbytes + 65535) & ~(uint64_t)65535;
	cudaError_t e;

	pthread_mutex_lock(&p->mu);
	for (size_t i = 0; i < p->n; i++)
		if (!p->v[i].busy && p->v[i].ptr && p->v[i].size >= nbytes && (!b || p->v[i].size < b->size))
			b = &p->v[i];
	if (b) {
		b->busy = 1;
		pthread_mutex_unlock(&p->mu);
		return b;
	}
	/* Buffers are addressed by pointer while busy: the table never moves,
	 * so it has a fixed capacity. */
	if (p->n == p->cap && p->cap == 0) {
		p->v = calloc(64, sizeof(*p->v));
		p->cap = p->v ? 64 : 0;
	}
	if (p->n < p->cap) {
		b = &p->v[p->n++];
	} else {
		/* Full: replace an idle buffer that was too small. */
		for (size_t i = 0; i < p->n && !b; i++)
			if (!p->v[i].busy)
				b = &p->v[i];
		if (!b) {
			pthread_mutex_unlock(&p->mu);
			snprintf(err, n, "more than %zu pinned staging buffers in flight", p->cap);
			return NULL;
		}
		cudaFreeHost(b->ptr);
	}
	b->ptr = NULL;
	b->size = 0;
	b->busy = 0;
	e = cudaHostAlloc(&b->ptr, size, cudaHostAllocPortable);
	if (e != cudaSuccess) {
		cudaGetLastError();
		pthread_mutex_unlock(&p->mu);
		snprintf(err, n, "cudaHostAlloc of %llu bytes: %s", (unsigned long long)size,
			 cudaGetErrorString(e));
		return NULL;
	}
	b->size = size;
	b->busy = 1;
	pthread_mutex_unlock(&p->mu);
	return b;
}

void cuda_pinned_put(cuda_pinned *p, cuda_pinned_buf *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&p->mu);
	b->busy = 0;
	pthread_mutex_unlock(&p->mu);
}

void cuda_pinned_fini(cuda_pinned *p)
{
	for (size_t i = 0; i < p->n; i++)
		cudaFreeHost(p->v[i].ptr);
	free(p->v);
	pthread_mutex_destroy(&p->mu);
	memset(p, 0, sizeof(*p));
}
