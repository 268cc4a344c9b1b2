/*
 * cpu_io: string tensors, sequences and optionals across the boundary (see
 * cpu_io.h).  Decoding trusts nothing in the blob: value_codec checks every
 * count and offset before a pointer is made from it.
 */
#include "cpu_io.h"
#include "cpu_map.h"

#include <stdio.h>
#include <string.h>

#include "ortmk_ipc.pb-c.h"
#include "value_codec.h"

int cpu_io_special(const ep_tensor *b)
{
	return b->kind != ORTMK__VALUE_KIND__VALUE_TENSOR || b->dtype == CPU_STRING;
}

/* A string tensor blob -> array of pointers in the arena. */
static int decode_strings(cpu_arena *a, const void *src, uint64_t nbytes, int rank,
			  const int64_t *dims, cpu_tensor *out)
{
	int64_t numel = ipc_numel(rank, dims);
	const char **ptrs;

	if (numel < 0)
		return EP_E_INVALID;
	ptrs = cpu_arena_alloc(a, (size_t)numel * sizeof(char *) + 1);
	if (!ptrs)
		return EP_E_NOMEM;
	if (ipc_strings_decode(src, nbytes, (size_t)numel, ptrs))
		return EP_E_INVALID;
	out->dtype = CPU_STRING;
	out->rank = rank;
	memcpy(out->dims, dims, sizeof(int64_t) * (size_t)rank);
	out->data = (void *)ptrs;
	out->nbytes = (size_t)numel * sizeof(char *);
	return 0;
}

/* A map item (checked by ipc_seq_check): its keys and values read in place,
 * string keys as pointers in the arena. */
static int decode_map(cpu_arena *a, const uint8_t *src, uint64_t nbytes, cpu_tensor *t)
{
	ipc_map_view v;
	cpu_map *m = cpu_arena_alloc(a, sizeof(*m));
	const char **ks = NULL;

	if (!m)
		return EP_E_NOMEM;
	if (ipc_map_check(src, nbytes, &v))
		return EP_E_INVALID;
	if (v.key_dtype == CPU_STRING) {
		ks = cpu_arena_alloc(a, (size_t)v.count * sizeof(char *) + 1);
		if (!ks)
			return EP_E_NOMEM;
		if (ipc_strings_decode(v.keys, v.keys_nbytes, (size_t)v.count, ks))
			return EP_E_INVALID;
	}
	m->key_dtype = v.key_dtype;
	m->value_dtype = v.value_dtype;
	m->n = (size_t)v.count;
	m->keys = ks ? (const void *)ks : v.keys;
	m->values = (void *)v.values;
	t->dtype = CPU_MAP;
	t->rank = 1;
	t->dims[0] = (int64_t)v.count;
	t->data = m;
	t->nbytes = sizeof(*m);
	return 0;
}

static int decode_item(cpu_arena *a, const uint8_t *base, const ipc_seq_entry *e, cpu_tensor *t)
{
	if (e->dtype == CPU_MAP)
		return decode_map(a, base + e->offset, e->nbytes, t);
	if (e->dtype == CPU_STRING)
		return decode_strings(a, base + e->offset, e->nbytes, e->rank, e->dims, t);
	t->dtype = e->dtype;
	t->rank = e->rank;
	memcpy(t->dims, e->dims, sizeof(int64_t) * (size_t)e->rank);
	t->data = (void *)(base + e->offset);
	t->nbytes = e->nbytes;
	return 0;
}

static int decode_sequence(cpu_arena *a, const ep_tensor *b, cpu_tensor *out)
{
	const ipc_seq_entry *e;
	const ipc_seq_header *h = b->data;
	uint32_t count;
	cpu_seq *s;
	int rc = 0;

	if (ipc_seq_check(b->data, b->nbytes, &count, &e))
		return EP_E_INVALID;
	s = cpu_arena_alloc(a, sizeof(*s) + (size_t)count * sizeof(cpu_tensor));
	if (!s)
		return EP_E_NOMEM;
	memset(s, 0, sizeof(*s) + (size_t)count * sizeof(cpu_tensor));
	s->elem_dtype = h->elem_dtype;
	s->n = count;
	s->items = (cpu_tensor *)(s + 1);
	for (uint32_t i = 0; i < count && rc == 0; i++)
		rc = decode_item(a, b->data, &e[i], &s->items[i]);
	memset(out, 0, sizeof(*out));
	out->dtype = CPU_SEQUENCE;
	out->data = s;
	out->nbytes = sizeof(*s);
	return rc;
}

int cpu_io_decode(cpu_arena *a, const ep_tensor *b, cpu_tensor *out, char *err, size_t n)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if (b->kind == ORTMK__VALUE_KIND__VALUE_NONE) {
		out->dtype = CPU_NONE;
		return 0;
	}
	rc = b->kind == ORTMK__VALUE_KIND__VALUE_SEQUENCE ? decode_sequence(a, b, out) :
		decode_strings(a, b->data, b->nbytes, b->rank, b->dims, out);
	if (rc)
		snprintf(err, n, "value %u: malformed %s in shared memory", b->value,
			 b->kind == ORTMK__VALUE_KIND__VALUE_SEQUENCE ? "sequence" : "string tensor");
	return rc;
}

static uint64_t strings_size(const cpu_tensor *t)
{
	int64_t numel = ipc_numel(t->rank, t->dims);

	return numel < 0 ? 0 : ipc_strings_size((size_t)numel, (const char *const *)t->data);
}

static uint64_t item_size(const cpu_tensor *t)
{
	const cpu_map *m = t->data;

	if (t->dtype == CPU_MAP)
		return ipc_map_size(m->key_dtype, m->value_dtype, m->n, m->keys);
	return t->dtype == CPU_STRING ? strings_size(t) : t->nbytes;
}

uint64_t cpu_io_size(const cpu_tensor *t)
{
	const cpu_seq *s;
	uint64_t total;

	if (t->dtype == CPU_NONE)
		return 0;
	if (t->dtype == CPU_STRING)
		return strings_size(t);
	if (t->dtype != CPU_SEQUENCE)
		return t->nbytes;
	s = t->data;
	total = ipc_seq_header_size(s->n);
	for (size_t i = 0; i < s->n; i++)
		total = ((total + 63) & ~(uint64_t)63) + item_size(&s->items[i]);
	return total;
}

static int encode_sequence(const cpu_seq *s, uint8_t *dst, uint64_t cap)
{
	ipc_seq_header h = {IPC_SEQ_MAGIC, (uint32_t)s->n, s->elem_dtype, 0};
	uint64_t off = ipc_seq_header_size(s->n);

	memcpy(dst, &h, sizeof(h));
	for (size_t i = 0; i < s->n; i++) {
		const cpu_tensor *t = &s->items[i];
		ipc_seq_entry e = {.dtype = t->dtype, .rank = t->rank};

		memcpy(e.dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
		e.offset = (off + 63) & ~(uint64_t)63;
		e.nbytes = item_size(t);
		if (e.offset + e.nbytes > cap)
			return EP_E_INTERNAL;
		if (t->dtype == CPU_MAP) {
			const cpu_map *m = t->data;

			if (ipc_map_encode(dst + e.offset, e.nbytes, m->key_dtype, m->value_dtype, m->n,
					   m->keys, m->values))
				return EP_E_INTERNAL;
		} else if (t->dtype == CPU_STRING)
			ipc_strings_encode(dst + e.offset, e.nbytes, e.nbytes ? (size_t)ipc_numel(t->rank, t->dims) : 0,
					   (const char *const *)t->data);
		else if (e.nbytes)
			memcpy(dst + e.offset, t->data, e.nbytes);
		memcpy(dst + sizeof(h) + i * sizeof(e), &e, sizeof(e));
		off = e.offset + e.nbytes;
	}
	return 0;
}

int cpu_io_encode(const cpu_tensor *t, void *dst, uint64_t cap, ep_tensor *b)
{
	b->rank = t->dtype == CPU_SEQUENCE || t->dtype == CPU_NONE ? 0 : t->rank;
	memcpy(b->dims, t->dims, sizeof(int64_t) * (size_t)b->rank);
	b->nbytes = cpu_io_size(t);
	if (b->nbytes > cap)
		return EP_E_INTERNAL;
	switch (t->dtype) {
	case CPU_NONE:
		b->kind = ORTMK__VALUE_KIND__VALUE_NONE;
		b->dtype = 0;
		return 0;
	case CPU_SEQUENCE:
		b->kind = ORTMK__VALUE_KIND__VALUE_SEQUENCE;
		b->dtype = ((const cpu_seq *)t->data)->elem_dtype;
		return encode_sequence(t->data, dst, cap);
	case CPU_MAP:
		/* Maps cross only inside sequences (ONNX has no op that takes
		 * one out of a sequence of maps). */
		return EP_E_INVALID;
	case CPU_STRING:
		b->kind = ORTMK__VALUE_KIND__VALUE_TENSOR;
		b->dtype = CPU_STRING;
		return ipc_strings_encode(dst, cap, (size_t)ipc_numel(t->rank, t->dims),
					  (const char *const *)t->data) ? EP_E_INTERNAL : 0;
	default:
		b->kind = ORTMK__VALUE_KIND__VALUE_TENSOR;
		b->dtype = t->dtype;
		if (t->nbytes)
			memcpy(dst, t->data, t->nbytes);
		return 0;
	}
}
