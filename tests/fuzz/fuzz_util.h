/*
 * fuzz_util.h: what the libFuzzer targets share (docs/SECURITY.md): the
 * input as a sealed-free memfd for readers that take a descriptor or a
 * path.
 */
#ifndef ORTMK_FUZZ_UTIL_H
#define ORTMK_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* A memfd holding data, or -1. */
static inline int fuzz_memfd(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);
	size_t done = 0;

	if (fd < 0)
		return -1;
	while (done < size) {
		ssize_t w = write(fd, data + done, size - done);

		if (w <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)w;
	}
	return fd;
}

#ifdef ORTMK_FUZZ_PACK
#include <string.h>

#include "prepack_file.h"

static void fuzz_quiet(const char *msg)
{
	(void)msg;
}

/* The identity the pre-pack fuzzer reads caches with (and gen_seeds
 * writes its seed with), and the key it looks up. */
static inline pack_ident fuzz_pack_ident(void)
{
	pack_ident id = {.who = "fuzz", .warn = fuzz_quiet, .magic = "ORTMKPK", .version = 1,
			 .n_ident = 2, .ident = {"avx2", "ortmk-cpu-pack-1"},
			 .ident_name = {"ISA", "kernel version"}, .model_id = 42};
	return id;
}

static inline pack_entry fuzz_pack_entry(void)
{
	pack_entry e = {.src_hash = 7, .size = 64};

	strcpy(e.key, "w0/gemm-b");
	return e;
}
#endif

#endif
