/*
 * prepack_file.c: reading, checking and writing the pre-pack cache file
 * (see prepack_file.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prepack_file.h"
#include "sysio.h"

#define HEAD_FIXED 16           /* magic, version, n_entries */

static size_t header_size(const pack_ident *id)
{
	return HEAD_FIXED + (size_t)id->n_ident * PACK_IDENT_LEN + 16;
}

uint64_t pack_hash(const void *data, size_t n)
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

/* A cache that stopped working costs load time, and says why once (a
 * warning: shown at the log's default level). */
static int warn(const pack_ident *id, const char *why, const char *what)
{
	char msg[512];

	snprintf(msg, sizeof(msg), "pre-pack cache ignored: %s%s; packing again", why,
		 what ? what : "");
	if (id->warn)
		id->warn(msg);
	else
		fprintf(stderr, "%s: warning: %s\n", id->who, msg);
	return 0;
}

static uint64_t u64_at(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* The header's fields, in the order they must match. */
static int header_valid(const pack_ident *id, const uint8_t *m, size_t len, uint32_t *n_entries)
{
	size_t hs = header_size(id), at = HEAD_FIXED;
	uint32_t version;
	char want[8] = {0};

	if (len < hs)
		return warn(id, "truncated header", NULL);
	memcpy(&version, m + 8, 4);
	memcpy(n_entries, m + 12, 4);
	snprintf(want, sizeof(want), "%s", id->magic);
	if (memcmp(m, want, 8) || version != id->version) {
		char why[64];

		snprintf(why, sizeof(why), "not a version-%u ortmk pre-pack file", id->version);
		return warn(id, why, NULL);
	}
	for (int i = 0; i < id->n_ident; i++, at += PACK_IDENT_LEN)
		if (strncmp((const char *)m + at, id->ident[i], PACK_IDENT_LEN))
			return warn(id, "packed for another ", id->ident_name[i]);
	if (u64_at(m + at) != id->model_id)
		return warn(id, "packed for another model", NULL);
	if (u64_at(m + at + 8) != len || *n_entries > (len - hs) / sizeof(pack_entry))
		return warn(id, "truncated or resized file", NULL);
	return 1;
}

/* Checks everything about a mapped cache before one byte of it is used. */
static int cache_valid(const pack_ident *id, const uint8_t *m, size_t len, uint32_t *n_entries)
{
	const uint8_t *tab = m + header_size(id);

	if (!header_valid(id, m, len, n_entries))
		return 0;
	for (uint32_t i = 0; i < *n_entries; i++) {
		pack_entry e;

		memcpy(&e, tab + i * sizeof(e), sizeof(e));
		if (e.offset > len || e.size > len - e.offset || memchr(e.key, 0, PACK_KEY_LEN) == NULL)
			return warn(id, "an entry points outside the file", NULL);
	}
	return 1;
}

pack_file *pack_file_open(const pack_ident *id, int fd, uint64_t size)
{
	pack_file *f = calloc(1, sizeof(*f));
	void *m;

	if (!f)
		return NULL;
	f->id = *id;
	if (fd < 0 || size == 0)
		return f;
	m = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		warn(id, "cannot map it", NULL);
		return f;
	}
	if (!cache_valid(id, m, size, &f->n_entries)) {
		munmap(m, size);
		f->n_entries = 0;
		return f;
	}
	f->map = m;
	f->map_len = size;
	f->entries = f->map + header_size(id);
	return f;
}

void pack_file_close(pack_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_blobs; i++)
		free(f->blobs[i].owned);
	free(f->blobs);
	if (f->map)
		munmap((void *)f->map, f->map_len);
	free(f);
}

int pack_file_lookup(const pack_file *f, const pack_entry *want, const void **data)
{
	for (uint32_t i = 0; f && f->map && i < f->n_entries; i++) {
		pack_entry e;

		memcpy(&e, f->entries + i * sizeof(e), sizeof(e));
		if (strncmp(e.key, want->key, PACK_KEY_LEN))
			continue;
		if (e.src_hash != want->src_hash || e.size != want->size)
			return PACK_STALE;
		*data = f->map + e.offset;
		return PACK_HIT;
	}
	return PACK_MISS;
}

int pack_file_add(pack_file *f, const pack_entry *e, const void *data, void *owned)
{
	if (f->n_blobs == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 16;
		pack_blob *b = realloc(f->blobs, cap * sizeof(*b));

		if (!b)
			return -ENOMEM;
		f->blobs = b;
		f->cap = cap;
	}
	f->blobs[f->n_blobs++] = (pack_blob){*e, data, owned};
	return 0;
}

static void header_fill(const pack_file *f, uint8_t *h, uint64_t file_size)
{
	uint32_t n = (uint32_t)f->n_blobs;
	size_t at = HEAD_FIXED;

	snprintf((char *)h, 8, "%s", f->id.magic);
	memcpy(h + 8, &f->id.version, 4);
	memcpy(h + 12, &n, 4);
	for (int i = 0; i < f->id.n_ident; i++, at += PACK_IDENT_LEN)
		strncpy((char *)h + at, f->id.ident[i], PACK_IDENT_LEN - 1);
	memcpy(h + at, &f->id.model_id, 8);
	memcpy(h + at + 8, &file_size, 8);
}

int pack_file_write(pack_file *f, int fd)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), hs = header_size(&f->id);
	uint64_t off = hs + f->n_blobs * sizeof(pack_entry);
	uint8_t h[HEAD_FIXED + PACK_MAX_IDENT * PACK_IDENT_LEN + 16] = {0};
	int rc = 0;

	if (ftruncate(fd, 0))
		return -errno;
	for (size_t i = 0; i < f->n_blobs && rc == 0; i++) {
		pack_entry *e = &f->blobs[i].e;

		off = (off + page - 1) / page * page;
		e->offset = off;
		rc = sys_write_all(fd, f->blobs[i].data, e->size, (int64_t)off);
		off += e->size;
		if (rc == 0)
			rc = sys_write_all(fd, e, sizeof(*e), (int64_t)(hs + i * sizeof(*e)));
	}
	if (rc == 0 && ftruncate(fd, (off_t)off))
		rc = -errno;
	header_fill(f, h, off);
	/* The header goes last: a crash mid-write leaves a file that fails the
	 * magic check rather than one that lies. */
	if (rc == 0)
		rc = sys_write_all(fd, h, hs, 0);
	return rc;
}
