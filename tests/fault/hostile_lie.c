/*
 * hostile_lie: how ort-ep-hostile answers RUN (see hostile_ep.c).  The
 * first RUN a process receives is answered honestly (NonZero of the float
 * input, placed in the dynamic region); every later one in the way
 * ORTMK_TEST_HOSTILE names:
 *
 *   none           honest every time (the control case)
 *   big-shape      the output claims [1, 2^40] int64s: past the segment
 *   past-end       the right shape, placed so its bytes cross the end
 *   neg-dim        a negative dimension
 *   rank           rank 17
 *   overflow       dims [2^32, 2^32]: numel overflows int64 and size_t,
 *                  nbytes 0 (what the product wraps to)
 *   dtype          the output as float, while the model declares int64
 *   kind           the output as an empty optional, declared a tensor
 *   not-given      a RESULT for the input, which was not dynamic
 *   dup            the output reported twice
 *   wrong-run      RESULT of a run id the core never sent
 *   oversize       a frame header announcing IPC_MAX_MESSAGE + 1 bytes
 *   partial        a frame header for 1000 bytes, 10 of them, silence
 *   flood          20000 replies to the previous request, then the answer
 *   garbage        64 random bytes that are no frame
 *   garbage-frame  a well-framed message of 64 random bytes
 *   silence        no answer at all
 *   ring-close     (fast path) marks the reply ring closed
 *   ring-corrupt   (fast path) a length header past what is published
 *   ring-garbage   (fast path) a well-framed ring message of random bytes
 */
#include "hostile.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/futex.h>

static const char *const modes[] = {
	"none", "big-shape", "past-end", "neg-dim", "rank", "overflow", "dtype", "kind",
	"not-given", "dup", "wrong-run", "oversize", "partial", "flood", "garbage",
	"garbage-frame", "silence", "ring-close", "ring-corrupt", "ring-garbage",
};

int hostile_mode_known(const char *mode)
{
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(mode, modes[i]) == 0)
			return 1;
	return 0;
}

/* The honest answer: NonZero of x[4] into the dynamic region.  Fills out
 * (dims in dims[]) and *in_value (the input binding's value index). */
static int honest(hostile *h, const Ortmk__Run *r, Ortmk__TensorRef *out, int64_t dims[2],
		  uint32_t *in_value)
{
	const Ortmk__TensorRef *x = NULL, *y = NULL;
	const shm_segment *xs, *ds;
	int64_t *idx;
	float v[4];
	int64_t k = 0;

	for (size_t i = 0; i < r->n_bindings; i++) {
		if (r->bindings[i]->dynamic)
			y = r->bindings[i];
		else if (r->bindings[i]->nbytes == sizeof(v))
			x = r->bindings[i];
	}
	xs = x ? ipc_segtab_find(&h->segs, x->segment_id) : NULL;
	ds = ipc_segtab_find(&h->segs, r->dyn_segment);
	if (!y || !xs || !ds || r->dyn_size < 4 * sizeof(int64_t))
		return -1;
	memcpy(v, (uint8_t *)xs->base + x->offset, sizeof(v));
	idx = (int64_t *)((uint8_t *)ds->base + r->dyn_offset);
	for (int i = 0; i < 4; i++)
		if (v[i] != 0)
			idx[k++] = i;
	ortmk__tensor_ref__init(out);
	dims[0] = 1;
	dims[1] = k;
	out->value = y->value;
	out->dtype = 7 /* int64 */;
	out->n_dims = 2;
	out->dims = dims;
	out->segment_id = r->dyn_segment;
	out->offset = r->dyn_offset;
	out->nbytes = (uint64_t)k * sizeof(int64_t);
	*in_value = x->value;
	return 0;
}

/* A ring message of n bytes, published as `published` bytes. */
static void ring_raw(hostile *h, uint32_t len, const void *body, size_t n, uint64_t published)
{
	ipc_ring *r = &h->ring.rep;
	uint64_t head = atomic_load(&r->hdr->head), at = head & (r->size - 1);

	if (at + 4 + n > r->size)
		return;
	memcpy(r->data + at, &len, 4);
	memcpy(r->data + at + 4, body, n);
	atomic_store(&r->hdr->head, head + published);
	atomic_fetch_add(&r->hdr->doorbell, 1);
	syscall(SYS_futex, (uint32_t *)&r->hdr->doorbell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* After breaking the wire: stay, silent, as a truly hostile process would
 * (the core is expected to kill it); leave only with the core. */
static int linger(void)
{
	for (;;) {
		if (getppid() == 1)
			_exit(0);
		sleep(1);
	}
	return 1;
}

/* The lies that are not a RESULT: 1 when one was told. */
static int transport_lie(hostile *h, const Ortmk__Envelope *req)
{
	uint8_t junk[64], head[13];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rand();
	if (strcmp(h->mode, "oversize") == 0) {
		hostile_frame_head(head, IPC_MAX_MESSAGE + 1);
		return write(h->sock, head, sizeof(head)), linger();
	}
	if (strcmp(h->mode, "partial") == 0) {
		hostile_frame_head(head, 1000);
		return write(h->sock, head, sizeof(head)), write(h->sock, junk, 10), linger();
	}
	if (strcmp(h->mode, "garbage") == 0)
		return write(h->sock, junk, sizeof(junk)), linger();
	if (strcmp(h->mode, "garbage-frame") == 0)
		return hostile_send_raw(h, junk, sizeof(junk)), 1;
	if (strcmp(h->mode, "silence") == 0)
		return 1;
	if (strcmp(h->mode, "ring-close") == 0)
		return ipc_ring_close(&h->ring.rep), 1;
	if (strcmp(h->mode, "ring-corrupt") == 0)
		return ring_raw(h, 1000, junk, sizeof(junk), 8), 1;
	if (strcmp(h->mode, "ring-garbage") == 0)
		return ring_raw(h, sizeof(junk), junk, sizeof(junk), 4 + sizeof(junk)), 1;
	(void)req;
	return 0;
}

/* Bends the honest RESULT body the mode's way. */
static void result_lie(hostile *h, const Ortmk__Run *r, Ortmk__Result *body,
		       Ortmk__TensorRef *out, uint32_t in_value)
{
	static int64_t big[2] = {1, INT64_C(1) << 40}, neg[2] = {1, -3}, huge[2] = {INT64_C(1) << 32, INT64_C(1) << 32};
	static int64_t ones[17] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
	const char *m = h->mode;

	if (strcmp(m, "big-shape") == 0) {
		out->dims = big;
		out->nbytes = sizeof(int64_t) << 40;
	} else if (strcmp(m, "past-end") == 0) {
		out->offset = r->dyn_offset + r->dyn_size - sizeof(int64_t);
	} else if (strcmp(m, "neg-dim") == 0) {
		out->dims = neg;
	} else if (strcmp(m, "rank") == 0) {
		out->n_dims = 17;
		out->dims = ones;
		out->nbytes = sizeof(int64_t);
	} else if (strcmp(m, "overflow") == 0) {
		out->dims = huge;
		out->nbytes = 0;
	} else if (strcmp(m, "dtype") == 0) {
		out->dtype = 1 /* float */;
		out->nbytes = (uint64_t)out->dims[1] * sizeof(float);
	} else if (strcmp(m, "kind") == 0) {
		out->has_kind = 1;
		out->kind = ORTMK__VALUE_KIND__VALUE_NONE;
		out->dtype = 0;
		out->n_dims = 0;
		out->nbytes = 0;
	} else if (strcmp(m, "not-given") == 0) {
		out->value = in_value;
	} else if (strcmp(m, "dup") == 0) {
		body->n_outputs = 2;
	} else if (strcmp(m, "wrong-run") == 0) {
		body->run_id = r->run_id + 1000;
	}
}

int hostile_on_run(hostile *h, const Ortmk__Envelope *req)
{
	const Ortmk__Run *r = req->run;
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Result body = ORTMK__RESULT__INIT;
	Ortmk__TensorRef out, *outs[2] = {&out, &out};
	int64_t dims[2];
	uint32_t in_value = 0;
	int lie = ++h->runs > 1 && strcmp(h->mode, "none") != 0;

	if (honest(h, r, &out, dims, &in_value))
		return hostile_reply_error(h, req, "ort-ep-hostile serves only gen_hostile_model.py's model");
	if (lie && transport_lie(h, req))
		return 0;
	body.run_id = r->run_id;
	body.n_outputs = 1;
	body.outputs = outs;
	if (lie)
		result_lie(h, r, &body, &out, in_value);
	e.kind = ORTMK__KIND__RESULT;
	e.body_case = ORTMK__ENVELOPE__BODY_RESULT;
	e.result = &body;
	if (lie && strcmp(h->mode, "flood") == 0) {
		Ortmk__Envelope stale = *req;

		stale.seq = req->seq - 1;
		for (int i = 0; i < 20000; i++)
			if (hostile_send(h, &e, &stale))
				return -1;
	}
	return hostile_send(h, &e, req);
}
