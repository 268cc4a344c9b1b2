/*
 * ep_reply: how the provider process answers the core (replies on the
 * nng channel or, for a request that came by ring, on the ring; errors;
 * acks; the EP_E_* status as an Ortmk__ErrorCode), and the two helpers
 * the vtable's implementations call on what a request carried (a
 * subgraph's opset, the run's dynamic region).  Used by the message loop
 * (ep_host.c), the loads (ep_load.c) and device memory (ep_device.c), so
 * none of them calls up into another.
 */
#include "ep_host_int.h"

#include <string.h>

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

/* ---- replies ---------------------------------------------------------- */

static int reply_small_error(host *h, const Ortmk__Envelope *req, const char *msg)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Error body = ORTMK__ERROR__INIT;

	body.code = ORTMK__ERROR_CODE__E_INTERNAL;
	body.message = (char *)msg;
	e.kind = ORTMK__KIND__ERROR;
	e.body_case = ORTMK__ENVELOPE__BODY_ERROR;
	e.error = &body;
	e.has_reply_to = 1;
	e.reply_to = req->seq;
	return ipc_ring_send(&h->ring, &h->ring.rep, &e, &h->chan.next_seq);
}

int ep_host_reply(host *h, const Ortmk__Envelope *req, Ortmk__Envelope *e)
{
	e->has_reply_to = 1;
	e->reply_to = req->seq;
	e->has_session = req->has_session;
	e->session = req->session;
	if (h->cur_ring) {
		int rc = ipc_ring_send(&h->ring, &h->ring.rep, e, &h->chan.next_seq);

		if (rc == 0)
			return 0;
		/* The core waits on the ring: say why there, in a few bytes. */
		return reply_small_error(h, req, "reply too large for the ring");
	}
	return ipc_send(&h->chan, e);
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
