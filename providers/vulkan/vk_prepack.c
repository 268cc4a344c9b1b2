/*
 * vk_prepack: pre-packed weights cached on disk (see vk_prepack.h).
 *
 * File layout (little-endian), the CPU provider's scheme with its own
 * identity:
 *   vp_header   char magic[8] = "ORTMKVP\0"; u32 version = 1; u32 n_entries;
 *               char kernel[32] = "ortmk-vk-pack-1"; u64 model_id (hash of
 *               the subgraph's serialized nodes); u64 file_size
 *   vp_entry[n] char key[112] (NUL-terminated); u64 src_hash; u64 offset;
 *               u64 size
 *   blobs       each at a page boundary
 * Everything is checked before a byte is used; the header is written
 * last, so a cut-short write fails the magic check.
 */
#include "vk_prepack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

#define KEY_LEN 112
#define MAGIC "ORTMKVP"
#define VERSION 1
#define KERNEL_ID "ortmk-vk-pack-1"

typedef struct vp_header {
	char magic[8];
	uint32_t version, n_entries;
	char kernel[32];
	uint64_t model_id;
	uint64_t file_size;
} vp_header;

typedef struct vp_entry {
	char key[KEY_LEN];
	uint64_t src_hash;
	uint64_t offset, size;
} vp_entry;

typedef struct vp_blob {
	vp_entry e;
	const void *data;
	void *owned;            /* packed here (a miss), freed at close */
} vp_blob;

struct vk_prepack {
	const uint8_t *map;
	size_t map_len;
	const vp_entry *entries;
	uint32_t n_entries;
	uint64_t model_id;
	vp_blob *blobs;         /* what the next cache holds (when one is written) */
	size_t n_blobs, cap;
	int keep;               /* a cache will be written: keep every blob */
	void *scratch;          /* else the last miss, freed at the next one */
	unsigned hits, misses;
	uint64_t pack_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 64-bit hash, four multiply-xorshift lanes over 8-byte words. */
static uint64_t hash(const void *data, size_t n)
{
	const uint8_t *p = data;
	uint64_t h[4] = {0x6a09e667f3bcc908ull ^ n, 0xbb67ae8584caa73bull, 0x3c6ef372fe94f82bull,
			 0xa54ff53a5f1d36f1ull};
	size_t i = 0;

	for (; i + 32 <= n; i += 32)
		for (int k = 0; k < 4; k++) {
			uint64_t w;

			memcpy(&w, p + i + 8 * k, 8);
			h[k] = (h[k] ^ w) * 0x9fb21c651e98df25ull;
			h[k] ^= h[k] >> 28;
		}
	for (; i < n; i++)
		h[i & 3] = (h[i & 3] ^ p[i]) * 0x100000001b3ull;
	h[0] ^= h[1] * 0x9e3779b97f4a7c15ull ^ h[2] * 0xc2b2ae3d27d4eb4full ^ h[3];
	return h[0] ^ (h[0] >> 31);
}

static void warn(const char *why)
{
	/* Always shown (like ort-ep-cpu's): a cache that stopped working costs
	 * load time, and says why once. */
	fprintf(stderr, "ort-ep-vulkan: warning: pre-pack cache ignored: %s; packing again\n", why);
}

static int cache_valid(const uint8_t *m, size_t len, uint64_t model_id)
{
	vp_header h;
	const vp_entry *e = (const vp_entry *)(m + sizeof(h));

	if (len < sizeof(h))
		return warn("truncated header"), 0;
	memcpy(&h, m, sizeof(h));
	if (memcmp(h.magic, MAGIC, 8) || h.version != VERSION)
		return warn("not a version-1 ortmk Vulkan pre-pack file"), 0;
	if (strncmp(h.kernel, KERNEL_ID, sizeof(h.kernel)))
		return warn("packed by another kernel version"), 0;
	if (h.model_id != model_id)
		return warn("packed for another model"), 0;
	if (h.file_size != len || h.n_entries > (len - sizeof(h)) / sizeof(vp_entry))
		return warn("truncated or resized file"), 0;
	for (uint32_t i = 0; i < h.n_entries; i++)
		if (e[i].offset > len || e[i].size > len - e[i].offset ||
		    memchr(e[i].key, 0, KEY_LEN) == NULL)
			return warn("an entry points outside the file"), 0;
	return 1;
}

vk_prepack *vk_prepack_open(const ep_subgraph *sg)
{
	vk_prepack *pk = calloc(1, sizeof(*pk));
	void *m;

	if (!pk)
		return NULL;
	pk->model_id = sg->msg ? hash(sg->msg->graph.data, sg->msg->graph.len) : 0;
	pk->keep = sg->prepack_out_fd >= 0;
	if (sg->prepack_in_fd < 0 || sg->prepack_in_size == 0)
		return pk;
	m = mmap(NULL, sg->prepack_in_size, PROT_READ, MAP_SHARED, sg->prepack_in_fd, 0);
	if (m == MAP_FAILED) {
		warn("cannot map it");
		return pk;
	}
	if (!cache_valid(m, sg->prepack_in_size, pk->model_id)) {
		munmap(m, sg->prepack_in_size);
		return pk;
	}
	pk->map = m;
	pk->map_len = sg->prepack_in_size;
	pk->entries = (const vp_entry *)(pk->map + sizeof(vp_header));
	memcpy(&pk->n_entries, pk->map + offsetof(vp_header, n_entries), 4);
	return pk;
}

static const void *lookup(const vk_prepack *pk, const vp_entry *want, int *stale)
{
	for (uint32_t i = 0; pk->map && i < pk->n_entries; i++) {
		const vp_entry *e = &pk->entries[i];

		if (strncmp(e->key, want->key, KEY_LEN))
			continue;
		if (e->src_hash == want->src_hash && e->size == want->size)
			return pk->map + e->offset;
		*stale = 1;
		return NULL;
	}
	return NULL;
}

static int remember(vk_prepack *pk, const vp_entry *e, const void *data, void *owned)
{
	if (pk->n_blobs == pk->cap) {
		size_t cap = pk->cap ? 2 * pk->cap : 16;
		vp_blob *b = realloc(pk->blobs, cap * sizeof(*b));

		if (!b)
			return -1;
		pk->blobs = b;
		pk->cap = cap;
	}
	pk->blobs[pk->n_blobs++] = (vp_blob){*e, data, owned};
	return 0;
}

const void *vk_prepack_get(vk_prepack *pk, const char *key, const void *src, uint64_t src_bytes,
			   uint64_t size, vk_pack_fn fill, void *arg, char *err, size_t n)
{
	vp_entry e = {.size = size};
	const void *hit;
	int stale = 0;
	uint64_t t0 = now_ns();
	void *dst;

	if (strlen(key) >= KEY_LEN)
		return snprintf(err, n, "pre-pack key '%s' is too long", key), NULL;
	snprintf(e.key, KEY_LEN, "%s", key);
	e.src_hash = hash(src, src_bytes);
	hit = lookup(pk, &e, &stale);
	if (stale)
		fprintf(stderr, "ort-ep-vulkan: warning: pre-pack cache: '%s' changed since it was "
			"packed; packing again\n", key);
	if (hit) {
		pk->hits++;
		return pk->keep && remember(pk, &e, hit, NULL) ?
		       snprintf(err, n, "out of memory"), NULL : hit;
	}
	/* Without a cache to write, a miss lives only until the caller has
	 * uploaded it (the next call): a large model is not held twice. */
	free(pk->scratch);
	pk->scratch = NULL;
	dst = malloc(size ? size : 1);
	if (!dst || (pk->keep && remember(pk, &e, dst, dst))) {
		free(dst);
		return snprintf(err, n, "out of memory packing %llu bytes", (unsigned long long)size),
		       NULL;
	}
	if (!pk->keep)
		pk->scratch = dst;
	if (fill(dst, size, arg))
		return snprintf(err, n, "packing '%s' failed", key), NULL;
	pk->misses++;
	pk->pack_ns += now_ns() - t0;
	return dst;
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t w = pwrite(fd, p, len, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		len -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

static int write_cache(vk_prepack *pk, int fd)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t off = sizeof(vp_header) + pk->n_blobs * sizeof(vp_entry);
	vp_header h = {.version = VERSION, .n_entries = (uint32_t)pk->n_blobs,
		       .model_id = pk->model_id};
	int rc = ftruncate(fd, 0);

	memcpy(h.magic, MAGIC, 8);
	snprintf(h.kernel, sizeof(h.kernel), "%s", KERNEL_ID);
	for (size_t i = 0; i < pk->n_blobs && rc == 0; i++) {
		vp_entry *e = &pk->blobs[i].e;

		off = (off + page - 1) / page * page;
		e->offset = off;
		rc = write_all(fd, pk->blobs[i].data, e->size, off);
		off += e->size;
		if (rc == 0)
			rc = write_all(fd, e, sizeof(*e), sizeof(h) + i * sizeof(*e));
	}
	h.file_size = off;
	if (rc == 0)
		rc = ftruncate(fd, (off_t)off);
	if (rc == 0)
		rc = write_all(fd, &h, sizeof(h), 0);
	return rc;
}

void vk_prepack_close(vk_prepack *pk, ep_subgraph *sg)
{
	if (!pk)
		return;
	sg->prepack_hits = pk->hits;
	sg->prepack_misses = pk->misses;
	sg->prepack_ns = pk->pack_ns;
	sg->prepack_written = 0;
	if (sg->prepack_out_fd >= 0 && pk->n_blobs && (pk->misses || !pk->map)) {
		sg->prepack_written = write_cache(pk, sg->prepack_out_fd) == 0;
		if (!sg->prepack_written)
			fprintf(stderr, "ort-ep-vulkan: warning: cannot write the pre-pack cache: %s\n",
				strerror(errno));
	}
	for (size_t i = 0; i < pk->n_blobs; i++)
		free(pk->blobs[i].owned);
	free(pk->scratch);
	free(pk->blobs);
	if (pk->map)
		munmap((void *)pk->map, pk->map_len);
	free(pk);
}

/* ---- weights ---------------------------------------------------------- */

int vk_prepack_keep(vk_exec *ex, vk_prepack *pk, vk_uploader *u, vk_node *node, const char *key,
		    const vk_val *src, uint64_t size, vk_pack_fn fill, void *arg, char *err,
		    size_t n)
{
	ep_weight blob = {.fd = -1, .nbytes = size};

	blob.data = vk_prepack_get(pk, key, src->host, src->nbytes, size, fill, arg, err, n);
	if (!blob.data)
		return EP_E_NOMEM;
	vk_heap_free(&ex->ep->heap, &node->keep);
	if (vk_heap_alloc(&ex->ep->heap, size, &node->keep, err, n))
		return EP_E_NOMEM;
	return size && vk_upload_chunked(u, &blob, &node->keep, err, n) ? EP_E_NOMEM : 0;
}

static int widen(void *dst, uint64_t size, void *arg)
{
	vk_f16_widen(dst, ((const ep_weight *)arg)->data, size / 4);
	return 0;
}

int vk_prepack_weight(vk_exec *ex, vk_prepack *pk, vk_uploader *u, const ep_weight *w,
		      vk_buf *dst, char *err, size_t n)
{
	const char *name = ex->sg->values[w->value].name;
	ep_weight packed = *w;
	char key[KEY_LEN];

	if (!vk_f16_as_f32(&ex->ep->dev, w->dtype)) {
		if (vk_heap_alloc(&ex->ep->heap, w->nbytes, dst, err, n))
			return EP_E_NOMEM;
		return w->nbytes && vk_upload_chunked(u, w, dst, err, n) ? EP_E_NOMEM : 0;
	}
	/* float16 kept as float32: the widened copy is the packed form. */
	snprintf(key, sizeof(key), "%.90s#0#f16-as-f32", name);
	packed.nbytes = 2 * w->nbytes;
	packed.fd = -1;
	packed.data = vk_prepack_get(pk, key, w->data, w->nbytes, packed.nbytes, widen,
				     (void *)w, err, n);
	if (!packed.data)
		return EP_E_NOMEM;
	if (vk_heap_alloc(&ex->ep->heap, packed.nbytes, dst, err, n))
		return EP_E_NOMEM;
	return packed.nbytes && vk_upload_chunked(u, &packed, dst, err, n) ? EP_E_NOMEM : 0;
}
