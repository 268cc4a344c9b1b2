/*
 * cpu_prepack: the CPU provider's pre-pack cache (docs/PREPACK.md).  A
 * subgraph's cache is opened from a file descriptor the core handed over
 * (the provider never opens a path), checked from header to last blob, and
 * used in place through a read-only mapping.  Blobs packed because the cache
 * missed them are written, with the hits, into a fresh file when the core
 * asked for one.  Anything stale, truncated or foreign is ignored with a
 * warning and re-packed: a cache is never trusted and never fatal.
 */
#ifndef ORTMK_CPU_PREPACK_H
#define ORTMK_CPU_PREPACK_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernel.h"

#define CPU_PACK_MAGIC "ORTMKPK"
#define CPU_PACK_VERSION 1u

typedef struct cpu_pack_cache cpu_pack_cache;

/* model_id identifies what was packed (a hash of the subgraph's nodes).
 * in_fd < 0: no cache to read.  writing: a cache will be written (its
 * entries need their sources' hashes; without a cache to read or write the
 * weights are not hashed).  warn: where its warnings go (NULL: stderr). */
cpu_pack_cache *cpu_pack_cache_open(int in_fd, uint64_t in_size, uint64_t model_id, int writing,
				    void (*warn)(const char *msg));
/* Writes every blob of the cache (hits and fresh packs) to out_fd.
 * 0, or -errno. */
int cpu_pack_cache_write(cpu_pack_cache *c, int out_fd);
void cpu_pack_cache_stats(const cpu_pack_cache *c, unsigned *hits, unsigned *misses,
			  uint64_t *pack_ns);
void cpu_pack_cache_close(cpu_pack_cache *c);

/* The ISA packs are made for ("avx512", "avx2", "scalar"). */
const char *cpu_pack_isa(void);
/* 64-bit hash of bytes (for source weights and model identity). */
uint64_t cpu_pack_hash(const void *data, size_t n);

#endif
