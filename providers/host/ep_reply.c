/*
 * ep_reply: how the provider process answers the core (replies on the
 * nng channel or, for a request that came by ring, on the ring; errors;
 * acks; RESULT with a profiled run's spans; the EP_E_* status as an
 * Ortmk__ErrorCode), and the two helpers
 * the vtable's implementations call on what a request carried (a
 * subgraph's opset, the run's dynamic region).  Used by the message loop
 * (ep_host.c), the loads (ep_load.c) and device memory (ep_device.c), so
 * none of them calls up into another.
 */
#include "ep_host_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int64_t ep_subgraph_opset(const ep_subgraph *sg, const char *domain)
{
	if (strcmp(domain, "ai.onnx") == 0)
		domain = "";
	for (size_t i = 0; i < sg->msg->n_opsets; i++) {
		const char *d = sg->msg->opsets[i]->domain;

		if (strcmp(d, "ai.onnx") == 0)
			d = "";
		if (strcmp(d, domain) == 0)
			return sg->msg->opsets[i]->version;
	}
	return -1;
}

void *ep_run_dyn_alloc(ep_run *r, uint64_t nbytes)
{
	uint64_t off = (r->dyn_needed + 63) & ~UINT64_C(63);

	r->dyn_needed = off + (nbytes ? nbytes : 1);
	if (r->dyn_needed > r->dyn_size || !r->dyn_base)
		return NULL;
	r->dyn_used = r->dyn_needed;
	return r->dyn_base + off;
}

/* ---- RESULT ------------------------------------------------------------ */

typedef struct span_buf {
	Ortmk__NodeSpan *spans;
	Ortmk__NodeSpan **pspans;
} span_buf;

/* What a RESULT's spans take once the core decodes them from the ring
 * (its arena, IPC_RING_ARENA_BYTES; protobuf-c allocations in 16s). */
static size_t decoded_size(Ortmk__NodeSpan *const *s, size_t n)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++)
		total += ((sizeof(**s) + 15) & ~(size_t)15) + sizeof(*s) +
			 ((strlen(s[i]->name) + 16) & ~(size_t)15) +
			 ((strlen(s[i]->op_type) + 16) & ~(size_t)15);
	return total;
}

/* On the ring a reply has to fit one message and, decoded, the core's
 * arena (with room for the rest): the latest spans go first, so every
 * parent left is still there. */
static void fit_ring(const host_lane *lane, Ortmk__Envelope *e)
{
	Ortmk__Result *r = e->result;

	while (lane && r->n_spans &&
	       (ortmk__envelope__get_packed_size(e) > IPC_RING_MAX_MESSAGE - 64 ||
		decoded_size(r->spans, r->n_spans) > IPC_RING_ARENA_BYTES / 2)) {
		size_t keep = r->n_spans * 3 / 4;

		r->spans_dropped += (uint32_t)(r->n_spans - keep);
		r->n_spans = keep;
	}
}

/* Run.profile: the run's start and thread, and the provider's spans. */
static int profile_spans(const host_lane *lane, Ortmk__Envelope *e, const ep_profile *p,
			 uint64_t t0, span_buf *sp)
{
	Ortmk__Result *r = e->result;

	r->has_run_start_ns = r->has_run_tid = r->has_spans_dropped = 1;
	r->run_start_ns = t0;
	r->run_tid = (uint32_t)syscall(SYS_gettid);
	r->spans_dropped = p->n_dropped;
	sp->spans = calloc(p->n + 1, sizeof(*sp->spans));
	sp->pspans = calloc(p->n + 1, sizeof(*sp->pspans));
	if (!sp->spans || !sp->pspans)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++) {
		const ep_span *s = &p->spans[i];
		Ortmk__NodeSpan *d = &sp->spans[i];

		ortmk__node_span__init(d);
		d->node = s->node;
		d->name = (char *)(s->name ? s->name : "");
		d->op_type = (char *)(s->op_type ? s->op_type : "");
		d->start_ns = s->start_ns;
		d->dur_ns = s->dur_ns;
		d->has_tid = 1;
		d->tid = s->tid;
		d->has_parent = s->parent >= 0 && (size_t)s->parent < i;
		d->parent = d->has_parent ? (uint32_t)s->parent : 0;
		d->has_depth = s->depth > 0;
		d->depth = s->depth;
		d->has_fused = s->fused > 0;
		d->fused = s->fused;
		sp->pspans[i] = d;
	}
	r->n_spans = p->n;
	r->spans = sp->pspans;
	fit_ring(lane, e);
	return 0;
}

/* ---- replies ---------------------------------------------------------- */

/* e (and its body) say ERROR code: msg. */
static void error_envelope(Ortmk__Envelope *e, Ortmk__Error *body, int code, const char *msg)
{
	body->code = code;
	body->message = (char *)msg;
	e->kind = ORTMK__KIND__ERROR;
	e->body_case = ORTMK__ENVELOPE__BODY_ERROR;
	e->error = body;
}

static int reply_small_error(host *h, host_lane *lane, const Ortmk__Envelope *req, const char *msg)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Error body = ORTMK__ERROR__INIT;

	error_envelope(&e, &body, ORTMK__ERROR_CODE__E_INTERNAL, msg);
	e.has_reply_to = 1;
	e.reply_to = req->seq;
	return ipc_ring_send(&lane->ring, &lane->ring.rep, &e, &h->chan.next_seq);
}

int ep_host_reply_lane(host *h, host_lane *lane, const Ortmk__Envelope *req, Ortmk__Envelope *e)
{
	e->has_reply_to = 1;
	e->reply_to = req->seq;
	e->has_session = req->has_session;
	e->session = req->session;
	if (lane) {
		int rc = ipc_ring_send(&lane->ring, &lane->ring.rep, e, &h->chan.next_seq);

		if (rc == 0)
			return 0;
		/* The core waits on the ring: say why there, in a few bytes. */
		return reply_small_error(h, lane, req, "reply too large for the ring");
	}
	return ipc_send(&h->chan, e);
}

int ep_host_reply(host *h, const Ortmk__Envelope *req, Ortmk__Envelope *e)
{
	return ep_host_reply_lane(h, h->cur_lane, req, e);
}

int ep_host_reply_error_lane(host *h, host_lane *lane, const Ortmk__Envelope *req, int code,
			     const char *msg)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Error body = ORTMK__ERROR__INIT;

	error_envelope(&e, &body, code, msg);
	return ep_host_reply_lane(h, lane, req, &e);
}

int ep_host_reply_error(host *h, const Ortmk__Envelope *req, int code, const char *msg)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Error body = ORTMK__ERROR__INIT;

	body.code = code;
	body.message = (char *)msg;
	e.kind = ORTMK__KIND__ERROR;
	e.body_case = ORTMK__ENVELOPE__BODY_ERROR;
	e.error = &body;
	return ep_host_reply(h, req, &e);
}

int ep_host_reply_ack(host *h, const Ortmk__Envelope *req)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Ack body = ORTMK__ACK__INIT;

	e.kind = ORTMK__KIND__ACK;
	e.body_case = ORTMK__ENVELOPE__BODY_ACK;
	e.ack = &body;
	return ep_host_reply(h, req, &e);
}

int ep_host_reply_result(host *h, host_lane *lane, const Ortmk__Envelope *req, const ep_run *run,
			 uint64_t t0, uint64_t ns)
{
	const Ortmk__Run *r = req->run;
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Result body = ORTMK__RESULT__INIT;
	Ortmk__TensorRef *refs = calloc(run->n_bindings + 1, sizeof(*refs));
	Ortmk__TensorRef **prefs = calloc(run->n_bindings + 1, sizeof(*prefs));
	span_buf sp = {NULL, NULL};
	size_t n = 0;
	int rc;

	if (!refs || !prefs) {
		free(refs);
		free(prefs);
		return ep_host_reply_error_lane(h, lane, req, ORTMK__ERROR_CODE__E_NOMEM, "out of memory");
	}
	for (size_t i = 0; i < run->n_bindings; i++) {
		const ep_tensor *b = &run->bindings[i];
		Ortmk__TensorRef *t = &refs[n];

		if (!b->dynamic)
			continue;
		ortmk__tensor_ref__init(t);
		t->value = b->value;
		t->dtype = b->dtype;
		t->has_kind = b->kind != 0;
		t->kind = (Ortmk__ValueKind)b->kind;
		t->n_dims = (size_t)b->rank;
		t->dims = (int64_t *)b->dims;
		t->nbytes = b->nbytes;
		if (b->buffer_id) {
			/* A device output: its buffer now exists, at offset 0. */
			t->has_buffer_id = 1;
			t->buffer_id = b->buffer_id;
		} else {
			t->segment_id = r->dyn_segment;
			t->offset = r->dyn_offset + (uint64_t)((uint8_t *)b->data - run->dyn_base);
		}
		prefs[n++] = t;
	}
	body.run_id = r->run_id;
	body.has_uploads = body.has_upload_bytes = run->uploads || run->upload_bytes;
	body.uploads = run->uploads;
	body.upload_bytes = run->upload_bytes;
	body.has_downloads = body.has_download_bytes = run->downloads || run->download_bytes;
	body.downloads = run->downloads;
	body.download_bytes = run->download_bytes;
	body.n_outputs = n;
	body.outputs = prefs;
	body.has_compute_ns = 1;
	body.compute_ns = ns;
	e.kind = ORTMK__KIND__RESULT;
	e.body_case = ORTMK__ENVELOPE__BODY_RESULT;
	e.result = &body;
	if (run->profile && profile_spans(lane, &e, run->profile, t0, &sp) < 0)
		rc = ep_host_reply_error_lane(h, lane, req, ORTMK__ERROR_CODE__E_NOMEM, "out of memory");
	else
		rc = ep_host_reply_lane(h, lane, req, &e);
	free(sp.spans);
	free(sp.pspans);
	free(prefs);
	free(refs);
	return rc;
}

int ep_host_code(int st)
{
	switch (st) {
	case EP_E_UNSUPPORTED: return ORTMK__ERROR_CODE__E_UNSUPPORTED;
	case EP_E_SHAPE: return ORTMK__ERROR_CODE__E_SHAPE;
	case EP_E_NOMEM: return ORTMK__ERROR_CODE__E_NOMEM;
	case EP_E_DYN_OVERFLOW: return ORTMK__ERROR_CODE__E_DYN_OVERFLOW;
	case EP_E_INVALID: return ORTMK__ERROR_CODE__E_INVALID;
	case EP_E_CANCELLED: return ORTMK__ERROR_CODE__E_CANCELLED;
	default: return ORTMK__ERROR_CODE__E_INTERNAL;
	}
}
