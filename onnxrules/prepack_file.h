/*
 * prepack_file.h: the pre-pack cache file (docs/PREPACK.md), one format
 * and one reader/writer for every provider that packs weights (the CPU
 * provider's cpu_prepack.c, the Vulkan provider's vk_prepack.c).  A
 * provider describes what its packs are made for (pack_ident); a file made
 * for anything else, or truncated, or pointing outside itself, is ignored
 * with one warning and everything is packed again: never trusted, never
 * fatal.
 *
 * Layout, little-endian:
 *   header   char magic[8]; u32 version; u32 n_entries;
 *            char ident[k][32] (the provider's identity strings, e.g. ISA
 *            and kernel version); u64 model_id; u64 file_size
 *   entry[n] char key[112] ("<node>#<input>#<format>", NUL-terminated);
 *            u64 src_hash; u64 offset; u64 size
 *   blobs    each at a page boundary
 * The header is written last, so a write cut short fails the magic check.
 */
#ifndef ORTMK_ONNXRULES_PREPACK_FILE_H
#define ORTMK_ONNXRULES_PREPACK_FILE_H

#include <stddef.h>
#include <stdint.h>

#define PACK_KEY_LEN 112
#define PACK_IDENT_LEN 32
#define PACK_MAX_IDENT 2

/* What a provider's packs are made for. */
typedef struct pack_ident {
	const char *who;        /* "ort-ep-cpu": the warnings' prefix */
	/* where a warning goes (the provider's log); NULL: stderr */
	void (*warn)(const char *msg);
	const char *magic;      /* 7 characters ("ORTMKPK") */
	uint32_t version;
	int n_ident;            /* identity strings, in header order */
	const char *ident[PACK_MAX_IDENT];      /* "avx2", "ortmk-cpu-pack-1" */
	const char *ident_name[PACK_MAX_IDENT]; /* "ISA", "kernel version" */
	uint64_t model_id;      /* what was packed (a hash of the nodes) */
} pack_ident;

typedef struct pack_entry {
	char key[PACK_KEY_LEN];
	uint64_t src_hash;      /* pack_hash of the source weight's bytes */
	uint64_t offset, size;
} pack_entry;

typedef struct pack_blob {
	pack_entry e;
	const void *data;
	void *owned;            /* freed by pack_file_close (may be NULL) */
} pack_blob;

/* A cache read from one file (map) and the blobs for the next one. */
typedef struct pack_file {
	pack_ident id;
	const uint8_t *map;     /* the valid file read, or NULL */
	size_t map_len;
	const uint8_t *entries; /* map's entry table */
	uint32_t n_entries;
	pack_blob *blobs;       /* pack_file_add's, in order */
	size_t n_blobs, cap;
	/* the provider's counters: blobs found, packed, time packing */
	unsigned hits, misses;
	uint64_t pack_ns;
} pack_file;

/* Maps and checks the file fd of `size` bytes (fd < 0 or size 0: none);
 * a bad file gets one warning and reads as empty.  NULL when out of
 * memory. */
pack_file *pack_file_open(const pack_ident *id, int fd, uint64_t size);
void pack_file_close(pack_file *f);

enum { PACK_MISS, PACK_HIT, PACK_STALE };
/* The blob of want's key: PACK_HIT (*data points into the mapping) when
 * its source hash and size match, PACK_STALE when they do not, else
 * PACK_MISS. */
int pack_file_lookup(const pack_file *f, const pack_entry *want, const void **data);
/* Remembers a blob for pack_file_write (data must live until then;
 * `owned`, when not NULL, is freed at close).  0, or -ENOMEM. */
int pack_file_add(pack_file *f, const pack_entry *e, const void *data, void *owned);
/* Writes every added blob to fd (truncated first).  0, or -errno. */
int pack_file_write(pack_file *f, int fd);

/* 64-bit hash of bytes (source weights, model identity): four
 * multiply-xorshift lanes so it runs near memory speed. */
uint64_t pack_hash(const void *data, size_t n);

#endif
