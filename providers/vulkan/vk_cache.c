/*
 * vk_cache: the on-disk pipeline cache (see vk_cache.h).
 */
#include "vk_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

#define CACHE_MAGIC "ORTMKVKC"
#define CACHE_FORMAT 1u
#define CACHE_MAX (256u << 20)

typedef struct cache_header {
	char magic[8];
	uint32_t format;
	uint32_t vendor, device, driver;
	uint8_t uuid[VK_UUID_SIZE];
	uint64_t size;
	uint64_t checksum;
} cache_header;

/* The file layout: no padding anywhere (little-endian, 56 bytes). */
_Static_assert(sizeof(cache_header) == 56, "pipeline cache header layout");

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = UINT64_C(0xcbf29ce484222325);

	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= UINT64_C(0x100000001b3);
	}
	return h;
}

static int mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(path, 0700) && errno != EEXIST) {
			*p = '/';
			return -1;
		}
		*p = '/';
	}
	return mkdir(path, 0700) && errno != EEXIST ? -1 : 0;
}

/* Fills d->cache_path and makes its directory; 0 when the cache is on. */
static int cache_path(vk_dev *d)
{
	const char *off = getenv("ORTMK_VULKAN_PIPELINE_CACHE");
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char dir[400];
	const uint8_t *u = d->props.pipelineCacheUUID;

	d->cache_path[0] = 0;
	if (off && strcmp(off, "0") == 0)
		return -1;
	if (xdg && xdg[0] == '/')
		snprintf(dir, sizeof(dir), "%s/ortmk", xdg);
	else if (home && home[0] == '/')
		snprintf(dir, sizeof(dir), "%s/.cache/ortmk", home);
	else
		return -1;
	if (mkdirs(dir)) {
		ipc_log(IPC_LOG_WARN, "pipeline cache: cannot create %s (%s); not caching", dir,
			strerror(errno));
		return -1;
	}
	snprintf(d->cache_path, sizeof(d->cache_path),
		 "%s/vulkan-%04x-%04x-%02x%02x%02x%02x%02x%02x%02x%02x.bin", dir,
		 d->props.vendorID, d->props.deviceID, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7]);
	return 0;
}

static void fill_header(const vk_dev *d, cache_header *h, const uint8_t *data, size_t n)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, CACHE_MAGIC, 8);
	h->format = CACHE_FORMAT;
	h->vendor = d->props.vendorID;
	h->device = d->props.deviceID;
	h->driver = d->props.driverVersion;
	memcpy(h->uuid, d->props.pipelineCacheUUID, VK_UUID_SIZE);
	h->size = n;
	h->checksum = fnv1a(data, n);
}

/* Why the file's bytes cannot seed the cache, or NULL when they can. */
static const char *check_blob(const vk_dev *d, const uint8_t *buf, size_t len)
{
	cache_header want, got;
	const uint8_t *data = buf + sizeof(got);
	uint32_t vk[4];

	if (len < sizeof(got) + 16 + VK_UUID_SIZE)
		return "truncated";
	memcpy(&got, buf, sizeof(got));
	if (memcmp(got.magic, CACHE_MAGIC, 8) || got.format != CACHE_FORMAT)
		return "not an ortmk pipeline cache";
	if (got.size != len - sizeof(got))
		return "truncated or padded";
	fill_header(d, &want, data, got.size);
	if (got.vendor != want.vendor || got.device != want.device || got.driver != want.driver ||
	    memcmp(got.uuid, want.uuid, VK_UUID_SIZE))
		return "written for another device or driver";
	if (got.checksum != want.checksum)
		return "checksum mismatch (corrupt)";
	/* The driver's own header: length, version, vendor, device, UUID. */
	memcpy(vk, data, sizeof(vk));
	if (vk[0] < 16 + VK_UUID_SIZE || vk[1] != VK_PIPELINE_CACHE_HEADER_VERSION_ONE ||
	    vk[2] != d->props.vendorID || vk[3] != d->props.deviceID ||
	    memcmp(data + 16, d->props.pipelineCacheUUID, VK_UUID_SIZE))
		return "driver header does not match the device";
	return NULL;
}

/* The file's contents (malloc'ed) or NULL when absent or unreadable. */
static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long sz;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) >= 0 && sz <= (long)CACHE_MAX &&
	    fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc((size_t)sz + 1);
		if (buf && fread(buf, 1, (size_t)sz, f) != (size_t)sz) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)sz;
	}
	fclose(f);
	return buf;
}

static VkResult create_cache(vk_dev *d, const void *data, size_t n)
{
	VkPipelineCacheCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
		.initialDataSize = n,
		.pInitialData = data,
	};

	return vkCreatePipelineCache(d->dev, &ci, NULL, &d->cache);
}

void vk_cache_open(vk_dev *d)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	const char *why = NULL;

	d->cache = VK_NULL_HANDLE;
	if (cache_path(d) == 0)
		buf = read_file(d->cache_path, &len);
	if (buf)
		why = check_blob(d, buf, len);
	if (buf && !why && create_cache(d, buf + sizeof(cache_header), len - sizeof(cache_header)) ==
	    VK_SUCCESS) {
		ipc_log(IPC_LOG_DEBUG, "pipeline cache: %zu bytes from %s", len, d->cache_path);
		free(buf);
		return;
	}
	if (buf)
		ipc_log(IPC_LOG_WARN, "pipeline cache %s: %s; ignored", d->cache_path,
			why ? why : "refused by the driver");
	d->cache_dirty = buf != NULL;   /* rewrite a bad file with a good one */
	free(buf);
	if (create_cache(d, NULL, 0) != VK_SUCCESS)
		d->cache = VK_NULL_HANDLE;
}

void vk_cache_save(vk_dev *d)
{
	char tmp[600];
	size_t n = 0;
	uint8_t *data;
	cache_header h;
	FILE *f;
	int ok;

	if (!d->cache || !d->cache_dirty || !d->cache_path[0])
		return;
	if (vkGetPipelineCacheData(d->dev, d->cache, &n, NULL) != VK_SUCCESS || n > CACHE_MAX)
		return;
	data = malloc(n ? n : 1);
	if (!data || vkGetPipelineCacheData(d->dev, d->cache, &n, data) != VK_SUCCESS) {
		free(data);
		return;
	}
	fill_header(d, &h, data, n);
	snprintf(tmp, sizeof(tmp), "%s.%d.tmp", d->cache_path, (int)getpid());
	f = fopen(tmp, "wb");
	ok = f && fwrite(&h, sizeof(h), 1, f) == 1 && (n == 0 || fwrite(data, n, 1, f) == 1);
	if (f && fclose(f))
		ok = 0;
	if (ok && rename(tmp, d->cache_path) == 0) {
		d->cache_dirty = 0;
		ipc_log(IPC_LOG_DEBUG, "pipeline cache: %zu bytes to %s", n, d->cache_path);
	} else {
		unlink(tmp);
		ipc_log(IPC_LOG_WARN, "pipeline cache: cannot write %s", d->cache_path);
	}
	free(data);
}

void vk_cache_close(vk_dev *d)
{
	if (!d->cache)
		return;
	vk_cache_save(d);
	vkDestroyPipelineCache(d->dev, d->cache, NULL);
	d->cache = VK_NULL_HANDLE;
}
