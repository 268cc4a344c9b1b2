/*
 * ep_device: the device-memory side of a provider process (docs/DEVICE.md).
 * ALLOC, COPY and RELEASE of buffers, device buffers named by RUN bindings,
 * and fences.  ep_host keeps the table of buffer ids and sizes itself, so a
 * provider only ever sees ids that exist (or, for ALLOC and dynamic device
 * outputs, that are new) and ranges inside them; a provider without device
 * memory (no buf_alloc, like cpu) gets E_INVALID for any of it before its
 * vtable is called.
 *
 * Emulation: with ORTMK_EP_EMULATE_DEVICE=PROVIDER (or "1"), a provider
 * without device memory gets "device" buffers that ep_host keeps in the
 * provider process's private heap.  The core cannot read them except by
 * COPY, exactly as with a GPU, so the whole device path of the core (values,
 * bindings, streams, fences, death) is testable on a machine without one.
 * Copies are done at once and the fence signalled before the ACK.
 */
#include "ep_host_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

void ep_fence_signal(const ep_fence *f)
{
	if (f && f->f)
		shm_fence_signal(f->f, f->value);
}

void ep_fence_fail(const ep_fence *f)
{
	if (f && f->f)
		shm_fence_fail(f->f);
}

void ep_dev_init(host *h)
{
	const char *e = getenv("ORTMK_EP_EMULATE_DEVICE");

	if (h->vt->buf_alloc || !e || !e[0] || strcmp(e, "0") == 0)
		return;
	if (strcmp(e, "1") == 0 || strcmp(e, h->vt->name) == 0) {
		h->dev.emulate = 1;
		ipc_log(IPC_LOG_INFO, "emulating device memory in the provider's heap");
	}
}

int ep_dev_has_memory(const host *h)
{
	return h->vt->buf_alloc != NULL || h->dev.emulate;
}

static host_buf *find_buf(host *h, uint64_t id)
{
	for (size_t i = 0; i < h->dev.n; i++)
		if (h->dev.bufs[i].id == id)
			return &h->dev.bufs[i];
	return NULL;
}

static int add_buf(host *h, uint64_t id, uint64_t nbytes, void *emu)
{
	if (h->dev.n == h->dev.cap) {
		size_t cap = h->dev.cap ? 2 * h->dev.cap : 16;
		host_buf *p = realloc(h->dev.bufs, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		h->dev.bufs = p;
		h->dev.cap = cap;
	}
	h->dev.bufs[h->dev.n++] = (host_buf){id, nbytes, emu};
	return 0;
}

static void free_buf(host *h, host_buf *b)
{
	if (h->dev.emulate)
		free(b->emu);
	else if (h->vt->buf_free)
		h->vt->buf_free(h->self, b->id);
	*b = h->dev.bufs[--h->dev.n];
}

void ep_dev_fini(host *h)
{
	while (h->dev.n)
		free_buf(h, &h->dev.bufs[h->dev.n - 1]);
	free(h->dev.bufs);
	memset(&h->dev, 0, sizeof(h->dev));
}

void ep_dev_release_buffer(host *h, uint64_t id)
{
	host_buf *b = find_buf(h, id);

	if (b)
		free_buf(h, b);
}

void ep_dev_release_stream(host *h, uint32_t stream)
{
	if (h->vt->stream_free && !h->dev.emulate)
		h->vt->stream_free(h->self, stream);
}

static int no_device(host *h, const Ortmk__Envelope *req, const char *what)
{
	snprintf(h->err, sizeof(h->err), "%s: provider '%s' has no device memory", what, h->vt->name);
	return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_INVALID, h->err);
}

int ep_dev_on_alloc(host *h, const Ortmk__Envelope *req)
{
	const Ortmk__Alloc *a = req->alloc;
	void *emu = NULL;
	int rc;

	if (!ep_dev_has_memory(h))
		return no_device(h, req, "ALLOC");
	if (find_buf(h, a->buffer_id)) {
		snprintf(h->err, sizeof(h->err), "ALLOC: buffer %llu already exists",
			 (unsigned long long)a->buffer_id);
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_INVALID, h->err);
	}
	h->err[0] = 0;
	if (h->dev.emulate) {
		emu = calloc(1, a->nbytes);
		rc = emu ? 0 : EP_E_NOMEM;
	} else {
		rc = h->vt->buf_alloc(h->self, a->buffer_id, a->nbytes, h->err, sizeof(h->err));
	}
	if (rc == 0 && add_buf(h, a->buffer_id, a->nbytes, emu)) {
		if (h->dev.emulate)
			free(emu);
		else if (h->vt->buf_free)
			h->vt->buf_free(h->self, a->buffer_id);
		rc = EP_E_NOMEM;
	}
	if (rc) {
		if (!h->err[0])
			snprintf(h->err, sizeof(h->err), "ALLOC: cannot allocate %llu bytes for buffer %llu",
				 (unsigned long long)a->nbytes, (unsigned long long)a->buffer_id);
		return ep_host_reply_error(h, req, ep_host_code(rc), h->err);
	}
	return ep_host_reply_ack(h, req);
}

/* A device range: the buffer exists and [off, +n) lies inside it. */
static host_buf *check_range(host *h, uint64_t id, uint64_t off, uint64_t n, const char *what)
{
	host_buf *b = find_buf(h, id);

	if (!b) {
		snprintf(h->err, sizeof(h->err), "%s: unknown device buffer %llu", what,
			 (unsigned long long)id);
		return NULL;
	}
	if (off > b->nbytes || n > b->nbytes - off) {
		snprintf(h->err, sizeof(h->err), "%s: bytes [%llu, +%llu) outside buffer %llu of %llu bytes",
			 what, (unsigned long long)off, (unsigned long long)n, (unsigned long long)id,
			 (unsigned long long)b->nbytes);
		return NULL;
	}
	return b;
}

/* Resolves one side: a host pointer (the envelope check proved the range
 * inside its segment) or a checked device range. */
static int resolve_side(host *h, const Ortmk__Loc *l, uint64_t n, const char *what,
			void **host_ptr, uint64_t *buf, uint64_t *off)
{
	host_buf *b;

	*host_ptr = NULL;
	*buf = 0;
	*off = l->offset;
	if (l->has_segment_id) {
		*host_ptr = (uint8_t *)ipc_segtab_find(&h->segs, l->segment_id)->base + l->offset;
		return 0;
	}
	b = check_range(h, l->buffer_id, l->offset, n, what);
	if (!b)
		return -EINVAL;
	if (h->dev.emulate)
		*host_ptr = (uint8_t *)b->emu + l->offset;
	else
		*buf = l->buffer_id;
	return 0;
}

static ep_fence resolve_fence(host *h, const Ortmk__FenceRef *f)
{
	ep_fence out = {NULL, 0};

	if (f) {
		out.f = (shm_fence *)((uint8_t *)ipc_segtab_find(&h->segs, f->segment_id)->base + f->offset);
		out.value = f->value;
	}
	return out;
}

int ep_dev_on_copy(host *h, const Ortmk__Envelope *req, int never_signal)
{
	const Ortmk__Copy *c = req->copy;
	ep_fence fence = resolve_fence(h, c->signal);
	ep_copy *ops;
	char what[48];
	int rc = 0;

	if (!ep_dev_has_memory(h)) {
		ep_fence_fail(&fence);
		return no_device(h, req, "COPY");
	}
	ops = calloc(c->n_ops + 1, sizeof(*ops));
	if (!ops) {
		ep_fence_fail(&fence);
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_NOMEM, "out of memory");
	}
	for (size_t i = 0; i < c->n_ops && rc == 0; i++) {
		const Ortmk__CopyOp *op = c->ops[i];
		void *src;

		ops[i].nbytes = op->nbytes;
		snprintf(what, sizeof(what), "COPY op %zu: source", i);
		rc = resolve_side(h, op->src, op->nbytes, what, &src, &ops[i].src_buf, &ops[i].src_off);
		ops[i].src_host = src;
		snprintf(what, sizeof(what), "COPY op %zu: destination", i);
		if (rc == 0)
			rc = resolve_side(h, op->dst, op->nbytes, what, &ops[i].dst_host, &ops[i].dst_buf,
					  &ops[i].dst_off);
	}
	if (rc) {
		free(ops);
		ep_fence_fail(&fence);
		return ep_host_reply_error(h, req, ORTMK__ERROR_CODE__E_INVALID, h->err);
	}
	if (never_signal) {
		/* Fault injection: acknowledged, never completed. */
		free(ops);
		return ep_host_reply_ack(h, req);
	}
	if (h->dev.emulate) {
		for (size_t i = 0; i < c->n_ops; i++)
			memmove(ops[i].dst_host, ops[i].src_host, ops[i].nbytes);
		ep_fence_signal(&fence);
	} else {
		h->err[0] = 0;
		rc = h->vt->copy(h->self, req->has_stream ? req->stream : 0, ops, c->n_ops, fence,
				 h->err, sizeof(h->err));
	}
	free(ops);
	if (rc) {
		ep_fence_fail(&fence);
		return ep_host_reply_error(h, req, ep_host_code(rc), h->err[0] ? h->err : "copy failed");
	}
	return ep_host_reply_ack(h, req);
}

int ep_dev_bind(host *h, const Ortmk__TensorRef *t, ep_tensor *b, char *err, size_t n)
{
	host_buf *buf;
	char what[48];

	if (!ep_dev_has_memory(h))
		return snprintf(err, n, "binding %u: device buffer %llu, but provider '%s' has no device memory",
				t->value, (unsigned long long)t->buffer_id, h->vt->name), -EINVAL;
	b->buffer_id = t->buffer_id;
	b->buffer_offset = t->offset;
	b->data = NULL;
	if (t->dynamic) {
		/* The provider allocates it: the id must be new. */
		if (find_buf(h, t->buffer_id))
			return snprintf(err, n, "binding %u: dynamic output into existing buffer %llu",
					t->value, (unsigned long long)t->buffer_id), -EINVAL;
		b->buffer_offset = 0;
		return 0;
	}
	snprintf(what, sizeof(what), "binding %u", t->value);
	buf = check_range(h, t->buffer_id, t->offset, t->nbytes, what);
	if (!buf)
		return snprintf(err, n, "%s", h->err), -EINVAL;
	if (h->dev.emulate)
		b->data = (uint8_t *)buf->emu + t->offset;
	return 0;
}

int ep_dev_after_run(host *h, ep_run *run)
{
	for (size_t i = 0; i < run->n_bindings; i++) {
		ep_tensor *b = &run->bindings[i];
		void *emu = NULL;

		if (!b->dynamic || !b->buffer_id)
			continue;
		if (h->dev.emulate) {
			/* The provider put it in the dynamic region: move it to
			 * its buffer (at least one byte, like ALLOC). */
			emu = malloc(b->nbytes ? b->nbytes : 1);
			if (!emu)
				return snprintf(h->err, sizeof(h->err), "out of memory"), -ENOMEM;
			if (b->nbytes)
				memcpy(emu, b->data, b->nbytes);
			b->data = NULL;
		}
		if (add_buf(h, b->buffer_id, b->nbytes, emu)) {
			free(emu);
			return snprintf(h->err, sizeof(h->err), "out of memory"), -ENOMEM;
		}
	}
	return 0;
}
