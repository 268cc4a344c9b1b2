/*
 * value_codec: how values that are not plain fixed-size tensors lie in
 * shared memory, for the core and every provider.
 *
 *   string tensor  u64 count, u64 offsets[count + 1], then the bytes; each
 *                  string is NUL-terminated and offsets[i+1] - offsets[i]
 *                  includes the NUL.  Offsets are relative to the bytes.
 *   sequence       ipc_seq_header, count ipc_seq_entry, then each element's
 *                  blob (a fixed-size tensor's bytes or a string tensor as
 *                  above) at its entry's offset (from the sequence start),
 *                  64-byte aligned.  An element that is a map has dtype
 *                  IPC_MAP_DTYPE, rank 1 and dims[0] its pair count.
 *   map            ipc_map_header, the keys from byte 32 (count int64s, or
 *                  count strings as above), then count values of
 *                  value_dtype at values_offset (8-aligned, from the map's
 *                  start).  ai.onnx.ml ZipMap gives a sequence of maps.
 *   empty optional no bytes (kind VALUE_NONE).
 *
 * Every decode checks every count, offset and length against the bytes it
 * was given: a peer's blob is never trusted.
 */
#ifndef ORTMK_VALUE_CODEC_H
#define ORTMK_VALUE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#define IPC_STRING_DTYPE 8
#define IPC_SEQ_MAGIC 0x31514553u      /* "SEQ1" */
#define IPC_SEQ_MAX_RANK 16
#define IPC_MAP_MAGIC 0x3150414du      /* "MAP1" */
/* A sequence entry (and elem_dtype) that is a map, not a tensor: outside
 * ONNX's TensorProto.DataType numbers. */
#define IPC_MAP_DTYPE 0x1002
#define IPC_INT64_DTYPE 7

typedef struct ipc_seq_header {
	uint32_t magic;
	uint32_t count;
	int32_t elem_dtype;                /* 0 when unknown (empty sequence) */
	uint32_t pad;
} ipc_seq_header;

typedef struct ipc_seq_entry {
	int32_t dtype;
	int32_t rank;
	int64_t dims[IPC_SEQ_MAX_RANK];
	uint64_t offset, nbytes;
} ipc_seq_entry;

typedef struct ipc_map_header {
	uint32_t magic;
	uint32_t pad;
	int32_t key_dtype;                 /* IPC_INT64_DTYPE or IPC_STRING_DTYPE */
	int32_t value_dtype;               /* a fixed-size dtype (ZipMap: float) */
	uint64_t count;
	uint64_t values_offset;
} ipc_map_header;

/* A checked map blob: pointers into it. */
typedef struct ipc_map_view {
	int32_t key_dtype, value_dtype;
	uint64_t count;
	const void *keys;                  /* int64s, or a string blob */
	uint64_t keys_nbytes;
	const void *values;
} ipc_map_view;

/* Strings. */
uint64_t ipc_strings_size(size_t n, const char *const *strs);
/* Writes n strings into dst (cap bytes); -ENOSPC when they do not fit. */
int ipc_strings_encode(void *dst, uint64_t cap, size_t n, const char *const *strs);
/* Checks a blob of `n` strings; on success points out[i] into the blob. */
int ipc_strings_decode(const void *src, uint64_t nbytes, size_t n, const char **out);

/* Sequences: size of the header area for n elements (data follows). */
uint64_t ipc_seq_header_size(size_t n);
/* Validates a sequence blob; on success *count and entries (pointing into
 * src) are set.  Each element's blob is checked too (strings decoded). */
int ipc_seq_check(const void *src, uint64_t nbytes, uint32_t *count,
		  const ipc_seq_entry **entries);

/* Maps: keys are int64_t[n] or const char *[n] as key_dtype says. */
uint64_t ipc_map_size(int32_t key_dtype, int32_t value_dtype, size_t n, const void *keys);
/* Writes a map into dst (cap bytes, 8-aligned); -ENOSPC when it does not
 * fit, -EINVAL for a key or value dtype a map cannot have. */
int ipc_map_encode(void *dst, uint64_t cap, int32_t key_dtype, int32_t value_dtype, size_t n,
		   const void *keys, const void *values);
/* Validates a map blob (string keys decoded, values' size); fills *out. */
int ipc_map_check(const void *src, uint64_t nbytes, ipc_map_view *out);

/* numel of dims, -1 if negative or overflowing. */
int64_t ipc_numel(int rank, const int64_t *dims);

#endif
