/*
 * vk_prepack: pre-packed weights cached on disk (see vk_prepack.h).  The
 * file (format, checks, writing) is onnxrules/prepack_file.c's, the CPU
 * provider's scheme under the Vulkan provider's identity: magic
 * "ORTMKVP", version 1, kernel "ortmk-vk-pack-1", model id = hash of the
 * subgraph's serialized nodes.
 */
#include "vk_prepack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "prepack_file.h"
#include "sysio.h"

struct vk_prepack {
	pack_file *f;
	int keep;               /* a cache will be written: keep every blob */
	void *scratch;          /* else the last miss, freed at the next one */
};

/* pack_ident's warn: through the provider's log. */
static void log_warn(const char *msg)
{
	ipc_log(IPC_LOG_WARN, "%s", msg);
}

vk_prepack *vk_prepack_open(const ep_subgraph *sg)
{
	pack_ident id = {.who = "ort-ep-vulkan", .warn = log_warn, .magic = "ORTMKVP", .version = 1,
			 .n_ident = 1, .ident = {"ortmk-vk-pack-1"},
			 .ident_name = {"kernel version"}};
	vk_prepack *pk = calloc(1, sizeof(*pk));

	if (!pk)
		return NULL;
	id.model_id = sg->msg ? pack_hash(sg->msg->graph.data, sg->msg->graph.len) : 0;
	pk->keep = sg->prepack_out_fd >= 0;
	pk->f = pack_file_open(&id, sg->prepack_in_fd, sg->prepack_in_size);
	if (!pk->f) {
		free(pk);
		return NULL;
	}
	return pk;
}

const void *vk_prepack_get(vk_prepack *pk, const char *key, const void *src, uint64_t src_bytes,
			   uint64_t size, vk_pack_fn fill, void *arg, char *err, size_t n)
{
	pack_entry e = {.size = size};
	const void *hit = NULL;
	uint64_t t0 = sys_now_ns();
	void *dst;
	int found;

	if (strlen(key) >= PACK_KEY_LEN)
		return snprintf(err, n, "pre-pack key '%s' is too long", key), NULL;
	snprintf(e.key, PACK_KEY_LEN, "%s", key);
	e.src_hash = pack_hash(src, src_bytes);
	found = pack_file_lookup(pk->f, &e, &hit);
	if (found == PACK_STALE)
		ipc_log(IPC_LOG_WARN, "pre-pack cache: '%s' changed since it was packed; packing again", key);
	if (found == PACK_HIT) {
		pk->f->hits++;
		return pk->keep && pack_file_add(pk->f, &e, hit, NULL) ?
		       snprintf(err, n, "out of memory"), NULL : hit;
	}
	/* Without a cache to write, a miss lives only until the caller has
	 * uploaded it (the next call): a large model is not held twice. */
	free(pk->scratch);
	pk->scratch = NULL;
	dst = malloc(size ? size : 1);
	if (!dst || (pk->keep && pack_file_add(pk->f, &e, dst, dst))) {
		free(dst);
		return snprintf(err, n, "out of memory packing %llu bytes", (unsigned long long)size),
		       NULL;
	}
	if (!pk->keep)
		pk->scratch = dst;
	if (fill(dst, size, arg))
		return snprintf(err, n, "packing '%s' failed", key), NULL;
	pk->f->misses++;
	pk->f->pack_ns += sys_now_ns() - t0;
	return dst;
}

void vk_prepack_close(vk_prepack *pk, ep_subgraph *sg)
{
	if (!pk)
		return;
	pack_file *f = pk->f;

	sg->prepack_hits = f->hits;
	sg->prepack_misses = f->misses;
	sg->prepack_ns = f->pack_ns;
	sg->prepack_written = 0;
	if (sg->prepack_out_fd >= 0 && f->n_blobs && (f->misses || !f->map)) {
		int rc = pack_file_write(f, sg->prepack_out_fd);

		sg->prepack_written = rc == 0;
		if (rc)
			ipc_log(IPC_LOG_WARN, "cannot write the pre-pack cache: %s", strerror(-rc));
	}
	pack_file_close(f);
	free(pk->scratch);
	free(pk);
}

/* ---- weights ---------------------------------------------------------- */

int vk_prepack_keep(dk_exec *ex, vk_prepack *pk, vk_uploader *u, dk_node *node, const char *key,
		    const dk_val *src, uint64_t size, vk_pack_fn fill, void *arg, char *err,
		    size_t n)
{
	ep_weight blob = {.fd = -1, .nbytes = size};

	blob.data = vk_prepack_get(pk, key, src->host, src->nbytes, size, fill, arg, err, n);
	if (!blob.data)
		return EP_E_NOMEM;
	vk_heap_free(&vk_ep_of(ex)->heap, &node->keep);
	if (vk_heap_alloc(&vk_ep_of(ex)->heap, size, &node->keep, err, n))
		return EP_E_NOMEM;
	return size && vk_upload_chunked(u, &blob, &node->keep, err, n) ? EP_E_NOMEM : 0;
}

static int widen(void *dst, uint64_t size, void *arg)
{
	vk_f16_widen(dst, ((const ep_weight *)arg)->data, size / 4);
	return 0;
}

int vk_prepack_weight(dk_exec *ex, vk_prepack *pk, vk_uploader *u, const ep_weight *w,
		      vk_buf *dst, char *err, size_t n)
{
	const char *name = ex->sg->values[w->value].name;
	ep_weight packed = *w;
	char key[PACK_KEY_LEN];

	if (!vk_f16_as_f32(&vk_ep_of(ex)->dev, w->dtype)) {
		if (vk_heap_alloc(&vk_ep_of(ex)->heap, w->nbytes, dst, err, n))
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
	if (vk_heap_alloc(&vk_ep_of(ex)->heap, packed.nbytes, dst, err, n))
		return EP_E_NOMEM;
	return packed.nbytes && vk_upload_chunked(u, &packed, dst, err, n) ? EP_E_NOMEM : 0;
}
