/*
 * values: string tensors, sequences and empty optionals in the public API.
 * Their bytes use ipc/value_codec.h's layout in the value's own shared
 * memory segment, so a provider reads them in place exactly like a
 * numeric tensor.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "value_codec.h"

ortmk_value_kind ortmk_value_kind_of(const ortmk_value *v)
{
	return v ? v->kind : ORTMK_VALUE_NONE;
}

static int64_t numel(const int64_t *dims, size_t rank)
{
	return ipc_numel((int)rank, dims);
}

ortmk_status core_value_new_blob(ortmk_env *env, ortmk_value_kind kind, int32_t dtype,
				 const int64_t *dims, size_t rank, uint64_t nbytes,
				 ortmk_value **out)
{
	/* Borrow core_value_new's checks and pooling with a byte tensor. */
	int64_t n = (int64_t)nbytes;
	ortmk_status st = core_value_new(env, ORTMK_UINT8, &n, 1, out);

	if (st)
		return st;
	(*out)->kind = kind;
	(*out)->dtype = dtype;
	(*out)->rank = rank;
	if (rank)
		memcpy((*out)->dims, dims, rank * sizeof(int64_t));
	return ORTMK_OK;
}

int core_value_blob_ok(ortmk_value_kind kind, int32_t dtype, const int64_t *dims, size_t rank,
		       const void *data, uint64_t nbytes)
{
	uint32_t count;
	const ipc_seq_entry *e;
	int64_t n;

	switch (kind) {
	case ORTMK_VALUE_NONE:
		return 1;
	case ORTMK_VALUE_SEQUENCE:
		return ipc_seq_check(data, nbytes, &count, &e) == 0;
	default:
		n = numel(dims, rank);
		if (n < 0)
			return 0;
		if (dtype == ORTMK_STRING)
			return ipc_strings_decode(data, nbytes, (size_t)n, NULL) == 0;
		return graph_dtype_size(dtype) * (uint64_t)n == nbytes;
	}
}

ortmk_status ortmk_value_create_strings(ortmk_env *env, const int64_t *dims, size_t rank,
					const char *const *strs, ortmk_value **out)
{
	int64_t n = dims || !rank ? numel(dims, rank) : -1;
	ortmk_status st;

	if (!env || !out || n < 0 || (n && !strs) || rank > GRAPH_MAX_RANK)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "strings: bad arguments");
	st = core_value_new_blob(env, ORTMK_VALUE_TENSOR, ORTMK_STRING, dims, rank,
				 ipc_strings_size((size_t)n, strs), out);
	if (st)
		return st;
	ipc_strings_encode((*out)->seg.base, (*out)->nbytes, (size_t)n, strs);
	return ORTMK_OK;
}

const char *ortmk_value_string(const ortmk_value *v, size_t i)
{
	uint64_t count, off;
	const uint8_t *b;

	if (!v || v->kind != ORTMK_VALUE_TENSOR || v->dtype != ORTMK_STRING)
		return NULL;
	b = v->seg.base;
	memcpy(&count, b, 8);
	if (i >= count)
		return NULL;
	memcpy(&off, b + 8 + 8 * i, 8);
	return (const char *)b + 8 + 8 * (count + 1) + off;
}

static uint64_t align64(uint64_t x)
{
	return (x + 63) & ~(uint64_t)63;
}

ortmk_status ortmk_value_create_sequence(ortmk_env *env, ortmk_dtype elem_dtype,
					 const ortmk_value *const *items, size_t n,
					 ortmk_value **out)
{
	uint64_t total = ipc_seq_header_size(n);
	ipc_seq_header h = {IPC_SEQ_MAGIC, (uint32_t)n, (int32_t)elem_dtype, 0};
	ortmk_status st;
	uint8_t *b;

	if (!env || !out || (n && !items) || n > (1u << 24))
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "sequence: bad arguments");
	for (size_t i = 0; i < n; i++) {
		if (items[i] && items[i]->dev)
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
					 "sequence: element %zu is in '%s' memory; copy it to a host value first",
					 i, items[i]->dev->name);
		if (!items[i] || items[i]->kind != ORTMK_VALUE_TENSOR ||
		    items[i]->dtype != (int32_t)elem_dtype)
			return core_fail(ORTMK_ERR_INVALID_ARGUMENT,
					 "sequence: element %zu is not a %s tensor", i,
					 graph_dtype_name((int32_t)elem_dtype));
		total = align64(total) + items[i]->nbytes;
	}
	st = core_value_new_blob(env, ORTMK_VALUE_SEQUENCE, (int32_t)elem_dtype, NULL, 0, total, out);
	if (st)
		return st;
	b = (*out)->seg.base;
	memcpy(b, &h, sizeof(h));
	total = ipc_seq_header_size(n);
	for (size_t i = 0; i < n; i++) {
		ipc_seq_entry e = {.dtype = items[i]->dtype, .rank = (int32_t)items[i]->rank};

		memcpy(e.dims, items[i]->dims, items[i]->rank * sizeof(int64_t));
		e.offset = align64(total);
		e.nbytes = items[i]->nbytes;
		memcpy(b + e.offset, items[i]->seg.base, e.nbytes);
		memcpy(b + sizeof(h) + i * sizeof(e), &e, sizeof(e));
		total = e.offset + e.nbytes;
	}
	return ORTMK_OK;
}

size_t ortmk_value_sequence_length(const ortmk_value *v)
{
	ipc_seq_header h;

	if (!v || v->kind != ORTMK_VALUE_SEQUENCE || v->nbytes < sizeof(h))
		return 0;
	memcpy(&h, v->seg.base, sizeof(h));
	return h.count;
}

ortmk_status ortmk_value_sequence_get(const ortmk_value *v, size_t i, ortmk_value **out)
{
	const ipc_seq_entry *e;
	uint32_t count;
	ortmk_status st;

	if (!v || !out || v->kind != ORTMK_VALUE_SEQUENCE ||
	    ipc_seq_check(v->seg.base, v->nbytes, &count, &e) || i >= count)
		return core_fail(ORTMK_ERR_INVALID_ARGUMENT, "sequence: no element %zu", i);
	st = core_value_new_blob(v->env, ORTMK_VALUE_TENSOR, e[i].dtype, e[i].dims,
				 (size_t)e[i].rank, e[i].nbytes, out);
	if (st == ORTMK_OK)
		memcpy((*out)->seg.base, (const uint8_t *)v->seg.base + e[i].offset, e[i].nbytes);
	return st;
}

ortmk_status ortmk_value_create_none(ortmk_env *env, ortmk_value **out)
{
	return core_value_new_blob(env, ORTMK_VALUE_NONE, 0, NULL, 0, 0, out);
}
