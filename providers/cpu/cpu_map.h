/*
 * cpu_map: maps inside the CPU provider.  A map is only ever an item of a
 * sequence (ai.onnx.ml ZipMap's output, ops/ml/zipmap.c): dtype CPU_MAP,
 * rank 1, dims[0] its pair count, data -> cpu_map.  cpu_io.c encodes and
 * decodes them (value_codec.h's map blob); cpu_node.c makes them.
 */
#ifndef ORTMK_CPU_MAP_H
#define ORTMK_CPU_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernel.h"

#define CPU_MAP 0x1002            /* value_codec.h's IPC_MAP_DTYPE */

typedef struct cpu_map {
	int32_t key_dtype;           /* CPU_INT64 or CPU_STRING */
	int32_t value_dtype;
	size_t n;
	const void *keys;            /* int64_t[n] or const char *[n]; they
	                                outlive the run (the caller's) */
	void *values;                /* n values, in the run's arena */
} cpu_map;

/* Item i of a sequence made by cpu_output_sequence as a map of n pairs:
 * the keys as given (they must outlive the run), room for the values in
 * the run's arena.  NULL after failing the output. */
cpu_map *cpu_seq_map(cpu_ctx *ctx, cpu_seq *s, size_t i, int32_t key_dtype, const void *keys,
		     int32_t value_dtype, size_t n);

#endif
