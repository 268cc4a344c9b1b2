/*
 * cpu_arena: the per-run bump allocator of the CPU provider.  Strings and
 * sequences made during a run live here until the run ends, which is what
 * lets kernels copy string pointers and sequence items freely.  Reset keeps
 * the largest block, so a steady stream of runs allocates nothing.
 */
#include <stdint.h>
#include <stdlib.h>

#include "cpu_kernel.h"

#define ARENA_BLOCK (1u << 16)

typedef struct arena_block {
	struct arena_block *next;
	size_t size, used;
	/* data follows, 64-byte aligned */
} arena_block;

struct cpu_arena {
	arena_block *head;
};

enum { HDR = 64 };

cpu_arena *cpu_arena_new(void)
{
	return calloc(1, sizeof(cpu_arena));
}

void *cpu_arena_alloc(cpu_arena *a, size_t nbytes)
{
	arena_block *b = a ? a->head : NULL;
	size_t need = (nbytes + 63) & ~(size_t)63;

	if (!a || nbytes > SIZE_MAX / 2)
		return NULL;
	if (!b || b->size - b->used < need) {
		size_t size = need > ARENA_BLOCK ? need : ARENA_BLOCK;

		b = aligned_alloc(64, HDR + size);
		if (!b)
			return NULL;
		b->size = size;
		b->used = 0;
		b->next = a->head;
		a->head = b;
	}
	b->used += need;
	return (uint8_t *)b + HDR + b->used - need;
}

void cpu_arena_reset(cpu_arena *a)
{
	arena_block *keep = NULL;

	if (!a)
		return;
	while (a->head) {
		arena_block *b = a->head;

		a->head = b->next;
		if (!keep || b->size > keep->size) {
			free(keep);
			keep = b;
		} else {
			free(b);
		}
	}
	if (keep) {
		keep->used = 0;
		keep->next = NULL;
	}
	a->head = keep;
}

void cpu_arena_free(cpu_arena *a)
{
	if (!a)
		return;
	cpu_arena_reset(a);
	free(a->head);
	free(a);
}
