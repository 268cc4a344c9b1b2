/*
 * envelope: the validator at ipc/'s choke point (see envelope.h).  Every
 * received byte string goes through ipc_envelope_decode(); the checks here
 * are what lets the rest of the core index arrays and touch shared memory
 * with offsets a peer sent without re-checking them.
 */
#include "envelope.h"
#include "value_codec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t n, const char *fmt, ...)
{
	va_list ap;

	if (err && n) {
		va_start(ap, fmt);
		vsnprintf(err, n, fmt, ap);
		va_end(ap);
	}
	return -EPROTO;
}

int ipc_segtab_add(ipc_segtab *t, const shm_segment *s)
{
	if (ipc_segtab_find(t, s->id))
		return -EEXIST;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		shm_segment *p = realloc(t->segs, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		t->segs = p;
		t->cap = cap;
	}
	t->segs[t->n++] = *s;
	return 0;
}

shm_segment *ipc_segtab_find(const ipc_segtab *t, uint64_t id)
{
	for (size_t i = 0; t && i < t->n; i++)
		if (t->segs[i].id == id)
			return &t->segs[i];
	return NULL;
}

int ipc_segtab_remove(ipc_segtab *t, uint64_t id, shm_segment *out)
{
	for (size_t i = 0; i < t->n; i++) {
		if (t->segs[i].id == id) {
			if (out)
				*out = t->segs[i];
			t->segs[i] = t->segs[--t->n];
			return 1;
		}
	}
	return 0;
}

void ipc_segtab_fini(ipc_segtab *t)
{
	free(t->segs);
	memset(t, 0, sizeof(*t));
}

static const char *const kind_names[] = {
	"UNSPECIFIED", "HELLO", "HELLO_ACK", "ADD_SEGMENT", "CAPABILITY_QUERY",
	"CAPABILITY_REPLY", "LOAD_SUBGRAPH", "LOAD_DONE", "RUN", "RESULT",
	"ERROR", "SHUTDOWN", "RELEASE", "ACK", "ADD_FILE", "RING_SETUP",
	"ALLOC", "COPY",
};
#define N_KINDS ((int)(sizeof(kind_names) / sizeof(kind_names[0])))

const char *ipc_kind_name(int kind)
{
	if (kind <= 0 || kind >= N_KINDS)
		return "UNKNOWN";
	return kind_names[kind];
}

/* The body case each kind must carry. */
static const Ortmk__Envelope__BodyCase kind_body[] = {
	ORTMK__ENVELOPE__BODY__NOT_SET,
	ORTMK__ENVELOPE__BODY_HELLO,
	ORTMK__ENVELOPE__BODY_HELLO_ACK,
	ORTMK__ENVELOPE__BODY_ADD_SEGMENT,
	ORTMK__ENVELOPE__BODY_CAPABILITY_QUERY,
	ORTMK__ENVELOPE__BODY_CAPABILITY_REPLY,
	ORTMK__ENVELOPE__BODY_LOAD_SUBGRAPH,
	ORTMK__ENVELOPE__BODY_LOAD_DONE,
	ORTMK__ENVELOPE__BODY_RUN,
	ORTMK__ENVELOPE__BODY_RESULT,
	ORTMK__ENVELOPE__BODY_ERROR,
	ORTMK__ENVELOPE__BODY_SHUTDOWN,
	ORTMK__ENVELOPE__BODY_RELEASE,
	ORTMK__ENVELOPE__BODY_ACK,
	ORTMK__ENVELOPE__BODY_ADD_FILE,
	ORTMK__ENVELOPE__BODY_RING_SETUP,
	ORTMK__ENVELOPE__BODY_ALLOC,
	ORTMK__ENVELOPE__BODY_COPY,
};

size_t ipc_dtype_size(int32_t dtype)
{
	switch (dtype) {
	case 1: case 6: case 12: return 4;               /* float, int32, uint32 */
	case 2: case 3: case 9: return 1;                /* uint8, int8, bool */
	case 4: case 5: case 10: case 16: return 2;      /* (u)int16, f16, bf16 */
	case 7: case 11: case 13: case 14: return 8;     /* int64, double, uint64, c64 */
	case 15: return 16;                              /* complex128 */
	default: return 0;                               /* string, unknown */
	}
}

static int dtype_known(int32_t dtype)
{
	return dtype >= 1 && dtype <= 16;
}

/* numel × size without overflow; -1 on overflow. */
static int64_t dims_bytes(const int64_t *dims, size_t rank, size_t elem)
{
	uint64_t n = elem;

	for (size_t i = 0; i < rank; i++) {
		if (dims[i] < 0)
			return -1;
		if (dims[i] != 0 && n > (UINT64_C(1) << 62) / (uint64_t)dims[i])
			return -1;
		n *= (uint64_t)dims[i];
	}
	return (int64_t)n;
}

int ipc_tensor_ref_check(const Ortmk__TensorRef *t, const ipc_segtab *segs,
			 char *err, size_t errlen)
{
	size_t elem = ipc_dtype_size(t->dtype);
	shm_segment *s;

	if (t->n_dims > IPC_MAX_RANK)
		return fail(err, errlen, "tensor ref %u: rank %zu exceeds %d",
			    t->value, t->n_dims, IPC_MAX_RANK);
	if ((t->kind != ORTMK__VALUE_KIND__VALUE_TENSOR || t->dynamic) && t->dtype == 0)
		; /* no element type: empty sequence, none, or not known until run */
	else if (t->kind == ORTMK__VALUE_KIND__VALUE_SEQUENCE && t->dtype == IPC_MAP_DTYPE)
		; /* a sequence of maps (value_codec.h) */
	else if (!dtype_known(t->dtype))
		return fail(err, errlen, "tensor ref %u: unknown dtype %d", t->value, t->dtype);
	if (!t->dynamic && elem && t->kind == ORTMK__VALUE_KIND__VALUE_TENSOR) {
		int64_t want = dims_bytes(t->dims, t->n_dims, elem);

		if (want < 0)
			return fail(err, errlen, "tensor ref %u: negative or overflowing dims", t->value);
		if ((uint64_t)want != t->nbytes)
			return fail(err, errlen, "tensor ref %u: %llu bytes for a shape that needs %lld",
				    t->value, (unsigned long long)t->nbytes, (long long)want);
	}
	if (t->has_buffer_id) {
		/* Device memory: the provider knows its buffers, not this table. */
		if (t->buffer_id == 0 || t->segment_id != 0)
			return fail(err, errlen, "tensor ref %u: device buffer %llu with segment %llu",
				    t->value, (unsigned long long)t->buffer_id,
				    (unsigned long long)t->segment_id);
		if (t->kind != ORTMK__VALUE_KIND__VALUE_TENSOR || (!t->dynamic && !elem))
			return fail(err, errlen, "tensor ref %u: only numeric tensors live in device buffers",
				    t->value);
		if (t->offset > IPC_MAX_DEVICE_BYTES || t->nbytes > IPC_MAX_DEVICE_BYTES - t->offset)
			return fail(err, errlen, "tensor ref %u: bytes [%llu, +%llu) of buffer %llu out of range",
				    t->value, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
				    (unsigned long long)t->buffer_id);
		return 0;
	}
	if (!segs || t->dynamic)
		return 0;
	s = ipc_segtab_find(segs, t->segment_id);
	if (!s)
		return fail(err, errlen, "tensor ref %u: unknown segment %llu",
			    t->value, (unsigned long long)t->segment_id);
	if (!shm_segment_contains(s, t->offset, t->nbytes))
		return fail(err, errlen, "tensor ref %u: bytes [%llu, +%llu) outside segment %llu of %zu bytes",
			    t->value, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
			    (unsigned long long)t->segment_id, s->size);
	return 0;
}

static int check_refs(Ortmk__TensorRef **refs, size_t n, const ipc_segtab *segs,
		      char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		int rc = ipc_tensor_ref_check(refs[i], segs, err, errlen);

		if (rc)
			return rc;
	}
	return 0;
}

static int check_load(const Ortmk__LoadSubgraph *l, char *err, size_t errlen)
{
	for (size_t i = 0; i < l->n_values; i++)
		if (!dtype_known(l->values[i]->dtype) && l->values[i]->dtype != 0)
			return fail(err, errlen, "value '%s': unknown dtype %d",
				    l->values[i]->name, l->values[i]->dtype);
	for (size_t i = 0; i < l->n_weights; i++) {
		const Ortmk__Weight *w = l->weights[i];
		size_t elem = ipc_dtype_size(w->dtype);

		if (w->value >= l->n_values)
			return fail(err, errlen, "weight %zu: value index %u out of range", i, w->value);
		if (w->n_dims > IPC_MAX_RANK)
			return fail(err, errlen, "weight %zu: rank %zu", i, w->n_dims);
		if (elem && dims_bytes(w->dims, w->n_dims, elem) != (int64_t)w->nbytes)
			return fail(err, errlen, "weight '%s': %llu bytes do not match its shape",
				    l->values[w->value]->name, (unsigned long long)w->nbytes);
	}
	return 0;
}

static int check_run(const Ortmk__Run *r, const ipc_segtab *segs, char *err, size_t errlen)
{
	if (r->has_dyn_segment && segs) {
		shm_segment *s = ipc_segtab_find(segs, r->dyn_segment);

		if (!s || !shm_segment_contains(s, r->dyn_offset, r->dyn_size))
			return fail(err, errlen, "run %llu: dynamic region outside its segment",
				    (unsigned long long)r->run_id);
	}
	return check_refs(r->bindings, r->n_bindings, segs, err, errlen);
}

/* One side of a copy: exactly one of segment and buffer; a segment range
 * must lie inside that segment (when a table is given). */
static int check_loc(const Ortmk__Loc *l, uint64_t nbytes, size_t i, const char *side,
		     const ipc_segtab *segs, char *err, size_t errlen)
{
	shm_segment *s;

	if (!l || l->has_segment_id == l->has_buffer_id)
		return fail(err, errlen, "COPY op %zu: %s names %s", i, side,
			    l && l->has_segment_id ? "both a segment and a buffer" : "neither a segment nor a buffer");
	if (l->has_buffer_id) {
		if (l->buffer_id == 0)
			return fail(err, errlen, "COPY op %zu: %s buffer id 0", i, side);
		if (l->offset > IPC_MAX_DEVICE_BYTES || nbytes > IPC_MAX_DEVICE_BYTES - l->offset)
			return fail(err, errlen, "COPY op %zu: %s bytes [%llu, +%llu) of buffer %llu out of range",
				    i, side, (unsigned long long)l->offset, (unsigned long long)nbytes,
				    (unsigned long long)l->buffer_id);
		return 0;
	}
	if (!segs)
		return 0;
	s = ipc_segtab_find(segs, l->segment_id);
	if (!s)
		return fail(err, errlen, "COPY op %zu: %s: unknown segment %llu", i, side,
			    (unsigned long long)l->segment_id);
	if (!shm_segment_contains(s, l->offset, nbytes))
		return fail(err, errlen, "COPY op %zu: %s bytes [%llu, +%llu) outside segment %llu of %zu bytes",
			    i, side, (unsigned long long)l->offset, (unsigned long long)nbytes,
			    (unsigned long long)l->segment_id, s->size);
	return 0;
}

int ipc_fence_ref_check(const Ortmk__FenceRef *f, const ipc_segtab *segs, char *err, size_t errlen)
{
	shm_segment *s;

	if (f->offset % IPC_FENCE_ALIGN)
		return fail(err, errlen, "fence at offset %llu: not %d-byte aligned",
			    (unsigned long long)f->offset, IPC_FENCE_ALIGN);
	if (f->value == 0 || (f->value & SHM_FENCE_FAILED))
		return fail(err, errlen, "fence value %llu out of range", (unsigned long long)f->value);
	if (!segs)
		return 0;
	s = ipc_segtab_find(segs, f->segment_id);
	if (!s)
		return fail(err, errlen, "fence in unknown segment %llu", (unsigned long long)f->segment_id);
	if (!shm_segment_contains(s, f->offset, sizeof(shm_fence)))
		return fail(err, errlen, "fence at offset %llu outside segment %llu of %zu bytes",
			    (unsigned long long)f->offset, (unsigned long long)f->segment_id, s->size);
	return 0;
}

static int check_copy(const Ortmk__Copy *c, const ipc_segtab *segs, char *err, size_t errlen)
{
	if (c->n_ops > IPC_MAX_COPY_OPS)
		return fail(err, errlen, "COPY: %zu ops (at most %d)", c->n_ops, IPC_MAX_COPY_OPS);
	for (size_t i = 0; i < c->n_ops; i++) {
		const Ortmk__CopyOp *op = c->ops[i];
		int rc;

		if (op->nbytes == 0 || op->nbytes > IPC_MAX_DEVICE_BYTES)
			return fail(err, errlen, "COPY op %zu: bad size %llu", i,
				    (unsigned long long)op->nbytes);
		rc = check_loc(op->src, op->nbytes, i, "source", segs, err, errlen);
		if (rc == 0)
			rc = check_loc(op->dst, op->nbytes, i, "destination", segs, err, errlen);
		if (rc)
			return rc;
		if (op->src->has_segment_id && op->dst->has_segment_id)
			return fail(err, errlen, "COPY op %zu: host to host (the core copies those itself)", i);
	}
	return c->signal ? ipc_fence_ref_check(c->signal, segs, err, errlen) : 0;
}

/* Profiling spans: bounded, and each nested span names an earlier one as
 * its parent, so readers can walk the nesting without a cycle. */
static int check_result(const Ortmk__Result *r, const ipc_segtab *segs, char *err, size_t errlen)
{
	for (size_t i = 0; i < r->n_outputs; i++)
		if (r->outputs[i]->dynamic)
			return fail(err, errlen, "RESULT: output %zu still dynamic", i);
	if (r->n_spans > IPC_MAX_SPANS)
		return fail(err, errlen, "RESULT: %zu node spans (at most %u)", r->n_spans,
			    IPC_MAX_SPANS);
	for (size_t i = 0; i < r->n_spans; i++)
		if (r->spans[i]->has_parent && r->spans[i]->parent >= i)
			return fail(err, errlen, "RESULT: span %zu has parent %u, not an earlier span",
				    i, r->spans[i]->parent);
	return check_refs(r->outputs, r->n_outputs, segs, err, errlen);
}

static int check_body(const Ortmk__Envelope *e, const ipc_segtab *segs,
		      char *err, size_t errlen)
{
	switch (e->body_case) {
	case ORTMK__ENVELOPE__BODY_HELLO:
		if (e->hello->token.len != 32 || !e->hello->provider[0])
			return fail(err, errlen, "HELLO: bad token length %zu", e->hello->token.len);
		return 0;
	case ORTMK__ENVELOPE__BODY_ADD_SEGMENT:
		if (e->add_segment->size == 0 || e->add_segment->size > (UINT64_C(1) << 44))
			return fail(err, errlen, "ADD_SEGMENT: bad size %llu",
				    (unsigned long long)e->add_segment->size);
		return 0;
	case ORTMK__ENVELOPE__BODY_CAPABILITY_REPLY:
		if (e->capability_reply->n_supported != e->capability_reply->n_reason)
			return fail(err, errlen, "CAPABILITY_REPLY: %zu answers but %zu reasons",
				    e->capability_reply->n_supported, e->capability_reply->n_reason);
		return 0;
	case ORTMK__ENVELOPE__BODY_LOAD_SUBGRAPH:
		return check_load(e->load_subgraph, err, errlen);
	case ORTMK__ENVELOPE__BODY_RUN:
		return check_run(e->run, segs, err, errlen);
	case ORTMK__ENVELOPE__BODY_ALLOC:
		if (e->alloc->buffer_id == 0)
			return fail(err, errlen, "ALLOC: buffer id 0");
		if (e->alloc->nbytes == 0 || e->alloc->nbytes > IPC_MAX_DEVICE_BYTES)
			return fail(err, errlen, "ALLOC: bad size %llu", (unsigned long long)e->alloc->nbytes);
		return 0;
	case ORTMK__ENVELOPE__BODY_COPY:
		return check_copy(e->copy, segs, err, errlen);
	case ORTMK__ENVELOPE__BODY_RELEASE:
		if (e->release->has_buffer_id && e->release->buffer_id == 0)
			return fail(err, errlen, "RELEASE: buffer id 0");
		return 0;
	case ORTMK__ENVELOPE__BODY_RESULT:
		return check_result(e->result, segs, err, errlen);
	default:
		return 0;
	}
}

int ipc_envelope_check(const Ortmk__Envelope *e, const ipc_segtab *segs,
		       char *err, size_t errlen)
{
	if (e->version != IPC_PROTOCOL_VERSION)
		return fail(err, errlen, "protocol version %u, expected %u",
			    e->version, IPC_PROTOCOL_VERSION);
	if ((int)e->kind <= 0 || (int)e->kind >= N_KINDS)
		return fail(err, errlen, "unknown message kind %d", (int)e->kind);
	if (e->body_case != kind_body[e->kind])
		return fail(err, errlen, "%s message carries body %d", ipc_kind_name(e->kind),
			    (int)e->body_case);
	return check_body(e, segs, err, errlen);
}

int ipc_envelope_decode(const void *buf, size_t n, const ipc_segtab *segs,
			Ortmk__Envelope **out, char *err, size_t errlen)
{
	Ortmk__Envelope *e;
	int rc;

	*out = NULL;
	if (n == 0 || n > IPC_MAX_MESSAGE)
		return fail(err, errlen, "message of %zu bytes", n);
	e = ortmk__envelope__unpack(NULL, n, buf);
	if (!e)
		return fail(err, errlen, "undecodable message of %zu bytes", n);
	rc = ipc_envelope_check(e, segs, err, errlen);
	if (rc) {
		ortmk__envelope__free_unpacked(e, NULL);
		return rc;
	}
	*out = e;
	return 0;
}

void ipc_envelope_free(Ortmk__Envelope *e)
{
	if (e)
		ortmk__envelope__free_unpacked(e, NULL);
}
