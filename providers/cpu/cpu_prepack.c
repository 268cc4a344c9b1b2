/*
 * cpu_prepack: pre-packed weights, cached on disk and mapped (see
 * cpu_prepack.h).
 *
 * File layout (all little-endian):
 *   pk_header                        magic, version, ISA, kernel identity,
 *                                    model identity, entry count, sizes
 *   pk_entry[n]                      key (node, input, format), source hash,
 *                                    offset and size of the blob
 *   blobs, each at a page boundary
 */
#include "cpu_prepack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define KEY_LEN 112
#define KERNEL_ID "ortmk-cpu-pack-1"

typedef struct pk_header {
	char magic[8];
	uint32_t version, n_entries;
	char isa[32];
	char kernel[32];
	uint64_t model_id;
	uint64_t file_size;
} pk_header;

typedef struct pk_entry {
	char key[KEY_LEN];
	uint64_t src_hash;
	uint64_t offset, size;
} pk_entry;

typedef struct blob {
	pk_entry e;
	const void *data;
} blob;

struct cpu_pack_cache {
	const uint8_t *map;          /* the cache we read, or NULL */
	size_t map_len;
	const pk_entry *entries;
	uint32_t n_entries;
	uint64_t model_id;
	blob *blobs;                 /* everything handed out: the next file */
	size_t n_blobs, cap;
	unsigned hits, misses;
	uint64_t pack_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Four independent lanes, so the multiply latency overlaps: the hash runs
 * near memory speed on large weights. */
uint64_t cpu_pack_hash(const void *data, size_t n)
{
	const uint8_t *p = data;
	uint64_t h[4] = {0x9e3779b97f4a7c15ull ^ n, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull,
			 0x27d4eb2f165667c5ull};
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		for (int k = 0; k < 4; k++) {
			uint64_t w;

			memcpy(&w, p + i + 8 * k, 8);
			h[k] = (h[k] ^ w) * 0xff51afd7ed558ccdull;
			h[k] ^= h[k] >> 29;
		}
	}
	for (; i < n; i++)
		h[0] = (h[0] ^ p[i]) * 0x100000001b3ull;
	h[0] ^= h[1] * 0x9e3779b97f4a7c15ull ^ h[2] * 0xc2b2ae3d27d4eb4full ^ h[3];
	return h[0] ^ (h[0] >> 31);
}

const char *cpu_pack_isa(void)
{
	if (__builtin_cpu_supports("avx512f"))
		return "avx512";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "avx2";
	return "scalar";
}

static void warn(const char *why)
{
	fprintf(stderr, "ort-ep-cpu: warning: pre-pack cache ignored: %s\n", why);
}

/* Checks everything about a mapped cache before one byte of it is used. */
static int cache_valid(const uint8_t *m, size_t len, uint64_t model_id)
{
	pk_header h;
	const pk_entry *e = (const pk_entry *)(m + sizeof(h));

	if (len < sizeof(h))
		return warn("truncated header"), 0;
	memcpy(&h, m, sizeof(h));
	if (memcmp(h.magic, CPU_PACK_MAGIC, 8) || h.version != CPU_PACK_VERSION)
		return warn("not a version-1 ortmk pre-pack file"), 0;
	if (strncmp(h.isa, cpu_pack_isa(), sizeof(h.isa)) || strncmp(h.kernel, KERNEL_ID, sizeof(h.kernel)))
		return warn("packed for another ISA or kernel version"), 0;
	if (h.model_id != model_id)
		return warn("packed for another model"), 0;
	if (h.file_size != len || h.n_entries > (len - sizeof(h)) / sizeof(pk_entry))
		return warn("truncated or resized file"), 0;
	for (uint32_t i = 0; i < h.n_entries; i++)
		if (e[i].offset > len || e[i].size > len - e[i].offset || memchr(e[i].key, 0, KEY_LEN) == NULL)
			return warn("an entry points outside the file"), 0;
	return 1;
}

cpu_pack_cache *cpu_pack_cache_open(int in_fd, uint64_t in_size, uint64_t model_id)
{
	cpu_pack_cache *c = calloc(1, sizeof(*c));
	void *m;

	if (!c)
		return NULL;
	c->model_id = model_id;
	if (in_fd < 0 || in_size == 0)
		return c;
	m = mmap(NULL, in_size, PROT_READ, MAP_SHARED, in_fd, 0);
	if (m == MAP_FAILED) {
		warn("cannot map it");
		return c;
	}
	if (!cache_valid(m, in_size, model_id)) {
		munmap(m, in_size);
		return c;
	}
	c->map = m;
	c->map_len = in_size;
	c->entries = (const pk_entry *)(c->map + sizeof(pk_header));
	memcpy(&c->n_entries, c->map + offsetof(pk_header, n_entries), 4);
	return c;
}

void cpu_pack_cache_close(cpu_pack_cache *c)
{
	if (!c)
		return;
	if (c->map)
		munmap((void *)c->map, c->map_len);
	free(c->blobs);
	free(c);
}

void cpu_pack_cache_stats(const cpu_pack_cache *c, unsigned *hits, unsigned *misses,
			  uint64_t *pack_ns)
{
	*hits = c ? c->hits : 0;
	*misses = c ? c->misses : 0;
	*pack_ns = c ? c->pack_ns : 0;
}

static int remember(cpu_pack_cache *c, const pk_entry *e, const void *data)
{
	if (c->n_blobs == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		blob *b = realloc(c->blobs, cap * sizeof(*b));

		if (!b)
			return -ENOMEM;
		c->blobs = b;
		c->cap = cap;
	}
	c->blobs[c->n_blobs++] = (blob){*e, data};
	return 0;
}

static const void *lookup(const cpu_pack_cache *c, const pk_entry *want)
{
	for (uint32_t i = 0; c && c->map && i < c->n_entries; i++) {
		const pk_entry *e = &c->entries[i];

		if (strncmp(e->key, want->key, KEY_LEN) == 0)
			return e->src_hash == want->src_hash && e->size == want->size ?
				c->map + e->offset : NULL;
	}
	return NULL;
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
	cpu_pack_cache *c = node->pack;
	const char *name = node->proto->name && node->proto->name[0] ? node->proto->name :
		node->proto->n_output ? node->proto->output[0] : "";
	pk_entry e = {.size = size};
	const void *hit;
	uint64_t t0;
	void *dst;

	if (!src || !src->data || size == 0 || size > (SIZE_MAX >> 2)) {
		snprintf(err, n, "pre-pack of input %d: not a constant", input);
		return NULL;
	}
	snprintf(e.key, KEY_LEN, "%s#%d#%s", name, input, format);
	e.src_hash = cpu_pack_hash(src->data, src->nbytes);
	hit = lookup(c, &e);
	if (hit) {
		c->hits++;
		return remember(c, &e, hit) ? NULL : hit;
	}
	t0 = now_ns();
	dst = aligned_alloc(64, (size + 63) & ~(size_t)63);
	if (!dst || own(node, dst)) {
		free(dst);
		snprintf(err, n, "out of memory packing %zu bytes", size);
		return NULL;
	}
	if (fill(dst, size, arg)) {
		snprintf(err, n, "packing input %d failed", input);
		return NULL;
	}
	if (c) {
		c->misses++;
		c->pack_ns += now_ns() - t0;
		if (remember(c, &e, dst))
			return NULL;
	}
	return dst;
}

static int write_all(int fd, const void *buf, size_t n, uint64_t off)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

int cpu_pack_cache_write(cpu_pack_cache *c, int out_fd)
{
	long page = sysconf(_SC_PAGESIZE);
	uint64_t off = sizeof(pk_header) + c->n_blobs * sizeof(pk_entry);
	pk_header h = {.version = CPU_PACK_VERSION, .n_entries = (uint32_t)c->n_blobs,
		       .model_id = c->model_id};
	int rc = 0;

	memcpy(h.magic, CPU_PACK_MAGIC, 8);
	snprintf(h.isa, sizeof(h.isa), "%s", cpu_pack_isa());
	snprintf(h.kernel, sizeof(h.kernel), "%s", KERNEL_ID);
	if (ftruncate(out_fd, 0))
		return -errno;
	for (size_t i = 0; i < c->n_blobs && rc == 0; i++) {
		pk_entry *e = &c->blobs[i].e;

		off = (off + (uint64_t)page - 1) & ~(uint64_t)(page - 1);
		e->offset = off;
		rc = write_all(out_fd, c->blobs[i].data, e->size, off);
		off += e->size;
		if (rc == 0)
			rc = write_all(out_fd, e, sizeof(*e), sizeof(h) + i * sizeof(*e));
	}
	h.file_size = off;
	if (rc == 0 && ftruncate(out_fd, (off_t)off))
		rc = -errno;
	/* The header goes last: a crash mid-write leaves a file that fails the
	 * magic check rather than one that lies. */
	if (rc == 0)
		rc = write_all(out_fd, &h, sizeof(h), 0);
	return rc;
}
