/*
 * cpu_test_util.c: the NodeProto builder, the one-node run harness and the
 * .npy fixture reader the CPU kernel unit tests share (see
 * cpu_test_util.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu_test_util.h"

/* ---- NodeProto builder ---- */

void tn(tnode *t, const char *op, int n_in, int n_out)
{
	Onnx__NodeProto init = ONNX__NODE_PROTO__INIT;

	assert_true(n_in >= 0 && n_in <= TN_MAXIN && n_out >= 0 && n_out <= TN_MAXOUT);
	memset(t, 0, sizeof(*t));
	t->p = init;
	t->p.op_type = (char *)op;
	t->p.name = "t";
	for (int i = 0; i < n_in + n_out; i++)
		snprintf(t->names[i], sizeof(t->names[i]), "%c%d", i < n_in ? 'i' : 'o', i % 1000);
	for (int i = 0; i < n_in; i++)
		t->in[i] = t->names[i];
	for (int i = 0; i < n_out; i++)
		t->out[i] = t->names[n_in + i];
	t->p.n_input = (size_t)n_in;
	t->p.input = t->in;
	t->p.n_output = (size_t)n_out;
	t->p.output = t->out;
	t->p.attribute = t->attrp;
}

Onnx__AttributeProto *tn_attr(tnode *t, const char *name, Onnx__AttributeProto__AttributeType type)
{
	Onnx__AttributeProto init = ONNX__ATTRIBUTE_PROTO__INIT;
	size_t k = t->p.n_attribute++;

	assert_true(k < TN_MAXA);
	t->attr[k] = init;
	t->attr[k].name = (char *)name;
	t->attr[k].has_type = 1;
	t->attr[k].type = type;
	t->attrp[k] = &t->attr[k];
	return &t->attr[k];
}

void tn_int(tnode *t, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);

	a->has_i = 1;
	a->i = v;
}

void tn_float(tnode *t, const char *name, float v)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);

	a->has_f = 1;
	a->f = v;
}

void tn_ints(tnode *t, const char *name, const int64_t *v, size_t n)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
	int64_t *store = t->ints[t->p.n_attribute - 1];

	assert_true(n <= TN_MAXLIST);
	memcpy(store, v, n * sizeof(int64_t));
	a->n_ints = n;
	a->ints = store;
}

void tn_floats(tnode *t, const char *name, const float *v, size_t n)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
	float *store = t->floats[t->p.n_attribute - 1];

	assert_true(n <= TN_MAXLIST);
	memcpy(store, v, n * sizeof(float));
	a->n_floats = n;
	a->floats = store;
}

void tn_str(tnode *t, const char *name, const char *s)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);

	a->has_s = 1;
	a->s.data = (uint8_t *)s;
	a->s.len = strlen(s);
}

void tn_strs(tnode *t, const char *name, const char *const *s, size_t n)
{
	Onnx__AttributeProto *a = tn_attr(t, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS);
	ProtobufCBinaryData *store = t->strs[t->p.n_attribute - 1];

	assert_true(n <= TN_MAXLIST);
	for (size_t i = 0; i < n; i++) {
		store[i].data = (uint8_t *)s[i];
		store[i].len = strlen(s[i]);
	}
	a->n_strings = n;
	a->strings = store;
}

void tn_skip(tnode *t, int i)
{
	t->in[i] = "";
}

/* ---- running one node ---- */

int run(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int n_out,
	cpu_tensor *out, char *err)
{
	return run_pool(t, opset, n_in, in, n_out, out, NULL, 1, err);
}

int run_pool(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int n_out,
	     cpu_tensor *out, struct cpu_pool *pool, int threads, char *err)
{
	const cpu_tensor *planned[TN_MAXOUT] = {0};
	int heap[TN_MAXOUT] = {0}, rc;
	cpu_node node;

	assert_true(n_out >= 0 && n_out <= TN_MAXOUT);
	memset(out, 0, sizeof(*out) * (size_t)n_out);
	rc = cpu_node_init(&node, TEST_LOAD, NULL, &t->p, opset, NULL, n_in,
			   n_out, err, ERRLEN);
	if (rc)
		return rc;
	rc = cpu_node_run(&node, &(cpu_run_env){.pool = pool, .threads = threads}, in, planned, out,
			  heap, err, ERRLEN);
	/* with nothing planned, every output the kernel wrote is its own */
	for (int i = 0; rc == 0 && i < n_out; i++)
		assert_true(heap[i] || !out[i].data);
	cpu_node_fini(&node);
	return rc;
}

void run_ok(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int n_out,
	    cpu_tensor *out)
{
	char err[ERRLEN];
	int rc = run(t, opset, n_in, in, n_out, out, err);

	if (rc)
		fail_msg("status %d: %s", rc, err);
}

void free_outs(cpu_tensor *out, int n)
{
	for (int i = 0; i < n; i++)
		free(out[i].data);
}

void expect_out(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int k,
		int32_t dt, int rank, const int64_t *dims, const double *want, double tol)
{
	cpu_tensor out[TN_MAXOUT];
	char err[ERRLEN];
	int n_out = (int)t->p.n_output;
	int rc;

	assert_true(k >= 0 && k < n_out);
	rc = run(t, opset, n_in, in, n_out, out, err);
	if (rc)
		fail_msg("%s: status %d: %s", t->p.op_type, rc, err);
	assert_int_equal(out[k].dtype, dt);
	assert_int_equal(out[k].rank, rank);
	for (int d = 0; d < rank; d++)
		assert_int_equal(out[k].dims[d], dims[d]);
	for (int64_t i = 0; i < cpu_numel(&out[k]); i++) {
		double g = cpu_get_f64(dt, out[k].data, i);

		if (!(fabs(g - want[i]) <= tol * (1.0 + fabs(want[i]))) &&
		    !(isnan(g) && isnan(want[i])))
			fail_msg("%s output %d element %lld: got %.9g, want %.9g", t->p.op_type, k,
				 (long long)i, g, want[i]);
	}
	free_outs(out, n_out);
}

void expect(tnode *t, int64_t opset, int n_in, const cpu_tensor **in, int32_t dt,
	    int rank, const int64_t *dims, const double *want, double tol)
{
	expect_out(t, opset, n_in, in, 0, dt, rank, dims, want, tol);
}

void expect_error(tnode *t, int64_t opset, int n_in, const cpu_tensor **in,
		  int want_rc, const char *needle)
{
	cpu_tensor out[TN_MAXOUT];
	char err[ERRLEN] = "";
	int n_out = (int)t->p.n_output;
	int rc = run(t, opset, n_in, in, n_out, out, err);

	if (rc != want_rc || !strstr(err, needle))
		fail_msg("want status %d with '%s', got %d: '%s'", want_rc, needle, rc, err);
	for (int i = 0; i < n_out; i++)
		assert_null(out[i].data);
}

/* ---- .npy fixtures ---- */

static int32_t npy_dtype(const char *d)
{
	static const struct { const char *s; int32_t dt; } map[] = {
		{"<f4", CPU_FLOAT}, {"<f8", CPU_DOUBLE}, {"<f2", CPU_FLOAT16}, {"<i4", CPU_INT32},
		{"<i8", CPU_INT64}, {"|i1", CPU_INT8}, {"|u1", CPU_UINT8}, {"|b1", CPU_BOOL},
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strncmp(d, map[i].s, 3))
			return map[i].dt;
	return CPU_UNDEFINED;
}

/* Minimal .npy (v1/v2, C order) reader for tests/data/ops/<cs>.<name>.npy;
 * the data is malloc'ed. */
cpu_tensor load(const char *cs, const char *name)
{
	char path[512], *hdr, *p;
	unsigned char pre[12];
	const char *dir = getenv("TEST_DATA_DIR");
	size_t hlen;
	cpu_tensor t;
	FILE *f;

	snprintf(path, sizeof(path), "%s/ops/%s.%s.npy", dir ? dir : "tests/data", cs, name);
	f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s", path);
	assert_int_equal(fread(pre, 1, 10, f), 10);
	assert_memory_equal(pre, "\x93NUMPY", 6);
	hlen = pre[8] | (size_t)pre[9] << 8;
	if (pre[6] >= 2) {
		assert_int_equal(fread(pre + 10, 1, 2, f), 2);
		hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
	}
	hdr = calloc(1, hlen + 1);
	assert_non_null(hdr);
	assert_int_equal(fread(hdr, 1, hlen, f), hlen);
	assert_non_null(strstr(hdr, "'fortran_order': False"));
	memset(&t, 0, sizeof(t));
	t.dtype = npy_dtype(strstr(hdr, "'descr': '") + 10);
	assert_int_not_equal(t.dtype, CPU_UNDEFINED);
	p = strstr(hdr, "'shape': (") + 10;
	while (*p != ')') {
		t.dims[t.rank++] = strtoll(p, &p, 10);
		while (*p == ',' || *p == ' ')
			p++;
	}
	t.nbytes = (size_t)cpu_numel(&t) * cpu_dtype_size(t.dtype);
	t.data = malloc(t.nbytes + 1);
	assert_non_null(t.data);
	assert_int_equal(fread(t.data, 1, t.nbytes, f), t.nbytes);
	free(hdr);
	fclose(f);
	return t;
}

void expect_close(const cpu_tensor *got, const cpu_tensor *want, double tol)
{
	int64_t n = cpu_numel(want);
	assert_non_null(got->data);
	assert_int_equal(got->dtype, want->dtype);
	assert_int_equal(got->rank, want->rank);
	for (int d = 0; d < want->rank; d++)
		assert_int_equal(got->dims[d], want->dims[d]);
	for (int64_t i = 0; i < n; i++) {
		double g = cpu_get_f64(got->dtype, got->data, i);
		double w = cpu_get_f64(want->dtype, want->data, i);
		if (!(fabs(g - w) <= tol * (1.0 + fabs(w))))
			fail_msg("element %lld: got %.8g, want %.8g", (long long)i, g, w);
	}
}

void check_fixture(tnode *t, int64_t opset, const char *cs, const char *const *ins,
		   int n_in, const char *const *outs, int n_out, double tol)
{
	cpu_tensor in[TN_MAXIN], out[TN_MAXOUT], want;
	const cpu_tensor *inp[TN_MAXIN];
	char err[ERRLEN];
	int rc;
	for (int i = 0; i < n_in; i++) {
		if (ins[i])
			in[i] = load(cs, ins[i]);
		inp[i] = ins[i] ? &in[i] : NULL;
	}
	rc = run(t, opset, n_in, inp, n_out, out, err);
	if (rc)
		fail_msg("%s: status %d: %s", cs, rc, err);
	for (int j = 0; j < n_out; j++) {
		if (!outs[j])
			continue;
		want = load(cs, outs[j]);
		expect_close(&out[j], &want, tol);
		free(want.data);
	}
	free_outs(out, n_out);
	for (int i = 0; i < n_in; i++)
		if (ins[i])
			free(in[i].data);
}
