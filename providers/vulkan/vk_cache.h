/*
 * vk_cache: the VkPipelineCache kept on disk, so a provider process does
 * not recompile its shaders for the device every time it starts.  The file
 * is $XDG_CACHE_HOME/ortmk (else ~/.cache/ortmk)/vulkan-<vendor>-<device>-
 * <uuid>.bin: ortmk's header (magic, format, vendor, device, driver
 * version, pipeline-cache UUID, size, FNV-1a checksum) then the driver's
 * blob.  A missing file is an empty cache; a truncated, corrupt or foreign
 * one is ignored with a warning, never trusted, never fatal.
 * ORTMK_VULKAN_PIPELINE_CACHE=0 turns it off.
 */
#ifndef ORTMK_VK_CACHE_H
#define ORTMK_VK_CACHE_H

#include "vk_device.h"

/* Creates d->cache, seeded from the file when it is valid. */
void vk_cache_open(vk_dev *d);
/* Writes the cache back when pipelines were added (atomically: a
 * temporary file renamed over the old one). */
void vk_cache_save(vk_dev *d);
/* Saves, then destroys d->cache. */
void vk_cache_close(vk_dev *d);

#endif
