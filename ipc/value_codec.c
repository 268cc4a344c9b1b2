/*
 * value_codec: encoding and validation of string tensors, sequences and
 * maps in shared memory (see value_codec.h).
 */
#include "value_codec.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "envelope.h"

int64_t ipc_numel(int rank, const int64_t *dims)
{
	int64_t n = 1;

	if (rank < 0 || rank > IPC_SEQ_MAX_RANK)
		return -1;
	for (int i = 0; i < rank; i++) {
		if (dims[i] < 0 || (dims[i] && n > INT64_MAX / 4 / dims[i]))
			return -1;
		n *= dims[i];
	}
	return n;
}

uint64_t ipc_strings_size(size_t n, const char *const *strs)
{
	uint64_t total = 8 + 8 * ((uint64_t)n + 1);

	for (size_t i = 0; i < n; i++)
		total += strlen(strs[i] ? strs[i] : "") + 1;
	return total;
}

int ipc_strings_encode(void *dst, uint64_t cap, size_t n, const char *const *strs)
{
	uint8_t *d = dst;
	uint64_t head = 8 + 8 * ((uint64_t)n + 1), off = 0, count = n;

	if (ipc_strings_size(n, strs) > cap)
		return -ENOSPC;
	memcpy(d, &count, 8);
	for (size_t i = 0; i < n; i++) {
		const char *s = strs[i] ? strs[i] : "";
		size_t len = strlen(s) + 1;

		memcpy(d + 8 + 8 * i, &off, 8);
		memcpy(d + head + off, s, len);
		off += len;
	}
	memcpy(d + 8 + 8 * n, &off, 8);
	return 0;
}

int ipc_strings_decode(const void *src, uint64_t nbytes, size_t n, const char **out)
{
	const uint8_t *s = src;
	uint64_t count, head, prev = 0, end;

	if (nbytes < 8)
		return -EPROTO;
	memcpy(&count, s, 8);
	if (count != n || (nbytes - 8) / 8 < (uint64_t)n + 1)
		return -EPROTO;
	head = 8 + 8 * (n + 1);
	memcpy(&end, s + 8 + 8 * n, 8);
	if (end > nbytes - head)
		return -EPROTO;
	for (size_t i = 0; i <= n; i++) {
		uint64_t off;

		memcpy(&off, s + 8 + 8 * i, 8);
		if (off < prev || off > end || (i > 0 && (off == prev || s[head + off - 1] != 0)))
			return -EPROTO;
		if (i < n && out)
			out[i] = (const char *)s + head + off;
		prev = off;
	}
	return 0;
}

uint64_t ipc_seq_header_size(size_t n)
{
	uint64_t sz = sizeof(ipc_seq_header) + (uint64_t)n * sizeof(ipc_seq_entry);

	return (sz + 63) & ~(uint64_t)63;
}

/* ---- maps ---- */

#define MAP_KEYS_AT ((uint64_t)sizeof(ipc_map_header))

static int map_types_ok(int32_t key_dtype, int32_t value_dtype)
{
	return (key_dtype == IPC_INT64_DTYPE || key_dtype == IPC_STRING_DTYPE) &&
	       value_dtype != IPC_STRING_DTYPE && ipc_dtype_size(value_dtype) != 0;
}

static uint64_t map_keys_size(int32_t key_dtype, size_t n, const void *keys)
{
	if (key_dtype == IPC_STRING_DTYPE)
		return ipc_strings_size(n, keys);
	return 8 * (uint64_t)n;
}

static uint64_t map_values_at(int32_t key_dtype, size_t n, const void *keys)
{
	return (MAP_KEYS_AT + map_keys_size(key_dtype, n, keys) + 7) & ~(uint64_t)7;
}

uint64_t ipc_map_size(int32_t key_dtype, int32_t value_dtype, size_t n, const void *keys)
{
	return map_values_at(key_dtype, n, keys) + (uint64_t)n * ipc_dtype_size(value_dtype);
}

int ipc_map_encode(void *dst, uint64_t cap, int32_t key_dtype, int32_t value_dtype, size_t n,
		   const void *keys, const void *values)
{
	uint8_t *d = dst;
	ipc_map_header h = {IPC_MAP_MAGIC, 0, key_dtype, value_dtype, n, 0};
	uint64_t kbytes;

	if (!map_types_ok(key_dtype, value_dtype))
		return -EINVAL;
	if (ipc_map_size(key_dtype, value_dtype, n, keys) > cap)
		return -ENOSPC;
	kbytes = map_keys_size(key_dtype, n, keys);
	h.values_offset = map_values_at(key_dtype, n, keys);
	memcpy(d, &h, sizeof(h));
	if (key_dtype == IPC_STRING_DTYPE)
		ipc_strings_encode(d + MAP_KEYS_AT, kbytes, n, keys);
	else if (n)
		memcpy(d + MAP_KEYS_AT, keys, kbytes);
	memset(d + MAP_KEYS_AT + kbytes, 0, h.values_offset - MAP_KEYS_AT - kbytes);
	if (n)
		memcpy(d + h.values_offset, values, n * ipc_dtype_size(value_dtype));
	return 0;
}

int ipc_map_check(const void *src, uint64_t nbytes, ipc_map_view *out)
{
	const uint8_t *b = src;
	ipc_map_header h;
	uint64_t kbytes, vsz;

	if (nbytes < sizeof(h) || ((uintptr_t)b & 7) != 0)
		return -EPROTO;
	memcpy(&h, b, sizeof(h));
	if (h.magic != IPC_MAP_MAGIC || !map_types_ok(h.key_dtype, h.value_dtype) ||
	    h.values_offset < MAP_KEYS_AT || h.values_offset > nbytes || (h.values_offset & 7))
		return -EPROTO;
	vsz = ipc_dtype_size(h.value_dtype);
	kbytes = h.values_offset - MAP_KEYS_AT;
	/* Each pair takes at least 8 key bytes, so count is bounded by nbytes. */
	if (h.count > nbytes / 8 || h.count * vsz != nbytes - h.values_offset)
		return -EPROTO;
	if (h.key_dtype == IPC_STRING_DTYPE) {
		uint64_t used;

		if (kbytes < 8 || ipc_strings_decode(b + MAP_KEYS_AT, kbytes, (size_t)h.count, NULL))
			return -EPROTO;
		memcpy(&used, b + MAP_KEYS_AT + 8 + 8 * h.count, 8);
		kbytes = 8 + 8 * (h.count + 1) + used;
	} else if (kbytes < 8 * h.count) {
		return -EPROTO;
	} else {
		kbytes = 8 * h.count;
	}
	out->key_dtype = h.key_dtype;
	out->value_dtype = h.value_dtype;
	out->count = h.count;
	out->keys = b + MAP_KEYS_AT;
	out->keys_nbytes = kbytes;
	out->values = b + h.values_offset;
	return 0;
}

/* ---- sequences ---- */

static int entry_ok(const ipc_seq_entry *e, const uint8_t *base, uint64_t nbytes, uint64_t hdr)
{
	int64_t numel = ipc_numel(e->rank, e->dims);
	size_t esz = ipc_dtype_size(e->dtype);
	ipc_map_view m;

	if (numel < 0 || e->offset < hdr || e->offset > nbytes || e->nbytes > nbytes - e->offset)
		return 0;
	if (e->dtype == IPC_MAP_DTYPE)
		return e->rank == 1 && ipc_map_check(base + e->offset, e->nbytes, &m) == 0 &&
		       m.count == (uint64_t)e->dims[0];
	if (e->dtype == IPC_STRING_DTYPE)
		return ipc_strings_decode(base + e->offset, e->nbytes, (size_t)numel, NULL) == 0;
	return esz && (uint64_t)numel * esz == e->nbytes;
}

int ipc_seq_check(const void *src, uint64_t nbytes, uint32_t *count,
		  const ipc_seq_entry **entries)
{
	const uint8_t *base = src;
	ipc_seq_header h;
	uint64_t hdr;

	if (nbytes < sizeof(h))
		return -EPROTO;
	memcpy(&h, base, sizeof(h));
	if (h.magic != IPC_SEQ_MAGIC || h.count > (nbytes - sizeof(h)) / sizeof(ipc_seq_entry))
		return -EPROTO;
	hdr = ipc_seq_header_size(h.count);
	if (hdr > nbytes && h.count)
		return -EPROTO;
	/* Entries are 8-byte aligned in the blob (the blob starts 64-aligned). */
	if (((uintptr_t)base & 7) != 0)
		return -EPROTO;
	for (uint32_t i = 0; i < h.count; i++)
		if (!entry_ok((const ipc_seq_entry *)(base + sizeof(h)) + i, base, nbytes, hdr))
			return -EPROTO;
	*count = h.count;
	*entries = (const ipc_seq_entry *)(base + sizeof(h));
	return 0;
}
