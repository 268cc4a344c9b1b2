/*
 * test_envelope_device: the validator refuses malformed device-memory
 * messages (ALLOC, COPY, RELEASE of a buffer, TensorRef.buffer_id, fences)
 * with a one-line reason, and accepts the well-formed ones.  Messages are
 * built with protobuf-c, packed and decoded like a received message.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "envelope.h"

static shm_segment seg;
static ipc_segtab segs;

static int setup(void **state)
{
	(void)state;
	memset(&segs, 0, sizeof(segs));
	if (shm_segment_create("test", 4096, 5, &seg))
		return -1;
	return ipc_segtab_add(&segs, &seg);
}

static int teardown(void **state)
{
	(void)state;
	ipc_segtab_fini(&segs);
	shm_segment_destroy(&seg);
	return 0;
}

static int decode(Ortmk__Envelope *e, char *err, size_t n)
{
	size_t len = ortmk__envelope__get_packed_size(e);
	uint8_t *buf = malloc(len + 1);
	Ortmk__Envelope *out = NULL;
	int rc;

	assert_non_null(buf);
	ortmk__envelope__pack(e, buf);
	err[0] = 0;
	rc = ipc_envelope_decode(buf, len, &segs, &out, err, n);
	ipc_envelope_free(out);
	free(buf);
	return rc;
}

/* A COPY of one op: 64 bytes from segment 5 at `soff` into buffer 3. */
typedef struct copy_msg {
	Ortmk__Envelope e;
	Ortmk__Copy copy;
	Ortmk__CopyOp op, *ops[1];
	Ortmk__Loc src, dst;
	Ortmk__FenceRef fence;
} copy_msg;

static void make_copy(copy_msg *m, uint64_t soff)
{
	ortmk__envelope__init(&m->e);
	ortmk__copy__init(&m->copy);
	ortmk__copy_op__init(&m->op);
	ortmk__loc__init(&m->src);
	ortmk__loc__init(&m->dst);
	ortmk__fence_ref__init(&m->fence);
	m->src.has_segment_id = 1;
	m->src.segment_id = 5;
	m->src.offset = soff;
	m->dst.has_buffer_id = 1;
	m->dst.buffer_id = 3;
	m->dst.offset = 0;
	m->op.src = &m->src;
	m->op.dst = &m->dst;
	m->op.nbytes = 64;
	m->ops[0] = &m->op;
	m->fence.segment_id = 5;
	m->fence.offset = 1024;
	m->fence.value = 1;
	m->copy.n_ops = 1;
	m->copy.ops = m->ops;
	m->copy.signal = &m->fence;
	m->e.version = IPC_PROTOCOL_VERSION;
	m->e.seq = 1;
	m->e.has_stream = 1;
	m->e.stream = 2;
	m->e.kind = ORTMK__KIND__COPY;
	m->e.body_case = ORTMK__ENVELOPE__BODY_COPY;
	m->e.copy = &m->copy;
}

static void test_copy_valid(void **state)
{
	copy_msg m;
	char err[256];

	(void)state;
	make_copy(&m, 0);
	assert_int_equal(decode(&m.e, err, sizeof(err)), 0);
	/* device to device and device to host are fine too */
	m.src.has_segment_id = 0;
	m.src.has_buffer_id = 1;
	m.src.buffer_id = 4;
	assert_int_equal(decode(&m.e, err, sizeof(err)), 0);
	m.dst.has_buffer_id = 0;
	m.dst.has_segment_id = 1;
	m.dst.segment_id = 5;
	m.dst.offset = 4096 - 64;
	assert_int_equal(decode(&m.e, err, sizeof(err)), 0);
	assert_string_equal(ipc_kind_name(ORTMK__KIND__COPY), "COPY");
	assert_string_equal(ipc_kind_name(ORTMK__KIND__ALLOC), "ALLOC");
}

static void test_copy_ranges(void **state)
{
	copy_msg m;
	char err[256];

	(void)state;
	make_copy(&m, 4096 - 32);             /* 64 bytes from 32 before the end */
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "outside segment 5"));
	make_copy(&m, UINT64_MAX - 8);        /* offset + nbytes overflows */
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	make_copy(&m, 0);
	m.src.segment_id = 9;
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "unknown segment 9"));
	make_copy(&m, 0);
	m.dst.offset = UINT64_MAX - 8;        /* device range overflows */
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "of buffer 3 out of range"));
	make_copy(&m, 0);
	m.op.nbytes = 0;
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "bad size 0"));
}

static void test_copy_sides(void **state)
{
	copy_msg m;
	char err[256];

	(void)state;
	make_copy(&m, 0);
	m.src.has_buffer_id = 1;              /* both */
	m.src.buffer_id = 2;
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "both a segment and a buffer"));
	make_copy(&m, 0);
	m.dst.has_buffer_id = 0;              /* neither */
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "neither"));
	make_copy(&m, 0);
	m.dst.buffer_id = 0;
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "buffer id 0"));
	make_copy(&m, 0);
	m.dst.has_buffer_id = 0;              /* host to host */
	m.dst.has_segment_id = 1;
	m.dst.segment_id = 5;
	m.dst.offset = 128;
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "host to host"));
}

static void test_copy_fence(void **state)
{
	copy_msg m;
	char err[256];

	(void)state;
	make_copy(&m, 0);
	m.fence.offset = 1028;                /* not 16-byte aligned */
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "aligned"));
	make_copy(&m, 0);
	m.fence.offset = 4096;                /* past the end */
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "outside segment 5"));
	make_copy(&m, 0);
	m.fence.segment_id = 8;
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "unknown segment 8"));
	make_copy(&m, 0);
	m.fence.value = SHM_FENCE_FAILED | 1; /* would read as failed */
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	make_copy(&m, 0);
	m.copy.signal = NULL;                 /* a fence is optional */
	assert_int_equal(decode(&m.e, err, sizeof(err)), 0);
}

static void test_copy_garbled(void **state)
{
	copy_msg m;
	char err[256];
	size_t len;
	uint8_t *buf;
	Ortmk__Envelope *out = NULL;

	(void)state;
	make_copy(&m, 0);
	len = ortmk__envelope__get_packed_size(&m.e);
	buf = malloc(len);
	assert_non_null(buf);
	ortmk__envelope__pack(&m.e, buf);
	/* No prefix of a COPY is a valid message (required fields missing or
	 * the body cut), and no byte flip crashes the decoder. */
	for (size_t cut = 0; cut < len; cut++) {
		assert_int_equal(ipc_envelope_decode(buf, cut, &segs, &out, err, sizeof(err)), -EPROTO);
		assert_null(out);
	}
	for (size_t i = 0; i < len; i++) {
		for (int bit = 0; bit < 8; bit++) {
			buf[i] ^= (uint8_t)(1u << bit);
			if (ipc_envelope_decode(buf, len, &segs, &out, err, sizeof(err)) == 0) {
				/* Whatever passed must still be in range. */
				for (size_t k = 0; k < out->copy->n_ops; k++)
					if (out->copy->ops[k]->src->has_segment_id)
						assert_true(out->copy->ops[k]->src->offset +
							    out->copy->ops[k]->nbytes <= 4096);
				ipc_envelope_free(out);
				out = NULL;
			}
			buf[i] ^= (uint8_t)(1u << bit);
		}
	}
	free(buf);
	/* COPY's kind with another body */
	make_copy(&m, 0);
	m.e.kind = ORTMK__KIND__ALLOC;
	assert_int_equal(decode(&m.e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "ALLOC message carries body"));
}

static void test_alloc(void **state)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Alloc a = ORTMK__ALLOC__INIT;
	char err[256];

	(void)state;
	e.version = IPC_PROTOCOL_VERSION;
	e.kind = ORTMK__KIND__ALLOC;
	e.body_case = ORTMK__ENVELOPE__BODY_ALLOC;
	e.alloc = &a;
	a.buffer_id = 7;
	a.nbytes = 1 << 20;
	assert_int_equal(decode(&e, err, sizeof(err)), 0);
	a.nbytes = 0;
	assert_int_equal(decode(&e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "ALLOC: bad size 0"));
	a.nbytes = IPC_MAX_DEVICE_BYTES + 1;
	assert_int_equal(decode(&e, err, sizeof(err)), -EPROTO);
	a.nbytes = 64;
	a.buffer_id = 0;
	assert_int_equal(decode(&e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "ALLOC: buffer id 0"));
}

static void test_release_buffer(void **state)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Release r = ORTMK__RELEASE__INIT;
	char err[256];

	(void)state;
	e.version = IPC_PROTOCOL_VERSION;
	e.kind = ORTMK__KIND__RELEASE;
	e.body_case = ORTMK__ENVELOPE__BODY_RELEASE;
	e.release = &r;
	r.has_buffer_id = 1;
	r.buffer_id = 12;
	assert_int_equal(decode(&e, err, sizeof(err)), 0);
	r.buffer_id = 0;
	assert_int_equal(decode(&e, err, sizeof(err)), -EPROTO);
}

/* A RUN binding or RESULT output in a device buffer. */
static void test_buffer_refs(void **state)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Result res = ORTMK__RESULT__INIT;
	Ortmk__TensorRef t = ORTMK__TENSOR_REF__INIT, *pt = &t;
	int64_t dims[2] = {2, 3};
	char err[256];

	(void)state;
	e.version = IPC_PROTOCOL_VERSION;
	e.kind = ORTMK__KIND__RESULT;
	e.body_case = ORTMK__ENVELOPE__BODY_RESULT;
	e.result = &res;
	res.run_id = 1;
	res.n_outputs = 1;
	res.outputs = &pt;
	t.dtype = 1;
	t.n_dims = 2;
	t.dims = dims;
	t.nbytes = 24;
	t.has_buffer_id = 1;
	t.buffer_id = 9;
	t.offset = 1 << 30;                   /* not a segment offset: unchecked here */
	assert_int_equal(decode(&e, err, sizeof(err)), 0);
	t.segment_id = 5;                     /* both */
	assert_int_equal(decode(&e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "device buffer 9 with segment 5"));
	t.segment_id = 0;
	t.nbytes = 20;                        /* shape says 24 */
	assert_int_equal(decode(&e, err, sizeof(err)), -EPROTO);
	t.nbytes = 24;
	t.dtype = 8;                          /* strings never live on a device */
	assert_int_equal(decode(&e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "only numeric tensors"));
	t.dtype = 1;
	t.offset = IPC_MAX_DEVICE_BYTES;
	assert_int_equal(decode(&e, err, sizeof(err)), -EPROTO);
	assert_non_null(strstr(err, "out of range"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy_valid),
		cmocka_unit_test(test_copy_ranges),
		cmocka_unit_test(test_copy_sides),
		cmocka_unit_test(test_copy_fence),
		cmocka_unit_test(test_copy_garbled),
		cmocka_unit_test(test_alloc),
		cmocka_unit_test(test_release_buffer),
		cmocka_unit_test(test_buffer_refs),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
