/*
 * trace_record: a message's body as a trace record, and the record's
 * encoder (see trace_record.h).  Nothing is copied: tensor dims, value names and error
 * messages point into the envelope until the record is written.  Tensor
 * names are not resolved here (a RUN only carries value indexes):
 * LOAD_SUBGRAPH records carry the value table and ort-trace resolves names
 * when it reads the trace.
 */
#include "trace_record.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tensors_alloc(ipc_trace_scratch *s, Ortmk__Trace__Message *m, size_t n)
{
	if (n > IPC_TRACE_MAX_TENSORS) {
		m->has_tensors_omitted = 1;
		m->tensors_omitted = (uint32_t)(n - IPC_TRACE_MAX_TENSORS);
		n = IPC_TRACE_MAX_TENSORS;
	}
	s->t = s->st;
	s->p = s->sp;
	if (n > IPC_TRACE_STACK_TENSORS) {
		s->t = calloc(n, sizeof(*s->t));
		s->p = calloc(n, sizeof(*s->p));
		if (!s->t || !s->p) {
			free(s->t);
			free(s->p);
			s->t = s->st;
			s->p = s->sp;
			return 0;
		}
	}
	m->tensors = s->p;
	return (int)n;
}

static void tensor_from_ref(Ortmk__Trace__Tensor *t, const Ortmk__TensorRef *r)
{
	ortmk__trace__tensor__init(t);
	t->has_value = t->has_dtype = t->has_nbytes = t->has_segment = t->has_offset = 1;
	t->value = r->value;
	t->dtype = r->dtype;
	t->n_dims = r->n_dims;
	t->dims = r->dims;
	t->nbytes = r->nbytes;
	t->segment = r->segment_id;
	t->offset = r->offset;
	t->has_dynamic = r->has_dynamic && r->dynamic;
	t->dynamic = t->has_dynamic;
	t->has_buffer = r->has_buffer_id;
	t->buffer = r->buffer_id;
}

static void tensor_refs(ipc_trace_scratch *s, Ortmk__Trace__Message *m, Ortmk__TensorRef **refs, size_t n)
{
	int k = tensors_alloc(s, m, n);

	for (int i = 0; i < k; i++) {
		tensor_from_ref(&s->t[i], refs[i]);
		s->p[i] = &s->t[i];
	}
	m->n_tensors = (size_t)k;
}

static void load_subgraph(ipc_trace_scratch *s, Ortmk__Trace__Message *m, const Ortmk__LoadSubgraph *l)
{
	int k = tensors_alloc(s, m, l->n_weights);

	for (int i = 0; i < k; i++) {
		const Ortmk__Weight *w = l->weights[i];
		Ortmk__Trace__Tensor *t = &s->t[i];

		ortmk__trace__tensor__init(t);
		t->has_value = t->has_dtype = t->has_nbytes = t->has_segment = t->has_offset = 1;
		t->value = w->value;
		t->dtype = w->dtype;
		t->n_dims = w->n_dims;
		t->dims = w->dims;
		t->nbytes = w->nbytes;
		t->segment = w->source_id;
		t->offset = w->offset;
		t->has_external = w->external;
		t->external = w->external;
		s->p[i] = t;
	}
	m->n_tensors = (size_t)k;
	m->has_subgraph_id = 1;
	m->subgraph_id = l->subgraph_id;
	m->n_value_names = l->n_values < IPC_TRACE_MAX_VALUE_NAMES ? l->n_values : IPC_TRACE_MAX_VALUE_NAMES;
	m->value_names = calloc(m->n_value_names ? m->n_value_names : 1, sizeof(char *));
	if (!m->value_names)
		m->n_value_names = 0;
	for (size_t i = 0; i < m->n_value_names; i++)
		m->value_names[i] = l->values[i]->name;
	snprintf(s->note, sizeof(s->note), "graph %zu bytes, %zu values, %zu weights",
		 l->graph.len, l->n_values, l->n_weights);
}

static void capability_reply(ipc_trace_scratch *s, const Ortmk__CapabilityReply *r)
{
	size_t yes = 0;
	const char *why = NULL;

	for (size_t i = 0; i < r->n_supported; i++)
		yes += r->supported[i] != 0;
	for (size_t i = 0; i < r->n_reason && !why; i++)
		if (r->reason[i] && r->reason[i][0])
			why = r->reason[i];
	snprintf(s->note, sizeof(s->note), "%zu of %zu nodes supported%s%s", yes, r->n_supported,
		 why ? "; first refusal: " : "", why ? why : "");
}

static void release_note(ipc_trace_scratch *s, const Ortmk__Release *r)
{
	if (r->has_subgraph_id)
		snprintf(s->note, sizeof(s->note), "subgraph %u", r->subgraph_id);
	else if (r->has_segment_id)
		snprintf(s->note, sizeof(s->note), "segment %llu", (unsigned long long)r->segment_id);
	else if (r->has_file_id)
		snprintf(s->note, sizeof(s->note), "file %llu", (unsigned long long)r->file_id);
	else if (r->has_buffer_id)
		snprintf(s->note, sizeof(s->note), "buffer %llu", (unsigned long long)r->buffer_id);
	else if (r->has_stream)
		snprintf(s->note, sizeof(s->note), "stream %u", r->stream);
}

/* COPY: ops counted by direction, the fence it signals. */
static void copy_summary(ipc_trace_scratch *s, Ortmk__Trace__Message *m, const Ortmk__Copy *c)
{
	for (size_t i = 0; i < c->n_ops; i++) {
		const Ortmk__CopyOp *op = c->ops[i];
		int from_dev = op->src->has_buffer_id, to_dev = op->dst->has_buffer_id;

		if (from_dev && to_dev) {
			m->d2d++;
			m->d2d_bytes += op->nbytes;
		} else if (to_dev) {
			m->h2d++;
			m->h2d_bytes += op->nbytes;
		} else {
			m->d2h++;
			m->d2h_bytes += op->nbytes;
		}
	}
	m->has_h2d = m->has_h2d_bytes = m->h2d != 0;
	m->has_d2h = m->has_d2h_bytes = m->d2h != 0;
	m->has_d2d = m->has_d2d_bytes = m->d2d != 0;
	snprintf(s->note, sizeof(s->note), "%zu ops: h2d %u (%llu B), d2h %u (%llu B), d2d %u (%llu B)",
		 c->n_ops, m->h2d, (unsigned long long)m->h2d_bytes, m->d2h,
		 (unsigned long long)m->d2h_bytes, m->d2d, (unsigned long long)m->d2d_bytes);
	if (c->signal) {
		ortmk__trace__fence__init(&s->fence);
		s->fence.id = c->signal->segment_id * 65536 + c->signal->offset / 16;
		s->fence.has_value = s->fence.has_signal = 1;
		s->fence.value = c->signal->value;
		s->fence.signal = 1;
		s->pfence = &s->fence;
		m->n_fences = 1;
		m->fences = &s->pfence;
	}
}

static void result_transfers(ipc_trace_scratch *s, Ortmk__Trace__Message *m, const Ortmk__Result *r)
{
	size_t k = strlen(s->note);

	m->has_h2d = m->has_h2d_bytes = r->uploads != 0;
	m->h2d = r->uploads;
	m->h2d_bytes = r->upload_bytes;
	m->has_d2h = m->has_d2h_bytes = r->downloads != 0;
	m->d2h = r->downloads;
	m->d2h_bytes = r->download_bytes;
	if (r->uploads || r->downloads)
		snprintf(s->note + k, sizeof(s->note) - k, "%suploads %u (%llu B), downloads %u (%llu B)",
			 k ? ", " : "", r->uploads, (unsigned long long)r->upload_bytes, r->downloads,
			 (unsigned long long)r->download_bytes);
}

static void summarize_control(ipc_trace_scratch *s, const Ortmk__Envelope *e)
{
	switch (e->body_case) {
	case ORTMK__ENVELOPE__BODY_HELLO:
		snprintf(s->note, sizeof(s->note), "provider %s pid %u protocol %u%s%s",
			 e->hello->provider, e->hello->pid, e->hello->protocol_version,
			 e->hello->detail ? ", " : "", e->hello->detail ? e->hello->detail : "");
		break;
	case ORTMK__ENVELOPE__BODY_HELLO_ACK:
		snprintf(s->note, sizeof(s->note), "%s%s%s", e->hello_ack->accepted ? "accepted" : "refused",
			 e->hello_ack->reason && e->hello_ack->reason[0] ? ": " : "",
			 e->hello_ack->reason ? e->hello_ack->reason : "");
		break;
	case ORTMK__ENVELOPE__BODY_ADD_SEGMENT:
		snprintf(s->note, sizeof(s->note), "segment %llu size %llu",
			 (unsigned long long)e->add_segment->segment_id,
			 (unsigned long long)e->add_segment->size);
		break;
	case ORTMK__ENVELOPE__BODY_ADD_FILE:
		snprintf(s->note, sizeof(s->note), "file %llu size %llu",
			 (unsigned long long)e->add_file->file_id, (unsigned long long)e->add_file->size);
		break;
	case ORTMK__ENVELOPE__BODY_CAPABILITY_QUERY:
		snprintf(s->note, sizeof(s->note), "%zu nodes", e->capability_query->n_nodes);
		break;
	case ORTMK__ENVELOPE__BODY_CAPABILITY_REPLY:
		capability_reply(s, e->capability_reply);
		break;
	case ORTMK__ENVELOPE__BODY_RELEASE:
		release_note(s, e->release);
		break;
	case ORTMK__ENVELOPE__BODY_RING_SETUP:
		snprintf(s->note, sizeof(s->note), "ring segment %llu",
			 (unsigned long long)e->ring_setup->segment_id);
		break;
	case ORTMK__ENVELOPE__BODY_ALLOC:
		snprintf(s->note, sizeof(s->note), "buffer %llu, %llu bytes",
			 (unsigned long long)e->alloc->buffer_id, (unsigned long long)e->alloc->nbytes);
		break;
	default:
		break;
	}
}

void ipc_trace_summarize(ipc_trace_scratch *s, Ortmk__Trace__Message *m, const Ortmk__Envelope *e)
{
	s->note[0] = 0;
	s->t = s->st;
	s->p = s->sp;
	switch (e->body_case) {
	case ORTMK__ENVELOPE__BODY_LOAD_SUBGRAPH:
		load_subgraph(s, m, e->load_subgraph);
		break;
	case ORTMK__ENVELOPE__BODY_LOAD_DONE:
		m->has_subgraph_id = 1;
		m->subgraph_id = e->load_done->subgraph_id;
		if (e->load_done->has_prepack_ns)
			snprintf(s->note, sizeof(s->note), "prepack %.3f ms",
				 (double)e->load_done->prepack_ns / 1e6);
		break;
	case ORTMK__ENVELOPE__BODY_RUN:
		m->has_subgraph_id = m->has_run_id = 1;
		m->subgraph_id = e->run->subgraph_id;
		m->run_id = e->run->run_id;
		tensor_refs(s, m, e->run->bindings, e->run->n_bindings);
		if (e->run->has_profile && e->run->profile)
			snprintf(s->note, sizeof(s->note), "profile");
		break;
	case ORTMK__ENVELOPE__BODY_RESULT:
		m->has_run_id = 1;
		m->run_id = e->result->run_id;
		tensor_refs(s, m, e->result->outputs, e->result->n_outputs);
		if (e->result->has_compute_ns)
			snprintf(s->note, sizeof(s->note), "compute %.3f ms",
				 (double)e->result->compute_ns / 1e6);
		if (e->result->has_run_start_ns)
			snprintf(s->note + strlen(s->note), sizeof(s->note) - strlen(s->note),
				 "%s%zu node spans", s->note[0] ? ", " : "", e->result->n_spans);
		result_transfers(s, m, e->result);
		break;
	case ORTMK__ENVELOPE__BODY_COPY:
		copy_summary(s, m, e->copy);
		break;
	case ORTMK__ENVELOPE__BODY_ERROR:
		m->has_status = 1;
		m->status = (int32_t)e->error->code;
		m->error = e->error->message;
		if (e->error->node && e->error->node[0])
			snprintf(s->note, sizeof(s->note), "node %s", e->error->node);
		if (e->error->has_needed)
			snprintf(s->note + strlen(s->note), sizeof(s->note) - strlen(s->note),
				 "%sneeded %llu", s->note[0] ? ", " : "",
				 (unsigned long long)e->error->needed);
		break;
	default:
		summarize_control(s, e);
		break;
	}
	if (s->note[0])
		m->note = s->note;
}

void ipc_trace_scratch_free(ipc_trace_scratch *s, Ortmk__Trace__Message *m)
{
	if (s->t != s->st)
		free(s->t);
	if (s->p != s->sp)
		free(s->p);
	free(m->value_names);
	m->value_names = NULL;
	m->n_value_names = 0;
}

/* ---- encoding ------------------------------------------------------------ */

/* A bounded writer: once anything does not fit, `over` is set and the
 * result is discarded. */
typedef struct wbuf {
	uint8_t *p;
	size_t n, cap;
	int over;
} wbuf;

static size_t varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Past an overflow, writes may go on (in bounds); the result is dropped. */
static inline void put_varint(wbuf *w, uint64_t v)
{
	if (__builtin_expect(w->cap - w->n < 10, 0)) {
		w->over = 1;
		return;
	}
	while (v >= 0x80) {
		w->p[w->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	w->p[w->n++] = (uint8_t)v;
}

/* Varint fields: wire type 0.  Signed values are sign-extended to 64 bits,
 * as protobuf encodes int32 and int64. */
static inline void put_u(wbuf *w, unsigned field, int has, uint64_t v)
{
	if (!has)
		return;
	put_varint(w, (uint64_t)field << 3);
	put_varint(w, v);
}

static void put_str(wbuf *w, unsigned field, const char *s)
{
	size_t len;

	if (!s)
		return;
	len = strlen(s);
	put_varint(w, (uint64_t)field << 3 | 2);
	put_varint(w, len);
	if (w->over || w->cap - w->n < len) {
		w->over = 1;
		return;
	}
	memcpy(w->p + w->n, s, len);
	w->n += len;
}

/* A nested message: its length goes before it, so it is written after a
 * one-byte gap that grows when the length needs more. */
static size_t sub_begin(wbuf *w, unsigned field)
{
	put_varint(w, (uint64_t)field << 3 | 2);
	put_varint(w, 0);
	return w->n;
}

static void sub_end(wbuf *w, size_t start)
{
	size_t len = w->n - start, extra = varint_size(len) - 1;

	if (w->over || w->cap - w->n < extra) {
		w->over = 1;
		return;
	}
	memmove(w->p + start + extra, w->p + start, len);
	w->n = start - 1;
	put_varint(w, len);
	w->n += len;
}

static void put_tensor(wbuf *w, const Ortmk__Trace__Tensor *t)
{
	size_t start = sub_begin(w, 20), dims = 0;

	put_u(w, 1, t->has_value, t->value);
	put_u(w, 2, t->has_dtype, (uint64_t)(int64_t)t->dtype);
	for (size_t i = 0; i < t->n_dims; i++)
		dims += varint_size((uint64_t)t->dims[i]);
	if (t->n_dims) {
		put_varint(w, 3 << 3 | 2);
		put_varint(w, dims);
		for (size_t i = 0; i < t->n_dims; i++)
			put_varint(w, (uint64_t)t->dims[i]);
	}
	put_u(w, 4, t->has_nbytes, t->nbytes);
	put_u(w, 5, t->has_segment, t->segment);
	put_u(w, 6, t->has_offset, t->offset);
	put_u(w, 7, t->has_dynamic, t->dynamic != 0);
	put_u(w, 8, t->has_external, t->external != 0);
	put_u(w, 9, t->has_buffer, t->buffer);
	sub_end(w, start);
}

static void put_fence(wbuf *w, const Ortmk__Trace__Fence *f)
{
	size_t start = sub_begin(w, 23);

	put_u(w, 1, 1, f->id);
	put_u(w, 2, f->has_value, f->value);
	put_u(w, 3, f->has_signal, f->signal != 0);
	sub_end(w, start);
}

size_t ipc_trace_encode_message(const Ortmk__Trace__Message *m, uint8_t *buf, size_t cap)
{
	wbuf w = {buf, 0, cap, 0};

	put_u(&w, 1, 1, m->t_ns);
	put_u(&w, 2, 1, (uint64_t)m->dir);
	put_str(&w, 3, m->provider);
	put_u(&w, 4, m->has_pid, m->pid);
	put_u(&w, 5, m->has_core_pid, m->core_pid);
	put_u(&w, 6, m->has_session, m->session);
	put_u(&w, 7, m->has_stream, m->stream);
	put_u(&w, 8, m->has_seq, m->seq);
	put_u(&w, 9, m->has_reply_to, m->reply_to);
	put_u(&w, 10, m->has_kind, m->kind);
	put_u(&w, 11, m->has_size, m->size);
	put_u(&w, 12, m->has_latency_ns, m->latency_ns);
	put_u(&w, 13, m->has_request_kind, m->request_kind);
	put_u(&w, 14, m->has_peer_send_ns, m->peer_send_ns);
	put_u(&w, 15, m->has_invalid, m->invalid != 0);
	put_str(&w, 16, m->error);
	put_u(&w, 17, m->has_status, (uint64_t)(int64_t)m->status);
	put_u(&w, 18, m->has_subgraph_id, m->subgraph_id);
	put_u(&w, 19, m->has_run_id, m->run_id);
	for (size_t i = 0; i < m->n_tensors; i++)
		put_tensor(&w, m->tensors[i]);
	put_u(&w, 21, m->has_tensors_omitted, m->tensors_omitted);
	for (size_t i = 0; i < m->n_value_names; i++)
		put_str(&w, 22, m->value_names[i]);
	for (size_t i = 0; i < m->n_fences; i++)
		put_fence(&w, m->fences[i]);
	put_str(&w, 24, m->note);
	put_u(&w, 25, m->has_ring, m->ring != 0);
	put_u(&w, 26, m->has_h2d, m->h2d);
	put_u(&w, 27, m->has_h2d_bytes, m->h2d_bytes);
	put_u(&w, 28, m->has_d2h, m->d2h);
	put_u(&w, 29, m->has_d2h_bytes, m->d2h_bytes);
	put_u(&w, 30, m->has_d2d, m->d2d);
	put_u(&w, 31, m->has_d2d_bytes, m->d2d_bytes);
	return w.over ? 0 : w.n;
}
