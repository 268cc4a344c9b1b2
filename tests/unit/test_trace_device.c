/*
 * test_trace_device: what the trace tap records of the device-memory
 * messages: a COPY's ops counted by direction with their bytes and the
 * fence it signals, a RESULT's uploads and downloads, device-buffer tensor
 * references; and the tap's own encoder still writes exactly the bytes
 * protobuf-c would for those new fields.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "envelope.h"
#include "trace_record.h"

static void encodes_like_protobuf_c(const Ortmk__Trace__Message *m)
{
	uint8_t mine[4096], ref[4096];
	size_t n = ortmk__trace__message__pack(m, ref);

	assert_int_equal(ipc_trace_encode_message(m, mine, sizeof(mine)), n);
	assert_memory_equal(mine, ref, n);
}

static void test_copy_record(void **state)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Copy c = ORTMK__COPY__INIT;
	Ortmk__CopyOp ops[3], *pops[3] = {&ops[0], &ops[1], &ops[2]};
	Ortmk__Loc seg = ORTMK__LOC__INIT, buf = ORTMK__LOC__INIT;
	Ortmk__FenceRef f = ORTMK__FENCE_REF__INIT;
	Ortmk__Trace__Message m = ORTMK__TRACE__MESSAGE__INIT;
	ipc_trace_scratch s;

	(void)state;
	seg.has_segment_id = 1;
	seg.segment_id = 4;
	buf.has_buffer_id = 1;
	buf.buffer_id = 9;
	for (int i = 0; i < 3; i++)
		ortmk__copy_op__init(&ops[i]);
	ops[0].src = &seg;                    /* h2d */
	ops[0].dst = &buf;
	ops[0].nbytes = 1000;
	ops[1].src = &buf;                    /* d2h */
	ops[1].dst = &seg;
	ops[1].nbytes = 300;
	ops[2].src = &buf;                    /* d2d */
	ops[2].dst = &buf;
	ops[2].nbytes = 1u << 20;
	f.segment_id = 2;
	f.offset = 48;
	f.value = 7;
	c.n_ops = 3;
	c.ops = pops;
	c.signal = &f;
	e.kind = ORTMK__KIND__COPY;
	e.body_case = ORTMK__ENVELOPE__BODY_COPY;
	e.copy = &c;
	m.t_ns = 1;
	m.dir = ORTMK__TRACE__DIRECTION__TO_PROVIDER;
	ipc_trace_summarize(&s, &m, &e);
	assert_int_equal(m.h2d, 1);
	assert_int_equal(m.h2d_bytes, 1000);
	assert_int_equal(m.d2h, 1);
	assert_int_equal(m.d2h_bytes, 300);
	assert_int_equal(m.d2d, 1);
	assert_int_equal(m.d2d_bytes, 1u << 20);
	assert_int_equal(m.n_fences, 1);
	assert_int_equal(m.fences[0]->id, 2 * 65536 + 3);
	assert_int_equal(m.fences[0]->value, 7);
	assert_true(m.fences[0]->signal);
	assert_non_null(strstr(m.note, "3 ops"));
	encodes_like_protobuf_c(&m);
	ipc_trace_scratch_free(&s, &m);
}

static void test_result_record(void **state)
{
	Ortmk__Envelope e = ORTMK__ENVELOPE__INIT;
	Ortmk__Result r = ORTMK__RESULT__INIT;
	Ortmk__TensorRef t = ORTMK__TENSOR_REF__INIT, *pt = &t;
	Ortmk__Trace__Message m = ORTMK__TRACE__MESSAGE__INIT;
	int64_t dims[2] = {1, 300};
	ipc_trace_scratch s;

	(void)state;
	t.dtype = 1;
	t.n_dims = 2;
	t.dims = dims;
	t.nbytes = 1200;
	t.has_buffer_id = 1;
	t.buffer_id = UINT64_C(1) << 33;
	r.run_id = 5;
	r.n_outputs = 1;
	r.outputs = &pt;
	r.has_uploads = r.has_upload_bytes = r.has_downloads = r.has_download_bytes = 1;
	r.uploads = 2;
	r.upload_bytes = 4096;
	r.downloads = 1;
	r.download_bytes = 1200;
	r.has_compute_ns = 1;
	r.compute_ns = 500000;
	e.kind = ORTMK__KIND__RESULT;
	e.body_case = ORTMK__ENVELOPE__BODY_RESULT;
	e.result = &r;
	m.t_ns = 2;
	m.dir = ORTMK__TRACE__DIRECTION__FROM_PROVIDER;
	ipc_trace_summarize(&s, &m, &e);
	assert_int_equal(m.h2d, 2);
	assert_int_equal(m.h2d_bytes, 4096);
	assert_int_equal(m.d2h, 1);
	assert_int_equal(m.d2h_bytes, 1200);
	assert_false(m.has_d2d);
	assert_int_equal(m.n_tensors, 1);
	assert_true(m.tensors[0]->has_buffer);
	assert_int_equal(m.tensors[0]->buffer, UINT64_C(1) << 33);
	assert_non_null(strstr(m.note, "uploads 2"));
	encodes_like_protobuf_c(&m);
	ipc_trace_scratch_free(&s, &m);
	/* A run without transfers records none. */
	memset(&m, 0, sizeof(m));
	ortmk__trace__message__init(&m);
	r.uploads = r.downloads = 0;
	r.upload_bytes = r.download_bytes = 0;
	m.t_ns = 3;
	m.dir = ORTMK__TRACE__DIRECTION__FROM_PROVIDER;
	ipc_trace_summarize(&s, &m, &e);
	assert_false(m.has_h2d || m.has_d2h);
	encodes_like_protobuf_c(&m);
	ipc_trace_scratch_free(&s, &m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy_record),
		cmocka_unit_test(test_result_record),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
