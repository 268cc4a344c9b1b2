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
 *                  64-byte aligned.
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

/* numel of dims, -1 if negative or overflowing. */
int64_t ipc_numel(int rank, const int64_t *dims);

#endif
