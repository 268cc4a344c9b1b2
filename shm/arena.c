/*
 * Arena: a best-fit offset allocator used by the memory planner.
 *
 * It hands out offsets, not memory: the planner replays the lifetimes of a
 * graph's intermediate values against an arena, and the high-water mark is
 * the size of the activation segment it then creates.  The block list is a
 * sorted array covering [0, capacity) exactly; a plan has at most a few
 * thousand values, so linear scans beat a cleverer structure on simplicity
 * and are fast enough.
 */
#include "shm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int shm_arena_init(shm_arena *a, uint64_t capacity)
{
	if (!a)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	if (capacity < SHM_ALIGN)
		return -EINVAL;
	a->blocks = malloc(16 * sizeof(*a->blocks));
	if (!a->blocks)
		return -ENOMEM;
	a->cap_blocks = 16;
	a->n = 1;
	a->blocks[0] = (shm_arena_block){ .off = 0, .size = capacity, .used = 0 };
	a->capacity = capacity;
	return 0;
}

void shm_arena_fini(shm_arena *a)
{
	if (!a)
		return;
	free(a->blocks);
	memset(a, 0, sizeof(*a));
}

/* Makes room for one more block at index `at`, shifting the rest up. */
static int insert_slot(shm_arena *a, size_t at)
{
	if (a->n == a->cap_blocks) {
		size_t ncap = a->cap_blocks * 2;
		shm_arena_block *nb;

		if (ncap > SIZE_MAX / sizeof(*nb))
			return -ENOMEM;
		nb = realloc(a->blocks, ncap * sizeof(*nb));
		if (!nb)
			return -ENOMEM;
		a->blocks = nb;
		a->cap_blocks = ncap;
	}
	memmove(&a->blocks[at + 1], &a->blocks[at],
		(a->n - at) * sizeof(*a->blocks));
	a->n++;
	return 0;
}

static void remove_slot(shm_arena *a, size_t at)
{
	memmove(&a->blocks[at], &a->blocks[at + 1],
		(a->n - at - 1) * sizeof(*a->blocks));
	a->n--;
}

/* Smallest free block that fits; the scan goes up in offset, so a strict
 * "<" keeps the lowest offset among equal sizes.  Returns a->n if none. */
static size_t best_fit(const shm_arena *a, uint64_t size)
{
	size_t best = a->n;

	for (size_t i = 0; i < a->n; i++) {
		const shm_arena_block *b = &a->blocks[i];

		if (b->used || b->size < size)
			continue;
		if (best == a->n || b->size < a->blocks[best].size)
			best = i;
	}
	return best;
}

int shm_arena_alloc(shm_arena *a, uint64_t nbytes, uint64_t *off)
{
	uint64_t size;
	size_t i;
	int ret;

	if (!a || !off || !a->blocks)
		return -EINVAL;
	if (nbytes > UINT64_MAX - (SHM_ALIGN - 1))
		return -ENOMEM;
	size = nbytes == 0 ? SHM_ALIGN : (nbytes + SHM_ALIGN - 1) & ~(uint64_t)(SHM_ALIGN - 1);
	i = best_fit(a, size);
	if (i == a->n)
		return -ENOMEM;
	if (a->blocks[i].size > size) {
		ret = insert_slot(a, i + 1);
		if (ret < 0)
			return ret;
		a->blocks[i + 1] = (shm_arena_block){
			.off = a->blocks[i].off + size,
			.size = a->blocks[i].size - size,
			.used = 0,
		};
		a->blocks[i].size = size;
	}
	a->blocks[i].used = 1;
	*off = a->blocks[i].off;
	if (*off + size > a->high_water)
		a->high_water = *off + size;
	return 0;
}

/* Binary search for the block starting at `off`; a->n when there is none. */
static size_t find_block(const shm_arena *a, uint64_t off)
{
	size_t lo = 0, hi = a->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->blocks[mid].off < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo < a->n && a->blocks[lo].off == off) ? lo : a->n;
}

int shm_arena_free(shm_arena *a, uint64_t off)
{
	size_t i;

	if (!a || !a->blocks)
		return -EINVAL;
	i = find_block(a, off);
	if (i == a->n || !a->blocks[i].used)
		return -EINVAL;
	a->blocks[i].used = 0;
	if (i + 1 < a->n && !a->blocks[i + 1].used) {
		a->blocks[i].size += a->blocks[i + 1].size;
		remove_slot(a, i + 1);
	}
	if (i > 0 && !a->blocks[i - 1].used) {
		a->blocks[i - 1].size += a->blocks[i].size;
		remove_slot(a, i);
	}
	return 0;
}
