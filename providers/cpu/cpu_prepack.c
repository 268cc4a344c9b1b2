/*
 * cpu_prepack: pre-packed weights, cached on disk and mapped (see
 * cpu_prepack.h).  The file (format, checks, writing) is onnxrules/
 * prepack_file.c's, under the CPU provider's identity: magic "ORTMKPK",
 * the ISA the packs are for, the packing code's version.
 */
#include "cpu_prepack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prepack_file.h"
#include "sysio.h"

#define KERNEL_ID "ortmk-cpu-pack-1"

/* A blob packed in this session, for the next node whose same constant
 * (the same bytes: an initializer several nodes read) asks for the same
 * format and size: RetinaNet's head convolutions, one initializer for
 * each of the five pyramid levels, were packed five times (Winograd's
 * blobs 16/9 of the filter: 245 MB of the provider's 798, and 0.6 s of
 * its session creation).  The format names everything a pack depends on
 * besides the source (orientation, groups, ISA, version): the same rule
 * the cache file's entries rely on. */
typedef struct pack_dedup {
	const void *src;
	size_t src_bytes, size;
	char format[PACK_KEY_LEN];
	void *blob;                /* owned by the cache: nodes share it */
} pack_dedup;

/* A constant's hash, once: the same initializer is packed in several
 * formats (a convolution's GEMM, Winograd and channels-last filters) and
 * by several nodes (RetinaNet's heads at five pyramid levels), and the
 * hash reads all of it (10% of RetinaNet's provider time at session
 * creation, hashing its heads five times). */
typedef struct pack_memo {
	const void *src;
	size_t src_bytes;
	uint64_t hash;
} pack_memo;

struct cpu_pack_cache {
	pack_file *f;
	pack_dedup *d;
	size_t n_d, cap_d;
	pack_memo *m;
	size_t n_m, cap_m;
	int hashed;                /* sources are hashed: a cache is read or written */
};

uint64_t cpu_pack_hash(const void *data, size_t n)
{
	return pack_hash(data, n);
}

const char *cpu_pack_isa(void)
{
	if (__builtin_cpu_supports("avx512f"))
		return "avx512";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "avx2";
	return "scalar";
}

cpu_pack_cache *cpu_pack_cache_open(int in_fd, uint64_t in_size, uint64_t model_id, int writing,
				    void (*warn)(const char *msg))
{
	pack_ident id = {.who = "ort-ep-cpu", .warn = warn, .magic = CPU_PACK_MAGIC,
			 .version = CPU_PACK_VERSION, .n_ident = 2, .ident = {cpu_pack_isa(), KERNEL_ID},
			 .ident_name = {"ISA", "kernel version"}, .model_id = model_id};
	cpu_pack_cache *c = calloc(1, sizeof(*c));

	if (c && !(c->f = pack_file_open(&id, in_fd, in_size))) {
		free(c);
		c = NULL;
	}
	if (c)
		c->hashed = writing || c->f->map;
	return c;
}

void cpu_pack_cache_close(cpu_pack_cache *c)
{
	if (!c)
		return;
	pack_file_close(c->f);
	for (size_t i = 0; i < c->n_d; i++)
		free(c->d[i].blob);
	free(c->d);
	free(c->m);
	free(c);
}

/* pack_hash of src's bytes, from the memo when it has them. */
static uint64_t src_hash(cpu_pack_cache *pc, const cpu_tensor *src)
{
	uint64_t h;

	for (size_t i = 0; i < pc->n_m; i++)
		if (pc->m[i].src == src->data && pc->m[i].src_bytes == src->nbytes)
			return pc->m[i].hash;
	h = pack_hash(src->data, src->nbytes);
	if (pc->n_m == pc->cap_m) {
		size_t cap = pc->cap_m ? 2 * pc->cap_m : 16;
		pack_memo *m = realloc(pc->m, cap * sizeof(*m));

		if (!m)
			return h;   /* not remembered: hashed again next time */
		pc->m = m;
		pc->cap_m = cap;
	}
	pc->m[pc->n_m++] = (pack_memo){src->data, src->nbytes, h};
	return h;
}

static pack_dedup *dedup_find(const cpu_pack_cache *pc, const cpu_tensor *src, const char *format,
			      size_t size)
{
	for (size_t i = 0; pc && i < pc->n_d; i++) {
		pack_dedup *d = &pc->d[i];

		if (d->src == src->data && d->src_bytes == src->nbytes && d->size == size &&
		    strcmp(d->format, format) == 0)
			return d;
	}
	return NULL;
}

/* Registers blob (the cache owns it from here); -ENOMEM leaves it to the
 * caller. */
static int dedup_add(cpu_pack_cache *pc, const cpu_tensor *src, const char *format, size_t size,
		     void *blob)
{
	if (pc->n_d == pc->cap_d) {
		size_t cap = pc->cap_d ? 2 * pc->cap_d : 16;
		pack_dedup *d = realloc(pc->d, cap * sizeof(*d));

		if (!d)
			return -ENOMEM;
		pc->d = d;
		pc->cap_d = cap;
	}
	pc->d[pc->n_d] = (pack_dedup){.src = src->data, .src_bytes = src->nbytes, .size = size,
				      .blob = blob};
	snprintf(pc->d[pc->n_d].format, PACK_KEY_LEN, "%s", format);
	pc->n_d++;
	return 0;
}

void cpu_pack_cache_stats(const cpu_pack_cache *c, unsigned *hits, unsigned *misses,
			  uint64_t *pack_ns)
{
	*hits = c ? c->f->hits : 0;
	*misses = c ? c->f->misses : 0;
	*pack_ns = c ? c->f->pack_ns : 0;
}

static int own(cpu_node *node, void *p)
{
	void **n = realloc(node->packed, (size_t)(node->n_packed + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	node->packed = n;
	node->packed[node->n_packed++] = p;
	return 0;
}

const void *cpu_prepack(cpu_node *node, int input, const char *format, size_t size,
			cpu_pack_fn fill, void *arg, char *err, size_t n)
{
	const cpu_tensor *src = input >= 0 && input < node->n_in && node->consts ?
		node->consts[input] : NULL;
	pack_file *c = node->pack ? node->pack->f : NULL;
	const char *name = node->proto->name && node->proto->name[0] ? node->proto->name :
		node->proto->n_output ? node->proto->output[0] : "";
	pack_entry e = {.size = size};
	const void *hit = NULL;
	pack_dedup *dup;
	uint64_t t0;
	void *dst;

	if (!src || !src->data || size == 0 || size > (SIZE_MAX >> 2)) {
		snprintf(err, n, "pre-pack of input %d: not a constant", input);
		return NULL;
	}
	snprintf(e.key, PACK_KEY_LEN, "%s#%d#%s", name, input, format);
	/* the hash keys the pre-pack cache; without one to read or write it
	 * is not needed (8% of ResNet-18's session creation, 0.17 s of
	 * ViT-B/16's: 330 MB of weights read once more) */
	if (c && node->pack->hashed)
		e.src_hash = src_hash(node->pack, src);
	if (c && pack_file_lookup(c, &e, &hit) == PACK_HIT) {
		c->hits++;
		return pack_file_add(c, &e, hit, NULL) ? NULL : hit;
	}
	if ((dup = dedup_find(node->pack, src, format, size)) != NULL)
		return c && pack_file_add(c, &e, dup->blob, NULL) ? NULL : dup->blob;
	t0 = sys_now_ns();
	if (!(dst = cpu_alloc_big(size))) {
		snprintf(err, n, "out of memory packing %zu bytes", size);
		return NULL;
	}
	if (fill(dst, size, arg)) {
		free(dst);
		snprintf(err, n, "packing input %d failed", input);
		return NULL;
	}
	/* filled: the cache shares it from here (the node owns it without one) */
	if ((!node->pack || dedup_add(node->pack, src, format, size, dst)) && own(node, dst)) {
		free(dst);
		snprintf(err, n, "out of memory packing %zu bytes", size);
		return NULL;
	}
	if (c) {
		c->misses++;
		c->pack_ns += sys_now_ns() - t0;
		if (pack_file_add(c, &e, dst, NULL))
			return NULL;
	}
	return dst;
}

int cpu_pack_cache_write(cpu_pack_cache *c, int out_fd)
{
	return pack_file_write(c->f, out_fd);
}
