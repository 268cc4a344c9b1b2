/*
 * vk_prepack: the Vulkan provider's pre-packed weights cache
 * (docs/PREPACK.md, docs/VULKAN.md).  Weights whose device form differs
 * from their bytes in the model (float16 widened to float32 on devices
 * without 16-bit storage, Conv filters interleaved for conv_direct) are
 * made once at load; the core hands the step's cache file (prepack_in) and,
 * when saving, a fresh file (prepack_out).  A blob read from the cache is
 * the same bytes the packing would make.
 */
#ifndef ORTMK_VK_PREPACK_H
#define ORTMK_VK_PREPACK_H

#include "vk_exec.h"

typedef struct vk_prepack vk_prepack;

/* Maps and checks sg's prepack_in (a bad file: one warning, then packed
 * again); NULL only when out of memory. */
vk_prepack *vk_prepack_open(const ep_subgraph *sg);
/* Fills dst (size bytes) from arg. */
typedef int (*vk_pack_fn)(void *dst, uint64_t size, void *arg);
/* The blob `key` ("<name>#<input>#<format>") of `size` bytes made from the
 * constant src (src_bytes, hashed to detect an edited weight): from the
 * cache, else made by fill.  Valid until the next vk_prepack_get (or
 * vk_prepack_close): use it at once; NULL with err set on failure. */
const void *vk_prepack_get(vk_prepack *pk, const char *key, const void *src, uint64_t src_bytes,
			   uint64_t size, vk_pack_fn fill, void *arg, char *err, size_t n);
/* Writes the cache to prepack_out when anything had to be packed, sets
 * sg's pre-pack counters, frees pk. */
void vk_prepack_close(vk_prepack *pk, ep_subgraph *sg);

/* Uploads weight w to dst (allocated here): as is, or through the cache
 * when its device form differs (float16 on a device without 16-bit
 * storage). */
int vk_prepack_weight(dk_exec *ex, vk_prepack *pk, vk_uploader *u, const ep_weight *w,
		      vk_buf *dst, char *err, size_t n);

/* The blob `key` made by fill from the constant src (its host bytes),
 * `size` bytes, uploaded into node->keep (allocated here) for every run. */
int vk_prepack_keep(dk_exec *ex, vk_prepack *pk, vk_uploader *u, dk_node *node, const char *key,
		    const dk_val *src, uint64_t size, vk_pack_fn fill, void *arg, char *err,
		    size_t n);

#endif
